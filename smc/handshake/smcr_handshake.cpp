// SPDX-License-Identifier: MIT
// CLC for SMC-R v1 and v2: link group found or made, ACCEPT/CONFIRM with the link and RMB,
// then CONFIRM_LINK on first contact; every failure a DECLINE with Linux's reason.
#include "smc/handshake/smcr_handshake.h"

#include <arpa/inet.h>
#include <ifaddrs.h>
#include <netinet/in.h>

#include <bit>
#include <cstring>
#include <thread>

#include "pool/size_class.h"
#include "smc/clc/clc_errors.h"
#include "smc/net/clc_io.h"

namespace smc::net
{

using namespace std::chrono_literals;
using clc::DeclineCode;

namespace
{
constexpr auto kDeclineProbe = 1000ms; // Linux CLC_WAIT_TIME_SHORT
} // namespace

Result<Outcome> decline(StackCore& stack, int fd, DeclineCode reason, std::uint8_t version,
                        const SocketOptions& options)
{
    return sendDecline(fd, reason, version, stack.smcr()->systemId,
                       deadlineAfter(options.clcTimeout));
}

std::error_code hard(std::error_code e)
{
    return e.category() == clcCategory() ? std::make_error_code(std::errc::protocol_error) : e;
}

Result<Outcome> firstLinkFailed(StackCore& stack, int fd, std::error_code e, std::uint8_t version,
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

NewGroup newGroup(StackCore::Smcr& smcr, Role role, const SystemId& peer, GroupTerms terms,
                  const SocketOptions& options, DeclineCode noLink,
                  const std::function<Result<NewLink>()>& makeLink)
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
        g.group->beginFirstContact(std::move(*link), options.rmbBytes, sndbufBytes(options));
    if (!h) {
        g.group->terminate("no first connection");
        g.reason = DeclineCode::Mem;
        return g;
    }
    g.hs = std::move(*h);
    return g;
}

OurTerms ourTerms(const StackCore::Smcr& smcr)
{
    const LinkGroupConfig& d = smcr.groups->defaults();
    return {d.maxConns, d.maxLinks, hostname()};
}

std::size_t maxMessage(const std::optional<V2Terms>& v2)
{
    return maxLinkMessage(v2 ? clc::kVersion2 : clc::kVersion1);
}

clc::AcceptConfirm ours(StackCore& stack, const LinkAddress& link, const LinkGroup::Handshake& hs,
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

namespace
{

} // namespace

bool usableSmcr(const clc::AcceptConfirm& m)
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

namespace
{

// The client group of `peer` that has a link to the server's QPN and GID (and MAC, v1).
struct Reuse {
    std::shared_ptr<LinkGroup> group;
    std::uint8_t linkId = 0;
    bool knownPeer = false; // some group with that system id
};
Reuse findClientGroup(StackCore::Smcr& smcr, const clc::SmcrAcceptConfirm& a,
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

void offerSmcr(StackCore& stack, const clc::Ipv4Address& local, clc::Proposal& p)
{
    const StackCore::Smcr& smcr = *stack.smcr();
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

void offerSmcrV2(StackCore& stack, clc::Proposal& p)
{
    const StackCore::Smcr& smcr = *stack.smcr();
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

Result<Outcome> smcrClient(StackCore& stack, int fd, const clc::Accept& accept,
                           const SocketOptions& options)
{
    StackCore::Smcr& smcr = *stack.smcr();
    const std::uint8_t version = accept.version;
    if (!usableSmcr(accept))
        return decline(stack, fd, DeclineCode::ErrRtok, version, options);
    const auto& a = std::get<clc::SmcrAcceptConfirm>(accept.path);
    const std::uint8_t llcVersion = version >= clc::kVersion2 ? clc::kVersion2 : clc::kVersion1;
    std::optional<V2Terms> v2;
    if (llcVersion >= clc::kVersion2) {
        v2 = V2Terms{a.eid, {}};
        if (accept.firstContact) {
            std::variant<V2Terms, DeclineCode> terms = clientTerms(accept, ourTerms(smcr));
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
            group->beginHandshake(options.rmbBytes, sndbufBytes(options), reuse.linkId);
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

} // namespace smc::net
