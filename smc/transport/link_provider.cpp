// SPDX-License-Identifier: MIT
// LinkProvider: the handlers told when a path comes up.
#include "smc/transport/link_provider.h"

namespace smc
{

int LinkProvider::watchPaths(std::function<void()> handler)
{
    MutexLocker lock(watchersMutex_);
    watchers_.emplace(nextWatcher_, std::move(handler));
    return nextWatcher_++;
}

void LinkProvider::unwatchPaths(int id)
{
    MutexLocker lock(watchersMutex_); // waits for a running pathUp()
    watchers_.erase(id);
}

void LinkProvider::pathUp()
{
    // Under the lock, so that unwatchPaths() waits for us; the handlers do not block.
    MutexLocker lock(watchersMutex_);
    for (auto& [id, handler] : watchers_)
        handler();
}

} // namespace smc
