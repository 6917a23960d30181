// SPDX-License-Identifier: MIT
// TCP plumbing for the socket layer: resolve, connect and listen with deadlines, wait for an fd.
#pragma once

#include <netinet/in.h>
#include <sys/socket.h>

#include <chrono>
#include <cstdint>
#include <string>
#include <string_view>

#include "base/result.h"
#include "base/sys_error.h"
#include "base/unique_fd.h"
#include "smc/net/socket_marker.h"

namespace smc::net
{

using Clock = std::chrono::steady_clock;
using Deadline = Clock::time_point;

// A deadline `timeout` from now; a negative timeout waits forever.
Deadline deadlineAfter(std::chrono::milliseconds timeout) noexcept;

// Waits until `fd` shows one of `events` (POLLIN, POLLOUT; POLLERR and POLLHUP always
// count) or the deadline passes. Returns the revents. Errors: timed_out, or poll's errno.
// Retries on EINTR. Blocks until the deadline.
Result<short> waitFor(int fd, short events, Deadline deadline) noexcept;

// An IPv4 or IPv6 address and port.
struct SocketAddress {
    sockaddr_storage storage{};
    socklen_t length = 0;
    int family() const noexcept { return storage.ss_family; }
    std::uint16_t port() const noexcept;
    std::string toString() const; // "10.0.0.1:80", "[::1]:80"
};

// Numeric or named host ("" = any address for listen, loopback for connect). Errors:
// invalid_argument (bad port), address_not_available (the name did not resolve). Blocks for
// the resolver (names only).
Result<SocketAddress> resolve(std::string_view host, std::uint16_t port, bool passive);

// A non-blocking TCP socket connected to `to` (TCP_NODELAY on), marked by `marker` for its
// SYN (if marking fails, it goes without). Errors: connection_refused, timed_out,
// network_unreachable and the other errnos connect(2) gives. Blocks up to the deadline.
Result<UniqueFd> connectTcp(const SocketAddress& to, Deadline deadline,
                            const SocketMarker* marker = nullptr);
// A non-blocking listening TCP socket (SO_REUSEADDR), marked by `marker` for its SYN-ACKs.
// Errors: address_in_use and bind(2)'s and listen(2)'s other errnos. Does not block.
Result<UniqueFd> listenTcp(const SocketAddress& at, int backlog,
                           const SocketMarker* marker = nullptr);
// The address a socket is bound to (getsockname) or connected to (getpeername).
Result<SocketAddress> localAddress(int fd);
Result<SocketAddress> peerAddress(int fd);
// An IPPROTO_TCP option on or off (TCP_CORK, TCP_NODELAY). Errors: setsockopt(2)'s.
Result<void> setTcpOption(int fd, int option, bool on);

} // namespace smc::net
