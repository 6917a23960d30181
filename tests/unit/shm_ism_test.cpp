// SPDX-License-Identifier: MIT
// ShmIsm: two real processes share a DMB; grants, pid/user checks, revoke, dead peers, hostile
// owners.
#include "smc/ism/shm_ism.h"

#include <gtest/gtest.h>

#include <atomic>
#include <cstring>
#include <dirent.h>
#include <fstream>
#include <functional>
#include <string>
#include <thread>

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/eventfd.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

#include "pool/buffer_pool.h"
#include "smc/ism/ism_registrar.h"
#include "smc/ism/shm_wire.h"

namespace smc
{
namespace
{

using namespace std::chrono_literals;

constexpr std::size_t kDmbBytes = 65536;
constexpr auto kTimeout = 2000ms;

// --- processes and pipes -------------------------------------------------------

template <typename T> bool put(int fd, const T& value)
{
    return ::write(fd, &value, sizeof value) == sizeof value;
}

template <typename T> bool get(int fd, T& value, int timeoutMs = 10000)
{
    pollfd pfd{fd, POLLIN, 0};
    if (::poll(&pfd, 1, timeoutMs) != 1)
        return false;
    return ::read(fd, &value, sizeof value) == sizeof value;
}

struct Hello {
    IsmGid gid;
    DmbToken token = 0;
};

// A forked process running `body(in, out)`; its return value is the exit
// status (0 = passed, else the failing line). Devices are made after the
// fork, each process its own.
class Child
{
public:
    explicit Child(const std::function<int(int in, int out)>& body)
    {
        int down[2], up[2];
        if (::pipe2(down, O_CLOEXEC) != 0 || ::pipe2(up, O_CLOEXEC) != 0)
            std::abort();
        pid_ = ::fork();
        if (pid_ == 0) {
            ::close(down[1]);
            ::close(up[0]);
            ::_exit(body(down[0], up[1]));
        }
        ::close(down[0]);
        ::close(up[1]);
        toChild_.reset(down[1]);
        fromChild_.reset(up[0]);
    }
    ~Child()
    {
        if (pid_ > 0) {
            ::kill(pid_, SIGKILL);
            (void)wait();
        }
    }
    int in() const { return fromChild_.get(); }
    int out() const { return toChild_.get(); }
    pid_t pid() const { return pid_; }
    // The exit status, or -signal.
    int wait()
    {
        int status = 0;
        if (pid_ <= 0 || ::waitpid(pid_, &status, 0) != pid_)
            return -1000;
        pid_ = -1;
        return WIFEXITED(status) ? WEXITSTATUS(status) : -WTERMSIG(status);
    }

private:
    pid_t pid_ = -1;
    UniqueFd toChild_, fromChild_;
};

#define CHILD_CHECK(cond)                                                                          \
    do {                                                                                           \
        if (!(cond))                                                                               \
            return __LINE__ % 250 + 1;                                                             \
    } while (0)

struct Device {
    Executor executor{Executor::Config{1, 4, 1000ms}};
    std::unique_ptr<ShmIsm> ism = std::move(ShmIsm::open(executor)).value();
};

struct Dmb {
    std::shared_ptr<std::byte> memory;
    DmbToken token = 0;
};

Dmb makeDmb(ShmIsm& ism)
{
    Dmb d;
    d.memory = ism.allocator().allocate(kDmbBytes);
    d.token = ism.registerDmb(d.memory, kDmbBytes).value().token;
    return d;
}

bool readable(int fd, int timeoutMs)
{
    pollfd pfd{fd, POLLIN, 0};
    return ::poll(&pfd, 1, timeoutMs) == 1;
}

// --- a raw client and a raw (hostile) server speaking the wire format ----------

struct RawReply {
    shm::AttachStatus status = shm::AttachStatus::Refused;
    std::size_t fds = 0;
    bool ok = false;
};

RawReply rawAttach(const IsmGid& owner, const shm::AttachRequest& request)
{
    RawReply out;
    UniqueFd s(::socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0));
    sockaddr_un addr{};
    addr.sun_family = AF_UNIX;
    const std::string name = shm::socketName(owner);
    std::memcpy(addr.sun_path, name.data(), name.size());
    const auto len = static_cast<socklen_t>(offsetof(sockaddr_un, sun_path) + name.size());
    if (::connect(s.get(), reinterpret_cast<sockaddr*>(&addr), len) != 0 ||
        ::send(s.get(), &request, sizeof request, MSG_NOSIGNAL) != sizeof request ||
        !readable(s.get(), 5000))
        return out;
    shm::AttachReply reply;
    iovec iov{&reply, sizeof reply};
    alignas(cmsghdr) char control[CMSG_SPACE(4 * sizeof(int))];
    msghdr msg{};
    msg.msg_iov = &iov;
    msg.msg_iovlen = 1;
    msg.msg_control = control;
    msg.msg_controllen = sizeof control;
    if (::recvmsg(s.get(), &msg, MSG_CMSG_CLOEXEC) != sizeof reply)
        return out;
    for (cmsghdr* c = CMSG_FIRSTHDR(&msg); c != nullptr; c = CMSG_NXTHDR(&msg, c)) {
        const std::size_t n = (c->cmsg_len - CMSG_LEN(0)) / sizeof(int);
        for (std::size_t i = 0; i < n; ++i) {
            int fd;
            std::memcpy(&fd, CMSG_DATA(c) + i * sizeof(int), sizeof fd);
            ::close(fd);
        }
        out.fds += n;
    }
    out.status = reply.status;
    out.ok = true;
    return out;
}

shm::AttachRequest requestFor(DmbToken token, const IsmGid& claimed)
{
    shm::AttachRequest r;
    r.token = token;
    r.gid = claimed.gid;
    r.gidExt = claimed.gidExt;
    return r;
}

// Listens under `gid` and answers one connection with `respond(conn, request)`.
class RawOwner
{
public:
    using Respond = std::function<void(int conn, const shm::AttachRequest&)>;
    RawOwner(const IsmGid& gid, Respond respond)
    {
        if (::pipe2(stop_, O_CLOEXEC) != 0)
            std::abort();
        listener_.reset(::socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0));
        sockaddr_un addr{};
        addr.sun_family = AF_UNIX;
        const std::string name = shm::socketName(gid);
        std::memcpy(addr.sun_path, name.data(), name.size());
        const auto len = static_cast<socklen_t>(offsetof(sockaddr_un, sun_path) + name.size());
        bound_ = ::bind(listener_.get(), reinterpret_cast<sockaddr*>(&addr), len) == 0 &&
                 ::listen(listener_.get(), 4) == 0;
        thread_ = std::thread([this, respond = std::move(respond)] {
            if (!readable(listener_.get(), 5000))
                return;
            UniqueFd conn(::accept4(listener_.get(), nullptr, nullptr, SOCK_CLOEXEC));
            shm::AttachRequest request;
            if (conn && ::recv(conn.get(), &request, sizeof request, 0) == sizeof request)
                respond(conn.get(), request);
            // Keep the connection until the test is done with it (a silent owner).
            (void)readable(stop_[0], 5000);
        });
    }
    ~RawOwner()
    {
        (void)!::write(stop_[1], "x", 1);
        thread_.join();
        ::close(stop_[0]);
        ::close(stop_[1]);
    }
    bool bound() const { return bound_; }

private:
    UniqueFd listener_;
    bool bound_ = false;
    int stop_[2] = {-1, -1};
    std::thread thread_;
};

void sendReply(int conn, const shm::AttachRequest& request, std::uint64_t size,
               std::initializer_list<int> fds)
{
    shm::AttachReply reply;
    reply.status = shm::AttachStatus::Granted;
    reply.token = request.token;
    reply.size = size;
    iovec iov{&reply, sizeof reply};
    alignas(cmsghdr) char control[CMSG_SPACE(4 * sizeof(int))] = {};
    msghdr msg{};
    msg.msg_iov = &iov;
    msg.msg_iovlen = 1;
    if (fds.size() > 0) {
        msg.msg_control = control;
        msg.msg_controllen = CMSG_SPACE(fds.size() * sizeof(int));
        cmsghdr* c = CMSG_FIRSTHDR(&msg);
        c->cmsg_level = SOL_SOCKET;
        c->cmsg_type = SCM_RIGHTS;
        c->cmsg_len = CMSG_LEN(fds.size() * sizeof(int));
        std::memcpy(CMSG_DATA(c), fds.begin(), fds.size() * sizeof(int));
    }
    (void)::sendmsg(conn, &msg, MSG_NOSIGNAL);
}

std::size_t countFds()
{
    std::size_t n = 0;
    if (DIR* d = ::opendir("/proc/self/fd")) {
        while (::readdir(d) != nullptr)
            ++n;
        ::closedir(d);
    }
    return n;
}

std::size_t countMemfdLinks()
{
    std::size_t n = 0;
    DIR* d = ::opendir("/proc/self/fd");
    if (d == nullptr)
        return 9999;
    while (dirent* e = ::readdir(d)) {
        char target[256];
        const std::string path = std::string("/proc/self/fd/") + e->d_name;
        const ssize_t len = ::readlink(path.c_str(), target, sizeof target - 1);
        if (len > 0 && std::string(target, static_cast<std::size_t>(len)).rfind("/memfd:", 0) == 0)
            ++n;
    }
    ::closedir(d);
    return n;
}

std::size_t countMemfdMappings()
{
    std::ifstream maps("/proc/self/maps");
    std::size_t n = 0;
    for (std::string line; std::getline(maps, line);)
        n += line.find("/memfd:") != std::string::npos;
    return n;
}

// --- tests -----------------------------------------------------------------------

TEST(ShmIsm, IdentityIsHostGidPlusPidAndRandom)
{
    Device a, b;
    const IsmGid ga = a.ism->localGid(), gb = b.ism->localGid();
    EXPECT_NE(ga.gid, 0u);
    EXPECT_EQ(ga.gid, gb.gid);
    EXPECT_EQ(ga.gid, ShmIsm::hostGid());
    EXPECT_EQ(ga.gidExt >> 32, static_cast<std::uint64_t>(::getpid()));
    EXPECT_NE(ga.gidExt & 0xffffffffu, 0u);
    EXPECT_NE(ga, gb);
    EXPECT_EQ(a.ism->chid(), 0xFFFF);
    EXPECT_TRUE(a.ism->queryRemoteGid(gb));
    EXPECT_FALSE(a.ism->queryRemoteGid(IsmGid{ga.gid + 1, gb.gidExt}));
}

TEST(ShmIsm, RegisterOnlyTakesItsAllocatorsMemory)
{
    Device d;
    auto foreign = MmapAllocator::instance().allocate(kDmbBytes);
    EXPECT_EQ(d.ism->registerDmb(foreign, kDmbBytes).error(), std::errc::invalid_argument);
    auto own = d.ism->allocator().allocate(kDmbBytes);
    EXPECT_EQ(d.ism->registerDmb(own, kDmbBytes / 2).error(), std::errc::invalid_argument);
    Result<DmbInfo> info = d.ism->registerDmb(own, kDmbBytes);
    ASSERT_TRUE(info);
    EXPECT_NE(info->token, 0u);
    EXPECT_EQ(d.ism->grant(info->token + 1, d.ism->localGid()).error(), IsmErrc::UnknownToken);
    // In-process semantics: moveData lands in the memory and signals the eventfd.
    const std::byte bytes[3] = {std::byte{1}, std::byte{2}, std::byte{3}};
    ASSERT_TRUE(d.ism->moveData(info->token, 10, bytes, true));
    EXPECT_EQ(std::memcmp(own.get() + 10, bytes, 3), 0);
    EXPECT_TRUE(readable(d.ism->signalFd(info->token), 0));
    EXPECT_EQ(d.ism->drainSignals(info->token), 1u);
    EXPECT_FALSE(readable(d.ism->signalFd(info->token), 0));
    EXPECT_EQ(d.ism->moveData(info->token, kDmbBytes - 1, bytes, false).error(),
              IsmErrc::OutOfBounds);
    EXPECT_TRUE(d.ism->unregisterDmb(info->token));
}

// The owner is the child; the parent maps its DMB, writes and signals.
TEST(ShmIsm, TwoProcessesShareADmbWithoutACopy)
{
    static constexpr char kText[] = "written by the parent";
    Child child([](int in, int out) {
        Device d;
        IsmGid parent;
        CHILD_CHECK(get(in, parent));
        Dmb dmb = makeDmb(*d.ism);
        CHILD_CHECK(d.ism->grant(dmb.token, parent));
        CHILD_CHECK(put(out, Hello{d.ism->localGid(), dmb.token}));
        char done;
        CHILD_CHECK(get(in, done));
        CHILD_CHECK(readable(d.ism->signalFd(dmb.token), 5000));
        CHILD_CHECK(d.ism->drainSignals(dmb.token) == 1);
        CHILD_CHECK(std::memcmp(dmb.memory.get() + 100, kText, sizeof kText) == 0);
        CHILD_CHECK(d.ism->stats().attachesServed == 1 && d.ism->stats().attachesRefused == 0);
        CHILD_CHECK(d.ism->unregisterDmb(dmb.token));
        return 0;
    });
    Device d;
    ASSERT_TRUE(put(child.out(), d.ism->localGid()));
    Hello hello;
    ASSERT_TRUE(get(child.in(), hello));
    EXPECT_EQ(hello.gid.gidExt >> 32, static_cast<std::uint64_t>(child.pid()));
    Result<RemoteDmb> remote = d.ism->attachRemote(hello.gid, hello.token, kTimeout);
    ASSERT_TRUE(remote) << remote.error().message();
    EXPECT_EQ(remote->size(), kDmbBytes);
    EXPECT_EQ(remote->token(), hello.token);
    std::memcpy(remote->data() + 100, kText, sizeof kText);
    remote->signal();
    ASSERT_TRUE(put(child.out(), 'x'));
    EXPECT_EQ(child.wait(), 0);
}

TEST(ShmIsm, OnlyTheGrantedPeerAttachesAndOnlyOnce)
{
    Device owner, peer;
    Dmb dmb = makeDmb(*owner.ism);
    const IsmGid o = owner.ism->localGid(), p = peer.ism->localGid();
    // Nothing granted, and a guessed token.
    EXPECT_EQ(peer.ism->attachRemote(o, dmb.token, kTimeout).error(), IsmErrc::AttachRefused);
    EXPECT_EQ(peer.ism->attachRemote(o, dmb.token ^ 0x5a5a, kTimeout).error(),
              IsmErrc::AttachRefused);
    // Granted to another GID (same process even): refused.
    ASSERT_TRUE(owner.ism->grant(dmb.token, IsmGid{p.gid, p.gidExt ^ 1}));
    EXPECT_EQ(peer.ism->attachRemote(o, dmb.token, kTimeout).error(), IsmErrc::AttachRefused);
    // Granted to us: once.
    ASSERT_TRUE(owner.ism->grant(dmb.token, p));
    Result<RemoteDmb> first = peer.ism->attachRemote(o, dmb.token, kTimeout);
    ASSERT_TRUE(first) << first.error().message();
    EXPECT_EQ(peer.ism->attachRemote(o, dmb.token, kTimeout).error(), IsmErrc::AttachRefused);
    const ShmIsmStats stats = owner.ism->stats();
    EXPECT_EQ(stats.attachesServed, 1u);
    EXPECT_EQ(stats.attachesRefused, 4u);
    // Other hosts and GIDs nobody serves.
    EXPECT_EQ(peer.ism->attachRemote(IsmGid{o.gid + 1, o.gidExt}, dmb.token, kTimeout).error(),
              IsmErrc::PeerUnreachable);
    EXPECT_EQ(peer.ism->attachRemote(IsmGid{o.gid, o.gidExt ^ 1}, dmb.token, kTimeout).error(),
              IsmErrc::PeerUnreachable);
}

TEST(ShmIsm, ARequesterMustBeTheProcessItsGidNames)
{
    Device owner;
    Dmb dmb = makeDmb(*owner.ism);
    const IsmGid o = owner.ism->localGid();
    const auto pid = static_cast<std::uint64_t>(::getpid());
    // Granted to a GID of pid 1: our claim to be it is refused.
    const IsmGid other{o.gid, (std::uint64_t{1} << 32) | 777};
    ASSERT_TRUE(owner.ism->grant(dmb.token, other));
    RawReply r = rawAttach(o, requestFor(dmb.token, other));
    ASSERT_TRUE(r.ok);
    EXPECT_EQ(r.status, shm::AttachStatus::Refused);
    EXPECT_EQ(r.fds, 0u);
    // The same raw request naming our own pid is served: the pid made the difference.
    const IsmGid self{o.gid, (pid << 32) | 777};
    ASSERT_TRUE(owner.ism->grant(dmb.token, self));
    r = rawAttach(o, requestFor(dmb.token, self));
    ASSERT_TRUE(r.ok);
    EXPECT_EQ(r.status, shm::AttachStatus::Granted);
    EXPECT_EQ(r.fds, 2u);
    // Malformed requests are refused too.
    shm::AttachRequest bad = requestFor(dmb.token, self);
    bad.magic = 0;
    ASSERT_TRUE(owner.ism->grant(dmb.token, self));
    r = rawAttach(o, bad);
    EXPECT_TRUE(r.ok && r.status == shm::AttachStatus::Refused && r.fds == 0);
    EXPECT_EQ(owner.ism->stats().attachesServed, 1u);
    EXPECT_EQ(owner.ism->stats().attachesRefused, 2u);
}

TEST(ShmIsm, AnotherUserGetsNothing)
{
    if (::geteuid() != 0)
        GTEST_SKIP() << "needs root to run a child as another user";
    Child child([](int in, int out) {
        CHILD_CHECK(::setgid(65534) == 0 && ::setuid(65534) == 0);
        Device d;
        CHILD_CHECK(put(out, d.ism->localGid()));
        Hello hello;
        CHILD_CHECK(get(in, hello));
        // Our own check: the owner runs as another user.
        CHILD_CHECK(d.ism->attachRemote(hello.gid, hello.token, kTimeout).error() ==
                    IsmErrc::OwnerMismatch);
        // The owner's check: asked anyway, with the granted GID, it says no.
        RawReply r = rawAttach(hello.gid, requestFor(hello.token, d.ism->localGid()));
        CHILD_CHECK(r.ok && r.status == shm::AttachStatus::Refused && r.fds == 0);
        return 0;
    });
    Device d;
    IsmGid peer;
    ASSERT_TRUE(get(child.in(), peer));
    Dmb dmb = makeDmb(*d.ism);
    ASSERT_TRUE(d.ism->grant(dmb.token, peer));
    ASSERT_TRUE(put(child.out(), Hello{d.ism->localGid(), dmb.token}));
    EXPECT_EQ(child.wait(), 0);
    EXPECT_EQ(d.ism->stats().attachesServed, 0u);
    EXPECT_EQ(d.ism->stats().attachesRefused, 1u);
}

TEST(ShmIsm, RevokeCutsTheOldPeerOffAndThePoolReusesTheBuffer)
{
    Device owner, peer;
    IsmRegistrar registrar(*owner.ism);
    PoolConfig config;
    config.tech = Tech::SmcD;
    config.allocator = &owner.ism->allocator();
    auto pool = std::move(BufferPool::create(config, registrar)).value();

    Result<BufferRef> rmb = pool->acquire(BufferKind::Rmb, kDmbBytes);
    ASSERT_TRUE(rmb) << rmb.error().message();
    const DmbToken token = (*rmb)->dmbToken();
    std::byte* const data = (*rmb)->data();
    ASSERT_TRUE(owner.ism->grant(token, peer.ism->localGid()));
    Result<RemoteDmb> old = peer.ism->attachRemote(owner.ism->localGid(), token, kTimeout);
    ASSERT_TRUE(old) << old.error().message();
    std::memcpy(old->data(), "first", 5);
    EXPECT_EQ(std::memcmp(data, "first", 5), 0); // the same pages, no copy
    const int oldSignalFd = owner.ism->signalFd(token);

    ASSERT_TRUE(owner.ism->revoke(token));
    EXPECT_EQ(data[0], std::byte{0}); // fresh pages at the same address
    std::memcpy(old->data(), "stale", 5);
    old->signal();
    EXPECT_EQ(data[0], std::byte{0}); // the old peer writes into dead pages
    EXPECT_NE(owner.ism->signalFd(token), oldSignalFd);
    EXPECT_FALSE(readable(owner.ism->signalFd(token), 0));
    // The revoked grant is gone.
    EXPECT_EQ(peer.ism->attachRemote(owner.ism->localGid(), token, kTimeout).error(),
              IsmErrc::AttachRefused);

    // The pool reuses the buffer and its registration for the next connection.
    ASSERT_TRUE(pool->release(*rmb));
    Result<BufferRef> again = pool->acquire(BufferKind::Rmb, kDmbBytes);
    ASSERT_TRUE(again);
    EXPECT_EQ((*again)->data(), data);
    EXPECT_EQ((*again)->dmbToken(), token);
    ASSERT_TRUE(owner.ism->grant(token, peer.ism->localGid()));
    Result<RemoteDmb> next = peer.ism->attachRemote(owner.ism->localGid(), token, kTimeout);
    ASSERT_TRUE(next);
    std::memcpy(next->data(), "second", 6);
    next->signal();
    EXPECT_EQ(std::memcmp(data, "second", 6), 0);
    EXPECT_TRUE(readable(owner.ism->signalFd(token), 0));
    EXPECT_EQ(std::memcmp(old->data(), "stale", 5), 0); // the old mapping stays valid
    ASSERT_TRUE(pool->release(*again));
}

TEST(ShmIsm, AGrantAfterAMissingRevokeStillGetsFreshPages)
{
    Device owner, peer;
    Dmb dmb = makeDmb(*owner.ism);
    ASSERT_TRUE(owner.ism->grant(dmb.token, peer.ism->localGid()));
    Result<RemoteDmb> old = peer.ism->attachRemote(owner.ism->localGid(), dmb.token, kTimeout);
    ASSERT_TRUE(old);
    ASSERT_TRUE(owner.ism->grant(dmb.token, peer.ism->localGid())); // no revoke in between
    std::memcpy(old->data(), "stale", 5);
    EXPECT_EQ(dmb.memory.get()[0], std::byte{0});
}

TEST(ShmIsm, ADeadPeerLeavesNoSharedMemoryBehind)
{
    Child child([](int in, int out) {
        Device d;
        CHILD_CHECK(put(out, d.ism->localGid()));
        Hello hello;
        CHILD_CHECK(get(in, hello));
        Result<RemoteDmb> remote = d.ism->attachRemote(hello.gid, hello.token, kTimeout);
        CHILD_CHECK(remote);
        std::memcpy(remote->data(), "alive", 5);
        remote->signal();
        CHILD_CHECK(put(out, 'a'));
        ::pause(); // until killed, mapping held
        return 0;
    });
    {
        Device d;
        IsmGid peer;
        ASSERT_TRUE(get(child.in(), peer));
        Dmb dmb = makeDmb(*d.ism);
        ASSERT_TRUE(d.ism->grant(dmb.token, peer));
        ASSERT_TRUE(put(child.out(), Hello{d.ism->localGid(), dmb.token}));
        char attached;
        ASSERT_TRUE(get(child.in(), attached));
        ASSERT_EQ(::kill(child.pid(), SIGKILL), 0);
        EXPECT_EQ(child.wait(), -SIGKILL);
        EXPECT_EQ(std::memcmp(dmb.memory.get(), "alive", 5), 0);
        EXPECT_EQ(d.ism->drainSignals(dmb.token), 1u);
        EXPECT_GT(countMemfdLinks(), 0u);
        ASSERT_TRUE(d.ism->unregisterDmb(dmb.token));
        dmb.memory.reset();
        EXPECT_EQ(d.ism->allocator().liveCount(), 0u);
    }
    EXPECT_EQ(countMemfdLinks(), 0u);
    EXPECT_EQ(countMemfdMappings(), 0u);
    // Nothing was ever named.
    if (DIR* shm = ::opendir("/dev/shm")) {
        while (dirent* e = ::readdir(shm))
            EXPECT_EQ(std::string(e->d_name).find("smc"), std::string::npos) << e->d_name;
        ::closedir(shm);
    }
}

// An owner that is the process its GID names, of our user, but sends bad fds.
class HostileOwner : public ::testing::Test
{
protected:
    Result<RemoteDmb> attachTo(RawOwner::Respond respond,
                               std::chrono::milliseconds timeout = kTimeout)
    {
        RawOwner owner(gid_, std::move(respond));
        EXPECT_TRUE(owner.bound());
        return d_.ism->attachRemote(gid_, 42, timeout);
    }
    static UniqueFd memfd(std::size_t size, bool sealed)
    {
        UniqueFd fd(::memfd_create("hostile", MFD_CLOEXEC | MFD_ALLOW_SEALING));
        EXPECT_EQ(::ftruncate(fd.get(), static_cast<off_t>(size)), 0);
        if (sealed) {
            EXPECT_EQ(::fcntl(fd.get(), F_ADD_SEALS, F_SEAL_SHRINK | F_SEAL_GROW), 0);
        }
        return fd;
    }

    Device d_;
    IsmGid gid_{ShmIsm::hostGid(), (std::uint64_t(::getpid()) << 32) | 0xbad};
};

TEST_F(HostileOwner, EveryBadReplyIsRefusedAndLeaksNoFd)
{
    const std::size_t before = countFds();
    UniqueFd event(::eventfd(0, EFD_CLOEXEC));
    EXPECT_EQ(attachTo([&](int c, const shm::AttachRequest& r) {
                  sendReply(c, r, kDmbBytes, {memfd(kDmbBytes, false).get(), event.get()});
              }).error(),
              IsmErrc::BadSharedMemory);
    EXPECT_EQ(attachTo([&](int c, const shm::AttachRequest& r) {
                  sendReply(c, r, 2 * kDmbBytes, {memfd(kDmbBytes, true).get(), event.get()});
              }).error(),
              IsmErrc::BadSharedMemory);
    int pipeFds[2];
    ASSERT_EQ(::pipe2(pipeFds, O_CLOEXEC), 0);
    UniqueFd pipeRead(pipeFds[0]), pipeWrite(pipeFds[1]);
    EXPECT_EQ(attachTo([&](int c, const shm::AttachRequest& r) {
                  sendReply(c, r, kDmbBytes, {memfd(kDmbBytes, true).get(), pipeWrite.get()});
              }).error(),
              IsmErrc::BadEventFd);
    EXPECT_EQ(attachTo([&](int c, const shm::AttachRequest& r) {
                  sendReply(c, r, kDmbBytes, {memfd(kDmbBytes, true).get()});
              }).error(),
              IsmErrc::BadReply);
    EXPECT_EQ(
        attachTo([&](int c, const shm::AttachRequest& r) {
            sendReply(c, r, kDmbBytes, {memfd(kDmbBytes, true).get(), event.get(), event.get()});
        }).error(),
        IsmErrc::BadReply);
    EXPECT_EQ(attachTo([&](int c, const shm::AttachRequest&) {
                  (void)::send(c, "short", 5, MSG_NOSIGNAL);
              }).error(),
              IsmErrc::BadReply);
    EXPECT_EQ(attachTo([&](int c, const shm::AttachRequest& r) {
                  shm::AttachRequest other = r;
                  other.token ^= 1; // a reply for another token
                  sendReply(c, other, kDmbBytes, {memfd(kDmbBytes, true).get(), event.get()});
              }).error(),
              IsmErrc::BadReply);
    EXPECT_EQ(attachTo([](int, const shm::AttachRequest&) {}, 200ms).error(), std::errc::timed_out);
    // And a well-behaved raw owner is accepted: the checks above are the reason.
    Result<RemoteDmb> good = attachTo([&](int c, const shm::AttachRequest& r) {
        sendReply(c, r, kDmbBytes, {memfd(kDmbBytes, true).get(), event.get()});
    });
    ASSERT_TRUE(good) << good.error().message();
    good->signal();
    std::uint64_t count = 0;
    EXPECT_EQ(::read(event.get(), &count, sizeof count), 8);
    EXPECT_EQ(count, 1u);
    good->reset();
    EXPECT_EQ(countFds(), before + 1 + 2); // only our eventfd and pipe
}

TEST_F(HostileOwner, ASocketOfAnotherProcessIsNotTheOwner)
{
    // Bound by us, but claimed for pid 1: an impostor, whatever it would send.
    gid_ = IsmGid{ShmIsm::hostGid(), (std::uint64_t{1} << 32) | 0xbad};
    EXPECT_EQ(attachTo([&](int c, const shm::AttachRequest& r) {
                  sendReply(c, r, kDmbBytes, {memfd(kDmbBytes, true).get()});
              }).error(),
              IsmErrc::OwnerMismatch);
}

} // namespace
} // namespace smc
