// SPDX-License-Identifier: MIT
// stream: MB/s of one connection between two processes, SMC-D and TCP side by side.
#include <array>
#include <chrono>
#include <cstdio>
#include <fstream>
#include <vector>

#include "bench/common/args.h"
#include "bench/common/die.h"
#include "bench/common/peer_process.h"

using namespace smc;
using namespace smc::bench;

namespace
{

using Clock = std::chrono::steady_clock;

// One cell: `bytes`-sized sends for `seconds`; the peer counts what arrived.
double streamCell(SmcStack& stack, const PeerProcess& peer, Transport t, unsigned busyPoll,
                  std::size_t bytes, double seconds)
{
    Result<Socket> s = Socket::connect(stack, "127.0.0.1", peer.port(t), optionsFor(t, busyPoll));
    if (!s)
        die("connect", s.error());
    if (s->transport() != t)
        die("transport", std::make_error_code(std::errc::protocol_not_supported));
    const std::array<std::byte, 1> command{static_cast<std::byte>(PeerCommand::Sink)};
    if (!s->send(command))
        die("send", std::make_error_code(std::errc::io_error));
    std::vector<std::byte> msg(bytes, std::byte{0x5a});
    std::uint64_t sent = 0;
    const auto start = Clock::now();
    const auto end = start + std::chrono::duration<double>(seconds);
    while (Clock::now() < end) {
        for (int i = 0; i < 16; ++i) {
            std::span<const std::byte> left(msg);
            while (!left.empty()) {
                Result<std::size_t> n = s->send(left);
                if (!n)
                    die("send", n.error());
                left = left.subspan(*n);
            }
            sent += bytes;
        }
    }
    if (!s->shutdown(Shutdown::Write))
        die("shutdown", std::make_error_code(std::errc::io_error));
    std::uint64_t total = 0;
    std::span<std::byte> into = std::as_writable_bytes(std::span(&total, 1));
    while (!into.empty()) {
        Result<std::size_t> n = s->recv(into);
        if (!n || *n == 0)
            die("recv count", n ? std::make_error_code(std::errc::connection_reset) : n.error());
        into = into.subspan(*n);
    }
    if (total != sent) // the server counts what arrived: it must be all that was sent
        die("stream", std::make_error_code(std::errc::protocol_error));
    const double elapsed = std::chrono::duration<double>(Clock::now() - start).count();
    return static_cast<double>(total) / elapsed / 1e6;
}

} // namespace

int main(int argc, char** argv)
{
    if (servePeerIfAsked(argc, argv))
        return 0;
    double seconds = 1.0;
    std::vector<unsigned> sizes = {64, 1024, 8192, 65536, 1 << 20};
    std::string csv;
    unsigned busyPoll = 20;
    Args args("[--seconds S] [--sizes B,B,...] [--csv FILE] [--busy-poll US]\n"
              "One connection per cell to a server process (this program, re-run), sending\n"
              "messages of each size for S seconds; MB/s as the server counted them.\n");
    args.real("--seconds", seconds, 0, 3600)
        .wholeList("--sizes", sizes, 1, 64u << 20)
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
        out << "transport,msg_bytes,mb_per_s\n";
    }
    std::printf("%10s %12s %12s %10s\n", "msg_bytes", "smcd MB/s", "tcp MB/s", "smcd/tcp");
    for (unsigned bytes : sizes) {
        // Side by side in one run: the two cells of a row follow each other.
        const double smcd = streamCell(**stack, peer, Transport::SmcD, busyPoll, bytes, seconds);
        const double tcp = streamCell(**stack, peer, Transport::Tcp, busyPoll, bytes, seconds);
        std::printf("%10u %12.1f %12.1f %9.2fx\n", bytes, smcd, tcp, smcd / tcp);
        std::fflush(stdout);
        if (out) {
            out << "smcd," << bytes << ',' << smcd << '\n';
            out << "tcp," << bytes << ',' << tcp << '\n';
        }
    }
    return 0;
}
