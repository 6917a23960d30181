// SPDX-License-Identifier: MIT
// DataPath: what a Socket asks of its SMC connection, whichever transport carries it.
#pragma once

#include <cstddef>
#include <optional>
#include <span>

#include "base/result.h"
#include "smc/conn/connection_info.h"
#include "smc/conn/signal_policy.h"
#include "smc/net/tcp.h"

namespace smc::net
{

// One connection's bytes after CLC: SMC-D (SmcdConnection), SMC-R (SmcrConnection) or plain
// TCP (TcpPath). One sender and one receiver may call at once; the rest may be called from
// any thread.
class DataPath
{
public:
    virtual ~DataPath() = default;

    // Copies bytes into the peer's ring, or out of ours. Blocks until at least one byte
    // moved or the deadline passed, unless nonBlocking. recv returns 0 at the peer's
    // orderly end. Errors: resource_unavailable_try_again (nonBlocking, nothing moved),
    // timed_out, broken_pipe (send after our shutdownWrite or the peer's close),
    // connection_reset (the peer aborted or died), not_connected (closed), interrupted (a
    // signal handler ran while it slept, and the connection's SignalPolicy said so; SMC-D).
    // `hold` (MSG_MORE, or the socket corked): the bytes are not announced to the peer while
    // its ring has room left; a later send without it, flush(), shutdownWrite() or close()
    // announces them. Besides, a send may leave its bytes unannounced for the next send of
    // a queue of them (autocorking; SocketOptions::autocorkBytes).
    virtual Result<std::size_t> send(std::span<const std::byte> data, Deadline deadline,
                                     bool nonBlocking, bool hold) = 0;
    virtual Result<std::size_t> recv(std::span<std::byte> into, Deadline deadline,
                                     bool nonBlocking) = 0;
    // recv that leaves what it copied to be read again (MSG_PEEK). Blocks and fails as recv.
    virtual Result<std::size_t> peek(std::span<std::byte> into, Deadline deadline,
                                     bool nonBlocking) = 0;
    // Announces what corking held back (one CDC), if anything. Errors: not_connected
    // (closed). Blocks for at most one CDC (SMC-R: a send slot).
    virtual Result<void> flush() = 0;
    // Socket::recvZeroCopy and releaseView: what arrived, as views of our ring where the
    // transport has them and pieces are at least `threshold` bytes, the rest copied. Blocks
    // as recv. Errors: recv's; operation_in_progress (a view is out; also for recv);
    // releaseView: invalid_argument (none out), not_connected.
    virtual Result<RecvView> recvView(std::span<std::byte> copy, std::size_t threshold,
                                      Deadline deadline, bool nonBlocking) = 0;
    virtual Result<void> releaseView() = 0;
    // done_writing to the peer. Errors: not_connected (closed). Blocks for at most one CDC
    // (SMC-R: a send slot).
    virtual Result<void> shutdownWrite() = 0;
    // shutdown(2): on SMC, done_writing when `write`, and for `read` nothing (as Linux: later
    // receives still drain what came). Errors as shutdownWrite's.
    virtual Result<void> shutdown(bool read, bool write)
    {
        (void)read;
        return write ? shutdownWrite() : Result<void>();
    }
    // TCP_CORK off, TCP_NODELAY on: on SMC both announce what corking held back (Linux
    // flushes too); cork on and no-delay off change nothing here (the socket holds sends back
    // itself). Errors as flush's.
    virtual Result<void> setCork(bool on) { return on ? Result<void>() : flush(); }
    virtual Result<void> setNoDelay(bool on) { return on ? flush() : Result<void>(); }
    // An orderly close (an abort when unread bytes are left); our buffers go back to the
    // pool. SMC-D never blocks; SMC-R waits for the peer's DELETE_RKEY answer (LLC timeouts).
    virtual void close() noexcept = 0;
    // The process exits (exit(3)) with the connection open: the peer hears that it ended, as
    // the kernel's close at a process's exit tells it (orderly, or an abort with unread bytes
    // here), and nothing is freed. Never waits for a lock (exit may run in a signal handler
    // on a thread inside a call of ours): false, and nothing said, when one is held.
    virtual bool endAtExit() noexcept { return false; }
    // The TCP connection ended: if the peer did not close first, it died (abort; SMC-R first
    // gives a close still on its way over the link a grace period).
    virtual void peerGone() noexcept = 0;

    virtual bool readable() const = 0; // recv would not block
    // The bytes a recv would return now without waiting (FIONREAD): 0 at the end or after an
    // abort, which the next recv reports.
    virtual std::size_t unread() const = 0;
    // The peer closed (not only shut down writing) or aborted, or we aborted, and nothing is
    // left to read: nobody loses anything when a connection not yet accepted goes.
    virtual bool abandoned() const = 0;
    virtual bool writable() const = 0; // send would not block
    // Both at once: one look where the transport can (a readiness refresh after every call).
    struct Readiness {
        bool readable, writable;
    };
    virtual Readiness readiness() const { return {readable(), writable()}; }
    virtual void fillInfo(ConnectionInfo& info) const = 0;
    // An fd that becomes readable when readiness may have changed (the peer wrote, read or
    // closed), and its drain (the epoll thread runs it before it looks again). `pulse`: a
    // Unix stream socket whose bytes make the application's descriptor readable, for
    // startPulses.
    virtual int enableEvents(int pulse) noexcept = 0;
    virtual void drainEvents() noexcept = 0;

    // Pulses: the peer wakes the application itself, exactly. startPulses() hands the peer
    // enableEvents' `pulse` (a transport that cannot says false); from then on, for each CDC
    // with bytes the reader had not seen, the peer first promises a pulse in our DMB's head,
    // then sends it, and signals enableEvents' fd only for the rest (its close, room freed
    // while awaitRoom is on). When a receive leaves the ring empty, settlePulses() records
    // what the reader has seen (later pulses are for later bytes) and returns the pulses
    // promised before, which the caller takes off the descriptor: so it is readable only
    // while there are bytes, as a TCP socket is. settlePulses: nullopt when not pulsing or
    // bytes are left. None blocks.
    virtual bool startPulses() noexcept { return false; }
    virtual std::optional<unsigned> settlePulses() noexcept { return std::nullopt; }
    // Pulses promised since the last settlePulses (one is on its way or there).
    virtual bool pulsesPromised() const noexcept { return false; }
    // For good: the peer signals enableEvents' fd for everything again (its promised pulse
    // never came).
    virtual void stopPulses() noexcept {}
    // While on, the peer signals enableEvents' fd when it frees room in its ring (the
    // application waits for its descriptor to turn writable). Never blocks.
    virtual void awaitRoom(bool /*on*/) noexcept {}
    // A descriptor of the transport's own that the application can poll as it is (TCP: the
    // socket), or -1: the socket makes one from readable() and writable() and enableEvents().
    virtual int ownPollFd() const noexcept { return -1; }
};

// recvZeroCopy where there are no views: `recv` into `copy`, all of it copied. An empty
// buffer is refused (invalid_argument): its 0 would read as the end of the stream.
template <typename Recv> Result<RecvView> copiedView(std::span<std::byte> copy, Recv&& recv)
{
    if (copy.empty())
        return std::make_error_code(std::errc::invalid_argument);
    Result<std::size_t> n = recv(copy);
    if (!n)
        return n.error();
    RecvView v;
    v.copied = *n;
    return v;
}

} // namespace smc::net
