// SPDX-License-Identifier: MIT
// Setup: a connection's handshake on the stack's handshake threads while the program holds its
// number (a non-blocking connect() or accept()).
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>

#include "base/mutex.h"
#include "base/unique_fd.h"
#include "smc/handshake/handshake.h"
#include "smc/net/ready_fd.h"
#include "smc/stack/stack_core.h"

namespace smc::preload
{

// Linux's connect() on a non-blocking socket returns EINPROGRESS and the socket turns writable
// when the connection is there; programs with many connections (wrk, nginx's upstreams) rely on
// it, and a handshake that blocked their event loop would serialise them. So, meanwhile, the
// number refers to a stand-in that is neither readable nor writable; when the handshake ends the
// stand-in becomes the connection's ready descriptor (SMC: the number stays where it is, with
// its epoll registrations), or the number refers again to the TCP socket (a fallback, or a TCP
// connect that failed: the socket says how), its epoll registrations moved along
// (Shim::settle). A handshake that fails leaves the TCP socket shut down (the program reads the
// end of the stream), as if the peer had closed at once; it is logged and counted.
struct Setup {
    Setup(net::ReadyFd standIn, UniqueFd tcp, bool server, std::uint64_t generation,
          const SocketOptions& options);

    const std::shared_ptr<net::ReadyFd> standIn; // shared with the connection it becomes
    const UniqueFd tcp; // ours: the handshake runs on it; options and addresses meanwhile
    const bool server;
    const std::uint64_t generation;
    const SocketOptions options; // the connection's (Shim::optionsFor)
    // O_NONBLOCK as the program sets it meanwhile (on the stand-in), for the connection.
    std::atomic<bool> nonBlocking{true};

    Mutex mutex;
    ConditionVariable ended;
    bool over SMC_GUARDED_BY(mutex) = false;
    // TCP_NODELAY, TCP_CORK, SO_RCVTIMEO and SO_SNDTIMEO as the program sets them meanwhile,
    // for the connection (Shim::settle applies them).
    std::optional<bool> noDelay SMC_GUARDED_BY(mutex);
    std::optional<bool> cork SMC_GUARDED_BY(mutex);
    std::optional<std::chrono::milliseconds> recvTimeout SMC_GUARDED_BY(mutex);
    std::optional<std::chrono::milliseconds> sendTimeout SMC_GUARDED_BY(mutex);
};

// An accepted connection whose server handshake ran in the program's own call up to our
// ACCEPT (beginAccepted) and now waits for the client's CONFIRM. Its number stays the TCP
// socket meanwhile, which turns readable when the CONFIRM comes: an event loop that reads
// wakes for it as it would for the client's first bytes, and its next read takes the handshake
// to its end (continueAnswered). No thread of ours waits for the client.
struct Answered {
    Answered(net::SmcdPending pending, std::uint64_t generation);

    Mutex mutex; // one call at a time takes the handshake on
    std::optional<net::SmcdPending> pending SMC_GUARDED_BY(mutex); // none once taken on
    bool lowWaterRaised SMC_GUARDED_BY(mutex) = false;             // by a look at a partial CONFIRM
    const std::uint64_t generation;
};

// The handshake's rest from the TCP socket `tcp` on, on a handshake thread.
using Handshake = std::function<Result<net::Outcome>(int tcp)>;

// A setup for number `fd`, a non-blocking TCP socket (connecting, or just accepted), not yet
// begun; null when its stand-in cannot be made (the caller then runs the handshake in the call).
std::shared_ptr<Setup> prepareSetup(int fd, bool server);

// The number moves to the stand-in and the handshake (after the TCP connect, for a client) goes
// to the stack's handshake threads; `announcement` (a client's, registry.h) is held until the
// handshake is over (taken only when this succeeds). False, with nothing changed, if the number
// cannot be moved.
bool beginSetup(int fd, std::shared_ptr<Setup> setup, StackCore& stack, UniqueFd&& announcement,
                Handshake handshake);

// A client's handshake after its non-blocking connect(): when the TCP connect is over at once
// (on loopback it is) and SMC-D is the only mode, our PROPOSAL goes in the call and the server's
// ACCEPT is taken when it is there, on the executor's epoll thread; an attach (the server's DMB
// not mapped here yet) goes on on a handshake thread. Otherwise the whole handshake goes to
// one (beginSetup). The number refers to the stand-in meanwhile. False as beginSetup.
bool beginConnecting(int fd, std::shared_ptr<Setup> setup, StackCore& stack,
                     UniqueFd&& announcement);

// A connection accepted for SMC (the client announced itself) begins its server handshake at
// the first call that uses it (Shim::route), made by whichever process makes it: a forking
// server's parent only accepts and closes, its child reads and writes, and the connection is
// the child's. A non-blocking number whose PROPOSAL is queued (an event loop read it because
// it was readable) answers it in the call and waits for the CONFIRM as Answered; otherwise the
// handshake runs on the stack's handshake threads when the number is non-blocking (the call
// says EAGAIN meanwhile), in the call when it is blocking. A handshake that fails shuts the
// TCP socket down: the program reads the end of the stream. `nonBlock`: the number's
// O_NONBLOCK, as the caller read it. True when the number is left Answered and nothing was
// queued behind the PROPOSAL: then the CONFIRM's arrival is the socket's next event.
bool beginAccepted(int fd, bool nonBlock);

// A call uses `fd`, whose handshake `answered` is: with the CONFIRM queued, the handshake ends
// in the call (or, when the client's DMB must still be mapped, on a handshake thread with the
// number on a stand-in). Without it, false when the call may be told "later" (`later`: a read
// that may not wait), else the rest goes to a handshake thread (a stand-in meanwhile), or
// waits in the call if the program made the number blocking (`nonBlock`: its O_NONBLOCK, as
// the caller read it). True: the table says what the number is now.
bool continueAnswered(int fd, const std::shared_ptr<Answered>& answered, bool later, bool nonBlock);

// The number `fd` now stands for an SMC connection made from its TCP socket: the TCP socket
// moves to a descriptor of the connection's own, the number to the connection's ready
// descriptor. Its transport, or Transport::None (the number untouched, still the TCP socket)
// if that cannot be done. `nonBlock`: the number's O_NONBLOCK, if the caller read it already.
Transport redirect(int fd, StackCore& stack, bool server, Result<net::Outcome> outcome,
                   std::optional<bool> nonBlock = std::nullopt);

} // namespace smc::preload
