// SPDX-License-Identifier: MIT
// Two SMC-R stacks on one in-process fabric, TCP pairs and handshakes between them: the
// fixtures of the SMC-R handshake tests.
#pragma once

#include <poll.h>
#include <sys/socket.h>

#include <chrono>
#include <future>
#include <memory>
#include <thread>

#include <gtest/gtest.h>

#include "smc/handshake/handshake.h"
#include "smc/handshake/smcr_handshake.h"
#include "smc/net/tcp.h"
#include "smc/socket/internal/make_stack.h"
#include "smc/socket/stack.h"
#include "smc/testing/inproc_fabric.h"
#include "tests/libtest/link_groups.h"

namespace smc::test::smcr_stacks
{

using namespace std::chrono_literals;

constexpr SystemId kServerId = {0x11, 0x22, 2, 0, 0, 0, 0, 1};
constexpr SystemId kClientId = {0x33, 0x44, 2, 0, 0, 0, 0, 2};

struct Fabric {
    InprocRegistrar serverReg, clientReg;
    InprocFabric fabric{serverReg, clientReg, 2, 2};
};

inline std::unique_ptr<SmcStack>
makeStack(Fabric* f, const SystemId& id, unsigned maxConns = 255,
          std::chrono::milliseconds llcWait = 0ms, bool offerV2 = false,
          unsigned handshakeThreads = StackConfig{}.handshakeThreads)
{
    StackConfig config;
    config.handshakeThreads = handshakeThreads;
    StackHooks hooks;
    if (f != nullptr) {
        hooks.provider = &f->fabric;
        SmcrConfig r;
        r.gid = InprocFabric::clientGid(); // where client links start
        r.mac = {2, 0, 0, 0, id[0], id[7]};
        r.systemId = id;
        r.groups.maxConns = maxConns;
        r.groups.timeouts.testLink = 0ms;
        r.offerV2 = offerV2;
        if (llcWait > 0ms) // short CONFIRM_LINK waits, both roles'
            r.groups.timeouts.firstLink = r.groups.timeouts.wait = llcWait;
        config.smcr = r;
    }
    return std::move(smc::makeStack(config, hooks)).value();
}

// A connected TCP pair on 127.0.0.1, both ends non-blocking.
struct TcpPair {
    UniqueFd client, server;
};
inline TcpPair tcpPair()
{
    auto at = net::resolve("127.0.0.1", 0, true).value();
    UniqueFd l = std::move(net::listenTcp(at, 4)).value();
    auto to = net::resolve("127.0.0.1", net::localAddress(l.get()).value().port(), false).value();
    TcpPair p;
    p.client = std::move(net::connectTcp(to, net::deadlineAfter(5s))).value();
    EXPECT_TRUE(net::waitFor(l.get(), POLLIN, net::deadlineAfter(5s)));
    p.server = UniqueFd(::accept4(l.get(), nullptr, nullptr, SOCK_NONBLOCK | SOCK_CLOEXEC));
    EXPECT_TRUE(p.server.valid());
    return p;
}

inline SocketOptions smcrOnly()
{
    SocketOptions o;
    o.mode = Mode::SmcR;
    o.rmbBytes = 64 * 1024;
    return o;
}

struct Both {
    Result<net::Outcome> client = std::make_error_code(std::errc::io_error);
    Result<net::Outcome> server = std::make_error_code(std::errc::io_error);
};
inline Both handshake(SmcStack& serverStack, SmcStack& clientStack, const TcpPair& p,
                      SocketOptions serverOptions = smcrOnly(),
                      SocketOptions clientOptions = smcrOnly())
{
    Both b;
    std::thread t([&] {
        b.server = net::serverHandshake(coreOf(serverStack), p.server.get(), serverOptions);
    });
    b.client = net::clientHandshake(coreOf(clientStack), p.client.get(), clientOptions);
    t.join();
    return b;
}

inline const net::SmcrSetup* smcr(const Result<net::Outcome>& o)
{
    return o ? std::get_if<net::SmcrSetup>(&*o) : nullptr;
}

using test::eventually;

// The client end learns of the second link when the server's ADD_LINK flow has run there.
inline bool waitLinks(const LinkGroup& g, unsigned n)
{
    for (int i = 0; i < 500 && g.activeLinks() != n; ++i)
        std::this_thread::sleep_for(10ms);
    return g.activeLinks() == n;
}

inline void expectBytesBothWays(int a, int b)
{
    const char ping[] = "ping", pong[] = "pong";
    ASSERT_EQ(::send(a, ping, 4, MSG_NOSIGNAL), 4);
    ASSERT_EQ(::send(b, pong, 4, MSG_NOSIGNAL), 4);
    char got[4];
    ASSERT_TRUE(net::waitFor(b, POLLIN, net::deadlineAfter(5s)));
    ASSERT_EQ(::recv(b, got, 4, MSG_WAITALL), 4);
    EXPECT_EQ(std::memcmp(got, ping, 4), 0);
    ASSERT_TRUE(net::waitFor(a, POLLIN, net::deadlineAfter(5s)));
    ASSERT_EQ(::recv(a, got, 4, MSG_WAITALL), 4);
    EXPECT_EQ(std::memcmp(got, pong, 4), 0);
}

} // namespace smc::test::smcr_stacks
