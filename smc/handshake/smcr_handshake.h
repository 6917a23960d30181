// SPDX-License-Identifier: MIT
// The SMC-R share of the CLC handshake (handshake.cpp dispatches to it): PROPOSAL fields,
// the client after an SMC-R ACCEPT, the server once negotiate() chose SMC-R v1 or v2.
#pragma once

#include <functional>
#include <memory>
#include <optional>

#include "smc/clc/clc_negotiate.h"
#include "smc/handshake/handshake.h"
#include "smc/handshake/smcr_terms.h"
#include "smc/net/tcp.h"
#include "smc/stack/stack_smcr.h"

namespace smc::net
{

// A DECLINE with `reason`, best effort (the peer learns why, or takes what follows for CLC
// garbage), and the fallback it means. `id`: our SMC-R system id (zeros for SMC-D). Blocks
// up to `deadline` for the write.
Result<Outcome> sendDecline(int fd, clc::DeclineCode reason, std::uint8_t version,
                            const clc::SystemId& id, Deadline deadline);

// The IPv4 address of the socket's local end with its interface's prefix length (Linux
// takes the subnet of the route's device), or nullopt (not IPv4, no interface found).
std::optional<clc::Ipv4Address> localIpv4(int fd);

// This host's name as the first-contact extension carries it.
clc::Hostname hostname();

// Fills the PROPOSAL's SMC-R v1 area (system id, GID, MAC, the IPv4 subnet of `local`).
void offerSmcr(StackCore& stack, const clc::Ipv4Address& local, clc::Proposal& proposal);
// Adds SMC-Rv2 to the PROPOSAL (then version 2) if the stack offers it (SmcrConfig::offerV2)
// and its GID is a RoCE v2 IPv4 one: the GID, our EID, our group limits.
void offerSmcrV2(StackCore& stack, clc::Proposal& proposal);

// Client: the server accepted SMC-R. Joins or creates the link group, sends CONFIRM, runs
// CONFIRM_LINK on first contact. A DECLINE either way is a Fallback; errors as
// clientHandshake's. Blocks per message up to options.clcTimeout, and for CONFIRM_LINK.
Result<Outcome> smcrClient(StackCore& stack, int fd, const clc::Accept& accept,
                           const SocketOptions& options);

// Server: what serverResume takes first, once negotiate() made `choice` (SMC-R v1 or v2) for
// `proposal` (`version`: of a DECLINE). Parked, it waits a sixth of options.clcTimeout at most
// (1 s by default, Linux's CLC_WAIT_TIME_SHORT): a client behind a stranger that claims its
// identity and stalls falls back to TCP instead of timing out.
SmcrParked smcrRequest(clc::Proposal proposal, const clc::Choice& choice, std::uint8_t version,
                       const SocketOptions& options);

// What both roles use (smcr_handshake.cpp, handshake.cpp).

// sendDecline with the stack's system id, within one CLC timeout.
Result<Outcome> decline(StackCore& stack, int fd, clc::DeclineCode reason, std::uint8_t version,
                        const SocketOptions& options);
// A CLC error as the caller sees it: malformed CLC is protocol_error.
std::error_code hard(std::error_code e);
// CONFIRM_LINK failed: the peer may have given up first and declined (Linux looks for its
// DECLINE for a second before it sends its own, so the stream stays aligned either way).
Result<Outcome> firstLinkFailed(StackCore& stack, int fd, std::error_code e, std::uint8_t version,
                                const SocketOptions& options);

// First contact, either role: a new group, its first link (`makeLink`: the server creates
// it, the client joins the server's) and a connection on it. Without `hs`, `reason` says
// why (`noLink` when the link could not be made) and the group is gone again.
struct NewGroup {
    std::shared_ptr<LinkGroup> group; // before hs: the handshake goes first
    LinkAddress local;
    std::optional<LinkGroup::Handshake> hs;
    clc::DeclineCode reason = clc::DeclineCode::Mem;
};
NewGroup newGroup(StackCore::Smcr& smcr, Role role, const SystemId& peer, GroupTerms terms,
                  const SocketOptions& options, clc::DeclineCode noLink,
                  const std::function<Result<NewLink>()>& makeLink);

// Our side of SMC-Rv2's first-contact terms: the groups' default limits, our host name.
OurTerms ourTerms(const StackCore::Smcr& smcr);
// The longest LLC message of the group's links.
std::size_t maxMessage(const std::optional<V2Terms>& v2);
// Our half of ACCEPT or CONFIRM: the connection's link and RMB there.
clc::AcceptConfirm ours(StackCore& stack, const LinkAddress& link, const LinkGroup::Handshake& hs,
                        bool firstContact, std::uint8_t mtu, const std::optional<V2Terms>& v2);
// The peer's half as we can use it: one RMBE per RMB, a size we know, an rtoken.
bool usableSmcr(const clc::AcceptConfirm& m);
LinkAddress addressOf(const clc::SmcrAcceptConfirm& r);
// Our end of the group's link in `slot`, if it is there.
std::optional<LinkAddress> localOf(const LinkGroup& g, unsigned slot);

} // namespace smc::net
