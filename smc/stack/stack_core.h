// SPDX-License-Identifier: MIT
// StackCore: what a stack's connections share: devices, pools, SMC-R groups, counters, a list.
#pragma once

#include <array>
#include <chrono>
#include <cstdint>
#include <memory>
#include <set>
#include <vector>

#include "base/delayed_batch.h"
#include "base/executor.h"
#include "base/mutex.h"
#include "pool/buffer_pool.h"
#include "smc/clc/clc_messages.h"
#include "smc/conn/connection_info.h"
#include "smc/conn/setup.h"
#include "smc/llc/link_info.h"
#include "smc/net/socket_marker.h"
#include "smc/stack/kept_dmbs.h"
#include "smc/stack/stack_config.h"

namespace smc
{

class ShmIsm;
class IsmRegistrar;
class LinkProvider;
namespace net
{
class SmcTcpOption;
}

// What a stack is made with besides its StackConfig, for tests and benchmarks: the executor
// its events and timers run on (null: Executor::shared()), and an SMC-R link provider in
// place of an ibverbs device (InprocFabric; not owned, must outlive the stack; SmcrConfig's
// device is ignored then, its GID must be set).
struct StackHooks {
    Executor* executor = nullptr;
    LinkProvider* provider = nullptr;
};

// A connection the stack lists while it is open (smcss).
class Listed
{
public:
    virtual bool connected() const noexcept = 0;
    virtual ConnectionInfo info() const = 0;

protected:
    ~Listed() = default;
};

// How long StackCore::later() lets work wait (at least; at most twice this).
inline constexpr std::chrono::milliseconds kLaterDelay{50};

// The stack's own side of SmcStack (the public handle holds one). Thread-safe.
class StackCore final : public net::DmbHome
{
public:
    // Opens the loopback-ism device, the SMC-D pool and the SMC-R device if configured.
    // Errors: SmcStack::create's; invalid_argument also for a provider with a zero GID.
    // Does not block.
    static Result<std::unique_ptr<StackCore>> create(StackConfig config, const StackHooks& hooks);
    ~StackCore();
    StackCore(const StackCore&) = delete;
    StackCore& operator=(const StackCore&) = delete;

    StackStats stats() const;
    PoolStats poolStats() const;
    std::vector<ConnectionInfo> connections() const;
    std::vector<LinkInfo> smcrLinks() const;

    Executor& executor() noexcept { return executor_; }
    // Work worth doing only for connections still open a while later (kLaterDelay): most
    // connections of a web server's clients are over by then.
    DelayedBatch& later() noexcept { return later_; }
    // Server handshakes and asynchronous connects run here (postBlocking), at most
    // StackConfig::handshakeThreads at once.
    Executor& handshakes() noexcept { return *handshakes_; }
    ShmIsm& device() noexcept { return *device_; }
    BufferPool& pool() noexcept { return *pool_; }
    const clc::Eid& ueid() const noexcept { return ueid_; }
    void countSmcd(bool server) noexcept;
    void countSmcr(bool server) noexcept;
    // SMC-R, when configured (else null): smc/stack/stack_smcr.h.
    struct Smcr;
    Smcr* smcr() noexcept { return smcr_.get(); }
    // SMC's TCP option for our sockets' handshakes, or null (tcpOptionError() says why).
    const net::SocketMarker* tcpOption() const noexcept;
    std::error_code tcpOptionError() const noexcept { return tcpOptionError_; }
    void countTcpForced() noexcept;
    void countFallback(bool server, clc::DeclineCode reason);
    void countHandshakeError() noexcept;
    void countHandshakeLimited() noexcept;
    void enroll(const std::shared_ptr<Listed>& connection);
    // An SMC-D RMB of `bytes` for a connection with `peer`: one kept for that peer process
    // (granted to it before, done with by it, its head cleared) or one from the pool (where
    // an idle kept one goes back first if the pool is at its limit). Errors: the pool's.
    // Does not block.
    Result<BufferRef> takeRmb(const IsmGid& peer, std::size_t bytes);
    // An SMC-D RMB of ours goes back (OwnDmb), unmarked: kept for `peer` when given and there
    // is room, else revoked into the pool.
    void giveBack(const BufferRef& rmb, const IsmGid* peer) noexcept override;
    // The SMC-D RMBs of our server connections, from their grant until they go back to the
    // pool: a CONFIRM that names one of them names no client's (a stranger claiming to be
    // us would wire two of our connections to each other).
    void markServerRmb(std::uint64_t dmbToken, bool server);
    bool isServerRmb(std::uint64_t dmbToken) const;

private:
    StackCore(StackConfig config, Executor& executor, clc::Eid ueid);
    Result<void> openSmcr(const SmcrConfig& config, LinkProvider* provider);
    void trimPool() noexcept;
    void toPool(const BufferRef& rmb) noexcept;

    StackConfig config_;
    Executor& executor_;
    DelayedBatch later_; // closed first: its tasks may use the rest
    clc::Eid ueid_;
    std::unique_ptr<ShmIsm> device_;
    std::unique_ptr<IsmRegistrar> registrar_;
    std::unique_ptr<BufferPool> pool_;         // its DMBs live on device_: destroyed first
    std::unique_ptr<KeptDmbs> kept_;           // of pool_: emptied into it first
    std::unique_ptr<PeriodicTimer> trimTimer_; // stopped before the pool goes
    // Leases per size class at the last trim (the timer's ticks alone touch it).
    std::array<std::uint64_t, kSizeClasses> leasesAtTrim_{};
    std::unique_ptr<LinkProvider> ownProvider_;
    std::unique_ptr<Smcr> smcr_; // its groups go before the provider
    std::unique_ptr<net::SmcTcpOption> tcpOption_;
    std::error_code tcpOptionError_;

    mutable Mutex mutex_;
    StackStats stats_ SMC_GUARDED_BY(mutex_);
    // The destructor ends it first: its running handshakes finish while the rest is here.
    std::unique_ptr<Executor> handshakes_;
    std::vector<std::weak_ptr<Listed>> listed_ SMC_GUARDED_BY(mutex_);
    std::set<std::uint64_t> serverRmbs_ SMC_GUARDED_BY(mutex_);
};

} // namespace smc
