// SPDX-License-Identifier: MIT
// InprocChannel: queues, deliveries on a serial queue per end, faults, link-down on both ends.
#include "smc/transport/inproc_channel.h"

#include <algorithm>
#include <utility>

namespace smc
{

struct InprocChannel::Wire {
    Mutex mutex;
    bool up SMC_GUARDED_BY(mutex) = true;
    InprocChannel* ends[2] SMC_GUARDED_BY(mutex) = {nullptr, nullptr};
};

std::pair<std::unique_ptr<InprocChannel>, std::unique_ptr<InprocChannel>>
InprocChannel::pair(Executor& executor)
{
    std::unique_ptr<InprocChannel> a(new InprocChannel(executor)), b(new InprocChannel(executor));
    auto wire = std::make_shared<Wire>();
    {
        MutexLocker lock(wire->mutex);
        wire->ends[0] = a.get();
        wire->ends[1] = b.get();
    }
    a->wire_ = b->wire_ = wire;
    return {std::move(a), std::move(b)};
}

InprocChannel::~InprocChannel()
{
    {
        MutexLocker lock(wire_->mutex);
        wire_->up = false;
        for (InprocChannel*& end : wire_->ends) {
            if (end == this)
                end = nullptr;
            else if (end != nullptr)
                end->markDown(true);
        }
    }
    delivery_.close(); // no delivery runs after this
    tellHeld(false);   // what the link going down had not told yet
}

void InprocChannel::start(Callbacks callbacks)
{
    callbacks_ = std::move(callbacks);
    {
        MutexLocker lock(mutex_);
        started_ = true;
    }
    delivery_.post([this] { deliver(); });
}

bool InprocChannel::isUp() const noexcept
{
    MutexLocker lock(wire_->mutex);
    return wire_->up;
}

Result<void> InprocChannel::send(std::span<const std::byte> message)
{
    if (message.size() > maxMessage_)
        return std::make_error_code(std::errc::message_size);
    std::vector<std::byte> bytes(message.begin(), message.end());
    auto take = [](std::atomic<int>& n) {
        int v = n.load();
        while (v > 0 && !n.compare_exchange_weak(v, v - 1)) {
        }
        return v > 0;
    };
    MutexLocker lock(wire_->mutex);
    if (!wire_->up)
        return std::make_error_code(std::errc::not_connected);
    InprocChannel* peer = wire_->ends[0] == this ? wire_->ends[1] : wire_->ends[0];
    if (peer == nullptr)
        return std::make_error_code(std::errc::not_connected);
    if (bytes.size() > peer->maxMessage_) { // its receive fails: the link is down both ways
        lock.unlock();
        shutdown();
        return {};
    }
    if (take(faults_.drop))
        return {}; // lost on the wire: the sender cannot tell
    if (take(faults_.corrupt) && !bytes.empty())
        bytes[0] = std::byte{0x0f};
    const std::chrono::milliseconds delay(faults_.delayMs.load());
    if (take(faults_.duplicate))
        peer->enqueue(bytes, delay);
    peer->enqueue(std::move(bytes), delay);
    return {};
}

Result<void> InprocChannel::write(const void* src, std::size_t length, std::uint32_t /*lkey*/,
                                  std::uint64_t remoteAddr, std::uint32_t rkey)
{
    if (!writer_)
        return std::make_error_code(std::errc::operation_not_supported);
    if (!isUp())
        return std::make_error_code(std::errc::not_connected);
    writes_.fetch_add(1, std::memory_order_relaxed);
    if (!writer_(rkey, remoteAddr, src, length)) {
        // The link went down after the check above: the peer may have unregistered its
        // buffers from it already. As on RC, where such a write is flushed: not_connected,
        // and failover redoes it on another link.
        if (!isUp())
            return std::make_error_code(std::errc::not_connected);
        // As on RC: a remote access error puts the queue pair in error, the link is down.
        shutdown();
        return std::make_error_code(std::errc::permission_denied);
    }
    return {};
}

Result<void> InprocChannel::sendAfterWrites(std::span<const std::byte> message, Landed landed)
{
    if (Result<void> r = send(message); !r)
        return r;
    bool down = false;
    {
        MutexLocker lock(mutex_);
        down = downPending_;
        if (holding_ && !down) {
            held_.push_back(std::move(landed));
            return {};
        }
    }
    landed(!down); // went down after the send: flushed
    return {};
}

void InprocChannel::tellHeld(bool landed)
{
    std::vector<Landed> held;
    {
        MutexLocker lock(mutex_);
        held.swap(held_);
    }
    for (Landed& l : held)
        l(landed);
}

void InprocChannel::holdCompletions(bool on) noexcept
{
    MutexLocker lock(mutex_);
    holding_ = on;
}

void InprocChannel::releaseCompletions()
{
    tellHeld(isUp());
}

void InprocChannel::enqueue(std::vector<std::byte> bytes, std::chrono::milliseconds delay)
{
    {
        MutexLocker lock(mutex_);
        Item item{Clock::now() + delay, std::move(bytes)};
        // Keep the queue ordered by due time; equal times keep send order.
        auto at = std::upper_bound(queue_.begin(), queue_.end(), item.due,
                                   [](auto due, const Item& i) { return due < i.due; });
        queue_.insert(at, std::move(item));
    }
    delivery_.post([this] { deliver(); });
}

void InprocChannel::markDown(bool afterArrived) noexcept
{
    {
        MutexLocker lock(mutex_);
        if (!downPending_ && afterArrived) {
            const Clock::time_point now = Clock::now();
            arrivedBeforeDown_ = static_cast<std::size_t>(std::count_if(
                queue_.begin(), queue_.end(), [&](const Item& i) { return i.due <= now; }));
        }
        downPending_ = true;
    }
    delivery_.post([this] { deliver(); });
    delivery_.post([this] { tellHeld(false); }); // flushed, after the down is reported
}

void InprocChannel::shutdown() noexcept
{
    takeDown(false);
}

void InprocChannel::close() noexcept
{
    takeDown(true);
}

void InprocChannel::takeDown(bool orderly) noexcept
{
    MutexLocker lock(wire_->mutex);
    if (!wire_->up)
        return;
    wire_->up = false;
    for (InprocChannel* end : wire_->ends)
        if (end != nullptr)
            end->markDown(orderly && end != this);
}

// Runs on the delivery queue: what is due, in order; a down first, once.
void InprocChannel::deliver()
{
    MutexLocker lock(mutex_);
    while (started_) {
        if (downPending_ && !downReported_ && arrivedBeforeDown_ == 0) {
            downReported_ = true;
            queue_.clear(); // a dead link delivers nothing more
            lock.unlock();
            if (callbacks_.onDown)
                callbacks_.onDown();
            return;
        }
        if (queue_.empty() || downReported_)
            return;
        const Clock::time_point now = Clock::now();
        if (queue_.front().due > now) {
            delivery_.postAfter(queue_.front().due - now, [this] { deliver(); });
            return;
        }
        std::vector<std::byte> bytes = std::move(queue_.front().bytes);
        queue_.pop_front();
        if (arrivedBeforeDown_ > 0)
            --arrivedBeforeDown_;
        lock.unlock();
        if (callbacks_.onMessage)
            callbacks_.onMessage(std::move(bytes));
        delivered_.fetch_add(1);
        lock.lock();
    }
}

} // namespace smc
