// SPDX-License-Identifier: MIT
// LlcCore: attaching and clearing links, the flow token, messages out and the waiter, the end of
// the group.
#include "smc/llc/llc_core.h"

#include <algorithm>
#include <cassert>
#include <new>

#include "smc/llc/link_errors.h"

namespace smc
{

using llc::Message;
using llc::Type;

// The transport's message limits are the codec's.
static_assert(maxLinkMessage(1) == llc::kMessageSize && maxLinkMessage(2) == llc::kMaxV2Size);

namespace
{
std::error_code gone()
{
    return std::make_error_code(std::errc::not_connected);
}
} // namespace

FlowToken& FlowToken::operator=(FlowToken&& other) noexcept
{
    if (this != &other) {
        release();
        core_ = std::exchange(other.core_, nullptr);
    }
    return *this;
}

void FlowToken::release() noexcept
{
    if (LlcCore* c = std::exchange(core_, nullptr))
        c->releaseFlow();
}

LlcCore::LlcCore(LlcConfig config, LinkProvider& provider, LlcHost& host, LinkReports& reports,
                 Executor& executor)
    : config_(config), maxLinks_(config.maxLinks), maxConns_(config.maxConns), provider_(provider),
      host_(host), reports_(reports), executor_(executor),
      reaper_(executor, SerialQueue::Kind::Blocking)
{
}

bool LlcCore::beginStop()
{
    {
        MutexLocker lock(mutex_);
        if (stopping_)
            return false;
        stopping_ = true;
    }
    changed_.notify_all(); // a flow waiting for an answer or the token gives up
    return true;
}

void LlcCore::finishStop()
{
    reaper_.close();
    for (unsigned s = 0; s < kMaxLinks; ++s)
        clearLink(s);
}

// --- The flow token -------------------------------------------------------------

Result<FlowToken> LlcCore::acquireFlow(Flow flow, std::chrono::milliseconds timeout)
{
    MutexLocker lock(mutex_);
    const bool free = changed_.waitFor(
        lock, timeout, [&]() SMC_REQUIRES(mutex_) { return flow_ == Flow::None || !live(); });
    if (!live())
        return gone();
    if (!free)
        return std::make_error_code(std::errc::timed_out);
    flow_ = flow;
    return FlowToken(this);
}

void LlcCore::releaseFlow()
{
    {
        MutexLocker lock(mutex_);
        flow_ = Flow::None;
    }
    changed_.notify_all(); // waiting flows
    reports_.flowReleased();
}

// --- Links -----------------------------------------------------------------------

Result<void> LlcCore::attach(unsigned slot, NewLink link)
{
    if (!link.channel || !link.registrar)
        return std::make_error_code(std::errc::invalid_argument);
    registrar_.set(slot, link.registrar.get());
    if (Result<void> r = pool_->addLink(slot); !r) {
        registrar_.set(slot, nullptr);
        link.channel->shutdown();
        return r;
    }
    std::shared_ptr<LinkChannel> channel = std::move(link.channel);
    // The table's copy and every copy taken from it share `users`, whose end says the last
    // of them is gone (clearLink waits for that, not for the channel's own count).
    struct Users {
        std::promise<void> gone;
        ~Users() { gone.set_value(); }
    };
    auto users = std::make_shared<Users>();
    std::future<void> drained = users->gone.get_future();
    std::uint64_t epoch;
    {
        MutexLocker lock(mutex_);
        Link& l = links_[slot];
        assert(l.state == LinkState::Unused); // owned_[slot] is free: its channel was drained
        l.state = LinkState::Activating;
        l.channel = std::shared_ptr<LinkChannel>(std::move(users), channel.get());
        owned_[slot] = {channel, std::move(drained)};
        l.registrar = std::move(link.registrar);
        l.local = link.local;
        l.peer = {};
        l.epoch = epoch = links_.nextEpoch();
        l.lastRx = Clock::now();
        l.testPending = false;
        l.asymmetric = false;
        if (config_.role == Role::Server)
            l.linkId = links_.nextLinkId();
    }
    channel->start({[this, slot, epoch](std::vector<std::byte> b) {
                        reports_.received(slot, epoch, std::move(b));
                    },
                    [this, slot, epoch] { reports_.down(slot, epoch); }});
    return {};
}

void LlcCore::clearLink(unsigned slot)
{
    std::shared_ptr<LinkChannel> channel;
    Owned owned;
    std::shared_ptr<Registrar> registrar;
    {
        MutexLocker lock(mutex_);
        Link& l = links_[slot];
        if (l.state == LinkState::Unused)
            return;
        channel = std::move(l.channel);
        owned = std::move(owned_[slot]);
        registrar = std::move(l.registrar);
        l.state = LinkState::Unused;
        l.epoch = 0; // its channel's last reports are ignored
        l.linkId = 0;
    }
    if (channel) {
        channel->close(); // a DELETE_LINK just sent still reaches the peer
        // A send or write holds its own copy for one call; no new copy can be taken any
        // more. The channel is destroyed here, outside the lock (it waits for its
        // deliveries), once the last of those calls returned.
        channel.reset();
        owned.drained.wait();
        owned.channel.reset();
    }
    rtokens_.clearLink(slot);
    (void)pool_->removeLink(slot); // every buffer unregistered from the link
    registrar_.set(slot, nullptr);
}

Result<void> LlcCore::breakLink(unsigned slot)
{
    std::shared_ptr<LinkChannel> channel;
    {
        MutexLocker lock(mutex_);
        if (slot >= kMaxLinks || links_[slot].state == LinkState::Unused)
            return LinkErrc::NoSuchLink;
        channel = links_[slot].channel;
    }
    channel->shutdown();
    return {};
}

void LlcCore::terminate(std::string reason, llc::DeleteReason code, bool orderly)
{
    if (terminated_.exchange(true))
        return;
    std::optional<unsigned> via;
    {
        MutexLocker lock(mutex_);
        via = links_.survivor();
        if (waiter_)
            waiter_->linkDown = true;
    }
    changed_.notify_all();
    if (via)
        (void)send(*via, {1, false, llc::DeleteLink{true, orderly, 0, code}});
    {
        MutexLocker lock(mutex_);
        for (Link& l : links_.all())
            if (l.state != LinkState::Unused)
                l.state = LinkState::Inactive;
    }
    host_.groupEnded(std::move(reason));
    // Not at once: the peer takes the DELETE_LINK ALL first (Linux waits for its send to
    // complete; an in-process link drops what it queued when it goes down).
    reaper_.postAfter(config_.timeouts.wait, [this] { clearLinksWhenIdle(); });
}

void LlcCore::clearLinksWhenIdle()
{
    {
        MutexLocker lock(mutex_);
        // A flow still running uses its links; it sees terminated_ and ends soon.
        changed_.wait(lock,
                      [&]() SMC_REQUIRES(mutex_) { return flow_ == Flow::None || stopping_; });
        if (stopping_)
            return; // finishStop() clears them
    }
    for (unsigned s = 0; s < kMaxLinks; ++s)
        clearLink(s);
}

// --- Messages ----------------------------------------------------------------------

std::vector<std::byte> LlcCore::wire(Message m) const
{
    // The flows build v1 messages, and v2 where only v2 exists (REQ_ADD_LINK, a DELETE_RKEY
    // answer in the form of its v2 request): a v2 group raises the rest.
    m.version = std::max(m.version, config_.version);
    return llc::encode(m);
}

Result<void> LlcCore::send(unsigned slot, const Message& m)
{
    const std::vector<std::byte> bytes = wire(m);
    std::shared_ptr<LinkChannel> channel;
    {
        MutexLocker lock(mutex_);
        channel = links_[slot].channel;
        if (!channel)
            return gone();
        ++stats_.messagesOut;
    }
    return channel->send(bytes); // may wait for a send slot: not under the lock
}

void LlcCore::arm(Waiter& w)
{
    MutexLocker lock(mutex_);
    waiter_ = &w;
}

void LlcCore::disarm(Waiter& w)
{
    MutexLocker lock(mutex_);
    release(lock, w);
}

// No relay starts for `w` after this, and none still runs when it returns: a relay uses what
// the flow owns (its captures, `w` itself on the flow's stack). Bounded by a send's wait for
// a slot.
void LlcCore::release(MutexLocker& lock, Waiter& w)
{
    if (waiter_ == &w)
        waiter_ = nullptr;
    waitForRelay(lock, w);
}

void LlcCore::waitForRelay(MutexLocker& lock, Waiter& w)
{
    w.flowWaits = true; // the relay tells us when it ends
    changed_.wait(lock, [&]() SMC_REQUIRES(mutex_) { return !w.relaying; });
}

Result<Message> LlcCore::await(Waiter& w, std::chrono::milliseconds timeout)
{
    MutexLocker lock(mutex_);
    const auto over = [&]() SMC_REQUIRES(mutex_) {
        return w.got.has_value() || w.linkDown || w.relayError || !live();
    };
    bool done = false;
    // A relay does not wake us for each message it answers (the exchange goes on without
    // us): a timeout that finds it answered one since, or answering, waits again.
    for (unsigned seen = w.relayed;; seen = w.relayed) {
        done = changed_.waitFor(lock, timeout, over);
        if (done)
            break;
        if (w.relaying) {
            waitForRelay(lock, w);
            w.flowWaits = false;
        }
        if (over() || w.relayed == seen) {
            done = over();
            break; // nothing came within the timeout, or it ended meanwhile
        }
    }
    release(lock, w);
    if (w.got)
        return std::move(*w.got);
    if (w.relayError)
        return w.relayError;
    return done ? gone() : std::make_error_code(std::errc::timed_out);
}

void LlcCore::relay(const Message& m)
{
    Waiter* w = nullptr;
    {
        MutexLocker lock(mutex_);
        w = relayed_; // its `relaying` keeps it: release() does not return before we clear it
    }
    std::optional<Message> answer;
    std::error_code error;
    try {
        answer = w->relay(m);
    } catch (const std::bad_alloc&) {
        error = std::make_error_code(std::errc::not_enough_memory);
    }
    if (answer)
        if (Result<void> sent = send(w->slot, *answer); !sent)
            error = sent.error();
    MutexLocker lock(mutex_);
    if (error)
        w->relayError = error;
    else if (!answer)
        w->got = m;
    ++w->relayed;
    w->relaying = false;
    relayed_ = nullptr;
    // The flow hears of the end of the exchange, or of the relay it waits for; not of each
    // message answered on the way.
    if (error || !answer || w->flowWaits)
        changed_.notify_all();
}

// The waiter is armed before the message goes, so an answer can never
// arrive before anybody waits for it.
Result<Message> LlcCore::exchange(unsigned sendSlot, const Message& m, unsigned waitSlot, Type type,
                                  bool response, std::chrono::milliseconds timeout,
                                  Waiter::Relay relay)
{
    Waiter w;
    w.slot = waitSlot;
    w.type = type;
    w.response = response;
    w.relay = std::move(relay);
    arm(w);
    if (Result<void> r = send(sendSlot, m); !r) {
        disarm(w); // a relay that started meanwhile ends first
        return r.error();
    }
    return await(w, timeout);
}

// Two sides deleting the same link at once: the peer's request answers ours.
LlcCore::Answer LlcCore::answerWaiter(unsigned slot, const Message& m)
{
    const Type type = m.type();
    if (!waiter_ || waiter_->got || waiter_->relaying || waiter_->relayError || waiter_->linkDown ||
        !live() || waiter_->slot != slot || waiter_->type != type)
        return Answer::No;
    const bool crossing = type == Type::DeleteLink && !m.response && waiter_->response;
    if (m.response != waiter_->response && !crossing)
        return Answer::No;
    if (waiter_->relay && !crossing) {
        waiter_->relaying = true;
        relayed_ = waiter_;
        return Answer::Relay;
    }
    waiter_->got = m;
    changed_.notify_all();
    return crossing ? Answer::No : Answer::Yes;
}

void LlcCore::failWaiter(unsigned slot)
{
    if (waiter_ && waiter_->slot == slot) {
        waiter_->linkDown = true;
        changed_.notify_all();
    }
}

// --- Limits and link states ----------------------------------------------------------

// A peer that sends 0 (Linux v1: no max conns; no max links) leaves ours as they are;
// out-of-range values are clamped to Linux's ranges.
void LlcCore::adoptLimits(std::uint8_t peerLinks, std::uint8_t peerConns)
{
    if (peerLinks != 0)
        maxLinks_ = std::min<unsigned>(maxLinks_, std::max<unsigned>(peerLinks, 1));
    if (peerConns != 0)
        maxConns_ = std::min<unsigned>(maxConns_, std::max<unsigned>(peerConns, 16));
}

// One CONFIRM_LINK for every use (first link, either side; a new link's last
// step): the limits we offer are bytes 34/35.
llc::ConfirmLink LlcCore::confirmLink(const LinkAddress& local, std::uint8_t linkId) const
{
    return {local.mac,
            local.gid,
            local.qpn,
            linkId,
            {},
            static_cast<std::uint8_t>(maxLinks_.load()),
            static_cast<std::uint8_t>(maxConns_.load())};
}

std::optional<unsigned> LlcCore::activate(unsigned slot, GroupType newType)
{
    MutexLocker lock(mutex_);
    links_.activate(slot, newType);
    if (newType == GroupType::Symmetric)
        return links_.asymmetricOther(slot);
    return std::nullopt;
}

std::shared_ptr<LinkChannel> LlcCore::activeChannel(unsigned slot, std::uint8_t linkId) const
{
    MutexLocker lock(mutex_);
    const bool wanted = linkId == 0 || links_[slot].linkId == linkId;
    return links_[slot].state == LinkState::Active && wanted ? links_[slot].channel : nullptr;
}

std::optional<unsigned> LlcCore::anyActive() const
{
    MutexLocker lock(mutex_);
    return links_.survivor();
}

} // namespace smc
