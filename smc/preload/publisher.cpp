// SPDX-License-Identifier: MIT
// Publisher: answering smc-ss with the stack's connections and statistics.
#include "smc/preload/publisher.h"

#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <cstdio>
#include <cstring>
#include <string>

#include "base/sys_error.h"
#include "smc/socket/smcss.h"

namespace smc::preload
{

namespace
{
std::string command()
{
    char name[64] = {};
    if (FILE* f = std::fopen("/proc/self/comm", "re")) {
        if (!std::fgets(name, sizeof name, f))
            name[0] = '\0';
        std::fclose(f);
    }
    std::string s(name);
    while (!s.empty() && s.back() == '\n')
        s.pop_back();
    std::string quoted; // JSON: only what a command name may hold needs escaping
    for (char c : s)
        if (c == '"' || c == '\\')
            quoted += '\\', quoted += c;
        else if (static_cast<unsigned char>(c) >= 0x20)
            quoted += c;
    return quoted;
}
} // namespace

Result<std::unique_ptr<Publisher>> Publisher::start(SmcStack& stack, Executor& executor)
{
    UniqueFd fd(::socket(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0));
    if (!fd)
        return lastError();
    sockaddr_un un{};
    un.sun_family = AF_UNIX;
    const int n = std::snprintf(un.sun_path + 1, sizeof un.sun_path - 1, "smc-core/p/%d",
                                static_cast<int>(::getpid()));
    const auto len = static_cast<socklen_t>(offsetof(sockaddr_un, sun_path) + 1 + n);
    if (::bind(fd.get(), reinterpret_cast<const sockaddr*>(&un), len) != 0 ||
        ::listen(fd.get(), 8) != 0)
        return lastError();
    std::unique_ptr<Publisher> p(new Publisher(stack, executor, std::move(fd)));
    p->watch_ = executor.watch(p->listener_.get(), [raw = p.get()] { raw->answer(); });
    if (p->watch_ < 0)
        return lastError();
    return p;
}

Publisher::Publisher(SmcStack& stack, Executor& executor, UniqueFd listener)
    : stack_(stack), executor_(executor), listener_(std::move(listener))
{
}

Publisher::~Publisher()
{
    if (watch_ >= 0)
        executor_.unwatch(watch_);
}

void Publisher::answer() noexcept
{
    for (;;) {
        UniqueFd peer(::accept4(listener_.get(), nullptr, nullptr, SOCK_CLOEXEC));
        if (!peer)
            return; // none left (or out of descriptors: the next one is taken next time)
        const timeval limit{0, 200'000};
        (void)::setsockopt(peer.get(), SOL_SOCKET, SO_SNDTIMEO, &limit, sizeof limit);
        const std::vector<ConnectionInfo> connections = stack_.connections();
        std::string json = smcssJson(connections, stack_.stats());
        if (!json.empty() && json.back() == '\n')
            json.pop_back();
        std::string reply = "{\"pid\": " + std::to_string(::getpid()) + ", \"command\": \"" +
                            command() + "\", \"smcss\": " + json + "}\n" + smcssTable(connections);
        std::size_t done = 0;
        while (done < reply.size()) {
            const ssize_t n =
                ::send(peer.get(), reply.data() + done, reply.size() - done, MSG_NOSIGNAL);
            if (n <= 0)
                break;
            done += static_cast<std::size_t>(n);
        }
    }
}

} // namespace smc::preload
