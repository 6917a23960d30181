// SPDX-License-Identifier: MIT
// LlcPeer: the group and its links, the step loop, settling between steps, the quiet end.
#include "tests/fuzz/llc_peer.h"

#include <cstdlib>
#include <cstring>
#include <string_view>

namespace smc::fuzz
{

using namespace std::chrono_literals;

namespace
{
// Short LLC timeouts: a run must not stall, and every wait the fuzzer makes
// the group sit out costs this much.
LlcTimeouts fuzzTimeouts(bool testLink)
{
    LlcTimeouts t;
    t.firstLink = 40ms;
    t.wait = 25ms;
    t.flowStart = 50ms;
    t.testLink = testLink ? 30ms : 0ms;
    return t;
}

// The longest one API call may take with a peer that answers nothing: the
// token, then each wait of the longest flow (addLink), and room for a loaded
// machine. Past it the call is stuck.
constexpr auto kCallLimit = 3000ms;
// Settling ends after this even if the group keeps talking.
constexpr auto kSettleCap = 250ms;
// Settling waits this long for a running API call (see settle()).
constexpr auto kLaneGrace = 80ms;
// ... and this long for the group to react to what the peer sent, when the
// group handles it on another thread (a flow woken, an event queued).
constexpr auto kReactionCap = 20ms;
} // namespace

PeerOptions PeerOptions::fromEnvironment()
{
    PeerOptions o;
    if (const char* t = std::getenv("LLC_PEER_FUZZ_TRACE"))
        o.trace = *t != '\0' && *t != '0';
    if (const char* q = std::getenv("LLC_PEER_FUZZ_QUIET_US"))
        o.quiet = std::chrono::microseconds(std::strtoul(q, nullptr, 10));
    if (const char* a = std::getenv("LLC_PEER_FUZZ_AVOID")) {
        const std::string_view list(a);
        const std::pair<const char*, unsigned> names[] = {{"dup-link-id", kAvoidDupLinkId},
                                                          {"rkey-shift", kAvoidRkeyShift},
                                                          {"flood", kAvoidFlood},
                                                          {"use-after-close", kAvoidUseAfterClose}};
        for (auto [name, bit] : names)
            if (list.find(name) != std::string_view::npos)
                o.avoid |= bit;
    }
    return o;
}

void runPeerInput(std::span<const std::uint8_t> input, const PeerOptions& options)
{
    auto peer = std::make_unique<LlcPeer>(input, options);
    peer->run();
}

// --- ApiLane -------------------------------------------------------------------

ApiLane::ApiLane() : thread_([this] { loop(); }) {}

ApiLane::~ApiLane()
{
    stop();
}

void ApiLane::stop()
{
    {
        MutexLocker lock(mutex_);
        stop_ = true;
    }
    wake_.notify_all();
    if (thread_.joinable())
        thread_.join();
}

bool ApiLane::post(std::function<void()> call)
{
    {
        MutexLocker lock(mutex_);
        if (calls_.size() >= 8 || stop_)
            return false;
        calls_.push_back(std::move(call));
        ++progress_;
    }
    wake_.notify_all();
    return true;
}

bool ApiLane::idle() const
{
    MutexLocker lock(mutex_);
    return calls_.empty() && !busy_;
}

std::uint64_t ApiLane::progress() const
{
    MutexLocker lock(mutex_);
    return progress_;
}

std::chrono::milliseconds ApiLane::running() const
{
    MutexLocker lock(mutex_);
    return busy_ ? std::chrono::duration_cast<std::chrono::milliseconds>(Clock::now() - since_)
                 : 0ms;
}

void ApiLane::loop()
{
    MutexLocker lock(mutex_);
    for (;;) {
        wake_.wait(lock, [&]() SMC_REQUIRES(mutex_) { return stop_ || !calls_.empty(); });
        if (calls_.empty())
            return; // stopped, and nothing left to run
        std::function<void()> call = std::move(calls_.front());
        calls_.pop_front();
        busy_ = true;
        since_ = Clock::now();
        ++progress_;
        lock.unlock();
        call();
        lock.lock();
        busy_ = false;
        ++progress_;
    }
}

// --- LlcPeer ---------------------------------------------------------------------

LlcPeer::LlcPeer(std::span<const std::uint8_t> input, const PeerOptions& options)
    : in_(input), options_(options)
{
    const std::uint8_t cfg = in_.u8();
    peerMaxLinks_ = in_.u8();
    peerMaxConns_ = in_.u8();
    firstLinkId_ = in_.u8();
    if ((options_.avoid & kAvoidDupLinkId) && firstLinkId_ == 0)
        firstLinkId_ = 1;
    groupServes_ = !(cfg & kCfgClientGroup);
    groupDevices_ = cfg & kCfgGroupOneDevice ? 1 : 2;
    peerDevices_ = cfg & kCfgPeerOneDevice ? 1 : 2;
    muteTestLink_ = cfg & kCfgMuteTestLink;
    noFirstConfirm_ = cfg & kCfgNoFirstConfirm;
    config_.role = groupServes_ ? Role::Server : Role::Client;
    config_.maxLinks = cfg & kCfgOneLink ? 1 : 2;
    config_.timeouts = fuzzTimeouts(cfg & kCfgTestLink);
    config_.idleFree = cfg & kCfgShortIdle ? 60ms : 0ms;
    config_.pool.memoryLimit = 8u << 20; // a bound on what one input may allocate
    trace("cfg %02x: group %s, %u+%u devices, peer offers links %u conns %u", cfg,
          groupServes_ ? "server" : "client", groupDevices_, peerDevices_, peerMaxLinks_,
          peerMaxConns_);
}

LlcPeer::~LlcPeer()
{
    lane_.stop();
    {
        MutexLocker lock(apiMutex_);
        handshakes_.clear(); // they close their connections through the group
    }
    group_.reset();
    // The ends go before the table their callbacks look into: a parked group
    // end takes its link down, and each peer end waits for its last delivery.
    std::vector<std::unique_ptr<LinkChannel>> parked;
    std::vector<std::unique_ptr<InprocChannel>> ends;
    {
        MutexLocker lock(modelMutex_);
        for (auto& [qpn, p] : parked_)
            parked.push_back(std::move(p.second));
        parked_.clear();
    }
    parked.clear();
    {
        MutexLocker lock(modelMutex_);
        for (auto& l : links_)
            ends.push_back(std::move(l->end));
    }
    ends.clear();
}

void LlcPeer::run()
{
    setUp();
    if (!group_)
        return;
    while (steps_ < kMaxSteps && !in_.empty()) {
        ++steps_;
        step();
    }
    finish();
}

std::shared_ptr<Registrar> LlcPeer::registrar()
{
    return {std::shared_ptr<void>(), &keys_}; // not owned: the peer keeps it
}

// The group's end on its `index`th link: the first of its devices not in
// `avoid` (an alternate device), else its first.
LinkAddress LlcPeer::groupAddress(unsigned index, std::span<const Gid> avoid) const
{
    LinkAddress a;
    a.qpn = 100 + index;
    a.psn = 0x1000 + index;
    a.gid = deviceGid(1, 0);
    a.mac = deviceMac(1, 0);
    for (unsigned d = 0; d < groupDevices_; ++d) {
        if (std::find(avoid.begin(), avoid.end(), deviceGid(1, d)) == avoid.end()) {
            a.gid = deviceGid(1, d);
            a.mac = deviceMac(1, d);
            break;
        }
    }
    return a;
}

// A new in-process link: the peer's end is started and kept, the group's is
// returned. Returns the link's index.
unsigned LlcPeer::makeLinkLocked(std::span<const Gid> avoid, unsigned peerDevice,
                                 std::unique_ptr<LinkChannel>& groupEnd)
{
    const unsigned index = static_cast<unsigned>(links_.size());
    auto [mine, theirs] = InprocChannel::pair();
    mine->setRemoteWriter([this](std::uint32_t rkey, std::uint64_t addr, const void* src,
                                 std::size_t n) { return rmbs_.write(rkey, addr, src, n); });
    auto l = std::make_unique<PeerLink>();
    l->tap = std::make_shared<Tap>();
    l->group = groupAddress(index, avoid);
    l->device = peerDevice % peerDevices_;
    l->self = {0x20000u + index, 0x2000u + index, deviceGid(2, l->device), deviceMac(2, l->device),
               3};
    l->end = std::move(theirs);
    groupEnd = std::make_unique<TappedChannel>(std::move(mine), l->tap);
    l->end->start({[this, index](std::vector<std::byte> b) {
                       {
                           MutexLocker lock(inboxMutex_);
                           inbox_.push_back({index, std::move(b)});
                       }
                       inboxChanged_.notify_all();
                   },
                   [this, index] {
                       {
                           MutexLocker lock(modelMutex_);
                           links_[index]->down = true;
                       }
                       {
                           MutexLocker lock(inboxMutex_);
                           inbox_.push_back({index, std::nullopt});
                       }
                       inboxChanged_.notify_all();
                   }});
    links_.push_back(std::move(l));
    return index;
}

// The server group's ADD_LINK: the peer (its client) answers from the
// device the ADD_LINK answer names (see onRequest).
Result<NewLink> LlcPeer::makeLink(std::span<const Gid> avoid, std::size_t /*maxMessage*/)
{
    MutexLocker lock(modelMutex_);
    if (links_.size() >= 256) // a bound on one input's links, far above what flows need
        return std::make_error_code(std::errc::no_such_device);
    std::unique_ptr<LinkChannel> end;
    const unsigned index = makeLinkLocked(avoid, 0, end);
    return NewLink{std::move(end), links_[index]->group, registrar()};
}

// The client group joins a link the peer offered: the end parked under the
// qpn its ADD_LINK named.
Result<NewLink> LlcPeer::joinLink(const LinkAddress& peer, std::span<const Gid> avoid,
                                  std::size_t /*maxMessage*/)
{
    MutexLocker lock(modelMutex_);
    auto it = parked_.find(peer.qpn);
    if (it == parked_.end())
        return std::make_error_code(std::errc::no_such_device);
    const unsigned index = it->second.first;
    std::unique_ptr<LinkChannel> end = std::move(it->second.second);
    parked_.erase(it);
    links_[index]->group = groupAddress(index, avoid);
    return NewLink{std::move(end), links_[index]->group, registrar()};
}

void LlcPeer::setUp()
{
    Result<std::unique_ptr<LinkGroup>> g = LinkGroup::create(config_, *this);
    if (!g)
        fail("LinkGroup::create: " + g.error().message());
    group_ = std::move(*g);
    group_->onTerminated([this](std::string why) {
        ++terminations_;
        trace("terminated: %s", why.c_str());
    });
    NewLink first;
    {
        MutexLocker lock(modelMutex_);
        std::unique_ptr<LinkChannel> end;
        const unsigned index = makeLinkLocked({}, 0, end);
        links_[index]->linkId = firstLinkId_;
        first = NewLink{std::move(end), links_[index]->group, registrar()};
    }
    // start() blocks for the peer: it runs on the lane, we answer.
    auto started = std::make_shared<NewLink>(std::move(first));
    lane_.post([this, started] {
        Result<void> r = group_->start(std::move(*started));
        trace("start: %s", r ? "ok" : r.error().message().c_str());
    });
    if (!groupServes_ && !noFirstConfirm_) {
        PeerLink& l = link(0);
        send(0, {1, false,
                 llc::ConfirmLink{l.self.mac,
                                  l.self.gid,
                                  l.self.qpn,
                                  firstLinkId_,
                                  {},
                                  peerMaxLinks_,
                                  peerMaxConns_}});
    }
    // The first link and (server) the second one come up before the steps.
    const auto until = Clock::now() + kCallLimit;
    while (!lane_.idle() && Clock::now() < until)
        settle(options_.quiet);
    settle(options_.quiet);
    checkInvariants();
}

void LlcPeer::step()
{
    const std::uint8_t opcode = in_.u8();
    const Op op = static_cast<Op>((opcode & kOpMask) % static_cast<unsigned>(Op::Count));
    if (op == Op::Nop)
        return;
    holding_ = opcode & kHold;
    repeating_ = opcode & kRepeat;
    if (op < Op::Open)
        peerStep(op);
    else
        apiStep(op, opcode);
    const bool held = holding_;
    holding_ = repeating_ = false;
    if (!held)
        flush(held_); // the messages held by earlier steps go after this one's
    flush(late_);     // late answers from the last settling go now
    settle(options_.quiet);
    checkInvariants();
}

void LlcPeer::flush(std::vector<Pending>& pending)
{
    std::vector<Pending> out = std::exchange(pending, {});
    for (const Pending& p : out)
        transmit(p.link, p.bytes);
}

// The peer goes quiet (answers nothing), the API calls under way return, no
// flow is stuck, and the group goes cleanly.
void LlcPeer::finish()
{
    trace("-- quiet after %u steps", steps_.load());
    quiet_ = true;
    quietSince_ = Clock::now();
    held_.clear();
    late_.clear();
    drainLane(kCallLimit);
    // Pending handshakes hold the flow token by design: give them up.
    lane_.post([this] {
        std::vector<LinkGroup::Handshake> pending;
        {
            MutexLocker lock(apiMutex_);
            pending = std::move(handshakes_);
        }
    }); // each abandoned as `pending` goes
    drainLane(kCallLimit);
    checkFlowFree();
    // The token came free, but queued requests may keep flows going: the
    // group must fall silent (TEST_LINK aside) within the same bound.
    while (Clock::now() - lastGroupRequest_ < config_.timeouts.firstLink + 5ms) {
        if (Clock::now() - quietSince_ > quietLimit())
            fail("the group still runs flows " + std::to_string(quietLimit().count()) +
                 " ms after the peer went quiet");
        settle(options_.quiet);
    }
    finalChecks_ = true;
    settle(options_.quiet);
    checkInvariants();
    lane_.stop();
    if (std::optional<std::string> v = registrations())
        fail(*v);
    const auto t0 = Clock::now();
    group_.reset();
    const auto took = Clock::now() - t0;
    if (took > 2s)
        fail("destroying the group took " +
             std::to_string(std::chrono::duration_cast<std::chrono::milliseconds>(took).count()) +
             " ms");
    {
        MutexLocker lock(apiMutex_);
        conns_.clear();
        closed_.clear();
    }
    if (keys_.live() != 0)
        fail(std::to_string(keys_.live()) + " buffer registrations outlive the group");
}

void LlcPeer::drainLane(std::chrono::milliseconds limit)
{
    const auto until = Clock::now() + limit;
    while (!lane_.idle()) {
        if (Clock::now() > until)
            fail("an API call did not return after the peer went quiet");
        settle(options_.quiet);
    }
}

void LlcPeer::checkLaneStuck()
{
    if (lane_.running() > kCallLimit)
        fail("an API call has run for " + std::to_string(lane_.running().count()) + " ms");
}

// A request the peer leaves unanswered: settling waits the group's timeout
// out, so what the timeout does happens before the next step.
void LlcPeer::expectTimeout(std::chrono::milliseconds groupWait)
{
    quietUntil_ = std::max(quietUntil_, Clock::now() + groupWait + options_.quiet);
}

unsigned LlcPeer::linkCount()
{
    MutexLocker lock(modelMutex_);
    return static_cast<unsigned>(links_.size());
}

LlcPeer::PeerLink& LlcPeer::link(unsigned index)
{
    MutexLocker lock(modelMutex_);
    return *links_.at(index);
}

// Everything sent either way was handled (or its link died) and the inbox is empty.
bool LlcPeer::drained()
{
    {
        MutexLocker lock(inboxMutex_);
        if (!inbox_.empty())
            return false;
    }
    MutexLocker lock(modelMutex_);
    for (const auto& l : links_) {
        const Tap& t = *l->tap;
        const bool toGroup = !t.started || t.down || t.gone || t.delivered >= l->sent;
        const bool toPeer = l->down || l->end->delivered() >= t.sent;
        if (!toGroup || !toPeer)
            return false;
    }
    return true;
}

// Changes whenever anything moved: messages either way, links, API calls.
std::uint64_t LlcPeer::fingerprint()
{
    std::uint64_t f = lane_.progress() * 1000003u + static_cast<unsigned>(terminations_.load());
    MutexLocker lock(modelMutex_);
    for (const auto& l : links_)
        f = f * 31 + l->tap->sent + 7 * l->tap->delivered + 13 * l->end->delivered() +
            (l->down ? 17 : 0) + (l->tap->down ? 19 : 0) + (l->tap->started ? 23 : 0);
    return f;
}

// What changes when the group did something about a message: it sent one,
// dropped or parked one, a link changed state, it ended, an API call moved.
std::uint64_t LlcPeer::reactionMark()
{
    const LinkGroupStats st = group_->stats();
    std::uint64_t f = st.messagesOut * 1000003u + st.dropped * 10007u + st.delayed * 101u +
                      st.failovers + (group_->terminated() ? 7 : 0) + lane_.progress() * 65537u;
    for (const LinkInfo& l : group_->links())
        f = f * 31 + l.slot * 4 + static_cast<unsigned>(l.state) + 1;
    return f;
}

void LlcPeer::expectReaction()
{
    if (expectReaction_ || !group_)
        return; // the first message's baseline stands
    expectReaction_ = true;
    mark_ = reactionMark();
    reactionSince_ = Clock::now();
}

// Answers what the group sent until the group stays quiet for `quiet` with
// everything handled (and past any timeout the peer provoked).
void LlcPeer::settle(std::chrono::microseconds quiet)
{
    const auto start = Clock::now();
    auto last = start;
    std::uint64_t seen = fingerprint();
    for (;;) {
        if (processInbox())
            last = Clock::now();
        const auto now = Clock::now();
        const std::uint64_t f = fingerprint();
        if (f != seen) {
            seen = f;
            last = now;
        }
        // An API call is given time to finish unless the peer owes it an
        // answer (a late one) or it waits for the flow token or an answer past
        // flowStart + wait, when it will time out: so calls and steps
        // interleave the same way on every run.
        const bool laneSettled = lane_.idle() || !late_.empty() || lane_.running() > kLaneGrace;
        if (expectReaction_ && (reactionMark() != mark_ || now - reactionSince_ > kReactionCap))
            expectReaction_ = false;
        // An ending group has told its handler (all buffers back) before it counts as settled.
        const bool endSettled = !group_ || !group_->terminated() || terminations_ > 0;
        if (now - last >= quiet && now >= quietUntil_ && laneSettled && !expectReaction_ &&
            endSettled && drained())
            return;
        if (now - start > kSettleCap && now >= quietUntil_)
            return;
        checkLaneStuck();
        MutexLocker lock(inboxMutex_);
        if (inbox_.empty())
            (void)inboxChanged_.waitFor(lock, 100us);
    }
}

bool LlcPeer::processInbox()
{
    bool any = false;
    for (;;) {
        InboxItem item;
        {
            MutexLocker lock(inboxMutex_);
            if (inbox_.empty())
                return any;
            item = std::move(inbox_.front());
            inbox_.pop_front();
        }
        any = true;
        if (!item.bytes) {
            trace("link %u down", item.link);
            continue;
        }
        Result<llc::Message> m = llc::decode(*item.bytes);
        if (!m)
            fail("the group sent a message that does not decode: " + m.error().message());
        if (m->type() != llc::Type::TestLink)
            lastGroupRequest_ = Clock::now();
        if (quiet_) {
            trace("group -> link %u: %s%s (the peer is quiet)", item.link, llc::toString(m->type()),
                  m->response ? " response" : "");
            continue;
        }
        onGroupMessage(item.link, *m);
    }
}

} // namespace smc::fuzz
