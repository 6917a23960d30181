// SPDX-License-Identifier: MIT
// LlcEvents: peer requests (bounded, alike ones coalesced) and link downs, run one at a time, each
// holding the flow token.
#include "smc/llc/llc_events.h"

#include <algorithm>

namespace smc
{

using llc::Message;
using llc::Type;

namespace
{
// Requests one flow answers alike: one add-link flow adds one link (a server
// sends its next ADD_LINK only once its last flow is over), and deleting a
// link twice is deleting it once.
bool sameRequest(const Message& a, const Message& b)
{
    if (a.type() != b.type())
        return false;
    const auto* da = std::get_if<llc::DeleteLink>(&a.body);
    const auto* db = std::get_if<llc::DeleteLink>(&b.body);
    return !da || (da->all == db->all && (da->all || da->linkId == db->linkId));
}
} // namespace

LlcEvents::LlcEvents(LlcCore& core, Handler& handler)
    : core_(core), handler_(handler), tasks_(core.executor(), SerialQueue::Kind::Blocking)
{
}

// Linux's event worker starts a flow for the first request, parks one (delayed_event) and
// drops the rest; here requests wait in line for the flow token, so one like a pending one
// takes its place (the newest runs: the peer's earlier flow gave up) and the line has a bound,
// beyond which requests are dropped. While a flow runs one is parked and the rest dropped, as
// in Linux.
void LlcEvents::request(unsigned slot, std::uint64_t epoch, Message m)
{
    MutexLocker lock(core_.mutex());
    LlcStats& stats = core_.stats();
    Event event{slot, epoch, std::move(m)};
    auto replaces = [&](const Event& e) {
        return e.request && sameRequest(*e.request, *event.request);
    };
    for (Event& e : queue_) {
        if (replaces(e)) {
            e = std::move(event);
            ++stats.requestsCoalesced;
            return;
        }
    }
    if (delayed_ && replaces(*delayed_)) {
        *delayed_ = std::move(event);
        ++stats.requestsCoalesced;
        return;
    }
    if (core_.flow() == Flow::None) {
        if (queue_.size() >= kMaxPending) {
            ++stats.requestsDropped;
            return;
        }
        queue_.push_back(std::move(event));
        stats.requestQueuePeak = std::max<std::uint64_t>(stats.requestQueuePeak, queue_.size());
    } else if (!delayed_) {
        delayed_ = std::move(event); // Linux parks one
        ++stats.delayed;
    } else {
        ++stats.dropped;
        return;
    }
    schedule();
}

void LlcEvents::lost(unsigned slot, std::uint64_t epoch)
{
    MutexLocker lock(core_.mutex());
    downs_.push_back({slot, epoch, std::nullopt});
    schedule();
}

void LlcEvents::violation(std::string what)
{
    MutexLocker lock(core_.mutex());
    violation_ = std::move(what);
    schedule();
}

void LlcEvents::flowReleased()
{
    MutexLocker lock(core_.mutex());
    if (delayed_)
        schedule();
}

std::size_t LlcEvents::pending() const
{
    MutexLocker lock(core_.mutex());
    return queue_.size() + (delayed_ ? 1 : 0);
}

// One run() task waiting is enough: it runs everything queued by then,
// and one posted while it runs catches what came meanwhile.
void LlcEvents::schedule()
{
    if (posted_)
        return;
    posted_ = true;
    tasks_.post([this] { run(); });
}

// Link downs first, then requests in order, then the parked one. An event
// stays in line (and counts against the bound) until it has the token.
void LlcEvents::run()
{
    MutexLocker lock(core_.mutex());
    posted_ = false;
    for (;;) {
        if (core_.stopping())
            return;
        if (violation_) {
            std::string why = "protocol violation: " + *violation_;
            violation_.reset();
            lock.unlock();
            core_.terminate(std::move(why), llc::DeleteReason::ProtocolViolation, false);
            lock.lock();
            continue;
        }
        const Event* next = !downs_.empty()                          ? &downs_.front()
                            : !queue_.empty()                        ? &queue_.front()
                            : delayed_ && core_.flow() == Flow::None ? &*delayed_
                                                                     : nullptr;
        if (!next)
            return;
        const Flow flow = next->request && next->request->type() != Type::DeleteLink
                              ? Flow::AddLink
                              : Flow::DeleteLink;
        lock.unlock();
        Result<FlowToken> token = core_.acquireFlow(flow);
        lock.lock();
        if (!token) {
            if (!core_.live()) { // nothing will run any more
                downs_.clear();
                queue_.clear();
                delayed_.reset();
            }
            continue; // else a long flow ran: try again, lose nothing
        }
        // Only this task takes events out: the first in line is still there
        // (a newer request may have taken its place), or a down came first.
        Event event;
        std::deque<Event>* from = !downs_.empty() ? &downs_ : !queue_.empty() ? &queue_ : nullptr;
        if (from) {
            event = std::move(from->front());
            from->pop_front();
        } else if (delayed_) {
            event = std::move(*delayed_);
            delayed_.reset();
        } else { // cannot happen; nothing lost if it did
            lock.unlock();
            token->release();
            lock.lock();
            continue;
        }
        // Holding the flow, no link comes or goes: a request or down from a
        // link cleared meanwhile (its slot maybe reused) is dropped.
        const bool current = core_.links()[event.slot].epoch == event.epoch;
        lock.unlock();
        if (current && !core_.terminated()) {
            if (event.request)
                handler_.handleRequest(event.slot, *event.request);
            else
                handler_.linkLost(event.slot);
        }
        token->release();
        lock.lock();
    }
}

} // namespace smc
