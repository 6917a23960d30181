// SPDX-License-Identifier: MIT
// The LLC peer fuzzer's plumbing: a group's link end that counts what crossed it, the peer's RMBs.
#pragma once

#include <array>
#include <atomic>
#include <cstdint>
#include <cstring>
#include <memory>
#include <utility>
#include <vector>

#include "base/mutex.h"
#include "smc/transport/inproc_channel.h"

namespace smc::fuzz
{

// What crossed the group's end of one link; shared with the harness, which
// outlives the channel (the group destroys it when it clears the link).
struct Tap {
    std::atomic<bool> started{false};        // the group took the link (start())
    std::atomic<bool> down{false};           // the group was told the link is down
    std::atomic<bool> gone{false};           // the group destroyed its end
    std::atomic<std::uint64_t> delivered{0}; // peer messages the group has handled
    std::atomic<std::uint64_t> sent{0};      // messages the group sent
};

// The group's end of a link: an InprocChannel whose deliveries and sends are
// counted, so the harness knows when the group has handled what the peer sent
// (the callback returned) instead of guessing with sleeps.
class TappedChannel final : public LinkChannel
{
public:
    TappedChannel(std::unique_ptr<InprocChannel> inner, std::shared_ptr<Tap> tap)
        : inner_(std::move(inner)), tap_(std::move(tap))
    {
    }
    ~TappedChannel() override
    {
        inner_.reset(); // waits for a running delivery
        tap_->gone = true;
    }

    void start(Callbacks callbacks) override
    {
        tap_->started = true;
        inner_->start({[cb = callbacks.onMessage, tap = tap_](std::vector<std::byte> b) {
                           cb(std::move(b));
                           ++tap->delivered;
                       },
                       [cb = callbacks.onDown, tap = tap_] {
                           tap->down = true;
                           cb();
                       }});
    }
    Result<void> send(std::span<const std::byte> message) override
    {
        Result<void> r = inner_->send(message);
        if (r)
            ++tap_->sent;
        return r;
    }
    Result<void> connect(const LinkAddress& peer) override { return inner_->connect(peer); }
    Result<void> write(const void* src, std::size_t length, std::uint32_t lkey,
                       std::uint64_t remoteAddr, std::uint32_t rkey) override
    {
        return inner_->write(src, length, lkey, remoteAddr, rkey);
    }
    void shutdown() noexcept override { inner_->shutdown(); }
    bool isUp() const noexcept override { return inner_->isUp(); }

private:
    std::unique_ptr<InprocChannel> inner_;
    std::shared_ptr<Tap> tap_;
};

inline constexpr unsigned kPeerRmbs = 4;
inline constexpr std::size_t kPeerRmbBytes = 16384;

// The peer's RMBs: real memory the group's RDMA WRITEs land in, when their
// rkey and range are right (the NIC's checks). An rkey names its RMB and the
// link id it was given for: 0x70 | rmb | link id.
class PeerRmbs
{
public:
    static std::uint32_t rkey(unsigned rmb, std::uint8_t linkId) noexcept
    {
        return 0x70000000u | (rmb % kPeerRmbs) << 8 | linkId;
    }
    std::uint64_t vaddr(unsigned rmb) const noexcept
    {
        return reinterpret_cast<std::uintptr_t>(mem_[rmb % kPeerRmbs].data());
    }
    // What InprocChannel::write calls; the group's API thread only.
    bool write(std::uint32_t rkey, std::uint64_t addr, const void* src, std::size_t n)
    {
        const unsigned rmb = (rkey >> 8) & 0xff;
        if ((rkey >> 24) != 0x70 || rmb >= kPeerRmbs)
            return false;
        const std::uint64_t base = vaddr(rmb);
        if (addr < base || addr - base > kPeerRmbBytes || n > kPeerRmbBytes - (addr - base))
            return false;
        MutexLocker lock(mutex_); // two API threads may write into one RMB
        std::memcpy(mem_[rmb].data() + (addr - base), src, n);
        lastLanded = static_cast<int>(rmb);
        return true;
    }
    static inline thread_local int lastLanded = -1; // where this thread's last write landed

private:
    Mutex mutex_; // over the bytes (their addresses never change)
    std::array<std::array<std::byte, kPeerRmbBytes>, kPeerRmbs> mem_{};
};

// Device `d` of a side (1: the group's, 2: the peer's): its GID and MAC.
inline Gid deviceGid(std::uint8_t side, unsigned d)
{
    return {0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff, 10, side, static_cast<std::uint8_t>(d), 1};
}
inline Mac deviceMac(std::uint8_t side, unsigned d)
{
    return {2, 0, 0, side, static_cast<std::uint8_t>(d), 1};
}

} // namespace smc::fuzz
