// SPDX-License-Identifier: MIT
// Google Benchmark micro-benchmarks of single pool operations (reuse hit per policy, size
// rounding).
#include <benchmark/benchmark.h>

#include "pool/buffer_pool.h"
#include "smc/ism/ism_registrar.h"
#include "smc/ism/loopback_ism.h"

namespace
{

using namespace smc;

// acquire+release of a 16 KiB sndbuf with range(1) buffers in the bucket,
// all but one leased (the free one is the oldest).
void reuseHit(benchmark::State& state)
{
    LoopbackIsm dev;
    IsmRegistrar registrar(dev);
    PoolConfig config;
    config.tech = Tech::SmcD;
    config.policy = static_cast<LockPolicy>(state.range(0));
    auto pool = std::move(BufferPool::create(config, registrar)).value();
    std::vector<BufferRef> held;
    for (std::int64_t i = 0; i < state.range(1); ++i)
        held.push_back(*pool->acquire(BufferKind::Sndbuf, 16384));
    (void)pool->release(held.front());
    for (auto _ : state) {
        Result<BufferRef> b = pool->acquire(BufferKind::Sndbuf, 16384);
        benchmark::DoNotOptimize(b);
        if (!b || !pool->release(*b)) {
            state.SkipWithError("acquire/release failed");
            break;
        }
    }
    state.SetLabel(toString(config.policy));
    for (std::size_t i = 1; i < held.size(); ++i)
        (void)pool->release(held[i]);
}
BENCHMARK(reuseHit)->ArgsProduct({{0, 1, 2}, {10, 1000}});

void sizeClass(benchmark::State& state)
{
    std::size_t bytes = 1;
    for (auto _ : state) {
        benchmark::DoNotOptimize(compressBufferSize(bytes, Tech::SmcR));
        bytes = (bytes * 3 + 1) & ((std::size_t{1} << 29) - 1);
    }
}
BENCHMARK(sizeClass);

} // namespace

BENCHMARK_MAIN();
