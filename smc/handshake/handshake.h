// SPDX-License-Identifier: MIT
// The CLC handshake over a connected TCP socket, client and server, for SMC-Dv2 over
// cross-process loopback-ism and SMC-Rv1 over the stack's SMC-R device; what it cannot do
// becomes a DECLINE and a fallback to TCP.
#pragma once

#include <memory>
#include <optional>
#include <variant>

#include "pool/buffer_desc.h"
#include "smc/clc/clc_messages.h"
#include "smc/clc/clc_negotiate.h"
#include "smc/conn/setup.h"
#include "smc/core/link_group.h"
#include "smc/ism/shm_ism.h"
#include "smc/net/clc_io.h"
#include "smc/net/tcp.h"
#include "smc/stack/first_contacts.h"
#include "smc/stack/stack_core.h"

namespace smc::net
{

// What Linux sends for an SMC-Dv2-only offer of loopback-ism (typev1 N: no SMC-D area entry,
// no prefixes) from the device `gid`, with one user EID.
clc::Proposal smcdProposal(const IsmGid& gid, const clc::Eid& ueid);

// The client's side after TCP connect. A DECLINE either way is a Fallback (ours is sent
// first). Errors (the connection is unusable): timed_out (no ACCEPT within
// options.clcTimeout), protocol_error (the answer is not CLC or not an ACCEPT or DECLINE),
// the socket's errors. Blocks up to options.clcTimeout per message.
// SMC-R (options.mode SmcR, or Auto with an SMC-R device; SMC-R v1 over IPv4 only): the
// PROPOSAL offers it (with SMC-Dv2 in Auto); an SMC-R ACCEPT joins the client group of the
// server's system id whose link has the server's QPN and GID (none: DECLINE SyncErr, or
// NoSrvLink), or on first contact joins the server's new link and, after CONFIRM, answers its
// CONFIRM_LINK (up to the group's timeouts.firstLink, Linux's 4 s; failing: DECLINE TimeoutCl after
// a 1 s look for the server's DECLINE). Declines: NoSmcrDev (SmcR without a device), CnfErr (no
// IPv4 prefix), Mem (no buffer, no group), ErrRdyLnk (the link), ErrRtok (the server's rtoken).
Result<Outcome> clientHandshake(StackCore& stack, int fd, const SocketOptions& options);

// An SMC-D client handshake whose ACCEPT is read and checked, our RMB granted to the server,
// the server's DMB still to be mapped. Dropped unfinished, it gives the RMB back.
struct ClientAccepted {
    OwnDmb rmb;
    clc::SmcdAcceptConfirm server;
    bool firstContact = false;
    std::uint8_t release = clc::kRelease1;
    std::uint8_t version = clc::kVersion2;
};
using ClientStep = std::variant<Outcome, ClientAccepted>;

// clientHandshake of SMC-D alone (as options.mode SmcD) in steps, so that no wait for the
// server holds a thread: clientPropose sends the PROPOSAL (the offer, for the ACCEPT's check);
// once the answer is all queued (net::firstMessageQueued), clientAnswer reads it and ends the
// handshake, our CONFIRM sent, when the server's DMB is mapped here already (kept: no wait),
// or leaves ClientAccepted for clientMap, which attaches it (up to options.clcTimeout) and
// confirms. Errors: clientHandshake's; each blocks only while the socket has no room to write.
Result<clc::Proposal> clientPropose(StackCore& stack, int fd, const SocketOptions& options);
Result<ClientStep> clientAnswer(StackCore& stack, int fd, const clc::Proposal& offer,
                                const SocketOptions& options);
Result<Outcome> clientMap(StackCore& stack, int fd, ClientAccepted accepted,
                          const SocketOptions& options);
// The CONFIRM with the server's DMB `peer` (mapped or not: a DECLINE Mem if not).
Result<Outcome> clientConfirm(StackCore& stack, int fd, ClientAccepted accepted,
                              Result<RemoteDmb> peer, Deadline deadline);

// The server's side after accept. A peer that sends no CLC (nothing within the timeout, or
// bytes that are not CLC) is a Fallback with PeerNoSmc and nothing of its stream consumed:
// user space cannot see the TCP option that tells Linux in the SYN. A malformed PROPOSAL is
// declined (ModeUnsupp, VersMismat) and falls back. Errors: timed_out or protocol_error
// for the CONFIRM (as in Linux: the client already treats the connection as SMC), the
// peer's DMB cannot be mapped, the socket's errors. Blocks up to options.clcTimeout per
// message.
// SMC-R v1 (when negotiate() picks it: no usable SMC-D, options.mode not SmcD): one handshake
// at a time per peer (system id and GID as claimed) chooses: a server group of the client's system
// id with room takes the connection, else a new group and link (first contact, which the peer's
// other handshakes wait for, up to a sixth of options.clcTimeout, else DECLINE PeerNoSmc); ACCEPT;
// CONFIRM; on first contact CONFIRM_LINK (its answer within timeouts.wait, Linux's 2 s, else
// DECLINE TimeoutCl) and ADD_LINK if the group allows two links. Joining, our RMB goes to the other
// links (CONFIRM_RKEY) before ACCEPT and the group's flow token is free while the client answers; a
// client's rtoken we cannot take then (no room, or failover moved the connection meanwhile) is
// connection_aborted, since a joining client reads nothing after its CONFIRM. Declines: NoSmcDev,
// DiffPrefix (negotiate's, as Linux), Mem, IntErr (no link could be made), ErrRegBuf (that
// CONFIRM_RKEY), ErrRtok (the client's rtoken on first contact), ErrRdyLnk. A joining client's
// DECLINE out of sync makes the group ask its peer over its links (LinkGroup::probeLinks): it ends
// if they do not answer.
Result<Outcome> serverHandshake(StackCore& stack, int fd, const SocketOptions& options);

// An SMC-D server handshake between our ACCEPT and the client's CONFIRM: our RMB, granted to
// the client. Dropped unfinished, it gives the RMB back (revoked, to the pool).
struct SmcdPending {
    OwnDmb rmb;
    IsmGid client;
    std::uint32_t groupId = 0;
};

// An SMC-R server handshake between our ACCEPT and the client's CONFIRM: the connection in its
// group; on first contact a new group, and the claim on the peer's first contact. Dropped
// unfinished, it closes the connection (first contact: ends the group), then lets the peer's
// parked handshakes go on.
struct SmcrPending {
    SmcrPending() = default;
    SmcrPending(SmcrPending&&) noexcept = default;
    SmcrPending& operator=(SmcrPending&&) = delete;
    ~SmcrPending() { fail("no CONFIRM"); }
    // The handshake failed: the connection closes (first contact: the group ends).
    void fail(const char* why) noexcept;

    std::optional<FirstContacts::Claim> claim; // first contact; given back last
    std::shared_ptr<LinkGroup> group;          // before hs: the handshake goes first
    std::optional<LinkGroup::Handshake> hs;
    ConnectionPtr conn;
    bool first = false;
    bool v2 = false;
    std::optional<clc::FirstContactExt> fce; // v2 first contact: the terms the CONFIRM echoes
    std::uint8_t version = clc::kVersion1;   // of a DECLINE
};

// An SMC-R server handshake after the PROPOSAL, parked while another first contact with the
// same peer is under way (StackCore::Smcr::firstContacts).
struct SmcrParked {
    clc::Proposal proposal;
    clc::Choice choice;
    std::uint8_t version = clc::kVersion1;
    FirstContacts::Key peer;
    Deadline until{}; // then it gives up: DECLINE and TCP
};

// serverHandshake in steps, so that no wait for the peer holds a thread. serverBegin runs it
// up to our ACCEPT (then SmcdPending or SmcrPending: the caller waits until the CONFIRM is
// there, net::firstMessageQueued, and calls serverFinish), to its end (fallbacks, errors: the
// Outcome), or until it must wait for the peer's first contact under way (SmcrParked: the
// caller parks it, FirstContacts::park, and calls serverResume once resumed, or serverGiveUp
// past its `until`). serverFinish reads the CONFIRM (up to options.clcTimeout) and completes.
// Errors: serverHandshake's. `seen` (serverBegin, serverConfirm): what firstMessageQueued saw
// of the message just before, which then needs no look of its own.
// An SMC-D server handshake whose CONFIRM is read and checked, the client's DMB still to be
// mapped (an attach, which waits for the client's device to answer).
struct SmcdConfirmed {
    SmcdPending pending;
    clc::SmcdAcceptConfirm named;
};

using ServerStep = std::variant<Outcome, SmcdPending, SmcrPending, SmcrParked, SmcdConfirmed>;
Result<ServerStep> serverBegin(StackCore& stack, int fd, const SocketOptions& options,
                               const ClcHead* seen = nullptr);
Result<Outcome> serverFinish(StackCore& stack, int fd, SmcdPending pending,
                             const SocketOptions& options);
// serverFinish of SMC-D in two halves, so that a caller with a CONFIRM all queued can run the
// first where it must not wait (the epoll thread): serverConfirm reads and checks it and ends
// the handshake when the client's DMB is mapped here already (kept, ShmIsm::takeKeptRemote:
// no wait), or leaves SmcdConfirmed for serverMap, which attaches (up to options.clcTimeout).
Result<ServerStep> serverConfirm(StackCore& stack, int fd, SmcdPending pending,
                                 const SocketOptions& options, const ClcHead* seen = nullptr);
Result<Outcome> serverMap(StackCore& stack, SmcdConfirmed confirmed, const SocketOptions& options);
Result<Outcome> serverFinish(StackCore& stack, int fd, SmcrPending pending,
                             const SocketOptions& options);
// SMC-R's step from its request on (serverBegin takes it there too): up to our ACCEPT
// (SmcrPending), parked again if another first contact with the peer is under way, or the
// Outcome. Blocks for a join's CONFIRM_RKEY (with more than one link) and up to
// options.clcTimeout for the ACCEPT's write, never for the peer's next message.
Result<ServerStep> serverResume(StackCore& stack, int fd, SmcrParked parked,
                                const SocketOptions& options);
// A parked handshake waited long enough: DECLINE PeerNoSmc, and TCP.
Result<Outcome> serverGiveUp(StackCore& stack, int fd, const SmcrParked& parked,
                             const SocketOptions& options);
// The step (a server's or a client's) that is a whole handshake's end.
template <typename Step = ServerStep> Result<Step> lift(Result<Outcome> outcome)
{
    if (!outcome)
        return outcome.error();
    return Step(std::move(*outcome));
}
// The rest of a server handshake from `step` on, each wait on this thread (serverHandshake is
// serverBegin, then this). Errors: serverHandshake's.
Result<Outcome> serverRest(StackCore& stack, int fd, Result<ServerStep> step,
                           const SocketOptions& options);

} // namespace smc::net
