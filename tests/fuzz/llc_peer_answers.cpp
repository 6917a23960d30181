// SPDX-License-Identifier: MIT
// LlcPeer: what the peer answers to the group's requests, and its side of the ADD_LINK flows.
#include "tests/fuzz/llc_peer.h"

namespace smc::fuzz
{

using llc::Message;
using llc::Type;

namespace
{
const char* toString(Answer a)
{
    static const char* const kNames[] = {"proper",     "drop", "duplicate", "mutate",
                                         "wrong link", "late", "negative",  "proper"};
    return kNames[static_cast<unsigned>(a) & 7];
}
} // namespace

void LlcPeer::onGroupMessage(unsigned index, const Message& m)
{
    trace("group -> link %u: %s%s", index, llc::toString(m.type()), m.response ? " response" : "");
    // What the group tells of its own RMBs, per link id (see violation()).
    if (const auto* c = std::get_if<llc::ConfirmRkey>(&m.body); c && !m.response) {
        MutexLocker lock(learntMutex_);
        learnt_[link(index).linkId].insert(c->rkey);
        for (const llc::RtokenEntry& e : c->others)
            learnt_[e.linkId].insert(e.rkey);
    } else if (const auto* a = std::get_if<llc::AddLinkCont>(&m.body)) {
        MutexLocker lock(learntMutex_);
        for (const llc::RkeyPair& p : a->rkeys)
            learnt_[a->linkId].insert(p.newRkey);
    }
    if (m.response)
        onResponse(index, m);
    else
        onRequest(index, m);
}

// The next policy byte decides: `proper`, nothing (the group's wait of
// `groupWait` runs out), ..., or `negative`. `action`, if set, is the proper
// answer when it is more than one message (an ADD_LINK the peer starts).
Answer LlcPeer::answer(unsigned index, const Message& proper, const Message& negative,
                       std::chrono::milliseconds groupWait, const std::function<void()>& action)
{
    const Answer a = static_cast<Answer>(in_.tail() & 7);
    trace("  answer: %s", toString(a));
    const std::vector<std::byte> wire = llc::encode(proper);
    switch (a) {
    case Answer::Proper:
    case Answer::Proper2:
    case Answer::Late:
        if (action)
            action();
        else if (a == Answer::Late)
            late_.push_back({index, wire});
        else
            transmit(index, wire);
        break;
    case Answer::Drop:
        expectTimeout(groupWait);
        break;
    case Answer::Duplicate:
        for (int i = 0; i < 2; ++i) {
            if (action)
                action();
            else
                transmit(index, wire);
        }
        break;
    case Answer::Mutate: {
        peerLied_ = true;
        std::vector<std::byte> bytes = llc::encode(action ? negative : proper);
        const std::size_t pos = in_.tail() % bytes.size();
        bytes[pos] ^= std::byte{static_cast<std::uint8_t>(in_.tail() | 1)};
        transmit(index, bytes);
        expectTimeout(groupWait);
        break;
    }
    case Answer::WrongLink: {
        std::optional<unsigned> other;
        const unsigned n = linkCount();
        for (unsigned i = 1; i < n && !other; ++i)
            if (!link((index + i) % n).down)
                other = (index + i) % n;
        if (other)
            transmit(*other, wire);
        expectTimeout(groupWait);
        break;
    }
    case Answer::Negative:
        transmit(index, llc::encode(negative));
        break;
    }
    return a;
}

void LlcPeer::onRequest(unsigned index, const Message& m)
{
    PeerLink& l = link(index);
    const LlcTimeouts& t = config_.timeouts;
    switch (m.type()) {
    case Type::TestLink: // timer-driven: answered outside the policy, which stays in step
        if (!muteTestLink_)
            transmit(index, llc::encode({m.version, true, m.body}));
        return;
    case Type::ConfirmLink: { // the server group: its first link, or a new link's last step
        const auto& c = std::get<llc::ConfirmLink>(m.body);
        l.linkId = c.linkId;
        const Message proper{
            1, true,
            llc::ConfirmLink{
                l.self.mac, l.self.gid, l.self.qpn, c.linkId, {}, peerMaxLinks_, peerMaxConns_}};
        const Message refuse{1, false,
                             llc::DeleteLink{false, false, c.linkId, llc::DeleteReason::LostPath}};
        answer(index, proper, refuse, t.wait);
        if (addFlow_.active && !addFlow_.peerServes && addFlow_.fresh == index)
            addFlow_.active = false;
        return;
    }
    case Type::AddLink: { // the server group offers a link: the peer is its client
        const auto& a = std::get<llc::AddLink>(m.body);
        std::optional<unsigned> fresh;
        {
            MutexLocker lock(modelMutex_);
            for (unsigned i = 0; i < links_.size() && !fresh; ++i)
                if (links_[i]->group.qpn == a.qpn && i != index)
                    fresh = i;
        }
        llc::AddLink yes = a;
        if (fresh) {
            PeerLink& n = link(*fresh);
            n.linkId = a.linkId;
            n.group = {a.qpn, a.psn, a.gid, a.mac, a.mtu};
            n.device = peerDevices_ == 1 ? l.device : 1 - l.device;
            n.self.gid = deviceGid(2, n.device);
            n.self.mac = deviceMac(2, n.device);
            yes = {false,    0, n.self.mac, n.self.gid,  n.self.qpn,
                   a.linkId, 3, n.self.psn, std::nullopt};
            addFlow_ = {true, false, index, *fresh, a.linkId, peerPairs(l.linkId, a.linkId), 0};
        }
        llc::AddLink no = yes;
        no.reject = true;
        no.rejectReason = 1; // no alternate path
        answer(index, {1, true, fresh ? yes : no}, {1, true, no}, t.wait);
        return;
    }
    case Type::AddLinkCont: { // the server group's rkeys: the peer answers with its own
        const auto& c = std::get<llc::AddLinkCont>(m.body);
        llc::AddLinkCont mine{c.linkId, 0, {}};
        if (addFlow_.active && !addFlow_.peerServes)
            mine = nextCont();
        llc::AddLinkCont lie = mine;
        lie.remaining = static_cast<std::uint8_t>(lie.remaining + 3);
        answer(index, {1, true, mine}, {1, true, lie}, t.wait);
        return;
    }
    case Type::DeleteLink: {
        const auto& d = std::get<llc::DeleteLink>(m.body);
        if (d.all)
            return; // the group is gone: nothing to answer
        answer(
            index, {1, true, llc::DeleteLink{false, d.orderly, d.linkId, {}}},
            {1, true, llc::DeleteLink{false, d.orderly, d.linkId, llc::DeleteReason::UnknownLink}},
            t.wait);
        return;
    }
    case Type::ConfirmRkey: {
        Message no{m.version, true, m.body};
        auto& c = std::get<llc::ConfirmRkey>(no.body);
        c.negative = c.retry = true;
        answer(index, {m.version, true, m.body}, no, t.wait);
        return;
    }
    case Type::DeleteRkey: {
        Message no{m.version, true, m.body};
        auto& d = std::get<llc::DeleteRkey>(no.body);
        d.negative = true;
        d.errorMask = 0x80;
        d.invalidCount = 1;
        answer(index, {m.version, true, m.body}, no, t.wait);
        return;
    }
    case Type::ReqAddLink: { // the client group asks for a link: the peer serves one, or declines
        const Message decline{2, true, llc::ReqAddLink{}};
        answer(index, decline, decline, t.flowStart, [&] { offerLink(index, 0, freshLinkId()); });
        return;
    }
    default:
        return;
    }
}

// The serving peer's side of its ADD_LINK: after the client group's answer,
// ADD_LINK_CONT until both sides sent all their rkeys, then CONFIRM_LINK on
// the new link.
void LlcPeer::onResponse(unsigned /*index*/, const Message& m)
{
    const LlcTimeouts& t = config_.timeouts;
    AddFlow& f = addFlow_;
    if (!f.active || !f.peerServes)
        return;
    const Message abort{1, false,
                        llc::DeleteLink{false, false, f.linkId, llc::DeleteReason::LostPath}};
    switch (m.type()) {
    case Type::AddLink: {
        const auto& a = std::get<llc::AddLink>(m.body);
        if (a.linkId != f.linkId)
            return;
        if (a.reject) {
            f.active = false;
            return;
        }
        link(f.fresh).group = {a.qpn, a.psn, a.gid, a.mac, a.mtu};
        answer(f.via, {1, false, nextCont()}, abort, t.wait);
        return;
    }
    case Type::AddLinkCont: {
        const auto& c = std::get<llc::AddLinkCont>(m.body);
        const std::size_t groupLeft =
            c.remaining - std::min<std::size_t>(c.remaining, c.rkeys.size());
        if (f.sent >= f.mine.size() && groupLeft == 0) {
            const PeerLink& n = link(f.fresh);
            const Message confirm{1, false,
                                  llc::ConfirmLink{n.self.mac,
                                                   n.self.gid,
                                                   n.self.qpn,
                                                   f.linkId,
                                                   {},
                                                   peerMaxLinks_,
                                                   peerMaxConns_}};
            answer(f.fresh, confirm, abort, t.wait);
        } else {
            llc::AddLinkCont next = nextCont();
            llc::AddLinkCont lie = next;
            lie.remaining = static_cast<std::uint8_t>(lie.remaining + 3);
            answer(f.via, {1, false, next}, {1, false, lie}, t.wait);
        }
        return;
    }
    case Type::ConfirmLink:
        f.active = false; // the new link is up
        return;
    default:
        return;
    }
}

} // namespace smc::fuzz
