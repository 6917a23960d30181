// SPDX-License-Identifier: MIT
// A DMB's doorbell between processes: a Unix datagram socket pair, one end on each side.
#pragma once

#include <cstdint>

#include "base/result.h"
#include "base/unique_fd.h"

namespace smc::doorbell
{

// The owner of a DMB keeps `ear` (it polls and drains it) and hands `button` to the peer
// that may ring. Not an eventfd: its one open file description would be the peer's too, and
// the peer's F_SETFL could make our reads and writes of it block (file status flags live in
// the description). Here every call says MSG_DONTWAIT itself, and the peer never holds our
// end: it cannot read our rings, fill our end past its queue, or shut it down.
struct Pair {
    UniqueFd ear;
    UniqueFd button;
};

// Errors: socketpair's errno.
Result<Pair> make() noexcept;

// One ring. Never blocks: a full queue (the owner is ringing already) or an owner gone is
// ignored.
void ring(int button) noexcept;

// Takes the rings waiting at `ear`, at most kMaxDrain of them (the rest keep it readable);
// how many it took. Never blocks.
inline constexpr unsigned kMaxDrain = 256;
std::uint64_t drain(int ear) noexcept;

// Whether `fd` can be a button: a Unix datagram socket (what an owner's reply must carry).
bool isButton(int fd) noexcept;

// The other way, from the owner to whoever holds the button: a descriptor the button's holder
// may ring directly instead (a connection's ready socket, so that a peer's news wakes the
// application's poll with no thread of ours in between). offer() sends `fd` from `ear`;
// dropOffers() takes back (and closes) what nobody took, through the owner's own copy of the
// button; takeOffer() is the ringer's side: the first offer waiting, if it is a Unix stream
// socket (anything else is closed). None blocks. Errors of offer: sendmsg's errno.
Result<void> offer(int ear, int fd) noexcept;
void dropOffers(int button) noexcept;
UniqueFd takeOffer(int button) noexcept;

} // namespace smc::doorbell
