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

// What the group's end of a link sends passes this gate; the test closes it
// to play a peer that stopped taking messages (over RDMA the sender then
// waits for a send slot). Shutting the link lets waiting senders go.
struct SendGate {
    Mutex mutex;
    ConditionVariable changed;
    bool closed SMC_GUARDED_BY(mutex) = false;
    bool shut SMC_GUARDED_BY(mutex) = false;
    unsigned waiting SMC_GUARDED_BY(mutex) = 0;
};

// The group's end of a link: an InprocChannel behind a SendGate.
class GatedChannel final : public LinkChannel
{
public:
    GatedChannel(std::unique_ptr<InprocChannel> inner, std::shared_ptr<SendGate> gate)
        : inner_(std::move(inner)), gate_(std::move(gate))
    {
    }
    void start(Callbacks callbacks) override { inner_->start(std::move(callbacks)); }
    Result<void> send(std::span<const std::byte> message) override
    {
        {
            MutexLocker lock(gate_->mutex);
            ++gate_->waiting;
            gate_->changed.notify_all();
            gate_->changed.wait(
                lock, [&]() SMC_REQUIRES(gate_->mutex) { return !gate_->closed || gate_->shut; });
            --gate_->waiting;
            if (gate_->shut)
                return std::make_error_code(std::errc::not_connected);
        }
        return inner_->send(message);
    }
    Result<void> connect(const LinkAddress& peer) override { return inner_->connect(peer); }
    Result<void> write(const void* src, std::size_t length, std::uint32_t lkey,
                       std::uint64_t remoteAddr, std::uint32_t rkey) override
    {
        return inner_->write(src, length, lkey, remoteAddr, rkey);
    }
    void shutdown() noexcept override
    {
        {
            MutexLocker lock(gate_->mutex);
            gate_->shut = true;
        }
        gate_->changed.notify_all();
        inner_->shutdown();
    }
    bool isUp() const noexcept override { return inner_->isUp(); }

private:
    std::unique_ptr<InprocChannel> inner_;
    std::shared_ptr<SendGate> gate_;
};

// The test's end of one of the group's links: what the group sent on it, in
// order, and raw sends.
class PeerEnd
{
public:
    // `claimed`: what this end says it is in the messages the test sends.
    PeerEnd(std::unique_ptr<InprocChannel> channel, LinkAddress claimed,
            std::shared_ptr<SendGate> gate)
        : address(claimed), gate_(std::move(gate)), channel_(std::move(channel))
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
    // The link's path dies: both ends go down, as an RDMA port does.
    void shutdown() { channel_->shutdown(); }

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

    // The group's sends on this link wait (a peer that takes nothing), until
    // released or the link is shut.
    void holdGroupSends() { setGate(true); }
    void releaseGroupSends() { setGate(false); }
    // How many of the group's sends wait at the gate now.
    unsigned groupSendsWaiting() const
    {
        MutexLocker lock(gate_->mutex);
        return gate_->waiting;
    }

    const LinkAddress address;

private:
    void setGate(bool closed)
    {
        {
            MutexLocker lock(gate_->mutex);
            gate_->closed = closed;
        }
        gate_->changed.notify_all();
    }
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
    std::shared_ptr<SendGate> gate_;
    std::unique_ptr<InprocChannel> channel_; // last: gone first, and its deliveries with it
};

// Makes the group's links: each one an in-process pair whose other end is a
// PeerEnd. Both of the group's roles: create() for a server, join() for a
// client (the ADD_LINK the test sent names nothing the provider needs).
class RawProvider final : public LinkProvider
{
public:
    // Channels deliver on `executor`'s short-task threads.
    RawProvider(InprocRegistrar& keys, Executor& executor) : keys_(keys), executor_(executor) {}

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
    // create() and join() calls, refused ones included.
    std::atomic<std::size_t> asked{0};

private:
    // Both ends take messages of any length: the tests are about what the group makes of
    // them, not about the transport's limits (InprocFabric checks those).
    Result<NewLink> makeLink(std::span<const Gid> avoid, std::size_t) override
    {
        return make(avoid);
    }
    Result<NewLink> joinLink(const LinkAddress& /*peer*/, std::span<const Gid> avoid,
                             std::size_t) override
    {
        return make(avoid);
    }
    static Gid gid(std::uint8_t side, unsigned device)
    {
        return {
            0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff, 10, side, static_cast<std::uint8_t>(device),
            1};
    }
    Result<NewLink> make(std::span<const Gid> avoid)
    {
        ++asked;
        if (refuse > 0 && refuse-- > 0)
            return std::make_error_code(std::errc::no_such_device);
        auto [ours, theirs] = InprocChannel::pair(executor_);
        ours->setMaxMessage(kLongMessages);
        theirs->setMaxMessage(kLongMessages);
        auto gate = std::make_shared<SendGate>();
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
        ends_.push_back(std::make_unique<PeerEnd>(std::move(theirs), far, gate));
        made_.notify_all();
        return NewLink{std::make_unique<GatedChannel>(std::move(ours), std::move(gate)),
                       local,
                       {std::shared_ptr<void>(), &keys_}};
    }

    InprocRegistrar& keys_;
    Executor& executor_;
    mutable Mutex mutex_;
    ConditionVariable made_;
    std::uint32_t nextQpn_ SMC_GUARDED_BY(mutex_) = 100;
    std::vector<std::unique_ptr<PeerEnd>> ends_ SMC_GUARDED_BY(mutex_);
};

// A group of `config.role` and the test as its peer (on config.executor's
// threads, if set). Usage: start(), then drive end(0), the first link, with
// raw messages.
class RawPeer
{
public:
    explicit RawPeer(LinkGroupConfig config)
        : provider_(keys_, config.executor ? *config.executor : Executor::shared())
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
        Result<NewLink> first = provider_.create({});
        if (!first)
            return first.error();
        if (server)
            provider_.refuse = 1; // the second link start() asks for
        PeerEnd& peer = *provider_.end(0);
        auto started = std::async(std::launch::async, [&, link = std::move(*first)]() mutable {
            return group_->start(std::move(link));
        });
        llc::ConfirmLink c{
            peer.address.mac, peer.address.gid, peer.address.qpn, linkId, {}, 2, 255};
        if (server) {
            if (std::optional<llc::Message> req = peer.nextOf(llc::Type::ConfirmLink, false)) {
                c.linkId = std::get<llc::ConfirmLink>(req->body).linkId;
                confirmVersion_ = req->version;
                (void)peer.send({1, true, c});
            }
        } else {
            (void)peer.send({1, false, c});
        }
        Result<void> r = started.get();
        provider_.refuse = 0;
        if (r && !server) { // its answer went out before start() returned
            if (std::optional<llc::Message> resp = peer.nextOf(llc::Type::ConfirmLink, true))
                confirmVersion_ = resp->version;
        }
        return r;
    }
    // The header version of the group's CONFIRM_LINK in start() (0: none came).
    std::uint8_t confirmVersion() const { return confirmVersion_; }

    LinkGroup& group() { return *group_; }
    RawProvider& provider() { return provider_; }
    // The test's end of the group's n-th link (0: the first); null if the
    // group did not make it within a few seconds.
    PeerEnd* end(std::size_t n = 0) { return provider_.end(n); }

private:
    InprocRegistrar keys_;
    RawProvider provider_;
    std::uint8_t confirmVersion_ = 0;
    std::unique_ptr<LinkGroup> group_; // last: gone first, before the ends it talks to
};

} // namespace smc::test
