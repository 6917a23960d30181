// SPDX-License-Identifier: MIT
// The hostile CLC peer: raw TCP against a live SmcStack's listener and Socket::connect.
#include "tests/fuzz/clc_peer.h"

#include <poll.h>
#include <sys/socket.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <future>
#include <memory>
#include <thread>

#include "smc/clc/clc_messages.h"
#include "smc/handshake/handshake.h"
#include "smc/ism/shm_ism.h"
#include "smc/net/tcp.h"
#include "smc/socket/socket.h"
#include "tests/libtest/liveness.h"

namespace smc::clcpeer
{
namespace
{

using namespace std::chrono_literals;
using Clock = std::chrono::steady_clock;

constexpr auto kClcTimeout = 60ms; // the stack's, per CLC message, both roles
constexpr auto kSlack = 2s;        // scheduling, sanitizers
constexpr auto kMaxStalls = 200ms; // what an input may sleep in all
constexpr auto kCpuSlack = 50ms;

[[noreturn]] void broken(const char* what)
{
    std::fprintf(stderr, "CLC PEER INVARIANT: %s\n", what);
    __builtin_trap();
}

SocketOptions options()
{
    SocketOptions o;
    o.clcTimeout = kClcTimeout;
    o.connectTimeout = 2000ms;
    return o;
}

// One stack and listener for the process (a stack per input would cost more than the input),
// and a raw listener that Socket::connect reaches.
struct World {
    std::unique_ptr<SmcStack> stack = std::move(SmcStack::create()).value();
    Listener listener = std::move(Listener::listen(*stack, "127.0.0.1", 0, options())).value();
    UniqueFd raw =
        std::move(net::listenTcp(net::resolve("127.0.0.1", 0, true).value(), 16)).value();
    std::uint16_t rawPort = net::localAddress(raw.get()).value().port();
};

World& world()
{
    static World w;
    return w;
}

// How many server handshakes ended, whichever way.
std::uint64_t serverEnded(const SmcStack& stack)
{
    const StackStats s = stack.stats();
    std::uint64_t n = s.handshakeErrors + s.smcdServer + s.smcrServer;
    for (const auto& [reason, count] : s.serverFallbacks)
        n += count;
    return n;
}

// Plays the steps on `fd`; false once the peer reset the connection (fd closed).
bool play(UniqueFd& fd, std::span<const std::uint8_t> steps)
{
    std::chrono::milliseconds stalled{0};
    std::size_t i = 0;
    while (i + 2 <= steps.size()) {
        const unsigned op = steps[i] % 5;
        const std::size_t n = std::min<std::size_t>(steps[i + 1], steps.size() - i - 2);
        const std::uint8_t* data = steps.data() + i + 2;
        i += 2 + (op == 0 ? n : 0);
        switch (op) {
        case 0:
            (void)!::send(fd.get(), data, n, MSG_NOSIGNAL | MSG_DONTWAIT);
            break;
        case 1: {
            const auto ms = std::min(std::chrono::milliseconds(n % 32), kMaxStalls - stalled);
            stalled += ms;
            std::this_thread::sleep_for(ms);
            break;
        }
        case 2:
            ::shutdown(fd.get(), SHUT_WR);
            break;
        case 3: {
            const linger reset{1, 0};
            ::setsockopt(fd.get(), SOL_SOCKET, SO_LINGER, &reset, sizeof reset);
            fd.reset();
            return false;
        }
        default: {
            std::uint8_t sink[4096];
            while (::recv(fd.get(), sink, sizeof sink, MSG_DONTWAIT) > 0) {
            }
        }
        }
    }
    return true;
}

// The wait after the steps: it must end by `bound`, asleep.
template <typename Done> void awaitEnd(Done done, Clock::duration bound, const char* what)
{
    const auto start = Clock::now();
    const auto cpu = test::processCpu();
    while (!done()) {
        if (Clock::now() - start > bound)
            broken(what);
        std::this_thread::sleep_for(2ms);
    }
    const auto wall = std::chrono::duration_cast<std::chrono::microseconds>(Clock::now() - start);
    if (test::processCpu() - cpu > wall / 2 + kCpuSlack)
        broken("a thread spun while the handshake waited");
}

// We are a client: the server handshake is under test. It waits for two messages at most
// (PROPOSAL, CONFIRM), each within the CLC timeout, plus the time the arrival waited.
void asClient(std::span<const std::uint8_t> steps)
{
    World& w = world();
    const std::uint64_t before = serverEnded(*w.stack);
    auto to = net::resolve("127.0.0.1", w.listener.port(), false).value();
    Result<UniqueFd> fd = net::connectTcp(to, net::deadlineAfter(2s));
    if (!fd)
        broken("the listener did not take a connection");
    (void)play(*fd, steps);
    awaitEnd([&] { return serverEnded(*w.stack) > before; }, 3 * kClcTimeout + kSlack,
             "the server handshake did not end in time");
    while (Result<Socket> s = w.listener.accept(0ms))
        s->close();
}

// We are a server: Socket::connect is under test; it waits for one message (ACCEPT).
void asServer(std::span<const std::uint8_t> steps)
{
    World& w = world();
    auto connecting = std::async(std::launch::async, [&] {
        return Socket::connect(*w.stack, "127.0.0.1", w.rawPort, options());
    });
    UniqueFd fd;
    if (net::waitFor(w.raw.get(), POLLIN, net::deadlineAfter(2s)))
        fd = UniqueFd(::accept4(w.raw.get(), nullptr, nullptr, SOCK_NONBLOCK | SOCK_CLOEXEC));
    if (!fd)
        broken("Socket::connect did not reach the raw server");
    (void)play(fd, steps);
    awaitEnd([&] { return connecting.wait_for(0s) == std::future_status::ready; },
             2 * kClcTimeout + kSlack, "Socket::connect did not end in time");
    if (Result<Socket> s = connecting.get())
        s->close();
}

// Seed building: [op, n, bytes].
struct Steps {
    std::vector<std::uint8_t> bytes;
    Steps& send(std::span<const std::byte> data)
    {
        for (std::size_t at = 0; at < data.size(); at += 255) {
            const std::size_t n = std::min<std::size_t>(255, data.size() - at);
            bytes.push_back(0);
            bytes.push_back(static_cast<std::uint8_t>(n));
            for (std::size_t k = 0; k < n; ++k)
                bytes.push_back(std::to_integer<std::uint8_t>(data[at + k]));
        }
        return *this;
    }
    Steps& op(std::uint8_t code, std::uint8_t n = 0)
    {
        bytes.insert(bytes.end(), {code, n});
        return *this;
    }
    Steps& stall(std::uint8_t ms) { return op(1, ms); }
    Steps& fin() { return op(2); }
    Steps& reset() { return op(3); }
    Steps& read() { return op(4); }
};

std::vector<std::uint8_t> input(bool server, const Steps& s)
{
    std::vector<std::uint8_t> in(1 + s.bytes.size());
    in[0] = server ? 1 : 0;
    std::copy(s.bytes.begin(), s.bytes.end(), in.begin() + 1);
    return in;
}

} // namespace

void run(std::span<const std::uint8_t> in)
{
    if (in.empty())
        return;
    if (in[0] % 2 == 0)
        asClient(in.subspan(1));
    else
        asServer(in.subspan(1));
}

std::vector<std::vector<std::uint8_t>> seeds()
{
    // A PROPOSAL this host's stacks accept (loopback-ism, the default UEID), so the server
    // answers and then waits for CONFIRM.
    const clc::Proposal p = net::smcdProposal({ShmIsm::hostGid(), 0x0000000100000001},
                                              *clc::makeEid(StackConfig{}.ueid));
    const std::vector<std::byte> proposal = clc::encode(p).value();
    const auto half = std::span(proposal).first(proposal.size() / 2);
    const std::vector<std::byte> decline =
        clc::encode(clc::makeDecline(clc::DeclineCode::PeerNoSmc, clc::kVersion2, {})).value();
    const auto eyecatcher = std::span(proposal).first(3);
    const auto header = std::span(proposal).first(7);
    const std::byte http[] = {std::byte{'G'}, std::byte{'E'}, std::byte{'T'}, std::byte{' '}};

    std::vector<std::vector<std::uint8_t>> out;
    for (bool server : {false, true}) {
        const auto& first = server ? decline : proposal;
        out.push_back(input(server, Steps().read().send(eyecatcher)));
        out.push_back(input(server, Steps().read().send(eyecatcher).fin()));
        out.push_back(input(server, Steps().read().send(header).stall(20)));
        out.push_back(input(server, Steps().read().send(header).fin()));
        out.push_back(
            input(server, Steps().read().send(std::span(first).first(first.size() / 2)).reset()));
        out.push_back(input(server, Steps().read().send(first)));
        out.push_back(
            input(server, Steps().read().send(first).stall(10).read().send(header).fin()));
        out.push_back(input(server, Steps().read().send(http)));
        out.push_back(input(server, Steps().read().reset()));
    }
    out.push_back(
        input(false, Steps().send(half).stall(30).send(std::span(proposal).subspan(half.size()))));
    return out;
}

} // namespace smc::clcpeer
