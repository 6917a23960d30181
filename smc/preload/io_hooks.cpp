// SPDX-License-Identifier: MIT
// The shim's reads and writes: on an SMC descriptor they are the connection's, with the socket
// calls' semantics (partial I/O, EAGAIN, EPIPE and SIGPIPE, MSG_DONTWAIT, MSG_MORE, MSG_WAITALL).
// Our definitions must keep libc's own symbol names: no redirection of sendfile to sendfile64
// (both are defined below, each under its own name).
#undef _FILE_OFFSET_BITS
#include <poll.h>
#include <signal.h>
#include <sys/sendfile.h>
#include <sys/socket.h>
#include <sys/uio.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <span>
#include <vector>

#include "smc/preload/real.h"
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

// What a call on `fd` with `flags` goes to: a handshake under way is waited for unless the
// number or the call (MSG_DONTWAIT) is non-blocking.
Route routed(int fd, int flags, Use use)
{
    return Shim::instance().route(fd, (flags & MSG_DONTWAIT) ? Wait::Never : Wait::IfBlocking, use);
}

// The errno of a read's or write's error: a wait past SO_RCVTIMEO or SO_SNDTIMEO (the only
// deadline a call has here) is EAGAIN, as Linux says it.
int errnoOfCall(std::error_code ec) noexcept
{
    return ec == std::errc::timed_out ? EAGAIN : smc::preload::errnoOf(ec);
}

// Whether a call that may not wait (non-blocking file, MSG_DONTWAIT) would: the ready
// descriptor says so without waiting.
bool wouldWait(const Conn& conn, int fd, int flags, short events) noexcept
{
    if (conn.nonBlocking || !(flags & MSG_DONTWAIT))
        return false; // the connection itself answers EAGAIN, or may wait
    pollfd p{fd, events, 0};
    return ::poll(&p, 1, 0) == 0;
}

// A connection the parent made, in a forked child: its cursors are the parent's (and the
// parent goes on using them), so the child may not move them.
bool inherited(const Conn& conn) noexcept
{
    return conn.generation != Shim::instance().generation();
}

ssize_t received(const Conn& conn, int fd, std::span<std::byte> into, int flags)
{
    if (inherited(conn))
        return fail(EOPNOTSUPP);
    if (flags & MSG_OOB)
        return fail(EOPNOTSUPP); // SMC has no urgent data
    if (wouldWait(conn, fd, flags, POLLIN))
        return fail(EAGAIN);
    if (flags & MSG_PEEK) {
        smc::Result<std::size_t> n = conn.impl->peek(into);
        return n ? static_cast<ssize_t>(*n) : fail(errnoOfCall(n.error()));
    }
    std::size_t done = 0;
    do {
        smc::Result<std::size_t> n = conn.impl->recv(into.subspan(done));
        if (!n) {
            if (done > 0)
                break;
            return fail(errnoOfCall(n.error()));
        }
        if (*n == 0)
            break; // end of stream
        done += *n;
    } while ((flags & MSG_WAITALL) && done < into.size() && !conn.nonBlocking);
    return static_cast<ssize_t>(done);
}

ssize_t sent(const Conn& conn, int fd, std::span<const std::byte> data, int flags)
{
    if (inherited(conn))
        return fail(EOPNOTSUPP);
    if (flags & MSG_OOB)
        return fail(EOPNOTSUPP);
    if (wouldWait(conn, fd, flags, POLLOUT))
        return fail(EAGAIN);
    // A blocking send takes everything, as TCP's does (the connection returns after each piece
    // that fits its peer's ring); a non-blocking one what fits now.
    const bool blocking = !conn.nonBlocking && !(flags & MSG_DONTWAIT);
    const smc::SendFlags more = (flags & MSG_MORE) ? smc::SendFlags::More : smc::SendFlags::None;
    std::size_t done = 0;
    smc::Result<std::size_t> n = std::size_t{0};
    do {
        n = conn.impl->send(data.subspan(done), more);
        if (n)
            done += *n;
    } while (n && blocking && done < data.size());
    if (done > 0 || data.empty())
        return static_cast<ssize_t>(done);
    const int e = errnoOfCall(n.error());
    if (e == EPIPE && !(flags & MSG_NOSIGNAL))
        (void)::raise(SIGPIPE); // as the kernel does for a stream socket
    return fail(e);
}

std::size_t total(const iovec* iov, int count) noexcept
{
    std::size_t n = 0;
    for (int i = 0; i < count; ++i)
        n += iov[i].iov_len;
    return n;
}

// Scatter: one receive into a buffer of the iovecs' size (at most 1 MiB), copied out.
ssize_t receivedv(const Conn& conn, int fd, const iovec* iov, int count, int flags)
{
    if (count < 0)
        return fail(EINVAL);
    if (count == 1)
        return received(conn, fd, {static_cast<std::byte*>(iov[0].iov_base), iov[0].iov_len},
                        flags);
    std::vector<std::byte> buffer(std::min<std::size_t>(total(iov, count), 1 << 20));
    const ssize_t n = received(conn, fd, buffer, flags);
    std::size_t at = 0;
    for (int i = 0; n > 0 && i < count && at < static_cast<std::size_t>(n); ++i) {
        const std::size_t piece = std::min(iov[i].iov_len, static_cast<std::size_t>(n) - at);
        std::memcpy(iov[i].iov_base, buffer.data() + at, piece);
        at += piece;
    }
    return n;
}

// Gather: the iovecs in order, each but the last sent with MSG_MORE (one announcement); a
// short send ends it, as a stream socket's partial write does (a full ring announces anyway).
ssize_t sentv(const Conn& conn, int fd, const iovec* iov, int count, int flags)
{
    if (count < 0)
        return fail(EINVAL);
    std::size_t done = 0;
    for (int i = 0; i < count; ++i) {
        if (iov[i].iov_len == 0)
            continue;
        const int more = i + 1 < count ? MSG_MORE : 0;
        const ssize_t n =
            sent(conn, fd, {static_cast<const std::byte*>(iov[i].iov_base), iov[i].iov_len},
                 flags | more | (done > 0 ? MSG_NOSIGNAL : 0));
        if (n < 0)
            return done > 0 ? static_cast<ssize_t>(done) : n;
        done += static_cast<std::size_t>(n);
        if (static_cast<std::size_t>(n) < iov[i].iov_len)
            break;
    }
    return static_cast<ssize_t>(done);
}

// sendfile(2) to an SMC connection: the file's bytes read and sent, 64 KiB at a time.
ssize_t sentFile(const Conn& conn, int out, int in, off_t* offset, std::size_t count)
{
    std::vector<std::byte> buffer(std::min<std::size_t>(count, 64 * 1024));
    std::size_t done = 0;
    off_t at = offset ? *offset : 0;
    while (done < count) {
        const std::size_t want = std::min(buffer.size(), count - done);
        const ssize_t got =
            offset ? ::pread(in, buffer.data(), want, at) : real().read(in, buffer.data(), want);
        if (got <= 0) {
            if (got < 0 && done == 0)
                return -1;
            break;
        }
        const ssize_t n = sent(conn, out, {buffer.data(), static_cast<std::size_t>(got)},
                               done > 0 ? MSG_NOSIGNAL : 0);
        const std::size_t took = n > 0 ? static_cast<std::size_t>(n) : 0;
        if (!offset && took < static_cast<std::size_t>(got)) // what was not sent is read again
            (void)::lseek(in, static_cast<off_t>(took) - got, SEEK_CUR);
        done += took;
        at += static_cast<off_t>(took);
        if (n < 0 && done == 0)
            return -1;
        if (took < static_cast<std::size_t>(got))
            break;
    }
    if (offset)
        *offset = at;
    return static_cast<ssize_t>(done);
}

// Numbers sent to another process (SCM_RIGHTS): their ready descriptors are held there too,
// from before the message leaves.
void passing(const msghdr* msg)
{
    if (msg == nullptr || msg->msg_control == nullptr || msg->msg_controllen == 0)
        return;
    const auto* end = static_cast<const std::byte*>(msg->msg_control) + msg->msg_controllen;
    for (cmsghdr* c = CMSG_FIRSTHDR(msg); c != nullptr;
         c = CMSG_NXTHDR(const_cast<msghdr*>(msg), c)) {
        // A header the kernel will refuse (EINVAL) is not read past: it sends nothing.
        if (c->cmsg_len < CMSG_LEN(0) ||
            c->cmsg_len > static_cast<std::size_t>(end - reinterpret_cast<const std::byte*>(c)))
            return;
        if (c->cmsg_level == SOL_SOCKET && c->cmsg_type == SCM_RIGHTS)
            for (std::size_t i = 0; i < (c->cmsg_len - CMSG_LEN(0)) / sizeof(int); ++i) {
                int sent = -1;
                std::memcpy(&sent, CMSG_DATA(c) + i * sizeof(int), sizeof sent);
                Shim::instance().markShared(sent);
            }
    }
}

} // namespace

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
