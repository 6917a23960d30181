// SPDX-License-Identifier: MIT
// stream: MB/s of one connection between two processes: SMC-D, TCP and SMC-R side by side.
#include <array>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <fstream>
#include <map>
#include <string>
#include <thread>
#include <tuple>
#include <utility>
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

// A column: a transport, with autocorking on our end or not (TCP: always as it is).
struct Column {
    Transport transport;
    bool autocork;
    std::string name;
};

// One cell: `senders` threads each sending `bytes`-sized messages on one connection for
// `seconds`; the peer counts what arrived. MB/s.
double streamCell(SmcStack& stack, const PeerProcess& peer, const Column& column, std::size_t bytes,
                  unsigned senders, double seconds)
{
    Socket s = peer.connect(stack, column.transport, [&](SocketOptions& o) {
        if (!column.autocork)
            o.autocorkBytes = 0;
    });
    const std::array<std::byte, 1> command{static_cast<std::byte>(PeerCommand::Sink)};
    if (!s.send(command))
        die("send", std::make_error_code(std::errc::io_error));
    std::atomic<std::uint64_t> sent{0};
    const auto start = Clock::now();
    const auto end = start + std::chrono::duration<double>(seconds);
    auto sender = [&] {
        std::vector<std::byte> msg(bytes, std::byte{0x5a});
        std::uint64_t mine = 0;
        while (Clock::now() < end) {
            for (int i = 0; i < 16; ++i) {
                std::span<const std::byte> left(msg);
                while (!left.empty()) {
                    Result<std::size_t> n = s.send(left);
                    if (!n)
                        die("send", n.error());
                    left = left.subspan(*n);
                }
                mine += bytes;
            }
        }
        sent += mine;
    };
    std::vector<std::thread> threads;
    for (unsigned i = 1; i < senders; ++i)
        threads.emplace_back(sender);
    sender();
    for (std::thread& t : threads)
        t.join();
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
    unsigned senders = 1;
    unsigned rounds = 5;
    std::string csv;
    PeerSetup setup;
    Args args("[--seconds S] [--sizes B,B,...] [--senders N] [--rounds R] [--csv FILE]\n"
              "[--busy-poll US] [--smcr DEVICE] [--host ADDR]\n"
              "One connection per cell to a server process (this program, re-run), N threads\n"
              "sending messages of each size on it for S seconds; MB/s as the server counted\n"
              "them. SMC-D with autocorking and without (-nocork), TCP, and SMC-R over DEVICE\n"
              "if given; on ADDR (default 127.0.0.1; SMC-R needs an address whose subnet the\n"
              "device's GID is in). Each cell is the median of R rounds of S/R seconds; the\n"
              "columns of a row take turns round by round, each leading one round in turn, so\n"
              "that a noisy moment or the cell before moves one round of every column rather\n"
              "than one column.\n");
    args.real("--seconds", seconds, 0, 3600)
        .wholeList("--sizes", sizes, 1, 64u << 20)
        .whole("--senders", senders, 1, 1024)
        .whole("--rounds", rounds, 1, 100)
        .text("--csv", csv)
        .whole("--busy-poll", setup.busyPollUs, 0, 1'000'000)
        .text("--smcr", setup.smcrDevice)
        .text("--host", setup.host);
    args.parse(argc, argv);

    PeerProcess peer(argv[0], setup);
    std::unique_ptr<SmcStack> stack = peer.clientStack();
    std::vector<Column> columns;
    for (Transport t : peer.transports()) {
        columns.push_back({t, true, columnName(t)});
        if (t != Transport::Tcp)
            columns.push_back({t, false, std::string(columnName(t)) + "-nocork"});
    }
    std::ofstream out;
    if (!csv.empty()) {
        out.open(csv);
        out << "transport,msg_bytes,mb_per_s,senders\n";
    }
    std::printf("%u sender%s per connection\n%10s", senders, senders == 1 ? "" : "s", "msg_bytes");
    for (const Column& c : columns)
        std::printf(" %12s", (c.name + " MB/s").c_str());
    for (const Column& c : columns)
        if (c.transport != Transport::Tcp && c.autocork)
            std::printf(" %12s %12s", (c.name + "/tcp").c_str(), (c.name + "/nocork").c_str());
    std::printf("\n");
    // Per SMC transport: the lowest autocork/no-cork ratio of any size and where, and the
    // ratio at 64 B (0: not measured).
    struct Cork {
        double lowest = 0;
        unsigned lowestAt = 0;
        double at64 = 0;
    };
    std::map<Transport, Cork> corks;
    for (unsigned bytes : sizes) {
        // Side by side in one run: the columns of a row take turns, round by round.
        std::vector<std::vector<double>> samples(columns.size());
        for (unsigned r = 0; r < rounds; ++r)
            for (std::size_t k = 0; k < columns.size(); ++k) {
                const std::size_t i = (r + k) % columns.size(); // each column leads in turn
                samples[i].push_back(
                    streamCell(*stack, peer, columns[i], bytes, senders, seconds / rounds));
            }
        std::vector<double> row;
        for (auto& cell : samples)
            row.push_back(median(std::move(cell)));
        std::printf("%10u", bytes);
        for (double v : row)
            std::printf(" %12.1f", v);
        for (std::size_t i = 0; i + 1 < row.size(); ++i)
            if (columns[i].autocork) {
                const double cork = row[i] / row[i + 1];
                std::printf(" %11.2fx %11.2fx", row[i] / row.back(), cork);
                Cork& c = corks[columns[i].transport];
                if (c.lowestAt == 0 || cork < c.lowest)
                    std::tie(c.lowest, c.lowestAt) = std::pair(cork, bytes);
                if (bytes == 64)
                    c.at64 = cork;
            }
        std::printf("\n");
        std::fflush(stdout);
        for (std::size_t i = 0; out && i < row.size(); ++i)
            out << columns[i].name << ',' << bytes << ',' << row[i] << ',' << senders << '\n';
    }
    const char* plural = senders == 1 ? "" : "s";
    for (const auto& [t, c] : corks)
        std::printf("target %s autocork/no-cork >= 0.98x at every size: %s (lowest %.2fx, at %u "
                    "B; %u sender%s)\n",
                    columnName(t), c.lowest >= 0.98 ? "met" : "MISSED", c.lowest, c.lowestAt,
                    senders, plural);
    // Linux's autocorking on SMC-R: 3.9-4.6x at up to 1 KiB (qperf tcp_bw).
    if (auto r = corks.find(Transport::SmcR); r != corks.end() && r->second.at64 > 0)
        std::printf("target smcr autocork/no-cork >= 3x at 64 B: %s (%.2fx; %u sender%s)\n",
                    r->second.at64 >= 3 ? "met" : "MISSED", r->second.at64, senders, plural);
    return 0;
}
