// SPDX-License-Identifier: MIT
// The seed-000 experiment at library level: connections/s per thread count for each lock policy.
//
// Every "connection" acquires an RMB and a sndbuf of one of four sizes from
// one shared SMC-D pool on loopback-ism, writes a 64-byte request into its
// peer's DMB with move_data (signalled, as a CDC message would be), and
// releases both. The three pool policies and a "bound" (a thread-private free
// list, nothing shared) run interleaved in one process; each cell is the
// median of several rounds.
#include <algorithm>
#include <atomic>
#include <cerrno>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

#include "bench/common/args.h"
#include "bench/common/die.h"
#include "bench/common/stats.h"
#include "pool/buffer_pool.h"
#include "smc/ism/ism_registrar.h"
#include "smc/ism/loopback_ism.h"

namespace
{

using namespace smc;
using bench::die;
using bench::median;
using Clock = std::chrono::steady_clock;

constexpr std::size_t kSizes[] = {16384, 32768, 65536, 131072};
constexpr std::size_t kRequestBytes = 64;
constexpr std::size_t kCdcHeader = 32; // SMC-D data starts after the CDC header

enum class Column { Global, Bucket, Default, Bound };
constexpr Column kColumns[] = {Column::Global, Column::Bucket, Column::Default, Column::Bound};

const char* name(Column c)
{
    switch (c) {
    case Column::Global:
        return "global";
    case Column::Bucket:
        return "bucket";
    case Column::Default:
        return "default";
    case Column::Bound:
        return "bound";
    }
    return "?";
}

struct Options {
    std::vector<unsigned> threads{1, 2, 4, 8, 16, 32, 64, 128};
    double seconds = 0.25;
    unsigned rounds = 3;
    std::string csv;
    std::string plot;
    std::vector<Column> columns{kColumns, kColumns + 4};
    bool contention = true;
    bool reuse = true;
};

Options parse(int argc, char** argv)
{
    Options o;
    std::string mode = "all";
    bench::Args args("[--threads 1,2,4,...] [--seconds S] [--rounds N]\n"
                     "          [--csv FILE] [--plot FILE.png] [--mode all|contention|reuse]\n"
                     "          [--columns global,bucket,default,bound]\n"
                     "  --seconds  measured time per cell (default 0.25; +1/3 warm-up)\n"
                     "  --rounds   interleaved rounds; cells report the median (default 3)\n");
    args.wholeList("--threads", o.threads, 1, 1024)
        .real("--seconds", o.seconds, 0, 3600)
        .whole("--rounds", o.rounds, 1, 100)
        .custom("--columns",
                [&o](std::string_view list) -> std::optional<std::string> {
                    std::vector<Column> columns;
                    for (std::size_t pos = 0; pos <= list.size();) {
                        const std::size_t comma = std::min(list.find(',', pos), list.size());
                        const std::string_view one = list.substr(pos, comma - pos);
                        const Column* c = std::find_if(kColumns, kColumns + 4,
                                                       [&](Column x) { return one == name(x); });
                        if (c == kColumns + 4)
                            return "want global, bucket, default or bound, got '" +
                                   std::string(one) + "'";
                        columns.push_back(*c);
                        pos = comma + 1;
                    }
                    o.columns = std::move(columns);
                    return std::nullopt;
                })
        .text("--csv", o.csv)
        .text("--plot", o.plot)
        .choice("--mode", mode, {"all", "contention", "reuse"})
        .parse(argc, argv);
    o.contention = mode != "reuse";
    o.reuse = mode != "contention";
    return o;
}

// xorshift: a size draw must cost next to nothing.
struct Rng {
    std::uint64_t s;
    std::uint64_t next() noexcept
    {
        s ^= s << 13;
        s ^= s >> 7;
        s ^= s << 17;
        return s;
    }
};

struct alignas(64) Counter {
    std::atomic<std::uint64_t> ops{0};
};

// Phases a cell goes through; workers poll it once per connection.
enum Phase : int { Warmup, Stop };

// The bound column's loop: the same work on free lists no other thread sees.
class PrivateLists
{
public:
    explicit PrivateLists(LoopbackIsm& dev) : dev_(dev) {}
    ~PrivateLists()
    {
        for (auto& kind : lists_)
            for (auto& list : kind)
                for (Buf& b : list)
                    if (b.token != 0)
                        (void)dev_.unregisterDmb(b.token);
    }

    struct Buf {
        std::shared_ptr<std::byte> memory;
        DmbToken token = 0;
    };

    Buf get(BufferKind kind, unsigned cls)
    {
        auto& list = lists_[static_cast<unsigned>(kind)][cls];
        if (!list.empty()) {
            Buf b = std::move(list.back());
            list.pop_back();
            return b;
        }
        Buf b{MmapAllocator::instance().allocate(classBytes(cls)), 0};
        if (!b.memory)
            die("bound: allocate", make_error_code(PoolErrc::OutOfMemory));
        if (kind == BufferKind::Rmb) {
            Result<DmbInfo> dmb = dev_.registerDmb(b.memory, classBytes(cls));
            if (!dmb)
                die("bound: register DMB", dmb.error());
            b.token = dmb->token;
        }
        return b;
    }
    void put(BufferKind kind, unsigned cls, Buf b)
    {
        lists_[static_cast<unsigned>(kind)][cls].push_back(std::move(b));
    }

private:
    LoopbackIsm& dev_;
    std::vector<Buf> lists_[kBufferKinds][kSizeClasses];
};

// One cell: `threads` workers for `seconds` after a warm-up; returns conns/s.
double runCell(Column column, unsigned threads, double seconds, LoopbackIsm& dev)
{
    IsmRegistrar registrar(dev);
    std::unique_ptr<BufferPool> pool;
    if (column != Column::Bound) {
        PoolConfig config;
        config.tech = Tech::SmcD;
        config.policy = column == Column::Global   ? LockPolicy::Global
                        : column == Column::Bucket ? LockPolicy::Bucket
                                                   : LockPolicy::Default;
        Result<std::unique_ptr<BufferPool>> created = BufferPool::create(config, registrar);
        if (!created)
            die("create pool", created.error());
        pool = std::move(created).value();
    }

    // Each worker talks to its own peer, whose RMB is a DMB registered up front.
    std::vector<std::shared_ptr<std::byte>> peerMemory(threads);
    std::vector<DmbToken> peers(threads);
    for (unsigned i = 0; i < threads; ++i) {
        peerMemory[i] = MmapAllocator::instance().allocate(kSizes[0]);
        Result<DmbInfo> dmb = dev.registerDmb(peerMemory[i], kSizes[0]);
        if (!dmb)
            die("register peer DMB", dmb.error());
        peers[i] = dmb->token;
    }

    std::atomic<int> phase{Warmup};
    std::vector<Counter> counters(threads);
    std::vector<std::thread> workers;
    workers.reserve(threads);
    for (unsigned i = 0; i < threads; ++i) {
        workers.emplace_back([&, i] {
            Rng rng{0x9e3779b97f4a7c15ull * (i + 1)};
            const DmbToken peer = peers[i];
            std::byte request[kRequestBytes];
            std::memset(request, static_cast<int>(i), sizeof request);
            std::uint64_t ops = 0;
            PrivateLists lists(dev);
            while (phase.load(std::memory_order_relaxed) != Stop) {
                const std::size_t bytes = kSizes[rng.next() & 3];
                if (column == Column::Bound) {
                    const unsigned cls = compressBufferSize(bytes, Tech::SmcD);
                    PrivateLists::Buf rmb = lists.get(BufferKind::Rmb, cls);
                    PrivateLists::Buf snd = lists.get(BufferKind::Sndbuf, cls);
                    std::memcpy(snd.memory.get(), request, sizeof request);
                    if (!dev.moveData(peer, kCdcHeader, {snd.memory.get(), sizeof request}, true))
                        die("move_data", make_error_code(IsmErrc::UnknownToken));
                    lists.put(BufferKind::Sndbuf, cls, std::move(snd));
                    lists.put(BufferKind::Rmb, cls, std::move(rmb));
                } else {
                    Result<BufferRef> rmb = pool->acquire(BufferKind::Rmb, bytes);
                    Result<BufferRef> snd = pool->acquire(BufferKind::Sndbuf, bytes);
                    if (!rmb || !snd)
                        die("acquire", rmb ? snd.error() : rmb.error());
                    std::memcpy(snd->data(), request, sizeof request);
                    if (!dev.moveData(peer, kCdcHeader, {snd->data(), sizeof request}, true))
                        die("move_data", make_error_code(IsmErrc::UnknownToken));
                    if (Result<void> r = pool->release(*snd); !r)
                        die("release", r.error());
                    if (Result<void> r = pool->release(*rmb); !r)
                        die("release", r.error());
                }
                counters[i].ops.store(++ops, std::memory_order_relaxed);
            }
        });
    }

    auto sum = [&] {
        std::uint64_t total = 0;
        for (const Counter& c : counters)
            total += c.ops.load(std::memory_order_relaxed);
        return total;
    };
    std::this_thread::sleep_for(std::chrono::duration<double>(std::max(0.05, seconds / 3)));
    const std::uint64_t before = sum();
    const auto t0 = Clock::now();
    std::this_thread::sleep_for(std::chrono::duration<double>(seconds));
    const std::uint64_t after = sum();
    const auto t1 = Clock::now();
    phase.store(Stop);
    for (auto& w : workers)
        w.join();
    for (DmbToken t : peers)
        (void)dev.unregisterDmb(t);
    return static_cast<double>(after - before) / std::chrono::duration<double>(t1 - t0).count();
}

void contention(const Options& o, LoopbackIsm& dev)
{
    // results[threads][column] = one value per round
    std::map<unsigned, std::map<Column, std::vector<double>>> results;
    for (unsigned round = 0; round < o.rounds; ++round) {
        for (unsigned t : o.threads) {
            // Rotate the order so no column always runs first after a new T.
            const std::size_t n = o.columns.size();
            for (std::size_t k = 0; k < n; ++k) {
                const Column c = o.columns[(k + round + t) % n];
                results[t][c].push_back(runCell(c, t, o.seconds, dev));
            }
        }
    }

    std::printf("\nconnections/s, median of %u interleaved rounds of %.2f s; SMC-D pool on "
                "loopback-ism,\n4 buffer sizes (16/32/64/128 KiB), one link group shared by "
                "all threads; %u cores\n\n",
                o.rounds, o.seconds, std::thread::hardware_concurrency());
    std::printf("%7s | %11s %11s %11s %11s | %13s %14s %13s\n", "threads", "global", "bucket",
                "default", "bound", "bucket/global", "default/global", "default/bound");
    std::printf("--------+-------------------------------------------------+----------------"
                "---------------------------\n");
    std::FILE* csv = nullptr;
    if (!o.csv.empty()) {
        csv = std::fopen(o.csv.c_str(), "w");
        if (csv == nullptr)
            die(o.csv.c_str(), std::error_code(errno, std::generic_category()));
        std::fprintf(csv, "threads,policy,conns_per_s,min,max,rounds\n");
    }
    bool bucketOk = true, defaultOk = true, boundOk = true;
    for (unsigned t : o.threads) {
        std::map<Column, double> m{{Column::Global, NAN},
                                   {Column::Bucket, NAN},
                                   {Column::Default, NAN},
                                   {Column::Bound, NAN}};
        for (Column c : o.columns) {
            m[c] = median(results[t][c]);
            if (csv != nullptr) {
                const auto [lo, hi] =
                    std::minmax_element(results[t][c].begin(), results[t][c].end());
                std::fprintf(csv, "%u,%s,%.1f,%.1f,%.1f,%u\n", t, name(c), m[c], *lo, *hi,
                             o.rounds);
            }
        }
        const double bg = m[Column::Bucket] / m[Column::Global];
        const double dg = m[Column::Default] / m[Column::Global];
        const double db = m[Column::Default] / m[Column::Bound];
        std::printf("%7u | %11.0f %11.0f %11.0f %11.0f | %13.2f %14.2f %13.2f\n", t,
                    m[Column::Global], m[Column::Bucket], m[Column::Default], m[Column::Bound], bg,
                    dg, db);
        if (t >= 8) {
            bucketOk &= !(bg < 1.2);
            defaultOk &= !(dg < 3.0);
        }
        boundOk &= !(db < 0.5);
    }
    if (csv != nullptr)
        std::fclose(csv);
    std::printf("\ntargets: bucket/global >= 1.2 at T >= 8: %s; default/global >= 3 at T >= 8: "
                "%s; default within 2x of bound at every T: %s\n",
                bucketOk ? "met" : "MISSED", defaultOk ? "met" : "MISSED",
                boundOk ? "met" : "MISSED");

    if (!o.plot.empty()) {
        const std::string data = o.plot + ".dat";
        std::ofstream out(data);
        for (unsigned t : o.threads) {
            out << t;
            for (Column c : kColumns)
                out << ' ' << (results[t][c].empty() ? NAN : median(results[t][c]));
            out << '\n';
        }
        out.close();
        const std::string script =
            "set terminal png size 900,560; set output '" + o.plot +
            "'; set logscale x 2; set xlabel 'threads'; set ylabel 'connections/s';"
            " set key outside; set grid; set title 'smc-core lock contention (loopback-ism)';"
            " plot '" +
            data +
            "' using 1:2 with linespoints title 'global', '' using 1:3 "
            "with linespoints title 'bucket', '' using 1:4 with linespoints title 'default',"
            " '' using 1:5 with linespoints title 'bound'";
        const std::string cmd = "gnuplot -e \"" + script + "\"";
        if (std::system(cmd.c_str()) != 0)
            std::exit(bench::fail("gnuplot failed (apt-get install gnuplot-nox)"));
        std::remove(data.c_str());
        std::printf("plot written to %s\n", o.plot.c_str());
    }
}

// Single thread, reuse hit: the bucket holds N buffers, N-1 leased and one
// free. Linux-style lists put new buffers at the head, so the free one (the
// oldest) is at the far end of the walk.
void reuseHit(LoopbackIsm& dev)
{
    constexpr unsigned kPopulations[] = {10, 1000, 10000};
    constexpr int kBatches = 51;
    std::printf("\nreuse hit: one acquire+release of a 16 KiB sndbuf, single thread, median of %d "
                "batches of about 1 ms (ns)\n\n",
                kBatches);
    std::printf("%9s | %10s %10s %10s\n", "in bucket", "global", "bucket", "default");
    std::printf("----------+----------------------------------\n");
    IsmRegistrar registrar(dev);
    double worstDefault = 0;
    for (unsigned n : kPopulations) {
        std::printf("%9u |", n);
        for (LockPolicy policy : {LockPolicy::Global, LockPolicy::Bucket, LockPolicy::Default}) {
            PoolConfig config;
            config.tech = Tech::SmcD;
            config.policy = policy;
            auto pool = std::move(BufferPool::create(config, registrar)).value();
            std::vector<BufferRef> held;
            for (unsigned i = 0; i < n; ++i) {
                Result<BufferRef> b = pool->acquire(BufferKind::Sndbuf, kSizes[0]);
                if (!b)
                    die("acquire", b.error());
                held.push_back(*b);
            }
            if (Result<void> r = pool->release(held.front()); !r)
                die("release", r.error());
            auto pair = [&] {
                Result<BufferRef> b = pool->acquire(BufferKind::Sndbuf, kSizes[0]);
                if (!b || !pool->release(*b))
                    die("reuse", b ? make_error_code(PoolErrc::DoubleRelease) : b.error());
            };
            // Size batches to about 1 ms, so a 10,000-entry walk stays affordable.
            const auto probe = Clock::now();
            pair();
            const double probeNs =
                std::chrono::duration<double, std::nano>(Clock::now() - probe).count();
            const int kBatch = static_cast<int>(std::clamp(1e6 / probeNs, 10.0, 20000.0));
            std::vector<double> perOp;
            for (int batch = 0; batch < kBatches; ++batch) {
                const auto t0 = Clock::now();
                for (int i = 0; i < kBatch; ++i)
                    pair();
                perOp.push_back(
                    std::chrono::duration<double, std::nano>(Clock::now() - t0).count() / kBatch);
            }
            const double med = median(perOp);
            if (policy == LockPolicy::Default)
                worstDefault = std::max(worstDefault, med);
            std::printf(" %10.1f", med);
            for (std::size_t i = 1; i < held.size(); ++i)
                (void)pool->release(held[i]);
        }
        std::printf("\n");
    }
    std::printf("\ntarget: default reuse hit <= 100 ns at every population: %s (worst %.1f ns)\n",
                worstDefault <= 100 ? "met" : "MISSED", worstDefault);
}

} // namespace

int main(int argc, char** argv)
{
    const Options o = parse(argc, argv);
#ifndef NDEBUG
    std::printf("note: assertions are on; measure with a --buildtype=release build\n");
#endif
    LoopbackIsm dev;
    if (o.contention)
        contention(o, dev);
    if (o.reuse)
        reuseHit(dev);
    return 0;
}
