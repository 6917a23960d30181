// SPDX-License-Identifier: MIT
// TCP plumbing: resolve, connect, listen, and waiting for an fd with a deadline.
#include "smc/net/tcp.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <netdb.h>
#include <netinet/tcp.h>
#include <poll.h>

#include <cerrno>
#include <cstdio>
#include <cstring>

namespace smc::net
{

Deadline deadlineAfter(std::chrono::milliseconds timeout) noexcept
{
    return timeout.count() < 0 ? Deadline::max() : Clock::now() + timeout;
}

Result<short> waitFor(int fd, short events, Deadline deadline) noexcept
{
    for (;;) {
        int ms = -1;
        if (deadline != Deadline::max()) {
            const auto left = std::chrono::ceil<std::chrono::milliseconds>(deadline - Clock::now());
            if (left.count() <= 0)
                ms = 0;
            else
                ms = left.count() > 1 << 30 ? 1 << 30 : static_cast<int>(left.count());
        }
        pollfd p{fd, events, 0};
        const int n = ::poll(&p, 1, ms);
        if (n > 0)
            return p.revents;
        if (n < 0 && errno != EINTR)
            return lastError();
        if (n == 0 && ms == 0)
            return std::make_error_code(std::errc::timed_out);
    }
}

std::uint16_t SocketAddress::port() const noexcept
{
    if (family() == AF_INET)
        return ntohs(reinterpret_cast<const sockaddr_in*>(&storage)->sin_port);
    if (family() == AF_INET6)
        return ntohs(reinterpret_cast<const sockaddr_in6*>(&storage)->sin6_port);
    return 0;
}

std::string SocketAddress::toString() const
{
    char text[INET6_ADDRSTRLEN] = "?";
    const bool v4 = family() == AF_INET;
    if (v4)
        ::inet_ntop(AF_INET, &reinterpret_cast<const sockaddr_in*>(&storage)->sin_addr, text,
                    sizeof text);
    else if (family() == AF_INET6)
        ::inet_ntop(AF_INET6, &reinterpret_cast<const sockaddr_in6*>(&storage)->sin6_addr, text,
                    sizeof text);
    // snprintf, not string concatenation: gcc 12 -O3 warns (falsely) about the latter.
    char out[INET6_ADDRSTRLEN + 10];
    std::snprintf(out, sizeof out, v4 ? "%s:%u" : "[%s]:%u", text, unsigned{port()});
    return out;
}

Result<SocketAddress> resolve(std::string_view host, std::uint16_t port, bool passive)
{
    addrinfo hints{};
    hints.ai_socktype = SOCK_STREAM;
    hints.ai_flags = AI_NUMERICSERV | (passive ? AI_PASSIVE : 0);
    const std::string name(host);
    const std::string service = std::to_string(port);
    addrinfo* list = nullptr;
    if (::getaddrinfo(name.empty() ? nullptr : name.c_str(), service.c_str(), &hints, &list) != 0 ||
        list == nullptr)
        return std::make_error_code(std::errc::address_not_available);
    SocketAddress a;
    std::memcpy(&a.storage, list->ai_addr, list->ai_addrlen);
    a.length = list->ai_addrlen;
    ::freeaddrinfo(list);
    return a;
}

namespace
{

Result<UniqueFd> tcpSocket(int family)
{
    UniqueFd fd(::socket(family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, IPPROTO_TCP));
    if (!fd)
        return lastError();
    return fd;
}

} // namespace

Result<UniqueFd> connectTcp(const SocketAddress& to, Deadline deadline, const SocketMarker* marker)
{
    Result<UniqueFd> fd = tcpSocket(to.family());
    if (!fd)
        return fd.error();
    const int one = 1;
    ::setsockopt(fd->get(), IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
    // The SYN goes out within connect(2): the mark is needed only that long.
    const bool marked = marker != nullptr && marker->mark(fd->get());
    const int rc = ::connect(fd->get(), reinterpret_cast<const sockaddr*>(&to.storage), to.length);
    const int error = errno;
    if (marked)
        marker->unmark(fd->get());
    if (rc != 0) {
        if (error != EINPROGRESS)
            return errnoCode(error);
        Result<short> ready = waitFor(fd->get(), POLLOUT, deadline);
        if (!ready)
            return ready.error();
        int failed = 0;
        socklen_t length = sizeof failed;
        ::getsockopt(fd->get(), SOL_SOCKET, SO_ERROR, &failed, &length);
        if (failed != 0)
            return errnoCode(failed);
    }
    return fd;
}

Result<UniqueFd> listenTcp(const SocketAddress& at, int backlog, const SocketMarker* marker)
{
    Result<UniqueFd> fd = tcpSocket(at.family());
    if (!fd)
        return fd.error();
    const int one = 1;
    ::setsockopt(fd->get(), SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
    if (::bind(fd->get(), reinterpret_cast<const sockaddr*>(&at.storage), at.length) != 0)
        return lastError();
    // listen(2) sets the listener up for its SYN-ACKs; its sockets inherit that.
    const bool marked = marker != nullptr && marker->mark(fd->get());
    const int rc = ::listen(fd->get(), backlog);
    const int error = errno;
    if (marked)
        marker->unmark(fd->get());
    if (rc != 0)
        return errnoCode(error);
    return fd;
}

Result<SocketAddress> localAddress(int fd)
{
    SocketAddress a;
    a.length = sizeof a.storage;
    if (::getsockname(fd, reinterpret_cast<sockaddr*>(&a.storage), &a.length) != 0)
        return lastError();
    return a;
}

Result<SocketAddress> peerAddress(int fd)
{
    SocketAddress a;
    a.length = sizeof a.storage;
    if (::getpeername(fd, reinterpret_cast<sockaddr*>(&a.storage), &a.length) != 0)
        return lastError();
    return a;
}

Result<void> setTcpOption(int fd, int option, bool on)
{
    const int value = on ? 1 : 0;
    if (::setsockopt(fd, IPPROTO_TCP, option, &value, sizeof value) != 0)
        return lastError();
    return {};
}

} // namespace smc::net
