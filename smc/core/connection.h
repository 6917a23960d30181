// SPDX-License-Identifier: MIT
// Connection: one SMC-R connection's buffers, the link it rides and the peer RMB it writes to.
#pragma once

#include <array>
#include <atomic>
#include <cstdint>
#include <deque>
#include <functional>
#include <memory>
#include <optional>
#include <span>

#include "base/mutex.h"
#include "pool/buffer_desc.h"
#include "smc/cdc/cdc_messages.h"
#include "smc/llc/llc_messages.h"
#include "smc/llc/rtoken_table.h"

namespace smc
{

class LinkGroup;

// What the owner of a connection hears from its group (LinkGroup::setConnectionEvents).
// Each runs on one of the group's threads with no group lock held (only a CDC parked before
// the cdc handler was set comes on the thread that sets it, in setConnectionEvents);
// `cdc` and `ended` must not block (a link's deliveries, and other groups' on the same
// threads, wait for them: a CDC owed goes out from a blocking task, since sendCdc() waits
// for a send slot); `moved` runs in the failover flow and may send (Linux smc_switch_conns).
// None may call setConnectionEvents() itself.
struct ConnectionEvents {
    // A CDC message for this connection (byte 0 0xFE, the alert token ours), as received:
    // at least 26 bytes, the length byte 44; the rest is not checked. One at a time, in
    // the order of each link.
    std::function<void(std::span<const std::byte>)> cdc;
    // Failover moved the connection to the link in `slot`: CDCs and writes go there now.
    std::function<void(unsigned slot)> moved;
    // The group ended the connection (state Ended): nothing more comes or goes.
    std::function<void()> ended;
};

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
    // Held while an event handler runs, so replacing them waits for it.
    // Mutable: the owner sets them through a const handle, as it writes.
    mutable Mutex eventsMutex_;
    mutable ConnectionEvents events_ SMC_GUARDED_BY(eventsMutex_);
    // The two newest CDCs that came before a cdc handler was set (the peer
    // may start before our side is ready), oldest first. CDCs are cumulative,
    // but a failover validation carries no cursors: with the one before it
    // kept too, a validation never hides the data CDC it followed.
    static constexpr std::size_t kParkedCdcs = 2;
    mutable std::deque<std::array<std::byte, cdc::kSmcrCdcSize>>
        parkedCdcs_ SMC_GUARDED_BY(eventsMutex_);
};

using ConnectionPtr = std::shared_ptr<Connection>;

} // namespace smc
