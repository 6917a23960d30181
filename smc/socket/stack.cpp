// SPDX-License-Identifier: MIT
// SmcStack: the public handle on a StackCore.
#include "smc/socket/stack.h"

#include <utility>

#include "smc/socket/internal/make_stack.h"

namespace smc
{

Result<std::unique_ptr<SmcStack>> makeStack(StackConfig config, const StackHooks& hooks)
{
    Result<std::unique_ptr<StackCore>> core = StackCore::create(std::move(config), hooks);
    if (!core)
        return core.error();
    return std::unique_ptr<SmcStack>(new SmcStack(std::move(*core)));
}

StackCore& coreOf(SmcStack& stack) noexcept
{
    return *stack.core_;
}

SmcStack::SmcStack(std::unique_ptr<StackCore> core) noexcept : core_(std::move(core)) {}

SmcStack::~SmcStack() = default;

Result<std::unique_ptr<SmcStack>> SmcStack::create(StackConfig config)
{
    return makeStack(std::move(config), {});
}

StackStats SmcStack::stats() const
{
    return core_->stats();
}

PoolStats SmcStack::poolStats() const
{
    return core_->poolStats();
}

std::vector<ConnectionInfo> SmcStack::connections() const
{
    return core_->connections();
}

std::vector<LinkInfo> SmcStack::smcrLinks() const
{
    return core_->smcrLinks();
}

std::error_code SmcStack::tcpOptionError() const noexcept
{
    return core_->tcpOptionError();
}

} // namespace smc
