// SPDX-License-Identifier: MIT
// RawPeer: one LinkGroup whose peer is the test: the far end of each of the group's links is a
// channel the test drives by hand with raw LLC messages (hostile-peer tests); no gtest here.
#pragma once

#include <algorithm>
#include <atomic>
#include <chrono>
#include <deque>
#include <future>
#include <map>
#include <memory>
#include <optional>
#include <span>
#include <utility>
#include <vector>

#include "base/mutex.h"
#include "smc/core/link_group.h"
#include "smc/llc/llc_messages.h"
#include "smc/testing/inproc_fabric.h"
#include "smc/transport/inproc_channel.h"

namespace smc::test
{

// The test's end of one of the group's links: what the group sent on it, in
// order, and raw sends.
class PeerEnd
{
public:
    // `address`: what this end claims to be in the messages the test sends.
    PeerEnd(std::unique_ptr<InprocChannel> channel, LinkAddress claimed)
        : address(claimed), channel_(std::move(channel))
    {
        channel_->start({[this](std::vector<std::byte> bytes) { received(bytes); },
                         [this] {
                             MutexLocker lock(mutex_);
                             down_ = true;
                             arrived_.notify_all();
                         }});
    }
    PeerEnd(const PeerEnd&) = delete;
    PeerEnd& operator=(const PeerEnd&) = delete;

    Result<void> send(const llc::Message& m) { return channel_->send(llc::encode(m)); }
    Result<void> sendBytes(std::span<const std::byte> bytes) { return channel_->send(bytes); }

    // The next message the group sent (and its size on the wire); nullopt
    // when none came within `limit`.
    std::optional<llc::Message> next(std::chrono::milliseconds limit = std::chrono::seconds(3),
                                     std::size_t* wireSize = nullptr)
    {
        MutexLocker lock(mutex_);
        if (!arrived_.waitFor(lock, limit, [&]() SMC_REQUIRES(mutex_) { return !inbox_.empty(); }))
            return std::nullopt;
        auto [m, size] = std::move(inbox_.front());
        inbox_.pop_front();
        if (wireSize)
            *wireSize = size;
        return m;
    }
    // The next message of `type` with this response flag; others before it
    // are dropped (and counted in skipped()).
    std::optional<llc::Message> nextOf(llc::Type type, bool response,
                                       std::chrono::milliseconds limit = std::chrono::seconds(3))
    {
        const auto end = std::chrono::steady_clock::now() + limit;
        for (;;) {
            const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
                end - std::chrono::steady_clock::now());
            std::optional<llc::Message> m = next(std::max(left, std::chrono::milliseconds(0)));
            if (!m || (m->type() == type && m->response == response))
                return m;
            MutexLocker lock(mutex_);
            ++skipped_;
        }
    }
    // Messages of `type` are counted, not kept (floods).
    void discard(llc::Type type)
    {
        MutexLocker lock(mutex_);
        discarded_[type] = 0;
    }
    std::size_t count(llc::Type type) const
    {
        MutexLocker lock(mutex_);
        auto it = discarded_.find(type);
        return it == discarded_.end() ? 0 : it->second;
    }
    std::size_t skipped() const
    {
        MutexLocker lock(mutex_);
        return skipped_;
    }
    bool down() const
    {
        MutexLocker lock(mutex_);
        return down_;
    }

    const LinkAddress address;

private:
    void received(const std::vector<std::byte>& bytes)
    {
        Result<llc::Message> m = llc::decode(bytes);
        MutexLocker lock(mutex_);
        if (!m) {
            ++malformed_;
            return;
        }
        if (auto it = discarded_.find(m->type()); it != discarded_.end()) {
            ++it->second;
            return;
        }
        inbox_.emplace_back(std::move(*m), bytes.size());
        arrived_.notify_all();
    }

    mutable Mutex mutex_;
    ConditionVariable arrived_;
    std::deque<std::pair<llc::Message, std::size_t>> inbox_ SMC_GUARDED_BY(mutex_);
    std::map<llc::Type, std::size_t> discarded_ SMC_GUARDED_BY(mutex_);
    std::size_t skipped_ SMC_GUARDED_BY(mutex_) = 0;
    std::size_t malformed_ SMC_GUARDED_BY(mutex_) = 0;
    bool down_ SMC_GUARDED_BY(mutex_) = false;
    std::unique_ptr<InprocChannel> channel_; // last: gone first, and its deliveries with it
};

// Makes the group's links: each one an in-process pair whose other end is a
// PeerEnd. Both of the group's roles: create() for a server, join() for a
// client (the ADD_LINK the test sent names nothing the provider needs).
class RawProvider final : public LinkProvider
{
public:
    explicit RawProvider(InprocRegistrar& keys) : keys_(keys) {}

    Result<NewLink> create(std::span<const Gid> avoid) override { return make(avoid); }
    Result<NewLink> join(const LinkAddress& /*peer*/, std::span<const Gid> avoid) override
    {
        return make(avoid);
    }

    // The test's end of the group's n-th link (in the order they were
    // made), waiting up to `limit` for it; null if it did not come.
    PeerEnd* end(std::size_t n, std::chrono::milliseconds limit = std::chrono::seconds(3))
    {
        MutexLocker lock(mutex_);
        if (!made_.waitFor(lock, limit, [&]() SMC_REQUIRES(mutex_) { return ends_.size() > n; }))
            return nullptr;
        return ends_[n].get();
    }
    // Links made so far: in real life each one a queue pair and a bulk
    // registration.
    std::size_t made() const
    {
        MutexLocker lock(mutex_);
        return ends_.size();
    }
    // The GID the peer's n-th device has (the test's side).
    static Gid peerGid(unsigned n) { return gid(1, n); }

    // Fault: the next `refuse` calls fail, as when no device can take a QP.
    std::atomic<int> refuse{0};

private:
    static Gid gid(std::uint8_t side, unsigned device)
    {
        return {
            0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff, 10, side, static_cast<std::uint8_t>(device),
            1};
    }
    Result<NewLink> make(std::span<const Gid> avoid)
    {
        if (refuse > 0 && refuse-- > 0)
            return std::make_error_code(std::errc::no_such_device);
        auto [ours, theirs] = InprocChannel::pair();
        MutexLocker lock(mutex_);
        const std::uint32_t qpn = nextQpn_++;
        LinkAddress local;
        local.qpn = qpn;
        for (unsigned d = 0; d < 2; ++d) { // two devices: a symmetric group if asked for
            local.gid = gid(2, d);
            if (std::find(avoid.begin(), avoid.end(), local.gid) == avoid.end())
                break;
        }
        LinkAddress far;
        far.qpn = qpn + 0x10000;
        far.gid = peerGid(static_cast<unsigned>(ends_.size() % 2));
        ends_.push_back(std::make_unique<PeerEnd>(std::move(theirs), far));
        made_.notify_all();
        return NewLink{std::move(ours), local, {std::shared_ptr<void>(), &keys_}};
    }

    InprocRegistrar& keys_;
    mutable Mutex mutex_;
    ConditionVariable made_;
    std::uint32_t nextQpn_ SMC_GUARDED_BY(mutex_) = 100;
    std::vector<std::unique_ptr<PeerEnd>> ends_ SMC_GUARDED_BY(mutex_);
};

// A group of `config.role` and the test as its peer. Usage: start(), then
// drive end(0) (the first link) with raw messages.
class RawPeer
{
public:
    explicit RawPeer(LinkGroupConfig config) : provider_(keys_)
    {
        Result<std::unique_ptr<LinkGroup>> g = LinkGroup::create(config, provider_);
        if (g)
            group_ = std::move(*g);
    }

    // The first link: the test plays CONFIRM_LINK as the other role (a
    // client group adopts `linkId`; a server group names its own). A server
    // group's start() then tries a second link; that create is refused, so
    // the group is SINGLE. Returns what the group's start() returned.
    Result<void> start(std::uint8_t linkId = 1)
    {
        if (!group_)
            return std::make_error_code(std::errc::invalid_argument);
        const bool server = group_->role() == Role::Server;
        if (server)
            provider_.refuse = 1;
        Result<NewLink> first = provider_.create({});
        if (!first)
            return first.error();
        PeerEnd& peer = *provider_.end(0);
        auto started = std::async(std::launch::async, [&, link = std::move(*first)]() mutable {
            return group_->start(std::move(link));
        });
        llc::ConfirmLink c{
            peer.address.mac, peer.address.gid, peer.address.qpn, linkId, {}, 2, 255};
        if (server) {
            if (std::optional<llc::Message> req = peer.nextOf(llc::Type::ConfirmLink, false)) {
                c.linkId = std::get<llc::ConfirmLink>(req->body).linkId;
                (void)peer.send({1, true, c});
            }
        } else {
            (void)peer.send({1, false, c});
        }
        Result<void> r = started.get();
        provider_.refuse = 0;
        if (r && !server) // its answer went out before start() returned
            (void)peer.nextOf(llc::Type::ConfirmLink, true);
        return r;
    }

    LinkGroup& group() { return *group_; }
    RawProvider& provider() { return provider_; }
    // The test's end of the group's n-th link (0: the first); null if the
    // group did not make it within a few seconds.
    PeerEnd* end(std::size_t n = 0) { return provider_.end(n); }

private:
    InprocRegistrar keys_;
    RawProvider provider_;
    std::unique_ptr<LinkGroup> group_; // last: gone first, before the ends it talks to
};

} // namespace smc::test
