// SPDX-License-Identifier: MIT
// stream: MB/s of one connection between two processes: SMC-D, TCP and SMC-R side by side.
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
double streamCell(SmcStack& stack, const PeerProcess& peer, Transport t, std::size_t bytes,
                  double seconds)
{
    Socket s = peer.connect(stack, t);
    const std::array<std::byte, 1> command{static_cast<std::byte>(PeerCommand::Sink)};
    if (!s.send(command))
        die("send", std::make_error_code(std::errc::io_error));
    std::vector<std::byte> msg(bytes, std::byte{0x5a});
    std::uint64_t sent = 0;
    const auto start = Clock::now();
    const auto end = start + std::chrono::duration<double>(seconds);
    while (Clock::now() < end) {
        for (int i = 0; i < 16; ++i) {
            std::span<const std::byte> left(msg);
            while (!left.empty()) {
                Result<std::size_t> n = s.send(left);
                if (!n)
                    die("send", n.error());
                left = left.subspan(*n);
            }
            sent += bytes;
        }
    }
    if (!s.shutdown(Shutdown::Write))
        die("shutdown", std::make_error_code(std::errc::io_error));
    std::uint64_t total = 0;
    std::span<std::byte> into = std::as_writable_bytes(std::span(&total, 1));
    while (!into.empty()) {
        Result<std::size_t> n = s.recv(into);
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
    PeerSetup setup;
    Args args("[--seconds S] [--sizes B,B,...] [--csv FILE] [--busy-poll US] [--smcr DEVICE]\n"
              "[--host ADDR]\n"
              "One connection per cell to a server process (this program, re-run), sending\n"
              "messages of each size for S seconds; MB/s as the server counted them. SMC-D and\n"
              "TCP, and SMC-R over DEVICE if given; on ADDR (default 127.0.0.1; SMC-R needs an\n"
              "address whose subnet the device's GID is in).\n");
    args.real("--seconds", seconds, 0, 3600)
        .wholeList("--sizes", sizes, 1, 64u << 20)
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
        out << "transport,msg_bytes,mb_per_s\n";
    }
    std::printf("%10s", "msg_bytes");
    for (Transport t : transports)
        std::printf(" %7s MB/s", columnName(t));
    for (Transport t : transports)
        if (t != Transport::Tcp)
            std::printf(" %9s/tcp", columnName(t));
    std::printf("\n");
    for (unsigned bytes : sizes) {
        // Side by side in one run: the cells of a row follow each other.
        std::vector<double> row;
        for (Transport t : transports)
            row.push_back(streamCell(*stack, peer, t, bytes, seconds));
        std::printf("%10u", bytes);
        for (double v : row)
            std::printf(" %12.1f", v);
        for (std::size_t i = 0; i + 1 < row.size(); ++i)
            std::printf(" %12.2fx", row[i] / row.back());
        std::printf("\n");
        std::fflush(stdout);
        for (std::size_t i = 0; out && i < row.size(); ++i)
            out << columnName(transports[i]) << ',' << bytes << ',' << row[i] << '\n';
    }
    return 0;
}
