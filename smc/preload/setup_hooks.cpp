// SPDX-License-Identifier: MIT
// The shim's connection setup: connect, listen and accept decide SMC or TCP; close, dup, fcntl,
// ioctl and the socket options keep an SMC descriptor behaving as the TCP socket it stands for.
#include <fcntl.h>
#include <linux/close_range.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/ioctl.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <climits>
#include <cstring>
#include <utility>
#include <vector>

#include "smc/net/ready_fd.h"
#include "smc/net/tcp.h"
#include "smc/preload/real.h"
#include "smc/preload/registry.h"
#include "smc/preload/setup.h"
#include "smc/preload/shim.h"

using smc::preload::Conn;
using smc::preload::fail;
using smc::preload::nonBlocking;
using smc::preload::real;
using smc::preload::redirect;
using smc::preload::Route;
using smc::preload::Shim;
using smc::preload::Use;
using smc::preload::Wait;

namespace
{

// A TCP stream socket of ours to redirect: IPv4 or IPv6, a number the table holds.
bool tcpStream(int fd) noexcept
{
    if (fd < 0 || fd >= Shim::kMaxFd)
        return false;
    int type = 0, protocol = 0; // both: a raw socket's protocol may say TCP too
    socklen_t len = sizeof type;
    if (real().getsockopt(fd, SOL_SOCKET, SO_TYPE, &type, &len) != 0 || type != SOCK_STREAM)
        return false;
    len = sizeof protocol;
    return real().getsockopt(fd, SOL_SOCKET, SO_PROTOCOL, &protocol, &len) == 0 &&
           protocol == IPPROTO_TCP;
}

// The socket's local port, bound to any port of `family` (the connect address's, which is the
// socket's) first if it has none: a client usually has none, so the bind comes first, and a
// socket bound already refuses it (EINVAL).
std::uint16_t localPort(int fd, sa_family_t family) noexcept
{
    sockaddr_storage local{};
    local.ss_family = family;
    const socklen_t anyLen = family == AF_INET6 ? sizeof(sockaddr_in6) : sizeof(sockaddr_in);
    if (::bind(fd, reinterpret_cast<sockaddr*>(&local), anyLen) != 0 && errno != EINVAL)
        return 0;
    socklen_t len = sizeof local;
    if (real().getsockname(fd, reinterpret_cast<sockaddr*>(&local), &len) != 0)
        return 0;
    return smc::preload::portOf(reinterpret_cast<sockaddr*>(&local));
}

// The TCP connect of a socket that may be non-blocking, waited for: an SMC handshake follows.
int connectWaiting(int fd, const sockaddr* to, socklen_t len, std::chrono::milliseconds timeout)
{
    if (real().connect(fd, to, len) == 0)
        return 0;
    if (errno != EINPROGRESS && errno != EALREADY && errno != EINTR)
        return -1;
    if (smc::Result<short> r = smc::net::waitFor(fd, POLLOUT, smc::net::deadlineAfter(timeout)); !r)
        return fail(smc::preload::errnoOf(r.error())); // ETIMEDOUT, or poll(2)'s
    int error = 0;
    socklen_t errorLen = sizeof error;
    if (real().getsockopt(fd, SOL_SOCKET, SO_ERROR, &error, &errorLen) != 0)
        return -1;
    return error == 0 ? 0 : fail(error);
}

// TCP as it is: connect(2) itself, and the number's file stays the TCP socket.
int plainConnect(int fd, const sockaddr* to, socklen_t len)
{
    const int r = real().connect(fd, to, len);
    if (r == 0 || errno == EINPROGRESS) {
        const int e = errno;
        Shim::instance().untrack(fd);
        errno = e;
    }
    return r;
}

// Before the kernel closes the numbers from `first` to `last`: forget() for each (not past the
// table), and the cached socket pairs with an end among them let go. Allocates nothing for
// numbers that are not ours. Not in a vfork child (it shares our memory): nothing.
std::vector<smc::preload::Closing> forgetRange(unsigned first, unsigned last)
{
    std::vector<smc::preload::Closing> closing;
    if (!Shim::instance().owner())
        return closing;
    for (unsigned fd = first; fd <= last && fd < unsigned{Shim::kMaxFd}; ++fd)
        if (smc::preload::Closing c = Shim::instance().forget(static_cast<int>(fd)); c.pending())
            closing.push_back(std::move(c));
    smc::net::ReadyFd::closingRange(first, last);
    return closing;
}

} // namespace

extern "C" {

int socket(int domain, int type, int protocol)
{
    const int fd = real().socket(domain, type, protocol);
    // A TCP socket may become SMC when it connects: its epoll registrations are kept until then.
    if (fd >= 0 && (domain == AF_INET || domain == AF_INET6) &&
        (type & ~(SOCK_NONBLOCK | SOCK_CLOEXEC)) == SOCK_STREAM &&
        (protocol == 0 || protocol == IPPROTO_TCP))
        Shim::instance().track(fd);
    return fd;
}

int connect(int fd, const sockaddr* to, socklen_t len)
{
    Shim& shim = Shim::instance();
    const Route route = shim.route(fd, Wait::Never, Use::None);
    if (route.setup) // a connect under way
        return fail(route.error == EAGAIN ? EALREADY : route.error);
    if (route.conn)
        return fail(EISCONN);
    if (!to || !(shim.unconnectedTcp(fd) || tcpStream(fd)) ||
        !smc::preload::listenerAnnounced(to, len))
        return plainConnect(fd, to, len);
    smc::StackCore* stack = shim.stack();
    const std::uint16_t port = stack ? localPort(fd, to->sa_family) : 0;
    smc::Result<smc::UniqueFd> announced =
        port ? smc::preload::announceClient(port) : smc::Result<smc::UniqueFd>(smc::UniqueFd());
    if (!stack || !announced || !*announced)
        return plainConnect(fd, to, len);
    // A non-blocking socket: EINPROGRESS, and the handshake on the stack's threads (setup.h).
    if (nonBlocking(fd)) {
        if (std::shared_ptr<smc::preload::Setup> setup = smc::preload::prepareSetup(fd, false)) {
            if (real().connect(fd, to, len) != 0 && errno != EINPROGRESS)
                return -1;
            if (smc::preload::beginConnecting(fd, std::move(setup), *stack, std::move(*announced)))
                return fail(EINPROGRESS);
        }
    }
    if (connectWaiting(fd, to, len, shim.settings().options.connectTimeout) != 0) {
        const int e = errno;
        shim.log("fd %d: connect from port %u failed: %s", fd, port, std::strerror(e));
        return fail(e);
    }
    if (!smc::preload::localPeer(fd)) { // a remote server behind a wildcard name: no CLC
        shim.untrack(fd);
        return 0;
    }
    smc::Result<smc::net::Outcome> outcome =
        smc::net::clientHandshake(*stack, fd, shim.optionsFor(fd));
    announced->reset();
    if (!outcome) {
        stack->countHandshakeError();
        shim.log("fd %d: handshake failed: %s", fd, outcome.error().message().c_str());
        shim.untrack(fd);
        return fail(smc::preload::errnoOf(outcome.error()));
    }
    if (auto* fallback = std::get_if<smc::net::Fallback>(&*outcome)) {
        stack->countFallback(false, fallback->reason);
        shim.log("fd %d: client TCP (fallback %s)", fd, smc::clc::toString(fallback->reason));
        shim.untrack(fd);
        return 0;
    }
    const smc::Transport transport = redirect(fd, *stack, false, std::move(outcome));
    shim.untrack(fd); // what it is now (its registrations moved along), it stays
    if (transport == smc::Transport::None)
        return fail(ENOMEM);
    shim.log("fd %d: client %s", fd, smc::toString(transport));
    return 0;
}

int listen(int fd, int backlog)
{
    if (real().listen(fd, backlog) != 0)
        return -1;
    Shim& shim = Shim::instance();
    shim.untrack(fd); // a listener's number never moves
    sockaddr_storage bound{};
    socklen_t len = sizeof bound;
    if (shim.announced(fd) || !tcpStream(fd) ||
        real().getsockname(fd, reinterpret_cast<sockaddr*>(&bound), &len) != 0 || !shim.stack())
        return 0;
    smc::Result<smc::UniqueFd> a =
        smc::preload::announceListener(reinterpret_cast<sockaddr*>(&bound), len);
    if (a)
        shim.holdAnnouncement(fd, std::move(*a));
    shim.log("fd %d: listening%s", fd, a ? ", SMC announced" : " (TCP only: not announced)");
    return 0;
}

int accept4(int listener, sockaddr* from, socklen_t* fromLen, int flags)
{
    Shim& shim = Shim::instance();
    sockaddr_storage peer{};
    socklen_t peerLen = sizeof peer;
    const int fd = real().accept4(listener, reinterpret_cast<sockaddr*>(&peer), &peerLen, flags);
    if (fd < 0)
        return fd;
    if (from && fromLen) {
        std::memcpy(from, &peer, std::min<socklen_t>(*fromLen, peerLen));
        *fromLen = peerLen;
    }
    if (fd >= Shim::kMaxFd ||
        !smc::preload::fromAnnouncedClient(fd, reinterpret_cast<const sockaddr*>(&peer), peerLen))
        return fd; // TCP, untouched
    // Its handshake waits for the first call that uses the connection, in the process that
    // makes it: a forking server's child, whose parent only accepts and closes (setup.h).
    shim.addAccepted(fd);
    shim.inheritBufferSizes(listener, fd);
    return fd;
}

int accept(int listener, sockaddr* from, socklen_t* fromLen)
{
    return accept4(listener, from, fromLen, 0);
}

int close(int fd)
{
    smc::preload::Closing closing = Shim::instance().forget(fd);
    const int r = real().close(fd);
    closing.finish(r == 0);
    return r;
}

// As close() for each number of the range, when the call closes them in the process's table:
// not with CLOSE_RANGE_CLOEXEC (they stay open), nor CLOSE_RANGE_UNSHARE (the caller's own copy
// of the table; other threads keep them), nor with flags the kernel refuses.
int close_range(unsigned first, unsigned last, int flags)
{
    std::vector<smc::preload::Closing> closing;
    if ((flags & CLOSE_RANGE_UNSHARE) != 0) // this thread's own table: ours is shared again
        smc::net::ReadyFd::spawning();
    if (flags == 0 && first <= last)
        closing = forgetRange(first, last);
    const int r = real().close_range(first, last, flags);
    for (smc::preload::Closing& c : closing)
        c.finish(r == 0);
    return r;
}

// glibc's closefrom() makes the system call itself, past the close_range above.
void closefrom(int lowest)
{
    std::vector<smc::preload::Closing> closing =
        forgetRange(static_cast<unsigned>(std::max(lowest, 0)), UINT_MAX);
    real().closefrom(lowest);
    for (smc::preload::Closing& c : closing)
        c.finish(true);
}

int shutdown(int fd, int how)
{
    const Route route = Shim::instance().route(fd, Wait::Never);
    if (route.setup)
        return fail(route.error == EAGAIN ? ENOTCONN : route.error);
    const std::shared_ptr<Conn>& conn = route.conn;
    if (!conn)
        return real().shutdown(fd, how);
    const smc::Shutdown what = how == SHUT_RD   ? smc::Shutdown::Read
                               : how == SHUT_WR ? smc::Shutdown::Write
                                                : smc::Shutdown::Both;
    if (how != SHUT_RD && how != SHUT_WR && how != SHUT_RDWR)
        return fail(EINVAL);
    smc::Result<void> r = conn->impl->shutdown(what);
    return r ? 0 : fail(smc::preload::errnoOf(r.error()));
}

} // extern "C"
