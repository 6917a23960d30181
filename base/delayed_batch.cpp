// SPDX-License-Identifier: MIT
// DelayedBatch: two generations of tasks and one timer.
#include "base/delayed_batch.h"

#include <utility>

namespace smc
{

DelayedBatch::DelayedBatch(Executor& executor, std::chrono::milliseconds delay)
    : delay_(delay), queue_(executor)
{
}

DelayedBatch::~DelayedBatch()
{
    close();
}

void DelayedBatch::post(Task task)
{
    MutexLocker lock(mutex_);
    if (closed_)
        return;
    young_.push_back(std::move(task));
    if (!std::exchange(armed_, true))
        queue_.postAfter(delay_, [this] { tick(); });
}

void DelayedBatch::tick()
{
    std::vector<Task> due;
    {
        MutexLocker lock(mutex_);
        due.swap(aged_);
        aged_.swap(young_);
        armed_ = !aged_.empty();
        if (armed_)
            queue_.postAfter(delay_, [this] { tick(); });
    }
    for (Task& task : due)
        task();
}

void DelayedBatch::close()
{
    std::vector<Task> young, aged; // destroyed after the lock: their captures may post again
    {
        MutexLocker lock(mutex_);
        closed_ = true;
        young.swap(young_);
        aged.swap(aged_);
    }
    queue_.close(); // waits for a running tick; its timer is cancelled
}

} // namespace smc
