// SPDX-License-Identifier: MIT
// sleepingRoundTrips: futex ping-pong between two pinned threads or processes.
#include "bench/common/wakeup.h"

#include <linux/futex.h>
#include <sched.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <new>
#include <thread>

#include "bench/common/die.h"

namespace smc::bench
{

namespace
{

using Clock = std::chrono::steady_clock;

static_assert(std::atomic<std::uint32_t>::is_always_lock_free &&
              sizeof(std::atomic<std::uint32_t>) == 4); // a futex word
struct Words {
    std::atomic<std::uint32_t> ping{0};
    std::atomic<std::uint32_t> pong{0};
    std::atomic<bool> stop{false};
};

// Waits until `w` is no longer `seen`. False if that took more than a second: the other side
// is gone or stuck, and a benchmark must not hang on it.
bool sleepWhile(std::atomic<std::uint32_t>& w, std::uint32_t seen)
{
    const auto end = Clock::now() + std::chrono::seconds(1);
    const timespec slice{0, 100'000'000};
    while (w.load(std::memory_order_acquire) == seen) {
        if (Clock::now() > end)
            return false;
        // Not FUTEX_PRIVATE: the word may be in memory another process maps. EAGAIN (it
        // moved), EINTR and ETIMEDOUT all mean: look again.
        ::syscall(SYS_futex, reinterpret_cast<std::uint32_t*>(&w), FUTEX_WAIT, seen, &slice,
                  nullptr, 0);
    }
    return true;
}

void bump(std::atomic<std::uint32_t>& w)
{
    w.fetch_add(1, std::memory_order_release);
    ::syscall(SYS_futex, reinterpret_cast<std::uint32_t*>(&w), FUTEX_WAKE, 1, nullptr, nullptr, 0);
}

// The other side: answers every ping until told to stop.
void echo(Words& w, int cpu)
{
    pinTo(cpu);
    for (std::uint32_t seen = 0; !w.stop.load(std::memory_order_acquire); ++seen) {
        while (!sleepWhile(w.ping, seen))
            if (w.stop.load(std::memory_order_acquire))
                return;
        bump(w.pong);
    }
}

} // namespace

std::vector<int> allowedCpus()
{
    cpu_set_t set;
    if (::sched_getaffinity(0, sizeof set, &set) != 0)
        dieErrno("sched_getaffinity");
    std::vector<int> cpus;
    for (int c = 0; c < CPU_SETSIZE; ++c)
        if (CPU_ISSET(c, &set))
            cpus.push_back(c);
    return cpus;
}

std::pair<int, int> placementCpus(Placement placement)
{
    const std::vector<int> cpus = allowedCpus();
    if (placement == Placement::TwoCpus && cpus.size() < 2)
        die("a round trip on two CPUs needs two");
    return {cpus[0], placement == Placement::TwoCpus ? cpus[1] : cpus[0]};
}

void pinTo(int cpu)
{
    cpu_set_t one;
    CPU_ZERO(&one);
    CPU_SET(cpu, &one);
    if (::sched_setaffinity(0, sizeof one, &one) != 0)
        dieErrno("sched_setaffinity");
}

SavedAffinity::SavedAffinity()
{
    if (::sched_getaffinity(0, sizeof mask_, &mask_) != 0)
        dieErrno("sched_getaffinity");
}

SavedAffinity::~SavedAffinity()
{
    if (::sched_setaffinity(0, sizeof mask_, &mask_) != 0)
        dieErrno("sched_setaffinity");
}

std::vector<double> sleepingRoundTrips(double seconds, Placement placement, Sides sides)
{
    const SavedAffinity saved;
    const auto [ours, theirs] = placementCpus(placement);

    void* m =
        ::mmap(nullptr, sizeof(Words), PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
    if (m == MAP_FAILED)
        dieErrno("mmap");
    auto* w = new (m) Words;
    std::thread thread;
    pid_t child = -1;
    if (sides == Sides::Threads) {
        thread = std::thread(echo, std::ref(*w), theirs);
    } else {
        std::fflush(nullptr); // a child that dies must not write our buffered output again
        const pid_t parent = ::getpid();
        child = ::fork();
        if (child < 0)
            dieErrno("fork");
        if (child == 0) {
            ::prctl(PR_SET_PDEATHSIG, SIGKILL); // never outlive the benchmark
            if (::getppid() != parent)
                ::_exit(1); // it died before the line above
            echo(*w, theirs);
            ::_exit(0);
        }
    }
    pinTo(ours);

    std::vector<double> trips;
    std::uint32_t seen = 0;
    const auto once = [&] {
        bump(w->ping);
        if (!sleepWhile(w->pong, seen++))
            die("the other side of the round trip stopped answering");
    };
    for (int i = 0; i < 100; ++i)
        once();
    const auto start = Clock::now();
    while (std::chrono::duration<double>(Clock::now() - start).count() < seconds) {
        const auto t0 = Clock::now();
        once();
        trips.push_back(std::chrono::duration<double, std::micro>(Clock::now() - t0).count());
    }

    w->stop.store(true, std::memory_order_release);
    bump(w->ping);
    if (thread.joinable())
        thread.join();
    if (child > 0)
        ::waitpid(child, nullptr, 0);
    ::munmap(m, sizeof(Words));
    return trips;
}

} // namespace smc::bench
