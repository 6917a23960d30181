// SPDX-License-Identifier: MIT
// Result: values, errors, and value() on an error failing the same way in every build type.
#include "base/result.h"

#include <string>

#include <gtest/gtest.h>

#include "pool/errors.h"

namespace smc
{
namespace
{

TEST(Result, HoldsAValueOrAnError)
{
    Result<std::string> ok(std::string("rmb"));
    ASSERT_TRUE(ok);
    EXPECT_EQ(*ok, "rmb");
    EXPECT_FALSE(ok.error());
    Result<std::string> bad(PoolErrc::LimitReached);
    ASSERT_FALSE(bad);
    EXPECT_EQ(bad.error(), PoolErrc::LimitReached);
    Result<void> done;
    EXPECT_TRUE(done);
    Result<void> failed(std::make_error_code(std::errc::timed_out));
    EXPECT_EQ(failed.error(), std::errc::timed_out);
}

// Not an assert (gone with NDEBUG): the benchmarks' release builds abort too.
TEST(ResultDeathTest, ValueOnAnErrorAbortsWithTheError)
{
    GTEST_FLAG_SET(death_test_style, "threadsafe");
    Result<int> bad(PoolErrc::OutOfMemory);
    EXPECT_DEATH((void)bad.value(), "Result::value\\(\\) called on an error: out of memory");
    EXPECT_DEATH((void)*bad, "smc.pool");
}

} // namespace
} // namespace smc
