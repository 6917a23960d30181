// SPDX-License-Identifier: MIT
// Descriptors carried by a Unix socket message (SCM_RIGHTS): attached to one, taken from one.
#pragma once

#include <sys/socket.h>

#include <cstring>
#include <span>

#include "base/unique_fd.h"

namespace smc::fdpass
{

// Makes `msg` carry `fds`, with `control` as its control buffer. Precondition: `control` is
// cmsghdr-aligned and holds CMSG_SPACE(fds.size() * sizeof(int)) bytes. Never fails.
inline void attach(msghdr& msg, std::span<char> control, std::span<const int> fds) noexcept
{
    msg.msg_control = control.data();
    msg.msg_controllen = control.size();
    cmsghdr* c = CMSG_FIRSTHDR(&msg);
    c->cmsg_level = SOL_SOCKET;
    c->cmsg_type = SCM_RIGHTS;
    c->cmsg_len = CMSG_LEN(fds.size_bytes());
    std::memcpy(CMSG_DATA(c), fds.data(), fds.size_bytes());
}

// Hands `take` every descriptor a received `msg` carries, each owned once (what `take` does
// not keep is closed), in the order they came.
template <typename Take> void forEach(const msghdr& msg, Take&& take)
{
    for (const cmsghdr* c = CMSG_FIRSTHDR(&msg); c != nullptr;
         c = CMSG_NXTHDR(const_cast<msghdr*>(&msg), const_cast<cmsghdr*>(c))) {
        if (c->cmsg_level != SOL_SOCKET || c->cmsg_type != SCM_RIGHTS)
            continue;
        const std::size_t count = (c->cmsg_len - CMSG_LEN(0)) / sizeof(int);
        for (std::size_t i = 0; i < count; ++i) {
            int fd;
            std::memcpy(&fd, CMSG_DATA(c) + i * sizeof(int), sizeof fd);
            take(UniqueFd(fd));
        }
    }
}

} // namespace smc::fdpass
