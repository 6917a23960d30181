// SPDX-License-Identifier: MIT
// smc-ss: the SMC connections and statistics of every process under smc-run, as smcss shows
// the kernel's: a table per process, or (--json) one JSON array of them all.
#include <fcntl.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <string>
#include <string_view>
#include <vector>

namespace
{

// The processes that publish (abstract names "smc-core/p/PID" in /proc/net/unix, shown with a
// leading '@'), each once.
std::vector<std::string> publishers()
{
    std::vector<std::string> names;
    std::ifstream unix("/proc/net/unix");
    std::string line;
    constexpr std::string_view kPrefix = "@smc-core/p/";
    while (std::getline(unix, line)) {
        const std::size_t at = line.find(kPrefix);
        if (at == std::string::npos)
            continue;
        std::string name = line.substr(at + 1);
        if (name.find_first_not_of("0123456789", kPrefix.size() - 1) != std::string::npos)
            continue; // not a pid: not ours
        bool seen = false;
        for (const std::string& n : names)
            seen |= n == name;
        if (!seen)
            names.push_back(name);
    }
    return names;
}

// The publisher's answer (a JSON line, then the table), or "" if it did not give one.
std::string ask(const std::string& name)
{
    // Non-blocking connect: a publisher whose queue is full is skipped, not waited for.
    const int fd = ::socket(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    if (fd < 0)
        return {};
    const timeval limit{1, 0};
    (void)::setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &limit, sizeof limit);
    sockaddr_un un{};
    un.sun_family = AF_UNIX;
    const std::size_t n = std::min(name.size(), sizeof un.sun_path - 1);
    std::memcpy(un.sun_path + 1, name.data(), n);
    std::string reply;
    if (::connect(fd, reinterpret_cast<const sockaddr*>(&un),
                  static_cast<socklen_t>(offsetof(sockaddr_un, sun_path) + 1 + n)) == 0 &&
        ::fcntl(fd, F_SETFL, 0) == 0) { // then reads wait, up to SO_RCVTIMEO
        char buffer[65536];
        for (ssize_t got; (got = ::read(fd, buffer, sizeof buffer)) > 0;)
            reply.append(buffer, static_cast<std::size_t>(got));
    }
    ::close(fd);
    return reply;
}

} // namespace

int main(int argc, char** argv)
{
    bool json = false;
    for (int i = 1; i < argc; ++i) {
        const std::string_view a = argv[i];
        if (a == "--json") {
            json = true;
        } else {
            std::fprintf(stderr,
                         "usage: smc-ss [--json]\n"
                         "  the SMC connections and statistics of every process under smc-run\n");
            return a == "-h" || a == "--help" ? 0 : 2;
        }
    }
    bool first = true;
    if (json)
        std::printf("[");
    for (const std::string& name : publishers()) {
        // A name whose process is gone is held by someone who will not answer (an inherited
        // copy): not waited for.
        const long pid = std::strtol(name.c_str() + name.rfind('/') + 1, nullptr, 10);
        if (pid <= 0 || (::kill(static_cast<pid_t>(pid), 0) != 0 && errno == ESRCH))
            continue;
        const std::string reply = ask(name);
        const std::size_t eol = reply.find('\n');
        if (eol == std::string::npos)
            continue; // gone meanwhile, or not answering
        if (json) {
            std::printf("%s%s", first ? "\n" : ",\n", reply.substr(0, eol).c_str());
        } else {
            // The command, from the JSON line: "command": "NAME".
            constexpr std::string_view kKey = "\"command\": \"";
            std::string command;
            if (const std::size_t at = reply.find(kKey); at < eol)
                command = reply.substr(at + kKey.size(),
                                       reply.find('"', at + kKey.size()) - at - kKey.size());
            std::printf("%s== process %s (%s) ==\n%s", first ? "" : "\n",
                        name.substr(name.rfind('/') + 1).c_str(), command.c_str(),
                        reply.substr(eol + 1).c_str());
        }
        first = false;
    }
    if (json)
        std::printf("%s]\n", first ? "" : "\n");
    return 0;
}
