// SPDX-License-Identifier: MIT
// LlcTimeouts: how long a link group's LLC flows wait for the peer.
#pragma once

#include <chrono>

namespace smc
{

// Linux's LLC timers (llc.h), configurable.
struct LlcTimeouts {
    // The client's wait for the server's first CONFIRM_LINK; the server waits `wait` for the
    // answer, and both ends of an added link `wait` for theirs.
    std::chrono::milliseconds firstLink{4000};
    std::chrono::milliseconds wait{2000}; // every other LLC wait
    std::chrono::milliseconds flowStart{20000};
    std::chrono::milliseconds testLink{30000}; // TEST_LINK idle interval; 0 = off
};

} // namespace smc
