// SPDX-License-Identifier: MIT
// RcChannel: LLC messages over an RcLink, delivered on a SerialQueue; RdmaLinkProvider: QP + PD
// links.
#include "smc/transport/rc_channel.h"

#include <algorithm>
#include <cstring>

#include "rdma/rdma_registrar.h"

namespace smc
{
namespace
{

using namespace std::chrono_literals;

// How long a sender waits for a free send slot (Linux SMC_WR_TX_WAIT_FREE_SLOT_TIME).
constexpr auto kSlotWait = 10s;
// How long a data-path write waits for its completion.
constexpr auto kWriteWait = 10s;

} // namespace

Result<std::unique_ptr<RcChannel>> RcChannel::create(const rdma::Context& context,
                                                     const rdma::ProtectionDomain& pd,
                                                     rdma::LinkConfig config, Executor& executor,
                                                     std::shared_ptr<PortChannels> port)
{
    std::unique_ptr<RcChannel> c(new RcChannel(executor));
    Result<std::unique_ptr<rdma::RcLink>> link =
        rdma::RcLink::create(context, pd, config,
                             {[p = c.get()](std::span<const std::byte> m) {
                                  p->push(std::vector<std::byte>(m.begin(), m.end()));
                              },
                              [p = c.get()](std::error_code) { p->push(std::nullopt); }},
                             executor);
    if (!link)
        return link.error();
    c->link_ = std::move(*link);
    if (port) {
        port->add(c.get());
        c->port_ = std::move(port);
    }
    return c;
}

RcChannel::~RcChannel()
{
    if (port_)
        port_->remove(this); // a port event shuts us down no more
    // Deliveries first: a callback may still send on the link. A completion
    // that lands after only queues its item (the closed queue drops the task).
    deliveries_.close();
    link_.reset(); // unwatches: no completion callback runs after this
}

LinkAddress RcChannel::address() const noexcept
{
    const rdma::Endpoint e = link_->local();
    return {e.qpn, e.psn, e.gid, {}, static_cast<std::uint8_t>(e.mtu)};
}

void RcChannel::start(Callbacks callbacks)
{
    MutexLocker lock(mutex_);
    callbacks_ = std::move(callbacks);
    started_ = true;
    // What arrived before is delivered now, in order; push posts the rest.
    // Posting never blocks, so it may happen under the lock, which keeps the
    // count of tasks equal to the count of items.
    for (std::size_t i = 0; i < items_.size(); ++i)
        deliveries_.post([this] { deliverOne(); });
}

void RcChannel::push(Item item)
{
    MutexLocker lock(mutex_);
    items_.push_back(std::move(item));
    if (started_)
        deliveries_.post([this] { deliverOne(); });
}

void RcChannel::deliverOne()
{
    Item item;
    {
        MutexLocker lock(mutex_);
        if (items_.empty())
            return;
        item = std::move(items_.front());
        items_.pop_front();
    }
    if (down_)
        return; // a dead link delivers nothing more
    down_ = !item.has_value();
    if (item && callbacks_.onMessage)
        callbacks_.onMessage(std::move(*item));
    else if (!item && callbacks_.onDown)
        callbacks_.onDown();
}

Result<void> RcChannel::send(std::span<const std::byte> message)
{
    return link_->send(message, kSlotWait); // message_size beyond the link's slots
}

Result<void> RcChannel::connect(const LinkAddress& peer)
{
    rdma::Endpoint e;
    e.qpn = peer.qpn;
    e.psn = peer.psn;
    e.gid = peer.gid;
    e.mtu = static_cast<ibv_mtu>(std::clamp<int>(peer.mtu, IBV_MTU_256, IBV_MTU_4096));
    return link_->connect(e);
}

namespace
{
// A failed completion leaves an RC QP in error: the link went with this write, whatever the
// status said, and the caller's answer to that is failover (LinkChannel::write).
Result<void> linkLost(Result<void> r)
{
    if (!r && r.error() != std::errc::timed_out)
        return std::make_error_code(std::errc::not_connected);
    return r;
}
} // namespace

Result<void> RcChannel::write(const void* src, std::size_t length, std::uint32_t lkey,
                              std::uint64_t remoteAddr, std::uint32_t rkey)
{
    return linkLost(link_->rdmaWrite(src, length, lkey, {remoteAddr, rkey}, kWriteWait));
}

Result<void> RcChannel::postWrite(const void* src, std::size_t length, std::uint32_t lkey,
                                  std::uint64_t remoteAddr, std::uint32_t rkey)
{
    return linkLost(link_->postWrite(src, length, lkey, {remoteAddr, rkey}, kWriteWait));
}

Result<void> RcChannel::sendAfterWrites(std::span<const std::byte> message, Landed landed)
{
    Result<void> r = link_->sendThen(message, kSlotWait, std::move(landed));
    if (!r && r.error() == std::errc::message_size)
        return r; // beyond the link's slots: nothing was posted
    return linkLost(r);
}

void RcChannel::shutdown() noexcept
{
    (void)link_->forceError();
}

void RcChannel::close() noexcept
{
    link_->awaitSends(std::chrono::milliseconds(100));
    shutdown();
}

bool RcChannel::isUp() const noexcept
{
    return !link_->isDown();
}

void PortChannels::add(RcChannel* channel)
{
    MutexLocker lock(mutex_);
    channels_.push_back(channel);
}

void PortChannels::remove(RcChannel* channel)
{
    MutexLocker lock(mutex_);
    std::erase(channels_, channel);
}

void PortChannels::shutdownAll()
{
    MutexLocker lock(mutex_);
    for (RcChannel* c : channels_)
        c->shutdown();
}

RdmaLinkProvider::RdmaLinkProvider(std::vector<rdma::Context> devices, rdma::LinkConfig config,
                                   Executor& executor)
    : config_(config), executor_(executor)
{
    for (rdma::Context& context : devices) {
        auto d = std::make_unique<Device>(Device{std::move(context)});
        // Without events (epoll refused the descriptor) links still go down, when their
        // retries run out, and nothing is re-added.
        d->watch =
            executor_.watch(d->context.asyncFd(), [this, p = d.get()] { onDeviceEvent(*p); });
        devices_.push_back(std::move(d));
    }
}

RdmaLinkProvider::RdmaLinkProvider(rdma::Context context, rdma::LinkConfig config,
                                   Executor& executor)
    : RdmaLinkProvider(
          [&] {
              std::vector<rdma::Context> one;
              one.push_back(std::move(context));
              return one;
          }(),
          config, executor)
{
}

RdmaLinkProvider::~RdmaLinkProvider()
{
    for (const auto& d : devices_)
        if (d->watch >= 0)
            executor_.unwatch(d->watch);
}

void RdmaLinkProvider::onDeviceEvent(Device& device)
{
    bool up = false;
    while (Result<rdma::Context::AsyncEvent> e = device.context.nextAsyncEvent()) {
        if (e->type == IBV_EVENT_DEVICE_FATAL ||
            (e->type == IBV_EVENT_PORT_ERR && e->port == config_.port))
            device.channels->shutdownAll();
        else if (e->type == IBV_EVENT_PORT_ACTIVE && e->port == config_.port)
            up = true;
    }
    if (up)
        pathUp();
}

static_assert(kShortMessages == rdma::kMessageSize && kLongMessages == rdma::kV2MessageSize);

Result<NewLink> RdmaLinkProvider::makeLink(std::span<const Gid> avoid, std::size_t maxMessage)
{
    // As Linux picks an alternate device: the first active device none of whose paths the
    // group uses (a port failure there leaves the other link up), else another path on a
    // device it uses (asymmetric), else the first path of all.
    struct Path {
        Device* device = nullptr;
        int gidIndex = -1;
    };
    Path pick, asymmetric, fallback;
    bool portDown = false;
    for (std::size_t i = 0; i < devices_.size() && pick.device == nullptr; ++i) {
        Device& d = *devices_[i];
        Result<rdma::PortInfo> port = d.context.port(config_.port);
        if (!port)
            return port.error();
        if (port->state != IBV_PORT_ACTIVE) {
            portDown = true;
            continue;
        }
        std::vector<int> indexes{config_.gidIndex};
        if (i > 0 || config_.gidIndex < 0) {
            Result<std::vector<int>> all = d.context.roceV2Ipv4Gids(config_.port);
            if (!all)
                return all.error();
            indexes = std::move(*all);
        }
        Path unused;
        bool used = false;
        for (int index : indexes) {
            Result<rdma::Gid> gid = d.context.gid(config_.port, index);
            if (!gid)
                continue;
            if (fallback.device == nullptr)
                fallback = {&d, index};
            if (std::find(avoid.begin(), avoid.end(), *gid) != avoid.end())
                used = true;
            else if (unused.device == nullptr)
                unused = {&d, index};
        }
        if (!used)
            pick = unused;
        else if (asymmetric.device == nullptr)
            asymmetric = unused;
    }
    if (pick.device == nullptr)
        pick = asymmetric;
    if (pick.device == nullptr)
        pick = fallback;
    if (pick.device == nullptr)
        return std::make_error_code(portDown ? std::errc::network_down
                                             : std::errc::address_not_available);
    rdma::LinkConfig config = config_;
    config.gidIndex = pick.gidIndex;
    config.maxMessage = maxMessage;
    Result<rdma::ProtectionDomain> pd = rdma::ProtectionDomain::create(pick.device->context);
    if (!pd)
        return pd.error();
    Result<std::unique_ptr<RcChannel>> channel =
        RcChannel::create(pick.device->context, *pd, config, executor_, pick.device->channels);
    if (!channel)
        return channel.error();
    LinkAddress local = (*channel)->address();
    // Our MAC in ADD_LINK: Linux takes it as the new link's destination MAC (and rxe loops
    // a packet back only to its own netdev's MAC).
    if (Result<rdma::Mac> mac = pick.device->context.gidMac(config_.port, pick.gidIndex))
        std::copy(mac->begin(), mac->end(), local.mac.begin());
    return NewLink{std::move(*channel), local, std::make_shared<rdma::RdmaRegistrar>(*pd)};
}

Result<NewLink> RdmaLinkProvider::joinLink(const LinkAddress& peer, std::span<const Gid> avoid,
                                           std::size_t maxMessage)
{
    Result<NewLink> link = makeLink(avoid, maxMessage);
    if (!link)
        return link;
    if (Result<void> r = link->channel->connect(peer); !r)
        return r.error();
    return link;
}

} // namespace smc
