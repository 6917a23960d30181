// SPDX-License-Identifier: MIT
// LinkGroup: first link, ADD_LINK with the ADD_LINK_CONT rkey exchange, DELETE_LINK,
// CONFIRM_RKEY / DELETE_RKEY, TEST_LINK, failover and termination.
#include "smc/core/link_group.h"

#include <algorithm>
#include <cstring>
#include <tuple>
#include <utility>

#include "pool/errors.h"
#include "smc/core/conn_errors.h"
#include "smc/llc/link_errors.h"

namespace smc
{
namespace
{

using namespace std::chrono_literals;
using llc::Message;
using llc::Type;

std::error_code timedOut()
{
    return std::make_error_code(std::errc::timed_out);
}
std::error_code refused()
{
    return std::make_error_code(std::errc::connection_refused);
}
std::error_code gone()
{
    return std::make_error_code(std::errc::not_connected);
}

} // namespace

const char* toString(LinkState state) noexcept
{
    switch (state) {
    case LinkState::Unused:
        return "UNUSED";
    case LinkState::Inactive:
        return "INACTIVE";
    case LinkState::Activating:
        return "ACTIVATING";
    case LinkState::Active:
        return "ACTIVE";
    }
    return "?";
}

const char* toString(GroupType type) noexcept
{
    switch (type) {
    case GroupType::None:
        return "NONE";
    case GroupType::Single:
        return "SINGLE";
    case GroupType::Symmetric:
        return "SYM";
    case GroupType::AsymmetricLocal:
        return "ASYM_LOCAL";
    case GroupType::AsymmetricPeer:
        return "ASYM_PEER";
    }
    return "?";
}

LinkGroup::LinkGroup(LinkGroupConfig config, LinkProvider& provider)
    : config_(std::move(config)), maxLinks_(config_.maxLinks), maxConns_(config_.maxConns),
      provider_(provider)
{
}

Result<std::unique_ptr<LinkGroup>> LinkGroup::create(LinkGroupConfig config, LinkProvider& provider)
{
    if (config.maxConns < 16 || config.maxConns > 255 || config.maxLinks < 1 ||
        config.maxLinks > 2 || config.pool.tech != Tech::SmcR)
        return std::make_error_code(std::errc::invalid_argument);
    std::unique_ptr<LinkGroup> g(new LinkGroup(std::move(config), provider));
    Result<std::unique_ptr<BufferPool>> pool = BufferPool::create(g->config_.pool, g->registrar_);
    if (!pool)
        return pool.error();
    g->pool_ = std::move(*pool);
    g->worker_ = std::thread([p = g.get()] { p->worker(); });
    g->keepalive_ = std::thread([p = g.get()] { p->keepalive(); });
    return g;
}

LinkGroup::~LinkGroup()
{
    {
        std::lock_guard lock(mutex_);
        stopping_ = true;
    }
    changed_.notify_all();
    worker_.join();
    keepalive_.join();
    for (unsigned s = 0; s < kMaxLinks; ++s)
        clearLink(s);
    for (auto& [token, conn] : connections_) {
        (void)pool_->release(conn->rmb);
        (void)pool_->release(conn->sndbuf);
    }
}

void LinkGroup::onTerminated(TerminationHandler handler)
{
    std::lock_guard lock(mutex_);
    onTerminated_ = std::move(handler);
}

// --- Links -----------------------------------------------------------------

std::error_code LinkGroup::SlotRegistrar::registerBuffer(BufferDesc& desc, unsigned link)
{
    Registrar* r = slots_[link].load();
    return r ? r->registerBuffer(desc, link) : make_error_code(PoolErrc::NoSuchLink);
}

void LinkGroup::SlotRegistrar::unregisterBuffer(BufferDesc& desc, unsigned link) noexcept
{
    if (Registrar* r = slots_[link].load())
        r->unregisterBuffer(desc, link);
}

std::error_code LinkGroup::SlotRegistrar::registerBuffers(std::span<BufferDesc* const> descs,
                                                          unsigned link)
{
    Registrar* r = slots_[link].load();
    return r ? r->registerBuffers(descs, link) : make_error_code(PoolErrc::NoSuchLink);
}

// The link takes `slot` (state ACTIVATING) and every buffer is registered on
// it; on failure the slot is left as it was.
Result<void> LinkGroup::attach(unsigned slot, NewLink link)
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
    std::uint64_t epoch;
    {
        std::lock_guard lock(mutex_);
        Link& l = links_[slot];
        l.state = LinkState::Activating;
        l.channel = channel;
        l.registrar = std::move(link.registrar);
        l.local = link.local;
        l.peer = {};
        l.epoch = ++epochs_;
        epoch = l.epoch;
        l.connections = 0;
        l.lastRx = std::chrono::steady_clock::now();
        l.testPending = false;
        l.asymmetric = false;
        if (config_.role == Role::Server) {
            do // Linux: never 0, never one in use
                ++nextLinkId_;
            while (nextLinkId_ == 0 || slotOf(nextLinkId_));
            l.linkId = nextLinkId_;
        }
    }
    channel->start(
        {[this, slot, epoch](std::vector<std::byte> b) { onMessage(slot, epoch, std::move(b)); },
         [this, slot, epoch] { onDown(slot, epoch); }});
    return {};
}

void LinkGroup::clearLink(unsigned slot)
{
    std::shared_ptr<LinkChannel> channel;
    std::shared_ptr<Registrar> registrar;
    {
        std::lock_guard lock(mutex_);
        Link& l = links_[slot];
        if (l.state == LinkState::Unused)
            return;
        channel = std::move(l.channel);
        registrar = std::move(l.registrar);
        l.state = LinkState::Unused;
        l.epoch = 0; // its channel's last reports are ignored
        l.linkId = 0;
        l.connections = 0;
        setTypeLocked();
    }
    if (channel) {
        channel->shutdown();
        // A send or write holds its own reference for one call. The channel
        // must be destroyed here, never by one of its own threads (its
        // destructor joins them); no new reference can be taken any more.
        while (channel.use_count() > 1)
            std::this_thread::sleep_for(std::chrono::microseconds(100));
        channel.reset(); // outside the lock: it joins its delivery thread
    }
    rtokens_.clearLink(slot);
    (void)pool_->removeLink(slot); // every buffer unregistered from the link
    registrar_.set(slot, nullptr);
}

std::optional<unsigned> LinkGroup::survivor(unsigned excluding) const
{
    for (unsigned s = 0; s < kMaxLinks; ++s)
        if (s != excluding && links_[s].state == LinkState::Active)
            return s;
    return std::nullopt;
}

// Linux smc_llc_alloc_alt_link: a symmetric link takes the first free
// slot, an asymmetric one the last (two symmetric links + one asymmetric).
std::optional<unsigned> LinkGroup::altSlot(GroupType newType) const
{
    for (unsigned i = 0; i < kMaxLinks; ++i) {
        const unsigned s = newType == GroupType::Symmetric ? i : kMaxLinks - 1 - i;
        if (links_[s].state == LinkState::Unused)
            return s;
    }
    return std::nullopt;
}

std::optional<unsigned> LinkGroup::slotOf(std::uint8_t linkId) const
{
    for (unsigned s = 0; s < kMaxLinks; ++s)
        if (links_[s].state != LinkState::Unused && links_[s].linkId == linkId)
            return s;
    return std::nullopt;
}

void LinkGroup::setTypeLocked()
{
    const unsigned active = activeLocked();
    bool asymmetric = false;
    for (const Link& l : links_)
        asymmetric |= l.state == LinkState::Active && l.asymmetric;
    type_ = active == 0   ? GroupType::None
            : active == 1 ? GroupType::Single
            : asymmetric  ? asymKind_
                          : GroupType::Symmetric;
}

// --- Messages and flows -------------------------------------------------------

Result<void> LinkGroup::send(unsigned slot, const Message& m)
{
    const std::vector<std::byte> wire = llc::encode(m);
    std::shared_ptr<LinkChannel> channel;
    {
        std::lock_guard lock(mutex_);
        channel = links_[slot].channel;
        if (!channel)
            return gone();
        ++stats_.messagesOut;
    }
    return channel->send(wire); // may wait for a send slot: not under the lock
}

bool LinkGroup::acquireFlow(Flow flow, std::chrono::milliseconds timeout)
{
    std::unique_lock lock(mutex_);
    if (!changed_.wait_for(lock, timeout,
                           [&] { return flow_ == Flow::None || terminated_ || stopping_; }))
        return false;
    if (terminated_ || stopping_)
        return false;
    flow_ = flow;
    return true;
}

void LinkGroup::releaseFlow()
{
    {
        std::lock_guard lock(mutex_);
        flow_ = Flow::None;
    }
    changed_.notify_all(); // waiting flows, and the worker's delayed event
}

// A flow arms its waiter before sending what triggers the answer, so an
// answer can never arrive before anybody waits for it.
void LinkGroup::arm(Waiter& w)
{
    std::lock_guard lock(mutex_);
    waiter_ = &w;
}

Result<Message> LinkGroup::await(Waiter& w, std::chrono::milliseconds timeout)
{
    std::unique_lock lock(mutex_);
    const bool done = changed_.wait_for(
        lock, timeout, [&] { return w.got.has_value() || w.linkDown || terminated_ || stopping_; });
    waiter_ = nullptr;
    if (w.got)
        return std::move(*w.got);
    return done ? gone() : timedOut();
}

Result<Message> LinkGroup::exchange(unsigned sendSlot, const Message& m, unsigned waitSlot,
                                    Type type, bool response, std::chrono::milliseconds timeout)
{
    Waiter w{waitSlot, type, response, std::nullopt, false};
    arm(w);
    if (Result<void> r = send(sendSlot, m); !r) {
        std::lock_guard lock(mutex_);
        waiter_ = nullptr;
        return r.error();
    }
    return await(w, timeout);
}

void LinkGroup::onMessage(unsigned slot, std::uint64_t epoch, std::vector<std::byte> bytes)
{
    Result<Message> decoded = llc::decode(bytes);
    std::unique_lock lock(mutex_);
    if (links_[slot].epoch != epoch)
        return; // a cleared link's channel, still draining
    ++stats_.messagesIn;
    links_[slot].lastRx = std::chrono::steady_clock::now();
    if (!decoded) {
        // Linux terminates the group on a protocol violation (the worker
        // does it: this thread belongs to the channel being torn down).
        ++stats_.malformed;
        violation_ = decoded.error().message();
        changed_.notify_all();
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
    case Type::TestLink: {
        lock.unlock();
        m.response = true; // echo
        (void)send(slot, m);
        return;
    }
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
        if (flow_ == Flow::None) {
            queue_.push_back({slot, epoch, std::move(m)});
        } else if (!delayed_) {
            delayed_ = Event{slot, epoch, std::move(m)}; // Linux parks one
            ++stats_.delayed;
        } else {
            ++stats_.dropped;
        }
        changed_.notify_all();
        return;
    default:
        ++stats_.dropped; // CONFIRM_LINK / ADD_LINK_CONT outside a flow
        return;
    }
}

void LinkGroup::onDown(unsigned slot, std::uint64_t epoch)
{
    std::lock_guard lock(mutex_);
    if (links_[slot].epoch != epoch)
        return;
    if (waiter_ && waiter_->slot == slot)
        waiter_->linkDown = true;
    downs_.push_back({slot, epoch, std::nullopt});
    changed_.notify_all();
}

Result<void> LinkGroup::start(NewLink first)
{
    if (!acquireFlow(Flow::FirstLink, config_.timeouts.flowStart))
        return gone();
    const LinkAddress local = first.local;
    // The client waits for the server's CONFIRM_LINK from the first byte on.
    Waiter firstWaiter{0, Type::ConfirmLink, false, std::nullopt, false};
    if (config_.role == Role::Client)
        arm(firstWaiter);
    Result<void> result = attach(0, std::move(first));
    if (!result) {
        std::lock_guard lock(mutex_);
        waiter_ = nullptr;
    } else if (config_.role == Role::Server) {
        std::uint8_t linkId;
        {
            std::lock_guard lock(mutex_);
            linkId = links_[0].linkId;
        }
        llc::ConfirmLink c{local.mac, local.gid, local.qpn, linkId, {}, 0, 0};
        std::tie(c.maxLinks, c.maxConns) = limitsForWire();
        Result<Message> reply =
            exchange(0, {1, false, c}, 0, Type::ConfirmLink, true, config_.timeouts.firstLink);
        if (reply) {
            const auto& r = std::get<llc::ConfirmLink>(reply->body);
            adoptLimits(r.maxLinks, r.maxConns);
            std::lock_guard lock(mutex_);
            links_[0].peer = {r.qpn, 0, r.gid, r.mac, local.mtu};
        } else {
            result = reply.error();
        }
    } else {
        Result<Message> req = await(firstWaiter, config_.timeouts.firstLink);
        if (!req) {
            result = req.error();
        } else {
            const auto& c = std::get<llc::ConfirmLink>(req->body);
            adoptLimits(c.maxLinks, c.maxConns);
            {
                std::lock_guard lock(mutex_);
                links_[0].linkId = c.linkId; // the server numbers links
                links_[0].peer = {c.qpn, 0, c.gid, c.mac, local.mtu};
            }
            llc::ConfirmLink answer{local.mac, local.gid, local.qpn, c.linkId, {}, 0, 0};
            std::tie(answer.maxLinks, answer.maxConns) = limitsForWire();
            result = send(0, {1, true, answer});
        }
    }
    if (result) {
        std::lock_guard lock(mutex_);
        links_[0].state = LinkState::Active;
        setTypeLocked();
        if (connections_.empty())
            idleSince_ = std::chrono::steady_clock::now();
    }
    if (!result)
        clearLink(0); // before the flow goes: no failover of a link never up
    releaseFlow();
    if (!result)
        return result;
    if (config_.role == Role::Server && maxLinks_ > 1)
        (void)addLink(); // a single link is fine if no second one can be had
    return {};
}

// CONFIRM_LINK carries both sides' limits (bytes 34/35); each side keeps the
// smaller. A peer that sends 0 (Linux v1: no max conns; no max links) leaves
// ours as they are; out-of-range values are clamped to Linux's ranges.
void LinkGroup::adoptLimits(std::uint8_t peerLinks, std::uint8_t peerConns)
{
    if (peerLinks != 0)
        maxLinks_ = std::min<unsigned>(maxLinks_, std::max<unsigned>(peerLinks, 1));
    if (peerConns != 0)
        maxConns_ = std::min<unsigned>(maxConns_, std::max<unsigned>(peerConns, 16));
}

std::pair<std::uint8_t, std::uint8_t> LinkGroup::limitsForWire() const
{
    return {static_cast<std::uint8_t>(maxLinks_.load()),
            static_cast<std::uint8_t>(maxConns_.load())};
}

// Each ADD_LINK_CONT says how many entries its sender still had, this one's
// included: after the first, that must be what the last one left. A message
// out of sequence (a duplicate, a lost one) would pair rkeys wrongly; the
// flow fails instead. Updates `left` to what the peer has after this one.
bool LinkGroup::inSequence(const llc::AddLinkCont& cont, bool& first, std::size_t& left)
{
    if (!first && cont.remaining != left)
        return false;
    first = false;
    left = cont.remaining - std::min<std::size_t>(cont.remaining, cont.rkeys.size());
    return true;
}

// Our used RMBs as ADD_LINK_CONT entries: rkey on `from`, rtoken on `to`.
std::vector<llc::RkeyPair> LinkGroup::ownRkeys(unsigned from, unsigned to) const
{
    std::vector<llc::RkeyPair> out;
    std::lock_guard lock(mutex_);
    for (const auto& [token, conn] : connections_) {
        const BufferDesc& d = *conn->rmb.desc();
        if (d.isRegistered(from) && d.isRegistered(to))
            out.push_back(
                {d.registration(from).rkey, d.registration(to).rkey, d.registration(to).addr});
    }
    return out;
}

Result<void> LinkGroup::addLink()
{
    if (config_.role != Role::Server)
        return LinkErrc::WrongRole; // clients ask with requestAddLink()
    if (!acquireFlow(Flow::AddLink, config_.timeouts.flowStart))
        return gone();
    bool offered = false;
    Result<void> r = serverAddLink(offered);
    releaseFlow();
    return r;
}

Result<void> LinkGroup::requestAddLink()
{
    if (config_.role != Role::Client)
        return LinkErrc::WrongRole; // a server adds links itself: addLink()
    if (!acquireFlow(Flow::AddLink, config_.timeouts.flowStart))
        return gone();
    std::optional<unsigned> via;
    llc::ReqAddLink req;
    bool busy;
    {
        std::lock_guard lock(mutex_);
        via = survivor(kMaxLinks);
        busy = reqAddLink_ != ReqAddLink::Idle; // another caller waits for its answer
        if (via && activeLocked() >= maxLinks_)
            via.reset();
        else if (via)
            req.gids.push_back(links_[*via].local.gid); // our candidate device
        if (!busy)
            reqAddLink_ = ReqAddLink::Waiting;
    }
    if (busy) {
        releaseFlow();
        return std::make_error_code(std::errc::operation_in_progress);
    }
    // Sent, the flow is released: the server's ADD_LINK is a remote flow
    // here, run by the worker.
    Result<void> sent = via ? send(*via, {2, false, req}) : Result<void>(LinkErrc::NoLinkRoom);
    releaseFlow();
    std::unique_lock lock(mutex_);
    if (sent)
        changed_.wait_for(lock, config_.timeouts.flowStart, [&] {
            return reqAddLink_ != ReqAddLink::Waiting || terminated_ || stopping_;
        });
    const ReqAddLink outcome = std::exchange(reqAddLink_, ReqAddLink::Idle);
    if (!sent)
        return sent;
    if (outcome == ReqAddLink::Added)
        return {};
    return outcome == ReqAddLink::Declined ? refused() : timedOut();
}

// The server's ADD_LINK flow, the flow token held. `offered`: ADD_LINK went
// out (a REQ_ADD_LINK that never got that far is declined by the caller).
Result<void> LinkGroup::serverAddLink(bool& offered)
{
    std::optional<unsigned> via;
    GroupType type;
    LinkAddress viaLocal, viaPeer;
    {
        std::lock_guard lock(mutex_);
        via = survivor(kMaxLinks);
        type = type_;
        if (via) {
            viaLocal = links_[*via].local;
            viaPeer = links_[*via].peer;
        }
    }
    if (!via)
        return LinkErrc::NoSuchLink;
    // Linux: a symmetric group is complete; a single one grows only if two
    // links were agreed; an asymmetric one only by a symmetric link, which
    // then replaces the asymmetric one.
    if (type == GroupType::Symmetric || (type == GroupType::Single && maxLinks_ <= 1))
        return LinkErrc::NoLinkRoom;
    // An alternate device if we have one; else the same device: asymmetric.
    Result<NewLink> made = provider_.create(std::span(&viaLocal.gid, 1));
    if (!made)
        return made.error();
    GroupType newType =
        made->local.gid == viaLocal.gid ? GroupType::AsymmetricLocal : GroupType::Symmetric;
    if (type != GroupType::Single && newType != GroupType::Symmetric)
        return LinkErrc::NoLinkRoom;
    unsigned newSlot;
    {
        std::lock_guard lock(mutex_);
        newSlot = altSlot(newType).value_or(kMaxLinks);
    }
    if (newSlot == kMaxLinks)
        return LinkErrc::NoLinkRoom;
    const LinkAddress local = made->local;
    const llc::AddLink offer{false, 0,         local.mac, local.gid,   local.qpn,
                             0,     local.mtu, local.psn, std::nullopt};
    if (Result<void> r = attach(newSlot, std::move(*made)); !r)
        return r;
    auto fail = [&](std::error_code ec) {
        clearLink(newSlot);
        return ec;
    };
    llc::AddLink req = offer;
    {
        std::lock_guard lock(mutex_);
        req.linkId = links_[newSlot].linkId;
    }
    offered = true;
    Result<Message> resp =
        exchange(*via, {1, false, req}, *via, Type::AddLink, true, config_.timeouts.wait);
    if (!resp)
        return fail(resp.error());
    const auto& answer = std::get<llc::AddLink>(resp->body);
    if (answer.reject)
        return fail(refused());
    // The peer answered from the device it already uses: it has no other.
    if (type == GroupType::Single && newType == GroupType::Symmetric && answer.gid == viaPeer.gid &&
        answer.mac == viaPeer.mac)
        newType = GroupType::AsymmetricPeer;
    const LinkAddress far{answer.qpn, answer.psn, answer.gid, answer.mac, answer.mtu};
    Result<void> connected;
    {
        std::shared_ptr<LinkChannel> channel; // dropped before fail() clears the link
        {
            std::lock_guard lock(mutex_);
            links_[newSlot].peer = far;
            channel = links_[newSlot].channel;
        }
        connected = channel->connect(far);
    }
    if (!connected)
        return fail(connected.error());

    // v1 rkey exchange: alternate ADD_LINK_CONTs until both sides are done.
    const std::vector<llc::RkeyPair> mine = ownRkeys(*via, newSlot);
    std::size_t sent = 0, peerLeft = 0;
    bool first = true;
    do {
        const std::size_t n = std::min<std::size_t>(2, mine.size() - sent);
        llc::AddLinkCont cont{req.linkId,
                              static_cast<std::uint8_t>(mine.size() - sent),
                              {mine.begin() + sent, mine.begin() + sent + n}};
        sent += n;
        Result<Message> peer =
            exchange(*via, {1, false, cont}, *via, Type::AddLinkCont, true, config_.timeouts.wait);
        if (!peer)
            return fail(peer.error());
        const auto& pc = std::get<llc::AddLinkCont>(peer->body);
        if (!inSequence(pc, first, peerLeft))
            return fail(std::make_error_code(std::errc::protocol_error));
        for (const llc::RkeyPair& p : pc.rkeys)
            (void)rtokens_.setByRkey(*via, p.rkey, newSlot, {p.newRkey, p.newVaddr});
    } while (sent < mine.size() || peerLeft > 0);

    // CONFIRM_LINK travels on the new link itself.
    llc::ConfirmLink conf{local.mac, local.gid, local.qpn, req.linkId, {}, 0, 0};
    std::tie(conf.maxLinks, conf.maxConns) = limitsForWire();
    Result<Message> confirmed = exchange(newSlot, {1, false, conf}, newSlot, Type::ConfirmLink,
                                         true, config_.timeouts.firstLink);
    if (!confirmed) {
        (void)send(*via, {1, false,
                          llc::DeleteLink{false, false, req.linkId, llc::DeleteReason::LostPath}});
        return fail(confirmed.error());
    }
    std::optional<unsigned> asymSlot = activate(newSlot, newType);
    if (asymSlot) // a symmetric pair now: the asymmetric link goes (Linux)
        failover(*asymSlot, true, llc::DeleteReason::NoAsymmetricNeeded);
    return {};
}

// The new link is ACTIVE with its type; returns the asymmetric link that a
// new symmetric one makes unnecessary, if any.
std::optional<unsigned> LinkGroup::activate(unsigned slot, GroupType newType)
{
    std::lock_guard lock(mutex_);
    links_[slot].state = LinkState::Active;
    links_[slot].asymmetric = newType != GroupType::Symmetric;
    if (links_[slot].asymmetric)
        asymKind_ = newType;
    setTypeLocked();
    if (newType == GroupType::Symmetric)
        for (unsigned s = 0; s < kMaxLinks; ++s)
            if (s != slot && links_[s].state == LinkState::Active && links_[s].asymmetric)
                return s;
    return std::nullopt;
}

bool LinkGroup::clientAddLink(unsigned via, const llc::AddLink& req)
{
    auto reject = [&] {
        llc::AddLink r = req;
        r.reject = true;
        r.rejectReason = 1; // no alternate path
        (void)send(via, {1, true, r});
        return false;
    };
    GroupType type;
    LinkAddress viaLocal, viaPeer;
    {
        std::lock_guard lock(mutex_);
        type = type_;
        viaLocal = links_[via].local;
        viaPeer = links_[via].peer;
    }
    if (req.mtu == 0 || type == GroupType::Symmetric ||
        (type == GroupType::Single && maxLinks_ <= 1))
        return reject();
    // The server offers the device it already uses: it has no other one.
    const bool peerSingle = req.gid == viaPeer.gid && req.mac == viaPeer.mac;
    const LinkAddress peer{req.qpn, req.psn, req.gid, req.mac, req.mtu};
    Result<NewLink> joined = provider_.join(peer, std::span(&viaLocal.gid, 1));
    if (!joined)
        return reject();
    const bool alternate = joined->local.gid != viaLocal.gid;
    if (peerSingle && !alternate)
        return reject(); // neither side has a second device (Linux)
    const GroupType newType = peerSingle  ? GroupType::AsymmetricPeer
                              : alternate ? GroupType::Symmetric
                                          : GroupType::AsymmetricLocal;
    std::optional<unsigned> slot;
    if (type == GroupType::Single || newType == GroupType::Symmetric) {
        std::lock_guard lock(mutex_);
        slot = altSlot(newType);
    }
    if (!slot)
        return reject();
    const LinkAddress local = joined->local;
    const llc::AddLink mineOffer{false,      0,         local.mac, local.gid,   local.qpn,
                                 req.linkId, local.mtu, local.psn, std::nullopt};
    if (!attach(*slot, std::move(*joined)))
        return reject();
    {
        std::lock_guard lock(mutex_);
        links_[*slot].linkId = req.linkId;
        links_[*slot].peer = peer;
    }
    // v1 rkey exchange: the server's ADD_LINK_CONT, ours in reply, until both
    // are done; then CONFIRM_LINK arrives on the new link.
    const std::vector<llc::RkeyPair> mine = ownRkeys(via, *slot);
    std::size_t sent = 0, peerLeft = 0;
    bool first = true, outOfSequence = false;
    Result<Message> next =
        exchange(via, {1, true, mineOffer}, via, Type::AddLinkCont, false, config_.timeouts.wait);
    for (;;) {
        if (!next) {
            clearLink(*slot);
            return false;
        }
        const auto& pc = std::get<llc::AddLinkCont>(next->body);
        if (!inSequence(pc, first, peerLeft)) {
            outOfSequence = true;
            break;
        }
        for (const llc::RkeyPair& p : pc.rkeys)
            (void)rtokens_.setByRkey(via, p.rkey, *slot, {p.newRkey, p.newVaddr});
        const std::size_t n = std::min<std::size_t>(2, mine.size() - sent);
        llc::AddLinkCont cont{req.linkId,
                              static_cast<std::uint8_t>(mine.size() - sent),
                              {mine.begin() + sent, mine.begin() + sent + n}};
        sent += n;
        if (sent >= mine.size() && peerLeft == 0) {
            next = exchange(via, {1, true, cont}, *slot, Type::ConfirmLink, false,
                            config_.timeouts.firstLink);
            break;
        }
        next = exchange(via, {1, true, cont}, via, Type::AddLinkCont, false, config_.timeouts.wait);
    }
    llc::ConfirmLink confirmed{local.mac, local.gid, local.qpn, req.linkId, {}, 0, 0};
    std::tie(confirmed.maxLinks, confirmed.maxConns) = limitsForWire();
    if (outOfSequence || !next || !send(*slot, {1, true, confirmed})) {
        (void)send(via, {1, false,
                         llc::DeleteLink{false, false, req.linkId, llc::DeleteReason::LostPath}});
        clearLink(*slot);
        return false;
    }
    (void)activate(*slot, newType); // the server deletes an asymmetric link itself
    return true;
}

// Move a link's connections to a survivor, tell the peer if we found out
// first, and clear the link. The last link gone ends the group.
void LinkGroup::failover(unsigned slot, bool tellPeer, llc::DeleteReason reason)
{
    std::optional<unsigned> to;
    std::uint8_t linkId = 0;
    {
        std::lock_guard lock(mutex_);
        Link& l = links_[slot];
        if (l.state == LinkState::Unused)
            return;
        l.state = LinkState::Inactive;
        linkId = l.linkId;
        to = survivor(slot);
        if (to) {
            for (auto& [token, conn] : connections_) {
                if (conn->link == slot) {
                    conn->link = *to;
                    ++links_[*to].connections;
                }
            }
            l.connections = 0;
            ++stats_.failovers;
        }
        setTypeLocked();
    }
    if (!to) {
        clearLink(slot);
        terminate("last link lost", llc::DeleteReason::LostPath, false);
        return;
    }
    if (tellPeer) {
        llc::DeleteLink del{false, true, linkId, reason};
        (void)exchange(*to, {1, false, del}, *to, Type::DeleteLink, true, config_.timeouts.wait);
    }
    clearLink(slot);
}

void LinkGroup::remoteDeleteLink(unsigned via, const llc::DeleteLink& req)
{
    if (req.all) {
        terminate("peer deleted the link group", req.reason, req.orderly);
        return;
    }
    std::optional<unsigned> slot;
    {
        std::lock_guard lock(mutex_);
        slot = slotOf(req.linkId);
    }
    llc::DeleteLink resp = req;
    resp.reason = slot ? llc::DeleteReason::None : llc::DeleteReason::UnknownLink;
    (void)send(via, {1, true, resp});
    if (slot)
        failover(*slot, false);
}

Result<void> LinkGroup::deleteLink(unsigned slot)
{
    if (slot >= kMaxLinks)
        return LinkErrc::InvalidSlot;
    if (!acquireFlow(Flow::DeleteLink, config_.timeouts.flowStart))
        return gone();
    std::optional<unsigned> to;
    {
        std::lock_guard lock(mutex_);
        if (links_[slot].state == LinkState::Active)
            to = survivor(slot);
        else
            slot = kMaxLinks;
    }
    if (slot == kMaxLinks) {
        releaseFlow();
        return LinkErrc::NoSuchLink;
    }
    if (!to) {
        releaseFlow();
        terminate("last link deleted");
        return {};
    }
    failover(slot, true);
    releaseFlow();
    return {};
}

void LinkGroup::handleRequest(unsigned slot, const Message& m)
{
    if (const auto* a = std::get_if<llc::AddLink>(&m.body)) {
        // A server treats a client's ADD_LINK as a suggestion (v1 invite).
        if (config_.role == Role::Client) {
            const bool added = clientAddLink(slot, *a);
            std::lock_guard lock(mutex_);
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
    } else if (const auto* c = std::get_if<llc::ConfirmRkey>(&m.body)) {
        Message reply = m;
        reply.response = true;
        auto& rc = std::get<llc::ConfirmRkey>(reply.body);
        // The RMB may already be known on another of the links it names (the
        // handshake's link, if the connection moved since): same row then.
        std::vector<std::pair<unsigned, RtokenTable::Rtoken>> columns{{slot, {c->rkey, c->vaddr}}};
        {
            std::lock_guard lock(mutex_);
            for (const llc::RtokenEntry& e : c->others)
                if (std::optional<unsigned> s = slotOf(e.linkId))
                    columns.push_back({*s, {e.rkey, e.vaddr}});
        }
        std::optional<unsigned> row;
        for (const auto& [s, t] : columns)
            if (!row)
                row = rtokens_.find(s, t.rkey);
        if (!row) {
            Result<unsigned> added = rtokens_.add(slot, {c->rkey, c->vaddr});
            if (added)
                row = *added;
        }
        if (!row)
            rc.negative = rc.retry = true;
        else
            for (const auto& [s, t] : columns)
                (void)rtokens_.set(*row, s, t);
        (void)send(slot, reply);
    } else if (const auto* d = std::get_if<llc::DeleteRkey>(&m.body)) {
        Message reply = m;
        reply.response = true;
        auto& rd = std::get<llc::DeleteRkey>(reply.body);
        for (std::size_t i = 0; i < d->rkeys.size(); ++i) {
            if (!rtokens_.remove(slot, d->rkeys[i])) {
                rd.negative = true;
                rd.errorMask |= static_cast<std::uint8_t>(0x80u >> i);
            }
        }
        (void)send(slot, reply);
    }
}

void LinkGroup::worker()
{
    std::unique_lock lock(mutex_);
    for (;;) {
        changed_.wait(lock, [&] {
            return stopping_ || violation_ || !downs_.empty() || !queue_.empty() ||
                   (delayed_ && flow_ == Flow::None);
        });
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
        // Link downs first, then requests in order, then the parked one.
        std::deque<Event>& from = !downs_.empty() ? downs_ : queue_;
        Event event;
        if (!from.empty()) {
            event = std::move(from.front());
            from.pop_front();
        } else {
            event = std::move(*delayed_);
            delayed_.reset();
        }
        lock.unlock();
        const Flow flow = event.request && event.request->type() != Type::DeleteLink
                              ? Flow::AddLink
                              : Flow::DeleteLink;
        if (!acquireFlow(flow, config_.timeouts.flowStart)) {
            lock.lock();
            if (!terminated_ && !stopping_) // a long flow ran: try again, lose nothing
                (event.request ? queue_ : downs_).push_front(std::move(event));
            continue;
        }
        bool current;
        {
            std::lock_guard relock(mutex_);
            current = links_[event.slot].epoch == event.epoch;
        }
        // Holding the flow, no link comes or goes: a request or down from a
        // link cleared meanwhile (its slot maybe reused) is dropped.
        if (current && !terminated_) {
            if (event.request)
                handleRequest(event.slot, *event.request);
            else
                failover(event.slot, true);
        }
        releaseFlow();
        lock.lock();
    }
}

// TEST_LINK on idle links, and the idle-group timer.
void LinkGroup::keepalive()
{
    const auto interval = config_.timeouts.testLink;
    const std::chrono::milliseconds idleFree =
        config_.idleFree.count() ? config_.idleFree
                                 : (config_.role == Role::Server ? 600'000ms : 610'000ms);
    std::unique_lock lock(mutex_);
    std::array<std::chrono::steady_clock::time_point, kMaxLinks> sentAt{};
    while (!stopping_) {
        changed_.wait_for(lock, interval.count()
                                    ? std::min<std::chrono::milliseconds>(interval / 4, 100ms)
                                    : 100ms);
        if (stopping_ || terminated_)
            continue;
        const auto now = std::chrono::steady_clock::now();
        if (!freeing_ && idleSince_ && connections_.empty() && now - *idleSince_ >= idleFree) {
            freeing_ = true; // openConnection refuses from here on
            lock.unlock();
            terminate("idle link group freed", llc::DeleteReason::ProgramTerminated, true);
            lock.lock();
            continue;
        }
        if (interval.count() == 0)
            continue;
        std::vector<std::shared_ptr<LinkChannel>> probe;
        for (unsigned s = 0; s < kMaxLinks; ++s) {
            Link& l = links_[s];
            if (l.state != LinkState::Active)
                continue;
            if (l.testPending) {
                if (now - sentAt[s] >= config_.timeouts.wait) {
                    l.testPending = false; // a missed reply takes the link down
                    downs_.push_back({s, l.epoch, std::nullopt});
                    changed_.notify_all();
                }
            } else if (now - l.lastRx >= interval && l.channel) {
                l.testPending = true;
                sentAt[s] = now;
                ++stats_.messagesOut;
                probe.push_back(l.channel);
            }
        }
        if (!probe.empty()) {
            lock.unlock(); // a send may wait for a slot
            for (const auto& channel : probe)
                (void)channel->send(llc::encode({1, false, llc::TestLink{}}));
            lock.lock();
        }
    }
}

void LinkGroup::terminate(std::string reason, llc::DeleteReason code, bool orderly)
{
    if (terminated_.exchange(true))
        return;
    std::optional<unsigned> via;
    {
        std::lock_guard lock(mutex_);
        via = survivor(kMaxLinks);
        if (waiter_)
            waiter_->linkDown = true;
    }
    changed_.notify_all();
    if (via)
        (void)send(*via, {1, false, llc::DeleteLink{true, orderly, 0, code}});
    std::map<std::uint32_t, std::unique_ptr<Connection>> conns;
    TerminationHandler handler;
    {
        std::lock_guard lock(mutex_);
        conns.swap(connections_);
        handler = onTerminated_;
        for (Link& l : links_)
            if (l.state != LinkState::Unused)
                l.state = LinkState::Inactive;
        setTypeLocked();
    }
    for (auto& [token, conn] : conns) { // every buffer back to the pool
        (void)pool_->release(conn->rmb);
        (void)pool_->release(conn->sndbuf);
    }
    {
        // The objects stay until closeConnection() or the group's end, so a
        // pointer the user (or a Handshake) still holds is not left dangling.
        std::lock_guard lock(mutex_);
        closed_.merge(conns);
    }
    if (handler)
        handler(std::move(reason));
}

// --- Connections ----------------------------------------------------------------

Result<Connection*> LinkGroup::openConnection(std::size_t rmbBytes, std::size_t sndbufBytes,
                                              std::optional<std::uint8_t> linkId)
{
    if (terminated_)
        return gone();
    if (!hasRoom())
        return std::make_error_code(std::errc::no_buffer_space);
    Result<BufferRef> rmb = pool_->acquire(BufferKind::Rmb, rmbBytes);
    if (!rmb)
        return rmb.error();
    Result<BufferRef> snd = pool_->acquire(BufferKind::Sndbuf, sndbufBytes);
    if (!snd) {
        (void)pool_->release(*rmb);
        return snd.error();
    }
    std::lock_guard lock(mutex_);
    // Checked again where it counts: other openers ran meanwhile, and the
    // idle timer may have fired.
    const bool full = connections_.size() >= maxConns_;
    std::optional<unsigned> best;
    for (unsigned s = 0; s < kMaxLinks; ++s)
        if (links_[s].state == LinkState::Active &&
            (linkId ? links_[s].linkId == *linkId
                    : !best || links_[s].connections < links_[*best].connections))
            best = s;
    if (full || !best || freeing_) {
        (void)pool_->release(*rmb);
        (void)pool_->release(*snd);
        return full ? std::make_error_code(std::errc::no_buffer_space) : gone();
    }
    auto conn = std::make_unique<Connection>();
    do
        conn->token = nextToken_++;
    while (conn->token == 0 || connections_.count(conn->token));
    conn->rmb = *rmb;
    conn->sndbuf = *snd;
    conn->link = *best;
    ++links_[*best].connections;
    Connection* c = conn.get();
    connections_.emplace(c->token, std::move(conn));
    idleSince_.reset();
    return c;
}

Result<LinkGroup::Handshake> LinkGroup::beginHandshake(std::size_t rmbBytes,
                                                       std::size_t sndbufBytes,
                                                       std::optional<std::uint8_t> linkId)
{
    if (!acquireFlow(Flow::Rkey, config_.timeouts.flowStart))
        return gone();
    Result<Connection*> conn = openConnection(rmbBytes, sndbufBytes, linkId);
    if (!conn) {
        releaseFlow();
        return conn.error();
    }
    return Handshake(this, *conn);
}

LinkGroup::Handshake& LinkGroup::Handshake::operator=(Handshake&& other) noexcept
{
    if (this != &other) {
        abandon();
        group_ = std::exchange(other.group_, nullptr);
        conn_ = std::exchange(other.conn_, nullptr);
    }
    return *this;
}

RtokenTable::Rtoken LinkGroup::Handshake::rtoken() const noexcept
{
    const LinkRegistration& r = conn_->rmb->registration(conn_->link);
    return {r.rkey, r.addr};
}

void LinkGroup::Handshake::abandon() noexcept
{
    if (LinkGroup* g = std::exchange(group_, nullptr)) {
        g->releaseFlow();
        (void)g->closeConnection(*conn_);
    }
}

Result<void> LinkGroup::Handshake::complete(RtokenTable::Rtoken peerRmb)
{
    if (group_ == nullptr)
        return ConnErrc::HandshakeDone; // completed or abandoned already
    if (group_->terminated_) {
        abandon();
        return gone();
    }
    const unsigned link = conn_->link; // stable: we hold the flow
    Result<unsigned> row = group_->rtokens_.add(link, peerRmb);
    Result<void> r = row ? group_->confirmRkey(*conn_) : Result<void>(row.error());
    if (!r) {
        if (row) // nobody will use it; the peer's DELETE_RKEY may find it gone
            (void)group_->rtokens_.remove(link, peerRmb.rkey);
        abandon();
        return r;
    }
    conn_->peerRmb = *row;
    std::exchange(group_, nullptr)->releaseFlow();
    return {};
}

Result<void> LinkGroup::confirmRkey(const Connection& conn)
{
    llc::ConfirmRkey c;
    unsigned via;
    {
        std::lock_guard lock(mutex_);
        via = conn.link;
        const BufferDesc& d = *conn.rmb.desc();
        c.rkey = d.registration(via).rkey;
        c.vaddr = d.registration(via).addr;
        for (unsigned s = 0; s < kMaxLinks; ++s)
            if (s != via && links_[s].state == LinkState::Active)
                c.others.push_back(
                    {links_[s].linkId, d.registration(s).rkey, d.registration(s).addr});
    }
    if (c.others.empty())
        return {}; // with one link, the handshake (CLC) told the peer already
    Result<Message> resp =
        exchange(via, {1, false, c}, via, Type::ConfirmRkey, true, config_.timeouts.wait);
    if (!resp)
        return resp.error();
    if (std::get<llc::ConfirmRkey>(resp->body).negative)
        return refused();
    return {};
}

Result<void> LinkGroup::closeConnection(Connection& conn)
{
    std::unique_ptr<Connection> owned;
    {
        std::lock_guard lock(mutex_);
        auto it = connections_.find(conn.token);
        if (it == connections_.end() || it->second.get() != &conn) {
            auto dead = closed_.find(conn.token);
            if (dead == closed_.end() || dead->second.get() != &conn)
                return ConnErrc::UnknownConnection;
            closed_.erase(dead); // the group ended it, buffers are back already
            return gone();
        }
        owned = std::move(it->second);
        connections_.erase(it);
        if (connections_.empty())
            idleSince_ = std::chrono::steady_clock::now();
        if (links_[owned->link].connections > 0)
            --links_[owned->link].connections;
    }
    // Linux reuses the RMB even when DELETE_RKEY could not be sent; the
    // caller learns of it from the error.
    Result<void> r = timedOut();
    if (acquireFlow(Flow::Rkey, config_.timeouts.flowStart)) {
        r = {};
        std::optional<unsigned> via;
        {
            std::lock_guard lock(mutex_);
            via = survivor(kMaxLinks);
        }
        if (via) {
            // The peer drops the whole rtoken row, whichever link's rkey we name.
            llc::DeleteRkey d{false, 0, 0, {owned->rmb->registration(*via).rkey}};
            Result<Message> resp =
                exchange(*via, {1, false, d}, *via, Type::DeleteRkey, true, config_.timeouts.wait);
            if (!resp)
                r = resp.error();
        }
        releaseFlow();
    }
    (void)pool_->release(owned->rmb);
    (void)pool_->release(owned->sndbuf);
    return r;
}

Result<void> LinkGroup::write(const Connection& conn, std::size_t offset,
                              std::span<const std::byte> data)
{
    if (offset > conn.sndbuf->size() || data.size() > conn.sndbuf->size() - offset)
        return ConnErrc::OutOfRange;
    if (!conn.peerRmb)
        return ConnErrc::PeerRmbUnknown; // the handshake has not told us the peer's RMB
    unsigned slot;
    std::shared_ptr<LinkChannel> channel;
    {
        std::lock_guard lock(mutex_);
        slot = conn.link;
        if (links_[slot].state != LinkState::Active)
            return gone();
        channel = links_[slot].channel;
    }
    std::optional<RtokenTable::Rtoken> rt = rtokens_.get(*conn.peerRmb, slot);
    if (!rt || rt->rkey == 0)
        return gone(); // the peer's RMB is not (yet) known on this link
    std::byte* src = conn.sndbuf->data() + offset;
    std::memcpy(src, data.data(), data.size());
    return channel->write(src, data.size(), conn.sndbuf->registration(slot).lkey,
                          rt->vaddr + offset, rt->rkey);
}

Result<void> LinkGroup::breakLink(unsigned slot)
{
    std::shared_ptr<LinkChannel> channel;
    {
        std::lock_guard lock(mutex_);
        if (slot >= kMaxLinks || links_[slot].state == LinkState::Unused)
            return LinkErrc::NoSuchLink;
        channel = links_[slot].channel;
    }
    channel->shutdown();
    return {};
}

// --- Observability -------------------------------------------------------------

GroupType LinkGroup::type() const
{
    std::lock_guard lock(mutex_);
    return type_;
}

std::vector<LinkInfo> LinkGroup::links() const
{
    std::lock_guard lock(mutex_);
    std::vector<LinkInfo> out;
    for (unsigned s = 0; s < kMaxLinks; ++s)
        if (links_[s].state != LinkState::Unused)
            out.push_back({s, links_[s].linkId, links_[s].state, links_[s].connections,
                           links_[s].local, links_[s].peer});
    return out;
}

unsigned LinkGroup::activeLinks() const
{
    std::lock_guard lock(mutex_);
    return activeLocked();
}

unsigned LinkGroup::activeLocked() const
{
    unsigned n = 0;
    for (const Link& l : links_)
        n += l.state == LinkState::Active;
    return n;
}

std::uint8_t LinkGroup::linkId(unsigned slot) const
{
    std::lock_guard lock(mutex_);
    return slot < kMaxLinks && links_[slot].state != LinkState::Unused ? links_[slot].linkId : 0;
}

std::vector<const Connection*> LinkGroup::connections() const
{
    std::lock_guard lock(mutex_);
    std::vector<const Connection*> out;
    for (const auto& [token, conn] : connections_)
        out.push_back(conn.get());
    return out;
}

unsigned LinkGroup::connectionCount() const
{
    std::lock_guard lock(mutex_);
    return static_cast<unsigned>(connections_.size());
}

bool LinkGroup::hasRoom() const
{
    std::lock_guard lock(mutex_);
    return !terminated_ && !freeing_ && connections_.size() < maxConns_ && !rtokens_.full();
}

LinkGroupStats LinkGroup::stats() const
{
    std::lock_guard lock(mutex_);
    return stats_;
}

} // namespace smc
