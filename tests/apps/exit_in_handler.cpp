// SPDX-License-Identifier: MIT
// A client that its SIGALRM handler ends with exit(3) while it waits in a blocking recv, as
// simple C programs end on SIGINT or an alarm: it must exit (status 3), not hang in the exit.
// Usage: exit-in-handler PORT (a server on 127.0.0.1 that sends nothing first).
#include <arpa/inet.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cstdint>
#include <cstdio>
#include <cstdlib>

namespace
{

void onAlarm(int)
{
    std::exit(3);
}

} // namespace

int main(int argc, char** argv)
{
    if (argc != 2)
        return 2;
    const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
    sockaddr_in to{};
    to.sin_family = AF_INET;
    to.sin_port = htons(static_cast<std::uint16_t>(std::atoi(argv[1])));
    ::inet_pton(AF_INET, "127.0.0.1", &to.sin_addr);
    if (fd < 0 || ::connect(fd, reinterpret_cast<sockaddr*>(&to), sizeof to) != 0) {
        std::perror("connect");
        return 1;
    }
    ::signal(SIGALRM, onAlarm); // glibc's signal: SA_RESTART, the recv would go on
    ::alarm(1);
    char buffer[16];
    const ssize_t n = ::recv(fd, buffer, sizeof buffer, 0);
    std::fprintf(stderr, "recv returned %zd before the alarm\n", n);
    return 1;
}
