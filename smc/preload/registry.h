// SPDX-License-Identifier: MIT
// Registry: which local listeners and clients run smc-core, told by abstract Unix socket names.
#pragma once

#include <sys/socket.h>

#include <cstdint>

#include "base/result.h"
#include "base/unique_fd.h"

namespace smc::preload
{

// SMC-D needs smc-core at both ends, and TCP cannot say so without SMC's TCP option (which
// needs BPF, and so root). On one host a name says it instead: a listener under smc-run holds
// "smc-core/l/ADDRESS:PORT" (ADDRESS "*" when bound to every address), a client
// "smc-core/c/PORT" from before its connect until its handshake is over. Each is an abstract
// Unix datagram socket: it lives exactly as long as its holder's descriptor (a process that dies
// leaves nothing behind), and looking one up is one connect(2). Names are per network namespace,
// as TCP ports are.

// An IPv4 or IPv6 loopback address (v4-mapped included).
bool isLoopback(const sockaddr* addr, socklen_t len) noexcept;
// Whether connected TCP socket `fd`'s peer is on this host: a loopback address, or our own
// address (a connection between two addresses of one host is not told apart from a remote one
// and stays TCP). Names alone do not say it: a remote client may have a local client's port,
// and a wildcard listener's name matches any address.
bool localPeer(int fd) noexcept;
// The port of an IPv4 or IPv6 address (0 for another family).
std::uint16_t portOf(const sockaddr* addr) noexcept;

// The announcement of a listener bound to `bound`. Errors: socket(2)'s, bind(2)'s
// (address_in_use: another listener of the same address and port announced it already).
Result<UniqueFd> announceListener(const sockaddr* bound, socklen_t len);
// Whether a listener that runs smc-core serves `to` (its address, or every address).
bool listenerAnnounced(const sockaddr* to, socklen_t len) noexcept;
// The announcement of a client whose TCP socket has local port `port`. Errors: as above.
Result<UniqueFd> announceClient(std::uint16_t port);
bool clientAnnounced(std::uint16_t port) noexcept;
// Whether connected TCP socket `fd`, whose peer is `peer`, is a connection a client of this
// host that runs smc-core is making (announced, in its handshake): what accept4 takes for SMC.
// The client's announcement decides (it proposes only to a listener it found named), not
// whether this process announced a listener: another process may hold the listener's name. A
// loopback peer is local as the address says; another address asks the socket (ours, or
// remote).
bool fromAnnouncedClient(int fd, const sockaddr* peer, socklen_t len) noexcept;

} // namespace smc::preload
