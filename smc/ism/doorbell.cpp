// SPDX-License-Identifier: MIT
// Doorbells: socketpair(AF_UNIX, SOCK_DGRAM), one byte per ring, never a blocking call.
#include "smc/ism/doorbell.h"

#include <sys/socket.h>

#include <array>
#include <cerrno>

#include "base/sys_error.h"
#include "smc/ism/fd_passing.h"

namespace smc::doorbell
{

Result<Pair> make() noexcept
{
    int fds[2];
    if (::socketpair(AF_UNIX, SOCK_DGRAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0, fds) != 0)
        return lastError();
    return Pair{UniqueFd(fds[0]), UniqueFd(fds[1])};
}

void ring(int button) noexcept
{
    const char one = 1;
    (void)!::send(button, &one, sizeof one, MSG_DONTWAIT | MSG_NOSIGNAL);
}

std::uint64_t drain(int ear) noexcept
{
    // A batch per call (usually one ring, and no second call to hear EAGAIN).
    constexpr unsigned kBatch = 32;
    static_assert(kMaxDrain % kBatch == 0);
    std::array<char, kBatch> bytes;
    std::array<iovec, kBatch> iov;
    std::array<mmsghdr, kBatch> msgs{};
    for (unsigned i = 0; i < kBatch; ++i) {
        iov[i] = {&bytes[i], 1};
        msgs[i].msg_hdr.msg_iov = &iov[i];
        msgs[i].msg_hdr.msg_iovlen = 1;
    }
    std::uint64_t rings = 0;
    while (rings < kMaxDrain) {
        const int n = ::recvmmsg(ear, msgs.data(), kBatch, MSG_DONTWAIT | MSG_TRUNC, nullptr);
        if (n <= 0)
            break;
        rings += static_cast<unsigned>(n);
        if (static_cast<unsigned>(n) < kBatch)
            break;
    }
    return rings;
}

namespace
{

// The one descriptor of an offer waiting at `button`, or an empty one (none, or not one).
UniqueFd receiveOffer(int button, bool& any) noexcept
{
    char byte;
    iovec iov{&byte, 1};
    alignas(cmsghdr) std::array<char, CMSG_SPACE(4 * sizeof(int))> control{};
    msghdr msg{};
    msg.msg_iov = &iov;
    msg.msg_iovlen = 1;
    msg.msg_control = control.data();
    msg.msg_controllen = control.size();
    any = ::recvmsg(button, &msg, MSG_DONTWAIT | MSG_CMSG_CLOEXEC) >= 0;
    UniqueFd first;
    if (any)
        fdpass::forEach(msg, [&first](UniqueFd fd) { // all but the first close here
            if (!first)
                first = std::move(fd);
        });
    return first;
}

} // namespace

Result<void> offer(int ear, int fd) noexcept
{
    char byte = 0;
    iovec iov{&byte, 1};
    alignas(cmsghdr) std::array<char, CMSG_SPACE(sizeof(int))> control{};
    msghdr msg{};
    msg.msg_iov = &iov;
    msg.msg_iovlen = 1;
    fdpass::attach(msg, control, std::span(&fd, 1));
    if (::sendmsg(ear, &msg, MSG_DONTWAIT | MSG_NOSIGNAL) < 0)
        return lastError();
    return {};
}

void dropOffers(int button) noexcept
{
    bool any = true;
    for (unsigned n = 0; any && n < kMaxDrain; ++n)
        (void)receiveOffer(button, any);
}

UniqueFd takeOffer(int button) noexcept
{
    bool any = false;
    UniqueFd fd = receiveOffer(button, any);
    int domain = 0, type = 0;
    socklen_t length = sizeof domain;
    if (!fd || ::getsockopt(fd.get(), SOL_SOCKET, SO_DOMAIN, &domain, &length) != 0 ||
        domain != AF_UNIX)
        return {};
    length = sizeof type;
    if (::getsockopt(fd.get(), SOL_SOCKET, SO_TYPE, &type, &length) != 0 || type != SOCK_STREAM)
        return {};
    return fd;
}

bool isButton(int fd) noexcept
{
    int domain = 0;
    int type = 0;
    socklen_t length = sizeof domain;
    if (::getsockopt(fd, SOL_SOCKET, SO_DOMAIN, &domain, &length) != 0 || domain != AF_UNIX)
        return false;
    length = sizeof type;
    return ::getsockopt(fd, SOL_SOCKET, SO_TYPE, &type, &length) == 0 && type == SOCK_DGRAM;
}

} // namespace smc::doorbell
