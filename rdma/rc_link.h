// SPDX-License-Identifier: MIT
// RcLink: one SMC-R link's RC queue pair with send/recv slots for its control messages: 48 bytes
// for the 44-byte ones, 8 KiB on an SMC-Rv2 link.
#pragma once

#include <array>
#include <atomic>
#include <chrono>
#include <cstddef>
#include <functional>
#include <memory>
#include <span>
#include <vector>

#include "base/executor.h"
#include "base/mutex.h"
#include "rdma/link_config.h"
#include "rdma/verbs.h"

namespace smc::rdma
{

// Linux's rule when a link's queue pair or buffers cannot be allocated:
// halve both counts and retry, giving up once either would drop below the
// default (16 send, 48 receive). Returns false when it is time to give up.
constexpr bool halveWrCounts(std::uint32_t& send, std::uint32_t& recv) noexcept
{
    if (send / 2 < 16 || recv / 2 < 48)
        return false;
    send /= 2;
    recv /= 2;
    return true;
}

// Where an RDMA WRITE goes: a peer RMB's rtoken on this link.
struct RemoteBuffer {
    std::uint64_t addr = 0;
    std::uint32_t rkey = 0;
};

// Completions are handled on the executor's epoll thread, which every link
// on that executor shares: the link watches its completion channel's fd
// (Executor::watch), and each wakeup takes the event, re-arms the CQ and
// polls it empty.
class RcLink
{
public:
    // Both run on the executor's epoll thread (onLinkDown also on a sender's
    // thread whose post failed). They must not block, and in particular must
    // not send: that may wait for a send slot, and only this thread frees one.
    struct Handlers {
        // A control message arrived, kMessageSize bytes or more (the receive buffer is
        // re-posted after the handler returns).
        std::function<void(std::span<const std::byte>)> onMessage;
        // The link failed (QP error, flushed or failed completion, the device
        // gone). Called once.
        std::function<void(std::error_code)> onLinkDown;
    };

    static Result<std::unique_ptr<RcLink>> create(const Context& context,
                                                  const ProtectionDomain& pd, LinkConfig config,
                                                  Handlers handlers,
                                                  Executor& executor = Executor::shared());
    // Stops watching first (waits for a running completion callback, unless
    // called from one), then the QP, buffers, CQ and channel go.
    ~RcLink();
    RcLink(const RcLink&) = delete;
    RcLink& operator=(const RcLink&) = delete;

    Endpoint local() const noexcept { return local_; }
    // INIT, post every receive buffer, then RTR and RTS towards `peer`.
    Result<void> connect(const Endpoint& peer);

    // Send one control message of at most LinkConfig::maxMessage bytes (else
    // message_size); waits up to `slotWait` for a free send slot.
    Result<void> send(std::span<const std::byte> message, std::chrono::milliseconds slotWait);
    // RDMA WRITE `length` bytes at `src` (registered under `lkey`) to `dst`;
    // returns the write's completion status.
    Result<void> rdmaWrite(const void* src, std::size_t length, std::uint32_t lkey,
                           RemoteBuffer dst, std::chrono::milliseconds wait);
    // An RDMA WRITE posted, not waited for (its completion frees its slot), so that a message
    // can go right behind it: sendThen() sends one without waiting and tells `done` its
    // completion, which on RC comes after those of every WRITE posted before it, so `true`
    // means their bytes landed too. `done` runs exactly once unless the post fails: on the
    // epoll thread, or on the destroying thread (false) for a send still out when the link
    // goes; it must not block. Both block only for a free slot.
    using Done = std::function<void(bool landed)>;
    Result<void> postWrite(const void* src, std::size_t length, std::uint32_t lkey,
                           RemoteBuffer dst, std::chrono::milliseconds slotWait);
    Result<void> sendThen(std::span<const std::byte> message, std::chrono::milliseconds slotWait,
                          Done done);

    // Move the QP to ERR: outstanding work flushes and the link goes down.
    Result<void> forceError() noexcept;

    bool isDown() const noexcept { return down_.load(std::memory_order_acquire); }
    std::uint32_t sendSlots() const noexcept { return sendSlots_; }
    std::uint32_t recvSlots() const noexcept { return recvSlots_; }
    std::uint32_t freeSendSlots() const;
    // Waits up to `wait` until every send posted has completed (or the link is down), so
    // that what was sent last reaches the peer before the QP goes to ERR.
    void awaitSends(std::chrono::milliseconds wait) noexcept;
    const QueuePair& queuePair() const noexcept { return qp_; }

private:
    RcLink() = default;

    struct Slot {
        bool busy = false;
        bool waited = false; // a caller waits for this slot's completion
        bool completed = false;
        std::error_code status;
        Done done; // sendThen's: told the completion, which frees the slot
    };

    Result<std::uint32_t> takeSlot(std::chrono::milliseconds wait);
    // Takes a slot, signals `wr` (a SEND carries `message` in the slot's buffer) and posts
    // it; `waited`: its completion is kept for awaitSlot(), which frees the slot (after a
    // timeout the completion frees it); `done`: told the completion. A failed post takes the
    // link down.
    Result<std::uint32_t> post(ibv_send_wr& wr, bool waited, std::chrono::milliseconds slotWait,
                               std::span<const std::byte> message, Done done = {});
    Result<std::uint32_t> postSend(std::span<const std::byte> message, bool waited,
                                   std::chrono::milliseconds slotWait, Done done = {});
    Result<std::uint32_t> postWrite(const void* src, std::size_t length, std::uint32_t lkey,
                                    RemoteBuffer dst, bool waited,
                                    std::chrono::milliseconds slotWait);
    Result<void> awaitSlot(std::uint32_t slot, std::chrono::milliseconds wait);
    // What the public calls return of a post: an unwaited one's error only (its completion
    // frees the slot), a waited one's completion.
    static Result<void> posted(Result<std::uint32_t> slot);
    Result<void> awaited(Result<std::uint32_t> slot, std::chrono::milliseconds wait);
    Result<void> postRecv(std::uint32_t index) noexcept;
    void onCompletionEvent(); // one wakeup of the epoll thread
    void handle(const ibv_wc& wc);
    void linkDown(std::error_code why);

    // Declaration order is teardown order, reversed: the QP goes first, then
    // the memory its posted receives point into, then the CQ and channel.
    ProtectionDomain pd_;
    CompletionChannel channel_;
    CompletionQueue cq_;
    LinkConfig config_;
    Handlers handlers_;
    Endpoint local_;
    std::uint32_t sendSlots_ = 0;
    std::uint32_t recvSlots_ = 0;
    std::size_t slotBytes_ = kWrBufferSize; // each send and receive slot's buffer

    std::unique_ptr<std::byte[]> sendBuffers_;
    std::unique_ptr<std::byte[]> recvBuffers_;
    MemoryRegion sendMr_;
    MemoryRegion recvMr_;
    QueuePair qp_;

    mutable Mutex mutex_;
    ConditionVariable slotFreed_;
    std::vector<Slot> slots_ SMC_GUARDED_BY(mutex_);

    std::atomic<bool> down_{false};
    Executor* executor_ = nullptr;
    // The completion channel's watch; atomic: the callback may read it
    // before create() has stored it.
    std::atomic<int> watchId_{-1};
};

} // namespace smc::rdma
