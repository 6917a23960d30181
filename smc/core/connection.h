// SPDX-License-Identifier: MIT
// Connection: one SMC-R connection's buffers, the link it rides and the peer RMB it writes to.
#pragma once

#include <atomic>
#include <cstdint>
#include <memory>
#include <optional>

#include "base/mutex.h"
#include "pool/buffer_desc.h"
#include "smc/llc/rtoken_table.h"

namespace smc
{

class LinkGroup;

// Shared between the group and the application: the object outlives close()
// and the group's end, so a handle kept too long gives an error, never a
// dangling pointer. Its buffers are the pool's again once it is closed or
// ended: rmb and sndbuf must not be touched then.
class Connection
{
public:
    enum class State : std::uint8_t {
        Open,
        Closed, // closeConnection() ran
        Ended,  // the group ended (or was destroyed) first
    };

    const std::uint32_t token; // alert token, unique in the group
    const BufferRef rmb;
    const BufferRef sndbuf;

    // The slot of the link it rides; failover changes it at any time.
    unsigned link() const noexcept { return link_.load(std::memory_order_acquire); }
    // Its row in the group's rtoken table, once the handshake completed.
    std::optional<unsigned> peerRmb() const
    {
        ReadLocker lock(use_);
        return peer_ ? std::optional<unsigned>(peer_->row.index) : std::nullopt;
    }
    State state() const
    {
        ReadLocker lock(use_);
        return state_;
    }

    Connection(const LinkGroup* group, std::uint32_t t, BufferRef r, BufferRef s, unsigned slot)
        : token(t), rmb(r), sndbuf(s), group_(group), link_(slot)
    {
    }

private:
    friend class ConnectionTable;
    friend class LinkGroup;

    // The peer's RMB as CLC told it: a row of the rtoken table (with the
    // row's generation, so a row the peer deleted and someone reused is not
    // written through) and its size.
    struct PeerRmb {
        RtokenTable::Row row;
        std::size_t bytes = 0;
    };

    const LinkGroup* const group_; // identity only: which group it belongs to
    std::atomic<unsigned> link_;
    // Writes hold it shared while they touch the buffers; close and the
    // group's end take it exclusively to change state, so no write is in
    // flight once the buffers go back to the pool.
    mutable SharedMutex use_;
    State state_ SMC_GUARDED_BY(use_) = State::Open;
    std::optional<PeerRmb> peer_ SMC_GUARDED_BY(use_);
};

using ConnectionPtr = std::shared_ptr<Connection>;

} // namespace smc
