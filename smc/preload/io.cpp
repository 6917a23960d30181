// SPDX-License-Identifier: MIT
// The connection's side of the shim's reads and writes, with the socket calls' semantics.
#undef _FILE_OFFSET_BITS
#include "smc/preload/io.h"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/ioctl.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <vector>

#include "smc/preload/real.h"

namespace smc::preload
{

Route routed(int fd, int flags, Use use)
{
    return Shim::instance().route(fd, (flags & MSG_DONTWAIT) ? Wait::Never : Wait::IfBlocking, use);
}

namespace
{

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

} // namespace

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

namespace
{

std::size_t total(const iovec* iov, int count) noexcept
{
    std::size_t n = 0;
    for (int i = 0; i < count; ++i)
        n += iov[i].iov_len;
    return n;
}

} // namespace

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

bool isPipe(int fd) noexcept
{
    return real().fcntl(fd, F_GETPIPE_SZ) > 0;
}

namespace
{

constexpr std::size_t kSpliceChunk = 64 * 1024; // at most this much a call goes through us

bool pipeMayWait(int pipe, unsigned flags) noexcept
{
    return !(flags & SPLICE_F_NONBLOCK) && !(real().fcntl(pipe, F_GETFL) & O_NONBLOCK);
}

} // namespace

ssize_t splicedOut(const Conn& conn, int fd, int pipe, std::size_t len, unsigned flags)
{
    std::size_t room = 0;
    for (;;) {
        const int size = real().fcntl(pipe, F_GETPIPE_SZ);
        int used = 0;
        if (size < 0 || real().ioctl(pipe, FIONREAD, &used) != 0)
            return -1;
        if (size > used) {
            room = static_cast<std::size_t>(size - used);
            break;
        }
        if (!pipeMayWait(pipe, flags))
            return fail(EAGAIN);
        pollfd p{pipe, POLLOUT, 0};
        if (::poll(&p, 1, -1) < 0 && errno != EINTR)
            return -1;
    }
    std::vector<std::byte> buffer(std::min({len, room, kSpliceChunk}));
    const ssize_t n = received(conn, fd, buffer, 0);
    for (ssize_t put = 0; n > 0 && put < n;) { // the room was there: this waits only for a racer
        const ssize_t w =
            real().write(pipe, buffer.data() + put, static_cast<std::size_t>(n - put));
        if (w > 0) {
            put += w;
        } else if (w < 0 && errno == EAGAIN) {
            pollfd p{pipe, POLLOUT, 0};
            (void)::poll(&p, 1, -1);
        } else if (w < 0 && errno != EINTR) {
            return -1; // the pipe's reader is gone (EPIPE): what was read goes with it
        }
    }
    return n;
}

ssize_t splicedIn(const Conn& conn, int fd, int pipe, std::size_t len, unsigned flags)
{
    int scratch[2];
    if (::pipe2(scratch, O_CLOEXEC) != 0)
        return -1;
    const ssize_t copied =
        ::tee(pipe, scratch[1], std::min(len, kSpliceChunk), flags & SPLICE_F_NONBLOCK);
    std::vector<std::byte> buffer(copied > 0 ? static_cast<std::size_t>(copied) : 0);
    const bool readBack =
        copied > 0 && real().read(scratch[0], buffer.data(), buffer.size()) == copied;
    const int teeError = errno;
    real().close(scratch[0]);
    real().close(scratch[1]);
    if (copied <= 0) {
        errno = teeError;
        return copied; // 0: the pipe has no writer left and nothing in it
    }
    if (!readBack)
        return fail(EIO);
    const ssize_t n = sent(conn, fd, buffer, (flags & SPLICE_F_MORE) ? MSG_MORE : 0);
    if (n > 0) // out of the pipe, what the connection took: it is there, and we are its reader
        (void)real().read(pipe, buffer.data(), static_cast<std::size_t>(n));
    return n;
}

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

} // namespace smc::preload
