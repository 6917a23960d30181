// SPDX-License-Identifier: MIT
// Pulses: an SMC-D peer wakes our descriptor itself, readable exactly while there are bytes;
// and the counted ready descriptor under them.
#include <fcntl.h>
#include <poll.h>
#include <sys/epoll.h>
#include <sys/ioctl.h>
#include <sys/socket.h>

#include <gtest/gtest.h>

#include <array>
#include <atomic>
#include <random>
#include <thread>
#include <vector>

#include "base/unique_fd.h"
#include "smc/net/ready_fd.h"
#include "smc/socket/socket.h"
#include "tests/libtest/socket_stream.h"

namespace smc
{
namespace
{

using namespace std::chrono_literals;

std::unique_ptr<SmcStack> makeStack()
{
    return std::move(SmcStack::create({})).value();
}

bool readable(int fd, int timeoutMs)
{
    pollfd p{fd, POLLIN, 0};
    return ::poll(&p, 1, timeoutMs) == 1;
}

int queued(int fd)
{
    int n = -1;
    ::ioctl(fd, FIONREAD, &n);
    return n;
}

// An SMC-D connection between two stacks of this process; the server's end does not block.
struct Pulses : ::testing::Test {
    void SetUp() override
    {
        p = test::connectPair(*server, *client);
        ASSERT_EQ(p.server.transport(), Transport::SmcD);
        p.server.setNonBlocking(true);
    }
    std::unique_ptr<SmcStack> server = makeStack();
    std::unique_ptr<SmcStack> client = makeStack();
    test::SocketPair p;
};

// A request, then its answer, 2,000 times: each poll that says readable has bytes for the
// next recv, and a descriptor read to the end is not readable any more, as a TCP socket;
// through the doorbell for the first messages, then with pulses.
TEST_F(Pulses, ADescriptorIsReadableExactlyWhileThereAreBytes)
{
    p.client.setNonBlocking(true);
    const int fds[2] = {p.client.pollFd().value(), p.server.pollFd().value()};
    EXPECT_FALSE(p.server.info().pulses) << "the doorbell first: a short connection pays less";
    Socket* ends[2] = {&p.client, &p.server};
    std::mt19937 rng(7);
    std::array<std::byte, 4096> buf{};
    for (int round = 0; round < 2000; ++round) {
        const int to = round % 2;
        const std::vector<std::byte> message(1 + rng() % 1000, std::byte(round));
        ASSERT_EQ(ends[1 - to]->send(message).value(), message.size());
        std::size_t got = 0;
        while (got < message.size()) {
            ASSERT_TRUE(readable(fds[to], 5000)) << "round " << round;
            Result<std::size_t> n = ends[to]->recv(buf);
            ASSERT_TRUE(n) << "readable, yet " << n.error().message() << ", round " << round;
            got += *n;
        }
        ASSERT_EQ(got, message.size());
        ASSERT_FALSE(readable(fds[to], 0)) << "read to the end, round " << round;
    }
    EXPECT_TRUE(p.client.info().pulses);
    EXPECT_TRUE(p.server.info().pulses);
}

// A writer that never waits for the reader, in pieces of any size: no wake-up is lost (the
// reader's poll never times out), none is empty (a recv after it never says EAGAIN), and the
// bytes come in order.
TEST_F(Pulses, AWriterThatNeverWaitsLosesNoWakeupAndMakesNoEmptyOne)
{
    const int fd = p.server.pollFd().value();
    ASSERT_TRUE(p.client.pollFd()); // its writability wants room signals too
    constexpr std::size_t kTotal = 8u << 20;
    std::thread writer([&] {
        std::mt19937 rng(11);
        std::vector<std::byte> piece(3000);
        std::size_t at = 0;
        while (at < kTotal) {
            const std::size_t n = std::min<std::size_t>(1 + rng() % piece.size(), kTotal - at);
            for (std::size_t i = 0; i < n; ++i)
                piece[i] = static_cast<std::byte>((at + i) % 251);
            std::span<const std::byte> left(piece.data(), n);
            while (!left.empty()) {
                Result<std::size_t> sent = p.client.send(left);
                if (!sent)
                    return;
                left = left.subspan(*sent);
            }
            at += n;
            if (rng() % 16 == 0)
                std::this_thread::sleep_for(std::chrono::microseconds(rng() % 50));
        }
    });
    std::size_t got = 0;
    std::size_t empty = 0;
    bool inOrder = true;
    std::vector<std::byte> buf(1 + 50'000);
    while (got < kTotal) {
        if (!readable(fd, 5000))
            break;
        Result<std::size_t> n = p.server.recv(std::span(buf).first(1 + got % buf.size()));
        if (!n) {
            ++empty;
            continue;
        }
        for (std::size_t i = 0; i < *n; ++i)
            inOrder = inOrder && buf[i] == static_cast<std::byte>((got + i) % 251);
        got += *n;
    }
    writer.join();
    EXPECT_EQ(got, kTotal) << "a wake-up was lost";
    EXPECT_EQ(empty, 0u) << "woken with nothing to read";
    EXPECT_TRUE(inOrder);
    EXPECT_FALSE(readable(fd, 0));
    // Whether pulses lasted is not asked: a writer descheduled between a promise and its pulse
    // costs the reader a wait, and on a loaded machine the waits may use up the connection's
    // patience, which hands it back to the doorbell (as exact).
}

// --- The ready descriptor -----------------------------------------------------------------

// Not writable, then writable, then not again: each as poll and an edge-triggered epoll see it,
// and never readable on the way (the fill goes the other way).
TEST(ReadyFd, WritableFollowsSetAndTurnsAnEdge)
{
    net::ReadyFd r = std::move(net::ReadyFd::create()).value();
    auto writable = [&] {
        pollfd p{r.fd(), POLLOUT, 0};
        return ::poll(&p, 1, 0) == 1 && (p.revents & POLLOUT) != 0;
    };
    EXPECT_TRUE(writable());
    UniqueFd ep(::epoll_create1(EPOLL_CLOEXEC));
    epoll_event ev{};
    ev.events = EPOLLOUT | EPOLLET;
    ASSERT_EQ(::epoll_ctl(ep.get(), EPOLL_CTL_ADD, r.fd(), &ev), 0);
    for (int round = 0; round < 3; ++round) {
        epoll_event got{};
        (void)::epoll_wait(ep.get(), &got, 1, 0); // the edge so far, taken
        r.set(false, false);
        EXPECT_FALSE(writable()) << "round " << round;
        EXPECT_FALSE(readable(r.fd(), 0));
        EXPECT_EQ(::epoll_wait(ep.get(), &got, 1, 0), 0) << "an edge while not writable";
        r.set(false, true);
        EXPECT_TRUE(writable());
        EXPECT_EQ(::epoll_wait(ep.get(), &got, 1, 0), 1) << "no edge when it turned writable";
    }
}

// A readable descriptor told again (an edge for EPOLLET, each time the peer says something)
// never looks empty on the way, counted or not: a program that peeked bytes and then polls
// must see them. Another thread polls all along.
TEST(ReadyFd, ReadableToldAgainNeverLooksEmpty)
{
    for (const bool counted : {false, true}) {
        net::ReadyFd r = std::move(net::ReadyFd::create()).value();
        r.count(counted);
        r.set(true, true);
        ASSERT_TRUE(readable(r.fd(), 0));
        std::atomic<bool> done{false};
        std::atomic<int> empty{0};
        std::thread poller([&] {
            while (!done.load())
                if (!readable(r.fd(), 0))
                    empty.fetch_add(1);
        });
        for (int i = 0; i < 20000; ++i)
            r.set(true, true, true);
        done = true;
        poller.join();
        EXPECT_EQ(empty.load(), 0) << (counted ? "counted" : "not counted");
        EXPECT_EQ(queued(r.fd()), 1) << "one byte of ours";
    }
}

// A pair left for reuse serves the next create(), drained and writable, with the flags
// socketpair() gave it; one that the peer may hold (count(true)) or that a fork copied is
// closed instead.
TEST(ReadyFd, APairLeftForReuseServesTheNextOneAsNew)
{
    net::ReadyFd::dropReusable();
    auto fresh = [] { return std::move(net::ReadyFd::create()).value(); };
    auto open = [](int fd) { return ::fcntl(fd, F_GETFD) != -1; };
    int app = -1;
    {
        net::ReadyFd r = fresh();
        app = r.fd();
        r.set(true, false); // a byte queued, the fill in flight
        ASSERT_TRUE(readable(r.fd(), 0));
        ASSERT_EQ(::fcntl(r.fd(), F_SETFL, O_RDWR), 0); // a blocking program's number
        r.reuseWhenDone();
    }
    EXPECT_TRUE(open(app)) << "left for reuse, not closed";
    {
        net::ReadyFd r = fresh();
        EXPECT_EQ(r.fd(), app);
        EXPECT_FALSE(readable(r.fd(), 0));
        pollfd p{r.fd(), POLLOUT, 0};
        EXPECT_EQ(::poll(&p, 1, 0), 1);
        EXPECT_NE(::fcntl(r.fd(), F_GETFL) & O_NONBLOCK, 0);
        r.count(true); // the peer may be given our end from here on
        r.reuseWhenDone();
    }
    EXPECT_FALSE(open(app)) << "a pair the peer may hold is closed";
    {
        net::ReadyFd r = fresh();
        app = r.fd();
        r.reuseWhenDone();
        net::ReadyFd::beforeFork(); // a child has copies of both ends now
        net::ReadyFd::afterForkParent();
    }
    EXPECT_FALSE(open(app)) << "a pair made before a fork is closed";
    {
        net::ReadyFd r = fresh();
        app = r.fd();
        r.reuseWhenDone();
        net::ReadyFd::spawning(); // a child without fork handlers may keep a number of it
    }
    EXPECT_FALSE(open(app)) << "a pair made before a spawn is closed";
    {
        net::ReadyFd r = fresh();
        app = r.fd();
        r.neverReuse(); // held elsewhere: what reuseWhenDone says later changes nothing
        r.reuseWhenDone();
    }
    EXPECT_FALSE(open(app)) << "a pair marked never to be reused is closed";
    int ours = -1;
    {
        net::ReadyFd r = fresh();
        app = r.fd();
        ours = r.pulseFd();
        r.reuseWhenDone();
    }
    ASSERT_TRUE(open(app)) << "left for reuse";
    // close_range or closefrom is about to close the app end: the cache lets go of it,
    // without closing it (its closer does) and closes the other end.
    const std::uint64_t reusedBefore = net::ReadyFd::reused();
    net::ReadyFd::closingRange(static_cast<unsigned>(app), static_cast<unsigned>(app));
    EXPECT_TRUE(open(app)) << "the range's closer closes it";
    EXPECT_FALSE(open(ours)) << "the end outside the range closed here";
    ::close(app);
    {
        net::ReadyFd r = fresh();
        EXPECT_EQ(net::ReadyFd::reused(), reusedBefore) << "a pair with a closed end served";
    }
}

// --- The counted ready descriptor -------------------------------------------------------

// What settle() takes is what was owed: ours and the pulses promised before; a pulse that
// came for later bytes stays, and keeps the descriptor readable.
TEST(CountedReadyFd, SettleTakesWhatIsOwedAndNotAByteMore)
{
    net::ReadyFd r = std::move(net::ReadyFd::create()).value();
    r.count(true);
    EXPECT_FALSE(readable(r.fd(), 0));
    r.set(true, true);
    r.set(true, true); // owed already: no second byte
    EXPECT_EQ(queued(r.fd()), 1);
    r.set(true, true, false, true); // the peer's pulse is on its way: none either
    EXPECT_EQ(queued(r.fd()), 1);
    const char pulses[3] = {1, 1, 1};
    ASSERT_EQ(::send(r.pulseFd(), pulses, 2, MSG_DONTWAIT), 2);
    r.expect(2);
    ASSERT_EQ(::send(r.pulseFd(), pulses, 1, MSG_DONTWAIT), 1); // promised after the settle
    std::chrono::microseconds patience = 1s;
    EXPECT_TRUE(r.settle(patience));
    EXPECT_EQ(queued(r.fd()), 1);
    r.set(false, true); // never drains: only settle() does
    EXPECT_EQ(queued(r.fd()), 1);
    r.expect(1);
    EXPECT_TRUE(r.settle(patience));
    EXPECT_FALSE(readable(r.fd(), 0));
    EXPECT_EQ(patience, 1s) << "nothing was waited for";
}

// Each event of the peer's that finds the descriptor readable is a new edge, and a byte of
// ours: the older ones go first, so they never fill the queue the peer's pulses need.
TEST(CountedReadyFd, EdgesKeepOneByteOfOurs)
{
    net::ReadyFd r = std::move(net::ReadyFd::create()).value();
    r.count(true);
    for (int i = 0; i < 1000; ++i)
        r.set(true, true, true);
    EXPECT_EQ(queued(r.fd()), 1);
    std::chrono::microseconds patience = 1s;
    EXPECT_TRUE(r.settle(patience));
    EXPECT_FALSE(readable(r.fd(), 0));
}

// A pulse promised and not sent costs one wait of the patience, then settle() says so; with
// counting off, the next "not readable" takes what came late.
TEST(CountedReadyFd, APromiseNotKeptFailsAfterThePatience)
{
    net::ReadyFd r = std::move(net::ReadyFd::create()).value();
    r.count(true);
    r.expect(1);
    std::chrono::microseconds patience = 30ms;
    const auto start = std::chrono::steady_clock::now();
    EXPECT_FALSE(r.settle(patience));
    const auto waited = std::chrono::steady_clock::now() - start;
    EXPECT_GE(waited, 30ms);
    EXPECT_LT(waited, 10s);
    EXPECT_LE(patience.count(), 0) << "the wait came off the patience";
    r.count(false);
    const char late = 1;
    ASSERT_EQ(::send(r.pulseFd(), &late, 1, MSG_DONTWAIT), 1); // after the switch
    r.set(false, true);
    EXPECT_FALSE(readable(r.fd(), 0)) << "a late pulse is taken at the next look";
    r.set(true, true);
    EXPECT_TRUE(readable(r.fd(), 0));
}

// A pulse that came while the number was held woke an edge-triggered program before its
// connection could answer: the release gives it a new edge.
TEST(CountedReadyFd, APulseWhileHeldGetsAnEdgeOnRelease)
{
    net::ReadyFd r = std::move(net::ReadyFd::create()).value();
    r.count(true);
    r.hold();
    const UniqueFd ep(::epoll_create1(EPOLL_CLOEXEC));
    ASSERT_TRUE(ep);
    epoll_event ev{};
    ev.events = EPOLLIN | EPOLLET;
    ASSERT_EQ(::epoll_ctl(ep.get(), EPOLL_CTL_ADD, r.fd(), &ev), 0);
    const char pulse = 1;
    ASSERT_EQ(::send(r.pulseFd(), &pulse, 1, MSG_DONTWAIT), 1);
    epoll_event got{};
    EXPECT_EQ(::epoll_wait(ep.get(), &got, 1, 1000), 1);
    EXPECT_EQ(::epoll_wait(ep.get(), &got, 1, 0), 0);
    r.release();
    EXPECT_EQ(::epoll_wait(ep.get(), &got, 1, 1000), 1) << "a new edge";
    r.expect(1);
    std::chrono::microseconds patience = 1s;
    EXPECT_TRUE(r.settle(patience));
    EXPECT_FALSE(readable(r.fd(), 0)) << "the release's byte was owed too";
}

} // namespace
} // namespace smc
