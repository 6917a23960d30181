// SPDX-License-Identifier: MIT
// The CLC handshake over a connected TCP socket, client and server, for SMC-Dv2 over
// cross-process loopback-ism; what it cannot do becomes a DECLINE and a fallback to TCP.
#pragma once

#include <variant>

#include "pool/buffer_desc.h"
#include "smc/clc/clc_messages.h"
#include "smc/ism/shm_ism.h"
#include "smc/socket/stack.h"

namespace smc::net
{

// SMC-D is up: our DMB (granted to the peer), the peer's mapped here.
struct SmcdSetup {
    BufferRef rmb;
    RemoteDmb peer;
    IsmGid peerGid;
    std::uint32_t groupId = 0; // the SMC-D "link group" the server named (CLC link id)
};

// The connection goes on as TCP, the CLC bytes consumed on both sides.
struct Fallback {
    clc::DeclineCode reason{}; // ours, or the peer's diagnosis when it declined
    bool peerDeclined = false;
};

using Outcome = std::variant<SmcdSetup, Fallback>;

// The client's side after TCP connect. A DECLINE either way is a Fallback (ours is sent
// first). Errors (the connection is unusable): timed_out (no ACCEPT within
// options.clcTimeout), protocol_error (the answer is not CLC or not an ACCEPT or DECLINE),
// the socket's errors. Blocks up to options.clcTimeout per message.
Result<Outcome> clientHandshake(SmcStack& stack, int fd, const SocketOptions& options);

// The server's side after accept. A peer that sends no CLC (nothing within the timeout, or
// bytes that are not CLC) is a Fallback with PeerNoSmc and nothing of its stream consumed:
// user space cannot see the TCP option that tells Linux in the SYN. A malformed PROPOSAL is
// declined (ModeUnsupp, VersMismat) and falls back. Errors: timed_out or protocol_error
// for the CONFIRM (as in Linux: the client already treats the connection as SMC), the
// peer's DMB cannot be mapped, the socket's errors. Blocks up to options.clcTimeout per
// message.
Result<Outcome> serverHandshake(SmcStack& stack, int fd, const SocketOptions& options);

} // namespace smc::net
