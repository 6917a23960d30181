// SPDX-License-Identifier: MIT
// Registration cost on a real RDMA device: ibv_reg_mr/ibv_dereg_mr per size class, and
// connections/s with pooled (registered once) buffers vs registration per connection.
#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <thread>
#include <vector>

#include "bench/common/args.h"
#include "bench/common/die.h"
#include "pool/buffer_pool.h"
#include "rdma/rdma_registrar.h"
#include "rdma/verbs.h"

namespace
{

using namespace smc;
using namespace smc::rdma;
using bench::die;
using Clock = std::chrono::steady_clock;

constexpr std::size_t kSizes[] = {16384, 32768, 65536, 131072};

double seconds(Clock::time_point a, Clock::time_point b)
{
    return std::chrono::duration<double>(b - a).count();
}

void regCost(const ProtectionDomain& pd, double budget, unsigned maxClass)
{
    std::printf(
        "\nibv_reg_mr + ibv_dereg_mr per size class (RMB access: local + remote write)\n\n");
    std::printf("%9s | %10s %10s %12s %7s\n", "size", "reg us", "dereg us", "reg us/MiB", "rounds");
    std::printf("----------+-----------------------------------------------\n");
    for (unsigned cls = 0; cls <= maxClass; ++cls) {
        const std::size_t bytes = classBytes(cls);
        std::shared_ptr<std::byte> mem = MmapAllocator::instance().allocate(bytes);
        if (!mem)
            die("allocate", std::make_error_code(std::errc::not_enough_memory));
        std::memset(mem.get(), 1, bytes); // pages present, as a used buffer's are
        double reg = 0, dereg = 0;
        unsigned rounds = 0;
        const auto end = Clock::now() + std::chrono::duration<double>(budget);
        do {
            const auto t0 = Clock::now();
            Clock::time_point t1;
            {
                Result<MemoryRegion> mr = MemoryRegion::create(
                    pd, mem.get(), bytes, IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE);
                t1 = Clock::now();
                if (!mr)
                    die("ibv_reg_mr", mr.error());
            } // ibv_dereg_mr
            const auto t2 = Clock::now();
            reg += seconds(t0, t1);
            dereg += seconds(t1, t2);
            ++rounds;
        } while (Clock::now() < end || rounds < 5);
        std::printf("%7zuK | %10.1f %10.1f %12.1f %7u\n", bytes >> 10, reg / rounds * 1e6,
                    dereg / rounds * 1e6, reg / rounds * 1e6 / (double(bytes) / (1 << 20)), rounds);
    }
}

// The lock-contention loop with RDMA-registered buffers: acquire an RMB and a
// sndbuf, touch the request, release. "pooled" reuses registered buffers;
// "per-conn" registers and deregisters both buffers for every connection, as
// rsockets does per socket (memory itself reused, so only registration differs).
double connLoop(const ProtectionDomain& pd, bool pooled, unsigned threads, double budget)
{
    RdmaRegistrar registrar;
    registrar.setLink(0, pd);
    std::unique_ptr<BufferPool> pool;
    if (pooled) {
        pool = std::move(BufferPool::create(PoolConfig{}, registrar)).value();
        if (Result<void> r = pool->addLink(0); !r)
            die("addLink", r.error());
    }
    std::atomic<bool> stop{false};
    std::vector<std::uint64_t> counts(threads);
    std::vector<std::thread> workers;
    for (unsigned i = 0; i < threads; ++i) {
        workers.emplace_back([&, i] {
            std::uint64_t n = 0, rng = 88172645463325252ull + i;
            std::vector<std::shared_ptr<std::byte>> mine;
            for (std::size_t s : kSizes)
                mine.push_back(MmapAllocator::instance().allocate(s * 2));
            while (!stop.load(std::memory_order_relaxed)) {
                rng ^= rng << 13, rng ^= rng >> 7, rng ^= rng << 17;
                const unsigned k = rng & 3;
                if (pooled) {
                    Result<BufferRef> rmb = pool->acquire(BufferKind::Rmb, kSizes[k]);
                    Result<BufferRef> snd = pool->acquire(BufferKind::Sndbuf, kSizes[k]);
                    if (!rmb || !snd)
                        die("acquire", rmb ? snd.error() : rmb.error());
                    std::memset(snd->data(), 1, 64);
                    (void)pool->release(*snd);
                    (void)pool->release(*rmb);
                } else {
                    std::byte* base = mine[k].get();
                    Result<MemoryRegion> rmb = MemoryRegion::create(
                        pd, base, kSizes[k], IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE);
                    Result<MemoryRegion> snd = MemoryRegion::create(pd, base + kSizes[k], kSizes[k],
                                                                    IBV_ACCESS_LOCAL_WRITE);
                    if (!rmb || !snd)
                        die("ibv_reg_mr", rmb ? snd.error() : rmb.error());
                    std::memset(base + kSizes[k], 1, 64);
                }
                ++n;
            }
            counts[i] = n;
        });
    }
    const auto t0 = Clock::now();
    std::this_thread::sleep_for(std::chrono::duration<double>(budget));
    stop = true;
    for (auto& w : workers)
        w.join();
    const double elapsed = seconds(t0, Clock::now());
    std::uint64_t total = 0;
    for (std::uint64_t c : counts)
        total += c;
    return double(total) / elapsed;
}

} // namespace

int main(int argc, char** argv)
{
    double budget = 0.5;
    unsigned maxClass = 8; // 4 MiB
    const char* env = std::getenv("SMC_RDMA_DEVICE");
    std::string device = env ? env : "";
    bench::Args("[--seconds S] [--max-class N] [--device NAME]\n")
        .real("--seconds", budget, 0, 3600)
        .whole("--max-class", maxClass, 0, kMaxClassSmcR)
        .text("--device", device)
        .parse(argc, argv);
    Result<Context> ctx = Context::open(device);
    if (!ctx)
        die("no RDMA device", ctx.error());
    Result<ProtectionDomain> pd = ProtectionDomain::create(*ctx);
    if (!pd)
        die("ibv_alloc_pd", pd.error());
    std::printf("device %s%s\n", ctx->name().c_str(),
                std::getenv("SMC_RXE_GUEST")
                    ? " (soft-RoCE in a TCG guest: compare rows, not absolute numbers)"
                    : "");
    regCost(*pd, budget / 4, maxClass);

    std::printf("\nconnections/s: acquire RMB + sndbuf (16..128 KiB), release; %.2f s per cell\n\n",
                budget);
    std::printf("%7s | %12s %12s | %14s\n", "threads", "pooled", "per-conn", "pooled/per-conn");
    std::printf("--------+---------------------------+---------------\n");
    for (unsigned t : {1u, 2u}) {
        const double pooled = connLoop(*pd, true, t, budget);
        const double perConn = connLoop(*pd, false, t, budget);
        std::printf("%7u | %12.0f %12.0f | %14.1f\n", t, pooled, perConn, pooled / perConn);
    }
    return 0;
}
