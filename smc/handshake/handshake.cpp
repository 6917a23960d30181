// SPDX-License-Identifier: MIT
// CLC over TCP for SMC-Dv2 on cross-process loopback-ism: PROPOSAL, ACCEPT, CONFIRM, DECLINE.
#include "smc/handshake/handshake.h"

#include <unistd.h>

#include <future>

#include "pool/size_class.h"
#include "smc/clc/clc_negotiate.h"
#include "smc/handshake/smcr_handshake.h"
#include "smc/ism/ism_errors.h"
#include "smc/net/clc_io.h"

namespace smc::net
{
namespace
{

using namespace std::chrono_literals;

bool wantSmcd(Mode mode)
{
    return mode != Mode::SmcR;
}

bool wantSmcr(StackCore& stack, Mode mode)
{
    return stack.smcr() != nullptr && (mode == Mode::SmcR || mode == Mode::Auto);
}

clc::Capabilities capabilities(StackCore& stack, int fd, Mode mode, const clc::Proposal& offer)
{
    const IsmGid gid = stack.device().localGid();
    clc::Capabilities caps;
    if (wantSmcd(mode))
        caps.ismV2 = {{gid.gid, gid.gidExt, clc::kLoopbackChid, true}};
    caps.smcrV1 = wantSmcr(stack, mode);
    caps.smcrV2 = caps.smcrV1 && clc::ipv4OfGid(stack.smcr()->gid);
    // The subnet check is the socket's, device or not (a v1 offer from another subnet is
    // DIFFPREFIX before any device is looked at, as in Linux); an offer without SMC-R needs
    // none (and an SMC-D connection spares the interface dump).
    if (clc::hasSmcR(offer.typeV1) || clc::hasSmcR(offer.typeV2))
        if (std::optional<clc::Ipv4Address> a = localIpv4(fd))
            caps.ipv4 = {*a};
    caps.ueids = {stack.ueid()};
    caps.release = clc::kRelease1;
    return caps;
}

// SMC-R v1 alone (Mode::SmcR) is a version 1 proposal, as Linux sends it without v2 offers.
clc::Proposal proposal(StackCore& stack, Mode mode, const std::optional<clc::Ipv4Address>& local)
{
    if (mode == Mode::SmcR) {
        clc::Proposal p;
        p.version = clc::kVersion1;
        offerSmcr(stack, *local, p);
        offerSmcrV2(stack, p);
        return p;
    }
    clc::Proposal p = smcdProposal(stack.device().localGid(), stack.ueid());
    if (local && wantSmcr(stack, mode)) {
        offerSmcr(stack, *local, p);
        offerSmcrV2(stack, p);
    }
    return p;
}

// Our half of ACCEPT or CONFIRM.
clc::AcceptConfirm ourDmb(StackCore& stack, const BufferRef& rmb, std::uint32_t groupId,
                          bool firstContact, const clc::Eid& eid, std::uint8_t release)
{
    const IsmGid gid = stack.device().localGid();
    clc::SmcdAcceptConfirm d;
    d.gid = gid.gid;
    d.gidExt = gid.gidExt;
    d.token = rmb->dmbToken();
    d.dmbeIdx = 0;
    d.dmbeSize = static_cast<std::uint8_t>(rmb->sizeClass());
    for (unsigned i = 0; i < 4; ++i)
        d.linkId[i] = static_cast<std::uint8_t>(groupId >> (24 - 8 * i));
    d.chid = clc::kLoopbackChid;
    d.eid = eid;
    clc::AcceptConfirm m;
    m.version = clc::kVersion2;
    m.firstContact = firstContact;
    m.path = d;
    m.fce.osType = clc::kOsLinux;
    m.fce.release = release;
    m.fce.hostname = hostname();
    m.fce.featureMask = clc::kFeatureEmulatedIsm;
    return m;
}

// The pool's error as Linux's reason: a device out of DMBs is MAX_DMB, the rest memory.
clc::DeclineCode bufferDecline(std::error_code e)
{
    return e == std::errc::no_space_on_device ? clc::DeclineCode::MaxDmb : clc::DeclineCode::Mem;
}

Fallback peerDeclined(const clc::Decline& d)
{
    return Fallback{d.diagnosis, true};
}

std::uint32_t groupIdFrom(const clc::SmcdAcceptConfirm& d)
{
    std::uint32_t id = 0;
    for (std::uint8_t b : d.linkId)
        id = id << 8 | b;
    return id;
}

// The peer's half as we may use it: SMC-Dv2 on loopback-ism of this host.
bool usable(StackCore& stack, const clc::AcceptConfirm& m)
{
    const auto* d = std::get_if<clc::SmcdAcceptConfirm>(&m.path);
    return d != nullptr && m.version >= clc::kVersion2 && d->chid == clc::kLoopbackChid &&
           d->gid == stack.device().localGid().gid && d->gidExt != 0 && d->token != 0 &&
           d->dmbeSize <= maxSizeClass(Tech::SmcD);
}

// `peer` if it is the DMB `d` announced (its size), else protocol_error.
Result<RemoteDmb> announced(Result<RemoteDmb> peer, const clc::SmcdAcceptConfirm& d)
{
    if (peer && peer->size() != classBytes(d.dmbeSize))
        return std::make_error_code(std::errc::protocol_error);
    return peer;
}

Result<RemoteDmb> mapPeer(StackCore& stack, const clc::SmcdAcceptConfirm& d, Deadline deadline)
{
    const auto left =
        std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now());
    return announced(stack.device().attachRemote({d.gid, d.gidExt}, d.token, std::max(left, 1ms)),
                     d);
}

// The server's SMC-D setup once the client's DMB is mapped.
Result<Outcome> serverSetup(SmcdConfirmed confirmed, Result<RemoteDmb> peer)
{
    if (!peer)
        return peer.error();
    SmcdPending& p = confirmed.pending;
    return Outcome(SmcdSetup{std::move(p.rmb), std::move(*peer), p.client, p.groupId});
}

} // namespace

clc::Proposal smcdProposal(const IsmGid& gid, const clc::Eid& ueid)
{
    clc::Proposal p;
    p.version = clc::kVersion2;
    p.typeV1 = clc::SmcType::None;
    p.typeV2 = clc::SmcType::SmcD;
    p.v2.release = clc::kRelease1;
    p.v2.userEids = {ueid};
    p.v2.featureMask = clc::kFeatureEmulatedIsm;
    p.smcdV2.entries = {{gid.gid, clc::kLoopbackChid}, {gid.gidExt, clc::kLoopbackChid}};
    return p;
}

clc::Hostname hostname()
{
    // Once per process: every SMC-D connection is a first contact that carries it.
    static const clc::Hostname name = [] {
        char buffer[65] = {};
        ::gethostname(buffer, sizeof buffer - 1);
        return clc::makeHostname(buffer);
    }();
    return name;
}

namespace
{

// The client's step after its PROPOSAL `offer`: the server's `answer`.
Result<ClientStep> clientAccept(StackCore& stack, int fd, const clc::Proposal& offer,
                                Result<clc::Message> answer, const SocketOptions& options,
                                Deadline deadline)
{
    if (!answer)
        return hard(answer.error());
    if (const auto* d = std::get_if<clc::Decline>(&*answer))
        return ClientStep(Outcome(peerDeclined(*d)));
    const auto* accept = std::get_if<clc::Accept>(&*answer);
    if (accept == nullptr)
        return std::make_error_code(std::errc::protocol_error);
    const std::uint8_t version = accept->version;
    if (std::holds_alternative<clc::SmcrAcceptConfirm>(accept->path) &&
        clc::hasSmcR(version == clc::kVersion1 ? offer.typeV1 : offer.typeV2))
        return lift<ClientStep>(smcrClient(stack, fd, *accept, options));
    if (!usable(stack, *accept)) // not what we proposed
        return lift<ClientStep>(
            sendDecline(fd, clc::DeclineCode::ModeUnsupp, version, {}, deadline));
    const auto& server = std::get<clc::SmcdAcceptConfirm>(accept->path);

    const IsmGid serverGid{server.gid, server.gidExt};
    Result<BufferRef> acquired = stack.takeRmb(serverGid, options.rmbBytes);
    if (!acquired)
        return lift<ClientStep>(
            sendDecline(fd, bufferDecline(acquired.error()), version, {}, deadline));
    OwnDmb rmb(stack, *acquired);
    Result<DmbToken> token = stack.device().grant(rmb->dmbToken(), serverGid);
    if (!token)
        return lift<ClientStep>(sendDecline(fd, clc::DeclineCode::Mem, version, {}, deadline));
    rmb->setDmbToken(*token);
    ClientAccepted accepted{std::move(rmb), server, accept->firstContact,
                            accept->firstContact ? accept->fce.release : clc::kRelease1, version};
    RemoteDmb kept = stack.device().takeKeptRemote(serverGid, server.token);
    if (!kept)
        return ClientStep(std::move(accepted));
    return lift<ClientStep>(clientConfirm(stack, fd, std::move(accepted),
                                          announced(std::move(kept), server), deadline));
}

} // namespace

Result<Outcome> clientConfirm(StackCore& stack, int fd, ClientAccepted accepted,
                              Result<RemoteDmb> peer, Deadline deadline)
{
    const clc::SmcdAcceptConfirm& server = accepted.server;
    if (!peer)
        return sendDecline(fd, clc::DeclineCode::Mem, accepted.version, {}, deadline);
    const std::uint32_t group = groupIdFrom(server);
    clc::Confirm confirm{ourDmb(stack, accepted.rmb.get(), group, accepted.firstContact, server.eid,
                                accepted.release)};
    if (Result<void> sent = writeClc(fd, confirm, deadline); !sent)
        return sent.error();
    return Outcome(
        SmcdSetup{std::move(accepted.rmb), std::move(*peer), {server.gid, server.gidExt}, group});
}

Result<clc::Proposal> clientPropose(StackCore& stack, int fd, const SocketOptions& options)
{
    const clc::Proposal offer = proposal(stack, Mode::SmcD, std::nullopt);
    if (Result<void> sent = writeClc(fd, offer, deadlineAfter(options.clcTimeout)); !sent)
        return sent.error();
    return offer;
}

Result<ClientStep> clientAnswer(StackCore& stack, int fd, const clc::Proposal& offer,
                                const SocketOptions& options)
{
    const Deadline deadline = deadlineAfter(options.clcTimeout);
    return clientAccept(stack, fd, offer, readClc(fd, deadline), options, deadline);
}

Result<Outcome> clientMap(StackCore& stack, int fd, ClientAccepted accepted,
                          const SocketOptions& options)
{
    const Deadline deadline = deadlineAfter(options.clcTimeout);
    Result<RemoteDmb> peer = mapPeer(stack, accepted.server, deadline);
    return clientConfirm(stack, fd, std::move(accepted), std::move(peer), deadline);
}

Result<Outcome> clientHandshake(StackCore& stack, int fd, const SocketOptions& options)
{
    const Deadline deadline = deadlineAfter(options.clcTimeout);
    std::optional<clc::Ipv4Address> local;
    if (wantSmcr(stack, options.mode))
        local = localIpv4(fd);
    if (options.mode == Mode::SmcR && (stack.smcr() == nullptr || !local)) {
        // Linux declines before any PROPOSAL when it has nothing to offer.
        const auto reason = stack.smcr() ? clc::DeclineCode::CnfErr : clc::DeclineCode::NoSmcrDev;
        return sendDecline(fd, reason, clc::kVersion1, {}, deadline);
    }
    const clc::Proposal offer = proposal(stack, options.mode, local);
    if (Result<void> sent = writeClc(fd, offer, deadline); !sent)
        return sent.error();
    Result<ClientStep> step =
        clientAccept(stack, fd, offer, readClc(fd, deadline), options, deadline);
    if (!step)
        return step.error();
    if (auto* accepted = std::get_if<ClientAccepted>(&*step)) {
        Result<RemoteDmb> peer = mapPeer(stack, accepted->server, deadline);
        return clientConfirm(stack, fd, std::move(*accepted), std::move(peer), deadline);
    }
    return std::move(std::get<Outcome>(*step));
}

Result<ServerStep> serverBegin(StackCore& stack, int fd, const SocketOptions& options,
                               const ClcHead* seen)
{
    const Deadline deadline = deadlineAfter(options.clcTimeout);
    Result<bool> clc = startsWithClc(fd, deadline, seen);
    if (!clc && clc.error() != std::errc::timed_out)
        return clc.error();
    if (!clc || !*clc)
        return ServerStep(Outcome(Fallback{clc::DeclineCode::PeerNoSmc, false}));

    Result<clc::Message> first = readClc(fd, deadline, seen);
    if (!first) {
        if (first.error().category() != clcCategory())
            return first.error();
        const bool badVersion = first.error() == ClcErrc::BadVersion;
        return lift(sendDecline(
            fd, badVersion ? clc::DeclineCode::VersMismat : clc::DeclineCode::ModeUnsupp,
            clc::kVersion2, {}, deadline));
    }
    if (const auto* d = std::get_if<clc::Decline>(&*first))
        return ServerStep(Outcome(peerDeclined(*d)));
    const auto* p = std::get_if<clc::Proposal>(&*first);
    if (p == nullptr)
        return lift(sendDecline(fd, clc::DeclineCode::ModeUnsupp, clc::kVersion2, {}, deadline));
    const std::uint8_t version = p->version >= clc::kVersion2 ? clc::kVersion2 : clc::kVersion1;

    const clc::Negotiation n = negotiate(capabilities(stack, fd, options.mode, *p), *p);
    if (const auto* reason = std::get_if<clc::DeclineCode>(&n))
        return lift(sendDecline(fd, *reason, version, {}, deadline));
    const clc::Choice& choice = std::get<clc::Choice>(n);
    if (choice.type == clc::SmcType::SmcR && stack.smcr() != nullptr)
        return serverResume(stack, fd, smcrRequest(std::move(*p), choice, version, options),
                            options);
    if (choice.type != clc::SmcType::SmcD || choice.version < clc::kVersion2)
        return lift(sendDecline(fd, clc::DeclineCode::NoSmcDev, version, {}, deadline));

    const IsmGid client{choice.peerGid, choice.peerGidExt};
    Result<BufferRef> rmb = stack.takeRmb(client, options.rmbBytes);
    if (!rmb)
        return lift(sendDecline(fd, bufferDecline(rmb.error()), version, {}, deadline));
    OwnDmb own(stack, *rmb);
    Result<DmbToken> token = stack.device().grant((*rmb)->dmbToken(), client);
    if (!token)
        return lift(sendDecline(fd, clc::DeclineCode::IntErr, version, {}, deadline));
    (*rmb)->setDmbToken(*token);
    stack.markServerRmb(*token, true);
    // Every connection is its own SMC-D group here: one DMB each way, nothing shared.
    SmcdPending pending{std::move(own), client, static_cast<std::uint32_t>(*token)};
    clc::Accept accept{ourDmb(stack, *rmb, pending.groupId, true, choice.eid, choice.release)};
    if (Result<void> sent = writeClc(fd, accept, deadline); !sent)
        return sent.error();
    return ServerStep(std::move(pending));
}

Result<ServerStep> serverConfirm(StackCore& stack, int fd, SmcdPending pending,
                                 const SocketOptions& options, const ClcHead* seen)
{
    const Deadline deadline = deadlineAfter(options.clcTimeout);
    const IsmGid& clientGid = pending.client;
    Result<clc::Message> answer = readClc(fd, deadline, seen);
    if (answer)
        if (const auto* d = std::get_if<clc::Decline>(&*answer))
            return ServerStep(Outcome(peerDeclined(*d)));
    const auto* confirm = answer ? std::get_if<clc::Confirm>(&*answer) : nullptr;
    const auto* named = confirm ? std::get_if<clc::SmcdAcceptConfirm>(&confirm->path) : nullptr;
    // A client of this stack may name its own RMB; one that names an RMB of our servers is
    // not a client of ours, but a stranger that proposed our GID.
    if (named == nullptr || !usable(stack, *confirm) || named->gidExt != clientGid.gidExt ||
        (clientGid == stack.device().localGid() && stack.isServerRmb(named->token))) {
        return answer ? std::make_error_code(std::errc::protocol_error) : hard(answer.error());
    }
    SmcdConfirmed confirmed{std::move(pending), *named};
    RemoteDmb kept = stack.device().takeKeptRemote({named->gid, named->gidExt}, named->token);
    if (!kept)
        return ServerStep(std::move(confirmed));
    return lift(serverSetup(std::move(confirmed), announced(std::move(kept), *named)));
}

Result<Outcome> serverMap(StackCore& stack, SmcdConfirmed confirmed, const SocketOptions& options)
{
    Result<RemoteDmb> peer = mapPeer(stack, confirmed.named, deadlineAfter(options.clcTimeout));
    return serverSetup(std::move(confirmed), std::move(peer));
}

Result<Outcome> serverFinish(StackCore& stack, int fd, SmcdPending pending,
                             const SocketOptions& options)
{
    Result<ServerStep> step = serverConfirm(stack, fd, std::move(pending), options);
    if (!step)
        return step.error();
    if (auto* confirmed = std::get_if<SmcdConfirmed>(&*step))
        return serverMap(stack, std::move(*confirmed), options);
    return std::move(std::get<Outcome>(*step));
}

namespace
{

// Whether the first contact `parked` waits for ended by its `until`.
bool awaitFirstContact(StackCore& stack, const SmcrParked& parked)
{
    auto ended = std::make_shared<std::promise<void>>();
    std::future<void> done = ended->get_future();
    if (!stack.smcr()->firstContacts.park(parked.peer, [ended] { ended->set_value(); }))
        return true;
    return done.wait_until(parked.until) == std::future_status::ready;
}

} // namespace

Result<Outcome> serverRest(StackCore& stack, int fd, Result<ServerStep> step,
                           const SocketOptions& options)
{
    if (!step)
        return step.error();
    if (auto* d = std::get_if<SmcdPending>(&*step))
        return serverFinish(stack, fd, std::move(*d), options);
    if (auto* r = std::get_if<SmcrPending>(&*step))
        return serverFinish(stack, fd, std::move(*r), options);
    if (auto* c = std::get_if<SmcdConfirmed>(&*step))
        return serverMap(stack, std::move(*c), options);
    auto* parked = std::get_if<SmcrParked>(&*step);
    if (parked == nullptr)
        return std::move(std::get<Outcome>(*step));
    if (!awaitFirstContact(stack, *parked))
        return serverGiveUp(stack, fd, *parked, options);
    return serverRest(stack, fd, serverResume(stack, fd, std::move(*parked), options), options);
}

Result<Outcome> serverHandshake(StackCore& stack, int fd, const SocketOptions& options)
{
    return serverRest(stack, fd, serverBegin(stack, fd, options), options);
}

Result<Outcome> sendDecline(int fd, clc::DeclineCode reason, std::uint8_t version,
                            const clc::SystemId& id, Deadline deadline)
{
    (void)writeClc(fd, clc::makeDecline(reason, version, id), deadline);
    return Outcome(Fallback{reason, false});
}

} // namespace smc::net
