// SPDX-License-Identifier: MIT
// Buffer traffic while links come and go: connections/s of each pool policy with a background
// thread adding and removing a link every few milliseconds, against the same run without.
#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <thread>
#include <vector>

#include "bench/common/args.h"
#include "bench/common/die.h"
#include "bench/common/stats.h"
#include "pool/buffer_pool.h"

namespace
{

using namespace smc;
using bench::die;
using bench::median;
using Clock = std::chrono::steady_clock;

constexpr std::size_t kSizes[] = {16384, 32768, 65536, 131072};

// Registration without a device: the pool's protocol is what is measured.
// A registration costs a little work, like a cached MR lookup would.
class NullRegistrar final : public Registrar
{
public:
    std::error_code registerBuffer(BufferDesc& desc, unsigned link) override
    {
        desc.registration(link) = {link + 1, link + 1,
                                   reinterpret_cast<std::uintptr_t>(desc.data()), 0};
        return {};
    }
    void unregisterBuffer(BufferDesc& desc, unsigned link) noexcept override
    {
        desc.registration(link) = {};
    }
};

struct Cell {
    double connsPerSec;
    std::uint64_t linkChanges;
};

Cell run(LockPolicy policy, unsigned threads, bool churn, double seconds, double periodMs)
{
    NullRegistrar registrar;
    PoolConfig config;
    config.policy = policy;
    auto pool = std::move(BufferPool::create(config, registrar)).value();
    (void)pool->addLink(0);
    std::atomic<bool> stop{false};
    std::atomic<std::uint64_t> changes{0};
    std::vector<std::uint64_t> counts(threads);
    std::vector<std::thread> workers;
    for (unsigned i = 0; i < threads; ++i) {
        workers.emplace_back([&, i] {
            std::uint64_t n = 0, rng = 0x9e3779b97f4a7c15ull * (i + 1);
            while (!stop.load(std::memory_order_relaxed)) {
                rng ^= rng << 13, rng ^= rng >> 7, rng ^= rng << 17;
                Result<BufferRef> rmb = pool->acquire(BufferKind::Rmb, kSizes[rng & 3]);
                Result<BufferRef> snd = pool->acquire(BufferKind::Sndbuf, kSizes[rng & 3]);
                if (!rmb || !snd)
                    die("acquire", rmb ? snd.error() : rmb.error());
                std::memset(snd->data(), 1, 64);
                (void)pool->release(*snd);
                (void)pool->release(*rmb);
                ++n;
            }
            counts[i] = n;
        });
    }
    std::thread churner;
    if (churn) {
        churner = std::thread([&] {
            const auto period = std::chrono::duration<double, std::milli>(periodMs);
            while (!stop.load()) {
                (void)pool->addLink(1);
                std::this_thread::sleep_for(period / 2);
                (void)pool->removeLink(1);
                std::this_thread::sleep_for(period / 2);
                changes += 2;
            }
        });
    }
    // Workers publish their counts at the end, so the window is the whole run.
    const auto t0 = Clock::now();
    std::this_thread::sleep_for(std::chrono::duration<double>(seconds));
    stop = true;
    for (auto& w : workers)
        w.join();
    const double elapsed = std::chrono::duration<double>(Clock::now() - t0).count();
    if (churner.joinable())
        churner.join();
    std::uint64_t total = 0;
    for (std::uint64_t c : counts)
        total += c;
    return {double(total) / elapsed, changes.load()};
}

} // namespace

int main(int argc, char** argv)
{
    double seconds = 0.3, periodMs = 4;
    unsigned rounds = 3;
    bench::Args("[--seconds S] [--period-ms P] [--rounds N]\n")
        .real("--seconds", seconds, 0, 3600)
        .real("--period-ms", periodMs, 0, 60000)
        .whole("--rounds", rounds, 1, 1000)
        .parse(argc, argv);
    std::printf("connections/s with a link added and removed every %.1f ms (registration on a\n"
                "device-less registrar), median of %u interleaved rounds of %.2f s\n\n",
                periodMs, rounds, seconds);
    std::printf("%7s %8s | %12s %12s | %7s %12s\n", "threads", "policy", "quiet", "churn", "ratio",
                "link changes");
    std::printf("-----------------+---------------------------+---------------------\n");
    double worstDefault = 1e9;
    for (unsigned t : {1u, 2u, 4u, 8u}) {
        for (LockPolicy p : {LockPolicy::Global, LockPolicy::Default}) {
            std::vector<double> quiet, churn;
            std::uint64_t changes = 0;
            for (unsigned r = 0; r < rounds; ++r) {
                quiet.push_back(run(p, t, false, seconds, periodMs).connsPerSec);
                Cell c = run(p, t, true, seconds, periodMs);
                churn.push_back(c.connsPerSec);
                changes += c.linkChanges;
            }
            const double ratio = median(churn) / median(quiet);
            if (p == LockPolicy::Default)
                worstDefault = std::min(worstDefault, ratio);
            std::printf("%7u %8s | %12.0f %12.0f | %7.2f %12llu\n", t, toString(p), median(quiet),
                        median(churn), ratio, static_cast<unsigned long long>(changes / rounds));
        }
    }
    std::printf("\ntarget: default with churn >= 0.8x without, at every T: %s (worst %.2f)\n",
                worstDefault >= 0.8 ? "met" : "MISSED", worstDefault);
    return 0;
}
