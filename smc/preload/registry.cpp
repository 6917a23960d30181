// SPDX-License-Identifier: MIT
// Registry: announcing and looking up abstract Unix socket names.
#include "smc/preload/registry.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/un.h>

#include <cstdio>
#include <cstring>
#include <string>

#include "base/sys_error.h"
#include "smc/preload/real.h"

namespace smc::preload
{

namespace
{
// The address as the names spell it: v4-mapped IPv6 as IPv4, "*" for every address.
std::string spell(const sockaddr* addr) noexcept
{
    char text[INET6_ADDRSTRLEN] = "?";
    if (addr->sa_family == AF_INET) {
        const auto* in = reinterpret_cast<const sockaddr_in*>(addr);
        if (in->sin_addr.s_addr == htonl(INADDR_ANY))
            return "*";
        ::inet_ntop(AF_INET, &in->sin_addr, text, sizeof text);
    } else if (addr->sa_family == AF_INET6) {
        const auto* in6 = reinterpret_cast<const sockaddr_in6*>(addr);
        if (IN6_IS_ADDR_UNSPECIFIED(&in6->sin6_addr))
            return "*";
        if (IN6_IS_ADDR_V4MAPPED(&in6->sin6_addr))
            ::inet_ntop(AF_INET, &in6->sin6_addr.s6_addr[12], text, sizeof text);
        else
            ::inet_ntop(AF_INET6, &in6->sin6_addr, text, sizeof text);
    }
    return text;
}

// An abstract name: a leading NUL, no trailing one.
socklen_t abstractName(sockaddr_un& un, const std::string& name) noexcept
{
    std::memset(&un, 0, sizeof un);
    un.sun_family = AF_UNIX;
    const std::size_t n = std::min(name.size(), sizeof un.sun_path - 1);
    std::memcpy(un.sun_path + 1, name.data(), n);
    return static_cast<socklen_t>(offsetof(sockaddr_un, sun_path) + 1 + n);
}

Result<UniqueFd> announce(const std::string& name)
{
    UniqueFd fd(::socket(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC, 0));
    if (!fd)
        return lastError();
    sockaddr_un un;
    const socklen_t len = abstractName(un, name);
    if (::bind(fd.get(), reinterpret_cast<const sockaddr*>(&un), len) != 0)
        return lastError();
    return fd;
}

bool announced(const std::string& name) noexcept
{
    // One probe socket per thread, connected anew for each name.
    thread_local UniqueFd probe(::socket(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC, 0));
    if (!probe)
        return false;
    sockaddr_un un;
    const socklen_t len = abstractName(un, name);
    return real().connect(probe.get(), reinterpret_cast<const sockaddr*>(&un), len) == 0;
}

std::string listenerName(const std::string& address, std::uint16_t port)
{
    return "smc-core/l/" + address + ":" + std::to_string(port);
}
} // namespace

bool isLoopback(const sockaddr* addr, socklen_t len) noexcept
{
    if (addr->sa_family == AF_INET && len >= sizeof(sockaddr_in)) {
        const auto* in = reinterpret_cast<const sockaddr_in*>(addr);
        return (ntohl(in->sin_addr.s_addr) >> 24) == 127;
    }
    if (addr->sa_family == AF_INET6 && len >= sizeof(sockaddr_in6)) {
        const auto* in6 = reinterpret_cast<const sockaddr_in6*>(addr);
        return IN6_IS_ADDR_LOOPBACK(&in6->sin6_addr) ||
               (IN6_IS_ADDR_V4MAPPED(&in6->sin6_addr) && in6->sin6_addr.s6_addr[12] == 127);
    }
    return false;
}

bool localPeer(int fd) noexcept
{
    sockaddr_storage mine{}, peer{};
    socklen_t mineLen = sizeof mine, peerLen = sizeof peer;
    if (real().getpeername(fd, reinterpret_cast<sockaddr*>(&peer), &peerLen) != 0)
        return false;
    if (isLoopback(reinterpret_cast<const sockaddr*>(&peer), peerLen))
        return true; // our own address is not needed
    if (real().getsockname(fd, reinterpret_cast<sockaddr*>(&mine), &mineLen) != 0 ||
        mine.ss_family != peer.ss_family)
        return false;
    if (peer.ss_family == AF_INET)
        return reinterpret_cast<const sockaddr_in&>(mine).sin_addr.s_addr ==
               reinterpret_cast<const sockaddr_in&>(peer).sin_addr.s_addr;
    return peer.ss_family == AF_INET6 &&
           IN6_ARE_ADDR_EQUAL(&reinterpret_cast<const sockaddr_in6&>(mine).sin6_addr,
                              &reinterpret_cast<const sockaddr_in6&>(peer).sin6_addr);
}

std::uint16_t portOf(const sockaddr* addr) noexcept
{
    if (addr->sa_family == AF_INET)
        return ntohs(reinterpret_cast<const sockaddr_in*>(addr)->sin_port);
    if (addr->sa_family == AF_INET6)
        return ntohs(reinterpret_cast<const sockaddr_in6*>(addr)->sin6_port);
    return 0;
}

Result<UniqueFd> announceListener(const sockaddr* bound, socklen_t /*len*/)
{
    return announce(listenerName(spell(bound), portOf(bound)));
}

bool listenerAnnounced(const sockaddr* to, socklen_t /*len*/) noexcept
{
    const std::uint16_t port = portOf(to);
    return announced(listenerName(spell(to), port)) || announced(listenerName("*", port));
}

Result<UniqueFd> announceClient(std::uint16_t port)
{
    return announce("smc-core/c/" + std::to_string(port));
}

bool fromAnnouncedClient(int fd, const sockaddr* peer, socklen_t len) noexcept
{
    return clientAnnounced(portOf(peer)) && (isLoopback(peer, len) || localPeer(fd));
}

bool clientAnnounced(std::uint16_t port) noexcept
{
    return announced("smc-core/c/" + std::to_string(port));
}

} // namespace smc::preload
