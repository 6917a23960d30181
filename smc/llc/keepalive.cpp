// SPDX-License-Identifier: MIT
// Keepalive: probe links that were quiet for a while (a probe without a reply takes the link
// down), and answer the peer's probes.
#include "smc/llc/keepalive.h"

#include <algorithm>

namespace smc
{

Keepalive::Keepalive(LlcCore& core, LlcEvents& events)
    : core_(core), events_(events), expiry_(core.executor())
{
    // Blocking threads: an echo may wait for a send slot (seconds, over RDMA).
    for (auto& q : echoQueues_)
        q = std::make_unique<SerialQueue>(core.executor(), SerialQueue::Kind::Blocking);
    const std::chrono::milliseconds idle = core.config().timeouts.testLink;
    if (idle.count() > 0)
        timer_ = std::make_unique<PeriodicTimer>(
            core.executor(),
            std::min<std::chrono::milliseconds>(idle / 4, std::chrono::milliseconds(100)),
            [this] { tick(); });
}

void Keepalive::stopTimer()
{
    if (timer_)
        timer_->stop();
}

void Keepalive::close()
{
    stopTimer();
    expiry_.close();
    for (auto& q : echoQueues_)
        q->close();
}

// A peer's TEST_LINK is echoed by a task of the link's own, never from the
// link's delivery: an echo that waits for a send slot (a peer that floods
// and takes nothing) must not stop the link from reading. Requests that come
// while an echo waits share the next one, which echoes the newest (a prober
// waits for one answer, not for its own user data).
void Keepalive::echo(unsigned slot, std::uint64_t epoch, llc::Message m)
{
    MutexLocker lock(core_.mutex());
    Echo& e = echoes_[slot];
    if (e.epoch != epoch)
        e = Echo{epoch, std::nullopt, false}; // the slot's new link
    if (e.owed)
        ++core_.stats().testLinksCoalesced;
    m.response = true;
    e.owed = std::move(m);
    if (!e.running) {
        e.running = true;
        echoQueues_[slot]->post([this, slot, epoch] { sendEchoes(slot, epoch); });
    }
}

void Keepalive::sendEchoes(unsigned slot, std::uint64_t epoch)
{
    MutexLocker lock(core_.mutex());
    for (;;) {
        Echo& e = echoes_[slot];
        if (e.epoch != epoch)
            return; // the slot has another link, and its own task
        const Link& link = core_.links()[slot];
        std::shared_ptr<LinkChannel> channel =
            link.epoch == epoch && !core_.stopping() ? link.channel : nullptr;
        if (!e.owed || !channel) {
            e.owed.reset();
            e.running = false;
            return;
        }
        const std::vector<std::byte> bytes = core_.wire(*e.owed);
        e.owed.reset();
        ++core_.stats().messagesOut;
        lock.unlock();
        (void)channel->send(bytes); // may wait for a send slot: not under the lock
        channel.reset();            // before the lock: clearLink waits for the last reference
        lock.lock();
    }
}

std::vector<Keepalive::Lost> Keepalive::expireProbes(Clock::time_point now)
{
    std::vector<Lost> lost;
    for (unsigned s = 0; s < kMaxLinks; ++s) {
        Link& l = core_.links()[s];
        if (l.state == LinkState::Active && l.testPending &&
            now - l.testSentAt >= core_.config().timeouts.wait) {
            l.testPending = false; // a missed reply takes the link down
            lost.push_back({s, l.epoch});
        }
    }
    return lost;
}

void Keepalive::reportLost(const std::vector<Lost>& lost)
{
    for (const Lost& l : lost)
        events_.lost(l.slot, l.epoch);
}

std::vector<std::shared_ptr<LinkChannel>> Keepalive::markProbes(Clock::time_point now,
                                                                bool idleOnly)
{
    std::vector<std::shared_ptr<LinkChannel>> probe;
    for (unsigned s = 0; s < kMaxLinks; ++s) {
        Link& l = core_.links()[s];
        if (l.state != LinkState::Active || l.testPending || !l.channel ||
            (idleOnly && now - l.lastRx < core_.config().timeouts.testLink))
            continue;
        l.testPending = true;
        l.testSentAt = now;
        ++core_.stats().messagesOut;
        probe.push_back(l.channel);
    }
    return probe;
}

void Keepalive::sendProbes(const std::vector<std::shared_ptr<LinkChannel>>& channels)
{
    for (const auto& channel : channels) // a send may wait for a slot: not under the lock
        (void)channel->send(core_.wire({1, false, llc::TestLink{}}));
}

// Whether the peer is still there, asked now (not after the idle interval): a claim that it
// forgot the group is believed only when its links do not answer.
void Keepalive::probeLinks()
{
    std::vector<std::shared_ptr<LinkChannel>> probe;
    {
        MutexLocker lock(core_.mutex());
        if (!core_.live())
            return;
        probe = markProbes(Clock::now(), false);
        expiry_.postAfter(core_.config().timeouts.wait + std::chrono::milliseconds(1), [this] {
            std::vector<Lost> lost;
            {
                MutexLocker later(core_.mutex());
                if (core_.live())
                    lost = expireProbes(Clock::now());
            }
            reportLost(lost);
        });
    }
    sendProbes(probe);
}

// A short task: it never waits.
void Keepalive::tick()
{
    const auto now = Clock::now();
    std::vector<std::shared_ptr<LinkChannel>> probe;
    std::vector<Lost> lost;
    {
        MutexLocker lock(core_.mutex());
        if (!core_.live())
            return;
        probe = markProbes(now, true);
        lost = expireProbes(now); // after: a link that just went down is not probed again
    }
    reportLost(lost);
    sendProbes(probe);
}

} // namespace smc
