// SPDX-License-Identifier: MIT
// libibverbs in RAII: device context, PD, MR, CQ, completion channel, RC queue pair.
#pragma once

#include <array>
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <system_error>
#include <vector>

#include <infiniband/verbs.h>

#include "base/result.h"

namespace smc::rdma
{

// --- Errors: the three verbs conventions, normalised here and nowhere else.

// Verbs that return a pointer: NULL and errno.
std::error_code errnoError() noexcept;
// Verbs that return an int: 0, or the errno value itself.
std::error_code returnedError(int ret) noexcept;
// A work completion's status (ibv_wc_status), category "ibv_wc".
std::error_code completionError(ibv_wc_status status) noexcept;
const std::error_category& completionCategory() noexcept;

// Names of the RDMA devices on this host (e.g. "rxe0", "mlx5_0"). A host
// whose kernel has no RDMA support answers std::errc::function_not_supported;
// one with support but no device answers std::errc::no_such_device.
Result<std::vector<std::string>> listDevices();

// --- Handles. Each child keeps its parents alive through the shared_ptr's
// deleter, so teardown order (MRs and QPs before their PD, a QP before its
// CQs, everything before the device context) holds whatever order the
// owner drops them in.

using Gid = std::array<std::uint8_t, 16>;

struct PortInfo {
    ibv_port_state state = IBV_PORT_NOP;
    ibv_mtu activeMtu = IBV_MTU_1024;
    int gidTableLength = 0;
    std::uint8_t linkLayer = 0;
};

// RoCE v2 GIDs that carry an IPv4 address (::ffff:a.b.c.d).
constexpr bool isIpv4Mapped(const Gid& gid) noexcept
{
    for (int i = 0; i < 10; ++i)
        if (gid[i] != 0)
            return false;
    return gid[10] == 0xff && gid[11] == 0xff;
}

class Context
{
public:
    // Opens the named device; an empty name takes the first one.
    static Result<Context> open(std::string_view name = {});

    ibv_context* get() const noexcept { return ctx_.get(); }
    const std::string& name() const noexcept { return name_; }
    Result<PortInfo> port(std::uint8_t portNum) const;
    Result<Gid> gid(std::uint8_t portNum, int index) const;
    // The index of the port's RoCE v2 IPv4-mapped GID (what Linux SMC-R v2 uses).
    Result<int> findRoceV2Ipv4Gid(std::uint8_t portNum) const;
    // Every RoCE v2 IPv4-mapped GID's index (one per IPv4 address of the netdev).
    Result<std::vector<int>> roceV2Ipv4Gids(std::uint8_t portNum) const;

    const std::shared_ptr<ibv_context>& shared() const noexcept { return ctx_; }

private:
    std::shared_ptr<ibv_context> ctx_;
    std::string name_;
};

class ProtectionDomain
{
public:
    static Result<ProtectionDomain> create(const Context& context);
    ibv_pd* get() const noexcept { return pd_.get(); }
    const std::shared_ptr<ibv_pd>& shared() const noexcept { return pd_; }

private:
    std::shared_ptr<ibv_pd> pd_;
};

class MemoryRegion
{
public:
    static Result<MemoryRegion> create(const ProtectionDomain& pd, void* addr, std::size_t length,
                                       int access);
    ibv_mr* get() const noexcept { return mr_.get(); }
    std::uint32_t lkey() const noexcept { return mr_->lkey; }
    std::uint32_t rkey() const noexcept { return mr_->rkey; }
    std::uint64_t addr() const noexcept { return reinterpret_cast<std::uintptr_t>(mr_->addr); }

private:
    std::shared_ptr<ibv_mr> mr_;
};

class CompletionChannel
{
public:
    static Result<CompletionChannel> create(const Context& context);
    ibv_comp_channel* get() const noexcept { return channel_.get(); }
    const std::shared_ptr<ibv_comp_channel>& shared() const noexcept { return channel_; }

private:
    std::shared_ptr<ibv_comp_channel> channel_;
};

class CompletionQueue
{
public:
    static Result<CompletionQueue> create(const Context& context, int entries,
                                          const CompletionChannel* channel = nullptr);
    ibv_cq* get() const noexcept { return cq_.get(); }
    const std::shared_ptr<ibv_cq>& shared() const noexcept { return cq_; }
    // ibv_poll_cq: a count, or negative on a CQ error.
    Result<int> poll(ibv_wc* wc, int max) const noexcept;
    Result<void> requestNotify() const noexcept;

private:
    std::shared_ptr<ibv_cq> cq_;
};

// What one side of an RC connection tells the other.
struct Endpoint {
    std::uint32_t qpn = 0;
    std::uint32_t psn = 0; // 24 bits
    Gid gid{};
    ibv_mtu mtu = IBV_MTU_1024;
};

struct QueuePairCaps {
    std::uint32_t maxSendWr = 48;
    std::uint32_t maxRecvWr = 48;
    std::uint32_t maxSendSge = 2;
    std::uint32_t maxRecvSge = 1;
};

class QueuePair
{
public:
    static Result<QueuePair> createRc(const ProtectionDomain& pd, const CompletionQueue& sendCq,
                                      const CompletionQueue& recvCq, const QueuePairCaps& caps);
    ibv_qp* get() const noexcept { return qp_.get(); }
    std::uint32_t qpn() const noexcept { return qp_->qp_num; }
    const QueuePairCaps& caps() const noexcept { return caps_; }

    // RESET -> INIT: receives may be posted from here on.
    Result<void> toInit(std::uint8_t portNum);
    // INIT -> RTR -> RTS towards `peer`, with Linux SMC-R's RC attributes
    // (timeout 15, retry 7, RNR retry 7 = infinite, min RNR timer 5).
    Result<void> toRts(std::uint8_t portNum, int gidIndex, std::uint32_t localPsn,
                       const Endpoint& peer);
    Result<void> toError() noexcept;
    Result<ibv_qp_state> state() const noexcept;

private:
    std::shared_ptr<ibv_qp> qp_;
    QueuePairCaps caps_;
};

} // namespace smc::rdma
