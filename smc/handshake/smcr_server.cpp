// SPDX-License-Identifier: MIT
// The SMC-R server's CLC: a group for the PROPOSAL, ACCEPT; then CONFIRM and CONFIRM_LINK.
#include <algorithm>

#include "pool/size_class.h"
#include "smc/clc/clc_errors.h"
#include "smc/handshake/smcr_handshake.h"
#include "smc/net/clc_io.h"

namespace smc::net
{

using clc::DeclineCode;

void SmcrPending::fail(const char* why) noexcept
{
    if (group == nullptr)
        return; // finished, or moved from
    hs.reset(); // not completed: closes the connection
    if (first)
        group->terminate(why);
    else if (conn != nullptr)
        (void)group->closeConnection(*conn);
    group.reset();
}

SmcrParked smcrRequest(clc::Proposal proposal, const clc::Choice& choice, std::uint8_t version,
                       const SocketOptions& options)
{
    SmcrParked r;
    r.peer = {proposal.systemId,
              choice.version >= clc::kVersion2 ? proposal.v2.roceV2Gid : proposal.gid};
    r.proposal = std::move(proposal);
    r.choice = choice;
    r.version = version;
    r.until = deadlineAfter(options.clcTimeout / 6);
    return r;
}

Result<ServerStep> serverResume(StackCore& stack, int fd, SmcrParked request,
                                const SocketOptions& options)
{
    StackCore::Smcr& smcr = *stack.smcr();
    const clc::Proposal& proposal = request.proposal;
    std::optional<V2Terms> v2;
    if (request.choice.version >= clc::kVersion2)
        v2 = serverTerms(proposal, request.choice, ourTerms(smcr));
    const std::uint8_t version = request.version;

    // Same peer system id and a live link to the device it proposes from (v2: its GID in
    // the v2 extension; Linux's v2 PROPOSAL has a zero system id, GID and MAC). While a
    // first contact with that peer is under way, the group it makes is the one to join.
    // The claim first: a handshake that fails below closes its connection (p goes) before
    // the peer's parked handshakes resume.
    std::optional<FirstContacts::Claim> claim = smcr.firstContacts.claim(request.peer);
    if (!claim)
        return ServerStep(std::move(request));
    SmcrPending p;
    p.group = v2 ? smcr.groups->find(Role::Server, proposal.systemId, proposal.v2.roceV2Gid, {},
                                     clc::kVersion2)
                 : smcr.groups->find(Role::Server, proposal.systemId, proposal.gid, proposal.mac);
    p.first = p.group == nullptr;
    p.v2 = v2.has_value();
    p.version = version;
    LinkAddress local;
    if (p.first) {
        NewGroup made = newGroup(smcr, Role::Server, proposal.systemId, groupTerms(v2), options,
                                 DeclineCode::IntErr,
                                 [&] { return smcr.provider->create({}, maxMessage(v2)); });
        if (!made.hs)
            return lift(decline(stack, fd, made.reason, version, options));
        p.group = std::move(made.group);
        local = made.local;
        p.hs = std::move(made.hs);
        p.claim.emplace(std::move(*claim)); // held through CONFIRM_LINK
        if (v2)
            p.fce = v2->fce;
    } else {
        // The group chosen and a place in it taken as one step: the claim goes once the
        // connection is in (a second handshake of this peer then sees the group's room as it
        // is), and the peer's next handshake need not wait for this one's CONFIRM.
        Result<LinkGroup::Handshake> h =
            p.group->beginHandshake(options.rmbBytes, sndbufBytes(options));
        if (!h) {
            p.group.reset(); // no connection to close
            return lift(decline(stack, fd, DeclineCode::Mem, version, options));
        }
        p.hs = std::move(*h);
        // Our RMB on the other links before ACCEPT, and the flow token free again while the
        // client answers (Linux: CONFIRM_RKEY under llc_conf_mutex, then ACCEPT).
        // Failing (Linux: smcr_lgr_reg_rmbs failed), it closed the connection.
        if (Result<void> a = p.hs->announce(); !a) {
            p.group.reset();
            return lift(decline(stack, fd, DeclineCode::ErrRegBuf, version, options));
        }
        const std::optional<LinkAddress> l = localOf(*p.group, p.hs->link());
        if (!l) {
            p.group.reset(); // the handshake, dropped, closes the connection
            return lift(decline(stack, fd, DeclineCode::NoActLink, version, options));
        }
        local = *l;
        claim.reset(); // complete() checks the group again
    }
    p.conn = p.hs->connection();
    const clc::Accept accept{ours(stack, local, *p.hs, p.first, local.mtu, v2)};
    if (Result<void> sent = writeClc(fd, accept, deadlineAfter(options.clcTimeout)); !sent) {
        p.fail("ACCEPT not sent");
        return hard(sent.error());
    }
    return ServerStep(std::move(p));
}

Result<Outcome> serverFinish(StackCore& stack, int fd, SmcrPending p, const SocketOptions& options)
{
    const std::uint8_t version = p.version;
    Result<clc::Message> answer = readClc(fd, deadlineAfter(options.clcTimeout));
    if (answer) {
        if (const auto* d = std::get_if<clc::Decline>(&*answer)) {
            // Out of sync: the client says it has no group to match ours. Linux ends the group;
            // but anybody can propose a peer's system id and GID and say so, so the peer is
            // asked over the group's links first: the group ends only if it does not answer.
            std::shared_ptr<LinkGroup> group = p.group;
            const bool join = !p.first;
            p.fail(d->outOfSync ? "client out of sync" : "client declined");
            if (d->outOfSync && join)
                group->probeLinks();
            return Outcome(Fallback{d->diagnosis, true});
        }
    }
    const auto* c = answer ? std::get_if<clc::Confirm>(&*answer) : nullptr;
    if (c == nullptr || !usableSmcr(*c) || c->firstContact != p.first ||
        (c->version >= clc::kVersion2) != p.v2) {
        p.fail("bad CONFIRM");
        return answer ? std::make_error_code(std::errc::protocol_error) : hard(answer.error());
    }
    if (p.fce) {
        if (std::optional<DeclineCode> reason = echoMismatch(*p.fce, c->fce)) {
            p.fail("CONFIRM changed the terms");
            return decline(stack, fd, *reason, version, options);
        }
    }
    const auto& r = std::get<clc::SmcrAcceptConfirm>(c->path);
    if (Result<void> done = p.hs->complete({r.rkey, r.rmbAddr}, classBytes(r.rmbeSize)); !done) {
        const bool join = !p.first;
        p.fail("peer rtoken refused");
        // A joining client reads no CLC after its CONFIRM: a DECLINE would go unseen and leave
        // it on SMC-R against our TCP. Ending the TCP connection resets its SMC-R one instead.
        if (join)
            return std::make_error_code(std::errc::connection_aborted);
        return decline(stack, fd, DeclineCode::ErrRtok, version, options);
    }
    if (p.first) {
        if (Result<void> up = p.group->confirmFirstLink(addressOf(r)); !up) {
            p.fail("CONFIRM_LINK failed");
            return firstLinkFailed(stack, fd, up.error(), version, options);
        }
    }
    return Outcome(SmcrSetup{std::exchange(p.group, nullptr), std::move(p.conn), r.alertToken,
                             classBytes(r.rmbeSize), p.first});
}

Result<Outcome> serverGiveUp(StackCore& stack, int fd, const SmcrParked& request,
                             const SocketOptions& options)
{
    return decline(stack, fd, DeclineCode::PeerNoSmc, request.version, options);
}

} // namespace smc::net
