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

} // namespace smc::doorbell
