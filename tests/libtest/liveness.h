// SPDX-License-Identifier: MIT
// Liveness checks for tests: a condition that comes true in time, a call that returns in time,
// and the CPU a wait cost.
#pragma once

#include <sys/resource.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <future>
#include <memory>
#include <thread>

namespace smc::test
{

// Polls f until it holds (true) or `limit` passed (false); sanitizer builds are slow.
template <typename F>
bool eventually(F f, std::chrono::milliseconds limit = std::chrono::seconds(10))
{
    const auto end = std::chrono::steady_clock::now() + limit;
    while (!f()) {
        if (std::chrono::steady_clock::now() > end)
            return false;
        std::this_thread::sleep_for(std::chrono::milliseconds(2));
    }
    return true;
}

// CPU time this process used (every thread), to tell sleeping from spinning.
inline std::chrono::microseconds processCpu()
{
    rusage u{};
    ::getrusage(RUSAGE_SELF, &u);
    return std::chrono::seconds(u.ru_utime.tv_sec + u.ru_stime.tv_sec) +
           std::chrono::microseconds(u.ru_utime.tv_usec + u.ru_stime.tv_usec);
}

// f() on a thread of its own. A call that does not return in `limit` cannot be unwound: the
// test says so and ends the process.
template <typename F> auto within(std::chrono::seconds limit, F f) -> decltype(f())
{
    auto task = std::make_shared<std::packaged_task<decltype(f())()>>(std::move(f));
    auto result = task->get_future();
    std::thread([task] { (*task)(); }).detach();
    if (result.wait_for(limit) != std::future_status::ready) {
        std::fprintf(stderr, "FAILED: the call did not return within %lld s\n",
                     static_cast<long long>(limit.count()));
        std::abort();
    }
    return result.get();
}

} // namespace smc::test
