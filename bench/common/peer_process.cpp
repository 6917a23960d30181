// SPDX-License-Identifier: MIT
// PeerProcess: a benchmark's server, the same program with --serve, in its own process.
#include "bench/common/peer_process.h"

#include <poll.h>
#include <sys/wait.h>
#include <unistd.h>

#include <array>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string_view>
#include <thread>
#include <vector>

#include "bench/common/die.h"

namespace smc::bench
{
namespace
{

void serve(Socket s)
{
    std::array<std::byte, 1> command{};
    if (!readExactly(s, command))
        return;
    if (static_cast<PeerCommand>(command[0]) == PeerCommand::Sink) {
        std::vector<std::byte> buf(1 << 20);
        std::uint64_t total = 0;
        for (;;) {
            Result<std::size_t> n = s.recv(buf);
            if (!n || *n == 0)
                break;
            total += *n;
        }
        writeAll(s, std::as_bytes(std::span(&total, 1)));
        (void)s.shutdown(Shutdown::Write);
        std::array<std::byte, 1> end{};
        (void)s.recv(end); // until the client closes: then the close is orderly on both ends
        return;
    }
    std::uint32_t size = 0;
    if (!readExactly(s, std::as_writable_bytes(std::span(&size, 1))) || size > (64u << 20))
        return;
    if (static_cast<PeerCommand>(command[0]) == PeerCommand::Source) {
        std::uint64_t count = 0;
        if (!readExactly(s, std::as_writable_bytes(std::span(&count, 1))))
            return;
        const std::vector<std::byte> msg(size, std::byte{0x5a});
        for (std::uint64_t i = 0; i < count; ++i)
            if (!writeAll(s, msg))
                return;
        (void)s.shutdown(Shutdown::Write);
        std::array<std::byte, 1> end{};
        (void)s.recv(end); // until the client closes
        return;
    }
    std::vector<std::byte> msg(size);
    while (readExactly(s, msg) && writeAll(s, msg)) {
    }
}

void acceptLoop(Listener& l)
{
    for (;;) {
        Result<Socket> s = l.accept();
        if (!s)
            return;
        std::thread(serve, std::move(*s)).detach();
    }
}

// SMC-D, SMC-R or TCP forced on both ends.
SocketOptions optionsFor(Transport transport, unsigned busyPollUs)
{
    SocketOptions o;
    o.busyPoll = std::chrono::microseconds(busyPollUs);
    o.mode = transport == Transport::SmcD   ? Mode::SmcD
             : transport == Transport::SmcR ? Mode::SmcR
                                            : Mode::Tcp;
    o.rmbBytes = 1 << 20; // as the kernel's loopback-ism numbers were taken (notes §6)
    return o;
}

std::unique_ptr<SmcStack> makeStack(const std::string& smcrDevice)
{
    StackConfig config;
    if (!smcrDevice.empty()) {
        config.smcr = SmcrConfig{};
        config.smcr->device = smcrDevice;
    }
    Result<std::unique_ptr<SmcStack>> stack = SmcStack::create(config);
    if (!stack)
        die("smc stack", stack.error());
    return std::move(*stack);
}

} // namespace

bool readExactly(Socket& s, std::span<std::byte> into)
{
    while (!into.empty()) {
        Result<std::size_t> n = s.recv(into);
        if (!n || *n == 0)
            return false;
        into = into.subspan(*n);
    }
    return true;
}

bool writeAll(Socket& s, std::span<const std::byte> data)
{
    while (!data.empty()) {
        Result<std::size_t> n = s.send(data);
        if (!n)
            return false;
        data = data.subspan(*n);
    }
    return true;
}

const char* columnName(Transport transport)
{
    return transport == Transport::SmcD ? "smcd" : transport == Transport::SmcR ? "smcr" : "tcp";
}

bool servePeerIfAsked(int argc, char** argv)
{
    if (argc < 4 || std::string_view(argv[1]) != "--serve")
        return false;
    const auto busyPoll = static_cast<unsigned>(std::strtoul(argv[2], nullptr, 10));
    const std::string host = argv[3], device = argc > 4 ? argv[4] : "";
    std::unique_ptr<SmcStack> stack = makeStack(device);
    std::vector<Listener> listeners;
    std::vector<Transport> kinds = {Transport::SmcD, Transport::Tcp};
    if (!device.empty())
        kinds.push_back(Transport::SmcR);
    for (Transport t : kinds) {
        Result<Listener> l = Listener::listen(*stack, host, 0, optionsFor(t, busyPoll));
        if (!l)
            die("listen", l.error());
        listeners.push_back(std::move(*l));
    }
    std::printf("%u %u %u\n", listeners[0].port(), listeners[1].port(),
                listeners.size() > 2 ? listeners[2].port() : 0u);
    std::fflush(stdout);
    std::vector<std::thread> loops;
    for (Listener& l : listeners)
        loops.emplace_back([&l] { acceptLoop(l); });
    char c;
    while (::read(STDIN_FILENO, &c, 1) > 0) {
    }
    for (Listener& l : listeners)
        l.close();
    for (std::thread& t : loops)
        t.join();
    std::_Exit(0); // connection threads may still run: no destructors under them
}

PeerProcess::PeerProcess(const char* self, PeerSetup setup) : setup_(std::move(setup))
{
    const std::string busyPoll = std::to_string(setup_.busyPollUs);
    int in[2], out[2];
    if (::pipe(in) != 0 || ::pipe(out) != 0)
        die("pipe", {errno, std::generic_category()});
    pid_ = ::fork();
    if (pid_ < 0)
        die("fork", {errno, std::generic_category()});
    if (pid_ == 0) {
        ::dup2(in[0], STDIN_FILENO);
        ::dup2(out[1], STDOUT_FILENO);
        ::close(in[1]);
        ::close(out[0]);
        const char* device = setup_.smcrDevice.empty() ? nullptr : setup_.smcrDevice.c_str();
        ::execl(self, self, "--serve", busyPoll.c_str(), setup_.host.c_str(), device,
                static_cast<char*>(nullptr));
        std::_Exit(127);
    }
    ::close(in[0]);
    ::close(out[1]);
    toChild_ = in[1];
    char line[64] = {};
    std::size_t have = 0;
    while (have + 1 < sizeof line) {
        const ssize_t n = ::read(out[0], line + have, 1);
        if (n <= 0 || line[have] == '\n')
            break;
        ++have;
    }
    ::close(out[0]);
    unsigned smcd = 0, tcp = 0, smcr = 0;
    if (std::sscanf(line, "%u %u %u", &smcd, &tcp, &smcr) != 3)
        die("peer process", std::make_error_code(std::errc::protocol_error));
    smcdPort_ = static_cast<std::uint16_t>(smcd);
    tcpPort_ = static_cast<std::uint16_t>(tcp);
    smcrPort_ = static_cast<std::uint16_t>(smcr);
}

PeerProcess::~PeerProcess()
{
    ::close(toChild_);
    int status = 0;
    ::waitpid(pid_, &status, 0);
}

std::vector<Transport> PeerProcess::transports() const
{
    if (setup_.smcrDevice.empty())
        return {Transport::SmcD, Transport::Tcp};
    return {Transport::SmcD, Transport::SmcR, Transport::Tcp};
}

std::unique_ptr<SmcStack> PeerProcess::clientStack() const
{
    return makeStack(setup_.smcrDevice);
}

Socket PeerProcess::connect(SmcStack& stack, Transport transport,
                            const std::function<void(SocketOptions&)>& tweak) const
{
    const std::uint16_t port = transport == Transport::SmcD   ? smcdPort_
                               : transport == Transport::SmcR ? smcrPort_
                                                              : tcpPort_;
    SocketOptions options = optionsFor(transport, setup_.busyPollUs);
    if (tweak)
        tweak(options);
    Result<Socket> s = Socket::connect(stack, setup_.host, port, options);
    if (!s)
        die("connect", s.error());
    if (s->transport() != transport) // the bench measures what it names, or nothing
        die("transport", std::make_error_code(std::errc::protocol_not_supported));
    return std::move(*s);
}

} // namespace smc::bench
