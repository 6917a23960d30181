// SPDX-License-Identifier: MIT
// ReadyFd: readiness we set on a socket pair end, for the application's poll loop.
#include "smc/net/ready_fd.h"

#include <sys/socket.h>

#include <array>
#include <utility>

#include "smc/net/tcp.h"

namespace smc::net
{

Result<ReadyFd> ReadyFd::create()
{
    int fds[2];
    if (::socketpair(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0, fds) != 0)
        return lastError();
    const int small = 1; // the kernel raises it to its minimum: a few KiB fill it
    ::setsockopt(fds[0], SOL_SOCKET, SO_SNDBUF, &small, sizeof small);
    return ReadyFd(UniqueFd(fds[0]), UniqueFd(fds[1]));
}

ReadyFd::ReadyFd(UniqueFd app, UniqueFd ours) noexcept
    : app_(std::move(app)), ours_(std::move(ours))
{
}

ReadyFd::ReadyFd(ReadyFd&& other) noexcept
    : app_(std::move(other.app_)), ours_(std::move(other.ours_))
{
    MutexLocker lock(other.mutex_);
    MutexLocker mine(mutex_);
    readable_ = other.readable_;
    writable_ = other.writable_;
    held_ = other.held_;
    wanted_ = other.wanted_;
}

ReadyFd::~ReadyFd() = default;

void ReadyFd::set(bool readable, bool writable, bool again) noexcept
{
    MutexLocker lock(mutex_);
    if (held_) {
        wanted_ = Wanted{readable, writable, again || (wanted_ && wanted_->again)};
        return;
    }
    apply(readable, writable, again);
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
        apply(w->readable, w->writable, w->again);
}

void ReadyFd::apply(bool readable, bool writable, bool again) noexcept
{
    std::array<std::byte, 8192> junk{}; // more than a fill or the pulses: one read takes all
    auto drain = [&junk](int fd) {
        while (::recv(fd, junk.data(), junk.size(), MSG_DONTWAIT) == ssize_t(junk.size())) {
        }
    };
    if (readable && readable_ && again) { // one byte queued, whatever the pulses before
        drain(app_.get());
        (void)::send(ours_.get(), junk.data(), 1, MSG_NOSIGNAL | MSG_DONTWAIT);
    }
    if (readable != readable_) {
        if (readable)
            (void)::send(ours_.get(), junk.data(), 1, MSG_NOSIGNAL | MSG_DONTWAIT);
        else
            drain(app_.get());
        readable_ = readable;
    }
    if (writable != writable_) {
        if (writable)
            drain(ours_.get());
        else
            while (::send(app_.get(), junk.data(), junk.size(), MSG_NOSIGNAL | MSG_DONTWAIT) > 0) {
            }
        writable_ = writable;
    }
}

} // namespace smc::net
