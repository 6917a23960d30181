// SPDX-License-Identifier: MIT
// Size-class rounding at its edges, for SMC-R and SMC-D.
#include "pool/size_class.h"

#include <gtest/gtest.h>

namespace smc
{
namespace
{

static_assert(classBytes(0) == 16384);
static_assert(classBytes(kMaxClassSmcR) == std::size_t{512} << 20);
static_assert(classBytes(kMaxClassSmcD) == std::size_t{1} << 20);
static_assert(compressBufferSize(65536, Tech::SmcR) == 2);
static_assert(compressBufferSize(65537, Tech::SmcR) == 3);

struct Edge {
    std::size_t bytes;
    int expectedClass; // -1 = InvalidSize
};

void checkEdges(Tech tech, std::initializer_list<Edge> edges)
{
    for (const Edge& e : edges) {
        Result<unsigned> cls = sizeClassFor(e.bytes, tech);
        if (e.expectedClass < 0) {
            ASSERT_FALSE(cls) << e.bytes;
            EXPECT_EQ(cls.error(), PoolErrc::InvalidSize) << e.bytes;
            EXPECT_FALSE(cls.error().message().empty());
        } else {
            ASSERT_TRUE(cls) << e.bytes;
            EXPECT_EQ(*cls, static_cast<unsigned>(e.expectedClass)) << e.bytes;
            EXPECT_GE(classBytes(*cls), e.bytes) << "rounds up, never down";
        }
    }
}

TEST(SizeClass, SmcREdges)
{
    const std::size_t max = classBytes(kMaxClassSmcR);
    checkEdges(Tech::SmcR, {{0, -1},
                            {1, 0},
                            {16384, 0},
                            {16385, 1},
                            {32768, 1},
                            {32769, 2},
                            {max - 1, 15},
                            {max, 15},
                            {max + 1, -1}});
}

TEST(SizeClass, SmcDEdges)
{
    const std::size_t max = classBytes(kMaxClassSmcD);
    checkEdges(Tech::SmcD, {{0, -1}, {1, 0}, {16384, 0}, {16385, 1}, {max, 6}, {max + 1, -1}});
}

TEST(SizeClass, KernelRoundingClampsLikeLinux)
{
    // The kernel's own function: 0 is class 0 and oversize clamps to the max.
    EXPECT_EQ(compressBufferSize(0, Tech::SmcR), 0u);
    EXPECT_EQ(compressBufferSize(classBytes(kMaxClassSmcD) + 1, Tech::SmcD), kMaxClassSmcD);
    EXPECT_EQ(compressBufferSize(std::size_t{1} << 40, Tech::SmcR), kMaxClassSmcR);
    for (unsigned c = 0; c <= kMaxClassSmcR; ++c) {
        EXPECT_EQ(compressBufferSize(classBytes(c), Tech::SmcR), c);
        if (c > 0) {
            EXPECT_EQ(compressBufferSize(classBytes(c - 1) + 1, Tech::SmcR), c);
        }
    }
}

} // namespace
} // namespace smc
