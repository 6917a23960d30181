// SPDX-License-Identifier: MIT
// pingpong: round-trip latency between two processes, SMC-D and TCP side by side.
#include <chrono>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <vector>

#include "bench/common/args.h"
#include "bench/common/die.h"
#include "bench/common/peer_process.h"
#include "bench/common/stats.h"

using namespace smc;
using namespace smc::bench;

namespace
{

using Clock = std::chrono::steady_clock;

void sendAll(Socket& s, std::span<const std::byte> data)
{
    while (!data.empty()) {
        Result<std::size_t> n = s.send(data);
        if (!n)
            die("send", n.error());
        data = data.subspan(*n);
    }
}

void recvAll(Socket& s, std::span<std::byte> into)
{
    while (!into.empty()) {
        Result<std::size_t> n = s.recv(into);
        if (!n || *n == 0)
            die("recv", n ? std::make_error_code(std::errc::connection_reset) : n.error());
        into = into.subspan(*n);
    }
}

// Round trips of `bytes` for `seconds`, in µs.
std::vector<double> pingpongCell(SmcStack& stack, const PeerProcess& peer, Transport t,
                                 unsigned busyPoll, std::uint32_t bytes, double seconds)
{
    Result<Socket> s = Socket::connect(stack, "127.0.0.1", peer.port(t), optionsFor(t, busyPoll));
    if (!s)
        die("connect", s.error());
    if (s->transport() != t)
        die("transport", std::make_error_code(std::errc::protocol_not_supported));
    std::vector<std::byte> hello(5);
    hello[0] = static_cast<std::byte>(PeerCommand::Echo);
    std::memcpy(hello.data() + 1, &bytes, 4);
    sendAll(*s, hello);
    std::vector<std::byte> msg(bytes, std::byte{0x11}), back(bytes);
    std::vector<double> rtts;
    for (int i = 0; i < 100; ++i) { // warm-up: caches, first faults of the rings
        sendAll(*s, msg);
        recvAll(*s, back);
    }
    const auto end = Clock::now() + std::chrono::duration<double>(seconds);
    while (Clock::now() < end) {
        const auto t0 = Clock::now();
        sendAll(*s, msg);
        recvAll(*s, back);
        rtts.push_back(std::chrono::duration<double, std::micro>(Clock::now() - t0).count());
    }
    return rtts;
}

} // namespace

int main(int argc, char** argv)
{
    if (servePeerIfAsked(argc, argv))
        return 0;
    double seconds = 1.0;
    std::vector<unsigned> sizes = {64, 1024, 16384, 65536};
    std::string csv;
    unsigned busyPoll = 20;
    Args args("[--seconds S] [--sizes B,B,...] [--csv FILE] [--busy-poll US]\n"
              "One connection per cell to a server process (this program, re-run) that echoes\n"
              "each message; round trips for S seconds, p50 and p99 in microseconds.\n");
    args.real("--seconds", seconds, 0, 3600)
        .wholeList("--sizes", sizes, 1, 16u << 20)
        .text("--csv", csv)
        .whole("--busy-poll", busyPoll, 0, 1'000'000);
    args.parse(argc, argv);

    PeerProcess peer(argv[0], busyPoll);
    Result<std::unique_ptr<SmcStack>> stack = SmcStack::create();
    if (!stack)
        die("smc stack", stack.error());
    std::ofstream out;
    if (!csv.empty()) {
        out.open(csv);
        out << "transport,msg_bytes,p50_us,p99_us\n";
    }
    std::printf("%10s %10s %10s %10s %10s %10s\n", "msg_bytes", "smcd p50", "smcd p99", "tcp p50",
                "tcp p99", "p50 s/t");
    for (unsigned bytes : sizes) {
        const auto smcd = pingpongCell(**stack, peer, Transport::SmcD, busyPoll, bytes, seconds);
        const auto tcp = pingpongCell(**stack, peer, Transport::Tcp, busyPoll, bytes, seconds);
        const double s50 = percentile(smcd, 0.5), s99 = percentile(smcd, 0.99);
        const double t50 = percentile(tcp, 0.5), t99 = percentile(tcp, 0.99);
        std::printf("%10u %10.1f %10.1f %10.1f %10.1f %9.2fx\n", bytes, s50, s99, t50, t99,
                    s50 / t50);
        std::fflush(stdout);
        if (out) {
            out << "smcd," << bytes << ',' << s50 << ',' << s99 << '\n';
            out << "tcp," << bytes << ',' << t50 << ',' << t99 << '\n';
        }
    }
    return 0;
}
