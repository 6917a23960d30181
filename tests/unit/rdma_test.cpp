// SPDX-License-Identifier: MIT
// rdma/ parts that need no device: error normalisation, GID classes, WR halving, no-RDMA hosts.
#include <cerrno>
#include <type_traits>

#include <gtest/gtest.h>

#include "rdma/rc_link.h"
#include "rdma/verbs.h"

namespace smc::rdma
{
namespace
{

TEST(VerbsErrors, ThreeConventionsNormalised)
{
    errno = ENOMEM;
    EXPECT_EQ(lastError(), std::errc::not_enough_memory);
    errno = 0;
    EXPECT_EQ(lastError(), std::errc::io_error) << "NULL without errno is still an error";
    EXPECT_FALSE(errnoCode(0));
    EXPECT_EQ(errnoCode(EINVAL), std::errc::invalid_argument);
    EXPECT_FALSE(completionError(IBV_WC_SUCCESS));
    const std::error_code rae = completionError(IBV_WC_REM_ACCESS_ERR);
    EXPECT_EQ(rae.category().name(), std::string("ibv_wc"));
    EXPECT_NE(rae.message().find("remote access"), std::string::npos) << rae.message();
}

TEST(Gid, Ipv4MappedIsRecognised)
{
    Gid v4{};
    v4[10] = v4[11] = 0xff;
    v4[12] = 192;
    v4[15] = 1;
    EXPECT_TRUE(isIpv4Mapped(v4));
    Gid linkLocal{};
    linkLocal[0] = 0xfe;
    linkLocal[1] = 0x80;
    EXPECT_FALSE(isIpv4Mapped(linkLocal));
}

TEST(WorkRequests, HalvingFollowsLinux)
{
    std::uint32_t send = 16, recv = 48;
    EXPECT_FALSE(halveWrCounts(send, recv)) << "defaults are the floor";
    send = 128;
    recv = 384;
    EXPECT_TRUE(halveWrCounts(send, recv));
    EXPECT_EQ(send, 64u);
    EXPECT_EQ(recv, 192u);
    EXPECT_TRUE(halveWrCounts(send, recv));
    EXPECT_TRUE(halveWrCounts(send, recv));
    EXPECT_EQ(send, 16u);
    EXPECT_FALSE(halveWrCounts(send, recv));
    EXPECT_EQ(send, 16u) << "unchanged when giving up";
}

TEST(Handles, EmptyUntilCreatedAndCopiesShare)
{
    EXPECT_FALSE(Context{});
    EXPECT_EQ(ProtectionDomain{}.get(), nullptr);
    EXPECT_EQ(CompletionChannel{}.shared(), nullptr);
    EXPECT_FALSE(CompletionQueue{});
    EXPECT_FALSE(QueuePair{});
    static_assert(std::is_copy_constructible_v<MemoryRegion>);
    static_assert(!std::is_convertible_v<QueuePair, bool>, "operator bool is explicit");
}

TEST(Devices, NoRdmaIsAClearErrorNotACrash)
{
    // Without kernel RDMA support the device list is NULL with ENOSYS; with
    // support but no device it is empty. Either way: an error, no crash.
    Result<std::vector<std::string>> names = listDevices();
    Result<Context> ctx = Context::open();
    if (names) {
        EXPECT_FALSE(names->empty());
        EXPECT_TRUE(ctx) << ctx.error().message();
    } else {
        EXPECT_TRUE(names.error() == std::errc::function_not_supported ||
                    names.error() == std::errc::no_such_device)
            << names.error().message();
        ASSERT_FALSE(ctx);
        EXPECT_EQ(ctx.error(), names.error());
    }
    Result<Context> bogus = Context::open("no-such-rdma-device");
    EXPECT_FALSE(bogus);
}

} // namespace
} // namespace smc::rdma
