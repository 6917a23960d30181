// SPDX-License-Identifier: MIT
// In-process stand-ins for a RoCE fabric: links as InprocChannel pairs, and a registrar
// whose rkeys an in-process "RDMA WRITE" checks, so data-plane tests mean something.
#pragma once

#include <cstring>
#include <map>
#include <mutex>

#include "pool/registrar.h"
#include "smc/inproc_channel.h"
#include "smc/link_group.h"

namespace smc::test
{

class InprocFabric final : public LinkProvider
{
public:
    Result<NewLink> create() override
    {
        auto [a, b] = InprocChannel::pair();
        std::lock_guard lock(mutex_);
        const std::uint32_t qpn = nextQpn_++;
        channels_[qpn] = a.get();
        channels_[qpn + 0x10000] = b.get();
        parked_[qpn] = std::move(b);
        return NewLink{std::move(a), qpn, gid(qpn), {}};
    }
    Result<NewLink> join(std::uint32_t peerQpn) override
    {
        std::lock_guard lock(mutex_);
        auto it = parked_.find(peerQpn);
        if (it == parked_.end())
            return std::make_error_code(std::errc::no_such_device);
        NewLink l{std::move(it->second), peerQpn + 0x10000, gid(peerQpn + 0x10000), {}};
        parked_.erase(it);
        return l;
    }
    // The server end of link `qpn` (its client end is qpn + 0x10000).
    InprocChannel* channel(std::uint32_t qpn)
    {
        std::lock_guard lock(mutex_);
        return channels_.at(qpn);
    }
    std::uint32_t lastQpn() const
    {
        std::lock_guard lock(mutex_);
        return nextQpn_ - 1;
    }

private:
    static llc::Gid gid(std::uint32_t qpn)
    {
        llc::Gid g{};
        std::memcpy(g.data() + 12, &qpn, 4);
        return g;
    }
    mutable std::mutex mutex_;
    std::uint32_t nextQpn_ = 100;
    std::map<std::uint32_t, std::unique_ptr<InprocChannel>> parked_;
    std::map<std::uint32_t, InprocChannel*> channels_;
};

// Unique rkeys per (buffer, link); write() plays the NIC: it lands only
// through a registered rkey, inside the registered range.
class KeyRegistrar final : public Registrar
{
public:
    std::error_code registerBuffer(BufferDesc& desc, unsigned link) override
    {
        std::lock_guard lock(mutex_);
        const std::uint32_t rkey = nextKey_++;
        desc.registration(link) = {rkey, rkey, reinterpret_cast<std::uintptr_t>(desc.data()), 0};
        live_[rkey] = {desc.data(), desc.size()};
        return {};
    }
    void unregisterBuffer(BufferDesc& desc, unsigned link) noexcept override
    {
        std::lock_guard lock(mutex_);
        live_.erase(desc.registration(link).rkey);
        desc.registration(link) = {};
    }
    bool write(std::uint32_t rkey, std::uint64_t addr, const void* src, std::size_t n)
    {
        std::lock_guard lock(mutex_);
        auto it = live_.find(rkey);
        if (it == live_.end())
            return false;
        auto* base = it->second.first;
        if (addr < reinterpret_cast<std::uintptr_t>(base) ||
            addr + n > reinterpret_cast<std::uintptr_t>(base) + it->second.second)
            return false;
        std::memcpy(reinterpret_cast<void*>(addr), src, n);
        return true;
    }
    std::size_t live() const
    {
        std::lock_guard lock(mutex_);
        return live_.size();
    }

private:
    mutable std::mutex mutex_;
    std::uint32_t nextKey_ = 0x1000;
    std::map<std::uint32_t, std::pair<std::byte*, std::size_t>> live_;
};

} // namespace smc::test
