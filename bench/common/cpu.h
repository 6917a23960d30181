// SPDX-License-Identifier: MIT
// CPU time of this process or another one, to print what a result cost beside how fast it was.
#pragma once

#include <sys/types.h>

#include <chrono>

namespace smc::bench
{

// User and system time of every thread of this process so far (microsecond resolution).
std::chrono::microseconds processCpu();
// The same for process `pid` from /proc (clock-tick resolution, 10 ms on most systems);
// zero if it cannot be read.
std::chrono::microseconds processCpu(pid_t pid);

} // namespace smc::bench
