// SPDX-License-Identifier: MIT
// TEST_LINK: probe links that were quiet for a while; a probe without a reply takes the link down.
#include "smc/llc/llc_engine.h"

namespace smc
{

// One tick of the group's keepalive timer (a short task: it never waits).
void LlcEngine::testLinks()
{
    const auto now = Clock::now();
    std::vector<std::shared_ptr<LinkChannel>> probe;
    {
        MutexLocker lock(mutex_);
        if (stopping_ || terminated_)
            return;
        for (unsigned s = 0; s < kMaxLinks; ++s) {
            Link& l = links_[s];
            if (l.state != LinkState::Active)
                continue;
            if (l.testPending) {
                if (now - l.testSentAt >= config_.timeouts.wait) {
                    l.testPending = false; // a missed reply takes the link down
                    downs_.push_back({s, l.epoch, std::nullopt});
                    scheduleEvents();
                }
            } else if (now - l.lastRx >= config_.timeouts.testLink && l.channel) {
                l.testPending = true;
                l.testSentAt = now;
                ++stats_.messagesOut;
                probe.push_back(l.channel);
            }
        }
    }
    for (const auto& channel : probe) // a send may wait for a slot: not under the lock
        (void)channel->send(llc::encode({1, false, llc::TestLink{}}));
}

} // namespace smc
