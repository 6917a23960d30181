// SPDX-License-Identifier: MIT
// Keepalive: TEST_LINK on links that were quiet for a while (one unanswered takes its link down),
// and the echoes of the peer's TEST_LINKs.
#pragma once

#include <array>
#include <memory>
#include <optional>

#include "smc/llc/llc_core.h"
#include "smc/llc/llc_events.h"

namespace smc
{

class Keepalive
{
public:
    // Probes every timeouts.testLink of quiet (none if that is 0). `core` and `events` must
    // outlive this.
    Keepalive(LlcCore& core, LlcEvents& events);

    // The peer's TEST_LINK `m` came on `slot`: an echo goes, from a task of the link's own.
    void echo(unsigned slot, std::uint64_t epoch, llc::Message m);
    // A TEST_LINK on every active link now; one not answered within timeouts.wait goes
    // down. Blocks at most for one send per link.
    void probeLinks();
    // No probe starts after this returns.
    void stopTimer();
    // Nothing runs after this returns.
    void close();

private:
    // A link's TEST_LINK answers: the newest request still owed one, and
    // whether its echo task runs; `epoch` names the attach they are for.
    struct Echo {
        std::uint64_t epoch = 0;
        std::optional<llc::Message> owed;
        bool running = false;
    };

    void sendEchoes(unsigned slot, std::uint64_t epoch);
    // One tick of the timer: probe the quiet links, expire the unanswered probes.
    void tick();
    // Active links whose TEST_LINK went unanswered for timeouts.wait: they go down.
    struct Lost {
        unsigned slot;
        std::uint64_t epoch;
    };
    std::vector<Lost> expireProbes(Clock::time_point now) SMC_REQUIRES(core_.mutex());
    void reportLost(const std::vector<Lost>& lost);
    // Active links without a TEST_LINK out (only those quiet for timeouts.testLink when
    // `idleOnly`) get one: marked here, their channels returned to send it on after the lock.
    std::vector<std::shared_ptr<LinkChannel>> markProbes(Clock::time_point now, bool idleOnly)
        SMC_REQUIRES(core_.mutex());
    void sendProbes(const std::vector<std::shared_ptr<LinkChannel>>& channels);

    LlcCore& core_;
    LlcEvents& events_;
    std::array<Echo, kMaxLinks> echoes_ SMC_GUARDED_BY(core_.mutex());

    // Declared last: they go first, before what their tasks use.
    SerialQueue expiry_; // probeLinks()'s deadline
    // One per link: an echo that waits for a send slot holds up only its link.
    std::array<std::unique_ptr<SerialQueue>, kMaxLinks> echoQueues_;
    std::unique_ptr<PeriodicTimer> timer_;
};

} // namespace smc
