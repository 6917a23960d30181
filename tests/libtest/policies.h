// SPDX-License-Identifier: MIT
// The three lock policies as gtest type parameters, named "global", "bucket", "default".
#pragma once

#include <string>

#include <gtest/gtest.h>

#include "pool/buffer_pool.h"

namespace smc::test
{

template <LockPolicy P> struct PolicyTag {
    static constexpr LockPolicy kPolicy = P;
};
using Policies = ::testing::Types<PolicyTag<LockPolicy::Global>, PolicyTag<LockPolicy::Bucket>,
                                  PolicyTag<LockPolicy::Default>>;
class PolicyName
{
public:
    template <typename T> static std::string GetName(int) { return toString(T::kPolicy); }
};

} // namespace smc::test
