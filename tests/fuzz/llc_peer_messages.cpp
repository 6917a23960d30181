// SPDX-License-Identifier: MIT
// LlcPeer: the messages the peer sends on its own (well-formed with fuzzed fields, raw, bursts).
#include <algorithm>

#include "tests/fuzz/llc_peer.h"

namespace smc::fuzz
{

using llc::Message;
using namespace std::chrono_literals;

namespace
{
constexpr llc::DeleteReason kReasons[] = {
    llc::DeleteReason::None,
    llc::DeleteReason::LostPath,
    llc::DeleteReason::OperatorTerminated,
    llc::DeleteReason::ProgramTerminated,
    llc::DeleteReason::ProtocolViolation,
    llc::DeleteReason::NoAsymmetricNeeded,
    llc::DeleteReason::UnknownLink,
    static_cast<llc::DeleteReason>(0xdeadbeef),
};
} // namespace

std::optional<unsigned> LlcPeer::pickLink(std::uint8_t arg)
{
    MutexLocker lock(modelMutex_);
    std::vector<unsigned> candidates;
    for (unsigned i = 0; i < links_.size(); ++i)
        if ((arg & kAnyLink) || !links_[i]->down)
            candidates.push_back(i);
    if (candidates.empty())
        return std::nullopt;
    return candidates[(arg & ~kAnyLink) % candidates.size()];
}

std::vector<std::uint8_t> LlcPeer::liveLinkIds()
{
    std::vector<std::uint8_t> ids;
    MutexLocker lock(modelMutex_);
    for (const auto& l : links_)
        if (!l->down && l->linkId != 0)
            ids.push_back(l->linkId);
    return ids;
}

// The serving peer numbers links as Linux does: never 0, never one in use.
std::uint8_t LlcPeer::freshLinkId()
{
    const std::vector<std::uint8_t> inUse = liveLinkIds();
    do
        ++lastLinkId_;
    while (lastLinkId_ == 0 || std::find(inUse.begin(), inUse.end(), lastLinkId_) != inUse.end());
    return lastLinkId_;
}

// Mode 0: fresh, 1: the id of link `via` (in use), 2: zero, 3: `fuzzed`.
std::uint8_t LlcPeer::chooseLinkId(unsigned mode, std::uint8_t fuzzed, unsigned via)
{
    std::uint8_t id = 0;
    switch (mode & 3) {
    case 0:
        return freshLinkId();
    case 1:
        id = link(via).linkId;
        break;
    case 2:
        id = 0;
        break;
    default:
        id = fuzzed;
        break;
    }
    if (options_.avoid & kAvoidDupLinkId) {
        const std::vector<std::uint8_t> inUse = liveLinkIds();
        if (id == 0 || std::find(inUse.begin(), inUse.end(), id) != inUse.end())
            return freshLinkId();
    }
    return id;
}

// A step's message: held for after the next step, and repeated, as the step says.
void LlcPeer::send(unsigned index, const Message& m)
{
    sendBytes(index, llc::encode(m));
}

void LlcPeer::sendBytes(unsigned index, std::vector<std::byte> bytes)
{
    for (int i = repeating_ ? 2 : 1; i > 0; --i) {
        if (holding_ && (options_.avoid & kAvoidFlood) && held_.size() >= 2)
            return; // held messages go out in one burst: no bursts
        if (holding_)
            held_.push_back({index, bytes});
        else
            transmit(index, bytes);
    }
}

void LlcPeer::transmit(unsigned index, const std::vector<std::byte>& bytes)
{
    PeerLink& l = link(index);
    // The group answers TEST_LINK and the RKEY requests in the delivery
    // itself; anything else may wake a flow or queue an event, whose effect
    // comes later, on another thread: settling waits for it.
    const Result<Message> m = llc::decode(bytes);
    const llc::Type type = m ? m->type() : llc::Type::TestLink;
    if (!m || m->response ||
        (type != llc::Type::TestLink && type != llc::Type::ConfirmRkey &&
         type != llc::Type::DeleteRkey))
        expectReaction();
    const bool ok = bool(l.end->send(bytes));
    if (ok)
        ++l.sent;
    if (options_.trace && !traceMuted_) {
        trace("peer -> link %u: %s%s %zu bytes%s", index,
              m ? llc::toString(m->type()) : "malformed", m && m->response ? " response" : "",
              bytes.size(), ok ? "" : " (not sent: link down)");
    }
}

// Every peer RMB the group knows, as ADD_LINK_CONT pairs them: its rkey on
// the link the message travels on, its rtoken on the new one.
std::vector<llc::RkeyPair> LlcPeer::peerPairs(std::uint8_t viaId, std::uint8_t newId) const
{
    std::vector<llc::RkeyPair> out;
    for (unsigned i = 0; i < kPeerRmbs; ++i)
        if (shared_.load() & (1u << i))
            out.push_back({PeerRmbs::rkey(i, viaId), PeerRmbs::rkey(i, newId), rmbs_.vaddr(i)});
    return out;
}

// The peer's next ADD_LINK_CONT of the flow.
llc::AddLinkCont LlcPeer::nextCont()
{
    AddFlow& f = addFlow_;
    const std::size_t left = f.mine.size() - std::min(f.sent, f.mine.size());
    const std::size_t n = std::min<std::size_t>(2, left);
    llc::AddLinkCont c{f.linkId, static_cast<std::uint8_t>(left), {}};
    c.rkeys.assign(f.mine.begin() + static_cast<std::ptrdiff_t>(f.sent),
                   f.mine.begin() + static_cast<std::ptrdiff_t>(f.sent + n));
    f.sent += n;
    return c;
}

// The serving peer offers a link (ADD_LINK): a new in-process link, the
// group's end parked under the qpn the message names. Flags as Op::AddLink.
void LlcPeer::offerLink(unsigned via, std::uint8_t flags, std::uint8_t linkId)
{
    const bool sameDevice = (flags & 0x04) || peerDevices_ == 1;
    const unsigned device = sameDevice ? link(via).device : 1 - link(via).device;
    unsigned fresh;
    {
        MutexLocker lock(modelMutex_);
        std::unique_ptr<LinkChannel> end;
        fresh = makeLinkLocked({}, device, end);
        links_[fresh]->linkId = linkId;
        parked_[links_[fresh]->self.qpn] = {fresh, std::move(end)};
    }
    const PeerLink& n = link(fresh);
    llc::AddLink a{bool(flags & 0x01),
                   static_cast<std::uint8_t>(flags & 0x01 ? 1 : 0),
                   n.self.mac,
                   n.self.gid,
                   flags & 0x08 ? n.self.qpn + 0x1000 : n.self.qpn,
                   linkId,
                   static_cast<std::uint8_t>(flags & 0x10 ? 0 : 3),
                   n.self.psn,
                   std::nullopt};
    std::uint8_t version = 1;
    if (flags & 0x20) { // v2: the rkeys ride in the ADD_LINK itself
        version = 2;
        a.ext = llc::AddLinkV2Ext{false, n.group.gid, peerPairs(link(via).linkId, linkId)};
    }
    const bool response = flags & 0x02;
    addFlow_ = {!response && !(flags & 0x01),        true, via, fresh, linkId,
                peerPairs(link(via).linkId, linkId), 0};
    trace("peer offers link %u id %u on link %u", fresh, linkId, via);
    send(via, {version, response, a});
}

// A proper message of `kind` on `link`, as the model knows it (no side effects).
Message LlcPeer::canonical(Kind kind, unsigned index)
{
    const PeerLink& l = link(index);
    const std::uint8_t id = l.linkId;
    switch (kind) {
    case Kind::TestLink:
        return {1, false, llc::TestLink{}};
    case Kind::ConfirmRkey:
        return {1, false,
                llc::ConfirmRkey{false, false, PeerRmbs::rkey(0, id), rmbs_.vaddr(0), {}}};
    case Kind::DeleteRkey:
        return {1, false, llc::DeleteRkey{false, 0, 0, {PeerRmbs::rkey(0, id)}}};
    case Kind::DeleteLink:
        return {1, false, llc::DeleteLink{false, true, id, llc::DeleteReason::LostPath}};
    case Kind::AddLink:
        return {1, false,
                llc::AddLink{false, 0, l.self.mac, l.self.gid, 0x7777,
                             static_cast<std::uint8_t>(lastLinkId_ + 1), 3, 1, std::nullopt}};
    case Kind::AddLinkCont:
        return {1, false, llc::AddLinkCont{id, 0, {}}};
    case Kind::ConfirmLink:
        return {1, false,
                llc::ConfirmLink{
                    l.self.mac, l.self.gid, l.self.qpn, id, {}, peerMaxLinks_, peerMaxConns_}};
    case Kind::ReqAddLink:
        return {2, false, llc::ReqAddLink{{deviceGid(2, 1)}}};
    case Kind::ConfirmRkeyCont:
    case Kind::Count:
        break;
    }
    return {1, false, llc::ConfirmRkeyCont{}};
}

void LlcPeer::peerStep(Op op)
{
    if (op == Op::Wait) {
        const auto ms = std::chrono::milliseconds(in_.u8() % 64);
        trace("wait %lld ms", static_cast<long long>(ms.count()));
        quietUntil_ = std::max(quietUntil_, Clock::now() + ms);
        return;
    }
    const std::optional<unsigned> at = pickLink(in_.u8());
    if (!at)
        return; // no link left to send on
    const unsigned via = *at;
    PeerLink& l = link(via);
    if (op == Op::Raw || op == Op::Mutate)
        peerLied_ = true; // anything goes, rkeys of another RMB's row too
    switch (op) {
    case Op::TestLink: {
        const std::uint8_t f = in_.u8();
        send(via, {static_cast<std::uint8_t>(f & 0x02 ? 2 : 1), bool(f & 0x01), llc::TestLink{}});
        break;
    }
    case Op::ConfirmRkey: {
        const unsigned rmb = in_.u8() % kPeerRmbs;
        const std::uint8_t f = in_.u8();
        llc::ConfirmRkey c{
            bool(f & 0x01), bool(f & 0x02), PeerRmbs::rkey(rmb, l.linkId), rmbs_.vaddr(rmb), {}};
        if (f & 0x40) {
            c.rkey = in_.u32();
            peerLied_ = true; // it may find another RMB's row
        }
        const unsigned want = (f >> 4) & 3;
        std::vector<std::uint8_t> others;
        for (std::uint8_t id : liveLinkIds())
            if (id != l.linkId && (want == 3 || others.size() < want))
                others.push_back(id);
        for (std::uint8_t id : others) {
            const std::uint8_t named = f & 0x80 ? in_.u8() : id;
            if (c.others.size() < 2)
                c.others.push_back({named, PeerRmbs::rkey(rmb, named), rmbs_.vaddr(rmb)});
        }
        if (!(f & 0x04))
            shared_ |= 1u << rmb;
        send(via, {static_cast<std::uint8_t>(f & 0x08 ? 2 : 1), bool(f & 0x04), c});
        break;
    }
    case Op::DeleteRkey: {
        const std::uint8_t f = in_.u8();
        const std::uint8_t count = in_.u8();
        const unsigned rmb = in_.u8();
        const bool v2 = f & 0x01;
        std::size_t n = v2 ? count : 1 + count % 8;
        if (v2 && (options_.avoid & kAvoidRkeyShift))
            n = std::min<std::size_t>(n, 32);
        llc::DeleteRkey d{bool(f & 0x04), 0, 0, {}};
        for (std::size_t i = 0; i < n; ++i)
            d.rkeys.push_back(f & 0x08 ? 0x0bad0000u + static_cast<std::uint32_t>(i)
                                       : PeerRmbs::rkey(static_cast<unsigned>(rmb + i), l.linkId));
        if (!(f & 0x02) && !(f & 0x08)) {
            for (std::size_t i = 0; i < n; ++i) {
                shared_ &= ~(1u << ((rmb + i) % kPeerRmbs));
                deletedRmbs_ |= 1u << ((rmb + i) % kPeerRmbs);
            }
        }
        send(via, {static_cast<std::uint8_t>(v2 ? 2 : 1), bool(f & 0x02), d});
        break;
    }
    case Op::DeleteLink: {
        const std::uint8_t f = in_.u8();
        const std::uint8_t arg = in_.u8();
        const llc::DeleteReason reason = kReasons[in_.u8() % std::size(kReasons)];
        std::uint8_t id = arg;
        if (!(f & 0x08)) {
            const std::optional<unsigned> target = pickLink(arg);
            id = target ? link(*target).linkId : l.linkId;
        }
        send(via, {1, bool(f & 0x04), llc::DeleteLink{bool(f & 0x01), bool(f & 0x02), id, reason}});
        break;
    }
    case Op::AddLink: {
        const std::uint8_t f = in_.u8();
        const std::uint8_t fuzzed = (f >> 6) == 3 ? in_.u8() : 0;
        if (groupServes_) { // a client's ADD_LINK: the server treats it as a suggestion
            llc::AddLink a{bool(f & 0x01), 0, l.self.mac, l.self.gid,  l.self.qpn,
                           fuzzed,         3, 0,          std::nullopt};
            send(via, {1, bool(f & 0x02), a});
            break;
        }
        offerLink(via, f, chooseLinkId(f >> 6, fuzzed, via));
        break;
    }
    case Op::AddLinkCont: {
        const std::uint8_t f = in_.u8();
        const std::uint8_t id = f & 0x08 ? in_.u8() : addFlow_.linkId;
        const std::uint8_t remaining = in_.u8();
        llc::AddLinkCont c{id, remaining, {}};
        const std::vector<llc::RkeyPair> pairs = peerPairs(l.linkId, id);
        for (unsigned i = 0; i < std::min(2u, (f >> 1) & 3u) && i < pairs.size(); ++i)
            c.rkeys.push_back(pairs[i]);
        send(via, {1, bool(f & 0x01), c});
        break;
    }
    case Op::ConfirmLink: {
        const std::uint8_t f = in_.u8();
        const std::uint8_t id = f & 0x02 ? in_.u8() : l.linkId;
        const std::uint8_t links = in_.u8(), conns = in_.u8();
        send(via, {1, bool(f & 0x01),
                   llc::ConfirmLink{l.self.mac, l.self.gid, l.self.qpn, id, {}, links, conns}});
        break;
    }
    case Op::ReqAddLink: {
        const std::uint8_t f = in_.u8();
        llc::ReqAddLink q;
        for (unsigned i = 0; i < ((f >> 1) & 3u); ++i)
            q.gids.push_back(deviceGid(2, i));
        send(via, {2, bool(f & 0x01), q});
        break;
    }
    case Op::ConfirmRkeyCont:
        send(via, {1, bool(in_.u8() & 0x01), llc::ConfirmRkeyCont{}});
        break;
    case Op::Raw: {
        const std::vector<std::uint8_t> raw = in_.bytes(in_.u8());
        std::vector<std::byte> bytes(raw.size());
        std::transform(raw.begin(), raw.end(), bytes.begin(),
                       [](std::uint8_t b) { return std::byte{b}; });
        sendBytes(via, std::move(bytes));
        break;
    }
    case Op::Mutate: {
        const auto kind = static_cast<Kind>(in_.u8() % static_cast<unsigned>(Kind::Count));
        std::vector<std::byte> bytes = llc::encode(canonical(kind, via));
        const std::size_t pos = in_.u8() % bytes.size();
        bytes[pos] ^= std::byte{in_.u8()};
        sendBytes(via, std::move(bytes));
        break;
    }
    case Op::Flood: {
        unsigned count = 1 + in_.u8();
        if (options_.avoid & kAvoidFlood)
            count = std::min(count, 2u);
        const auto kind = static_cast<Kind>(in_.u8() % static_cast<unsigned>(Kind::Count));
        const std::vector<std::byte> bytes = llc::encode(canonical(kind, via));
        trace("flood: %u x %s", count, llc::toString(canonical(kind, via).type()));
        if (kind == Kind::DeleteRkey)
            deletedRmbs_ |= 1u; // canonical(): peer RMB 0
        traceMuted_ = true;     // one line, not hundreds
        for (unsigned i = 0; i < count; ++i)
            sendBytes(via, bytes);
        traceMuted_ = false;
        break;
    }
    case Op::LinkFault:
        trace("peer breaks link %u", via);
        l.end->shutdown();
        break;
    default:
        break;
    }
}

} // namespace smc::fuzz
