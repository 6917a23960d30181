// SPDX-License-Identifier: MIT
// ReadyFd: readiness we set on a socket pair end, for the application's poll loop.
#include "smc/net/ready_fd.h"

#include <fcntl.h>
#include <poll.h>
#include <pthread.h>
#include <sys/ioctl.h>
#include <sys/socket.h>

#include <algorithm>
#include <array>
#include <atomic>
#include <cerrno>
#include <utility>
#include <vector>

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

// Making and closing a pair costs a short connection about a tenth of its time: pairs that
// nobody else holds any more wait here for the next connection, a few of them.
constexpr std::size_t kMaxReusable = 64;
std::atomic<std::uint64_t> forks{0};
std::atomic<std::uint64_t> reusedPairs{0};

struct Reusable {
    struct Pair {
        UniqueFd app, ours;
        std::size_t fill = 0;
    };
    Reusable() { pairs.reserve(kMaxReusable); }
    Mutex mutex;
    std::vector<Pair> pairs SMC_GUARDED_BY(mutex);
};

// Never destroyed: a ReadyFd may go after static destructors ran.
Reusable& reusable()
{
    static Reusable* r = new Reusable;
    return *r;
}

} // namespace

Result<ReadyFd> ReadyFd::create()
{
    // The fork count before the pair exists: a child started from here on may hold it.
    const std::uint64_t made = forks.load(std::memory_order_acquire);
    {
        Reusable& r = reusable();
        MutexLocker lock(r.mutex);
        if (!r.pairs.empty()) {
            Reusable::Pair p = std::move(r.pairs.back());
            r.pairs.pop_back();
            reusedPairs.fetch_add(1, std::memory_order_relaxed);
            return ReadyFd(std::move(p.app), std::move(p.ours), p.fill, made);
        }
    }
    int fds[2];
    if (::socketpair(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0, fds) != 0)
        return lastError();
    const int small = 1; // the kernel raises it to its minimum, the same for every socket
    ::setsockopt(fds[0], SOL_SOCKET, SO_SNDBUF, &small, sizeof small);
    static const std::size_t fill = fillFor(fds[0]);
    return ReadyFd(UniqueFd(fds[0]), UniqueFd(fds[1]), fill, made);
}

ReadyFd::ReadyFd(UniqueFd app, UniqueFd ours, std::size_t fill, std::uint64_t made) noexcept
    : app_(std::move(app)), ours_(std::move(ours)), fill_(fill), forks_(made)
{
}

void ReadyFd::reuseWhenDone() noexcept
{
    MutexLocker lock(mutex_);
    reuse_ = true;
}

void ReadyFd::neverReuse() noexcept
{
    MutexLocker lock(mutex_);
    never_ = true;
}

void ReadyFd::beforeFork() noexcept SMC_TSA(no_thread_safety_analysis)
{
    reusable().mutex.lock(); // no pair half in or out of the cache across the fork
    forks.fetch_add(1, std::memory_order_acq_rel);
}

void ReadyFd::afterForkParent() noexcept SMC_TSA(no_thread_safety_analysis)
{
    reusable().mutex.unlock();
}

void ReadyFd::afterForkChild() noexcept SMC_TSA(no_thread_safety_analysis)
{
    Reusable& r = reusable();
    r.pairs.clear(); // the parent's
    r.mutex.unlock();
}

void ReadyFd::spawning() noexcept
{
    forks.fetch_add(1, std::memory_order_acq_rel);
}

std::uint64_t ReadyFd::reused() noexcept
{
    return reusedPairs.load(std::memory_order_relaxed);
}

void ReadyFd::dropReusable() noexcept
{
    Reusable& r = reusable();
    MutexLocker lock(r.mutex);
    r.pairs.clear();
}

void ReadyFd::closingRange(unsigned first, unsigned last) noexcept
{
    auto in = [&](const UniqueFd& fd) {
        return static_cast<unsigned>(fd.get()) >= first && static_cast<unsigned>(fd.get()) <= last;
    };
    Reusable& r = reusable();
    MutexLocker lock(r.mutex);
    std::erase_if(r.pairs, [&](Reusable::Pair& p) {
        if (!in(p.app) && !in(p.ours))
            return false;
        // The kernel closes those; the other end closes here (a number of the range, closed
        // twice, could by then be someone else's).
        if (in(p.app))
            (void)p.app.release();
        if (in(p.ours))
            (void)p.ours.release();
        return true;
    });
}

ReadyFd::ReadyFd(ReadyFd&& other) noexcept
    : app_(std::move(other.app_)), ours_(std::move(other.ours_)), fill_(other.fill_),
      forks_(other.forks_)
{
    MutexLocker lock(other.mutex_);
    MutexLocker mine(mutex_);
    readable_ = other.readable_;
    writable_ = other.writable_;
    counting_ = other.counting_;
    reuse_ = other.reuse_;
    counted_ = other.counted_;
    never_ = other.never_;
    owed_ = other.owed_;
    held_ = other.held_;
    wanted_ = other.wanted_;
}

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

ReadyFd::~ReadyFd()
{
    {
        MutexLocker lock(mutex_);
        if (!reuse_ || counted_ || never_ || !app_ || !ours_ ||
            forks_ != forks.load(std::memory_order_acquire))
            return; // both ends close
    }
    const int e = errno; // a program's call may be what destroys us
    int cancel = 0;      // poll and recv are cancellation points; a destructor cannot unwind
    (void)::pthread_setcancelstate(PTHREAD_CANCEL_DISABLE, &cancel);
    // Nothing queued either way, not shut down, and the file's flags as socketpair() made them
    // (the program may have changed them through its number).
    (void)drain(app_.get());
    (void)drain(ours_.get());
    pollfd p[2] = {{app_.get(), POLLIN | POLLRDHUP, 0}, {ours_.get(), POLLIN | POLLRDHUP, 0}};
    if (::poll(p, 2, 0) == 0 && ::fcntl(app_.get(), F_SETFL, O_RDWR | O_NONBLOCK) == 0) {
        Reusable& r = reusable();
        MutexLocker lock(r.mutex);
        if (r.pairs.size() < kMaxReusable && forks_ == forks.load(std::memory_order_acquire))
            r.pairs.push_back({std::move(app_), std::move(ours_), fill_}); // else both close
    }
    (void)::pthread_setcancelstate(cancel, nullptr);
    errno = e;
}

void ReadyFd::count(bool on) noexcept
{
    MutexLocker lock(mutex_);
    counted_ = counted_ || on;
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
