// SPDX-License-Identifier: MIT
// ShmIsm: loopback-ism across the processes of one host (DMBs in memfds, handed over a socket).
#pragma once

#include <atomic>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <random>
#include <unordered_map>
#include <vector>

#include "base/executor.h"
#include "base/mutex.h"
#include "base/result.h"
#include "base/unique_fd.h"
#include "smc/ism/doorbell.h"
#include "smc/ism/ism_device.h"
#include "smc/ism/remote_cache.h"
#include "smc/ism/remote_dmb.h"
#include "smc/ism/shm_allocator.h"

namespace smc
{

struct ShmIsmStats {
    std::uint64_t attachesServed = 0;  // replies that carried a DMB
    std::uint64_t attachesRefused = 0; // requests answered no (or malformed)
    // What the device holds: its DMBs (each a mapping of a memfd, the memfd and its
    // doorbell's two sockets: three fds), and peers' DMBs mapped here (a mapping and the
    // doorbell's button each).
    std::uint64_t dmbs = 0;
    std::uint64_t remoteDmbs = 0;
    std::uint64_t attachesKept = 0; // attachRemote answered with a kept mapping
    std::uint64_t remotesKept = 0;  // mappings kept now (part of remoteDmbs)
};

// loopback-ism between processes of one host (SMC-D, CHID 0xFFFF). See
// docs/design.md "Cross-process loopback-ism" for the trust rules.
//
// Identity: localGid() = {hostGid(), pid << 32 | random32}: the same `gid`
// for every device of the host (so CLC can tell "same host"), and an
// extension naming this device and its process.
//
// Memory: a DMB is memory of allocator() (an SMC-D pool uses it as
// PoolConfig::allocator, with an IsmRegistrar over this device), each one a
// sealed memfd, never named. A peer process maps it after grant() and
// attachRemote(); revoke() cuts it off again.
//
// Within the process the IsmDevice calls behave like LoopbackIsm's, simpler:
// the data path (moveData, signal) takes the device's short lock, and a
// signal rings the DMB's doorbell (signalFd), not a handler call.
//
// Lifetimes: the executor must outlive the device, the device every call on
// it and every pool using it; a DmbAttachment or RemoteDmb may outlive it.
class ShmIsm final : public IsmDevice
{
public:
    static constexpr std::uint32_t kMaxDmbs = 5000;
    static constexpr std::uint16_t kChid = 0xFFFF; // loopback-ism's CHID
    static constexpr std::size_t kMaxPending = 64; // connections waiting for their request
    static constexpr unsigned kListenBacklog = 64;
    // Peers' mappings kept for reuse (keepRemote): at most this many, fewer when the
    // descriptor limit is low (an eighth of it: each holds one fd), half of them of one owner.
    static constexpr std::size_t kKeptRemotes = 1024;

    // Binds the device's abstract SOCK_SEQPACKET socket (shm::socketName of
    // its GID) and serves attach requests on the executor's epoll thread,
    // which never blocks for a peer: accepts and reads are non-blocking, one
    // request and one reply per connection, and at most kMaxPending
    // connections wait for their request (the oldest is dropped). Errors:
    // the errno of socket, bind, listen or Executor::watch. Does not block.
    static Result<std::unique_ptr<ShmIsm>> open(Executor& executor);
    // Stops serving (waits for a request being answered), unbinds the
    // socket, cuts in-process attachments' way back. Not from a callback of
    // the executor's epoll thread.
    ~ShmIsm() override;
    ShmIsm(const ShmIsm&) = delete;
    ShmIsm& operator=(const ShmIsm&) = delete;

    // One nonzero value per host (a hash of the boot id).
    static std::uint64_t hostGid() noexcept;
    ShmAllocator& allocator() noexcept { return allocator_; }

    IsmGid localGid() const noexcept override { return gid_; }
    std::uint16_t chid() const noexcept override { return kChid; }
    // Empty for any GID of this host (same `gid`): host_unreachable otherwise.
    Result<void> queryRemoteGid(const IsmGid& peer) const noexcept override;

    // `memory` must be exactly one allocation of allocator() (else
    // invalid_argument). Errors also: IsmErrc::DmbLimitReached, the errno of
    // socketpair (its doorbell). Takes the device's short lock.
    Result<DmbInfo> registerDmb(std::shared_ptr<std::byte> memory, std::size_t size) override;
    // As IsmDevice; a DMB a peer process attached also gets fresh pages (as
    // revoke), so whatever the memory holds next is not theirs to see.
    // Errors: IsmErrc::UnknownToken. Takes the device's short lock.
    Result<void> unregisterDmb(DmbToken token) override;
    bool supportsNoCopy() const noexcept override { return true; }
    // In-process attach (same memory). Errors: IsmErrc::UnknownToken.
    Result<DmbAttachment> attachDmb(DmbToken token) override;
    void detachDmb(DmbToken token) noexcept override;
    // Under the device's short lock (a memcpy). A signal rings the DMB's
    // doorbell. Errors: IsmErrc::UnknownToken, IsmErrc::OutOfBounds.
    Result<void> moveData(DmbToken token, std::size_t offset, std::span<const std::byte> data,
                          bool signal) noexcept override;
    Result<void> signal(DmbToken token) noexcept override;

    // The next single attach of `token` may come from exactly `peer` (the
    // connection's peer, from CLC); replaces an unused grant. Pages a peer
    // process other than `peer` got (or that revoke() retired) are replaced
    // first, under a new token: a token names one set of pages, seen by at
    // most one peer, for its whole life, so a peer that kept its mapping
    // (keepRemote) may use it again for the same token. Returns the token to
    // announce (the registration's: update the buffer's). Errors:
    // IsmErrc::UnknownToken, the errno of replacing pages. Takes the
    // device's short lock.
    Result<DmbToken> grant(DmbToken token, const IsmGid& peer);
    // The connection ended and the DMB goes to anybody next: drops its grant
    // and, if a peer process attached the DMB, maps fresh zero pages (a fresh
    // memfd, MAP_FIXED) at the same address with a fresh doorbell, under a
    // new token (returned: update the buffer's). The pool's pointer stays
    // valid; the old peer keeps mapping the old pages, which nobody here
    // reads again, and its signals go to the old doorbell. So a pooled buffer
    // can be reused safely. Call it before the buffer goes back to the pool,
    // with nobody of this process using it, after unwatching signalFd().
    // Replacing pages can fail (fds, memory): the DMB then keeps its token,
    // and the next grant() retries the replacement (and fails if it cannot).
    // Errors: IsmErrc::UnknownToken, the errno of memfd_create, mmap or
    // socketpair.
    Result<DmbToken> revoke(DmbToken token);

    // Maps the DMB `token` of the device `owner` (another process of this
    // host, or this one) if it granted it to us, or hands out the mapping
    // keepRemote() kept of it (no round trip). Blocks up to `timeout`.
    // Errors: IsmErrc::PeerUnreachable (another host, no such socket),
    // IsmErrc::OwnerMismatch (the socket's process is not owner's pid, or
    // runs as another user), IsmErrc::AttachRefused, IsmErrc::BadReply,
    // IsmErrc::BadSharedMemory (not sealed SHRINK|GROW, size not as
    // announced), IsmErrc::BadDoorbell, timed_out, the errno of socket,
    // connect, send, recvmsg or mmap. Not from the executor's epoll thread
    // (it serves this process's devices: an attach to one of them would
    // wait for itself until the timeout).
    Result<RemoteDmb> attachRemote(const IsmGid& owner, DmbToken token,
                                   std::chrono::milliseconds timeout);
    // Drops an unused grant of `token`; pages and token stay (a DMB kept for the peer that
    // has its mapping: no attach is due until the next grant). Takes the device's short lock.
    void dropGrant(DmbToken token);
    // Keeps a mapping of `owner`'s that we are done with (nothing of ours
    // writes into it any more) for a later attachRemote() of its token; see
    // RemoteCache for the bounds; without memory for it, the mapping goes at once. Never
    // blocks.
    void keepRemote(const IsmGid& owner, RemoteDmb dmb) noexcept;
    // attachRemote's kept mapping of `owner`'s `token` only: an empty one if there is none.
    // Never waits.
    RemoteDmb takeKeptRemote(const IsmGid& owner, DmbToken token);
    // Drops the kept mappings no attach took since the last call.
    void trimRemotes();

    // Offers `fd` (a Unix stream socket) to whoever rings the DMB, for its
    // pulses (RemoteDmb::pulse): the connection that holds the DMB now. What
    // an earlier connection offered and nobody took goes first. Call it before
    // the peer may pulse (before the pulse word turns on). dropOffers() takes
    // back what nobody took: an offer in flight costs the host (a Unix socket
    // in flight wakes the kernel's garbage collector at every close). Errors:
    // IsmErrc::UnknownToken, sendmsg's errno. Take the device's short lock;
    // never block.
    Result<void> offer(DmbToken token, int fd);
    void dropOffers(DmbToken token);
    // The doorbell a peer's RemoteDmb::signal() rings (readable after a
    // signal), or -1 for an unknown token. Changes on revoke. Poll it; read
    // it only with drainSignals().
    int signalFd(DmbToken token) const noexcept;
    // Takes the DMB's signals (at most doorbell::kMaxDrain at a time: the
    // rest keep signalFd readable); how many, 0 when none (or unknown).
    // Never blocks, whatever a peer did.
    std::uint64_t drainSignals(DmbToken token) noexcept;
    // Takes the device's short lock.
    ShmIsmStats stats() const noexcept;
    // In a fork(2) child of the device's process, which never uses it (its threads are the
    // parent's): the device's name goes from this process (its listener is closed), so that a
    // child does not hold it after its parent ended. Nothing else is touched.
    void leaveInChild() noexcept { listener_.reset(); }

private:
    struct Dmb {
        std::uint32_t index = 0;
        std::shared_ptr<std::byte> memory;
        std::size_t size = 0;
        doorbell::Pair bell; // the peer gets a copy of the button
        std::optional<IsmGid> grant;
        std::optional<IsmGid> exposedTo; // the peer process that got these pages, if one did
        bool retired = false;            // revoked: the pages go to nobody again
        std::uint32_t attached = 0;      // in-process attachments
    };
    struct Pending {
        UniqueFd fd;
        int watch = -1;
    };

    ShmIsm(Executor& executor, IsmGid gid, UniqueFd listener, std::size_t keptRemotes);
    Dmb* find(DmbToken token) SMC_REQUIRES(mutex_);
    const Dmb* find(DmbToken token) const SMC_REQUIRES(mutex_);
    Result<DmbToken> renew(DmbToken token) SMC_REQUIRES(mutex_);
    DmbToken newToken(DmbToken old) SMC_REQUIRES(mutex_);
    void onListenerReadable();
    void onConnectionReadable(std::uint64_t id);
    bool serve(int fd);

    Executor& executor_;
    const IsmGid gid_;
    ShmAllocator allocator_;

    mutable Mutex mutex_; // the DMB table
    // Hashed: tokens are random, and a tree's walk was a cache miss per level on every
    // connection's lookups.
    std::unordered_map<DmbToken, Dmb> dmbs_ SMC_GUARDED_BY(mutex_);
    std::vector<std::uint32_t> freeIndexes_ SMC_GUARDED_BY(mutex_);
    std::mt19937_64 random_ SMC_GUARDED_BY(mutex_);

    std::atomic<std::uint64_t> served_{0};
    // RemoteDmbs alive (shared: one may outlive the device).
    std::shared_ptr<std::atomic<std::uint64_t>> remoteDmbs_ =
        std::make_shared<std::atomic<std::uint64_t>>(0);
    std::atomic<std::uint64_t> refused_{0};
    std::atomic<std::uint64_t> attachesKept_{0};
    RemoteCache remotes_;

    // The server: touched by the epoll thread's callbacks and the destructor.
    // Lock order: serverMutex_ before mutex_.
    Mutex serverMutex_;
    std::map<std::uint64_t, Pending> pending_ SMC_GUARDED_BY(serverMutex_);
    std::uint64_t nextPending_ SMC_GUARDED_BY(serverMutex_) = 0;
    UniqueFd spareFd_ SMC_GUARDED_BY(serverMutex_); // given up to accept on EMFILE
    UniqueFd listener_;
    int listenWatch_ = -1;

    const std::shared_ptr<DmbDetacher> detacher_;
};

} // namespace smc
