// SPDX-License-Identifier: MIT
// TcpPath: send and recv on the kernel's TCP socket, the declined PROPOSAL skipped first.
#include "smc/conn/tcp_path.h"

#include <netinet/tcp.h>
#include <poll.h>
#include <sys/ioctl.h>
#include <sys/socket.h>

#include "base/sys_error.h"
#include "smc/net/clc_io.h"

namespace smc::net
{

TcpPath::TcpPath(int fd, bool skipPeerClc) noexcept
    : fd_(fd), clcLeft_(skipPeerClc ? kClcSizeUnknown : 0)
{
}

Result<void> TcpPath::await(short events, Deadline deadline, bool nonBlocking) const
{
    if (nonBlocking)
        return std::make_error_code(std::errc::resource_unavailable_try_again);
    if (Result<short> r = waitFor(fd_, events, deadline); !r)
        return r.error();
    return {};
}

// `io` (a send or recv that does not wait) until it moves bytes or fails; EAGAIN waits for
// `events`.
template <typename Io>
Result<std::size_t> TcpPath::transfer(Io io, short events, Deadline deadline,
                                      bool nonBlocking) const
{
    for (;;) {
        const ssize_t n = io();
        if (n >= 0)
            return static_cast<std::size_t>(n);
        if (errno != EAGAIN && errno != EINTR)
            return lastError();
        if (Result<void> r = await(events, deadline, nonBlocking); !r)
            return r.error();
    }
}

Result<std::size_t> TcpPath::send(std::span<const std::byte> data, Deadline deadline,
                                  bool nonBlocking, bool hold)
{
    const int flags = MSG_NOSIGNAL | MSG_DONTWAIT | (hold ? MSG_MORE : 0);
    return transfer([&] { return ::send(fd_, data.data(), data.size(), flags); }, POLLOUT, deadline,
                    nonBlocking);
}

Result<std::size_t> TcpPath::recv(std::span<std::byte> into, Deadline deadline, bool nonBlocking)
{
    return receive(into, deadline, nonBlocking, 0);
}

Result<std::size_t> TcpPath::peek(std::span<std::byte> into, Deadline deadline, bool nonBlocking)
{
    return receive(into, deadline, nonBlocking, MSG_PEEK);
}

Result<std::size_t> TcpPath::receive(std::span<std::byte> into, Deadline deadline, bool nonBlocking,
                                     int flags)
{
    while (clcLeft_ > 0) { // the PROPOSAL we declined unread is not the application's
        Result<bool> gone = skipClc(fd_, clcLeft_);
        if (!gone)
            return gone.error();
        if (*gone)
            clcLeft_ = 0;
        else if (Result<void> r = await(POLLIN, deadline, nonBlocking); !r)
            return r.error();
    }
    return transfer([&] { return ::recv(fd_, into.data(), into.size(), MSG_DONTWAIT | flags); },
                    POLLIN, deadline, nonBlocking);
}

Result<RecvView> TcpPath::recvView(std::span<std::byte> copy, std::size_t /*threshold*/,
                                   Deadline deadline, bool nonBlocking)
{
    return copiedView(copy,
                      [&](std::span<std::byte> into) { return recv(into, deadline, nonBlocking); });
}

Result<void> TcpPath::releaseView()
{
    return std::make_error_code(std::errc::invalid_argument);
}

Result<void> TcpPath::shutdown(bool read, bool write)
{
    const int how = read && write ? SHUT_RDWR : read ? SHUT_RD : SHUT_WR;
    if (::shutdown(fd_, how) != 0)
        return lastError();
    return {};
}

Result<void> TcpPath::setCork(bool on)
{
    return setTcpOption(fd_, TCP_CORK, on);
}

Result<void> TcpPath::setNoDelay(bool on)
{
    return setTcpOption(fd_, TCP_NODELAY, on);
}

bool TcpPath::readable() const
{
    pollfd p{fd_, POLLIN, 0};
    return ::poll(&p, 1, 0) == 1;
}

std::size_t TcpPath::unread() const
{
    int n = 0;
    return ::ioctl(fd_, FIONREAD, &n) == 0 && n > 0 ? static_cast<std::size_t>(n) : 0;
}

bool TcpPath::writable() const
{
    pollfd p{fd_, POLLOUT, 0};
    return ::poll(&p, 1, 0) == 1;
}

// A reset (a FIN alone may be a half close: the peer may still read).
bool TcpPath::abandoned() const
{
    pollfd p{fd_, 0, 0};
    return ::poll(&p, 1, 0) == 1 && (p.revents & (POLLERR | POLLHUP)) != 0;
}

void TcpPath::fillInfo(ConnectionInfo& info) const
{
    info.transport = Transport::Tcp;
    info.state = closed_ ? "CLOSED" : "ACTIVE";
}

} // namespace smc::net
