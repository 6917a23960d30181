// SPDX-License-Identifier: MIT
// Sockets over SMC-R on a real RDMA device: two stacks, CLC over TCP, a link broken mid-stream.
#include <atomic>
#include <cstdio>
#include <thread>
#include <vector>

#include <gtest/gtest.h>

#include "rdma/verbs.h"
#include "smc/socket/internal/make_stack.h"
#include "smc/socket/socket.h"
#include "smc/stack/stack_smcr.h"
#include "tests/libtest/rdma_device.h"
#include "tests/libtest/socket_stream.h"

namespace smc
{
namespace
{

using namespace std::chrono_literals;

// The guest's dummy0 address: TCP and the CLC prefix go where rxe0's GIDs are.
constexpr const char* kAddress = "192.0.2.1";

std::string deviceName()
{
    const std::string name = test::rdmaDeviceName();
    if (!name.empty())
        return name;
    Result<rdma::Context> first = rdma::Context::open("");
    return first ? first->name() : "";
}

std::unique_ptr<SmcStack> makeStack(unsigned maxLinks = 2)
{
    StackConfig config;
    SmcrConfig r;
    r.device = deviceName();
    r.groups.maxLinks = maxLinks;
    // A TCG guest is slow; the flows are not.
    r.groups.timeouts.firstLink = 20s;
    r.groups.timeouts.wait = 10s;
    r.groups.timeouts.testLink = 0ms;
    config.smcr = r;
    Result<std::unique_ptr<SmcStack>> stack = SmcStack::create(config);
    EXPECT_TRUE(stack) << stack.error().message();
    return stack ? std::move(*stack) : nullptr;
}

SocketOptions smcr()
{
    SocketOptions o;
    o.mode = Mode::SmcR;
    o.clcTimeout = 20s;
    o.sendTimeout = 60s; // a stuck stream fails the test instead of hanging it
    o.recvTimeout = 60s;
    return o;
}

TEST(RxeSmcrSocket, ALinkBrokenMidStreamLosesNothing)
{
    auto server = makeStack();
    auto client = makeStack();
    ASSERT_TRUE(server && client);
    Listener l = std::move(Listener::listen(*server, kAddress, 0, smcr())).value();
    Result<Socket> c = Socket::connect(*client, kAddress, l.port(), smcr());
    ASSERT_TRUE(c) << c.error().message();
    Result<Socket> s = l.accept(30s);
    ASSERT_TRUE(s) << s.error().message();
    ASSERT_EQ(c->transport(), Transport::SmcR);
    ASSERT_EQ(s->transport(), Transport::SmcR);
    std::fprintf(stderr, "connected over SMC-R\n");

    std::shared_ptr<LinkGroup> sg = coreOf(*server).smcr()->groups->groups().front();
    std::shared_ptr<LinkGroup> cg = coreOf(*client).smcr()->groups->groups().front();
    for (int i = 0; i < 3000 && (sg->activeLinks() < 2 || cg->activeLinks() < 2); ++i)
        std::this_thread::sleep_for(10ms);
    ASSERT_EQ(sg->activeLinks(), 2u) << "two GIDs on the device: a second, symmetric link";
    ASSERT_EQ(cg->activeLinks(), 2u);
    std::fprintf(stderr, "two links each side\n");

    constexpr std::uint64_t kBytes = 16 << 20;
    std::atomic<std::uint64_t> progress{0};
    std::uint64_t received = 0;
    Result<std::uint64_t> wrong = 0;
    const std::uint8_t before = s->info().linkId;
    std::thread reader([&] { wrong = test::recvStream(*s, 7, received, &progress); });
    std::thread breaker([&] {
        while (progress.load() < kBytes / 4)
            std::this_thread::sleep_for(1ms);
        // The link the connection rides now: its QP goes to ERR, as a failing port would.
        for (unsigned slot = 0; slot < 3; ++slot) {
            if (sg->linkId(slot) == before) {
                EXPECT_TRUE(sg->breakLink(slot));
                std::fprintf(stderr, "broke link %u at %llu bytes\n", unsigned{before},
                             static_cast<unsigned long long>(progress.load()));
            }
        }
    });
    Result<void> sent = test::sendStream(*c, kBytes, 7);
    std::fprintf(stderr, "sender done: %s\n", sent ? "ok" : sent.error().message().c_str());
    breaker.join();
    reader.join();
    ASSERT_TRUE(sent) << sent.error().message();
    ASSERT_TRUE(wrong) << wrong.error().message();
    EXPECT_EQ(received, kBytes);
    EXPECT_EQ(*wrong, 0u);
    EXPECT_NE(s->info().linkId, before); // failover moved it
    EXPECT_FALSE(sg->terminated());
    EXPECT_FALSE(cg->terminated());
}

// Many connections on one link, each streaming at once, half of them in small sends that
// autocork while their CDC is on its way: the link's 16 send slots are shared by all their
// WRITEs and CDCs, none waited for; every byte arrives in order, and every stream ends.
TEST(RxeSmcrSocket, SixteenConnectionsStreamOnOneLinkAtOnce)
{
    auto server = makeStack(1);
    auto client = makeStack(1);
    ASSERT_TRUE(server && client);
    constexpr int kConns = 16;
    constexpr std::uint64_t kBytes = 1 << 20;
    Listener l = std::move(Listener::listen(*server, kAddress, 0, smcr())).value();
    std::vector<Socket> clients, servers;
    for (int i = 0; i < kConns; ++i) {
        Result<Socket> c = Socket::connect(*client, kAddress, l.port(), smcr());
        ASSERT_TRUE(c) << c.error().message();
        Result<Socket> s = l.accept(30s);
        ASSERT_TRUE(s) << s.error().message();
        ASSERT_EQ(c->transport(), Transport::SmcR);
        clients.push_back(std::move(*c));
        servers.push_back(std::move(*s));
    }
    std::shared_ptr<LinkGroup> cg = coreOf(*client).smcr()->groups->groups().front();
    ASSERT_EQ(cg->activeLinks(), 1u);
    ASSERT_EQ(cg->connectionCount(), unsigned{kConns});

    std::vector<Result<void>> sent(kConns, Result<void>());
    std::vector<Result<std::uint64_t>> wrong(kConns, Result<std::uint64_t>(0));
    std::vector<std::uint64_t> received(kConns, 0);
    std::vector<std::thread> threads;
    for (int i = 0; i < kConns; ++i) {
        const unsigned seed = 100 + i;
        threads.emplace_back([&, i, seed] {
            if (i % 2 == 0) {
                sent[i] = test::sendStream(clients[i], kBytes, seed);
                return;
            }
            std::vector<std::byte> b(700);
            for (std::uint64_t at = 0; at < kBytes && sent[i];) {
                const std::size_t n = std::min<std::uint64_t>(b.size(), kBytes - at);
                for (std::size_t k = 0; k < n; ++k)
                    b[k] = test::streamByte(at + k, seed);
                for (std::size_t done = 0; done < n && sent[i];) {
                    Result<std::size_t> m = clients[i].send(std::span(b).subspan(done, n - done));
                    if (!m)
                        sent[i] = m.error();
                    else
                        done += *m;
                }
                at += n;
            }
            if (sent[i])
                sent[i] = clients[i].shutdown(Shutdown::Write);
        });
        threads.emplace_back(
            [&, i, seed] { wrong[i] = test::recvStream(servers[i], seed, received[i]); });
    }
    for (std::thread& t : threads)
        t.join();
    for (int i = 0; i < kConns; ++i) {
        ASSERT_TRUE(sent[i]) << i << ": " << sent[i].error().message();
        ASSERT_TRUE(wrong[i]) << i << ": " << wrong[i].error().message();
        EXPECT_EQ(received[i], kBytes) << i;
        EXPECT_EQ(*wrong[i], 0u) << i;
    }
    EXPECT_FALSE(cg->terminated());
}

} // namespace
} // namespace smc
