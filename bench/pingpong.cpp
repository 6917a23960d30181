// SPDX-License-Identifier: MIT
// pingpong: round trips between two processes: SMC-D, TCP and SMC-R side by side.
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
                                 std::uint32_t bytes, double seconds, bool autocork = true)
{
    Socket s = peer.connect(stack, t, [&](SocketOptions& o) {
        if (!autocork)
            o.autocorkBytes = 0;
    });
    std::vector<std::byte> hello(5);
    hello[0] = static_cast<std::byte>(PeerCommand::Echo);
    std::memcpy(hello.data() + 1, &bytes, 4);
    sendAll(s, hello);
    std::vector<std::byte> msg(bytes, std::byte{0x11}), back(bytes);
    std::vector<double> rtts;
    for (int i = 0; i < 100; ++i) { // warm-up: caches, first faults of the rings
        sendAll(s, msg);
        recvAll(s, back);
    }
    const auto end = Clock::now() + std::chrono::duration<double>(seconds);
    while (Clock::now() < end) {
        const auto t0 = Clock::now();
        sendAll(s, msg);
        recvAll(s, back);
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
    PeerSetup setup;
    Args args("[--seconds S] [--sizes B,B,...] [--csv FILE] [--busy-poll US] [--smcr DEVICE]\n"
              "[--host ADDR]\n"
              "One connection per cell to a server process (this program, re-run) that echoes\n"
              "each message; round trips for S seconds, p50 and p99 in microseconds. SMC-D and\n"
              "TCP, and SMC-R over DEVICE if given; on ADDR (default 127.0.0.1; SMC-R needs an\n"
              "address whose subnet the device's GID is in). Then SMC-D without autocorking:\n"
              "what corking costs a lone request (cork/nocork p50).\n");
    args.real("--seconds", seconds, 0, 3600)
        .wholeList("--sizes", sizes, 1, 16u << 20)
        .text("--csv", csv)
        .whole("--busy-poll", setup.busyPollUs, 0, 1'000'000)
        .text("--smcr", setup.smcrDevice)
        .text("--host", setup.host);
    args.parse(argc, argv);

    PeerProcess peer(argv[0], setup);
    std::unique_ptr<SmcStack> stack = peer.clientStack();
    const std::vector<Transport> transports = peer.transports();
    std::ofstream out;
    if (!csv.empty()) {
        out.open(csv);
        out << "transport,msg_bytes,p50_us,p99_us\n";
    }
    std::printf("%10s", "msg_bytes");
    for (Transport t : transports)
        std::printf(" %5s p50 %5s p99", columnName(t), columnName(t));
    for (Transport t : transports)
        if (t != Transport::Tcp)
            std::printf(" %4s/tcp p50", columnName(t));
    std::printf(" nocork p50 cork/nocork\n");
    for (unsigned bytes : sizes) {
        std::vector<double> p50, p99;
        for (Transport t : transports) {
            const std::vector<double> rtts = pingpongCell(*stack, peer, t, bytes, seconds);
            p50.push_back(percentile(rtts, 0.5));
            p99.push_back(percentile(rtts, 0.99));
        }
        const std::vector<double> nocork =
            pingpongCell(*stack, peer, Transport::SmcD, bytes, seconds, false);
        std::printf("%10u", bytes);
        for (std::size_t i = 0; i < p50.size(); ++i)
            std::printf(" %9.1f %9.1f", p50[i], p99[i]);
        for (std::size_t i = 0; i + 1 < p50.size(); ++i)
            std::printf(" %11.2fx", p50[i] / p50.back());
        std::printf(" %10.1f %10.2fx\n", percentile(nocork, 0.5), p50[0] / percentile(nocork, 0.5));
        std::fflush(stdout);
        for (std::size_t i = 0; out && i < p50.size(); ++i)
            out << columnName(transports[i]) << ',' << bytes << ',' << p50[i] << ',' << p99[i]
                << '\n';
        if (out)
            out << "smcd-nocork," << bytes << ',' << percentile(nocork, 0.5) << ','
                << percentile(nocork, 0.99) << '\n';
    }
    return 0;
}
