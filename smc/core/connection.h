// SPDX-License-Identifier: MIT
// Connection: one SMC-R connection's buffers, the link it rides and the peer RMB it writes to.
#pragma once

#include <atomic>
#include <cstdint>
#include <optional>

#include "pool/buffer_desc.h"

namespace smc
{

class Connection
{
public:
    const std::uint32_t token; // alert token, unique in the group
    const BufferRef rmb;
    const BufferRef sndbuf;

    // The slot of the link it rides; failover changes it at any time.
    unsigned link() const noexcept { return link_.load(std::memory_order_acquire); }
    // Its row in the group's rtoken table, once the handshake completed.
    std::optional<unsigned> peerRmb() const noexcept
    {
        const int row = peerRmb_.load(std::memory_order_acquire);
        return row < 0 ? std::nullopt : std::optional<unsigned>(static_cast<unsigned>(row));
    }

    Connection(std::uint32_t t, BufferRef r, BufferRef s, unsigned slot)
        : token(t), rmb(r), sndbuf(s), link_(slot)
    {
    }

private:
    friend class ConnectionTable;
    friend class LinkGroup;
    std::atomic<unsigned> link_;
    std::atomic<int> peerRmb_{-1};
};

} // namespace smc
