// SPDX-License-Identifier: MIT
// CLC messages over the TCP socket: one message read or written whole, within a deadline.
#pragma once

#include <algorithm>
#include <array>

#include "smc/clc/clc_messages.h"
#include "smc/net/tcp.h"

namespace smc::net
{

// How much of a stream firstMessageQueued looks at: the handshake's messages are a few hundred
// bytes, so one look usually sees a whole one.
inline constexpr std::size_t kClcLook = 512;

// The stream's first bytes (up to a CLC header) as firstMessageQueued saw them, so that the
// reads that follow it at once need no look of their own. Stale once anything reads the socket.
struct ClcHead {
    std::array<std::byte, clc::kHeaderSize> bytes{};
    std::size_t queued = 0; // all the look saw queued, up to kClcLook
    std::size_t size() const noexcept { return std::min(queued, bytes.size()); } // of `bytes`
};
// Whether the look saw one whole CLC message and nothing queued behind it.
bool onlyOneMessage(const ClcHead& seen) noexcept;

// True once the stream's first bytes can be a CLC message (the eyecatcher and a known type),
// false as soon as they cannot: then nothing was consumed, and the bytes are the
// application's (a peer without SMC). Errors: timed_out (fewer than the bytes that decide
// came), connection_reset (the peer closed first), recv's errno. Blocks up to the deadline.
// `seen`: the stream's head as firstMessageQueued saw it just before (nothing read since).
Result<bool> startsWithClc(int fd, Deadline deadline, const ClcHead* seen = nullptr);

// Whether the stream's first CLC message is all queued on `fd`, or the stream shows that a
// handshake would not wait for it (it is not CLC, its header is malformed, the peer ended it,
// an error): then readClc takes it at once. If not, raises SO_RCVLOWAT to what is missing, so
// that the socket polls readable (level-triggered, no spinning) only once it is there or the
// peer ends; a true answer puts SO_RCVLOWAT back. For waiting without a thread. Never blocks.
// `raised`: whether SO_RCVLOWAT is raised already (by an earlier false answer); the answer
// leaves it saying whether it is now, so a level never raised is never lowered. A true answer
// leaves in `seen` (if given) what it saw of the stream.
bool firstMessageQueued(int fd, bool& raised, ClcHead* seen = nullptr) noexcept;
// SO_RCVLOWAT back to its default (1): for a socket that firstMessageQueued left raised and
// whose next reader is not firstMessageQueued (a blocking readClc, or the application's).
void lowerLowWater(int fd) noexcept;

// Reads exactly one CLC message (of whatever type: the caller checks it is the expected
// one or a DECLINE), so the stream stays aligned for a fallback to TCP after it. A peer
// that stops or closes partway is waited for asleep, up to the deadline, or seen at once.
// Errors: timed_out, connection_reset (EOF, also after part of a message), ClcErrc (not CLC, or
// malformed: then as many bytes as its length field says, at least the header, are consumed),
// recv's errno. Blocks up to the deadline. `seen`: as startsWithClc's.
Result<clc::Message> readClc(int fd, Deadline deadline, const ClcHead* seen = nullptr);

// Discards the peer's first CLC message when it was declined unread (a listener past its
// handshake limit), a step at a time on a non-blocking socket: true once it is gone (or the
// stream ended, taking any part of a header with it, or does not start with CLC: then
// nothing is consumed, the bytes are the application's), false while more of it has to
// come. While part of a header is queued the socket polls readable only once the rest or
// the end arrives (SO_RCVLOWAT), so nobody spins on it. `left`: the bytes of it still to go,
// kClcSizeUnknown before its header is complete. Errors: recv's errno. Never blocks.
inline constexpr std::size_t kClcSizeUnknown = static_cast<std::size_t>(-1);
Result<bool> skipClc(int fd, std::size_t& left);

// Writes one message whole. Errors: ClcErrc (encode), timed_out, broken_pipe and send's
// other errnos. Blocks up to the deadline for socket buffer room.
Result<void> writeClc(int fd, const clc::Message& message, Deadline deadline);

// Writes all of `bytes` on a non-blocking socket (MSG_NOSIGNAL). Same errors, same wait.
Result<void> writeAll(int fd, std::span<const std::byte> bytes, Deadline deadline);

} // namespace smc::net
