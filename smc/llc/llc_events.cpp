// SPDX-License-Identifier: MIT
// LlcEngine's event queue: peer requests (bounded, alike ones coalesced) and link downs, each
// run holding the flow token.
#include "smc/llc/llc_engine.h"

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

// A peer request that starts a flow. Linux's event worker starts a flow for
// the first, parks one (delayed_event) and drops the rest; here requests wait
// in line for the flow token, so one like a pending one takes its place (the
// newest runs: the peer's earlier flow gave up) and the line has a bound,
// beyond which requests are dropped. While a flow runs one is parked and the
// rest dropped, as in Linux.
void LlcEngine::queueRequest(unsigned slot, std::uint64_t epoch, Message m)
{
    Event event{slot, epoch, std::move(m)};
    auto replaces = [&](const Event& e) {
        return e.request && sameRequest(*e.request, *event.request);
    };
    for (Event& e : queue_) {
        if (replaces(e)) {
            e = std::move(event);
            ++stats_.requestsCoalesced;
            return;
        }
    }
    if (delayed_ && replaces(*delayed_)) {
        *delayed_ = std::move(event);
        ++stats_.requestsCoalesced;
        return;
    }
    if (flow_ == Flow::None) {
        if (queue_.size() >= kMaxPendingRequests) {
            ++stats_.requestsDropped;
            return;
        }
        queue_.push_back(std::move(event));
        stats_.requestQueuePeak = std::max<std::uint64_t>(stats_.requestQueuePeak, queue_.size());
    } else if (!delayed_) {
        delayed_ = std::move(event); // Linux parks one
        ++stats_.delayed;
    } else {
        ++stats_.dropped;
        return;
    }
    scheduleEvents();
}

// One runEvents() task waiting is enough: it runs everything queued by then,
// and one posted while it runs catches what came meanwhile.
void LlcEngine::scheduleEvents()
{
    if (eventsPosted_)
        return;
    eventsPosted_ = true;
    events_.post([this] { runEvents(); });
}

void LlcEngine::handleRequest(unsigned slot, const Message& m)
{
    if (const auto* a = std::get_if<llc::AddLink>(&m.body)) {
        // A server treats a client's ADD_LINK as a suggestion (v1 invite).
        if (config_.role == Role::Client) {
            const bool added = clientAddLink(slot, *a);
            MutexLocker lock(mutex_);
            if (reqAddLink_ == ReqAddLink::Waiting)
                reqAddLink_ = added ? ReqAddLink::Added : ReqAddLink::Declined;
            changed_.notify_all();
        }
    } else if (std::holds_alternative<llc::ReqAddLink>(m.body)) {
        // The client asks for a link (v2): run the server's ADD_LINK flow; if
        // it fails before ADD_LINK went out, decline with the response.
        bool offered = false;
        if (!serverAddLink(offered) && !offered)
            (void)send(slot, {2, true, llc::ReqAddLink{}});
    } else if (const auto* del = std::get_if<llc::DeleteLink>(&m.body)) {
        remoteDeleteLink(slot, *del);
    } else if (std::holds_alternative<llc::ConfirmRkey>(m.body)) {
        remoteConfirmRkey(slot, m);
    } else if (std::holds_alternative<llc::DeleteRkey>(m.body)) {
        remoteDeleteRkey(slot, m);
    }
}

// Peer requests and link downs, one at a time, each holding the flow token:
// link downs first, then requests in order, then the parked one. An event
// stays in line (and counts against the bound) until it has the token.
void LlcEngine::runEvents()
{
    MutexLocker lock(mutex_);
    eventsPosted_ = false;
    for (;;) {
        if (stopping_)
            return;
        if (violation_) {
            std::string why = "protocol violation: " + *violation_;
            violation_.reset();
            lock.unlock();
            terminate(std::move(why), llc::DeleteReason::ProtocolViolation, false);
            lock.lock();
            continue;
        }
        const Event* next = !downs_.empty()                   ? &downs_.front()
                            : !queue_.empty()                 ? &queue_.front()
                            : delayed_ && flow_ == Flow::None ? &*delayed_
                                                              : nullptr;
        if (!next)
            return;
        const Flow flow = next->request && next->request->type() != Type::DeleteLink
                              ? Flow::AddLink
                              : Flow::DeleteLink;
        lock.unlock();
        Result<FlowToken> token = acquireFlow(flow);
        lock.lock();
        if (!token) {
            if (terminated_ || stopping_) { // nothing will run any more
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
        const bool current = links_[event.slot].epoch == event.epoch;
        lock.unlock();
        if (current && !terminated_) {
            if (event.request)
                handleRequest(event.slot, *event.request);
            else
                failover(event.slot, true);
        }
        token->release();
        lock.lock();
    }
}

} // namespace smc
