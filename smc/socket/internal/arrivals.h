// SPDX-License-Identifier: MIT
// Arrivals: a listener's connections waiting for their peer or a first contact, holding no thread.
#pragma once

#include <array>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <unordered_set>

#include "base/executor.h"
#include "base/mutex.h"
#include "base/unique_fd.h"
#include "smc/stack/first_contacts.h"

namespace smc
{

// Connections between two steps of their server handshake, waiting on the executor: for the
// client's next CLC message (the PROPOSAL, then the CONFIRM) to be all queued, or for the
// first contact that an SMC-R handshake is parked behind to end. A client that is slow, or
// sends part of a message and stalls, costs an epoll entry and a timer, not a thread. Each
// connection is settled once, by the first of: what it waits for (`next` gets it, not late),
// its timer (`next` gets it, late), close() (dropped, with `next` and what that holds).
class Arrivals : public std::enable_shared_from_this<Arrivals>
{
public:
    using Next = std::function<void(UniqueFd, bool late)>;
    // A connection's peer host (family and address, no port): IPv4-mapped IPv6 counts as IPv4.
    using Source = std::array<std::uint8_t, 17>;
    static Source sourceOf(int fd) noexcept;

    // `countSources`: whether waitingFrom counts (a client waiting for its server has no use
    // for it, and spares a getpeername per connection).
    explicit Arrivals(Executor& executor, bool countSources = true)
        : executor_(executor), countSources_(countSources)
    {
    }

    // `next` runs once the first CLC message on `fd` is all queued, or shows that none comes
    // (net::firstMessageQueued), here at once when it is; late after `timeout`. False after
    // close() (`fd` and `next` dropped). Never blocks.
    bool awaitMessage(UniqueFd fd, std::chrono::milliseconds timeout, Next next);
    // `next` runs once the first contact with `peer` is over (here at once when it is); late
    // after `timeout`. False after close(). Never blocks.
    bool park(UniqueFd fd, std::chrono::milliseconds timeout, FirstContacts& contacts,
              const FirstContacts::Key& peer, Next next);
    // Connections from `source` that wait here now (0 unless sources are counted). Never
    // blocks.
    std::size_t waitingFrom(const Source& source) const;
    // No new arrival from now on, and no `next` call: the waiting ones are dropped. Blocks
    // until the `next` calls under way returned.
    void close();

private:
    struct Arrival {
        Mutex mutex; // registration, then whichever of its triggers settles it first
        UniqueFd fd SMC_GUARDED_BY(mutex);
        int watch SMC_GUARDED_BY(mutex) = -1;
        Executor::TimerId timer SMC_GUARDED_BY(mutex);
        bool settled SMC_GUARDED_BY(mutex) = false;
        Next next SMC_GUARDED_BY(mutex);
        Source source{}; // set before it is shared
    };
    // What settling an arrival takes out of it.
    struct Claimed {
        UniqueFd fd;
        int watch;
        Executor::TimerId timer;
        Next next;
    };
    enum class Trigger { Awaited, Timer, Refused };

    bool enlistLocked(const std::shared_ptr<Arrival>& a, UniqueFd fd, Next next,
                      std::chrono::milliseconds timeout) SMC_REQUIRES(a->mutex);
    static std::optional<Claimed> claim(Arrival& a) SMC_REQUIRES(a.mutex);
    void forget(const std::shared_ptr<Arrival>& a) SMC_REQUIRES(mutex_);
    void settle(const std::shared_ptr<Arrival>& a, Trigger trigger) noexcept;

    Executor& executor_;
    const bool countSources_;
    mutable Mutex mutex_;
    ConditionVariable idle_; // settling_ went to 0
    bool closed_ SMC_GUARDED_BY(mutex_) = false;
    std::unordered_set<std::shared_ptr<Arrival>> waiting_ SMC_GUARDED_BY(mutex_);
    unsigned settling_ SMC_GUARDED_BY(mutex_) = 0;                  // `next` calls under way
    std::map<Source, std::size_t> bySource_ SMC_GUARDED_BY(mutex_); // of waiting_, no zeros
};

} // namespace smc
