// SPDX-License-Identifier: MIT
// Arrivals: registration, the triggers that settle a waiting connection, and close().
#include "smc/socket/internal/arrivals.h"

#include "smc/socket/clc_io.h"

namespace smc
{

bool Arrivals::awaitMessage(UniqueFd fd, std::chrono::milliseconds timeout, Next next)
{
    if (net::firstMessageQueued(fd.get())) { // already there: no wait, no hop
        next(std::move(fd), false);
        return true;
    }
    const int raw = fd.get();
    auto a = std::make_shared<Arrival>();
    MutexLocker lock(a->mutex); // the triggers and close() wait until it is registered
    if (!enlistLocked(a, std::move(fd), std::move(next), timeout))
        return false;
    // The timer holds the arrival until it runs or is cancelled; the watch only refers to it.
    a->watch = executor_.watch(raw, [self = weak_from_this(), w = std::weak_ptr<Arrival>(a), raw] {
        if (net::firstMessageQueued(raw))
            if (auto s = self.lock())
                if (auto arrival = w.lock())
                    s->settle(arrival, Trigger::Awaited);
    });
    if (a->watch < 0) { // epoll refused it: take it as late (the wait had no chance)
        lock.unlock();
        settle(a, Trigger::Refused);
    }
    return true;
}

bool Arrivals::park(UniqueFd fd, std::chrono::milliseconds timeout, FirstContacts& contacts,
                    const FirstContacts::Key& peer, Next next)
{
    auto a = std::make_shared<Arrival>();
    {
        MutexLocker lock(a->mutex);
        if (!enlistLocked(a, std::move(fd), std::move(next), timeout))
            return false;
    }
    if (!contacts.park(peer, [self = weak_from_this(), w = std::weak_ptr<Arrival>(a)] {
            if (auto s = self.lock())
                if (auto arrival = w.lock())
                    s->settle(arrival, Trigger::Awaited);
        }))
        settle(a, Trigger::Awaited); // that first contact is over already
    return true;
}

bool Arrivals::enlistLocked(const std::shared_ptr<Arrival>& a, UniqueFd fd, Next next,
                            std::chrono::milliseconds timeout)
{
    {
        MutexLocker lock(mutex_);
        if (closed_)
            return false;
        waiting_.insert(a);
    }
    a->fd = std::move(fd);
    a->next = std::move(next);
    a->timer = executor_.postAfter(timeout, [self = weak_from_this(), a] {
        if (auto s = self.lock())
            s->settle(a, Trigger::Timer);
    });
    return true;
}

std::optional<Arrivals::Claimed> Arrivals::claim(Arrival& a)
{
    if (a.settled)
        return std::nullopt;
    a.settled = true;
    return Claimed{std::move(a.fd), a.watch, a.timer, std::move(a.next)};
}

// close() waits for a settle under way: counted while the arrival is still locked, so close()
// either sees it settled and counted or settles it itself. After close(), dropped here.
void Arrivals::settle(const std::shared_ptr<Arrival>& a, Trigger trigger) noexcept
{
    std::optional<Claimed> c;
    bool closed = false;
    {
        MutexLocker lock(a->mutex);
        if (!(c = claim(*a)))
            return;
        MutexLocker self(mutex_);
        waiting_.erase(a);
        closed = closed_;
        if (!closed)
            ++settling_;
    }
    executor_.unwatch(c->watch); // before the fd goes: from its own callback, no wait
    if (trigger != Trigger::Timer)
        executor_.cancel(c->timer);
    if (closed)
        return;
    c->next(std::move(c->fd), trigger != Trigger::Awaited);
    MutexLocker self(mutex_);
    if (--settling_ == 0)
        idle_.notify_all();
}

void Arrivals::close()
{
    std::set<std::shared_ptr<Arrival>> waiting;
    {
        MutexLocker lock(mutex_);
        closed_ = true;
        waiting.swap(waiting_);
    }
    for (const auto& a : waiting) {
        // Its fd and `next` (with what it holds: an RMB, a group) go here, not with a timer.
        std::optional<Claimed> c;
        {
            MutexLocker lock(a->mutex);
            if (!(c = claim(*a)))
                continue;
        }
        executor_.unwatch(c->watch); // waits for a running callback
        executor_.cancel(c->timer);
    }
    MutexLocker lock(mutex_);
    while (settling_ > 0)
        idle_.wait(lock);
}

} // namespace smc
