// SPDX-License-Identifier: MIT
// RcChannel and RdmaLinkProvider: link groups over RC queue pairs (SMC-R on a RoCE device).
#pragma once

#include <condition_variable>
#include <deque>
#include <memory>
#include <mutex>
#include <optional>
#include <thread>

#include "rdma/rc_link.h"
#include "smc/transport/link_provider.h"

namespace smc
{

// An LinkChannel over one RcLink. Messages are handed to the link group on a
// thread of the channel's own, never on the completion thread: a handler
// that sends may wait for a send slot, and only the completion thread frees
// one.
class RcChannel final : public LinkChannel
{
public:
    static Result<std::unique_ptr<RcChannel>>
    create(const rdma::Context& context, const rdma::ProtectionDomain& pd, rdma::LinkConfig config);
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
    RcChannel() = default;
    void push(std::optional<rdma::ControlMessage> message); // nullopt: link down
    void run();

    std::mutex mutex_;
    std::condition_variable wake_;
    std::deque<std::optional<rdma::ControlMessage>> queue_;
    Callbacks callbacks_;
    bool started_ = false;
    bool stop_ = false;
    std::thread thread_;
    std::unique_ptr<rdma::RcLink> link_; // reset by the destructor, after the delivery thread
};

// Makes links on one RDMA device port: each link an RC QP with its own
// protection domain, and a registrar that gives every buffer a memory region
// on it (Linux: one PD and one MR per buffer per link). Each RoCE v2 IPv4
// GID of the port (one per IPv4 address) is a path the group may pick as an
// alternate; `config.gidIndex` >= 0 pins one.
class RdmaLinkProvider final : public LinkProvider
{
public:
    explicit RdmaLinkProvider(rdma::Context context, rdma::LinkConfig config = {});

    Result<NewLink> create(std::span<const Gid> avoid) override;
    Result<NewLink> join(const LinkAddress& peer, std::span<const Gid> avoid) override;
    const rdma::Context& context() const noexcept { return context_; }

private:
    rdma::Context context_;
    rdma::LinkConfig config_;
};

} // namespace smc
