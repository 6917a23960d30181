// SPDX-License-Identifier: MIT
// zerocopy_recv: CPU time per byte received, recv into a buffer vs views of the RMB (seed 002).
#include <time.h>

#include <algorithm>
#include <array>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <vector>

#include "bench/common/args.h"
#include "bench/common/die.h"
#include "bench/common/peer_process.h"

using namespace smc;
using namespace smc::bench;

namespace
{

double threadCpuSeconds()
{
    timespec ts{};
    ::clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
    return static_cast<double>(ts.tv_sec) + static_cast<double>(ts.tv_nsec) * 1e-9;
}

// What the application does with each byte it receives, the same in both modes: a sum of
// 8-byte words (the bytes are read once, in place or from the copy).
std::uint64_t consume(std::span<const std::byte> bytes)
{
    std::uint64_t sum = 0;
    std::size_t i = 0;
    for (; i + 8 <= bytes.size(); i += 8) {
        std::uint64_t w;
        std::memcpy(&w, bytes.data() + i, 8);
        sum += w;
    }
    for (; i < bytes.size(); ++i)
        sum += std::to_integer<std::uint64_t>(bytes[i]);
    return sum;
}

struct Cell {
    double cpuNsPerKiB;
    double mbPerS;
    std::uint64_t sum;
};

// The peer sends `count` messages of `bytes`; we read them as an RPC server would, one
// message at a time into a buffer of that size (copy), or as views (zero copy).
Cell receiveCell(SmcStack& stack, const PeerProcess& peer, bool views, std::size_t bytes,
                 std::uint64_t count, unsigned threshold)
{
    Socket s = peer.connect(stack, Transport::SmcD,
                            [&](SocketOptions& o) { o.zeroCopyThreshold = threshold; });
    std::array<std::byte, 13> command{};
    command[0] = static_cast<std::byte>(PeerCommand::Source);
    const auto size = static_cast<std::uint32_t>(bytes);
    std::memcpy(command.data() + 1, &size, 4);
    std::memcpy(command.data() + 5, &count, 8);
    for (std::span<const std::byte> left(command); !left.empty();) {
        Result<std::size_t> n = s.send(left);
        if (!n)
            die("send", n.error());
        left = left.subspan(*n);
    }
    std::vector<std::byte> buffer(bytes);
    std::uint64_t total = 0, sum = 0;
    const double cpu0 = threadCpuSeconds();
    const auto wall0 = std::chrono::steady_clock::now();
    for (;;) {
        if (views) {
            Result<RecvView> v = s.recvZeroCopy(buffer);
            if (!v)
                die("recvZeroCopy", v.error());
            if (v->size() == 0)
                break;
            for (const auto& piece : v->view)
                sum += consume(piece);
            sum += consume(std::span(buffer).first(v->copied));
            total += v->size();
            if (v->viewBytes() > 0)
                if (Result<void> r = s.releaseView(); !r)
                    die("releaseView", r.error());
            continue;
        }
        std::size_t have = 0; // one whole message, then use it
        while (have < bytes) {
            Result<std::size_t> n = s.recv(std::span(buffer).subspan(have));
            if (!n)
                die("recv", n.error());
            if (*n == 0)
                break;
            have += *n;
        }
        if (have == 0)
            break;
        sum += consume(std::span(buffer).first(have));
        total += have;
    }
    const double cpu = threadCpuSeconds() - cpu0;
    const double wall =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - wall0).count();
    if (total != bytes * count)
        die("stream", std::make_error_code(std::errc::protocol_error));
    return {cpu * 1e9 / (static_cast<double>(total) / 1024.0),
            static_cast<double>(total) / wall / 1e6, sum};
}

} // namespace

int main(int argc, char** argv)
{
    if (servePeerIfAsked(argc, argv))
        return 0;
    std::vector<unsigned> sizes = {1024, 4096, 32768, 262144};
    unsigned megabytes = 256;
    unsigned rounds = 3;
    unsigned threshold = SocketOptions{}.zeroCopyThreshold;
    std::string csv;
    PeerSetup setup;
    setup.busyPollUs = 0; // a waiting receiver sleeps: CPU time is the work, not the spin
    Args args("[--sizes B,B,...] [--megabytes M] [--rounds R] [--threshold B] [--csv FILE]\n"
              "[--busy-poll US]\n"
              "A server process (this program, re-run) sends M MiB in messages of each size\n"
              "over SMC-D; we read them with recv into a message buffer (copy) and with\n"
              "recvZeroCopy (views, copies below B bytes), the same work on every byte, and\n"
              "compare the receiving thread's CPU time per KiB. Median of R runs per cell,\n"
              "the two modes alternating.\n");
    args.wholeList("--sizes", sizes, 1, 64u << 20)
        .whole("--megabytes", megabytes, 1, 1 << 20)
        .whole("--rounds", rounds, 1, 100)
        .whole("--threshold", threshold, 0, 1u << 30)
        .text("--csv", csv)
        .whole("--busy-poll", setup.busyPollUs, 0, 1'000'000);
    args.parse(argc, argv);

    PeerProcess peer(argv[0], setup);
    std::unique_ptr<SmcStack> stack = peer.clientStack();
    std::ofstream out;
    if (!csv.empty()) {
        out.open(csv);
        out << "msg_bytes,mode,cpu_ns_per_kib,mb_per_s\n";
    }
    std::printf("%10s %14s %14s %10s %12s %12s\n", "msg_bytes", "copy ns/KiB", "view ns/KiB",
                "view/copy", "copy MB/s", "view MB/s");
    for (unsigned bytes : sizes) {
        const std::uint64_t count =
            std::max<std::uint64_t>(1, (std::uint64_t{megabytes} << 20) / bytes);
        std::vector<Cell> copy, view;
        for (unsigned r = 0; r < rounds; ++r) { // side by side: the modes alternate
            copy.push_back(receiveCell(*stack, peer, false, bytes, count, threshold));
            view.push_back(receiveCell(*stack, peer, true, bytes, count, threshold));
            if (copy.back().sum != view.back().sum) // both read the same bytes
                die("checksum", std::make_error_code(std::errc::protocol_error));
        }
        auto median = [](std::vector<Cell> v) {
            std::sort(v.begin(), v.end(),
                      [](const Cell& a, const Cell& b) { return a.cpuNsPerKiB < b.cpuNsPerKiB; });
            return v[v.size() / 2];
        };
        const Cell c = median(copy), v = median(view);
        std::printf("%10u %14.1f %14.1f %9.2fx %12.1f %12.1f\n", bytes, c.cpuNsPerKiB,
                    v.cpuNsPerKiB, v.cpuNsPerKiB / c.cpuNsPerKiB, c.mbPerS, v.mbPerS);
        std::fflush(stdout);
        if (out) {
            out << bytes << ",copy," << c.cpuNsPerKiB << ',' << c.mbPerS << '\n';
            out << bytes << ",view," << v.cpuNsPerKiB << ',' << v.mbPerS << '\n';
        }
    }
    return 0;
}
