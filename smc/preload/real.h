// SPDX-License-Identifier: MIT
// Real: libc's own socket calls, found behind ours (dlsym RTLD_NEXT) once per process.
#pragma once

#include <poll.h>
#include <spawn.h>
#include <stdio.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <sys/types.h>
#include <sys/uio.h>

namespace smc::preload
{

struct Real {
    int (*socket)(int, int, int);
    int (*epoll_ctl)(int, int, int, epoll_event*);
    int (*connect)(int, const sockaddr*, socklen_t);
    int (*listen)(int, int);
    int (*accept)(int, sockaddr*, socklen_t*);
    int (*accept4)(int, sockaddr*, socklen_t*, int);
    int (*close)(int);
    int (*close_range)(unsigned, unsigned, int);
    void (*closefrom)(int);
    int (*shutdown)(int, int);
    ssize_t (*read)(int, void*, size_t);
    ssize_t (*write)(int, const void*, size_t);
    ssize_t (*readv)(int, const iovec*, int);
    ssize_t (*writev)(int, const iovec*, int);
    ssize_t (*recv)(int, void*, size_t, int);
    ssize_t (*send)(int, const void*, size_t, int);
    ssize_t (*recvfrom)(int, void*, size_t, int, sockaddr*, socklen_t*);
    ssize_t (*sendto)(int, const void*, size_t, int, const sockaddr*, socklen_t);
    ssize_t (*recvmsg)(int, msghdr*, int);
    ssize_t (*sendmsg)(int, const msghdr*, int);
    int (*sendmmsg)(int, mmsghdr*, unsigned, int);
    int (*recvmmsg)(int, mmsghdr*, unsigned, int, timespec*);
    ssize_t (*splice)(int, off64_t*, int, off64_t*, size_t, unsigned);
    int (*fcntl)(int, int, ...);
    int (*fcntl64)(int, int, ...);
    int (*ioctl)(int, unsigned long, ...);
    int (*getsockopt)(int, int, int, void*, socklen_t*);
    int (*setsockopt)(int, int, int, const void*, socklen_t);
    int (*getsockname)(int, sockaddr*, socklen_t*);
    int (*getpeername)(int, sockaddr*, socklen_t*);
    int (*dup)(int);
    int (*dup2)(int, int);
    int (*dup3)(int, int, int);
    ssize_t (*sendfile)(int, int, off_t*, size_t);
    int (*posix_spawn)(pid_t*, const char*, const posix_spawn_file_actions_t*,
                       const posix_spawnattr_t*, char* const[], char* const[]);
    int (*posix_spawnp)(pid_t*, const char*, const posix_spawn_file_actions_t*,
                        const posix_spawnattr_t*, char* const[], char* const[]);
    int (*system)(const char*);
    FILE* (*popen)(const char*, const char*);
    FILE* (*fdopen)(int, const char*);
    int (*fileno)(FILE*);
    int (*fileno_unlocked)(FILE*);
};

// Resolved on first use; every pointer is set (a libc without one of these is not one we run
// on: we abort with a message rather than call null).
const Real& real() noexcept;

} // namespace smc::preload
