// SPDX-License-Identifier: MIT
// Arrivals: registration, the triggers that settle a waiting connection, and close().
#include "smc/socket/internal/arrivals.h"

#include <netinet/in.h>

#include <cstring>

#include "smc/net/clc_io.h"
#include "smc/net/tcp.h"

namespace smc
{

Arrivals::Source Arrivals::sourceOf(int fd) noexcept
{
    Source s{};
    const Result<net::SocketAddress> peer = net::peerAddress(fd);
    if (!peer)
        return s; // gone already: all such count as one source
    const sockaddr_storage& a = peer->storage;
    if (peer->family() == AF_INET6) {
        const in6_addr& v6 = reinterpret_cast<const sockaddr_in6*>(&a)->sin6_addr;
        if (!IN6_IS_ADDR_V4MAPPED(&v6)) {
            s[0] = AF_INET6;
            std::memcpy(&s[1], &v6, sizeof v6);
            return s;
        }
        s[0] = AF_INET;
        std::memcpy(&s[1], &v6.s6_addr[12], 4);
    } else if (peer->family() == AF_INET) {
        s[0] = AF_INET;
        std::memcpy(&s[1], &reinterpret_cast<const sockaddr_in*>(&a)->sin_addr, 4);
    }
    return s;
}

std::size_t Arrivals::waitingFrom(const Source& source) const
{
    MutexLocker lock(mutex_);
    auto it = bySource_.find(source);
    return it == bySource_.end() ? 0 : it->second;
}

bool Arrivals::awaitMessage(UniqueFd fd, std::chrono::milliseconds timeout, Next next)
{
    // SO_RCVLOWAT is as we found it: an accepted socket's (its listener's, which we never
    // raise), or what the last wait left (lowered by its end, or by settle() when late).
    bool raised = false;
    if (net::firstMessageQueued(fd.get(), raised)) { // already there: no wait, no hop
        {
            MutexLocker lock(mutex_);
            if (closed_)
                return false;
        }
        next(std::move(fd), false);
        return true;
    }
    const int raw = fd.get();
    auto a = std::make_shared<Arrival>();
    MutexLocker lock(a->mutex); // the triggers and close() wait until it is registered
    if (!enlistLocked(a, std::move(fd), std::move(next), timeout))
        return false;
    // The timer holds the arrival until it runs or is cancelled; the watch only refers to it.
    a->watch = executor_.watch(
        raw, [self = weak_from_this(), w = std::weak_ptr<Arrival>(a), raw, raised]() mutable {
            if (net::firstMessageQueued(raw, raised))
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
    if (countSources_)
        a->source = sourceOf(fd.get());
    {
        MutexLocker lock(mutex_);
        if (closed_)
            return false;
        waiting_.insert(a);
        if (countSources_)
            ++bySource_[a->source];
    }
    a->fd = std::move(fd);
    a->next = std::move(next);
    a->timer = executor_.postAfter(timeout, [self = weak_from_this(), a] {
        if (auto s = self.lock())
            s->settle(a, Trigger::Timer);
    });
    return true;
}

void Arrivals::forget(const std::shared_ptr<Arrival>& a)
{
    if (waiting_.erase(a) == 0 || !countSources_)
        return; // close() took it, or nothing to count
    auto it = bySource_.find(a->source);
    if (--it->second == 0)
        bySource_.erase(it);
}

std::optional<Arrivals::Claimed> Arrivals::claim(Arrival& a)
{
    if (a.settled)
        return std::nullopt;
    a.settled = true;
    return Claimed{std::move(a.fd), a.watch, a.timer, std::move(a.next)};
}

// close() waits for a settle under way: counted while the arrival is still locked, so close()
// either sees it settled and counted or settles it itself. Once close() began, a trigger
// leaves the arrival to it: what `next` holds (an RMB, a group's connection) goes on the
// closing thread, never on the epoll or a timer thread.
void Arrivals::settle(const std::shared_ptr<Arrival>& a, Trigger trigger) noexcept
{
    std::optional<Claimed> c;
    {
        MutexLocker lock(a->mutex);
        MutexLocker self(mutex_);
        if (closed_ || !(c = claim(*a)))
            return;
        forget(a);
        ++settling_;
    }
    executor_.unwatch(c->watch); // before the fd goes: from its own callback, no wait
    if (trigger != Trigger::Timer)
        executor_.cancel(c->timer);
    {
        // `next` and what it holds go before close() may return.
        Next next = std::move(c->next);
        UniqueFd fd = std::move(c->fd);
        c.reset();
        // Part of a message may have raised SO_RCVLOWAT (firstMessageQueued): a wait that ended
        // without all of it leaves the default, for whoever reads next (a fallback's program).
        if (trigger != Trigger::Awaited)
            net::lowerLowWater(fd.get());
        next(std::move(fd), trigger != Trigger::Awaited);
    }
    MutexLocker self(mutex_);
    if (--settling_ == 0)
        idle_.notify_all();
}

void Arrivals::close()
{
    std::unordered_set<std::shared_ptr<Arrival>> waiting;
    {
        MutexLocker lock(mutex_);
        closed_ = true;
        waiting.swap(waiting_);
        bySource_.clear();
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
