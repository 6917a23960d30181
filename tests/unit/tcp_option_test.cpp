// SPDX-License-Identifier: MIT
// SMC's TCP option by BPF on this host's kernel: a marked socket's SYN carries it, another's
// does not. Needs root (or CAP_BPF and CAP_NET_ADMIN) and cgroup v2; without them it exits 77.
#include "smc/net/tcp_option.h"

#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/socket.h>

#include <algorithm>
#include <array>
#include <cstdio>

#include <gtest/gtest.h>

#include "smc/net/tcp.h"

namespace smc
{
namespace
{

using namespace std::chrono_literals;

std::unique_ptr<net::SmcTcpOption> option;

// Whether the SYN the listener saved for `accepted` had kind 254, length 6, E2 D4 C3 D9.
bool synOffersSmc(int accepted)
{
    std::array<std::uint8_t, 512> syn{};
    socklen_t len = syn.size();
    EXPECT_EQ(::getsockopt(accepted, IPPROTO_TCP, TCP_SAVED_SYN, syn.data(), &len), 0);
    constexpr std::array<std::uint8_t, 6> kOption{0xfe, 0x06, 0xe2, 0xd4, 0xc3, 0xd9};
    return std::search(syn.begin(), syn.begin() + len, kOption.begin(), kOption.end()) !=
           syn.begin() + len;
}

TEST(SmcTcpOption, OnlyAMarkedSocketOffersSmcInItsSyn)
{
    auto at = net::resolve("127.0.0.1", 0, true).value();
    UniqueFd l = std::move(net::listenTcp(at, 4)).value();
    const int one = 1;
    ASSERT_EQ(::setsockopt(l.get(), IPPROTO_TCP, TCP_SAVE_SYN, &one, sizeof one), 0);
    auto to = net::resolve("127.0.0.1", net::localAddress(l.get()).value().port(), false).value();
    for (const bool marked : {true, false, true}) {
        Result<UniqueFd> c =
            net::connectTcp(to, net::deadlineAfter(5s), marked ? option.get() : nullptr);
        ASSERT_TRUE(c) << c.error().message();
        ASSERT_TRUE(net::waitFor(l.get(), POLLIN, net::deadlineAfter(5s)));
        UniqueFd s(::accept4(l.get(), nullptr, nullptr, SOCK_CLOEXEC));
        ASSERT_TRUE(s.valid());
        EXPECT_EQ(synOffersSmc(s.get()), marked);
    }
}

} // namespace
} // namespace smc

int main(int argc, char** argv)
{
    testing::InitGoogleTest(&argc, argv);
    smc::Result<std::unique_ptr<smc::net::SmcTcpOption>> attached =
        smc::net::SmcTcpOption::attach();
    if (!attached) {
        std::printf("no SMC TCP option here (%s): skipped\n", attached.error().message().c_str());
        return 77;
    }
    smc::option = std::move(*attached);
    const int rc = RUN_ALL_TESTS();
    smc::option.reset(); // detached before exit
    return rc;
}
