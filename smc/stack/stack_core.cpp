// SPDX-License-Identifier: MIT
// StackCore: the loopback-ism device, SMC-D pool, SMC-R device and groups, counters, the list.
#include "smc/stack/stack_core.h"

#include <algorithm>
#include <new>
#include <random>

#include <sys/resource.h>

#include "smc/ism/ism_registrar.h"
#include "smc/ism/shm_ism.h"
#include "smc/net/ready_fd.h"
#include "smc/net/tcp_option.h"
#include "smc/stack/stack_smcr.h"
#include "smc/transport/rc_channel.h"

namespace smc
{

namespace
{
// All 8 bytes random. Linux puts the RoCE port's MAC after two random bytes,
// but processes here share the MAC: that left 16 bits to tell them apart, and
// peers only compare the id.
SystemId makeSystemId()
{
    std::random_device rd;
    SystemId id{};
    for (auto& b : id)
        b = static_cast<std::uint8_t>(rd());
    return id;
}

// The index of `gid` in the port's RoCE v2 IPv4 GIDs; a zero GID: the first of them.
// Errors: the device's, address_not_available (none, or not this one).
Result<int> gidIndex(const rdma::Context& ctx, std::uint8_t port, const Gid& gid)
{
    Result<std::vector<int>> all = ctx.roceV2Ipv4Gids(port);
    if (!all)
        return all.error();
    for (int index : *all) {
        Result<rdma::Gid> g = ctx.gid(port, index);
        if (gid == Gid{} || (g && std::equal(g->begin(), g->end(), gid.begin())))
            return index;
    }
    return std::make_error_code(std::errc::address_not_available);
}
} // namespace

// The SMC-R device: a provider (ours or injected), what CLC says of it, the groups.
Result<void> StackCore::openSmcr(const SmcrConfig& c, LinkProvider* provider)
{
    auto smcr = std::make_unique<Smcr>();
    smcr->gid = c.gid;
    smcr->mac = c.mac;
    if (provider != nullptr) {
        if (c.gid == Gid{})
            return std::make_error_code(std::errc::invalid_argument);
        smcr->provider = provider;
    } else if (!c.device.empty()) {
        Result<rdma::Context> ctx = rdma::Context::open(c.device);
        if (!ctx)
            return ctx.error();
        if (smcr->gid == Gid{} || smcr->mac == Mac{}) {
            Result<int> index = gidIndex(*ctx, c.link.port, smcr->gid);
            if (!index)
                return index.error();
            Result<rdma::Gid> gid = ctx->gid(c.link.port, *index);
            // A v1 peer matches groups by our MAC too (and Linux takes the QP's dmac from
            // it): the GID's netdev's, not zeros.
            Result<rdma::Mac> mac =
                gid ? ctx->gidMac(c.link.port, *index) : Result<rdma::Mac>(gid.error());
            if (!mac)
                return mac.error();
            std::copy(gid->begin(), gid->end(), smcr->gid.begin());
            if (smcr->mac == Mac{})
                std::copy(mac->begin(), mac->end(), smcr->mac.begin());
        }
        std::vector<rdma::Context> devices;
        devices.push_back(std::move(*ctx));
        for (const std::string& name : c.alternates) {
            Result<rdma::Context> alternate = rdma::Context::open(name);
            if (!alternate)
                return alternate.error();
            devices.push_back(std::move(*alternate));
        }
        ownProvider_ = std::make_unique<RdmaLinkProvider>(std::move(devices), c.link, executor_);
        smcr->provider = ownProvider_.get();
    } else {
        return std::make_error_code(std::errc::invalid_argument);
    }
    smcr->systemId = c.systemId ? *c.systemId : makeSystemId();
    smcr->offerV2 = c.offerV2;
    LinkGroupConfig groups;
    groups.maxConns = c.groups.maxConns;
    groups.maxLinks = c.groups.maxLinks;
    groups.timeouts = c.groups.timeouts;
    groups.idleFree = c.groups.idleFree;
    groups.pool.tech = Tech::SmcR;
    groups.executor = &executor_;
    smcr->groups = std::make_unique<LinkGroupManager>(groups, *smcr->provider);
    smcr_ = std::move(smcr);
    return {};
}

StackCore::StackCore(StackConfig config, Executor& executor, clc::Eid ueid)
    : config_(std::move(config)), executor_(executor), later_(executor, kLaterDelay), ueid_(ueid)
{
}

Result<std::unique_ptr<StackCore>> StackCore::create(StackConfig config, const StackHooks& hooks)
{
    const std::optional<clc::Eid> ueid = clc::makeEid(config.ueid);
    if (!ueid || config.handshakeThreads == 0)
        return std::make_error_code(std::errc::invalid_argument);
    Executor& executor = hooks.executor ? *hooks.executor : Executor::shared();
    std::unique_ptr<StackCore> stack(new StackCore(config, executor, *ueid));
    // Only blocking threads: a handshake waits for its peer's CLC.
    stack->handshakes_ = std::make_unique<Executor>(
        Executor::Config{.threads = 0, .maxBlocking = config.handshakeThreads});
    Result<std::unique_ptr<ShmIsm>> device = ShmIsm::open(executor);
    if (!device)
        return device.error();
    stack->device_ = std::move(*device);
    stack->registrar_ = std::make_unique<IsmRegistrar>(*stack->device_);
    PoolConfig pool;
    pool.tech = Tech::SmcD;
    pool.policy = config.poolPolicy;
    pool.memoryLimit = config.poolMemoryLimit;
    pool.allocator = &stack->device_->allocator();
    Result<std::unique_ptr<BufferPool>> made = BufferPool::create(pool, *stack->registrar_);
    if (!made)
        return made.error();
    stack->pool_ = std::move(*made);
    // Each kept RMB holds three fds (its memfd, its doorbell's ends): at most a sixteenth of
    // the descriptor limit's worth of them.
    rlimit files{};
    const std::size_t fdShare =
        ::getrlimit(RLIMIT_NOFILE, &files) == 0 ? static_cast<std::size_t>(files.rlim_cur / 16) : 0;
    stack->kept_ = std::make_unique<KeptDmbs>(config.keptDmbBytes / 2, config.keptDmbBytes,
                                              std::min<std::size_t>(fdShare, 4096));
    if (config.poolTrimInterval.count() > 0) {
        StackCore* s = stack.get();
        stack->trimTimer_ = std::make_unique<PeriodicTimer>(executor, config.poolTrimInterval,
                                                            [s] { s->trimPool(); });
    }
    if (config.smcr)
        if (Result<void> r = stack->openSmcr(*config.smcr, hooks.provider); !r)
            return r.error();
    // Linux peers need the option; only a real RDMA device reaches them.
    stack->tcpOptionError_ = std::make_error_code(std::errc::function_not_supported);
    if (config.smcTcpOption && config.smcr && !config.smcr->device.empty()) {
        Result<std::unique_ptr<net::SmcTcpOption>> option = net::SmcTcpOption::attach();
        if (option)
            stack->tcpOption_ = std::move(*option);
        stack->tcpOptionError_ = option ? std::error_code() : option.error();
    }
    return stack;
}

StackCore::~StackCore()
{
    later_.close();
    trimTimer_.reset();
    handshakes_.reset(); // a running handshake still uses the rest
    smcr_.reset();       // its groups, before the provider they use
    ownProvider_.reset();
    if (kept_) // not when create() failed before it
        for (const BufferRef& rmb : kept_->drain())
            toPool(rmb);
    pool_.reset();
    registrar_.reset();
    device_.reset();
}

// Keeps free what the last interval leased (at least the configured floor), frees the rest.
void StackCore::trimPool() noexcept
{
    const PoolStats s = pool_->stats();
    std::size_t leased = 0;
    for (unsigned cls = 0; cls < kSizeClasses; ++cls) {
        const std::uint64_t n = s.rmb.classHistogram[cls] + s.sndbuf.classHistogram[cls];
        leased += (n - leasesAtTrim_[cls]) * classBytes(cls);
        leasesAtTrim_[cls] = n;
    }
    (void)pool_->trim(std::max(leased, config_.poolKeepFreeBytes));
    for (const BufferRef& rmb : kept_->trim())
        toPool(rmb);
    device_->trimRemotes();
}

StackStats StackCore::stats() const
{
    StackStats s;
    {
        MutexLocker lock(mutex_);
        s = stats_;
    }
    s.keptRmbBytes = kept_->bytes();
    s.readyPairsReused = net::ReadyFd::reused();
    return s;
}

PoolStats StackCore::poolStats() const
{
    return pool_->stats();
}

std::vector<ConnectionInfo> StackCore::connections() const
{
    std::vector<std::shared_ptr<Listed>> live;
    {
        MutexLocker lock(mutex_);
        for (const auto& weak : listed_)
            if (auto s = weak.lock())
                live.push_back(std::move(s));
    }
    std::vector<ConnectionInfo> out;
    for (const auto& s : live)
        if (s->connected())
            out.push_back(s->info());
    return out;
}

const net::SocketMarker* StackCore::tcpOption() const noexcept
{
    return tcpOption_.get();
}

std::vector<LinkInfo> StackCore::smcrLinks() const
{
    std::vector<LinkInfo> out;
    if (smcr_)
        for (const auto& g : smcr_->groups->groups())
            std::ranges::copy(g->links(), std::back_inserter(out));
    return out;
}

void StackCore::markServerRmb(std::uint64_t dmbToken, bool server)
{
    MutexLocker lock(mutex_);
    if (server)
        serverRmbs_.insert(dmbToken);
    else
        serverRmbs_.erase(dmbToken);
}

bool StackCore::isServerRmb(std::uint64_t dmbToken) const
{
    MutexLocker lock(mutex_);
    return serverRmbs_.contains(dmbToken);
}

void StackCore::countSmcd(bool server) noexcept
{
    MutexLocker lock(mutex_);
    ++(server ? stats_.smcdServer : stats_.smcdClient);
}

void StackCore::countSmcr(bool server) noexcept
{
    MutexLocker lock(mutex_);
    ++(server ? stats_.smcrServer : stats_.smcrClient);
}

void StackCore::countTcpForced() noexcept
{
    MutexLocker lock(mutex_);
    ++stats_.tcpForced;
}

void StackCore::countFallback(bool server, clc::DeclineCode reason)
{
    MutexLocker lock(mutex_);
    ++(server ? stats_.serverFallbacks : stats_.clientFallbacks)[reason];
}

void StackCore::countHandshakeError() noexcept
{
    MutexLocker lock(mutex_);
    ++stats_.handshakeErrors;
}

void StackCore::countHandshakeLimited() noexcept
{
    MutexLocker lock(mutex_);
    ++stats_.handshakesLimited;
}

void StackCore::enroll(const std::shared_ptr<Listed>& connection)
{
    MutexLocker lock(mutex_);
    // Forget the dead now and then, so the list stays as long as the live connections.
    if (listed_.size() >= 64 && listed_.size() % 64 == 0)
        std::erase_if(listed_, [](const std::weak_ptr<Listed>& w) { return w.expired(); });
    listed_.push_back(connection);
}

Result<BufferRef> StackCore::takeRmb(const IsmGid& peer, std::size_t bytes)
{
    if (Result<unsigned> cls = sizeClassFor(bytes, Tech::SmcD))
        if (BufferRef kept = kept_->take(peer, classBytes(*cls))) {
            MutexLocker lock(mutex_);
            ++stats_.rmbsReused;
            return kept;
        }
    Result<BufferRef> rmb = pool_->acquire(BufferKind::Rmb, bytes);
    if (!rmb && kept_->bytes() > 0) {
        // Idle buffers must not refuse a connection (the pool's memory limit, the device's
        // DMB limit, fds): they go back, and the acquire is tried again.
        for (const BufferRef& idle : kept_->drain())
            toPool(idle);
        rmb = pool_->acquire(BufferKind::Rmb, bytes);
    }
    return rmb;
}

void StackCore::giveBack(const BufferRef& rmb, const IsmGid* peer) noexcept
{
    try {
        markServerRmb(rmb->dmbToken(), false);
        if (peer != nullptr) {
            // The peer has its mapping: no attach is due until the next grant.
            device_->dropGrant(rmb->dmbToken());
            if (!kept_->keep(*peer, rmb))
                return;
        }
    } catch (const std::bad_alloc&) { // not kept, then: to the pool
    }
    toPool(rmb);
}

void StackCore::toPool(const BufferRef& rmb) noexcept
{
    if (Result<DmbToken> token = device_->revoke(rmb->dmbToken()))
        rmb->setDmbToken(*token);
    (void)pool_->release(rmb);
}

} // namespace smc
