// SPDX-License-Identifier: MIT
// RcChannel and RdmaLinkProvider: link groups over RC queue pairs (SMC-R on a RoCE device).
#pragma once

#include <deque>
#include <memory>
#include <optional>
#include <vector>

#include "base/executor.h"
#include "base/mutex.h"
#include "rdma/rc_link.h"
#include "smc/transport/link_provider.h"

namespace smc
{

class RcChannel;

// The channels on one device port, so that the port going down takes their links down at
// once (their connections fail over) instead of each when its retries run out.
class PortChannels
{
public:
    void add(RcChannel* channel);
    void remove(RcChannel* channel); // waits for a running shutdownAll()
    void shutdownAll();              // never blocks beyond the lock

private:
    Mutex mutex_;
    std::vector<RcChannel*> channels_ SMC_GUARDED_BY(mutex_);
};

// A LinkChannel over one RcLink. The link's completions run on the
// executor's epoll thread; the channel hands messages and link-down to the
// link group through a SerialQueue on the executor's short-task threads, one
// at a time and in order, never on the epoll thread: a callback that sends
// may wait for a send slot, and only the epoll thread frees one. Messages
// that arrive before start() are kept and delivered first, in order.
class RcChannel final : public LinkChannel
{
public:
    static Result<std::unique_ptr<RcChannel>>
    create(const rdma::Context& context, const rdma::ProtectionDomain& pd, rdma::LinkConfig config,
           Executor& executor = Executor::shared(), std::shared_ptr<PortChannels> port = {});
    // Deliveries stop first (a running callback is waited for, unless this
    // runs in it), then the link: no callback runs after this returns.
    ~RcChannel() override;

    LinkAddress address() const noexcept;

    void start(Callbacks callbacks) override;
    Result<void> send(std::span<const std::byte> message) override;
    Result<void> connect(const LinkAddress& peer) override;
    Result<void> write(const void* src, std::size_t length, std::uint32_t lkey,
                       std::uint64_t remoteAddr, std::uint32_t rkey) override;
    Result<void> postWrite(const void* src, std::size_t length, std::uint32_t lkey,
                           std::uint64_t remoteAddr, std::uint32_t rkey) override;
    Result<void> sendAfterWrites(std::span<const std::byte> message, Landed landed) override;
    // Moves the QP to ERR: this end reports down; the peer hears of it by
    // DELETE_LINK on a surviving link, or when its own sends fail.
    void shutdown() noexcept override;
    void close() noexcept override; // waits up to 100 ms for the sends posted
    bool isUp() const noexcept override;

private:
    using Item = std::optional<std::vector<std::byte>>; // nullopt: link down
    explicit RcChannel(Executor& executor) : deliveries_(executor, SerialQueue::Kind::Short) {}
    void push(Item item); // on the epoll thread (or a sender's, whose post failed)
    void deliverOne();    // on deliveries_

    Mutex mutex_;
    // Once started, one delivery task is posted per item.
    std::deque<Item> items_ SMC_GUARDED_BY(mutex_);
    bool started_ SMC_GUARDED_BY(mutex_) = false;
    // Set by start() before the first delivery task is posted; read only by
    // those tasks, so it needs no lock.
    Callbacks callbacks_;
    bool down_ = false; // delivered link-down; only deliveries_ (one at a time) touch it
    SerialQueue deliveries_;
    std::unique_ptr<rdma::RcLink> link_; // reset by the destructor, after deliveries_ closed
    std::shared_ptr<PortChannels> port_; // we are in it while we live
};

// Makes links on `config.port` of one or more RDMA devices: each link an RC QP with its own
// protection domain, and a registrar that gives every buffer a memory region on it (Linux:
// one PD and one MR per buffer per link). Each RoCE v2 IPv4 GID of an active port (one per
// IPv4 address) is a path the group may pick as an alternate; the first device's come
// first, and `config.gidIndex` >= 0 pins its path. Further devices are alternates (Linux:
// more RNICs with the same pnetid). A port that goes down takes its links down at once;
// one that comes up is announced to watchPaths(). Links and device events run on
// `executor`.
class RdmaLinkProvider final : public LinkProvider
{
public:
    // `devices`: at least one.
    explicit RdmaLinkProvider(std::vector<rdma::Context> devices, rdma::LinkConfig config = {},
                              Executor& executor = Executor::shared());
    explicit RdmaLinkProvider(rdma::Context context, rdma::LinkConfig config = {},
                              Executor& executor = Executor::shared());
    // Stops watching the devices' events (waits for a running handler).
    ~RdmaLinkProvider() override;

    // Errors besides the device's: network_down (every port is down), address_not_available
    // (no RoCE v2 IPv4 GID on any).
    const rdma::Context& context() const noexcept { return devices_.front()->context; }

private:
    Result<NewLink> makeLink(std::span<const Gid> avoid, std::size_t maxMessage) override;
    Result<NewLink> joinLink(const LinkAddress& peer, std::span<const Gid> avoid,
                             std::size_t maxMessage) override;
    struct Device {
        rdma::Context context;
        std::shared_ptr<PortChannels> channels = std::make_shared<PortChannels>();
        int watch = -1;
    };
    void onDeviceEvent(Device& device); // on the epoll thread

    std::vector<std::unique_ptr<Device>> devices_;
    rdma::LinkConfig config_;
    Executor& executor_;
};

} // namespace smc
