// SPDX-License-Identifier: MIT
// RcChannel and RdmaLinkProvider: link groups over RC queue pairs (SMC-R on a RoCE device).
#pragma once

#include <deque>
#include <memory>
#include <optional>

#include "base/executor.h"
#include "base/mutex.h"
#include "rdma/rc_link.h"
#include "smc/transport/link_provider.h"

namespace smc
{

// A LinkChannel over one RcLink. The link's completions run on the
// executor's epoll thread; the channel hands messages and link-down to the
// link group through a SerialQueue on the executor's short-task threads, one
// at a time and in order, never on the epoll thread: a callback that sends
// may wait for a send slot, and only the epoll thread frees one. Messages
// that arrive before start() are kept and delivered first, in order.
class RcChannel final : public LinkChannel
{
public:
    static Result<std::unique_ptr<RcChannel>> create(const rdma::Context& context,
                                                     const rdma::ProtectionDomain& pd,
                                                     rdma::LinkConfig config,
                                                     Executor& executor = Executor::shared());
    // Deliveries stop first (a running callback is waited for, unless this
    // runs in it), then the link: no callback runs after this returns.
    ~RcChannel() override;

    LinkAddress address() const noexcept;

    void start(Callbacks callbacks) override;
    Result<void> send(std::span<const std::byte> message) override;
    Result<void> connect(const LinkAddress& peer) override;
    Result<void> write(const void* src, std::size_t length, std::uint32_t lkey,
                       std::uint64_t remoteAddr, std::uint32_t rkey) override;
    // Moves the QP to ERR: this end reports down; the peer hears of it by
    // DELETE_LINK on a surviving link, or when its own sends fail.
    void shutdown() noexcept override;
    bool isUp() const noexcept override;

private:
    using Item = std::optional<rdma::ControlMessage>; // nullopt: link down
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
};

// Makes links on one RDMA device port: each link an RC QP with its own
// protection domain, and a registrar that gives every buffer a memory region
// on it (Linux: one PD and one MR per buffer per link). Each RoCE v2 IPv4
// GID of the port (one per IPv4 address) is a path the group may pick as an
// alternate; `config.gidIndex` >= 0 pins one. Its links run on `executor`.
class RdmaLinkProvider final : public LinkProvider
{
public:
    explicit RdmaLinkProvider(rdma::Context context, rdma::LinkConfig config = {},
                              Executor& executor = Executor::shared());

    Result<NewLink> create(std::span<const Gid> avoid) override;
    Result<NewLink> join(const LinkAddress& peer, std::span<const Gid> avoid) override;
    const rdma::Context& context() const noexcept { return context_; }

private:
    rdma::Context context_;
    rdma::LinkConfig config_;
    Executor& executor_;
};

} // namespace smc
