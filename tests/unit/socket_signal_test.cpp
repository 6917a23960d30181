// SPDX-License-Identifier: MIT
// A blocked send or recv on SMC-D or SMC-R that a signal handler wakes: SocketOptions::onSignal
// decides.
#include "smc/socket/socket.h"

#include <pthread.h>
#include <signal.h>

#include <gtest/gtest.h>

#include <array>
#include <atomic>
#include <thread>

#include "tests/libtest/smcr_stacks.h"
#include "tests/libtest/socket_stream.h"

namespace smc
{
namespace
{

using namespace std::chrono_literals;
using Action = struct sigaction;
namespace stacks = test::smcr_stacks;

std::atomic<int> handled{0};
std::atomic<int> asked{0};

void onUsr1(int) noexcept
{
    handled.fetch_add(1, std::memory_order_relaxed);
}

bool fail(bool /*timed*/) noexcept
{
    asked.fetch_add(1, std::memory_order_relaxed);
    return true;
}

bool goOn(bool /*timed*/) noexcept
{
    asked.fetch_add(1, std::memory_order_relaxed);
    return false;
}

// SIGUSR1 caught (without SA_RESTART) for the test's life, and sent to the test's thread every
// few milliseconds while pestering: the first may come before the call sleeps. The parameter:
// the connection's transport (SMC-R over in-process links).
class SocketSignal : public ::testing::TestWithParam<Transport>
{
protected:
    void SetUp() override
    {
        stacks::Fabric* fabric = GetParam() == Transport::SmcR ? &fabric_ : nullptr;
        server_ = stacks::makeStack(fabric, stacks::kServerId);
        client_ = stacks::makeStack(fabric, stacks::kClientId);
        handled = 0;
        asked = 0;
        Action action{};
        action.sa_handler = onUsr1;
        sigemptyset(&action.sa_mask);
        ASSERT_EQ(::sigaction(SIGUSR1, &action, &old_), 0);
    }
    void TearDown() override
    {
        stopPestering();
        ::sigaction(SIGUSR1, &old_, nullptr);
    }

    void pester()
    {
        stop_ = false;
        pester_ = std::thread([this, target = ::pthread_self()] {
            while (!stop_.load()) {
                ::pthread_kill(target, SIGUSR1);
                std::this_thread::sleep_for(5ms);
            }
        });
    }
    void stopPestering()
    {
        stop_ = true;
        if (pester_.joinable())
            pester_.join();
    }

    // Both ends on the transport under test; the client's calls sleep at once and give up
    // after 10 s at most.
    test::SocketPair connect(SignalPolicy policy)
    {
        const bool smcr = GetParam() == Transport::SmcR;
        SocketOptions options = smcr ? stacks::smcrOnly() : SocketOptions{};
        options.mode = smcr ? Mode::SmcR : Mode::SmcD;
        options.busyPoll = 0us;
        options.recvTimeout = 10s;
        options.sendTimeout = 10s;
        options.onSignal = policy;
        SocketOptions server = options;
        server.onSignal = nullptr;
        test::SocketPair p = test::connectPair(*server_, *client_, server, options);
        EXPECT_EQ(p.client.transport(), GetParam());
        return p;
    }

    stacks::Fabric fabric_;
    std::unique_ptr<SmcStack> server_;
    std::unique_ptr<SmcStack> client_;

private:
    Action old_{};
    std::atomic<bool> stop_{false};
    std::thread pester_;
};

TEST_P(SocketSignal, ARecvFailsWithInterruptedAndTheConnectionGoesOn)
{
    test::SocketPair p = connect(fail);
    std::array<std::byte, 16> into{};
    pester();
    Result<std::size_t> r = p.client.recv(into);
    stopPestering();
    ASSERT_FALSE(r);
    EXPECT_EQ(r.error(), std::errc::interrupted);
    EXPECT_GT(handled.load(), 0);
    EXPECT_GT(asked.load(), 0);
    // Nothing was lost: what the server sends next arrives.
    const std::array<std::byte, 5> hello{std::byte{'h'}, std::byte{'e'}, std::byte{'l'},
                                         std::byte{'l'}, std::byte{'o'}};
    ASSERT_EQ(p.server.send(hello).value(), hello.size());
    ASSERT_EQ(p.client.recv(into).value(), hello.size());
    EXPECT_TRUE(std::equal(hello.begin(), hello.end(), into.begin()));
}

TEST_P(SocketSignal, ARecvGoesOnWaitingWhenThePolicySaysSo)
{
    test::SocketPair p = connect(goOn);
    std::thread later([&] {
        std::this_thread::sleep_for(300ms);
        const std::array<std::byte, 3> abc{std::byte{'a'}, std::byte{'b'}, std::byte{'c'}};
        EXPECT_EQ(p.server.send(abc).value(), abc.size());
    });
    std::array<std::byte, 16> into{};
    pester();
    Result<std::size_t> r = p.client.recv(into);
    stopPestering();
    later.join();
    ASSERT_TRUE(r) << r.error().message();
    EXPECT_EQ(*r, 3u);
    EXPECT_GT(asked.load(), 0); // signals did wake it, and it asked each time
}

TEST_P(SocketSignal, ASendThatWaitsForRoomFailsWithInterrupted)
{
    test::SocketPair p = connect(fail);
    // Fill the server's ring while the server reads nothing.
    std::vector<std::byte> chunk(64 * 1024, std::byte{7});
    p.client.setNonBlocking(true);
    std::size_t sent = 0;
    for (Result<std::size_t> n = p.client.send(chunk); n; n = p.client.send(chunk))
        sent += *n;
    p.client.setNonBlocking(false);
    ASSERT_GT(sent, 0u);
    pester();
    Result<std::size_t> r = p.client.send(chunk);
    stopPestering();
    ASSERT_FALSE(r);
    EXPECT_EQ(r.error(), std::errc::interrupted);
    // The server reads what was sent, every byte, and the client can send again.
    std::vector<std::byte> into(sent);
    std::size_t got = 0;
    while (got < sent) {
        Result<std::size_t> n = p.server.recv(std::span(into).subspan(got));
        ASSERT_TRUE(n) << n.error().message();
        ASSERT_GT(*n, 0u);
        got += *n;
    }
    EXPECT_TRUE(
        std::all_of(into.begin(), into.end(), [](std::byte b) { return b == std::byte{7}; }));
    EXPECT_TRUE(p.client.send(chunk));
}

INSTANTIATE_TEST_SUITE_P(Transports, SocketSignal,
                         ::testing::Values(Transport::SmcD, Transport::SmcR),
                         [](const ::testing::TestParamInfo<Transport>& i) {
                             return i.param == Transport::SmcD ? "SmcD" : "SmcR";
                         });

} // namespace
} // namespace smc
