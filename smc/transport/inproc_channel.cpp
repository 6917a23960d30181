// SPDX-License-Identifier: MIT
// InprocChannel: queues, a delivery thread per end, faults, and link-down on both ends.
#include "smc/transport/inproc_channel.h"

#include <algorithm>

namespace smc
{

struct InprocChannel::Wire {
    std::mutex mutex;
    bool up = true;
    InprocChannel* ends[2] = {nullptr, nullptr};
};

std::pair<std::unique_ptr<InprocChannel>, std::unique_ptr<InprocChannel>> InprocChannel::pair()
{
    std::unique_ptr<InprocChannel> a(new InprocChannel()), b(new InprocChannel());
    auto wire = std::make_shared<Wire>();
    wire->ends[0] = a.get();
    wire->ends[1] = b.get();
    a->wire_ = b->wire_ = wire;
    return {std::move(a), std::move(b)};
}

InprocChannel::~InprocChannel()
{
    {
        std::lock_guard lock(wire_->mutex);
        wire_->up = false;
        for (InprocChannel*& end : wire_->ends) {
            if (end == this)
                end = nullptr;
            else if (end != nullptr)
                end->markDown();
        }
    }
    {
        std::lock_guard lock(mutex_);
        stop_ = true;
    }
    wake_.notify_all();
    if (thread_.joinable())
        thread_.join();
}

void InprocChannel::start(Callbacks callbacks)
{
    callbacks_ = std::move(callbacks);
    thread_ = std::thread([this] { run(); });
}

bool InprocChannel::isUp() const noexcept
{
    std::lock_guard lock(wire_->mutex);
    return wire_->up;
}

Result<void> InprocChannel::send(std::span<const std::byte> message)
{
    std::vector<std::byte> bytes(message.begin(), message.end());
    auto take = [](std::atomic<int>& n) {
        int v = n.load();
        while (v > 0 && !n.compare_exchange_weak(v, v - 1)) {
        }
        return v > 0;
    };
    std::lock_guard lock(wire_->mutex);
    if (!wire_->up)
        return std::make_error_code(std::errc::not_connected);
    InprocChannel* peer = wire_->ends[0] == this ? wire_->ends[1] : wire_->ends[0];
    if (peer == nullptr)
        return std::make_error_code(std::errc::not_connected);
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
    if (!writer_(rkey, remoteAddr, src, length))
        return std::make_error_code(std::errc::permission_denied);
    return {};
}

void InprocChannel::enqueue(std::vector<std::byte> bytes, std::chrono::milliseconds delay)
{
    {
        std::lock_guard lock(mutex_);
        Item item{std::chrono::steady_clock::now() + delay, std::move(bytes)};
        // Keep the queue ordered by due time; equal times keep send order.
        auto at = std::upper_bound(queue_.begin(), queue_.end(), item.due,
                                   [](auto due, const Item& i) { return due < i.due; });
        queue_.insert(at, std::move(item));
    }
    wake_.notify_all();
}

void InprocChannel::markDown() noexcept
{
    {
        std::lock_guard lock(mutex_);
        downPending_ = true;
    }
    wake_.notify_all();
}

void InprocChannel::shutdown() noexcept
{
    std::lock_guard lock(wire_->mutex);
    if (!wire_->up)
        return;
    wire_->up = false;
    for (InprocChannel* end : wire_->ends)
        if (end != nullptr)
            end->markDown();
}

void InprocChannel::run()
{
    std::unique_lock lock(mutex_);
    for (;;) {
        if (stop_)
            return;
        if (downPending_ && !downReported_) {
            downReported_ = true;
            queue_.clear(); // a dead link delivers nothing more
            lock.unlock();
            if (callbacks_.onDown)
                callbacks_.onDown();
            lock.lock();
            continue;
        }
        if (queue_.empty() || downReported_) {
            wake_.wait(lock);
            continue;
        }
        if (queue_.front().due > std::chrono::steady_clock::now()) {
            wake_.wait_until(lock, queue_.front().due);
            continue;
        }
        std::vector<std::byte> bytes = std::move(queue_.front().bytes);
        queue_.pop_front();
        lock.unlock();
        if (callbacks_.onMessage)
            callbacks_.onMessage(std::move(bytes));
        delivered_.fetch_add(1);
        lock.lock();
    }
}

} // namespace smc
