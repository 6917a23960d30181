// SPDX-License-Identifier: MIT
// DelayedBatch: tasks that should wait a while, run in batches on an executor's short-task thread.
#pragma once

#include <chrono>
#include <vector>

#include "base/executor.h"
#include "base/mutex.h"

namespace smc
{

// For work that is worth doing only for what is still there after a while (watching a long-lived
// connection's socket): each task runs between `delay` and twice that after its post, with the
// others posted near it, so thousands of posts a second cost one timer per `delay`.
class DelayedBatch
{
public:
    DelayedBatch(Executor& executor, std::chrono::milliseconds delay);
    // close().
    ~DelayedBatch();
    DelayedBatch(const DelayedBatch&) = delete;
    DelayedBatch& operator=(const DelayedBatch&) = delete;

    // Never blocks (a lock held for a push). After close() the task is dropped.
    void post(Task task);
    // No task runs after this returns: those waiting are dropped, a running batch is waited
    // for (unless called from one of its tasks).
    void close();

private:
    void tick();

    const std::chrono::milliseconds delay_;
    SerialQueue queue_;
    Mutex mutex_;
    std::vector<Task> young_ SMC_GUARDED_BY(mutex_); // posted since the last tick
    std::vector<Task> aged_ SMC_GUARDED_BY(mutex_);  // posted before it: run at the next
    bool armed_ SMC_GUARDED_BY(mutex_) = false;
    bool closed_ SMC_GUARDED_BY(mutex_) = false;
};

} // namespace smc
