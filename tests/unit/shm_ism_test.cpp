// SPDX-License-Identifier: MIT
// ShmIsm: two real processes share a DMB; grants, pid/user checks, revoke, a dead peer.
#include "smc/ism/shm_ism.h"

#include <gtest/gtest.h>

#include <cstring>
#include <string>

#include <dirent.h>
#include <signal.h>
#include <unistd.h>

#include "pool/buffer_pool.h"
#include "smc/ism/ism_registrar.h"
#include "tests/unit/shm_ism_support.h"

namespace smc
{
namespace
{

using namespace shmtest;
using namespace std::chrono_literals;

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

    Result<DmbToken> renewed = owner.ism->revoke(token);
    ASSERT_TRUE(renewed);
    EXPECT_NE(*renewed, token); // one token, one set of pages
    (*rmb)->setDmbToken(*renewed);
    EXPECT_EQ(data[0], std::byte{0}); // fresh pages at the same address
    std::memcpy(old->data(), "stale", 5);
    old->signal();
    EXPECT_EQ(data[0], std::byte{0}); // the old peer writes into dead pages
    EXPECT_EQ(owner.ism->signalFd(token), -1);
    EXPECT_NE(owner.ism->signalFd(*renewed), oldSignalFd);
    EXPECT_FALSE(readable(owner.ism->signalFd(*renewed), 0));
    // The revoked grant is gone, under either token.
    EXPECT_EQ(peer.ism->attachRemote(owner.ism->localGid(), token, kTimeout).error(),
              IsmErrc::AttachRefused);
    EXPECT_EQ(peer.ism->attachRemote(owner.ism->localGid(), *renewed, kTimeout).error(),
              IsmErrc::AttachRefused);

    // The pool reuses the buffer and its registration for the next connection.
    ASSERT_TRUE(pool->release(*rmb));
    Result<BufferRef> again = pool->acquire(BufferKind::Rmb, kDmbBytes);
    ASSERT_TRUE(again);
    EXPECT_EQ((*again)->data(), data);
    EXPECT_EQ((*again)->dmbToken(), *renewed);
    ASSERT_EQ(owner.ism->grant(*renewed, peer.ism->localGid()).value(), *renewed);
    Result<RemoteDmb> next = peer.ism->attachRemote(owner.ism->localGid(), *renewed, kTimeout);
    ASSERT_TRUE(next);
    std::memcpy(next->data(), "second", 6);
    next->signal();
    EXPECT_EQ(std::memcmp(data, "second", 6), 0);
    EXPECT_TRUE(readable(owner.ism->signalFd(*renewed), 0));
    EXPECT_EQ(std::memcmp(old->data(), "stale", 5), 0); // the old mapping stays valid
    ASSERT_TRUE(pool->release(*again));
}

TEST(ShmIsm, AGrantToAnotherPeerGetsFreshPagesUnderANewToken)
{
    Device owner, peer, other;
    Dmb dmb = makeDmb(*owner.ism);
    ASSERT_TRUE(owner.ism->grant(dmb.token, peer.ism->localGid()));
    Result<RemoteDmb> old = peer.ism->attachRemote(owner.ism->localGid(), dmb.token, kTimeout);
    ASSERT_TRUE(old);
    // No revoke in between: the grant itself replaces what `peer` has seen.
    Result<DmbToken> token = owner.ism->grant(dmb.token, other.ism->localGid());
    ASSERT_TRUE(token);
    EXPECT_NE(*token, dmb.token);
    std::memcpy(old->data(), "stale", 5);
    EXPECT_EQ(dmb.memory.get()[0], std::byte{0});
    // A peer that kept its mapping finds nothing under the new token.
    peer.ism->keepRemote(owner.ism->localGid(), std::move(*old));
    EXPECT_EQ(peer.ism->attachRemote(owner.ism->localGid(), *token, kTimeout).error(),
              IsmErrc::AttachRefused);
    EXPECT_TRUE(other.ism->attachRemote(owner.ism->localGid(), *token, kTimeout));
}

TEST(ShmIsm, APeerThatKeptItsMappingGetsTheSamePagesWithoutAnAttach)
{
    Device owner, peer;
    Dmb dmb = makeDmb(*owner.ism);
    ASSERT_TRUE(owner.ism->grant(dmb.token, peer.ism->localGid()));
    Result<RemoteDmb> first = peer.ism->attachRemote(owner.ism->localGid(), dmb.token, kTimeout);
    ASSERT_TRUE(first);
    peer.ism->keepRemote(owner.ism->localGid(), std::move(*first));
    EXPECT_EQ(peer.ism->stats().remotesKept, 1u);

    // Granted to the same peer again: same pages, same token; the kept mapping serves it.
    ASSERT_EQ(owner.ism->grant(dmb.token, peer.ism->localGid()).value(), dmb.token);
    const std::uint64_t served = owner.ism->stats().attachesServed;
    Result<RemoteDmb> again = peer.ism->attachRemote(owner.ism->localGid(), dmb.token, kTimeout);
    ASSERT_TRUE(again);
    EXPECT_EQ(owner.ism->stats().attachesServed, served); // no round trip
    EXPECT_EQ(peer.ism->stats().attachesKept, 1u);
    EXPECT_EQ(peer.ism->stats().remotesKept, 0u);
    std::memcpy(again->data(), "again", 5);
    EXPECT_EQ(std::memcmp(dmb.memory.get(), "again", 5), 0);

    // Two trims without a use drop a kept mapping.
    peer.ism->keepRemote(owner.ism->localGid(), std::move(*again));
    peer.ism->trimRemotes();
    EXPECT_EQ(peer.ism->stats().remotesKept, 1u);
    peer.ism->trimRemotes();
    EXPECT_EQ(peer.ism->stats().remotesKept, 0u);
    EXPECT_EQ(peer.ism->stats().remoteDmbs, 0u);
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

} // namespace
} // namespace smc
