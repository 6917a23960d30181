// SPDX-License-Identifier: MIT
// Listener: TCP accepts on its own thread, its queue for accept(), and the public Listener.
#include <poll.h>
#include <sys/socket.h>

#include <array>
#include <utility>

#include "base/quiet_thread.h"
#include "smc/net/tcp.h"
#include "smc/socket/internal/listener_impl.h"

namespace smc
{

Result<void> ListenerImpl::start()
{
    if (!limits_.sharedAcceptQueue) {
        Result<EventFd> stop = EventFd::create();
        Result<EventFd> room = EventFd::create();
        if (!stop || !room)
            return stop ? room.error() : stop.error();
        stop_ = std::move(*stop);
        room_ = std::make_shared<EventFd>(std::move(*room));
        acceptor_ = quietThread([this] { acceptLoop(); });
        return {};
    }
    MutexLocker lock(mutex_);
    watchLocked();
    return {};
}

thread_local bool ListenerImpl::tlsAccepting = false;

void ListenerImpl::acceptLoop() noexcept
{
    tlsAccepting = true;
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

void ListenerImpl::onReadable() noexcept
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

bool ListenerImpl::acceptAll() noexcept
{
    while (limits_.sharedAcceptQueue || hasRoom()) {
        const int fd = ::accept4(tcp_.get(), nullptr, nullptr, SOCK_NONBLOCK | SOCK_CLOEXEC);
        if (fd < 0) // EAGAIN, or an error the next readiness reports again
            return errno != EMFILE && errno != ENFILE && errno != ENOBUFS && errno != ENOMEM;
        admit(UniqueFd(fd));
    }
    return true;
}

bool ListenerImpl::hasRoom() noexcept
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

std::vector<std::shared_ptr<SocketImpl>> ListenerImpl::takeAbandonedLocked() SMC_REQUIRES(mutex_)
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

void ListenerImpl::closeLater(std::vector<std::shared_ptr<SocketImpl>> over) noexcept
{
    for (auto& s : over) {
        s->onPeerGone({});
        stack_.handshakes().postBlocking([s = std::move(s)] { s->close(); });
    }
}

void ListenerImpl::roomMade() noexcept
{
    if (room_)
        room_->signal();
}

void ListenerImpl::push(std::shared_ptr<SocketImpl> impl, bool handshaken)
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

Result<std::shared_ptr<SocketImpl>> ListenerImpl::pop(std::chrono::milliseconds timeout)
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

void ListenerImpl::close() noexcept
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

std::uint16_t ListenerImpl::port() const
{
    Result<net::SocketAddress> a = net::localAddress(tcp_.get());
    return a ? a->port() : 0;
}

void ListenerImpl::watchLocked() SMC_REQUIRES(mutex_)
{
    std::weak_ptr<ListenerImpl> self = weak_from_this();
    watch_ = stack_.executor().watch(tcp_.get(), [self] {
        if (auto l = self.lock())
            l->onReadable();
    });
}

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

Result<Listener> Listener::listen(SmcStack& handle, std::string_view host, std::uint16_t port,
                                  const SocketOptions& options, const ListenerOptions& limits)
{
    StackCore& stack = coreOf(handle);
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
    l.impl_ =
        std::make_shared<ListenerImpl>(stack, std::move(*tcp), options, limits, std::move(*ready));
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
