// SPDX-License-Identifier: MIT
// ReadyFd: readiness we set on a socket pair end, for the application's poll loop.
#include "smc/net/ready_fd.h"

#include <poll.h>
#include <sys/ioctl.h>
#include <sys/socket.h>

#include <algorithm>
#include <array>
#include <cerrno>
#include <utility>

#include "smc/net/tcp.h"

namespace smc::net
{

namespace
{

// What we send and what we drain into: the bytes mean nothing. Sent from a zeroed constant, so
// that no call zeroes a buffer of its own (apply() runs on every refresh of a connection).
constexpr std::size_t kJunk = 8192;
const std::array<std::byte, kJunk> kZeros{};

// How many bytes make an end with the smallest send buffer poll as not writable: a Unix socket
// is writable while what it has in flight (each byte with its buffer's overhead) is at most a
// quarter of its send buffer. A fill that size is a single small copy each way, where filling
// the buffer took two copies of 4.5 KiB per stand-in.
std::size_t fillFor(int fd) noexcept
{
    int sndbuf = 0;
    socklen_t len = sizeof sndbuf;
    if (::getsockopt(fd, SOL_SOCKET, SO_SNDBUF, &sndbuf, &len) != 0 || sndbuf <= 0)
        return kJunk; // then the loop in apply() fills it up
    return std::min(kJunk, static_cast<std::size_t>(sndbuf) / 4 + 1);
}

} // namespace

Result<ReadyFd> ReadyFd::create()
{
    int fds[2];
    if (::socketpair(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0, fds) != 0)
        return lastError();
    const int small = 1; // the kernel raises it to its minimum, the same for every socket
    ::setsockopt(fds[0], SOL_SOCKET, SO_SNDBUF, &small, sizeof small);
    static const std::size_t fill = fillFor(fds[0]);
    return ReadyFd(UniqueFd(fds[0]), UniqueFd(fds[1]), fill);
}

ReadyFd::ReadyFd(UniqueFd app, UniqueFd ours, std::size_t fill) noexcept
    : app_(std::move(app)), ours_(std::move(ours)), fill_(fill)
{
}

ReadyFd::ReadyFd(ReadyFd&& other) noexcept
    : app_(std::move(other.app_)), ours_(std::move(other.ours_)), fill_(other.fill_)
{
    MutexLocker lock(other.mutex_);
    MutexLocker mine(mutex_);
    readable_ = other.readable_;
    writable_ = other.writable_;
    counting_ = other.counting_;
    owed_ = other.owed_;
    held_ = other.held_;
    wanted_ = other.wanted_;
}

ReadyFd::~ReadyFd() = default;

void ReadyFd::set(bool readable, bool writable, bool again, bool promised) noexcept
{
    MutexLocker lock(mutex_);
    if (held_) {
        wanted_ = Wanted{readable, writable, again || (wanted_ && wanted_->again), promised};
        return;
    }
    apply(readable, writable, again, promised);
}

namespace
{

// Takes what is queued on `fd`, or at most `limit` bytes; a bounded number of reads however
// fast a peer writes. The bytes taken. A read that comes back short found the queue empty (a
// Unix stream socket's read takes all it has): no second call to hear EAGAIN.
std::size_t drain(int fd, std::size_t limit = SIZE_MAX) noexcept
{
    std::array<std::byte, kJunk> junk; // NOLINT: only written, by recv
    std::size_t taken = 0;
    for (int reads = 0; reads < 64 && taken < limit; ++reads) {
        const std::size_t want = std::min(junk.size(), limit - taken);
        const ssize_t n = ::recv(fd, junk.data(), want, MSG_DONTWAIT);
        if (n <= 0)
            break;
        taken += static_cast<std::size_t>(n);
        if (static_cast<std::size_t>(n) < want)
            break;
    }
    return taken;
}

} // namespace

void ReadyFd::count(bool on) noexcept
{
    MutexLocker lock(mutex_);
    if (counting_ == on)
        return;
    counting_ = on;
    strays_ = true;
    owed_ = 0;
    readable_ = false;
    (void)drain(app_.get()); // nothing uncounted stays; set() says again what is readable
}

bool ReadyFd::counting() const noexcept
{
    MutexLocker lock(mutex_);
    return counting_;
}

void ReadyFd::expect(unsigned pulses) noexcept
{
    MutexLocker lock(mutex_);
    owed_ += pulses;
}

bool ReadyFd::settle(std::chrono::microseconds& patience) noexcept
{
    MutexLocker lock(mutex_);
    while (owed_ > 0) {
        owed_ -= static_cast<unsigned>(drain(app_.get(), owed_));
        if (owed_ == 0)
            break;
        if (patience.count() <= 0)
            return false;
        pollfd p{app_.get(), POLLIN | POLLRDHUP, 0};
        const auto start = std::chrono::steady_clock::now();
        const int ready = ::poll(
            &p, 1,
            static_cast<int>(std::chrono::ceil<std::chrono::milliseconds>(patience).count()));
        patience -=
            std::chrono::ceil<std::chrono::microseconds>(std::chrono::steady_clock::now() - start);
        if (ready > 0 && (p.revents & (POLLRDHUP | POLLHUP | POLLERR)) != 0)
            return false; // shut down: what is owed never comes
    }
    return true;
}

void ReadyFd::hold() noexcept
{
    MutexLocker lock(mutex_);
    held_ = true;
}

void ReadyFd::release() noexcept
{
    MutexLocker lock(mutex_);
    held_ = false;
    if (const std::optional<Wanted> w = std::exchange(wanted_, std::nullopt))
        apply(w->readable, w->writable, w->again, w->promised);
    // Counted, a peer's pulses may have come while held, and an edge-triggered program woken
    // by them then found nothing (the call said EAGAIN): one more byte, its edge, now.
    char byte;
    if (counting_ && ::recv(app_.get(), &byte, 1, MSG_PEEK | MSG_DONTWAIT) == 1 &&
        ::send(ours_.get(), &byte, 1, MSG_NOSIGNAL | MSG_DONTWAIT) == 1)
        ++owed_;
}

void ReadyFd::apply(bool readable, bool writable, bool again, bool promised) noexcept
{
    const std::byte* junk = kZeros.data();
    // For `again` (an edge for EPOLLET): a fresh byte, and the ones queued before it go after
    // it came, so a poll in between never finds the number empty; one byte of ours stays.
    if (counting_) {
        if (readable && (again || (owed_ == 0 && !promised)) &&
            ::send(ours_.get(), junk, 1, MSG_NOSIGNAL | MSG_DONTWAIT) == 1) {
            int queued = 0;
            if (again && ::ioctl(app_.get(), FIONREAD, &queued) == 0 && queued > 1)
                owed_ -= static_cast<unsigned>(
                    drain(app_.get(), std::min<std::size_t>(owed_, queued - 1)));
            ++owed_;
        }
    } else if (readable && readable_ && again &&
               ::send(ours_.get(), junk, 1, MSG_NOSIGNAL | MSG_DONTWAIT) == 1) {
        (void)drain(app_.get(), 1); // ours; a stray pulse or two may stay, readable as it is
    }
    if (!counting_ && (readable != readable_ || (!readable && strays_))) {
        if (readable)
            (void)::send(ours_.get(), junk, 1, MSG_NOSIGNAL | MSG_DONTWAIT);
        else
            (void)drain(app_.get());
        readable_ = readable;
    }
    if (writable != writable_) {
        if (writable)
            (void)drain(ours_.get());
        else // the fill; or, not knowing it, until a write comes back short: the buffer is full
            while (::send(app_.get(), junk, fill_, MSG_NOSIGNAL | MSG_DONTWAIT) ==
                       static_cast<ssize_t>(fill_) &&
                   fill_ == kJunk) {
            }
        writable_ = writable;
    }
}

} // namespace smc::net
