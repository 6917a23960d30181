// SPDX-License-Identifier: MIT
// Doorbells: socketpair(AF_UNIX, SOCK_DGRAM), one byte per ring, never a blocking call.
#include "smc/ism/doorbell.h"

#include <sys/socket.h>

#include <array>
#include <cerrno>

#include "base/sys_error.h"

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
