// SPDX-License-Identifier: MIT
// CLC for SMC-R v1 and v2: link group found or made, ACCEPT/CONFIRM with the link and RMB,
// then CONFIRM_LINK on first contact; every failure a DECLINE with Linux's reason.
#include "smc/socket/internal/smcr_handshake.h"

#include <arpa/inet.h>
#include <ifaddrs.h>
#include <netinet/in.h>

#include <bit>
#include <cstring>
#include <thread>

#include "pool/size_class.h"
#include "smc/clc/clc_errors.h"
#include "smc/socket/clc_io.h"

namespace smc::net
{
namespace
{

using namespace std::chrono_literals;
using clc::DeclineCode;

constexpr auto kDeclineProbe = 1000ms; // Linux CLC_WAIT_TIME_SHORT

// sendDecline with the stack's system id, within one CLC timeout.
Result<Outcome> decline(SmcStack& stack, int fd, DeclineCode reason, std::uint8_t version,
                        const SocketOptions& options)
{
    return sendDecline(fd, reason, version, stack.smcr()->systemId,
                       deadlineAfter(options.clcTimeout));
}

// A CLC error as the caller sees it: malformed CLC is protocol_error.
std::error_code hard(std::error_code e)
{
    return e.category() == clcCategory() ? std::make_error_code(std::errc::protocol_error) : e;
}

// CONFIRM_LINK failed: the peer may have given up first and declined (Linux looks for its
// DECLINE for a second before it sends its own, so the stream stays aligned either way).
Result<Outcome> firstLinkFailed(SmcStack& stack, int fd, std::error_code e, std::uint8_t version,
                                const SocketOptions& options)
{
    Result<clc::Message> m = readClc(fd, deadlineAfter(kDeclineProbe));
    if (m) {
        if (const auto* d = std::get_if<clc::Decline>(&*m))
            return Outcome(Fallback{d->diagnosis, true});
        return std::make_error_code(std::errc::protocol_error);
    }
    if (m.error() != std::errc::timed_out)
        return hard(m.error());
    return decline(stack, fd,
                   e == std::errc::timed_out ? DeclineCode::TimeoutCl : DeclineCode::ErrRdyLnk,
                   version, options);
}

// First contact, either role: a new group, its first link (`makeLink`: the server creates
// it, the client joins the server's) and a connection on it. Without `hs`, `reason` says
// why (`noLink` when the link could not be made) and the group is gone again.
struct NewGroup {
    std::shared_ptr<LinkGroup> group; // before hs: the handshake goes first
    LinkAddress local;
    std::optional<LinkGroup::Handshake> hs;
    DeclineCode reason = DeclineCode::Mem;
};
template <typename MakeLink>
NewGroup newGroup(SmcStack::Smcr& smcr, Role role, const SystemId& peer, GroupTerms terms,
                  const SocketOptions& options, DeclineCode noLink, MakeLink makeLink)
{
    NewGroup g;
    Result<std::shared_ptr<LinkGroup>> made = smcr.groups->create(role, peer, terms);
    if (!made)
        return g;
    g.group = std::move(*made);
    Result<NewLink> link = makeLink();
    if (!link) {
        g.group->terminate("no first link");
        g.reason = noLink;
        return g;
    }
    g.local = link->local;
    Result<LinkGroup::Handshake> h =
        g.group->beginFirstContact(std::move(*link), options.rmbBytes, options.rmbBytes);
    if (!h) {
        g.group->terminate("no first connection");
        g.reason = DeclineCode::Mem;
        return g;
    }
    g.hs = std::move(*h);
    return g;
}

// What SMC-Rv2 adds to our ACCEPT or CONFIRM: the EID, and on first contact the extension.
struct V2Terms {
    clc::Eid eid{};
    clc::FirstContactExt fce{};
};

// The group terms a v2 first contact agreed on: release 1's limits, else our defaults.
GroupTerms groupTerms(const std::optional<V2Terms>& v2)
{
    if (!v2)
        return {};
    if (v2->fce.release < clc::kRelease1)
        return {clc::kVersion2};
    return {clc::kVersion2, v2->fce.maxConns, v2->fce.maxLinks};
}

// The longest LLC message of the group's links.
std::size_t maxMessage(const std::optional<V2Terms>& v2)
{
    return maxLinkMessage(v2 ? clc::kVersion2 : clc::kVersion1);
}

// Our half of ACCEPT or CONFIRM: the connection's link and RMB there.
clc::AcceptConfirm ours(SmcStack& stack, const LinkAddress& link, const LinkGroup::Handshake& hs,
                        bool firstContact, std::uint8_t mtu, const std::optional<V2Terms>& v2)
{
    const ConnectionPtr& conn = hs.connection();
    clc::SmcrAcceptConfirm r;
    r.systemId = stack.smcr()->systemId;
    r.gid = link.gid;
    r.mac = link.mac == Mac{} ? stack.smcr()->mac : link.mac;
    r.qpn = link.qpn;
    r.rkey = hs.rtoken().rkey;
    r.rmbAddr = hs.rtoken().vaddr;
    r.rmbeIdx = 1;
    r.alertToken = conn->token;
    r.rmbeSize = static_cast<std::uint8_t>(conn->rmb->sizeClass());
    r.qpMtu = mtu;
    r.psn = link.psn;
    clc::AcceptConfirm m;
    m.version = clc::kVersion1;
    m.firstContact = firstContact;
    if (v2) {
        m.version = clc::kVersion2;
        r.eid = v2->eid;
        if (firstContact)
            m.fce = v2->fce;
    }
    m.path = r;
    return m;
}

// The server's v2 terms for `choice` (Linux smc_clc_fill_fce_v2x): a direct route, as
// negotiate() takes no other; the limits of release 1, the smaller of theirs and ours.
V2Terms serverTerms(const SmcStack::Smcr& smcr, const clc::Proposal& p, const clc::Choice& choice)
{
    V2Terms t;
    t.eid = choice.eid;
    t.fce.v2Direct = true;
    t.fce.osType = clc::kOsLinux;
    t.fce.release = choice.release;
    t.fce.hostname = hostname();
    if (choice.release >= clc::kRelease1) {
        t.fce.maxConns = static_cast<std::uint8_t>(
            std::min<unsigned>(p.v2.maxConns, smcr.groups->defaults().maxConns));
        t.fce.maxLinks = static_cast<std::uint8_t>(
            std::min<unsigned>(p.v2.maxLinks, smcr.groups->defaults().maxLinks));
        t.fce.featureMask = p.v2.featureMask & clc::kFeatureEmulatedIsm;
    }
    return t;
}

// The client's v2 terms from a first-contact ACCEPT, or why it declines (Linux
// smc_connect_rdma_v2_prepare, smc_clc_clnt_v2x_features_validate), within what we proposed.
std::variant<V2Terms, DeclineCode> clientTerms(const SmcStack::Smcr& smcr,
                                               const clc::Accept& accept)
{
    const clc::FirstContactExt& f = accept.fce;
    if (!f.v2Direct)
        return DeclineCode::NoIndirect; // we route directly only
    if (f.release > clc::kRelease1)
        return DeclineCode::VersMismat;
    if (f.release >= clc::kRelease1 && f.maxConns < 16)
        return DeclineCode::MaxConnErr;
    if (f.release >= clc::kRelease1 &&
        (f.maxLinks < 1 || f.maxLinks > smcr.groups->defaults().maxLinks))
        return DeclineCode::MaxLinkErr;
    V2Terms t;
    t.eid = std::get<clc::SmcrAcceptConfirm>(accept.path).eid;
    t.fce = f; // echoed: the server checks release and limits for equality
    t.fce.osType = clc::kOsLinux;
    t.fce.hostname = hostname();
    t.fce.featureMask &= clc::kFeatureEmulatedIsm;
    t.fce.vendorOptions = 0;
    return t;
}

// The server's check of a first-contact CONFIRM's echo (Linux
// smc_clc_v2x_features_confirm_check): what it agreed to, unchanged.
std::optional<DeclineCode> echoMismatch(const clc::FirstContactExt& ours,
                                        const clc::FirstContactExt& echo)
{
    if (echo.release != ours.release)
        return DeclineCode::ReleaseErr;
    if (ours.release >= clc::kRelease1 && echo.maxConns != ours.maxConns)
        return DeclineCode::MaxConnErr;
    if (ours.release >= clc::kRelease1 && echo.maxLinks != ours.maxLinks)
        return DeclineCode::MaxLinkErr;
    return std::nullopt;
}

// The peer's half as we can use it: one RMBE per RMB, a size we know, an rtoken.
bool usable(const clc::AcceptConfirm& m)
{
    const auto* r = std::get_if<clc::SmcrAcceptConfirm>(&m.path);
    return r != nullptr && r->rmbeIdx == 1 && r->rkey != 0 && r->qpn != 0 &&
           r->rmbeSize <= maxSizeClass(Tech::SmcR);
}

LinkAddress addressOf(const clc::SmcrAcceptConfirm& r)
{
    return {r.qpn, r.psn, r.gid, r.mac, r.qpMtu};
}

std::optional<LinkAddress> localOf(const LinkGroup& g, unsigned slot)
{
    for (const LinkInfo& l : g.links())
        if (l.slot == slot)
            return l.local;
    return std::nullopt;
}

// The client group of `peer` that has a link to the server's QPN and GID (and MAC, v1).
struct Reuse {
    std::shared_ptr<LinkGroup> group;
    std::uint8_t linkId = 0;
    bool knownPeer = false; // some group with that system id
};
Reuse findClientGroup(SmcStack::Smcr& smcr, const clc::SmcrAcceptConfirm& a,
                      std::uint8_t llcVersion)
{
    Reuse r;
    for (const std::shared_ptr<LinkGroup>& g : smcr.groups->groups()) {
        if (g->role() != Role::Client || g->peer() != a.systemId || g->llcVersion() != llcVersion ||
            g->terminated())
            continue;
        r.knownPeer = true;
        for (const LinkInfo& l : g->links())
            if (l.state == LinkState::Active && l.peer.qpn == a.qpn && l.peer.gid == a.gid &&
                (l.peer.mac == Mac{} || l.peer.mac == a.mac))
                return {g, l.linkId, true};
    }
    return r;
}

} // namespace

std::optional<clc::Ipv4Address> localIpv4(int fd)
{
    sockaddr_in self{};
    socklen_t len = sizeof self;
    if (::getsockname(fd, reinterpret_cast<sockaddr*>(&self), &len) != 0 ||
        self.sin_family != AF_INET)
        return std::nullopt;
    ifaddrs* list = nullptr;
    if (::getifaddrs(&list) != 0)
        return std::nullopt;
    std::optional<clc::Ipv4Address> out;
    for (ifaddrs* i = list; i != nullptr && !out; i = i->ifa_next) {
        if (i->ifa_addr == nullptr || i->ifa_netmask == nullptr ||
            i->ifa_addr->sa_family != AF_INET)
            continue;
        const auto* a = reinterpret_cast<const sockaddr_in*>(i->ifa_addr);
        if (a->sin_addr.s_addr != self.sin_addr.s_addr)
            continue;
        const auto* m = reinterpret_cast<const sockaddr_in*>(i->ifa_netmask);
        clc::Ipv4Address r;
        std::memcpy(r.address.data(), &a->sin_addr.s_addr, 4);
        r.prefixLength = static_cast<std::uint8_t>(std::popcount(ntohl(m->sin_addr.s_addr)));
        out = r;
    }
    ::freeifaddrs(list);
    return out;
}

void offerSmcr(SmcStack& stack, const clc::Ipv4Address& local, clc::Proposal& p)
{
    const SmcStack::Smcr& smcr = *stack.smcr();
    p.typeV1 = p.typeV1 == clc::SmcType::SmcD ? clc::SmcType::Both : clc::SmcType::SmcR;
    p.systemId = smcr.systemId;
    p.gid = smcr.gid;
    p.mac = smcr.mac;
    p.prefixes = {};
    p.prefixes.ipv4PrefixLength = local.prefixLength;
    for (unsigned i = 0; i < 4; ++i) {
        const unsigned bits =
            std::min(8u, local.prefixLength > 8 * i ? local.prefixLength - 8 * i : 0u);
        const auto mask = static_cast<std::uint8_t>(bits == 0 ? 0 : 0xff << (8 - bits));
        p.prefixes.ipv4Subnet[i] = local.address[i] & mask;
    }
}

void offerSmcrV2(SmcStack& stack, clc::Proposal& p)
{
    const SmcStack::Smcr& smcr = *stack.smcr();
    if (!smcr.offerV2 || !clc::ipv4OfGid(smcr.gid))
        return;
    p.version = clc::kVersion2;
    p.typeV2 = p.typeV2 == clc::SmcType::SmcD ? clc::SmcType::Both : clc::SmcType::SmcR;
    p.v2.release = clc::kRelease1;
    p.v2.userEids = {stack.ueid()};
    p.v2.roceV2Gid = smcr.gid;
    p.v2.maxConns = static_cast<std::uint8_t>(smcr.groups->defaults().maxConns);
    p.v2.maxLinks = static_cast<std::uint8_t>(smcr.groups->defaults().maxLinks);
    p.v2.featureMask = clc::kFeatureEmulatedIsm;
}

Result<Outcome> smcrClient(SmcStack& stack, int fd, const clc::Accept& accept,
                           const SocketOptions& options)
{
    SmcStack::Smcr& smcr = *stack.smcr();
    const std::uint8_t version = accept.version;
    if (!usable(accept))
        return decline(stack, fd, DeclineCode::ErrRtok, version, options);
    const auto& a = std::get<clc::SmcrAcceptConfirm>(accept.path);
    const std::uint8_t llcVersion = version >= clc::kVersion2 ? clc::kVersion2 : clc::kVersion1;
    std::optional<V2Terms> v2;
    if (llcVersion >= clc::kVersion2) {
        v2 = V2Terms{a.eid, {}};
        if (accept.firstContact) {
            std::variant<V2Terms, DeclineCode> terms = clientTerms(smcr, accept);
            if (const auto* reason = std::get_if<DeclineCode>(&terms))
                return decline(stack, fd, *reason, version, options);
            v2 = std::get<V2Terms>(terms);
        }
    }
    MutexLocker pending(smcr.clientPending);

    std::shared_ptr<LinkGroup> group; // before hs: the handshake goes first
    std::optional<LinkGroup::Handshake> hs;
    LinkAddress local;
    if (accept.firstContact) {
        NewGroup made = newGroup(
            smcr, Role::Client, a.systemId, groupTerms(v2), options, DeclineCode::ErrRdyLnk,
            [&] { return smcr.provider->join(addressOf(a), {}, maxMessage(v2)); });
        if (!made.hs)
            return decline(stack, fd, made.reason, version, options);
        group = std::move(made.group);
        local = made.local;
        hs = std::move(made.hs);
    } else {
        // The server may name a link it has just added while our end of that ADD_LINK flow
        // is still finishing: give it Linux's ADD_LINK wait before we call it unknown.
        Reuse reuse = findClientGroup(smcr, a, llcVersion);
        const auto patience = net::deadlineAfter(std::min<std::chrono::milliseconds>(
            std::chrono::milliseconds(2000), options.clcTimeout));
        while (reuse.group == nullptr && reuse.knownPeer && net::Clock::now() < patience) {
            std::this_thread::sleep_for(std::chrono::milliseconds(5));
            reuse = findClientGroup(smcr, a, llcVersion);
        }
        if (reuse.group == nullptr)
            return decline(stack, fd,
                           reuse.knownPeer ? DeclineCode::NoSrvLink : DeclineCode::SyncErr, version,
                           options);
        group = std::move(reuse.group);
        Result<LinkGroup::Handshake> h =
            group->beginHandshake(options.rmbBytes, options.rmbBytes, reuse.linkId);
        if (!h)
            return decline(stack, fd, DeclineCode::Mem, version, options);
        hs = std::move(*h);
        const std::optional<LinkAddress> l = localOf(*group, hs->connection()->link());
        if (!l) // the link went meanwhile
            return decline(stack, fd, DeclineCode::NoActLink, version, options);
        local = *l;
    }
    ConnectionPtr conn = hs->connection();
    clc::Confirm confirm{ours(stack, local, *hs, accept.firstContact,
                              std::min<std::uint8_t>(local.mtu, a.qpMtu), v2)};
    if (v2 && accept.firstContact) // the GIDs our links may use: the one device's
        std::get<clc::SmcrAcceptConfirm>(confirm.path).gidList = {local.gid};
    auto fail = [&](const char* why) {
        if (accept.firstContact)
            group->terminate(why);
        else
            (void)group->closeConnection(*conn);
    };
    if (Result<void> done = hs->complete({a.rkey, a.rmbAddr}, classBytes(a.rmbeSize)); !done) {
        fail("peer rtoken refused");
        return decline(stack, fd, DeclineCode::ErrRtok, version, options);
    }
    if (Result<void> sent = writeClc(fd, confirm, deadlineAfter(options.clcTimeout)); !sent) {
        fail("CONFIRM not sent");
        return hard(sent.error());
    }
    if (accept.firstContact) {
        if (Result<void> up = group->confirmFirstLink(std::nullopt); !up) {
            fail("CONFIRM_LINK failed");
            return firstLinkFailed(stack, fd, up.error(), version, options);
        }
    }
    return Outcome(SmcrSetup{std::move(group), std::move(conn), a.alertToken,
                             classBytes(a.rmbeSize), accept.firstContact});
}

Result<Outcome> smcrServer(SmcStack& stack, int fd, const clc::Proposal& proposal,
                           const clc::Choice& choice, std::uint8_t version,
                           const SocketOptions& options)
{
    SmcStack::Smcr& smcr = *stack.smcr();
    std::optional<V2Terms> v2;
    if (choice.version >= clc::kVersion2)
        v2 = serverTerms(smcr, proposal, choice);
    MutexLocker pending(
        smcr.serverPendingFor(proposal.systemId, v2 ? proposal.v2.roceV2Gid : proposal.gid));

    // Same peer system id and a live link to the device it proposes from (v2: its GID in
    // the v2 extension; Linux's v2 PROPOSAL has a zero system id, GID and MAC).
    std::shared_ptr<LinkGroup> group = // before hs: the handshake goes first
        v2 ? smcr.groups->find(Role::Server, proposal.systemId, proposal.v2.roceV2Gid, {},
                               clc::kVersion2)
           : smcr.groups->find(Role::Server, proposal.systemId, proposal.gid, proposal.mac);
    const bool first = group == nullptr;
    std::optional<LinkGroup::Handshake> hs;
    LinkAddress local;
    if (first) {
        NewGroup made = newGroup(smcr, Role::Server, proposal.systemId, groupTerms(v2), options,
                                 DeclineCode::IntErr,
                                 [&] { return smcr.provider->create({}, maxMessage(v2)); });
        if (!made.hs)
            return decline(stack, fd, made.reason, version, options);
        group = std::move(made.group);
        local = made.local;
        hs = std::move(made.hs);
    } else {
        Result<LinkGroup::Handshake> h = group->beginHandshake(options.rmbBytes, options.rmbBytes);
        if (!h)
            return decline(stack, fd, DeclineCode::Mem, version, options);
        hs = std::move(*h);
        // Our RMB on the other links before ACCEPT, and the flow token free again while the
        // client answers (Linux: CONFIRM_RKEY under llc_conf_mutex, then ACCEPT).
        if (Result<void> a = hs->announce(); !a) // Linux: smcr_lgr_reg_rmbs failed
            return decline(stack, fd, DeclineCode::ErrRegBuf, version, options);
        const std::optional<LinkAddress> l = localOf(*group, hs->link());
        if (!l)
            return decline(stack, fd, DeclineCode::NoActLink, version, options);
        local = *l;
        // A join has its group: the next handshake with this peer need not wait for our
        // client's CONFIRM (up to clcTimeout). complete() below checks the group again.
        pending.unlock();
    }
    ConnectionPtr conn = hs->connection();
    auto fail = [&](const char* why) {
        hs.reset(); // not completed: closes the connection
        if (first)
            group->terminate(why);
        else
            (void)group->closeConnection(*conn);
    };
    const clc::Accept accept{ours(stack, local, *hs, first, local.mtu, v2)};
    if (Result<void> sent = writeClc(fd, accept, deadlineAfter(options.clcTimeout)); !sent) {
        fail("ACCEPT not sent");
        return hard(sent.error());
    }
    Result<clc::Message> answer = readClc(fd, deadlineAfter(options.clcTimeout));
    if (answer) {
        if (const auto* d = std::get_if<clc::Decline>(&*answer)) {
            // Out of sync: the client says it has no group to match ours. Linux ends the group;
            // but anybody can propose a peer's system id and GID and say so, so the peer is
            // asked over the group's links first: the group ends only if it does not answer.
            fail(d->outOfSync ? "client out of sync" : "client declined");
            if (d->outOfSync && !first)
                group->probeLinks();
            return Outcome(Fallback{d->diagnosis, true});
        }
    }
    const auto* c = answer ? std::get_if<clc::Confirm>(&*answer) : nullptr;
    if (c == nullptr || !usable(*c) || c->firstContact != first ||
        (c->version >= clc::kVersion2) != v2.has_value()) {
        fail("bad CONFIRM");
        return answer ? std::make_error_code(std::errc::protocol_error) : hard(answer.error());
    }
    if (v2 && first) {
        if (std::optional<DeclineCode> reason = echoMismatch(v2->fce, c->fce)) {
            fail("CONFIRM changed the terms");
            return decline(stack, fd, *reason, version, options);
        }
    }
    const auto& r = std::get<clc::SmcrAcceptConfirm>(c->path);
    if (Result<void> done = hs->complete({r.rkey, r.rmbAddr}, classBytes(r.rmbeSize)); !done) {
        fail("peer rtoken refused");
        // A joining client reads no CLC after its CONFIRM: a DECLINE would go unseen and leave
        // it on SMC-R against our TCP. Ending the TCP connection resets its SMC-R one instead.
        if (!first)
            return std::make_error_code(std::errc::connection_aborted);
        return decline(stack, fd, DeclineCode::ErrRtok, version, options);
    }
    if (first) {
        if (Result<void> up = group->confirmFirstLink(addressOf(r)); !up) {
            fail("CONFIRM_LINK failed");
            return firstLinkFailed(stack, fd, up.error(), version, options);
        }
    }
    return Outcome(
        SmcrSetup{std::move(group), std::move(conn), r.alertToken, classBytes(r.rmbeSize), first});
}

} // namespace smc::net
