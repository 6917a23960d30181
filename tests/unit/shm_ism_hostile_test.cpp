// SPDX-License-Identifier: MIT
// ShmIsm against hostile peers: owners with unsealed memfds, false doorbells, bad replies or
// impostors; peers that make a doorbell blocking.
#include "smc/ism/shm_ism.h"

#include <gtest/gtest.h>

#include <cstring>
#include <string>
#include <vector>

#include <fcntl.h>
#include <sys/eventfd.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include "tests/libtest/liveness.h"
#include "tests/unit/shm_ism_support.h"

namespace smc
{
namespace
{

using namespace shmtest;
using namespace std::chrono_literals;

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
    doorbell::Pair bell = doorbell::make().value();
    const int event = bell.button.get();
    UniqueFd eventFd(::eventfd(0, EFD_CLOEXEC)); // what version 1 sent: no doorbell now
    EXPECT_EQ(attachTo([&](int c, const shm::AttachRequest& r) {
                  sendReply(c, r, kDmbBytes, {memfd(kDmbBytes, false).get(), event});
              }).error(),
              IsmErrc::BadSharedMemory);
    EXPECT_EQ(attachTo([&](int c, const shm::AttachRequest& r) {
                  sendReply(c, r, 2 * kDmbBytes, {memfd(kDmbBytes, true).get(), event});
              }).error(),
              IsmErrc::BadSharedMemory);
    int pipeFds[2];
    ASSERT_EQ(::pipe2(pipeFds, O_CLOEXEC), 0);
    UniqueFd pipeRead(pipeFds[0]), pipeWrite(pipeFds[1]);
    EXPECT_EQ(attachTo([&](int c, const shm::AttachRequest& r) {
                  sendReply(c, r, kDmbBytes, {memfd(kDmbBytes, true).get(), pipeWrite.get()});
              }).error(),
              IsmErrc::BadDoorbell);
    EXPECT_EQ(attachTo([&](int c, const shm::AttachRequest& r) {
                  sendReply(c, r, kDmbBytes, {memfd(kDmbBytes, true).get(), eventFd.get()});
              }).error(),
              IsmErrc::BadDoorbell);
    EXPECT_EQ(attachTo([&](int c, const shm::AttachRequest& r) {
                  sendReply(c, r, kDmbBytes, {memfd(kDmbBytes, true).get()});
              }).error(),
              IsmErrc::BadReply);
    EXPECT_EQ(attachTo([&](int c, const shm::AttachRequest& r) {
                  sendReply(c, r, kDmbBytes, {memfd(kDmbBytes, true).get(), event, event});
              }).error(),
              IsmErrc::BadReply);
    EXPECT_EQ(attachTo([&](int c, const shm::AttachRequest&) {
                  (void)::send(c, "short", 5, MSG_NOSIGNAL);
              }).error(),
              IsmErrc::BadReply);
    EXPECT_EQ(attachTo([&](int c, const shm::AttachRequest& r) {
                  shm::AttachRequest other = r;
                  other.token ^= 1; // a reply for another token
                  sendReply(c, other, kDmbBytes, {memfd(kDmbBytes, true).get(), event});
              }).error(),
              IsmErrc::BadReply);
    EXPECT_EQ(attachTo([](int, const shm::AttachRequest&) {}, 200ms).error(), std::errc::timed_out);
    // And a well-behaved raw owner is accepted: the checks above are the reason.
    Result<RemoteDmb> good = attachTo([&](int c, const shm::AttachRequest& r) {
        sendReply(c, r, kDmbBytes, {memfd(kDmbBytes, true).get(), event});
    });
    ASSERT_TRUE(good) << good.error().message();
    good->signal();
    EXPECT_EQ(doorbell::drain(bell.ear.get()), 1u);
    good->reset();
    EXPECT_EQ(countFds(), before + 2 + 1 + 2); // only our doorbell, eventfd and pipe
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

// Requesters that connect and never ask hold at most ShmIsm::kMaxPending
// slots: the epoll thread never waits for them, and a real attach still works.
TEST(ShmIsmServer, SilentRequestersDoNotWedgeTheOwner)
{
    Device owner, peer;
    const IsmGid o = owner.ism->localGid();
    const std::string name = shm::socketName(o);
    sockaddr_un addr{};
    addr.sun_family = AF_UNIX;
    std::memcpy(addr.sun_path, name.data(), name.size());
    const auto len = static_cast<socklen_t>(offsetof(sockaddr_un, sun_path) + name.size());
    std::vector<UniqueFd> silent;
    for (std::size_t i = 0; i < ShmIsm::kMaxPending + 36; ++i) {
        silent.emplace_back(::socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0));
        ASSERT_EQ(::connect(silent.back().get(), reinterpret_cast<sockaddr*>(&addr), len), 0);
    }
    Dmb dmb = makeDmb(*owner.ism);
    ASSERT_TRUE(owner.ism->grant(dmb.token, peer.ism->localGid()));
    Result<RemoteDmb> remote = peer.ism->attachRemote(o, dmb.token, kTimeout);
    ASSERT_TRUE(remote) << remote.error().message();
    EXPECT_EQ(owner.ism->stats().attachesServed, 1u);
    EXPECT_GE(owner.ism->stats().attachesRefused, 36u); // the oldest silent ones, dropped
}

// A DMB's signal file as the other side of an attach can get at it: the owner's signalFd
// and what the requester got. Whatever either side does to it, the other never blocks.
class SharedSignal : public ::testing::Test
{
protected:
    void SetUp() override
    {
        dmb_ = makeDmb(*owner_.ism);
        ASSERT_TRUE(owner_.ism->grant(dmb_.token, peer_.ism->localGid()));
        Result<RemoteDmb> r = peer_.ism->attachRemote(owner_.ism->localGid(), dmb_.token, kTimeout);
        ASSERT_TRUE(r) << r.error().message();
        remote_ = std::move(*r);
        signalFd_ = owner_.ism->signalFd(dmb_.token);
        ASSERT_GE(signalFd_, 0);
    }
    Device owner_, peer_;
    Dmb dmb_;
    RemoteDmb remote_;
    int signalFd_ = -1;
};

// A requester that clears O_NONBLOCK where it can and takes the signals itself: the owner's
// drain (on its epoll thread, under its device lock) still returns at once.
TEST_F(SharedSignal, ADrainNeverBlocks)
{
    ASSERT_EQ(::fcntl(signalFd_, F_SETFL, 0), 0);
    std::uint64_t drained = 1;
    test::within(10s, [&] { drained = owner_.ism->drainSignals(dmb_.token); });
    EXPECT_EQ(drained, 0u);
    remote_.signal();
    EXPECT_TRUE(readable(signalFd_, 1000));
    test::within(10s, [&] { drained = owner_.ism->drainSignals(dmb_.token); });
    EXPECT_EQ(drained, 1u);
    EXPECT_FALSE(readable(signalFd_, 0));
}

// An owner that makes what it shares blocking, floods it and never drains: the requester's
// signal() (under a connection's lock on the data path) still returns at once, every time.
TEST_F(SharedSignal, ASignalNeverBlocks)
{
    ASSERT_EQ(::fcntl(signalFd_, F_SETFL, 0), 0);
    const std::uint64_t full = ~std::uint64_t{1}; // an eventfd counter's last value
    (void)!::write(signalFd_, &full, sizeof full);
    test::within(10s, [&] {
        for (int i = 0; i < 20000; ++i)
            remote_.signal();
    });
    // The owner's queue is bounded: it drains in bounded steps and is empty after.
    std::uint64_t total = 0;
    for (std::uint64_t n; (n = owner_.ism->drainSignals(dmb_.token)) > 0;) {
        EXPECT_LE(n, doorbell::kMaxDrain);
        total += n;
    }
    EXPECT_GT(total, 0u);
    EXPECT_LT(total, 20000u);
    EXPECT_FALSE(readable(signalFd_, 0));
}

} // namespace
} // namespace smc
