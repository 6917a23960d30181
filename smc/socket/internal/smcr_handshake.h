// SPDX-License-Identifier: MIT
// The SMC-R share of the CLC handshake (handshake.cpp dispatches to it): PROPOSAL fields,
// the client after an SMC-R ACCEPT, the server once negotiate() chose SMC-R v1 or v2.
#pragma once

#include <optional>

#include "smc/clc/clc_negotiate.h"
#include "smc/socket/handshake.h"
#include "smc/socket/internal/stack_smcr.h"
#include "smc/socket/tcp.h"

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
void offerSmcr(SmcStack& stack, const clc::Ipv4Address& local, clc::Proposal& proposal);
// Adds SMC-Rv2 to the PROPOSAL (then version 2) if the stack offers it (SmcrConfig::offerV2)
// and its GID is a RoCE v2 IPv4 one: the GID, our EID, our group limits.
void offerSmcrV2(SmcStack& stack, clc::Proposal& proposal);

// Client: the server accepted SMC-R. Joins or creates the link group, sends CONFIRM, runs
// CONFIRM_LINK on first contact. A DECLINE either way is a Fallback; errors as
// clientHandshake's. Blocks per message up to options.clcTimeout, and for CONFIRM_LINK.
Result<Outcome> smcrClient(SmcStack& stack, int fd, const clc::Accept& accept,
                           const SocketOptions& options);

// Server: negotiate() made `choice`, SMC-R v1 or v2, for `proposal` (version: of the
// DECLINE). Errors as serverHandshake's. Blocks for the stack's SMC-R handshake lock, up to
// options.clcTimeout for the CONFIRM, and for CONFIRM_LINK (and ADD_LINK) on first contact.
Result<Outcome> smcrServer(SmcStack& stack, int fd, const clc::Proposal& proposal,
                           const clc::Choice& choice, std::uint8_t version,
                           const SocketOptions& options);

} // namespace smc::net
