// SPDX-License-Identifier: MIT
// TEST_LINK: probe links that were quiet for a while (a probe without a reply takes the link
// down), and answer the peer's probes.
#include "smc/llc/llc_engine.h"

namespace smc
{

// A peer's TEST_LINK is echoed by a task of the link's own, never from the
// link's delivery: an echo that waits for a send slot (a peer that floods
// and takes nothing) must not stop the link from reading. Requests that come
// while an echo waits share the next one, which echoes the newest (a prober
// waits for one answer, not for its own user data).
void LlcEngine::echoTestLink(unsigned slot, std::uint64_t epoch, llc::Message m)
{
    Echo& e = echoes_[slot];
    if (e.epoch != epoch)
        e = Echo{epoch, std::nullopt, false}; // the slot's new link
    if (e.owed)
        ++stats_.testLinksCoalesced;
    m.response = true;
    e.owed = std::move(m);
    if (!e.running) {
        e.running = true;
        echoQueues_[slot]->post([this, slot, epoch] { sendEchoes(slot, epoch); });
    }
}

void LlcEngine::sendEchoes(unsigned slot, std::uint64_t epoch)
{
    MutexLocker lock(mutex_);
    for (;;) {
        Echo& e = echoes_[slot];
        if (e.epoch != epoch)
            return; // the slot has another link, and its own task
        std::shared_ptr<LinkChannel> channel =
            links_[slot].epoch == epoch && !stopping_ ? links_[slot].channel : nullptr;
        if (!e.owed || !channel) {
            e.owed.reset();
            e.running = false;
            return;
        }
        const std::vector<std::byte> bytes = wire(*e.owed);
        e.owed.reset();
        ++stats_.messagesOut;
        lock.unlock();
        (void)channel->send(bytes); // may wait for a send slot: not under the lock
        channel.reset();            // before the lock: clearLink waits for the last reference
        lock.lock();
    }
}

// One tick of the group's keepalive timer (a short task: it never waits).
void LlcEngine::expireProbes(Clock::time_point now)
{
    for (unsigned s = 0; s < kMaxLinks; ++s) {
        Link& l = links_[s];
        if (l.state == LinkState::Active && l.testPending &&
            now - l.testSentAt >= config_.timeouts.wait) {
            l.testPending = false; // a missed reply takes the link down
            downs_.push_back({s, l.epoch, std::nullopt});
            scheduleEvents();
        }
    }
}

std::vector<std::shared_ptr<LinkChannel>> LlcEngine::markProbes(Clock::time_point now,
                                                                bool idleOnly)
{
    std::vector<std::shared_ptr<LinkChannel>> probe;
    for (unsigned s = 0; s < kMaxLinks; ++s) {
        Link& l = links_[s];
        if (l.state != LinkState::Active || l.testPending || !l.channel ||
            (idleOnly && now - l.lastRx < config_.timeouts.testLink))
            continue;
        l.testPending = true;
        l.testSentAt = now;
        ++stats_.messagesOut;
        probe.push_back(l.channel);
    }
    return probe;
}

// Whether the peer is still there, asked now (not after the idle interval): a claim that it
// forgot the group is believed only when its links do not answer.
void LlcEngine::probeLinks()
{
    const auto now = Clock::now();
    std::vector<std::shared_ptr<LinkChannel>> probe;
    {
        MutexLocker lock(mutex_);
        if (stopping_ || terminated_)
            return;
        probe = markProbes(now, false);
        events_.postAfter(config_.timeouts.wait + std::chrono::milliseconds(1), [this] {
            MutexLocker later(mutex_);
            if (!stopping_ && !terminated_)
                expireProbes(Clock::now());
        });
    }
    for (const auto& channel : probe) // a send may wait for a slot: not under the lock
        (void)channel->send(wire({1, false, llc::TestLink{}}));
}

void LlcEngine::testLinks()
{
    const auto now = Clock::now();
    std::vector<std::shared_ptr<LinkChannel>> probe;
    {
        MutexLocker lock(mutex_);
        if (stopping_ || terminated_)
            return;
        probe = markProbes(now, true);
        expireProbes(now); // after: a link that just went down is not probed again
    }
    for (const auto& channel : probe) // a send may wait for a slot: not under the lock
        (void)channel->send(wire({1, false, llc::TestLink{}}));
}

} // namespace smc
