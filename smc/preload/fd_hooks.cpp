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
#include <unistd.h>

#include <cerrno>
#include <cstdarg>

#include "smc/preload/real.h"
#include "smc/preload/shim.h"

using smc::preload::Conn;
using smc::preload::fail;
using smc::preload::real;
using smc::preload::Shim;

namespace
{

// `to` is a new number of `from`'s connection (after dup, dup2, dup3, F_DUPFD).
int alias(int from, int to)
{
    Shim& shim = Shim::instance();
    if (to < 0 || to == from)
        return to;
    std::shared_ptr<Conn> conn = shim.find(from);
    if (!conn)
        return to;
    if (to >= Shim::kMaxFd) { // beyond the table: the number would read the ready socket
        real().close(to);
        return fail(EMFILE);
    }
    conn->numbers.fetch_add(1);
    shim.add(to, std::move(conn));
    return to;
}

int control(int (*call)(int, int, ...), int fd, int cmd, void* arg)
{
    const int r = call(fd, cmd, arg);
    if (r < 0)
        return r;
    switch (cmd) {
    case F_DUPFD:
    case F_DUPFD_CLOEXEC:
        return alias(fd, r);
    case F_SETFL:
        if (std::shared_ptr<Conn> conn = Shim::instance().find(fd)) {
            const bool on = (reinterpret_cast<std::intptr_t>(arg) & O_NONBLOCK) != 0;
            conn->nonBlocking = on;
            conn->impl->setNonBlocking(on);
        }
        return r;
    default:
        return r;
    }
}

} // namespace

extern "C" {

int dup(int fd)
{
    return alias(fd, real().dup(fd));
}

// The kernel closes what `to` was only when the call succeeds; so does the table.
int dup2(int from, int to)
{
    const int r = real().dup2(from, to);
    if (r >= 0 && from != to)
        Shim::instance().forget(to); // the kernel closed what `to` was
    return alias(from, r);
}

int dup3(int from, int to, int flags)
{
    const int r = real().dup3(from, to, flags);
    if (r >= 0)
        Shim::instance().forget(to);
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

int ioctl(int fd, unsigned long request, ...)
{
    va_list args;
    va_start(args, request);
    void* arg = va_arg(args, void*);
    va_end(args);
    std::shared_ptr<Conn> conn = Shim::instance().find(fd);
    if (conn && request == FIONREAD) // what the connection holds, not the ready socket's byte
        return fail(EOPNOTSUPP);
    const int r = real().ioctl(fd, request, arg);
    if (r == 0 && conn && request == FIONBIO && arg) {
        const bool on = *static_cast<const int*>(arg) != 0;
        conn->nonBlocking = on;
        conn->impl->setNonBlocking(on);
    }
    return r;
}

int getsockopt(int fd, int level, int name, void* value, socklen_t* len)
{
    std::shared_ptr<Conn> conn = Shim::instance().find(fd);
    if (!conn)
        return real().getsockopt(fd, level, name, value, len);
    if (level == SOL_SOCKET && name == SO_ERROR && value && len && *len >= sizeof(int)) {
        *static_cast<int*>(value) = 0; // the connection's errors come with its calls
        *len = sizeof(int);
        return 0;
    }
    return conn->impl->onTcp(
        [&](int tcp) { return real().getsockopt(tcp, level, name, value, len); });
}

int setsockopt(int fd, int level, int name, const void* value, socklen_t len)
{
    std::shared_ptr<Conn> conn = Shim::instance().find(fd);
    if (!conn)
        return real().setsockopt(fd, level, name, value, len);
    if (level == IPPROTO_TCP && (name == TCP_NODELAY || name == TCP_CORK) && value &&
        len >= sizeof(int)) {
        const bool on = *static_cast<const int*>(value) != 0;
        smc::Result<void> r =
            name == TCP_NODELAY ? conn->impl->setNoDelay(on) : conn->impl->setCork(on);
        if (!r)
            return fail(smc::preload::errnoOf(r.error()));
    }
    return conn->impl->onTcp(
        [&](int tcp) { return real().setsockopt(tcp, level, name, value, len); });
}

int getsockname(int fd, sockaddr* addr, socklen_t* len)
{
    std::shared_ptr<Conn> conn = Shim::instance().find(fd);
    if (!conn)
        return real().getsockname(fd, addr, len);
    return conn->impl->onTcp([&](int tcp) { return real().getsockname(tcp, addr, len); });
}

int getpeername(int fd, sockaddr* addr, socklen_t* len)
{
    std::shared_ptr<Conn> conn = Shim::instance().find(fd);
    if (!conn)
        return real().getpeername(fd, addr, len);
    return conn->impl->onTcp([&](int tcp) { return real().getpeername(tcp, addr, len); });
}

} // extern "C"
