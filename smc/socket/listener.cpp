// SPDX-License-Identifier: MIT
// Listener: TCP accepts on its own thread, handshakes on the stack's pool, a ready queue.
#include <poll.h>
#include <sys/socket.h>

#include <algorithm>
#include <array>
#include <atomic>
#include <deque>
#include <functional>
#include <optional>
#include <thread>
#include <utility>
#include <vector>

#include "base/event_fd.h"
#include "smc/socket/clc_io.h"
#include "smc/socket/internal/arrivals.h"
#include "smc/socket/internal/socket_impl.h"
#include "smc/socket/internal/stack_smcr.h"
#include "smc/socket/socket.h"
#include "smc/socket/tcp.h"

namespace smc
{

// Admission never waits for a handshake (seed 003): the listener's own thread accepts and
// hands each new TCP connection to the stack's handshake pool, which runs CLC and queues the
// outcome. Past options.handshakeLimit pending handshakes a new connection is declined at once and
// goes to TCP. At most options.backlog connections wait for accept(); past that the listener
// stops accepting and the kernel's listen queue pushes back, and queued connections that are
// already over are dropped to make room.
// options.sharedAcceptQueue runs the accepting on the pool instead, behind the handshakes
// (the old design, for comparison; no limits).
class ListenerImpl : public std::enable_shared_from_this<ListenerImpl>
{
public:
    ListenerImpl(SmcStack& stack, UniqueFd tcp, const SocketOptions& options, EventFd ready)
        : stack_(stack), tcp_(std::move(tcp)), options_(options), ready_(std::move(ready)),
          arrivals_(std::make_shared<Arrivals>(stack.executor()))
    {
    }

    // Errors: eventfd(2)'s.
    Result<void> start()
    {
        if (!options_.sharedAcceptQueue) {
            Result<EventFd> stop = EventFd::create();
            Result<EventFd> room = EventFd::create();
            if (!stop || !room)
                return stop ? room.error() : stop.error();
            stop_ = std::move(*stop);
            room_ = std::make_shared<EventFd>(std::move(*room));
            acceptor_ = std::thread([this] { acceptLoop(); });
            return {};
        }
        MutexLocker lock(mutex_);
        watchLocked();
        return {};
    }

    // The listener's own thread (seed 003: Linux's smc_tcp_ls_wq): it only accepts, so the
    // listen queue drains however busy the executor's threads and the handshake pool are.
    // With no room it leaves the listen queue alone and waits for some: an accept(), a
    // handshake that failed, a queued connection whose peer went.
    void acceptLoop() noexcept
    {
        std::array<pollfd, 3> fds{pollfd{stop_.fd(), POLLIN, 0}, pollfd{room_->fd(), POLLIN, 0},
                                  pollfd{tcp_.get(), POLLIN, 0}};
        bool starved = false;
        for (;;) {
            const bool room = hasRoom();
            // Out of descriptors or memory, the queue stays readable: wait for close() a
            // little instead of spinning on it. Without room, look again each scan period: a
            // queued TCP connection the peer reset tells nobody, and a ring may have come
            // while the last scan was too recent.
            const int rc = ::poll(fds.data(), room && !starved ? 3 : 2,
                                  starved ? 10
                                  : room  ? -1
                                          : static_cast<int>(kScanPeriod.count()));
            if (rc < 0 && errno != EINTR)
                return;
            if (fds[0].revents != 0)
                return; // close()
            if (fds[1].revents != 0)
                room_->clear();
            starved = !acceptAll();
        }
    }

    // The epoll thread, when the listening socket is readable (shared accept queue only).
    void onReadable() noexcept
    {
        MutexLocker running(callback_); // close() waits for us once we unwatched ourselves
        // Level-triggered: stop watching until the pool has run the accepting.
        int id = -1;
        {
            MutexLocker lock(mutex_);
            id = std::exchange(watch_, -1);
        }
        if (id < 0)
            return;                    // closed, or the accepting is queued already
        stack_.executor().unwatch(id); // from its own callback: does not wait
        std::weak_ptr<ListenerImpl> self = weak_from_this();
        stack_.handshakes().postBlocking([self] {
            auto l = self.lock();
            if (!l)
                return;
            MutexLocker accepting(l->pooledAccept_); // close() waits for us before the fd goes
            {
                MutexLocker lock(l->mutex_);
                if (l->closed_)
                    return;
            }
            (void)l->acceptAll();
            MutexLocker lock(l->mutex_);
            if (!l->closed_)
                l->watchLocked();
        });
    }

    // Accepts until the queue is empty or there is no room; false when a lack of descriptors
    // or memory stopped it.
    bool acceptAll() noexcept
    {
        while (options_.sharedAcceptQueue || hasRoom()) {
            const int fd = ::accept4(tcp_.get(), nullptr, nullptr, SOCK_NONBLOCK | SOCK_CLOEXEC);
            if (fd < 0) // EAGAIN, or an error the next readiness reports again
                return errno != EMFILE && errno != ENFILE && errno != ENOBUFS && errno != ENOMEM;
            admit(UniqueFd(fd));
        }
        return true;
    }

    // Whether another connection may come in (options.backlog); when not, first drops
    // queued connections that are over. A scan looks at every connection: at most one per
    // kScanPeriod.
    bool hasRoom() noexcept
    {
        std::vector<std::shared_ptr<SocketImpl>> over;
        bool room = false;
        {
            MutexLocker lock(mutex_);
            const auto now = Clock::now();
            if (queue_.size() >= backlog() && now >= nextScan_) {
                over = takeAbandonedLocked();
                nextScan_ = now + kScanPeriod;
            }
            room = queue_.size() < backlog();
        }
        closeLater(std::move(over));
        return room;
    }

    std::size_t backlog() const noexcept { return std::max<std::size_t>(options_.backlog, 1); }
    static constexpr std::chrono::milliseconds kScanPeriod{100};

    std::vector<std::shared_ptr<SocketImpl>> takeAbandonedLocked() SMC_REQUIRES(mutex_)
    {
        std::vector<std::shared_ptr<SocketImpl>> over;
        std::erase_if(queue_, [&](std::shared_ptr<SocketImpl>& s) {
            if (!s->abandoned())
                return false;
            over.push_back(std::move(s));
            return true;
        });
        if (queue_.empty())
            drainReady();
        return over;
    }

    // Not readable any more: the queue is empty.
    void drainReady() noexcept { ready_.clear(); }

    // Closes connections nobody accepted on the handshake pool: an SMC-R close waits for
    // the peer's answer, which neither the accepting thread nor accept() should.
    void closeLater(std::vector<std::shared_ptr<SocketImpl>> over) noexcept
    {
        for (auto& s : over) {
            s->onPeerGone({});
            stack_.handshakes().postBlocking([s = std::move(s)] { s->close(); });
        }
    }

    void roomMade() noexcept
    {
        if (room_)
            room_->signal();
    }

    void admit(UniqueFd fd) noexcept
    {
        if (options_.mode == Mode::Tcp) { // no CLC: nothing that waits
            if (Result<std::shared_ptr<SocketImpl>> impl =
                    establish(stack_, std::move(fd), true, options_))
                push(std::move(*impl));
            return;
        }
        // One host may hold half the handshakes waiting for their peer, so a host that
        // stalls its connections leaves room for others.
        const std::size_t limit = options_.sharedAcceptQueue ? 0 : options_.handshakeLimit;
        if (limit > 0 && (pending_.load(std::memory_order_relaxed) >= limit ||
                          arrivals_->waitingFrom(Arrivals::sourceOf(fd.get())) >=
                              std::max<std::size_t>(limit / 2, 1))) {
            decline(std::move(fd));
            return;
        }
        pending_.fetch_add(1, std::memory_order_relaxed);
        if (options_.sharedAcceptQueue) // the old design: the handshake waits on the pool
            handshake(std::move(fd), false);
        else
            awaitMessage(std::move(fd),
                         [this](UniqueFd f, bool late) { handshake(std::move(f), late); });
    }

    // The client's next CLC message is awaited on the epoll thread (Arrivals): `next` gets
    // the connection once it is all queued; `late`: clcTimeout passed. After close(): dropped.
    void awaitMessage(UniqueFd fd, Arrivals::Next next) noexcept
    {
        if (!arrivals_->awaitMessage(std::move(fd), options_.clcTimeout, std::move(next)))
            pending_.fetch_sub(1, std::memory_order_relaxed);
    }

    // An SMC-R handshake parked behind another first contact with its peer: resumed when that
    // ends, or given up (a DECLINE, and TCP) at its `until`. Holds no thread meanwhile.
    void park(UniqueFd fd, net::SmcrParked parked) noexcept
    {
        const FirstContacts::Key peer = parked.peer;
        const auto wait = std::max(
            std::chrono::duration_cast<std::chrono::milliseconds>(parked.until - Clock::now()),
            std::chrono::milliseconds(0));
        auto state = std::make_shared<net::SmcrParked>(std::move(parked));
        Arrivals::Next next = [this, state](UniqueFd f, bool late) {
            run(std::move(f), false, [this, state, late](int sock, const SocketOptions& o) {
                return late ? net::lift(net::serverGiveUp(stack_, sock, *state, o))
                            : net::serverResume(stack_, sock, std::move(*state), o);
            });
        };
        if (!arrivals_->park(std::move(fd), wait, stack_.smcr()->firstContacts, peer,
                             std::move(next)))
            pending_.fetch_sub(1, std::memory_order_relaxed);
    }

    // The server handshake on the pool, step by step (net::serverBegin): the client's CONFIRM
    // is awaited as its PROPOSAL was, and a handshake parked behind another first contact waits
    // without a thread (the shared queue waits on the pool, as it always did). `late`: the
    // client's message did not come in time: the handshake decides at once on what is there
    // (as its own wait would have).
    void handshake(UniqueFd fd, bool late) noexcept
    {
        run(std::move(fd), late, [this](int f, const SocketOptions& o) {
            if (options_.sharedAcceptQueue)
                return net::lift(net::serverHandshake(stack_, f, o));
            return net::serverBegin(stack_, f, o);
        });
    }

    // Runs `step` on the handshake pool, then goes on from where it leaves the handshake.
    using Step = std::function<Result<net::ServerStep>(int fd, const SocketOptions&)>;
    void run(UniqueFd fd, bool late, Step step) noexcept
    {
        auto child = std::make_shared<UniqueFd>(std::move(fd));
        std::weak_ptr<ListenerImpl> self = weak_from_this();
        stack_.handshakes().postBlocking([self, child, late, step = std::move(step)] {
            auto l = self.lock();
            if (!l)
                return; // `step` gives back what it holds (an RMB, a group)
            const SocketOptions options = l->options(late);
            Result<net::ServerStep> next = step(child->get(), options);
            l->proceed(std::move(*child), std::move(next), options);
        });
    }

    void proceed(UniqueFd fd, Result<net::ServerStep> step, const SocketOptions& options) noexcept
    {
        if (step) {
            if (auto* p = std::get_if<net::SmcdPending>(&*step)) {
                awaitConfirm(std::move(fd), std::move(*p));
                return;
            }
            if (auto* p = std::get_if<net::SmcrPending>(&*step)) {
                awaitConfirm(std::move(fd), std::move(*p));
                return;
            }
            if (auto* p = std::get_if<net::SmcrParked>(&*step)) {
                park(std::move(fd), std::move(*p));
                return;
            }
        }
        Result<net::Outcome> outcome =
            step ? Result<net::Outcome>(std::move(std::get<net::Outcome>(*step)))
                 : Result<net::Outcome>(step.error());
        queueOrDrop(connectionOf(stack_, std::move(fd), true, options, std::move(outcome)));
    }

    // Our ACCEPT is out: the CONFIRM (or what shows it will not come) is awaited on the epoll
    // thread, the rest of the handshake runs on the pool.
    template <typename Pending> void awaitConfirm(UniqueFd fd, Pending pending) noexcept
    {
        auto state = std::make_shared<Pending>(std::move(pending));
        awaitMessage(std::move(fd), [this, state](UniqueFd f, bool late) {
            run(std::move(f), late, [this, state](int sock, const SocketOptions& o) {
                return net::lift(net::serverFinish(stack_, sock, std::move(*state), o));
            });
        });
    }

    SocketOptions options(bool late) const
    {
        SocketOptions o = options_;
        if (late)
            o.clcTimeout = std::chrono::milliseconds(0);
        return o;
    }

    // A handshake is over: its connection queues for accept(), or it failed.
    void queueOrDrop(Result<std::shared_ptr<SocketImpl>> impl) noexcept
    {
        if (impl) {
            push(std::move(*impl), true);
        } else {
            pending_.fetch_sub(1, std::memory_order_relaxed);
            roomMade();
        }
    }

    // Too many handshakes pending: TCP at once. The DECLINE goes before the PROPOSAL is read
    // (a few bytes into an empty send buffer: it does not wait); the socket's first receive
    // discards the PROPOSAL. PEERNOSMC, as a Linux client sees it when the server's
    // limit_smc_hs leaves the SMC option out of the SYN-ACK.
    void decline(UniqueFd fd) noexcept
    {
        const clc::DeclineCode reason = clc::DeclineCode::PeerNoSmc;
        (void)net::writeClc(fd.get(), clc::makeDecline(reason, clc::kVersion1, {}),
                            net::Clock::now());
        stack_.countHandshakeLimited();
        stack_.countFallback(true, reason);
        auto impl =
            std::make_shared<SocketImpl>(stack_, std::move(fd), true, options_, reason, true);
        stack_.enroll(impl);
        push(std::move(impl));
    }

    // Queues a connection for accept(); `handshaken`: it was pending, and is no more.
    void push(std::shared_ptr<SocketImpl> impl, bool handshaken = false)
    {
        if (room_) // a queued connection whose peer goes may make room
            impl->onPeerGone([room = room_] { room->signal(); });
        {
            MutexLocker lock(mutex_);
            if (handshaken)
                pending_.fetch_sub(1, std::memory_order_relaxed);
            if (closed_) {
                impl->onPeerGone({});
                impl->close();
                return;
            }
            queue_.push_back(std::move(impl));
        }
        ready_.signal();
        wake_.notify_all();
    }

    // The oldest queued connection that is not over already (those before it are dropped).
    Result<std::shared_ptr<SocketImpl>> pop(std::chrono::milliseconds timeout)
    {
        const auto deadline = net::deadlineAfter(timeout);
        std::vector<std::shared_ptr<SocketImpl>> over;
        std::shared_ptr<SocketImpl> impl;
        bool closed = false;
        bool wasFull = false;
        {
            MutexLocker lock(mutex_);
            for (;;) {
                wasFull = queue_.size() >= backlog();
                while (!queue_.empty() && queue_.front()->abandoned()) {
                    over.push_back(std::move(queue_.front()));
                    queue_.pop_front();
                    if (queue_.empty())
                        drainReady();
                }
                if (!queue_.empty() || closed_)
                    break;
                if (deadline == net::Deadline::max())
                    wake_.wait(lock);
                else if (wake_.waitUntil(lock, deadline) == std::cv_status::timeout)
                    break;
            }
            closed = closed_;
            if (!queue_.empty() && !closed_) {
                impl = std::move(queue_.front());
                queue_.pop_front();
                if (queue_.empty())
                    drainReady();
            }
        }
        if (wasFull) // the accepting thread waits for room
            roomMade();
        closeLater(std::move(over));
        if (impl) {
            impl->onPeerGone({});
            return impl;
        }
        return std::make_error_code(closed ? std::errc::not_connected : std::errc::timed_out);
    }

    void close() noexcept
    {
        int id = -1;
        std::deque<std::shared_ptr<SocketImpl>> left;
        {
            MutexLocker lock(mutex_);
            closed_ = true;
            id = std::exchange(watch_, -1);
            left.swap(queue_);
        }
        if (id >= 0) // waits for a running callback, which takes mutex_
            stack_.executor().unwatch(id);
        if (acceptor_.joinable()) {
            stop_.signal();
            acceptor_.join();
        }
        arrivals_->close(); // no new arrival now; the waiting ones end here
        {
            // A callback that unwatched itself is done (unwatch did not wait for it), and an
            // accepting task on the pool is done or will see closed_: the fd may go.
            MutexLocker callback(callback_);
            MutexLocker accepting(pooledAccept_);
        }
        wake_.notify_all();
        for (auto& s : left)
            s->close();
        tcp_.reset();
    }

    int readyFd() const noexcept { return ready_.fd(); }
    std::uint16_t port() const
    {
        Result<net::SocketAddress> a = net::localAddress(tcp_.get());
        return a ? a->port() : 0;
    }

private:
    void watchLocked() SMC_REQUIRES(mutex_)
    {
        std::weak_ptr<ListenerImpl> self = weak_from_this();
        watch_ = stack_.executor().watch(tcp_.get(), [self] {
            if (auto l = self.lock())
                l->onReadable();
        });
    }

    SmcStack& stack_;
    UniqueFd tcp_;
    const SocketOptions options_;
    EventFd ready_; // readable while the queue holds a connection
    EventFd stop_;  // close() tells the accepting thread to end
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

Listener::Listener() = default;
Listener::~Listener()
{
    close();
}
Listener::Listener(Listener&&) noexcept = default;
Listener& Listener::operator=(Listener&& other) noexcept
{
    if (this != &other) {
        close();
        impl_ = std::move(other.impl_);
    }
    return *this;
}

Result<Listener> Listener::listen(SmcStack& stack, std::string_view host, std::uint16_t port,
                                  const SocketOptions& options)
{
    Result<net::SocketAddress> at = net::resolve(host, port, true);
    if (!at)
        return at.error();
    Result<UniqueFd> tcp =
        net::listenTcp(*at, SOMAXCONN, options.mode == Mode::Tcp ? nullptr : stack.tcpOption());
    if (!tcp)
        return tcp.error();
    Result<EventFd> ready = EventFd::create();
    if (!ready)
        return ready.error();
    Listener l;
    l.impl_ = std::make_shared<ListenerImpl>(stack, std::move(*tcp), options, std::move(*ready));
    if (Result<void> r = l.impl_->start(); !r)
        return r.error();
    return l;
}

Result<Socket> Listener::accept(std::chrono::milliseconds timeout)
{
    if (!impl_)
        return std::make_error_code(std::errc::not_connected);
    Result<std::shared_ptr<SocketImpl>> impl = impl_->pop(timeout);
    if (!impl)
        return impl.error();
    return Socket(std::move(*impl));
}

int Listener::fd() const noexcept
{
    return impl_ ? impl_->readyFd() : -1;
}

std::uint16_t Listener::port() const noexcept
{
    return impl_ ? impl_->port() : 0;
}

void Listener::close() noexcept
{
    if (impl_) {
        impl_->close();
        impl_.reset();
    }
}

} // namespace smc
