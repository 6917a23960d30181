// SPDX-License-Identifier: MIT
// ListenerImpl: a listener's accepting, its handshakes' steps and its queue for accept().
#pragma once

#include <algorithm>
#include <atomic>
#include <chrono>
#include <deque>
#include <functional>
#include <memory>
#include <thread>
#include <vector>

#include "base/event_fd.h"
#include "base/mutex.h"
#include "base/unique_fd.h"
#include "smc/handshake/handshake.h"
#include "smc/socket/internal/arrivals.h"
#include "smc/socket/internal/socket_impl.h"
#include "smc/socket/socket.h"

namespace smc
{

// Admission never waits for a handshake (seed 003): the listener's own thread accepts and
// hands each new TCP connection to the stack's handshake pool, which runs CLC and queues the
// outcome. Past limits.handshakeLimit pending handshakes a new connection is declined at once and
// goes to TCP. At most limits.backlog connections wait for accept(); past that the listener
// stops accepting and the kernel's listen queue pushes back, and queued connections that are
// already over are dropped to make room.
// limits.sharedAcceptQueue runs the accepting on the pool instead, behind the handshakes
// (the old design, for comparison; no limits).
class ListenerImpl : public std::enable_shared_from_this<ListenerImpl>
{
public:
    ListenerImpl(StackCore& stack, UniqueFd tcp, const SocketOptions& options,
                 const ListenerOptions& limits, EventFd ready)
        : stack_(stack), tcp_(std::move(tcp)), options_(options), limits_(limits),
          ready_(std::move(ready)), arrivals_(std::make_shared<Arrivals>(stack.executor()))
    {
    }

    // Starts accepting. Errors: eventfd(2)'s.
    Result<void> start();

    // The oldest queued connection that is not over already (those before it are dropped).
    Result<std::shared_ptr<SocketImpl>> pop(std::chrono::milliseconds timeout);

    // No connection comes in or is handed out after this; the queued ones are closed.
    void close() noexcept;

    int readyFd() const noexcept { return ready_.fd(); }
    std::uint16_t port() const;

private:
    // --- Accepting (listener.cpp)
    // The listener's own thread (seed 003: Linux's smc_tcp_ls_wq): it only accepts, so the
    // listen queue drains however busy the executor's threads and the handshake pool are.
    // With no room it leaves the listen queue alone and waits for some: an accept(), a
    // handshake that failed, a queued connection whose peer went.
    void acceptLoop() noexcept;

    // The epoll thread, when the listening socket is readable (shared accept queue only).
    void onReadable() noexcept;

    // Accepts until the queue is empty or there is no room; false when a lack of descriptors
    // or memory stopped it.
    bool acceptAll() noexcept;

    // Whether another connection may come in (limits.backlog); when not, first drops
    // queued connections that are over. A scan looks at every connection: at most one per
    // kScanPeriod.
    bool hasRoom() noexcept;

    std::size_t backlog() const noexcept { return std::max<std::size_t>(limits_.backlog, 1); }
    static constexpr std::chrono::milliseconds kScanPeriod{100};

    std::vector<std::shared_ptr<SocketImpl>> takeAbandonedLocked() SMC_REQUIRES(mutex_);

    // Not readable any more: the queue is empty.
    void drainReady() noexcept { ready_.clear(); }

    // Closes connections nobody accepted on the handshake pool: an SMC-R close waits for
    // the peer's answer, which neither the accepting thread nor accept() should.
    void closeLater(std::vector<std::shared_ptr<SocketImpl>> over) noexcept;

    void roomMade() noexcept;
    // Queues a connection for accept(); `handshaken`: it was pending, and is no more.
    void push(std::shared_ptr<SocketImpl> impl, bool handshaken = false);

    void watchLocked() SMC_REQUIRES(mutex_);

    // --- Handshakes (listener_handshakes.cpp)
    // A new TCP connection: TCP at once past the limits, else its handshake begins.
    void admit(UniqueFd fd) noexcept;

    // The client's next CLC message is awaited on the epoll thread (Arrivals): `next` gets
    // the connection once it is all queued; `late`: clcTimeout passed. After close(): dropped.
    void awaitMessage(UniqueFd fd, Arrivals::Next next) noexcept;

    // An SMC-R handshake parked behind another first contact with its peer: resumed when that
    // ends, or given up (a DECLINE, and TCP) at its `until`. Holds no thread meanwhile.
    void park(UniqueFd fd, net::SmcrParked parked) noexcept;

    // The server handshake on the pool, step by step (net::serverBegin): the client's CONFIRM
    // is awaited as its PROPOSAL was, and a handshake parked behind another first contact waits
    // without a thread (the shared queue waits on the pool, as it always did). `late`: the
    // client's message did not come in time: the handshake decides at once on what is there
    // (as its own wait would have).
    void handshake(UniqueFd fd, bool late) noexcept;
    // Whether a step that does not wait runs here rather than on the pool.
    bool stepsHere() const noexcept;
    static constexpr std::size_t kStepsHereAtMost = 2; // handshakes pending
    // Set on the accepting thread.
    static thread_local bool tlsAccepting;

    // Runs `step` on the handshake pool, then goes on from where it leaves the handshake.
    using Step = std::function<Result<net::ServerStep>(int fd, const SocketOptions&)>;
    void run(UniqueFd fd, bool late, Step step) noexcept;

    void proceed(UniqueFd fd, Result<net::ServerStep> step, const SocketOptions& options) noexcept;

    // Our ACCEPT is out: the CONFIRM (or what shows it will not come) is awaited on the epoll
    // thread, the rest of the handshake runs on the pool.
    template <typename Pending> void awaitConfirm(UniqueFd fd, Pending pending) noexcept;

    SocketOptions options(bool late) const;

    // A handshake is over: its connection queues for accept(), or it failed.
    void queueOrDrop(Result<std::shared_ptr<SocketImpl>> impl) noexcept;

    // Too many handshakes pending: TCP at once. The DECLINE goes before the PROPOSAL is read
    // (a few bytes into an empty send buffer: it does not wait); the socket's first receive
    // discards the PROPOSAL. PEERNOSMC, as a Linux client sees it when the server's
    // limit_smc_hs leaves the SMC option out of the SYN-ACK.
    void decline(UniqueFd fd) noexcept;

    StackCore& stack_;
    UniqueFd tcp_;
    const SocketOptions options_;  // the connections'
    const ListenerOptions limits_; // our own
    EventFd ready_;                // readable while the queue holds a connection
    EventFd stop_;                 // close() tells the accepting thread to end
    // An eventfd: the accepting thread, waiting for room, looks again (shared with queued
    // connections' peer-gone hooks, which may outlive the listener).
    std::shared_ptr<EventFd> room_;
    std::thread acceptor_; // the accepting thread (not with a shared accept queue)
    Mutex callback_;       // held while the epoll callback runs (shared accept queue)
    Mutex pooledAccept_;   // held by the shared queue's accepting task while it runs
    std::atomic<std::size_t> pending_{0}; // handshakes queued or running
    Mutex mutex_;
    int watch_ SMC_GUARDED_BY(mutex_) = -1;
    ConditionVariable wake_;
    bool closed_ SMC_GUARDED_BY(mutex_) = false;
    std::deque<std::shared_ptr<SocketImpl>> queue_ SMC_GUARDED_BY(mutex_);
    // Connections waiting for their peer or for a first contact, between handshake steps.
    std::shared_ptr<Arrivals> arrivals_;
    Clock::time_point nextScan_ SMC_GUARDED_BY(mutex_){}; // hasRoom()'s scans of a full queue
};

} // namespace smc
