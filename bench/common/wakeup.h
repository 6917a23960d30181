// SPDX-License-Identifier: MIT
// sleepingRoundTrips: what a round trip costs here when each side sleeps until the other wakes it.
#pragma once

#include <vector>

namespace smc::bench
{

// The CPUs this process may run on, in order.
std::vector<int> allowedCpus();

// Where the two sides of sleepingRoundTrip() run.
enum class Placement { OneCpu, TwoCpus };
// Between threads of this process, or between this process and a child.
enum class Sides { Threads, Processes };

// Round trips for `seconds` (after a warm-up) in which each side waits in FUTEX_WAIT on a
// word in shared memory until the other bumps it and calls FUTEX_WAKE: no spinning, no
// yielding. Both sides are pinned (TwoCpus: the first two CPUs we may use). Returns each
// round trip's time in microseconds. Dies (bench/common/die.h) if TwoCpus is asked with
// fewer than two CPUs, or if the other side stops answering for a second.
std::vector<double> sleepingRoundTrips(double seconds, Placement placement, Sides sides);

} // namespace smc::bench
