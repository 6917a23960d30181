// SPDX-License-Identifier: MIT
// Socket: a connection on SMC or TCP behind one API; connect runs the client handshake.
#include "smc/socket/socket.h"

#include <poll.h>
#include <sys/socket.h>

#include <exception>

#include "smc/conn/smcd_connection.h"
#include "smc/conn/smcr_connection.h"
#include "smc/conn/tcp_path.h"
#include "smc/handshake/handshake.h"
#include "smc/socket/internal/connecting.h"
#include "smc/socket/internal/socket_impl.h"

namespace smc
{

using net::Clock;
using net::Deadline;

namespace
{
// The peer's events our executor relays before pulses start (see refresh()).
constexpr unsigned kPulseAfter = 4;
// A connection's patience with late pulses (kPulsePatience) gets a microsecond back every
// kPulseRefill microseconds (see refresh()).
constexpr int kPulseRefill = 1000;
} // namespace

SocketImpl::SocketImpl(StackCore& stack, UniqueFd tcp, bool server, const SocketOptions& options,
                       std::optional<clc::DeclineCode> fallback, bool skipPeerClc)
    : stack_(stack), tcp_(std::move(tcp)), server_(server), options_(options), fallback_(fallback),
      path_(std::make_unique<net::TcpPath>(tcp_.get(), skipPeerClc))
{
}

SocketImpl::~SocketImpl()
{
    close();
}

void SocketImpl::start(std::unique_ptr<net::DataPath> path, Transport transport)
{
    path_ = std::move(path);
    transport_ = transport;
    // After CLC nothing more comes on the TCP socket: readable means the peer ended it. An
    // orderly end comes as a CDC first, so the watch is for a peer that dies, and it can wait:
    // a short connection (most of a web server's) is over before it would start, and costs no
    // epoll registration and no wake-up of ours for the peer's FIN.
    std::weak_ptr<SocketImpl> self = weak_from_this();
    if (self.expired()) { // not shared (yet): nothing could run the watch later
        watchTcp();
        return;
    }
    stack_.later().post([self = std::move(self), &stack = stack_] {
        std::shared_ptr<SocketImpl> s = self.lock();
        if (!s)
            return;
        s->watchTcp();
        // The program let go meanwhile: the last owner's end may wait (SMC-R's close), which
        // a short-task thread must not.
        if (s.use_count() == 1) {
            try {
                stack.handshakes().postBlocking([s = std::move(s)] {});
            } catch (const std::exception&) { // no thread for it: it ends here
            }
        }
    });
}

void SocketImpl::watchTcp() noexcept
{
    // Held until the watch is in place or gone: close() closes the descriptor under it, and
    // an unwatch after that could end another socket's registration of the same number.
    MutexLocker lock(tcpMutex_);
    if (closed_ || !tcp_)
        return;
    int id = -1;
    bool closedFirst = false;
    {
        // The socket may be readable already: its callback waits until the id is in place.
        MutexLocker running(tcpWatchRunning_);
        id = stack_.executor().watch(tcp_.get(), [this] { onTcpReadable(); });
        int expected = kWatchLater;
        closedFirst = id >= 0 && !tcpWatch_.compare_exchange_strong(expected, id);
    }
    if (closedFirst)
        stack_.executor().unwatch(id); // waits for a running callback, which takes no tcpMutex_
}

void SocketImpl::onTcpReadable() noexcept
{
    // EOF, a reset, or bytes the protocol does not allow: the SMC connection is over either
    // way (an orderly close came as a CDC before, and then nothing is lost).
    MutexLocker lock(tcpWatchRunning_);
    if (closed_)
        return;
    if (const int id = tcpWatch_.exchange(-1); id >= 0)
        stack_.executor().unwatch(id); // from its own callback: does not wait
    path_->peerGone();
    refresh();
    if (peerGoneHook_)
        peerGoneHook_();
}

void SocketImpl::onPeerGone(std::function<void()> f)
{
    MutexLocker lock(tcpWatchRunning_);
    peerGoneHook_ = std::move(f);
}

bool SocketImpl::abandoned() const noexcept
{
    return closed_ || path_->abandoned();
}

void SocketImpl::refresh(bool peerEvent, bool consumed) noexcept
{
    net::ReadyFd* ready = readyFd_.load(std::memory_order_acquire);
    if (ready == nullptr || closed_)
        return;
    // Look and set as one step: the application's thread and the epoll thread both refresh,
    // and an older look set after a newer one would lose a wakeup.
    MutexLocker lock(refreshMutex_);
    bool counting = ready->counting();
    // A connection that keeps talking gets pulses (DataPath::startPulses): its messages wake
    // the application with no thread of ours between. Not before: handing the peer the
    // descriptor costs a Unix socket in flight, and closing any Unix socket while one is in
    // flight wakes the kernel's garbage collector, which a connection with one request and
    // one answer does not pay back. Counted before the peer may pulse: nothing it sends is
    // drained uncounted.
    if (peerEvent && !counting && relayed_ < kPulseAfter && ++relayed_ == kPulseAfter) {
        ready->count(true);
        counting = path_->startPulses();
        if (!counting)
            ready->count(false);
    }
    if (counting && consumed) {
        // The ring is empty: the pulses promised for what we read go (DataPath::settlePulses).
        // A pulse is a system call away from its promise, so a wait is rare and short. The
        // waits come off a patience that refills slowly (a writer descheduled now and then
        // keeps its pulses); once they use it up (a stranger that keeps promises late, or
        // breaks one), the connection goes back to the doorbell for good.
        if (const std::optional<unsigned> promised = path_->settlePulses()) {
            ready->expect(*promised);
            const Clock::time_point now = Clock::now();
            const auto elapsed =
                std::chrono::duration_cast<std::chrono::microseconds>(now - patienceSince_);
            if (elapsed.count() >= kPulseRefill) {
                pulsePatience_ = std::min(kPulsePatience, pulsePatience_ + elapsed / kPulseRefill);
                patienceSince_ = now;
            }
            if (!ready->settle(pulsePatience_)) {
                path_->stopPulses();
                ready->count(false);
                counting = false;
            }
        }
    }
    net::DataPath::Readiness now = path_->readiness();
    if (!now.writable) {
        // The peer signals the room it frees while asked (SMC-D): asked first, then a second
        // look, or room freed in between would go unsaid.
        path_->awaitRoom(true);
        now = path_->readiness();
    } else {
        path_->awaitRoom(false);
    }
    ready->set(now.readable, now.writable, peerEvent, counting && path_->pulsesPromised());
}

Result<std::size_t> SocketImpl::send(std::span<const std::byte> data, SendFlags flags)
{
    if (closed_)
        return std::make_error_code(std::errc::not_connected);
    const bool hold = flags == SendFlags::More || corked_;
    Result<std::size_t> n =
        path_->send(data, net::deadlineAfter(std::chrono::milliseconds(sendTimeout_.load())),
                    nonBlocking_, hold);
    refresh();
    return n;
}

Result<std::size_t> SocketImpl::recv(std::span<std::byte> into)
{
    if (closed_)
        return std::make_error_code(std::errc::not_connected);
    Result<std::size_t> n = path_->recv(
        into, net::deadlineAfter(std::chrono::milliseconds(recvTimeout_.load())), nonBlocking_);
    refresh(false, true);
    return n;
}

Result<RecvView> SocketImpl::recvZeroCopy(std::span<std::byte> copyBuffer)
{
    if (closed_)
        return std::make_error_code(std::errc::not_connected);
    Result<RecvView> v = path_->recvView(
        copyBuffer, options_.zeroCopyThreshold,
        net::deadlineAfter(std::chrono::milliseconds(recvTimeout_.load())), nonBlocking_);
    refresh(false, true);
    return v;
}

Result<void> SocketImpl::releaseView()
{
    if (closed_)
        return std::make_error_code(std::errc::not_connected);
    Result<void> r = path_->releaseView();
    refresh(false, true);
    return r;
}

Result<void> SocketImpl::setCork(bool on)
{
    if (closed_)
        return std::make_error_code(std::errc::not_connected);
    corked_ = on;
    return path_->setCork(on);
}

Result<void> SocketImpl::setNoDelay(bool on)
{
    if (closed_)
        return std::make_error_code(std::errc::not_connected);
    return path_->setNoDelay(on);
}

Result<void> SocketImpl::shutdown(Shutdown how)
{
    if (closed_)
        return std::make_error_code(std::errc::not_connected);
    return path_->shutdown(how != Shutdown::Write, how != Shutdown::Read);
}

void SocketImpl::close() noexcept
{
    if (closed_.exchange(true))
        return;
    const int watch = tcpWatch_.exchange(-1);
    const bool tcpWatchLate = watch == kWatchLater;
    if (watch >= 0)
        stack_.executor().unwatch(watch);
    // A callback that unwatched itself is not waited for by unwatch(): wait for it here,
    // before the socket it watches closes and the path it calls goes.
    {
        MutexLocker wait(tcpWatchRunning_);
    }
    // A connection closed before its TCP watch started has not heard of the peer's end: an
    // SMC-R close would wait for its CDCs to land on a link that may be gone with the peer.
    if (transport_ == Transport::SmcR && tcpWatchLate) {
        bool ended = false;
        {
            MutexLocker lock(tcpMutex_);
            pollfd p{tcp_.get(), POLLIN | POLLRDHUP, 0}; // a closed one (-1) is never ready
            ended = ::poll(&p, 1, 0) == 1;
        }
        if (ended)
            path_->peerGone();
    }
    if (const int id = eventWatch_.exchange(-1); id >= 0)
        stack_.executor().unwatch(id);
    // The peer closed the SMC connection first, so its TCP socket is closing too: a FIN now
    // would cross the peer's (a simultaneous close), which leaves both ends in TIME_WAIT, and
    // thousands of those slow every later connect. The bytes went over SMC: a reset ends the
    // TCP connection and leaves none.
    const bool reset = transport_ != Transport::Tcp && path_->abandoned();
    path_->close();
    MutexLocker lock(tcpMutex_);
    if (reset && tcp_) {
        const linger now{1, 0};
        (void)::setsockopt(tcp_.get(), SOL_SOCKET, SO_LINGER, &now, sizeof now);
    }
    tcp_.reset();
}

Result<std::size_t> SocketImpl::peek(std::span<std::byte> into)
{
    if (closed_)
        return std::make_error_code(std::errc::not_connected);
    Result<std::size_t> n = path_->peek(
        into, net::deadlineAfter(std::chrono::milliseconds(recvTimeout_.load())), nonBlocking_);
    refresh(); // bytes a receive waited for arrive without a signal (SMC-D: no pulse)
    return n;
}

Result<std::size_t> SocketImpl::unread() const
{
    if (closed_)
        return std::make_error_code(std::errc::not_connected);
    return path_->unread();
}

void SocketImpl::reuseReadyWhenDone() noexcept
{
    MutexLocker lock(readyMutex_);
    if (ready_)
        ready_->reuseWhenDone();
}

Result<int> SocketImpl::pollFd(std::shared_ptr<net::ReadyFd> standIn)
{
    if (closed_)
        return std::make_error_code(std::errc::not_connected);
    if (const int own = path_->ownPollFd(); own >= 0)
        return own;
    MutexLocker lock(readyMutex_);
    if (!ready_) {
        std::shared_ptr<net::ReadyFd> made = std::move(standIn);
        if (!made) {
            Result<net::ReadyFd> fresh = net::ReadyFd::create();
            if (!fresh)
                return fresh.error();
            made = std::make_shared<net::ReadyFd>(std::move(*fresh));
        }
        errno = 0; // the calls below fail with errno set, or say nothing (io_error)
        const int events = path_->enableEvents(made->pulseFd());
        if (events < 0)
            return lastError();
        // A server's client usually speaks right after its CONFIRM, and rings before anyone
        // watched: taken here, the refresh() below says what it means, and our epoll thread
        // is not woken to say it again (racing the program's first read for the locks).
        if (server_)
            path_->drainEvents();
        const int watch = stack_.executor().watch(events, [this] {
            path_->drainEvents();
            refresh(true);
        });
        if (watch < 0)
            return lastError();
        eventWatch_ = watch;
        ready_ = std::move(made);
        readyFd_.store(ready_.get(), std::memory_order_release);
        // A close() that ran meanwhile found no watch to end: end it here (whichever of us
        // takes it from eventWatch_ does).
        if (closed_) {
            if (const int id = eventWatch_.exchange(-1); id >= 0)
                stack_.executor().unwatch(id);
            return std::make_error_code(std::errc::not_connected);
        }
        refresh();
    }
    return ready_->fd();
}

ConnectionInfo SocketImpl::info() const
{
    ConnectionInfo i;
    path_->fillInfo(i);
    i.fallback = fallback_;
    i.server = server_;
    MutexLocker lock(tcpMutex_);
    if (tcp_) {
        if (Result<net::SocketAddress> a = net::localAddress(tcp_.get()))
            i.local = a->toString();
        if (Result<net::SocketAddress> a = net::peerAddress(tcp_.get()))
            i.peer = a->toString();
    }
    return i;
}

Result<UniqueFd> clientTcp(StackCore& stack, const net::SocketAddress& to, net::Deadline deadline,
                           const SocketOptions& options)
{
    return net::connectTcp(to, deadline, options.mode == Mode::Tcp ? nullptr : stack.tcpOption());
}

Result<std::shared_ptr<SocketImpl>> establish(StackCore& stack, UniqueFd tcp, bool server,
                                              const SocketOptions& options)
{
    if (options.mode == Mode::Tcp) {
        stack.countTcpForced();
        auto impl =
            std::make_shared<SocketImpl>(stack, std::move(tcp), server, options, std::nullopt);
        stack.enroll(impl);
        return impl;
    }
    Result<net::Outcome> outcome = server ? net::serverHandshake(stack, tcp.get(), options)
                                          : net::clientHandshake(stack, tcp.get(), options);
    return connectionOf(stack, std::move(tcp), server, options, std::move(outcome));
}

Result<std::shared_ptr<SocketImpl>> connectionOf(StackCore& stack, UniqueFd tcp, bool server,
                                                 const SocketOptions& options,
                                                 Result<net::Outcome> outcome)
{
    if (!outcome) {
        stack.countHandshakeError();
        return outcome.error();
    }
    if (auto* fallback = std::get_if<net::Fallback>(&*outcome)) {
        stack.countFallback(server, fallback->reason);
        auto impl =
            std::make_shared<SocketImpl>(stack, std::move(tcp), server, options, fallback->reason);
        stack.enroll(impl);
        return impl;
    }
    if (auto* smcr = std::get_if<net::SmcrSetup>(&*outcome)) {
        Result<std::unique_ptr<net::SmcrConnection>> conn = net::SmcrConnection::create(
            smcr->group, smcr->conn, smcr->peerToken, smcr->peerRmbBytes, options.autocorkBytes,
            options.onSignal);
        if (!conn) {
            stack.countHandshakeError();
            return conn.error();
        }
        auto impl =
            std::make_shared<SocketImpl>(stack, std::move(tcp), server, options, std::nullopt);
        impl->start(std::move(*conn), Transport::SmcR);
        stack.countSmcr(server);
        stack.enroll(impl);
        return impl;
    }
    Result<std::unique_ptr<net::SmcdConnection>> conn =
        net::SmcdConnection::create(stack.device(), std::move(std::get<net::SmcdSetup>(*outcome)),
                                    options.busyPoll, options.autocorkBytes, options.onSignal);
    if (!conn) {
        stack.countHandshakeError();
        return conn.error();
    }
    auto impl = std::make_shared<SocketImpl>(stack, std::move(tcp), server, options, std::nullopt);
    impl->start(std::move(*conn), Transport::SmcD);
    stack.countSmcd(server);
    stack.enroll(impl);
    return impl;
}

Socket::Socket() = default;
Socket::~Socket()
{
    close();
}
Socket::Socket(Socket&&) noexcept = default;
Socket& Socket::operator=(Socket&& other) noexcept
{
    if (this != &other) {
        close();
        impl_ = std::move(other.impl_);
        connecting_ = std::move(other.connecting_);
    }
    return *this;
}
Socket::Socket(std::shared_ptr<SocketImpl> impl) noexcept : impl_(std::move(impl)) {}

Result<Socket> Socket::connect(SmcStack& handle, std::string_view host, std::uint16_t port,
                               const SocketOptions& options)
{
    StackCore& stack = coreOf(handle);
    Result<net::SocketAddress> to = net::resolve(host, port, false);
    if (!to)
        return to.error();
    Result<UniqueFd> tcp =
        clientTcp(stack, *to, net::deadlineAfter(options.connectTimeout), options);
    if (!tcp)
        return tcp.error();
    Result<std::shared_ptr<SocketImpl>> impl = establish(stack, std::move(*tcp), false, options);
    if (!impl)
        return impl.error();
    return Socket(std::move(*impl));
}

Result<Socket> Socket::connectAsync(SmcStack& handle, std::string_view host, std::uint16_t port,
                                    const SocketOptions& options)
{
    Result<net::SocketAddress> to = net::resolve(host, port, false);
    if (!to)
        return to.error();
    Result<std::shared_ptr<Connecting>> c = Connecting::start(coreOf(handle), *to, options);
    if (!c)
        return c.error();
    Socket s;
    s.connecting_ = std::move(*c);
    return s;
}

Result<int> Socket::connectFd() const noexcept
{
    if (!connecting_)
        return std::make_error_code(std::errc::not_connected);
    return connecting_->fd();
}

Result<void> Socket::connectResult() const
{
    if (impl_)
        return {};
    if (!connecting_)
        return std::make_error_code(std::errc::not_connected);
    Result<std::shared_ptr<SocketImpl>> r = connecting_->await(true);
    if (!r)
        return r.error();
    return {};
}

Result<SocketImpl*> Socket::live() const
{
    if (impl_)
        return impl_.get();
    if (!connecting_)
        return std::make_error_code(std::errc::not_connected);
    if (SocketImpl* made = connecting_->connection())
        return made;
    Result<std::shared_ptr<SocketImpl>> r = connecting_->await(connecting_->nonBlocking());
    if (!r)
        return r.error();
    return r->get();
}

SocketImpl* Socket::now() const noexcept
{
    if (impl_)
        return impl_.get();
    return connecting_ ? connecting_->connection() : nullptr;
}

Result<std::size_t> Socket::send(std::span<const std::byte> data, SendFlags flags)
{
    Result<SocketImpl*> s = live();
    return s ? (*s)->send(data, flags) : Result<std::size_t>(s.error());
}

Result<RecvView> Socket::recvZeroCopy(std::span<std::byte> copyBuffer)
{
    Result<SocketImpl*> s = live();
    return s ? (*s)->recvZeroCopy(copyBuffer) : Result<RecvView>(s.error());
}

Result<void> Socket::releaseView()
{
    Result<SocketImpl*> s = live();
    return s ? (*s)->releaseView() : Result<void>(s.error());
}

Result<void> Socket::setCork(bool on)
{
    Result<SocketImpl*> s = live();
    return s ? (*s)->setCork(on) : Result<void>(s.error());
}

Result<void> Socket::setNoDelay(bool on)
{
    Result<SocketImpl*> s = live();
    return s ? (*s)->setNoDelay(on) : Result<void>(s.error());
}

Result<std::size_t> Socket::recv(std::span<std::byte> into)
{
    Result<SocketImpl*> s = live();
    return s ? (*s)->recv(into) : Result<std::size_t>(s.error());
}

Result<void> Socket::shutdown(Shutdown how)
{
    Result<SocketImpl*> s = live();
    return s ? (*s)->shutdown(how) : Result<void>(s.error());
}

void Socket::close() noexcept
{
    if (impl_) {
        impl_->close();
        impl_.reset();
    }
    if (connecting_) {
        connecting_->abandon();
        connecting_.reset();
    }
}

Result<int> Socket::pollFd() const noexcept
{
    SocketImpl* s = now();
    if (s == nullptr)
        return std::make_error_code(std::errc::not_connected);
    return s->pollFd();
}

void Socket::setNonBlocking(bool on) noexcept
{
    if (impl_)
        impl_->setNonBlocking(on);
    if (connecting_)
        connecting_->setNonBlocking(on);
}

bool Socket::connected() const noexcept
{
    SocketImpl* s = now();
    return s != nullptr && s->connected();
}

Transport Socket::transport() const noexcept
{
    SocketImpl* s = now();
    return s ? s->transport() : Transport::None;
}

std::optional<clc::DeclineCode> Socket::fallbackReason() const noexcept
{
    SocketImpl* s = now();
    return s ? s->fallbackReason() : std::nullopt;
}

ConnectionInfo Socket::info() const
{
    SocketImpl* s = now();
    return s ? s->info() : ConnectionInfo{};
}

} // namespace smc
