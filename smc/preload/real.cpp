// SPDX-License-Identifier: MIT
// Real: libc's socket calls behind the shim's, looked up once.
#include "smc/preload/real.h"

#include <dlfcn.h>
#include <unistd.h>

#include <cstdlib>
#include <cstring>

namespace smc::preload
{

namespace
{
template <typename F> void find(F& slot, const char* name) noexcept
{
    slot = reinterpret_cast<F>(::dlsym(RTLD_NEXT, name));
    if (!slot) {
        // No stdio: this runs inside the application's own calls.
        static constexpr char kPrefix[] = "smc-run: libc has no ";
        (void)!::write(2, kPrefix, sizeof kPrefix - 1);
        (void)!::write(2, name, std::strlen(name));
        (void)!::write(2, "\n", 1);
        std::abort();
    }
}

Real resolve() noexcept
{
    Real r{};
    find(r.socket, "socket");
    find(r.epoll_ctl, "epoll_ctl");
    find(r.connect, "connect");
    find(r.listen, "listen");
    find(r.accept, "accept");
    find(r.accept4, "accept4");
    find(r.close, "close");
    find(r.close_range, "close_range");
    find(r.closefrom, "closefrom");
    find(r.shutdown, "shutdown");
    find(r.read, "read");
    find(r.write, "write");
    find(r.readv, "readv");
    find(r.writev, "writev");
    find(r.recv, "recv");
    find(r.send, "send");
    find(r.recvfrom, "recvfrom");
    find(r.sendto, "sendto");
    find(r.recvmsg, "recvmsg");
    find(r.sendmsg, "sendmsg");
    find(r.sendmmsg, "sendmmsg");
    find(r.recvmmsg, "recvmmsg");
    find(r.splice, "splice");
    find(r.posix_spawn, "posix_spawn");
    find(r.posix_spawnp, "posix_spawnp");
    find(r.system, "system");
    find(r.popen, "popen");
    find(r.fdopen, "fdopen");
    find(r.fileno, "fileno");
    find(r.fileno_unlocked, "fileno_unlocked");
    find(r.fcntl, "fcntl");
    find(r.fcntl64, "fcntl64");
    find(r.ioctl, "ioctl");
    find(r.getsockopt, "getsockopt");
    find(r.setsockopt, "setsockopt");
    find(r.getsockname, "getsockname");
    find(r.getpeername, "getpeername");
    find(r.dup, "dup");
    find(r.dup2, "dup2");
    find(r.dup3, "dup3");
    find(r.sendfile, "sendfile");
    return r;
}
} // namespace

const Real& real() noexcept
{
    static const Real r = resolve();
    return r;
}

} // namespace smc::preload
