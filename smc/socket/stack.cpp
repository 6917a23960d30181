// SPDX-License-Identifier: MIT
// SmcStack: the process's loopback-ism device, SMC-D pool, statistics and connection list.
#include "smc/socket/stack.h"

#include "smc/ism/ism_registrar.h"
#include "smc/ism/shm_ism.h"
#include "smc/socket/internal/socket_impl.h"

namespace smc
{

const char* toString(Transport transport) noexcept
{
    switch (transport) {
    case Transport::SmcD:
        return "SMC-D";
    case Transport::Tcp:
        return "TCP";
    }
    return "?";
}

SmcStack::SmcStack(StackConfig config, Executor& executor, clc::Eid ueid)
    : config_(std::move(config)), executor_(executor), ueid_(ueid)
{
}

Result<std::unique_ptr<SmcStack>> SmcStack::create(StackConfig config)
{
    const std::optional<clc::Eid> ueid = clc::makeEid(config.ueid);
    if (!ueid)
        return std::make_error_code(std::errc::invalid_argument);
    Executor& executor = config.executor ? *config.executor : Executor::shared();
    std::unique_ptr<SmcStack> stack(new SmcStack(config, executor, *ueid));
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
    return stack;
}

SmcStack::~SmcStack()
{
    pool_.reset();
    registrar_.reset();
    device_.reset();
}

StackStats SmcStack::stats() const
{
    MutexLocker lock(mutex_);
    return stats_;
}

PoolStats SmcStack::poolStats() const
{
    return pool_->stats();
}

std::vector<ConnectionInfo> SmcStack::connections() const
{
    std::vector<std::shared_ptr<SocketImpl>> live;
    {
        MutexLocker lock(mutex_);
        for (const auto& weak : sockets_)
            if (auto s = weak.lock())
                live.push_back(std::move(s));
    }
    std::vector<ConnectionInfo> out;
    for (const auto& s : live)
        if (s->connected())
            out.push_back(s->info());
    return out;
}

void SmcStack::countSmcd(bool server) noexcept
{
    MutexLocker lock(mutex_);
    ++(server ? stats_.smcdServer : stats_.smcdClient);
}

void SmcStack::countTcpForced() noexcept
{
    MutexLocker lock(mutex_);
    ++stats_.tcpForced;
}

void SmcStack::countFallback(bool server, clc::DeclineCode reason)
{
    MutexLocker lock(mutex_);
    ++(server ? stats_.serverFallbacks : stats_.clientFallbacks)[reason];
}

void SmcStack::countHandshakeError() noexcept
{
    MutexLocker lock(mutex_);
    ++stats_.handshakeErrors;
}

void SmcStack::enroll(const std::shared_ptr<SocketImpl>& socket)
{
    MutexLocker lock(mutex_);
    // Forget the dead now and then, so the list stays as long as the live connections.
    if (sockets_.size() >= 64 && sockets_.size() % 64 == 0)
        std::erase_if(sockets_, [](const std::weak_ptr<SocketImpl>& w) { return w.expired(); });
    sockets_.push_back(socket);
}

} // namespace smc
