// SPDX-License-Identifier: MIT
// What a connection is and shows: its transport, a zero-copy receive, its smcss line.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <span>
#include <string>

#include "smc/clc/decline_code.h"

namespace smc
{

enum class Transport : std::uint8_t {
    SmcD, // cross-process loopback-ism: the peer's DMB mapped here
    SmcR, // RDMA over a link group's links (RoCE, or in-process links in tests)
    Tcp,  // plain TCP on the same socket: forced, or a fallback (Socket::fallbackReason)
    None, // no connection: a Socket moved from, or never connected
};
const char* toString(Transport transport) noexcept;

// What Socket::recvZeroCopy handed out, in stream order: view[0], view[1], then the first
// `copied` bytes of the caller's buffer. Nothing at all: the end of the stream.
struct RecvView {
    std::array<std::span<const std::byte>, 2> view{}; // in our receive ring (SMC-D)
    std::size_t copied = 0;
    std::size_t viewBytes() const noexcept { return view[0].size() + view[1].size(); }
    std::size_t size() const noexcept { return viewBytes() + copied; }
};

// One connection as `smcss` shows it.
struct ConnectionInfo {
    Transport transport = Transport::Tcp;
    std::uint8_t version = 0; // SMC: 1 or 2 (SMC-Rv1 or v2; SMC-D here is always v2)
    std::optional<clc::DeclineCode> fallback;
    std::string state; // ACTIVE, PEERCLOSEWAIT1, ..., CLOSED (Linux's names)
    std::string local;
    std::string peer;
    bool server = false;
    std::size_t rmbBytes = 0;     // our receive ring
    std::size_t peerRmbBytes = 0; // the peer's, where we write
    std::size_t sndbufBytes = 0;  // SMC-R: our send buffer (SMC-D has none)
    std::uint64_t dmbToken = 0;   // SMC-D: ours
    std::uint64_t peerDmbToken = 0;
    bool pulses = false;     // SMC-D: the peer wakes our descriptor itself (no thread of ours)
    std::uint32_t token = 0; // SMC-R: our alert token
    std::uint32_t peerToken = 0;
    std::uint8_t linkId = 0;        // SMC-R: the link it rides now
    std::uint16_t producerWrap = 0; // our producer cursor into the peer's ring
    std::uint32_t producerCount = 0;
    std::uint16_t consumerWrap = 0; // how far we consumed our ring
    std::uint32_t consumerCount = 0;
    std::uint64_t bytesSent = 0;
    std::uint64_t bytesReceived = 0;
};

} // namespace smc
