// SPDX-License-Identifier: MIT
// InprocFabric: SMC-R links inside one process (InprocChannel pairs) and InprocRegistrar,
// whose rkeys the in-process RDMA WRITE checks: tests, benchmarks and demos without RDMA.
#pragma once

#include <algorithm>
#include <atomic>
#include <cstring>
#include <map>
#include <span>

#include "base/mutex.h"
#include "pool/registrar.h"
#include "smc/core/link_group.h"
#include "smc/transport/inproc_channel.h"

namespace smc
{

// Unique rkeys per (buffer, link); write() plays the NIC: it lands only
// through a registered rkey, inside the registered range.
class InprocRegistrar final : public Registrar
{
public:
    std::error_code registerBuffer(BufferDesc& desc, unsigned link) override
    {
        MutexLocker lock(mutex_);
        const std::uint32_t rkey = nextKey_++;
        desc.registration(link) = {rkey, rkey, reinterpret_cast<std::uintptr_t>(desc.data()), 0};
        live_[rkey] = {desc.data(), desc.size()};
        return {};
    }
    void unregisterBuffer(BufferDesc& desc, unsigned link) noexcept override
    {
        MutexLocker lock(mutex_);
        live_.erase(desc.registration(link).rkey);
        desc.registration(link) = {};
    }
    bool write(std::uint32_t rkey, std::uint64_t addr, const void* src, std::size_t n)
    {
        MutexLocker lock(mutex_);
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
        MutexLocker lock(mutex_);
        return live_.size();
    }

private:
    mutable Mutex mutex_;
    std::uint32_t nextKey_ SMC_GUARDED_BY(mutex_) = 0x1000;
    std::map<std::uint32_t, std::pair<std::byte*, std::size_t>> live_ SMC_GUARDED_BY(mutex_);
};

// Links between a server side (create) and a client side (join), each side
// registering with its own InprocRegistrar; a link's write() lands through the
// other side's registrar. Each side has `devices` RoCE devices, each with one
// GID (::ffff:127.side.device.1, server side 1, client side 2), so groups see
// alternate devices, or none, as on real hosts.
class InprocFabric final : public LinkProvider
{
public:
    InprocFabric(InprocRegistrar& server, InprocRegistrar& client, unsigned serverDevs = 2,
                 unsigned clientDevs = 2)
        : serverDevices(serverDevs), clientDevices(clientDevs), server_(server), client_(client)
    {
    }

    // How many devices each side has; may grow while groups run.
    std::atomic<unsigned> serverDevices, clientDevices;
    // Fault: the next `refuseCreates` create() calls fail, as when no
    // device can take another queue pair.
    std::atomic<int> refuseCreates{0};

    // A port came up: the watching groups short of links add one (see LinkProvider).
    void portUp() { pathUp(); }

    // The server end of link `qpn` (its client end is qpn + 0x10000), while
    // the link lives: its group owns and destroys the channel.
    InprocChannel* channel(std::uint32_t qpn)
    {
        MutexLocker lock(mutex_);
        return channels_.at(qpn);
    }
    std::uint32_t lastQpn() const
    {
        MutexLocker lock(mutex_);
        return nextQpn_ - 1;
    }
    // The GID of the client side's `device`: what a client stack proposes
    // from, so a server finds the group by it.
    static llc::Gid clientGid(unsigned device = 0) { return gid(2, device); }

private:
    Result<NewLink> makeLink(std::span<const llc::Gid> avoid, std::size_t maxMessage) override
    {
        if (refuseCreates > 0 && refuseCreates-- > 0)
            return std::make_error_code(std::errc::no_such_device); // no device for a new link
        auto [a, b] = InprocChannel::pair();
        a->setMaxMessage(maxMessage);
        connect(*a, client_);
        connect(*b, server_);
        MutexLocker lock(mutex_);
        const std::uint32_t qpn = nextQpn_++;
        channels_[qpn] = a.get();
        channels_[qpn + 0x10000] = b.get();
        parked_[qpn] = std::move(b);
        return NewLink{std::move(a), address(qpn, 1, serverDevices, avoid), borrow(server_)};
    }
    Result<NewLink> joinLink(const LinkAddress& peer, std::span<const llc::Gid> avoid,
                             std::size_t maxMessage) override
    {
        MutexLocker lock(mutex_);
        auto it = parked_.find(peer.qpn);
        if (it == parked_.end())
            return std::make_error_code(std::errc::no_such_device);
        it->second->setMaxMessage(maxMessage);
        NewLink l{std::move(it->second), address(peer.qpn + 0x10000, 2, clientDevices, avoid),
                  borrow(client_)};
        parked_.erase(it);
        return l;
    }

    // RoCE v2 GIDs of loopback addresses (127.side.device.1): in the subnet of a TCP
    // connection over 127.0.0.1, as SMC-Rv2's direct route wants.
    static llc::Gid gid(std::uint8_t side, unsigned device)
    {
        return {
            0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff, 127, side, static_cast<std::uint8_t>(device),
            1};
    }
    // The first of the side's devices whose GID is not in `avoid`, else the first.
    static LinkAddress address(std::uint32_t qpn, std::uint8_t side, unsigned devices,
                               std::span<const llc::Gid> avoid)
    {
        LinkAddress a;
        a.qpn = qpn;
        a.gid = gid(side, 0);
        for (unsigned d = 0; d < std::max(devices, 1u); ++d) {
            if (std::find(avoid.begin(), avoid.end(), gid(side, d)) == avoid.end()) {
                a.gid = gid(side, d);
                break;
            }
        }
        return a;
    }
    static std::shared_ptr<Registrar> borrow(Registrar& r)
    {
        return {std::shared_ptr<void>(), &r}; // not owned: the test keeps it
    }
    static void connect(InprocChannel& end, InprocRegistrar& far);

    InprocRegistrar& server_;
    InprocRegistrar& client_;
    mutable Mutex mutex_;
    std::uint32_t nextQpn_ SMC_GUARDED_BY(mutex_) = 100;
    std::map<std::uint32_t, std::unique_ptr<InprocChannel>> parked_ SMC_GUARDED_BY(mutex_);
    std::map<std::uint32_t, InprocChannel*> channels_ SMC_GUARDED_BY(mutex_);
};

inline void InprocFabric::connect(InprocChannel& end, InprocRegistrar& far)
{
    end.setRemoteWriter([&far](std::uint32_t rkey, std::uint64_t addr, const void* src,
                               std::size_t n) { return far.write(rkey, addr, src, n); });
}

} // namespace smc
