// SPDX-License-Identifier: MIT
// The shim's descriptor calls: dup, fcntl and ioctl follow an SMC descriptor's numbers and its
// non-blocking flag; its socket options and addresses are the TCP socket's.
// Our definitions must keep libc's own symbol names: no redirection of fcntl to fcntl64 (both
// are defined below, each under its own name).
#undef _FILE_OFFSET_BITS
#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/ioctl.h>
#include <sys/time.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <climits>
#include <cstdarg>

#include "smc/net/ready_fd.h"
#include "smc/preload/real.h"
#include "smc/preload/setup.h"
#include "smc/preload/shim.h"

using smc::preload::Conn;
using smc::preload::fail;
using smc::preload::real;
using smc::preload::Route;
using smc::preload::Shim;
using smc::preload::Use;
using smc::preload::Wait;

namespace
{

// `to` is a new number of `from`'s connection (after dup, dup2, dup3, F_DUPFD).
int alias(int from, int to)
{
    Shim& shim = Shim::instance();
    if (to < 0 || to == from)
        return to;
    std::shared_ptr<Conn> conn = shim.route(from, Wait::Never, Use::None).conn;
    if (!conn || !shim.owner()) // a vfork child leaves the table alone
        return to;
    if (to >= Shim::kMaxFd) { // beyond the table: the number would read the ready socket
        real().close(to);
        return fail(EMFILE);
    }
    // Shared: markShared before the copy finds nothing while a handshake runs in a call.
    conn->shared = true;
    conn->numbers.fetch_add(1);
    shim.add(to, std::move(conn));
    return to;
}

// O_NONBLOCK, just set on the number's file by F_SETFL or FIONBIO, for what the number stands
// for. False: a handshake ended meanwhile and may have read the flag before us (Shim::settle),
// so the number's new file must get it again.
bool nonBlockingSet(int fd, bool on)
{
    Shim& shim = Shim::instance();
    const Route route = shim.route(fd, Wait::Never, Use::None);
    if (route.conn) {
        route.conn->nonBlocking = on;
        route.conn->impl->setNonBlocking(on);
    } else if (route.setup) {
        route.setup->nonBlocking = on;
        return shim.route(fd, Wait::Never, Use::None).setup != nullptr;
    }
    return true;
}

// A copy of the number made while its handshake is under way (or before it began: one accepted
// for SMC) would keep the stand-in or the TCP socket: the handshake runs to its end first.
// `use`: false for a number about to be replaced (dup2's target), which needs no handshake.
void settled(int fd, bool use = true)
{
    (void)Shim::instance().route(fd, Wait::Always, use ? Use::Any : Use::None);
}

// A child started without fork handlers (`start`) inherits every number not marked FD_CLOEXEC:
// no socket pair made before it began, or while it started, is reused after it (a vfork or a
// clone is not seen here; while such a child lives, Closing::finish sees it).
template <typename Start> auto spawned(Start start)
{
    smc::net::ReadyFd::spawning();
    const auto r = start();
    smc::net::ReadyFd::spawning();
    return r;
}

// Whether fcntl's `cmd` may leave the number's file held or watched beyond the number (a copy,
// an owner and its signals, a lease, a lock): then its ready socket pair is never reused.
bool sharing(int cmd, void* arg) noexcept
{
    switch (cmd) {
    case F_GETFL:
    case F_GETFD:
    case F_SETFD:
        return false;
    case F_SETFL:
        return (reinterpret_cast<std::intptr_t>(arg) & O_ASYNC) != 0;
    default:
        return true;
    }
}

int control(int (*call)(int, int, ...), int fd, int cmd, void* arg)
{
    if (cmd == F_DUPFD || cmd == F_DUPFD_CLOEXEC)
        settled(fd);
    if (sharing(cmd, arg))
        Shim::instance().markShared(fd);
    const int r = call(fd, cmd, arg);
    if (r < 0)
        return r;
    switch (cmd) {
    case F_DUPFD:
    case F_DUPFD_CLOEXEC:
        return alias(fd, r);
    case F_SETFL:
        if (const bool on = (reinterpret_cast<std::intptr_t>(arg) & O_NONBLOCK) != 0;
            !nonBlockingSet(fd, on)) {
            (void)call(fd, cmd, arg);
            (void)nonBlockingSet(fd, on);
        }
        return r;
    default:
        return r;
    }
}

// What TCP_NODELAY, TCP_CORK, SO_RCVTIMEO and SO_SNDTIMEO mean for the connection: set on it,
// or recorded for it while its handshake runs (Shim::settle applies them; one that ended
// meanwhile may have looked before us, so the connection gets it here). An errno, or 0.
int connectionOption(int fd, Route route, int level, int name, const void* value, socklen_t len)
{
    const bool flag = level == IPPROTO_TCP && (name == TCP_NODELAY || name == TCP_CORK) && value &&
                      len >= sizeof(int);
    const bool timeout = level == SOL_SOCKET && (name == SO_RCVTIMEO || name == SO_SNDTIMEO) &&
                         value && len >= sizeof(timeval);
    if (!flag && !timeout)
        return 0;
    const bool on = flag && *static_cast<const int*>(value) != 0;
    std::chrono::milliseconds wait{-1};
    if (timeout) {
        const auto* tv = static_cast<const timeval*>(value);
        if (tv->tv_sec < 0 || tv->tv_usec < 0 || tv->tv_usec >= 1'000'000)
            return EDOM; // as Linux says of such a timeval
        // Milliseconds, rounded up (a short wait must not become none); 0 waits forever.
        const std::chrono::milliseconds ms(tv->tv_sec * 1000 + (tv->tv_usec + 999) / 1000);
        if (ms.count() > 0)
            wait = ms;
    }
    for (;;) {
        if (route.conn) {
            smc::SocketImpl& impl = *route.conn->impl;
            if (name == SO_RCVTIMEO)
                impl.setRecvTimeout(wait);
            else if (name == SO_SNDTIMEO)
                impl.setSendTimeout(wait);
            else if (smc::Result<void> r =
                         name == TCP_NODELAY ? impl.setNoDelay(on) : impl.setCork(on);
                     !r)
                return smc::preload::errnoOf(r.error());
            return 0;
        }
        if (!route.setup)
            return 0; // TCP now: the kernel's option is all there is
        {
            smc::preload::Setup& setup = *route.setup;
            smc::MutexLocker lock(setup.mutex);
            if (name == TCP_NODELAY)
                setup.noDelay = on;
            else if (name == TCP_CORK)
                setup.cork = on;
            else
                (name == SO_RCVTIMEO ? setup.recvTimeout : setup.sendTimeout) = wait;
        }
        route = Shim::instance().route(fd, Wait::Never, Use::None);
        if (route.setup)
            return 0;
    }
}

// SO_RCVBUF and SO_SNDBUF on a socket whose connection is not made yet size its SMC buffers,
// as on Linux's SMC: half what the kernel made of the value (it doubles it, and caps it at
// net.core.rmem_max or wmem_max unless forced).
void bufferSize(int fd, int name)
{
    const bool receive = name == SO_RCVBUF || name == SO_RCVBUFFORCE;
    if (!receive && name != SO_SNDBUF && name != SO_SNDBUFFORCE)
        return;
    int value = 0;
    socklen_t len = sizeof value;
    if (real().getsockopt(fd, SOL_SOCKET, receive ? SO_RCVBUF : SO_SNDBUF, &value, &len) == 0 &&
        value > 0)
        Shim::instance().setBufferSize(fd, receive, static_cast<std::size_t>(value) / 2);
}

// The TCP socket's descriptor of what `route` found (-1: none, the number's own is).
int tcpOf(const Route& route) noexcept
{
    return route.setup ? route.setup->tcp.get() : -1;
}

} // namespace

extern "C" {

int dup(int fd)
{
    settled(fd);
    Shim::instance().markShared(fd);
    return alias(fd, real().dup(fd));
}

// The kernel closes what `to` was only when the call succeeds; so does the table. A
// handshake under way on either number ends first (it would move `to` under us).
int dup2(int from, int to)
{
    settled(from);
    settled(to, false);
    if (from != to)
        Shim::instance().markShared(from);
    const int r = real().dup2(from, to);
    if (r >= 0 && from != to)
        (void)Shim::instance().forget(to, true); // the kernel closed what `to` was
    return alias(from, r);
}

int dup3(int from, int to, int flags)
{
    settled(from);
    settled(to, false);
    Shim::instance().markShared(from);
    const int r = real().dup3(from, to, flags);
    if (r >= 0)
        (void)Shim::instance().forget(to, true);
    return alias(from, r);
}

// The argument is an int or a pointer; both travel in the same register.
int fcntl(int fd, int cmd, ...)
{
    va_list args;
    va_start(args, cmd);
    void* arg = va_arg(args, void*);
    va_end(args);
    return control(real().fcntl, fd, cmd, arg);
}

int fcntl64(int fd, int cmd, ...)
{
    va_list args;
    va_start(args, cmd);
    void* arg = va_arg(args, void*);
    va_end(args);
    return control(real().fcntl64, fd, cmd, arg);
}

int posix_spawn(pid_t* pid, const char* path, const posix_spawn_file_actions_t* actions,
                const posix_spawnattr_t* attr, char* const argv[], char* const envp[])
{
    return spawned([&] { return real().posix_spawn(pid, path, actions, attr, argv, envp); });
}

int posix_spawnp(pid_t* pid, const char* file, const posix_spawn_file_actions_t* actions,
                 const posix_spawnattr_t* attr, char* const argv[], char* const envp[])
{
    return spawned([&] { return real().posix_spawnp(pid, file, actions, attr, argv, envp); });
}

int system(const char* command)
{
    return spawned([&] { return real().system(command); });
}

FILE* popen(const char* command, const char* mode)
{
    return spawned([&] { return real().popen(command, mode); });
}

int ioctl(int fd, unsigned long request, ...)
{
    va_list args;
    va_start(args, request);
    void* arg = va_arg(args, void*);
    va_end(args);
    const Route route =
        Shim::instance().route(fd, Wait::Never, request == FIONREAD ? Use::Any : Use::None);
    if (route.conn && request == FIONREAD && arg) { // the connection's, not the ready socket's
        smc::Result<std::size_t> n = route.conn->impl->unread();
        if (!n)
            return fail(smc::preload::errnoOf(n.error()));
        *static_cast<int*>(arg) = static_cast<int>(std::min<std::size_t>(*n, INT_MAX));
        return 0;
    }
    // FIOASYNC, an owner: on the ready socket's file, as fcntl's.
    if (request != FIONBIO && request != FIONREAD && request != FIOCLEX && request != FIONCLEX)
        Shim::instance().markShared(fd);
    const int r = real().ioctl(fd, request, arg); // FIONREAD under way: the stand-in's 0
    if (r == 0 && request == FIONBIO && arg) {
        const bool on = *static_cast<const int*>(arg) != 0;
        if (!nonBlockingSet(fd, on)) {
            (void)real().ioctl(fd, request, arg);
            (void)nonBlockingSet(fd, on);
        }
    }
    return r;
}

int getsockopt(int fd, int level, int name, void* value, socklen_t* len)
{
    const Route route = Shim::instance().route(fd, Wait::Never, Use::None);
    if (route.setup)
        return real().getsockopt(tcpOf(route), level, name, value, len);
    if (!route.conn)
        return real().getsockopt(fd, level, name, value, len);
    if (level == SOL_SOCKET && name == SO_ERROR && value && len && *len >= sizeof(int)) {
        *static_cast<int*>(value) = 0; // the connection's errors come with its calls
        *len = sizeof(int);
        return 0;
    }
    return route.conn->impl->onTcp(
        [&](int tcp) { return real().getsockopt(tcp, level, name, value, len); });
}

int setsockopt(int fd, int level, int name, const void* value, socklen_t len)
{
    Shim& shim = Shim::instance();
    const Route route = shim.route(fd, Wait::Never, Use::None);
    if (!route.conn && !route.setup) {
        const int r = real().setsockopt(fd, level, name, value, len);
        if (r == 0 && level == SOL_SOCKET && shim.mayRedirect(fd))
            bufferSize(fd, name);
        return r;
    }
    if (const int e = connectionOption(fd, route, level, name, value, len); e != 0)
        return fail(e);
    if (route.setup)
        return real().setsockopt(tcpOf(route), level, name, value, len);
    return route.conn->impl->onTcp(
        [&](int tcp) { return real().setsockopt(tcp, level, name, value, len); });
}

// Addresses are the TCP socket's.
int getsockname(int fd, sockaddr* addr, socklen_t* len)
{
    const Route route = Shim::instance().route(fd, Wait::Never, Use::None);
    if (route.setup)
        return real().getsockname(tcpOf(route), addr, len);
    if (!route.conn)
        return real().getsockname(fd, addr, len);
    return route.conn->impl->onTcp([&](int tcp) { return real().getsockname(tcp, addr, len); });
}

int getpeername(int fd, sockaddr* addr, socklen_t* len)
{
    const Route route = Shim::instance().route(fd, Wait::Never, Use::None);
    if (route.setup)
        return real().getpeername(tcpOf(route), addr, len);
    if (!route.conn)
        return real().getpeername(fd, addr, len);
    return route.conn->impl->onTcp([&](int tcp) { return real().getpeername(tcp, addr, len); });
}

int epoll_ctl(int epfd, int op, int fd, epoll_event* event)
{
    return Shim::instance().epollControl(epfd, op, fd, event);
}

} // extern "C"
