// SPDX-License-Identifier: MIT
// LlcPeer's invariants: what the group guarantees whatever its peer sends, checked after each step.
#include <algorithm>
#include <array>
#include <cstdarg>
#include <cstdio>
#include <set>

#include "tests/fuzz/llc_peer.h"

namespace smc::fuzz
{

using namespace std::chrono_literals;

namespace
{
// A violation must still be there this long (re-checked, the peer still
// answering) before it counts: the group's threads move one part of its
// state after another (a link goes INACTIVE, then its connections move; the
// group ends, then its buffers go back), and a check may fall in between.
constexpr auto kPersist = 150ms;
} // namespace

void LlcPeer::fail(const std::string& why)
{
    std::fprintf(stderr, "llc-peer-fuzz: INVARIANT VIOLATED after step %u: %s\n", steps_.load(),
                 why.c_str());
    std::fflush(stderr);
    __builtin_trap();
}

void LlcPeer::trace(const char* fmt, ...)
{
    if (!options_.trace || traceMuted_)
        return;
    const auto us =
        std::chrono::duration_cast<std::chrono::microseconds>(Clock::now() - born_).count();
    char line[512];
    int n = std::snprintf(line, sizeof line, "[%7.2f ms #%u] ", static_cast<double>(us) / 1000.0,
                          steps_.load());
    va_list args;
    va_start(args, fmt);
    n += std::vsnprintf(line + n, sizeof line - static_cast<std::size_t>(n) - 1, fmt, args);
    va_end(args);
    n = std::min<int>(n, sizeof line - 2);
    line[n] = '\n';
    std::fwrite(line, 1, static_cast<std::size_t>(n) + 1, stderr); // one write: threads trace too
}

// What holds whenever the group is at rest. Connections and buffers are
// looked at only while no API call runs: the API thread alone frees
// connections (closeConnection), and opens and closes move buffers first.
std::optional<std::string> LlcPeer::violation()
{
    const std::vector<LinkInfo> links = group_->links();
    std::array<bool, kMaxLinks> used{}, active{};
    std::set<std::uint8_t> ids;
    for (const LinkInfo& l : links) {
        if (l.slot >= kMaxLinks)
            return "a link in slot " + std::to_string(l.slot);
        used[l.slot] = true;
        if (l.state != LinkState::Active)
            continue;
        active[l.slot] = true;
        // The server numbers links: never 0, never one in use (the client adopts them).
        if (l.linkId == 0)
            return "an ACTIVE link (slot " + std::to_string(l.slot) + ") has link id 0";
        if (!ids.insert(l.linkId).second)
            return "two ACTIVE links have link id " + std::to_string(l.linkId);
    }
    // At the end, with the flow token free, every link that went down has
    // failed over (or ended the group): none is left ACTIVE.
    if (finalChecks_ && !group_->terminated()) {
        for (const LinkInfo& l : links) {
            const unsigned index = l.local.qpn - 100; // groupAddress()
            if (l.state == LinkState::Active && index < linkCount() && link(index).tap->down)
                return "slot " + std::to_string(l.slot) + " is ACTIVE, its link is down";
        }
    }
    // Both sides keep the smaller max links: with one agreed, no second link comes up.
    if (group_->maxLinks() == 1 && ids.size() > 1)
        return std::to_string(ids.size()) + " ACTIVE links with max links 1";
    // clearLink empties a slot's rtoken column: nothing writes through a link that is gone.
    const RtokenTable& rt = group_->rtokens();
    for (unsigned s = 0; s < kMaxLinks; ++s)
        for (unsigned r = 0; r < RtokenTable::kRows && !used[s]; ++r)
            if (rt.get(r, s))
                return "rtoken row " + std::to_string(r) + " has a column for slot " +
                       std::to_string(s) + ", which has no link";

    if (!lane_.idle())
        return std::nullopt;
    const bool ended = group_->terminated();
    const auto conns = group_->connections();
    if (conns.size() > group_->maxConns())
        return std::to_string(conns.size()) + " connections open, max conns is " +
               std::to_string(group_->maxConns());
    if (ended && !conns.empty())
        return "the group ended with " + std::to_string(conns.size()) + " connections open";
    std::array<unsigned, kMaxLinks> on{};
    std::int64_t rmbBytes = 0, sndBytes = 0;
    for (const auto& c : conns) {
        const unsigned s = c->link();
        if (s >= kMaxLinks)
            return "a connection rides slot " + std::to_string(s);
        if (!active[s])
            return "a connection rides slot " + std::to_string(s) + ", which is not ACTIVE";
        // A link is ACTIVE only once every buffer is registered on it.
        for (unsigned t = 0; t < kMaxLinks; ++t)
            if (active[t] && !(c->rmb->isRegistered(t) && c->sndbuf->isRegistered(t)))
                return "an open connection's buffers are not registered on ACTIVE slot " +
                       std::to_string(t);
        ++on[s];
        rmbBytes += static_cast<std::int64_t>(c->rmb.size());
        sndBytes += static_cast<std::int64_t>(c->sndbuf.size());
    }
    for (const LinkInfo& l : links)
        if (l.connections != on[l.slot])
            return "slot " + std::to_string(l.slot) + " counts " + std::to_string(l.connections) +
                   " connections, " + std::to_string(on[l.slot]) + " ride it";
    // The peer can write to every completed connection's RMB on every ACTIVE
    // link: it was told the RMB's rkey there (CLC for the handshake's link,
    // CONFIRM_RKEY for the others, ADD_LINK_CONT for links added later).
    if (!peerLied_) {
        MutexLocker api(apiMutex_);
        MutexLocker lock(learntMutex_);
        for (const auto& c : conns) {
            if (!completed_.count(&*c))
                continue;
            for (const LinkInfo& l : links) {
                const auto told = learnt_.find(l.linkId);
                if (l.state == LinkState::Active &&
                    (told == learnt_.end() ||
                     !told->second.count(c->rmb->registration(l.slot).rkey)))
                    return "the peer was never told a connection's RMB on link id " +
                           std::to_string(l.linkId) + " (slot " + std::to_string(l.slot) + ")";
            }
        }
    }
    // Every buffer is owned once: each open connection leases one RMB and one
    // sndbuf, nothing else leases any (a closed or ended one gave both back).
    const PoolStats ps = group_->pool().stats();
    const auto leased = [](const KindStats& k) {
        return static_cast<std::int64_t>(k.allocs + k.reuses) -
               static_cast<std::int64_t>(k.releases);
    };
    const auto n = static_cast<std::int64_t>(conns.size());
    if (leased(ps.rmb) != n || leased(ps.sndbuf) != n)
        return std::to_string(leased(ps.rmb)) + " RMBs and " + std::to_string(leased(ps.sndbuf)) +
               " sndbufs leased for " + std::to_string(n) + " open connections";
    if (ps.rmb.inUseBytes != rmbBytes || ps.sndbuf.inUseBytes != sndBytes)
        return "in-use bytes " + std::to_string(ps.rmb.inUseBytes) + "/" +
               std::to_string(ps.sndbuf.inUseBytes) + ", the open connections hold " +
               std::to_string(rmbBytes) + "/" + std::to_string(sndBytes);
    return std::nullopt;
}

// At the end, with nothing running: every buffer the pool holds is
// registered exactly on the slots that have a link, and the registrar holds
// those registrations and no others.
std::optional<std::string> LlcPeer::registrations()
{
    std::array<bool, kMaxLinks> used{};
    for (const LinkInfo& l : group_->links())
        used[l.slot] = true;
    std::size_t expected = 0;
    for (BufferKind kind : {BufferKind::Rmb, BufferKind::Sndbuf}) {
        for (const BufferDesc* d : group_->pool().buffers(kind)) {
            for (unsigned s = 0; s < kMaxLinks; ++s) {
                if (d->isRegistered(s) != used[s])
                    return std::string("a pooled ") + toString(kind) + " is " +
                           (used[s] ? "not " : "") + "registered on slot " + std::to_string(s);
                expected += used[s];
            }
        }
    }
    if (keys_.live() != expected)
        return "the registrar holds " + std::to_string(keys_.live()) + " registrations, " +
               std::to_string(expected) + " expected";
    return std::nullopt;
}

void LlcPeer::checkInvariants()
{
    std::optional<std::string> v = violation();
    if (!v)
        return;
    const auto until = Clock::now() + kPersist;
    while (Clock::now() < until) {
        settle(options_.quiet);
        std::optional<std::string> again = violation();
        if (!again)
            return; // between two of the group's moves
        v = std::move(again);
    }
    fail(*v);
}

// How long after the peer went quiet the group may still run flows. With
// nobody answering, each flow ends at its first wait (firstLink at most);
// one may run, one be parked and each link's down be failed over (a
// DELETE_LINK wait), behind the flowStart of a call that waited for the
// token; the rest is room for a loaded machine. Requests queued beyond
// those (Linux parks one and drops the rest) run past it.
std::chrono::milliseconds LlcPeer::quietLimit() const
{
    const LlcTimeouts& t = config_.timeouts;
    return t.flowStart + 2 * t.firstLink + kMaxLinks * t.wait + 400ms;
}

// The peer is quiet and no API call runs: the flow token must come free
// within quietLimit(), so a call that needs it gets it. deleteLink of a slot
// without an ACTIVE link takes the token and gives it back at once.
void LlcPeer::checkFlowFree()
{
    for (;;) {
        if (group_->terminated())
            return;
        std::optional<unsigned> spare;
        for (unsigned s = 0; s < kMaxLinks && !spare; ++s) {
            bool taken = false;
            for (const LinkInfo& l : group_->links())
                taken |= l.slot == s && l.state == LinkState::Active;
            if (!taken)
                spare = s;
        }
        std::error_code ec;
        if (spare) {
            Result<void> r = group_->deleteLink(*spare);
            ec = r ? std::error_code() : r.error();
        } else {
            Result<LinkGroup::Handshake> hs = group_->beginHandshake(16384, 16384);
            ec = hs ? std::error_code() : hs.error();
        } // the handshake is abandoned here (its DELETE_RKEY times out: the peer is quiet)
        if (ec != std::errc::timed_out)
            return;
        if (Clock::now() - quietSince_ > quietLimit())
            fail("the flow token is still taken " + std::to_string(quietLimit().count()) +
                 " ms after the peer went quiet");
        settle(options_.quiet);
    }
}

} // namespace smc::fuzz
