// SPDX-License-Identifier: MIT
// The shim's reads and writes: on an SMC descriptor they are the connection's (io.h), else
// libc's.
// Our definitions must keep libc's own symbol names: no redirection of sendfile to sendfile64
// (both are defined below, each under its own name).
#undef _FILE_OFFSET_BITS
#include <fcntl.h>
#include <sys/sendfile.h>
#include <sys/socket.h>
#include <sys/uio.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstdlib>

#include "smc/preload/io.h"
#include "smc/preload/real.h"
#include "smc/preload/shim.h"

using smc::preload::fail;
using smc::preload::isPipe;
using smc::preload::passing;
using smc::preload::real;
using smc::preload::received;
using smc::preload::receivedv;
using smc::preload::Route;
using smc::preload::routed;
using smc::preload::sent;
using smc::preload::sentFile;
using smc::preload::sentv;
using smc::preload::splicedIn;
using smc::preload::splicedOut;
using smc::preload::Use;

extern "C" {

ssize_t read(int fd, void* buf, size_t count)
{
    const Route r = routed(fd, 0, Use::Read);
    if (r.error)
        return fail(r.error);
    if (r.conn)
        return received(*r.conn, fd, {static_cast<std::byte*>(buf), count}, 0);
    return real().read(fd, buf, count);
}

ssize_t __read_chk(int fd, void* buf, size_t count, size_t size)
{
    if (count > size)
        std::abort(); // glibc's __chk_fail: the buffer is smaller than the read
    return read(fd, buf, count);
}

ssize_t write(int fd, const void* buf, size_t count)
{
    const Route r = routed(fd, 0, Use::Any);
    if (r.error)
        return fail(r.error);
    if (r.conn)
        return sent(*r.conn, fd, {static_cast<const std::byte*>(buf), count}, 0);
    return real().write(fd, buf, count);
}

ssize_t readv(int fd, const iovec* iov, int count)
{
    const Route r = routed(fd, 0, Use::Read);
    if (r.error)
        return fail(r.error);
    if (r.conn)
        return receivedv(*r.conn, fd, iov, count, 0);
    return real().readv(fd, iov, count);
}

ssize_t writev(int fd, const iovec* iov, int count)
{
    const Route r = routed(fd, 0, Use::Any);
    if (r.error)
        return fail(r.error);
    if (r.conn)
        return sentv(*r.conn, fd, iov, count, 0);
    return real().writev(fd, iov, count);
}

ssize_t recv(int fd, void* buf, size_t len, int flags)
{
    const Route r = routed(fd, flags, Use::Read);
    if (r.error)
        return fail(r.error);
    if (r.conn)
        return received(*r.conn, fd, {static_cast<std::byte*>(buf), len}, flags);
    return real().recv(fd, buf, len, flags);
}

ssize_t __recv_chk(int fd, void* buf, size_t len, size_t size, int flags)
{
    if (len > size)
        std::abort();
    return recv(fd, buf, len, flags);
}

ssize_t send(int fd, const void* buf, size_t len, int flags)
{
    const Route r = routed(fd, flags, Use::Any);
    if (r.error)
        return fail(r.error);
    if (r.conn)
        return sent(*r.conn, fd, {static_cast<const std::byte*>(buf), len}, flags);
    return real().send(fd, buf, len, flags);
}

ssize_t recvfrom(int fd, void* buf, size_t len, int flags, sockaddr* from, socklen_t* fromLen)
{
    const Route r = routed(fd, flags, Use::Read);
    if (r.error)
        return fail(r.error);
    if (!r.conn)
        return real().recvfrom(fd, buf, len, flags, from, fromLen);
    if (from && fromLen)
        *fromLen = 0; // a connected stream socket names no sender
    return received(*r.conn, fd, {static_cast<std::byte*>(buf), len}, flags);
}

ssize_t __recvfrom_chk(int fd, void* buf, size_t len, size_t size, int flags, sockaddr* from,
                       socklen_t* fromLen)
{
    if (len > size)
        std::abort();
    return recvfrom(fd, buf, len, flags, from, fromLen);
}

ssize_t sendto(int fd, const void* buf, size_t len, int flags, const sockaddr* to, socklen_t toLen)
{
    const Route r = routed(fd, flags, Use::Any);
    if (r.error)
        return fail(r.error);
    if (!r.conn)
        return real().sendto(fd, buf, len, flags, to, toLen);
    // A connected stream socket ignores the address, as Linux's TCP does.
    return sent(*r.conn, fd, {static_cast<const std::byte*>(buf), len}, flags);
}

ssize_t recvmsg(int fd, msghdr* msg, int flags)
{
    const Route r = routed(fd, flags, Use::Read);
    if (r.error)
        return fail(r.error);
    if (!r.conn)
        return real().recvmsg(fd, msg, flags);
    msg->msg_namelen = 0;
    msg->msg_controllen = 0;
    msg->msg_flags = 0;
    return receivedv(*r.conn, fd, msg->msg_iov, static_cast<int>(msg->msg_iovlen), flags);
}

ssize_t sendmsg(int fd, const msghdr* msg, int flags)
{
    const Route r = routed(fd, flags, Use::Any);
    if (r.error)
        return fail(r.error);
    if (!r.conn) {
        passing(msg);
        return real().sendmsg(fd, msg, flags);
    }
    return sentv(*r.conn, fd, msg->msg_iov, static_cast<int>(msg->msg_iovlen), flags);
}

// As sendmsg for each message, the way Linux's stream sockets take them: an error after the
// first message ends the call with the count sent so far.
int sendmmsg(int fd, mmsghdr* msgs, unsigned count, int flags)
{
    const Route r = routed(fd, flags, Use::Any);
    if (r.error)
        return fail(r.error);
    if (!r.conn) {
        for (unsigned i = 0; msgs != nullptr && i < count; ++i)
            passing(&msgs[i].msg_hdr);
        return real().sendmmsg(fd, msgs, count, flags);
    }
    if (msgs == nullptr && count > 0)
        return fail(EFAULT);
    count = std::min(count, unsigned{UIO_MAXIOV}); // the kernel's cap
    for (unsigned i = 0; i < count; ++i) {
        const msghdr& m = msgs[i].msg_hdr;
        const ssize_t n = sentv(*r.conn, fd, m.msg_iov, static_cast<int>(m.msg_iovlen), flags);
        if (n < 0)
            return i > 0 ? static_cast<int>(i) : -1;
        msgs[i].msg_len = static_cast<unsigned>(n);
    }
    return static_cast<int>(count);
}

// As recvmsg for each message, the way Linux's stream sockets fill them: MSG_WAITFORONE makes
// every message after the first one not wait; the timeout is looked at after each message (as
// the kernel does); an error after the first message ends the call with the count so far.
int recvmmsg(int fd, mmsghdr* msgs, unsigned count, int flags, timespec* timeout)
{
    const Route r = routed(fd, flags, Use::Read);
    if (r.error)
        return fail(r.error);
    if (!r.conn)
        return real().recvmmsg(fd, msgs, count, flags, timeout);
    if (msgs == nullptr && count > 0)
        return fail(EFAULT);
    if (timeout &&
        (timeout->tv_sec < 0 || timeout->tv_nsec < 0 || timeout->tv_nsec >= 1'000'000'000))
        return fail(EINVAL);
    const auto deadline =
        std::chrono::steady_clock::now() + (timeout ? std::chrono::seconds(timeout->tv_sec) +
                                                          std::chrono::nanoseconds(timeout->tv_nsec)
                                                    : std::chrono::nanoseconds(0));
    count = std::min(count, unsigned{UIO_MAXIOV}); // the kernel's cap
    for (unsigned i = 0; i < count; ++i) {
        msghdr& m = msgs[i].msg_hdr;
        const int wait = (i > 0 && (flags & MSG_WAITFORONE)) ? MSG_DONTWAIT : 0;
        m.msg_namelen = 0;
        m.msg_controllen = 0;
        m.msg_flags = 0;
        const ssize_t n = receivedv(*r.conn, fd, m.msg_iov, static_cast<int>(m.msg_iovlen),
                                    (flags & ~MSG_WAITFORONE) | wait);
        if (n < 0)
            return i > 0 ? static_cast<int>(i) : -1;
        msgs[i].msg_len = static_cast<unsigned>(n);
        if (n == 0 || (timeout && std::chrono::steady_clock::now() >= deadline))
            return static_cast<int>(i + 1); // the end of the stream, or time is up
    }
    return static_cast<int>(count);
}

ssize_t splice(int in, off64_t* inOffset, int out, off64_t* outOffset, size_t len, unsigned flags)
{
    const Route from = routed(in, 0, Use::Read);
    if (from.error)
        return fail(from.error);
    const Route to = from.conn ? Route{} : routed(out, 0, Use::Any);
    if (to.error)
        return fail(to.error);
    if (!from.conn && !to.conn)
        return real().splice(in, inOffset, out, outOffset, len, flags);
    if (!isPipe(from.conn ? out : in))
        return fail(EINVAL);
    if (inOffset != nullptr || outOffset != nullptr)
        return fail(ESPIPE); // neither a socket nor a pipe has a position
    if (len == 0)
        return 0;
    return from.conn ? splicedOut(*from.conn, in, out, len, flags)
                     : splicedIn(*to.conn, out, in, len, flags);
}

ssize_t sendfile(int out, int in, off_t* offset, size_t count)
{
    const Route r = routed(out, 0, Use::Any);
    if (r.error)
        return fail(r.error);
    if (r.conn)
        return sentFile(*r.conn, out, in, offset, count);
    return real().sendfile(out, in, offset, count);
}

ssize_t sendfile64(int out, int in, off64_t* offset, size_t count)
{
    return sendfile(out, in, reinterpret_cast<off_t*>(offset), count);
}

} // extern "C"
