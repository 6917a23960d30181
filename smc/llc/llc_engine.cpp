// SPDX-License-Identifier: MIT
// LlcEngine: attaching and clearing links, the flow token, message dispatch (the event queue is in
// llc_events.cpp).
#include "smc/llc/llc_engine.h"

#include <algorithm>
#include <cassert>

#include "smc/cdc/cdc_messages.h"
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
        engine_ = std::exchange(other.engine_, nullptr);
    }
    return *this;
}

void FlowToken::release() noexcept
{
    if (LlcEngine* e = std::exchange(engine_, nullptr))
        e->releaseFlow();
}

LlcEngine::LlcEngine(LlcConfig config, LinkProvider& provider, LlcHost& host, Executor& executor)
    : config_(config), maxLinks_(config.maxLinks), maxConns_(config.maxConns), provider_(provider),
      host_(host), executor_(executor), events_(executor, SerialQueue::Kind::Blocking)
{
    // Blocking threads: an echo may wait for a send slot (seconds, over RDMA).
    for (auto& q : echoQueues_)
        q = std::make_unique<SerialQueue>(executor_, SerialQueue::Kind::Blocking);
    if (config_.timeouts.testLink.count() > 0)
        testTimer_ = std::make_unique<PeriodicTimer>(
            executor_,
            std::min<std::chrono::milliseconds>(config_.timeouts.testLink / 4,
                                                std::chrono::milliseconds(100)),
            [this] { testLinks(); });
}

LlcEngine::~LlcEngine()
{
    stop();
}

void LlcEngine::stop()
{
    {
        MutexLocker lock(mutex_);
        if (stopping_)
            return;
        stopping_ = true;
    }
    changed_.notify_all(); // a flow waiting for an answer or the token gives up
    if (testTimer_)
        testTimer_->stop();
    events_.close();
    for (unsigned s = 0; s < kMaxLinks; ++s)
        clearLink(s); // also lets an echo that waits for a send slot go
    for (auto& q : echoQueues_)
        q->close();
}

// --- The flow token -------------------------------------------------------------

Result<FlowToken> LlcEngine::acquireFlow(Flow flow, std::chrono::milliseconds timeout)
{
    MutexLocker lock(mutex_);
    const bool free = changed_.waitFor(lock, timeout, [&]() SMC_REQUIRES(mutex_) {
        return flow_ == Flow::None || terminated_ || stopping_;
    });
    if (terminated_ || stopping_)
        return gone();
    if (!free)
        return std::make_error_code(std::errc::timed_out);
    flow_ = flow;
    return FlowToken(this);
}

void LlcEngine::releaseFlow()
{
    {
        MutexLocker lock(mutex_);
        flow_ = Flow::None;
        if (delayed_)
            scheduleEvents();
    }
    changed_.notify_all(); // waiting flows
}

// --- Links -----------------------------------------------------------------------

// The link takes `slot` (state ACTIVATING) and every buffer is registered on
// it; on failure the slot is left as it was.
Result<void> LlcEngine::attach(unsigned slot, NewLink link)
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
    channel->start(
        {[this, slot, epoch](std::vector<std::byte> b) { onMessage(slot, epoch, std::move(b)); },
         [this, slot, epoch] { onDown(slot, epoch); }});
    return {};
}

void LlcEngine::clearLink(unsigned slot)
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

Result<void> LlcEngine::breakLink(unsigned slot)
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

// --- Messages ----------------------------------------------------------------------

std::vector<std::byte> LlcEngine::wire(Message m) const
{
    // The flows build v1 messages, and v2 where only v2 exists (REQ_ADD_LINK, a DELETE_RKEY
    // answer in the form of its v2 request): a v2 group raises the rest.
    m.version = std::max(m.version, config_.version);
    return llc::encode(m);
}

Result<void> LlcEngine::send(unsigned slot, const Message& m)
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

Result<Message> LlcEngine::await(Waiter& w, std::chrono::milliseconds timeout)
{
    MutexLocker lock(mutex_);
    const bool done = changed_.waitFor(lock, timeout, [&]() SMC_REQUIRES(mutex_) {
        return w.got.has_value() || w.linkDown || terminated_ || stopping_;
    });
    waiter_ = nullptr;
    if (w.got)
        return std::move(*w.got);
    return done ? gone() : std::make_error_code(std::errc::timed_out);
}

// The waiter is armed before the message goes, so an answer can never
// arrive before anybody waits for it.
Result<Message> LlcEngine::exchange(unsigned sendSlot, const Message& m, unsigned waitSlot,
                                    Type type, bool response, std::chrono::milliseconds timeout)
{
    Waiter w{waitSlot, type, response, std::nullopt, false};
    {
        MutexLocker lock(mutex_);
        waiter_ = &w;
    }
    if (Result<void> r = send(sendSlot, m); !r) {
        MutexLocker lock(mutex_);
        waiter_ = nullptr;
        return r.error();
    }
    return await(w, timeout);
}

void LlcEngine::onMessage(unsigned slot, std::uint64_t epoch, std::vector<std::byte> bytes)
{
    if (!bytes.empty() && bytes[0] == std::byte{cdc::kCdcType}) {
        {
            MutexLocker lock(mutex_);
            if (links_[slot].epoch != epoch)
                return;
            ++stats_.cdcIn;
            links_[slot].lastRx = Clock::now(); // traffic: no TEST_LINK needed
        }
        host_.cdcReceived(slot, bytes); // the connections' business, not a violation
        return;
    }
    Result<Message> decoded = llc::decode(bytes);
    MutexLocker lock(mutex_);
    if (links_[slot].epoch != epoch)
        return; // a cleared link's channel, still draining
    ++stats_.messagesIn;
    links_[slot].lastRx = Clock::now();
    if (!decoded) {
        // Linux terminates the group on a protocol violation (the event
        // queue does it: this is the delivery of a channel it tears down).
        ++stats_.malformed;
        violation_ = decoded.error().message();
        scheduleEvents();
        return;
    }
    Message& m = *decoded;
    const Type type = m.type();
    if (type == Type::TestLink && m.response) {
        links_[slot].testPending = false;
        return;
    }
    // A waiting flow gets what it waits for. Two sides deleting the same link
    // at once: the peer's request answers ours.
    if (waiter_ && !waiter_->got && waiter_->slot == slot && waiter_->type == type) {
        const bool crossing = type == Type::DeleteLink && !m.response && waiter_->response;
        if (m.response == waiter_->response || crossing) {
            waiter_->got = m;
            changed_.notify_all();
            if (!crossing)
                return;
        }
    }
    if (m.response && type == Type::ReqAddLink && config_.role == Role::Client &&
        reqAddLink_ == ReqAddLink::Waiting) {
        reqAddLink_ = ReqAddLink::Declined; // the server will not add a link
        changed_.notify_all();
        return;
    }
    if (m.response) {
        ++stats_.dropped; // nobody waits for it (late or duplicate)
        return;
    }
    switch (type) {
    case Type::TestLink:
        echoTestLink(slot, epoch, std::move(m));
        return;
    case Type::ConfirmRkey:
    case Type::DeleteRkey:
        // Remote RKEY flows run beside local ones (Linux allows it).
        lock.unlock();
        handleRequest(slot, m);
        return;
    case Type::ReqAddLink:
        if (config_.role != Role::Server) {
            ++stats_.dropped;
            return;
        }
        [[fallthrough]];
    case Type::AddLink:
    case Type::DeleteLink:
        queueRequest(slot, epoch, std::move(m));
        return;
    default:
        ++stats_.dropped; // CONFIRM_LINK / ADD_LINK_CONT outside a flow
        return;
    }
}

void LlcEngine::onDown(unsigned slot, std::uint64_t epoch)
{
    MutexLocker lock(mutex_);
    if (links_[slot].epoch != epoch)
        return;
    ++stats_.linksDown;
    if (waiter_ && waiter_->slot == slot) {
        waiter_->linkDown = true;
        changed_.notify_all();
    }
    downs_.push_back({slot, epoch, std::nullopt});
    scheduleEvents();
}

void LlcEngine::terminate(std::string reason, llc::DeleteReason code, bool orderly)
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
    events_.postAfter(config_.timeouts.wait, [this] { clearLinksWhenIdle(); });
}

void LlcEngine::clearLinksWhenIdle()
{
    {
        MutexLocker lock(mutex_);
        // A flow still running uses its links; it sees terminated_ and ends soon.
        changed_.wait(lock,
                      [&]() SMC_REQUIRES(mutex_) { return flow_ == Flow::None || stopping_; });
        if (stopping_)
            return; // stop() clears them
    }
    for (unsigned s = 0; s < kMaxLinks; ++s)
        clearLink(s);
}

// --- Observability -------------------------------------------------------------------

std::shared_ptr<LinkChannel> LlcEngine::activeChannel(unsigned slot) const
{
    MutexLocker lock(mutex_);
    return links_[slot].state == LinkState::Active ? links_[slot].channel : nullptr;
}

std::array<LlcEngine::SlotView, kMaxLinks> LlcEngine::slots() const
{
    MutexLocker lock(mutex_);
    std::array<SlotView, kMaxLinks> out{};
    for (unsigned s = 0; s < kMaxLinks; ++s)
        out[s] = {links_[s].state == LinkState::Active, links_[s].linkId};
    return out;
}

std::optional<unsigned> LlcEngine::anyActive() const
{
    MutexLocker lock(mutex_);
    return links_.survivor();
}

GroupType LlcEngine::type() const
{
    MutexLocker lock(mutex_);
    return links_.type();
}

std::vector<LinkInfo> LlcEngine::links() const
{
    MutexLocker lock(mutex_);
    return links_.info();
}

unsigned LlcEngine::activeLinks() const
{
    MutexLocker lock(mutex_);
    return links_.activeCount();
}

std::uint8_t LlcEngine::linkId(unsigned slot) const
{
    MutexLocker lock(mutex_);
    return slot < kMaxLinks && links_[slot].state != LinkState::Unused ? links_[slot].linkId : 0;
}

LlcStats LlcEngine::stats() const
{
    MutexLocker lock(mutex_);
    LlcStats s = stats_;
    s.requestsPending = queue_.size() + (delayed_ ? 1 : 0);
    return s;
}

} // namespace smc
