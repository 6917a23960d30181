// SPDX-License-Identifier: MIT
// InprocChannel: two connected LinkChannel ends in one process, with fault injection for tests.
#pragma once

#include <atomic>
#include <chrono>
#include <deque>
#include <functional>
#include <memory>
#include <span>
#include <utility>
#include <vector>

#include "base/executor.h"
#include "base/mutex.h"
#include "smc/transport/link_channel.h"

namespace smc
{

// Faults applied to the next messages an end sends (each counter is "how
// many of the next messages"; they combine).
struct Faults {
    std::atomic<int> drop{0};
    std::atomic<int> duplicate{0};
    std::atomic<int> corrupt{0}; // first byte replaced: an unknown LLC type
    std::atomic<int> delayMs{0}; // applies to every message while non-zero
};

class InprocChannel final : public LinkChannel
{
public:
    // A connected pair: what one end sends, the other receives, in order.
    // Each end delivers on a serial queue of `executor` (no thread of its own).
    static std::pair<std::unique_ptr<InprocChannel>, std::unique_ptr<InprocChannel>>
    pair(Executor& executor = Executor::shared());
    ~InprocChannel() override;

    void start(Callbacks callbacks) override;
    // The longest message this end sends or takes (kShortMessages unless set, before start):
    // a longer send is message_size, and one longer than the peer takes fails the link, as
    // an RC receive into too small a buffer does.
    void setMaxMessage(std::size_t bytes) noexcept { maxMessage_ = bytes; }
    Result<void> send(std::span<const std::byte> message) override;
    Result<void> write(const void* src, std::size_t length, std::uint32_t lkey,
                       std::uint64_t remoteAddr, std::uint32_t rkey) override;
    // send(), then `landed` is told at once, unless completions are held (below).
    Result<void> sendAfterWrites(std::span<const std::byte> message, Landed landed) override;
    void shutdown() noexcept override;
    void close() noexcept override; // the peer gets what arrived before its down
    bool isUp() const noexcept override;

    // What plays the NIC for write(): lands `n` bytes at `addr` if `rkey`
    // covers them, else returns false (a remote access error: as on RC, the
    // write fails with permission_denied and the link goes down).
    using RemoteWriter =
        std::function<bool(std::uint32_t rkey, std::uint64_t addr, const void* src, std::size_t n)>;
    void setRemoteWriter(RemoteWriter writer) { writer_ = std::move(writer); }

    Faults& faults() noexcept { return faults_; }
    // While held, sendAfterWrites keeps its completions, as an RDMA link has them later:
    // releaseCompletions() tells them (landed while the link is up), the link going down
    // tells them "not landed" on the delivery queue, as a flush does.
    void holdCompletions(bool on) noexcept;
    void releaseCompletions();
    std::uint64_t delivered() const noexcept { return delivered_.load(); }
    // RDMA WRITEs that reached the NIC (landed or refused).
    std::uint64_t writes() const noexcept { return writes_.load(); }

private:
    struct Wire;
    struct Item {
        std::chrono::steady_clock::time_point due;
        std::vector<std::byte> bytes;
    };

    explicit InprocChannel(Executor& executor) : delivery_(executor) {}
    void enqueue(std::vector<std::byte> bytes, std::chrono::milliseconds delay);
    // The link is down. `afterArrived`: the peer's end went away (destroyed), so what had
    // arrived is delivered first, as completions already polled from a CQ are; a link that
    // fails (shutdown) loses what it queued.
    void markDown(bool afterArrived = false) noexcept;
    // Both ends down; `orderly` (close): the peer gets what arrived first.
    void takeDown(bool orderly) noexcept;
    void deliver();
    void tellHeld(bool landed); // every held completion, told once

    std::shared_ptr<Wire> wire_;
    std::atomic<std::size_t> maxMessage_{kShortMessages};
    Faults faults_;
    Callbacks callbacks_; // set once by start(), before the first delivery
    RemoteWriter writer_;
    Mutex mutex_;
    std::deque<Item> queue_ SMC_GUARDED_BY(mutex_); // ordered by due time
    bool started_ SMC_GUARDED_BY(mutex_) = false;
    bool downPending_ SMC_GUARDED_BY(mutex_) = false;
    bool downReported_ SMC_GUARDED_BY(mutex_) = false;
    std::size_t arrivedBeforeDown_ SMC_GUARDED_BY(mutex_) = 0; // to deliver before the down
    bool holding_ SMC_GUARDED_BY(mutex_) = false;
    std::vector<Landed> held_ SMC_GUARDED_BY(mutex_);
    std::atomic<std::uint64_t> delivered_{0};
    std::atomic<std::uint64_t> writes_{0};
    SerialQueue delivery_; // last: closed first, while the rest still exists
};

} // namespace smc
