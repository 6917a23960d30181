// SPDX-License-Identifier: MIT
// An RC link's sizes and limits: what configures a link without needing the verbs headers.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>

namespace smc::rdma
{

inline constexpr std::size_t kWrBufferSize = 48;    // Linux SMC_WR_BUF_SIZE
inline constexpr std::size_t kMessageSize = 44;     // LLC and CDC messages (SMC_WR_TX_SIZE)
inline constexpr std::size_t kV2MessageSize = 8192; // SMC-Rv2's longest (SMC_WR_BUF_V2_SIZE)
using ControlMessage = std::array<std::byte, kMessageSize>;

struct LinkConfig {
    std::uint32_t maxSendWr = 16; // Linux sysctl smcr_max_send_wr
    std::uint32_t maxRecvWr = 48; // Linux sysctl smcr_max_recv_wr
    std::uint8_t port = 1;
    int gidIndex = -1; // -1: the port's RoCE v2 IPv4-mapped GID
    // The longest message either end sends: kMessageSize, or kV2MessageSize on an SMC-Rv2
    // link (ADD_LINK with its rkeys). Every slot takes that much: a message longer than the
    // peer's receive slot fails there and takes the link down.
    std::size_t maxMessage = kMessageSize;
};

} // namespace smc::rdma
