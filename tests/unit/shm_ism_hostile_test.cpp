// SPDX-License-Identifier: MIT
// ShmIsm's attacher against hostile owners: unsealed memfds, non-eventfds, bad replies, impostors.
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

} // namespace
} // namespace smc
