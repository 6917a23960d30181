// SPDX-License-Identifier: MIT
// Two real processes over SMC-D (smc-nc, fork and exec): 256 MiB each way, a peer killed.
#include <fcntl.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "smc/socket/socket.h"

namespace smc
{
namespace
{

using namespace std::chrono_literals;

// A write to a dead child's pipe must be EPIPE, not the end of the test.
const bool kNoSigpipe = [] {
    ::signal(SIGPIPE, SIG_IGN);
    return true;
}();

const char* smcNc()
{
    const char* path = std::getenv("SMC_NC");
    return path != nullptr ? path : "smc-nc";
}

// A child running smc-nc with its stdin, stdout and stderr on pipes.
struct Child {
    pid_t pid = -1;
    int in = -1, out = -1, err = -1;

    explicit Child(std::vector<std::string> args)
    {
        int i[2], o[2], e[2];
        EXPECT_EQ(::pipe2(i, O_CLOEXEC), 0);
        EXPECT_EQ(::pipe2(o, O_CLOEXEC), 0);
        EXPECT_EQ(::pipe2(e, O_CLOEXEC), 0);
        pid = ::fork();
        if (pid == 0) {
            ::dup2(i[0], 0);
            ::dup2(o[1], 1);
            ::dup2(e[1], 2);
            std::vector<char*> argv;
            for (auto& a : args)
                argv.push_back(a.data());
            argv.push_back(nullptr);
            ::execv(smcNc(), argv.data());
            std::_Exit(127);
        }
        ::close(i[0]);
        ::close(o[1]);
        ::close(e[1]);
        in = i[1];
        out = o[0];
        err = e[0];
    }
    ~Child()
    {
        for (int fd : {in, out, err})
            if (fd >= 0)
                ::close(fd);
        if (pid > 0) {
            ::kill(pid, SIGKILL);
            ::waitpid(pid, nullptr, 0);
        }
    }
    // stderr up to the first line that contains `text` (or EOF).
    std::string waitForLine(const std::string& text)
    {
        std::string all;
        char c;
        while (::read(err, &c, 1) == 1) {
            all += c;
            if (c == '\n' && all.find(text) != std::string::npos)
                break;
        }
        return all;
    }
    int wait()
    {
        int status = 0;
        ::waitpid(pid, &status, 0);
        pid = -1;
        return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
    }
};

// FNV-1a over a stream of seeded pseudo-random bytes, written to `fd` and closed.
std::uint64_t feed(int& fd, std::size_t bytes, unsigned seed)
{
    std::mt19937_64 rng(seed);
    std::vector<std::uint64_t> block(1 << 15);
    std::uint64_t hash = 1469598103934665603ull;
    for (std::size_t done = 0; done < bytes;) {
        for (auto& w : block)
            w = rng();
        const std::size_t n = std::min(bytes - done, block.size() * 8);
        const auto* p = reinterpret_cast<const unsigned char*>(block.data());
        for (std::size_t k = 0; k < n; ++k)
            hash = (hash ^ p[k]) * 1099511628211ull;
        for (std::size_t w = 0; w < n;) {
            const ssize_t m = ::write(fd, p + w, n - w);
            if (m <= 0)
                return 0;
            w += static_cast<std::size_t>(m);
        }
        done += n;
    }
    ::close(fd);
    fd = -1;
    return hash;
}

std::pair<std::uint64_t, std::size_t> drain(int fd)
{
    std::vector<unsigned char> buf(1 << 18);
    std::uint64_t hash = 1469598103934665603ull;
    std::size_t total = 0;
    for (;;) {
        const ssize_t n = ::read(fd, buf.data(), buf.size());
        if (n <= 0)
            return {hash, total};
        for (ssize_t k = 0; k < n; ++k)
            hash = (hash ^ buf[static_cast<std::size_t>(k)]) * 1099511628211ull;
        total += static_cast<std::size_t>(n);
    }
}

std::uint16_t portFrom(const std::string& line)
{
    const auto at = line.find("port ");
    return at == std::string::npos ? 0 : static_cast<std::uint16_t>(std::stoi(line.substr(at + 5)));
}

TEST(SocketProcesses, SmcdBothWays256MiBChecksummed)
{
    constexpr std::size_t kBytes = 256u << 20;
    Child server({"smc-nc", "-v", "-l", "127.0.0.1", "0"});
    const std::uint16_t port = portFrom(server.waitForLine("listening"));
    ASSERT_NE(port, 0);
    Child client({"smc-nc", "-v", "127.0.0.1", std::to_string(port)});

    std::uint64_t sentByServer = 0, sentByClient = 0;
    std::pair<std::uint64_t, std::size_t> atClient, atServer;
    std::thread a([&] { sentByServer = feed(server.in, kBytes, 1); });
    std::thread b([&] { sentByClient = feed(client.in, kBytes, 2); });
    std::thread c([&] { atServer = drain(server.out); });
    atClient = drain(client.out);
    a.join();
    b.join();
    c.join();
    EXPECT_NE(server.waitForLine("SMC").find("SMC-D"), std::string::npos);
    EXPECT_NE(client.waitForLine("SMC").find("SMC-D"), std::string::npos);
    EXPECT_EQ(server.wait(), 0);
    EXPECT_EQ(client.wait(), 0);
    EXPECT_EQ(atServer.second, kBytes);
    EXPECT_EQ(atClient.second, kBytes);
    EXPECT_EQ(atServer.first, sentByClient);
    EXPECT_EQ(atClient.first, sentByServer);
}

// Shared memory this process still maps or holds ("memfd:" in maps or fds).
std::size_t memfdsHeld()
{
    std::size_t n = 0;
    std::ifstream maps("/proc/self/maps");
    for (std::string line; std::getline(maps, line);)
        n += line.find("/memfd:") != std::string::npos;
    for (const auto& e : std::filesystem::directory_iterator("/proc/self/fd")) {
        std::error_code ec;
        n += std::filesystem::read_symlink(e.path(), ec).string().find("memfd:") == 0;
    }
    return n;
}

TEST(SocketProcesses, APeerKilledMidStreamIsAResetAndLeavesNothing)
{
    {
        auto stack = std::move(SmcStack::create()).value();
        Listener l = std::move(Listener::listen(*stack, "127.0.0.1", 0)).value();
        Child peer({"smc-nc", "127.0.0.1", std::to_string(l.port())});
        Socket s = std::move(l.accept(10s)).value();
        ASSERT_EQ(s.transport(), Transport::SmcD);
        std::thread writer([&] { feed(peer.in, std::size_t(1) << 40, 3); }); // "forever"
        std::vector<std::byte> buf(1 << 16);
        std::size_t got = 0;
        while (got < (8u << 20))
            got += s.recv(buf).value();
        ::kill(peer.pid, SIGKILL);
        peer.wait();
        Result<std::size_t> r = s.recv(buf);
        while (r && *r > 0)
            r = s.recv(buf);
        ASSERT_FALSE(r);
        EXPECT_EQ(r.error(), std::errc::connection_reset);
        writer.join(); // EPIPE: the reader is dead
        ::close(peer.in);
        peer.in = -1;
        s.close();
        EXPECT_EQ(stack->poolStats().rmb.inUseBytes, 0);
        l.close();
    }
    EXPECT_EQ(memfdsHeld(), 0u) << "the peer's DMB mapping, or ours, outlived the connection";
}

} // namespace
} // namespace smc
