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
#include "base/sys_error.h"
#include "base/wire_ids.h"

namespace smc::rdma
{

// --- Errors: the verbs conventions. Verbs that return a pointer give NULL and errno
// (smc::lastError), those that return an int 0 or the errno value itself (smc::errnoCode).

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

using smc::Gid;
using smc::Mac;

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

// What every handle below is: a shared_ptr to one verbs object whose deleter
// calls `Destroy` on it (a failure is logged) and only then lets go of the
// parents it keeps. Copies share the object. Empty until made by a create().
template <typename T, int (*Destroy)(T*)> class Handle
{
public:
    T* get() const noexcept { return handle_.get(); }
    explicit operator bool() const noexcept { return handle_ != nullptr; }
    const std::shared_ptr<T>& shared() const noexcept { return handle_; }

protected:
    // Own `raw`; `what` names Destroy in the log. Defined in verbs.cpp, the
    // only place handles are made.
    template <typename... Parents>
    void adopt(T* raw, const char* what, std::shared_ptr<Parents>... parents);

private:
    std::shared_ptr<T> handle_;
};

class Context : public Handle<ibv_context, ibv_close_device>
{
public:
    // Opens the named device; an empty name takes the first one.
    static Result<Context> open(std::string_view name = {});

    const std::string& name() const noexcept { return name_; }
    Result<PortInfo> port(std::uint8_t portNum) const;
    Result<Gid> gid(std::uint8_t portNum, int index) const;
    // The index of the port's RoCE v2 IPv4-mapped GID (what Linux SMC-R v2 uses).
    Result<int> findRoceV2Ipv4Gid(std::uint8_t portNum) const;
    // Every RoCE v2 IPv4-mapped GID's index (one per IPv4 address of the netdev).
    Result<std::vector<int>> roceV2Ipv4Gids(std::uint8_t portNum) const;
    // The MAC of the netdev behind a RoCE GID (what SMC-R v1's CLC carries). Errors: the
    // device's for the GID, no_such_device (a GID without a netdev), the netdev's ioctl.
    Result<Mac> gidMac(std::uint8_t portNum, int index) const;

    // The device's asynchronous events (port up and down, fatal errors): a descriptor
    // that turns readable when one is pending, and the next one, acknowledged.
    // nextPortEvent() never blocks (it puts the descriptor in non-blocking mode):
    // resource_unavailable_try_again when none is pending; events that are not about a
    // port come back with `port` 0.
    int asyncFd() const noexcept { return get()->async_fd; }
    struct AsyncEvent {
        ibv_event_type type;
        std::uint8_t port;
    };
    Result<AsyncEvent> nextAsyncEvent() const;

private:
    std::string name_;
};

class ProtectionDomain : public Handle<ibv_pd, ibv_dealloc_pd>
{
public:
    static Result<ProtectionDomain> create(const Context& context);
};

class MemoryRegion : public Handle<ibv_mr, ibv_dereg_mr>
{
public:
    static Result<MemoryRegion> create(const ProtectionDomain& pd, void* addr, std::size_t length,
                                       int access);
    std::uint32_t lkey() const noexcept { return get()->lkey; }
    std::uint32_t rkey() const noexcept { return get()->rkey; }
    std::uint64_t addr() const noexcept { return reinterpret_cast<std::uintptr_t>(get()->addr); }
};

class CompletionChannel : public Handle<ibv_comp_channel, ibv_destroy_comp_channel>
{
public:
    static Result<CompletionChannel> create(const Context& context);
};

class CompletionQueue : public Handle<ibv_cq, ibv_destroy_cq>
{
public:
    static Result<CompletionQueue> create(const Context& context, int entries,
                                          const CompletionChannel* channel = nullptr);
    // ibv_poll_cq: a count, or negative on a CQ error.
    Result<int> poll(ibv_wc* wc, int max) const noexcept;
    Result<void> requestNotify() const noexcept;
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

class QueuePair : public Handle<ibv_qp, ibv_destroy_qp>
{
public:
    static Result<QueuePair> createRc(const ProtectionDomain& pd, const CompletionQueue& sendCq,
                                      const CompletionQueue& recvCq, const QueuePairCaps& caps);
    std::uint32_t qpn() const noexcept { return get()->qp_num; }
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
    QueuePairCaps caps_;
};

} // namespace smc::rdma
