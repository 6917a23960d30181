// SPDX-License-Identifier: MIT
// The wire format of ShmIsm's attach exchange (one request, one reply, per connection).
#pragma once

#include <cstdint>
#include <string>

#include "smc/ism/ism_device.h"

namespace smc::shm
{

// Host byte order throughout: both ends are processes of one host.
inline constexpr std::uint32_t kMagic = 0x534d4349; // "SMCI"
inline constexpr std::uint16_t kVersion = 2;        // 2: the doorbell is a socket, not an eventfd

// Requester -> owner, on a fresh SOCK_SEQPACKET connection to the owner's socket.
struct AttachRequest {
    std::uint32_t magic = kMagic;
    std::uint16_t version = kVersion;
    std::uint16_t reserved = 0;
    std::uint64_t token = 0;
    std::uint64_t gid = 0;    // the requester's IsmGid: the owner checks it
    std::uint64_t gidExt = 0; // against its grant and SO_PEERCRED
};
static_assert(sizeof(AttachRequest) == 32);

enum class AttachStatus : std::uint16_t { Granted = 0, Refused = 1 };

// Owner -> requester. Granted: SCM_RIGHTS carries exactly two fds, the DMB's
// memfd first, then the button of its doorbell, which the requester rings to
// signal (a Unix datagram socket, doorbell.h). Refused: no fds and no reason (a
// refusal tells a guesser nothing, not even whether the token exists).
struct AttachReply {
    std::uint32_t magic = kMagic;
    std::uint16_t version = kVersion;
    AttachStatus status = AttachStatus::Refused;
    std::uint64_t token = 0;
    std::uint64_t size = 0; // the DMB's bytes = the memfd's size
};
static_assert(sizeof(AttachReply) == 24);

// The abstract socket name (leading NUL included) a device with `gid`
// listens on: "\0smc-core/ism/<gid hex>/<gidExt hex>".
std::string socketName(const IsmGid& gid);

} // namespace smc::shm
