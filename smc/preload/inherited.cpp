// SPDX-License-Identifier: MIT
// Shim::adoptInherited: connections accepted for SMC by the process that exec'd this program.
#include <dirent.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdlib>
#include <map>
#include <utility>
#include <vector>

#include "smc/preload/real.h"
#include "smc/preload/registry.h"
#include "smc/preload/shim.h"

namespace smc::preload
{

namespace
{

using Stat = struct stat;

// A connected TCP stream socket whose client, on this host, runs smc-core and is in its
// handshake (fromAnnouncedClient, as accept4 asks), at the server's end (its address a
// listener that runs smc-core announced).
bool acceptedForSmc(int fd) noexcept
{
    int type = 0;
    int listening = 0;
    socklen_t len = sizeof type;
    if (real().getsockopt(fd, SOL_SOCKET, SO_TYPE, &type, &len) != 0 || type != SOCK_STREAM)
        return false;
    len = sizeof listening;
    if (real().getsockopt(fd, SOL_SOCKET, SO_ACCEPTCONN, &listening, &len) != 0 || listening)
        return false;
    sockaddr_storage peer{};
    socklen_t peerLen = sizeof peer;
    if (real().getpeername(fd, reinterpret_cast<sockaddr*>(&peer), &peerLen) != 0 ||
        (peer.ss_family != AF_INET && peer.ss_family != AF_INET6))
        return false;
    sockaddr_storage mine{};
    socklen_t mineLen = sizeof mine;
    if (real().getsockname(fd, reinterpret_cast<sockaddr*>(&mine), &mineLen) != 0)
        return false;
    return fromAnnouncedClient(fd, reinterpret_cast<const sockaddr*>(&peer), peerLen) &&
           listenerAnnounced(reinterpret_cast<const sockaddr*>(&mine), mineLen);
}

} // namespace

void Shim::adoptInherited()
{
    // The numbers the program has now (at its first hooked call: those it was started with),
    // by socket: inetd passes one as standard input and output.
    std::map<std::pair<dev_t, ino_t>, std::vector<int>> sockets;
    DIR* dir = ::opendir("/proc/self/fd");
    if (dir == nullptr)
        return; // no /proc: inherited connections stay TCP (their client's CLC times out)
    while (const dirent* entry = ::readdir(dir)) {
        char* end = nullptr;
        const long fd = std::strtol(entry->d_name, &end, 10);
        Stat st{};
        if (*end != '\0' || end == entry->d_name || fd == ::dirfd(dir) || fd >= kMaxFd ||
            !acceptedForSmc(static_cast<int>(fd)) || ::fstat(static_cast<int>(fd), &st) != 0)
            continue;
        sockets[{st.st_dev, st.st_ino}].push_back(static_cast<int>(fd));
    }
    ::closedir(dir);
    for (auto& [socket, numbers] : sockets) {
        std::sort(numbers.begin(), numbers.end());
        const int first = numbers.front();
        addAccepted(first);
        log("fd %d: inherited, accepted for SMC", first);
        if (numbers.size() == 1)
            continue; // its handshake waits for its first use, as an accepted one's
        // Its other numbers become copies of the connection, not handshakes of their own on
        // the same TCP socket: the handshake runs now, then each is made as dup2 makes one.
        (void)route(first, Wait::Always, Use::Any);
        for (std::size_t i = 1; i < numbers.size(); ++i)
            if (::dup2(first, numbers[i]) < 0)
                log("fd %d: not a copy of fd %d (errno %d)", numbers[i], first, errno);
    }
}

} // namespace smc::preload
