// SPDX-License-Identifier: MIT
// Both ends of a link group in one process: what CLC would do for tests, benchmarks and demos.
#pragma once

#include <chrono>
#include <utility>

#include "smc/core/link_group.h"

namespace smc
{

// The first link: the server's link, its client end joined and connected,
// both groups started (CONFIRM_LINK). The server then adds its second link.
Result<void> startLocalPair(LinkGroup& server, LinkGroup& client, LinkProvider& provider);

// A connection's two ends: the server's, then the client's.
using ConnectionPair = std::pair<ConnectionPtr, ConnectionPtr>;

// One connection on both sides: buffers from each group, each peer RMB's
// rtoken and size learnt on the server's link (what CLC carries), then
// CONFIRM_RKEY for the other links. Keep calls apart from link changes, as
// Linux does with its LGR-pending locks. On error nothing stays open.
Result<ConnectionPair> connectLocalPair(LinkGroup& server, LinkGroup& client, std::size_t rmbBytes,
                                        std::size_t sndbufBytes);

// Both sides have exactly `n` links, all ACTIVE (the client finishes a flow
// just after the server's last answer arrives), within `limit`.
bool waitForLinks(const LinkGroup& server, const LinkGroup& client, unsigned n,
                  std::chrono::milliseconds limit);

} // namespace smc
