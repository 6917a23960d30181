// SPDX-License-Identifier: MIT
// sleepingRoundTrips: what a round trip costs here when each side sleeps until the other wakes it.
#pragma once

#include <sched.h>

#include <utility>
#include <vector>

namespace smc::bench
{

// The CPUs this process may run on, in order.
std::vector<int> allowedCpus();

// Where the two sides of a round trip run.
enum class Placement { OneCpu, TwoCpus };
// Their CPUs as `placement` says, {ours, theirs}: the first (two) we may use. Dies if TwoCpus
// is asked with fewer than two.
std::pair<int, int> placementCpus(Placement placement);
// Pins the calling thread (and the processes it forks after) to `cpu`; dies if it cannot.
void pinTo(int cpu);
// The calling thread's CPU affinity, put back when this goes.
class SavedAffinity
{
public:
    SavedAffinity();
    ~SavedAffinity();
    SavedAffinity(const SavedAffinity&) = delete;
    SavedAffinity& operator=(const SavedAffinity&) = delete;

private:
    cpu_set_t mask_;
};
// Between threads of this process, or between this process and a child.
enum class Sides { Threads, Processes };

// Round trips for `seconds` (after a warm-up) in which each side waits in FUTEX_WAIT on a
// word in shared memory until the other bumps it and calls FUTEX_WAKE: no spinning, no
// yielding. Both sides are pinned (TwoCpus: the first two CPUs we may use). Returns each
// round trip's time in microseconds. Dies (bench/common/die.h) if TwoCpus is asked with
// fewer than two CPUs, or if the other side stops answering for a second.
std::vector<double> sleepingRoundTrips(double seconds, Placement placement, Sides sides);

} // namespace smc::bench
