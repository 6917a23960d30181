// SPDX-License-Identifier: MIT
// SocketMarker: what marks our TCP sockets around connect(2) and listen(2) (SMC's TCP option).
#pragma once

#include "base/result.h"

namespace smc::net
{

// Marks a TCP socket before connect(2) or listen(2), and unmarks it once that returned: how a
// stack puts SMC's TCP option on its SYNs and SYN-ACKs (SmcTcpOption) without the TCP code
// knowing how. Neither blocks.
class SocketMarker
{
public:
    virtual ~SocketMarker() = default;
    virtual Result<void> mark(int fd) const noexcept = 0;
    virtual void unmark(int fd) const noexcept = 0;
};

} // namespace smc::net
