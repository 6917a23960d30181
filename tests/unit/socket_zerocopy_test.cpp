// SPDX-License-Identifier: MIT
// Zero-copy receive with a hybrid copy (seed 002): views of the RMB, copies below a threshold.
#include <gtest/gtest.h>

#include <chrono>
#include <cstring>
#include <thread>
#include <vector>

#include "smc/socket/socket.h"
#include "tests/libtest/smcr_stacks.h"
#include "tests/libtest/socket_stream.h"

namespace smc
{
namespace
{

using namespace std::chrono_literals;
namespace stacks = test::smcr_stacks;

constexpr std::size_t kThreshold = 4096;
constexpr std::size_t kRing = 64 * 1024 - 32; // a 64 KiB DMB less its CDC head

struct Conn {
    std::unique_ptr<stacks::Fabric> fabric = std::make_unique<stacks::Fabric>();
    std::unique_ptr<SmcStack> server, client;
    test::SocketPair pair;
};

Conn connect(Transport t)
{
    Conn c;
    stacks::Fabric* f = t == Transport::SmcR ? c.fabric.get() : nullptr;
    c.server = stacks::makeStack(f, stacks::kServerId);
    c.client = stacks::makeStack(f, stacks::kClientId);
    SocketOptions o = t == Transport::SmcR ? stacks::smcrOnly() : SocketOptions{};
    o.mode = t == Transport::SmcD ? Mode::SmcD : t == Transport::SmcR ? Mode::SmcR : Mode::Tcp;
    o.rmbBytes = 64 * 1024;
    o.zeroCopyThreshold = kThreshold;
    o.recvTimeout = 10s;
    o.sendTimeout = 10s;
    c.pair = test::connectPair(*c.server, *c.client, o, o);
    EXPECT_EQ(c.pair.server.transport(), t);
    return c;
}

std::vector<std::byte> bytes(std::size_t n, std::uint64_t from)
{
    std::vector<std::byte> v(n);
    for (std::size_t i = 0; i < n; ++i)
        v[i] = test::streamByte(from + i, 7);
    return v;
}

void sendAll(Socket& s, std::span<const std::byte> data)
{
    while (!data.empty()) {
        Result<std::size_t> n = s.send(data);
        ASSERT_TRUE(n) << n.error().message();
        data = data.subspan(*n);
    }
}

// What a RecvView holds, in stream order.
std::vector<std::byte> flatten(const RecvView& v, std::span<const std::byte> copied)
{
    std::vector<std::byte> out;
    for (const auto& s : v.view)
        out.insert(out.end(), s.begin(), s.end());
    out.insert(out.end(), copied.begin(), copied.begin() + static_cast<std::ptrdiff_t>(v.copied));
    return out;
}

// Reads exactly n bytes through recvZeroCopy, releasing each view.
std::vector<std::byte> readZeroCopy(Socket& s, std::size_t n)
{
    std::vector<std::byte> out, copy(kThreshold);
    while (out.size() < n) {
        Result<RecvView> v = s.recvZeroCopy(copy);
        EXPECT_TRUE(v) << v.error().message();
        if (!v || v->size() == 0)
            break;
        const std::vector<std::byte> got = flatten(*v, copy);
        out.insert(out.end(), got.begin(), got.end());
        if (v->viewBytes() > 0) {
            EXPECT_TRUE(s.releaseView());
        }
    }
    return out;
}

TEST(ZeroCopy, SmcdHandsOutAViewAndCopiesShortReads)
{
    Conn c = connect(Transport::SmcD);
    const auto big = bytes(20000, 0);
    sendAll(c.pair.client, big);
    std::vector<std::byte> copy(kThreshold);
    Result<RecvView> v = c.pair.server.recvZeroCopy(copy);
    ASSERT_TRUE(v) << v.error().message();
    EXPECT_EQ(v->viewBytes(), big.size());
    EXPECT_EQ(v->copied, 0u);
    EXPECT_EQ(flatten(*v, copy), big);
    // The view is in the ring, not a copy: the server's own buffer is untouched.
    EXPECT_EQ(copy, std::vector<std::byte>(kThreshold));
    ASSERT_TRUE(c.pair.server.releaseView());

    const auto small = bytes(100, big.size());
    sendAll(c.pair.client, small);
    v = c.pair.server.recvZeroCopy(copy);
    ASSERT_TRUE(v);
    EXPECT_EQ(v->viewBytes(), 0u); // below the threshold: copied, nothing to release
    EXPECT_EQ(flatten(*v, copy), small);
    EXPECT_EQ(c.pair.server.releaseView().error(), std::errc::invalid_argument);
}

// At the ring's wrap: two views when the second piece is big enough, else the straggler is
// copied after the view. (Each exchange stays within the space the sender knows is free:
// Linux's window update rule tells it of a release only past a limit.)
TEST(ZeroCopy, SmcdSplitsAtTheWrap)
{
    for (const bool straggler : {false, true}) {
        Conn c = connect(Transport::SmcD);
        std::uint64_t at = 0;
        auto exchange = [&](std::size_t n) {
            const auto data = bytes(n, at);
            at += n;
            sendAll(c.pair.client, data);
            std::vector<std::byte> copy(kThreshold);
            Result<RecvView> v = c.pair.server.recvZeroCopy(copy);
            EXPECT_TRUE(v);
            if (!v)
                return RecvView{};
            EXPECT_EQ(flatten(*v, copy), data);
            EXPECT_EQ(c.pair.server.releaseView().has_value(), v->viewBytes() > 0);
            return *v;
        };
        exchange(60000); // the sender sees the ring nearly full: the release is announced
        if (!straggler) {
            const RecvView two = exchange(10000); // 5504 to the ring's end, 4496 from its start
            EXPECT_EQ(two.view[0].size(), kRing - 60000);
            EXPECT_EQ(two.view[1].size(), 10000 - (kRing - 60000));
            EXPECT_EQ(two.copied, 0u);
        } else {
            exchange(kRing - 60000 - 5000);      // to 5000 before the end (short: copied)
            const RecvView one = exchange(5500); // 5000 in view, the 500 past the wrap copied
            EXPECT_EQ(one.view[0].size(), 5000u);
            EXPECT_TRUE(one.view[1].empty());
            EXPECT_EQ(one.copied, 500u);
        }
    }
}

TEST(ZeroCopy, OneViewAtATime)
{
    Conn c = connect(Transport::SmcD);
    sendAll(c.pair.client, bytes(2 * kThreshold, 0));
    std::vector<std::byte> copy(kThreshold);
    ASSERT_TRUE(c.pair.server.recvZeroCopy(copy));
    EXPECT_EQ(c.pair.server.recvZeroCopy(copy).error(), std::errc::operation_in_progress);
    EXPECT_EQ(c.pair.server.recv(copy).error(), std::errc::operation_in_progress);
    ASSERT_TRUE(c.pair.server.releaseView());
    EXPECT_EQ(c.pair.server.releaseView().error(), std::errc::invalid_argument);
    c.pair.server.close(); // with nothing unread: an orderly close
    EXPECT_EQ(c.pair.server.releaseView().error(), std::errc::not_connected);
}

// Until released, the viewed bytes stay unread for the peer: its ring fills and it waits;
// each release makes room again. Megabytes through views arrive intact, then the end.
TEST(ZeroCopy, ReleaseMakesRoomForThePeer)
{
    Conn c = connect(Transport::SmcD);
    constexpr std::size_t kTotal = 8 << 20;
    std::thread sender([&] {
        for (std::size_t at = 0; at < kTotal; at += 50'000)
            sendAll(c.pair.client, bytes(std::min<std::size_t>(50'000, kTotal - at), at));
        EXPECT_TRUE(c.pair.client.shutdown(Shutdown::Write));
    });
    const std::vector<std::byte> got = readZeroCopy(c.pair.server, kTotal);
    sender.join();
    ASSERT_EQ(got.size(), kTotal);
    EXPECT_TRUE(got == bytes(kTotal, 0));
    std::vector<std::byte> copy(16);
    Result<RecvView> end = c.pair.server.recvZeroCopy(copy);
    ASSERT_TRUE(end);
    EXPECT_EQ(end->size(), 0u);
}

// SMC-R and TCP have no views: the same calls copy everything.
TEST(ZeroCopy, SmcrAndTcpCopy)
{
    for (Transport t : {Transport::SmcR, Transport::Tcp}) {
        Conn c = connect(t);
        const auto data = bytes(3 * kThreshold, 0);
        sendAll(c.pair.client, data);
        std::vector<std::byte> got;
        std::vector<std::byte> copy(kThreshold);
        while (got.size() < data.size()) {
            Result<RecvView> v = c.pair.server.recvZeroCopy(copy);
            ASSERT_TRUE(v) << v.error().message();
            ASSERT_GT(v->size(), 0u);
            EXPECT_EQ(v->viewBytes(), 0u);
            got.insert(got.end(), copy.begin(),
                       copy.begin() + static_cast<std::ptrdiff_t>(v->copied));
        }
        EXPECT_EQ(got, data);
        EXPECT_EQ(c.pair.server.releaseView().error(), std::errc::invalid_argument);
    }
}

} // namespace
} // namespace smc
