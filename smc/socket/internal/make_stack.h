// SPDX-License-Identifier: MIT
// makeStack and coreOf: a stack with hooks (tests, benchmarks, tools), and the core behind one.
#pragma once

#include <memory>

#include "smc/socket/stack.h"
#include "smc/stack/stack_core.h"

namespace smc
{

// SmcStack::create with hooks (an executor, an in-process link provider). Errors:
// StackCore::create's. Does not block.
Result<std::unique_ptr<SmcStack>> makeStack(StackConfig config, const StackHooks& hooks);
// The stack behind a handle.
StackCore& coreOf(SmcStack& stack) noexcept;

} // namespace smc
