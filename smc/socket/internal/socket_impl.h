// SPDX-License-Identifier: MIT
// SocketImpl: one connection behind a Socket handle, on SMC (a DataPath) or on TCP.
#pragma once

#include <atomic>
#include <cerrno>
#include <functional>
#include <memory>
#include <optional>

#include "base/unique_fd.h"
#include "smc/conn/data_path.h"
#include "smc/handshake/handshake.h"
#include "smc/net/ready_fd.h"
#include "smc/stack/stack_core.h"

namespace smc
{

enum class Shutdown : std::uint8_t;
enum class SendFlags : std::uint8_t;

class SocketImpl final : public Listed, public std::enable_shared_from_this<SocketImpl>
{
public:
    // TCP (a TcpPath): forced (no reason) or a fallback. `skipPeerClc`: a DECLINE went out
    // before the peer's PROPOSAL was read (a listener past its handshake limit): the first
    // receive discards it.
    SocketImpl(StackCore& stack, UniqueFd tcp, bool server, const SocketOptions& options,
               std::optional<clc::DeclineCode> fallback, bool skipPeerClc = false);
    ~SocketImpl();

    // SMC from here on (SMC-D or SMC-R); watches the TCP socket for the peer's end, from
    // kLaterDelay on when the connection is shared (as connectionOf makes it) by then.
    void start(std::unique_ptr<net::DataPath> path, Transport transport);

    Result<std::size_t> send(std::span<const std::byte> data, SendFlags flags);
    Result<void> setCork(bool on);
    Result<void> setNoDelay(bool on);
    Result<std::size_t> recv(std::span<std::byte> into);
    // recv that leaves the bytes to be read again (MSG_PEEK). Errors and blocking: recv's.
    Result<std::size_t> peek(std::span<std::byte> into);
    Result<RecvView> recvZeroCopy(std::span<std::byte> copyBuffer);
    Result<void> releaseView();
    // What a recv would return now without waiting (FIONREAD). Errors: not_connected.
    Result<std::size_t> unread() const;
    Result<void> shutdown(Shutdown how);
    void close() noexcept;
    // exit(3) with the connection open: net::DataPath::endAtExit (never waits for a lock).
    bool endAtExit() noexcept { return !closed_.load() && path_ && path_->endAtExit(); }
    // `standIn`: a ready descriptor the caller made already (smc-run's, which the program's
    // number refers to while the handshake runs), used instead of a new one when there is
    // none yet.
    Result<int> pollFd(std::shared_ptr<net::ReadyFd> standIn = nullptr);
    void setNonBlocking(bool on) noexcept { nonBlocking_ = on; }
    // Nobody but us will hold the ready descriptor's ends (smc-run: the program's last number
    // closed): its socket pair may serve a later connection (net::ReadyFd::reuseWhenDone).
    void reuseReadyWhenDone() noexcept;
    // How long a blocking recv (and peek) or send waits before timed_out; negative: forever
    // (SO_RCVTIMEO, SO_SNDTIMEO). Start as the options say.
    void setRecvTimeout(std::chrono::milliseconds t) noexcept { recvTimeout_ = t.count(); }
    void setSendTimeout(std::chrono::milliseconds t) noexcept { sendTimeout_ = t.count(); }
    bool connected() const noexcept override { return !closed_.load(); }
    // Nothing for the application to get from it any more: closed, the peer closed with
    // nothing unread or aborted (SMC), or reset the TCP connection.
    bool abandoned() const noexcept;
    // Runs `f` (on the epoll thread) when the peer's end of the TCP connection is seen (SMC:
    // it closed or died); an empty `f` stops that. A listener learns so of queued connections.
    void onPeerGone(std::function<void()> f);
    // `f(fd)` on the TCP socket (its options, its addresses), under the lock close() takes;
    // -1 with errno ENOTCONN once closed.
    template <typename F> int onTcp(F&& f) const
    {
        MutexLocker lock(tcpMutex_);
        if (!tcp_) {
            errno = ENOTCONN;
            return -1;
        }
        return f(tcp_.get());
    }
    Transport transport() const noexcept { return transport_; }
    std::optional<clc::DeclineCode> fallbackReason() const noexcept { return fallback_; }
    ConnectionInfo info() const override;

private:
    // The ready fd in step with the connection; `peerEvent`: the peer did something (see
    // net::ReadyFd::set's `again`); `consumed`: a receive took bytes (the peer's pulses for
    // them go, DataPath::settlePulses).
    void refresh(bool peerEvent = false, bool consumed = false) noexcept;
    void watchTcp() noexcept;
    void onTcpReadable() noexcept;

    StackCore& stack_;
    mutable Mutex tcpMutex_; // close() lets go of the TCP socket while smcss may read it
    UniqueFd tcp_ SMC_GUARDED_BY(tcpMutex_);
    const bool server_;
    const SocketOptions options_;
    const std::optional<clc::DeclineCode> fallback_;
    // Both set before the handle is shared: TCP, or SMC once start() ran.
    std::unique_ptr<net::DataPath> path_;
    Transport transport_ = Transport::Tcp;
    std::atomic<bool> nonBlocking_{false};
    std::atomic<std::chrono::milliseconds::rep> recvTimeout_{options_.recvTimeout.count()};
    std::atomic<std::chrono::milliseconds::rep> sendTimeout_{options_.sendTimeout.count()};
    std::atomic<bool> corked_{false};
    std::atomic<bool> closed_{false};
    // The TCP socket's watch: its id, none (-1), or kWatchLater until watchTcp() runs.
    static constexpr int kWatchLater = -2;
    std::atomic<int> tcpWatch_{kWatchLater};
    std::atomic<int> eventWatch_{-1};
    Mutex readyMutex_; // makes the ready fd once
    std::shared_ptr<net::ReadyFd> ready_ SMC_GUARDED_BY(readyMutex_);
    std::atomic<net::ReadyFd*> readyFd_{nullptr};
    Mutex refreshMutex_;                                 // one refresh at a time (see refresh())
    unsigned relayed_ SMC_GUARDED_BY(refreshMutex_) = 0; // the peer's events, until pulses
    // What waiting for promised pulses may cost a connection at most, and may still cost this
    // one (refresh()), and since when it refills.
    static constexpr std::chrono::microseconds kPulsePatience{20'000};
    std::chrono::microseconds pulsePatience_ SMC_GUARDED_BY(refreshMutex_) = kPulsePatience;
    net::Clock::time_point patienceSince_ SMC_GUARDED_BY(refreshMutex_) = net::Clock::now();
    // Held while the TCP watch's callback runs, so close() can wait for one that has
    // already unwatched itself (Executor::unwatch waits only for watches it removes).
    Mutex tcpWatchRunning_;
    std::function<void()> peerGoneHook_ SMC_GUARDED_BY(tcpWatchRunning_);
};

// A client's TCP connection, with SMC's TCP option on its SYN unless plain TCP is forced (a
// Linux peer would then expect CLC). Errors: net::connectTcp's. Blocks until `deadline`.
Result<UniqueFd> clientTcp(StackCore& stack, const net::SocketAddress& to, net::Deadline deadline,
                           const SocketOptions& options);
// Runs the handshake on a connected TCP socket (none for Mode::Tcp) and makes the connection
// of its outcome. Errors: the handshake's. Blocks as the handshake.
Result<std::shared_ptr<SocketImpl>> establish(StackCore& stack, UniqueFd tcp, bool server,
                                              const SocketOptions& options);
// The connection of a handshake's outcome, counted in the stack's statistics. Errors: the
// outcome's, the data path's setup's. Does not block.
Result<std::shared_ptr<SocketImpl>> connectionOf(StackCore& stack, UniqueFd tcp, bool server,
                                                 const SocketOptions& options,
                                                 Result<net::Outcome> outcome);

} // namespace smc
