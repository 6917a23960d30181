// SPDX-License-Identifier: MIT
// LlcCore: what every LLC flow of a link group shares: its links, its lock, the flow token, and
// messages out with the one answer a flow waits for.
#pragma once

#include <atomic>
#include <chrono>
#include <functional>
#include <future>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "base/executor.h"
#include "base/mutex.h"
#include "pool/buffer_pool.h"
#include "smc/llc/link_table.h"
#include "smc/llc/llc_messages.h"
#include "smc/llc/llc_timeouts.h"
#include "smc/llc/rtoken_table.h"
#include "smc/transport/link_provider.h"

namespace smc
{

struct LlcConfig {
    Role role = Role::Client;
    // The header version of what the group sends: 2 in an SMC-Rv2 group (Linux puts v2
    // headers on every LLC message there), 1 otherwise. What exists only as v2 (REQ_ADD_LINK)
    // is v2 either way.
    std::uint8_t version = 1;
    unsigned maxLinks = 2;   // symmetric links wanted (Linux 1..2)
    unsigned maxConns = 255; // Linux 16..255
    LlcTimeouts timeouts;
};

struct LlcStats {
    std::uint64_t messagesIn = 0, messagesOut = 0, malformed = 0, dropped = 0, delayed = 0;
    std::uint64_t failovers = 0;
    // Links their channel reported down (a lost path, not a DELETE_LINK).
    std::uint64_t linksDown = 0;
    // Link ids the peer may not use: 0, one in use, or not the one its flow
    // is about (the ADD_LINK is rejected, the CONFIRM_RKEY answered negative,
    // the flow fails).
    std::uint64_t linkIdsRefused = 0;
    // Peer requests that start flows (ADD_LINK, REQ_ADD_LINK, DELETE_LINK)
    // while none runs: one like a pending one takes its place (coalesced);
    // beyond LlcEvents::kMaxPending they are dropped. Pending: now
    // (the parked one included); peak: the most that ever waited in line.
    std::uint64_t requestsCoalesced = 0, requestsDropped = 0;
    std::uint64_t requestsPending = 0, requestQueuePeak = 0;
    // TEST_LINKs that came while an echo waited to go: the next echo answers
    // them (the newest's user data).
    std::uint64_t testLinksCoalesced = 0;
    // CONFIRM_RKEYs answered NEG|RETRY because every rtoken row is in use.
    std::uint64_t rtokenRowsRefused = 0;
    // CDC messages handed to the host (not counted in messagesIn).
    std::uint64_t cdcIn = 0;
};

// What the LLC needs from the connections above it (the link group).
// Called without the group's LLC lock held.
class LlcHost
{
public:
    // ADD_LINK_CONT entries for every RMB in use: rkey on `from`, rtoken on `to`.
    virtual std::vector<llc::RkeyPair> rmbRkeys(unsigned from, unsigned to) = 0;
    // Failover: the connections riding `from` ride `to` from now on.
    virtual void moveConnections(unsigned from, unsigned to) = 0;
    // The group is gone (DELETE_LINK ALL went out if a link was left).
    virtual void groupEnded(std::string reason) = 0;
    // A message whose byte 0 is cdc::kCdcType (a CDC, not LLC) came on `slot`:
    // handed over unparsed, in the order of the link, on its delivery thread.
    virtual void cdcReceived(unsigned slot, std::span<const std::byte> message) = 0;

protected:
    ~LlcHost() = default;
};

// Where the core hands what its links report (the engine's dispatch). Called without the
// lock; `epoch` names the attach of `slot` a report comes from.
class LinkReports
{
public:
    // A message, on the link's delivery thread.
    virtual void received(unsigned slot, std::uint64_t epoch, std::vector<std::byte> bytes) = 0;
    // The link's channel went down.
    virtual void down(unsigned slot, std::uint64_t epoch) = 0;
    // The flow token is free again.
    virtual void flowReleased() = 0;

protected:
    ~LinkReports() = default;
};

// One LLC flow at a time per group (Linux llc_flow_lcl/rmt, simplified to
// one token); it is held for as long as this object lives.
enum class Flow : std::uint8_t { None, AddLink, DeleteLink, Rkey, FirstLink };
class LlcCore;
class [[nodiscard]] FlowToken
{
public:
    FlowToken() = default;
    FlowToken(FlowToken&& other) noexcept : core_(std::exchange(other.core_, nullptr)) {}
    FlowToken& operator=(FlowToken&& other) noexcept;
    ~FlowToken() { release(); }
    explicit operator bool() const noexcept { return core_ != nullptr; }
    void release() noexcept;

private:
    friend class LlcCore;
    explicit FlowToken(LlcCore* core) : core_(core) {}
    LlcCore* core_ = nullptr;
};

class LlcCore
{
public:
    // A flow's wait for one message: `type` on `slot`, a response or a request.
    struct Waiter {
        // What a relay returns: the message to send back on `slot` (the wait goes on), or
        // none: the relay is done, and the message it took becomes `got`.
        using Relay = std::function<std::optional<llc::Message>(const llc::Message&)>;

        unsigned slot = 0;
        llc::Type type{};
        bool response = false;
        std::optional<llc::Message> got;
        bool linkDown = false;
        // Optional: answers each awaited message on the thread that delivers it, so a
        // back-and-forth exchange wakes the flow once, at its end (v1's ADD_LINK_CONTs).
        Relay relay;
        bool relaying = false;      // a relay call is running: the flow may not return yet
        bool flowWaits = false;     // the flow waits for that call's end: tell it
        unsigned relayed = 0;       // messages the relay took: each restarts the timeout
        std::error_code relayError; // its answer could not be made or sent
    };
    // What answerWaiter made of a message.
    enum class Answer { No, Yes, Relay };

    // The provider, host, reports and executor must outlive the core.
    LlcCore(LlcConfig config, LinkProvider& provider, LlcHost& host, LinkReports& reports,
            Executor& executor);
    LlcCore(const LlcCore&) = delete;
    LlcCore& operator=(const LlcCore&) = delete;

    const LlcConfig& config() const noexcept { return config_; }
    LinkProvider& provider() noexcept { return provider_; }
    LlcHost& host() noexcept { return host_; }
    Executor& executor() noexcept { return executor_; }
    Registrar& registrar() noexcept { return registrar_; }
    void setPool(BufferPool& pool) noexcept { pool_ = &pool; }
    RtokenTable& rtokens() noexcept { return rtokens_; }
    const RtokenTable& rtokens() const noexcept { return rtokens_; }

    // The group lock. It guards the link table, the flow token, the waiter and the counters,
    // and what each flow keeps beside them: one lock per group, whose flows run one at a time.
    Mutex& mutex() const SMC_RETURN_CAPABILITY(mutex_) { return mutex_; }
    // Woken on every change a flow or a waiter may wait for.
    ConditionVariable& changed() noexcept { return changed_; }
    LinkTable& links() SMC_REQUIRES(mutex_) { return links_; }
    const LinkTable& links() const SMC_REQUIRES(mutex_) { return links_; }
    LlcStats& stats() SMC_REQUIRES(mutex_) { return stats_; }
    const LlcStats& stats() const SMC_REQUIRES(mutex_) { return stats_; }
    // One more of `counter`, taking the lock.
    void count(std::uint64_t LlcStats::*counter)
    {
        MutexLocker lock(mutex_);
        ++(stats_.*counter);
    }
    Flow flow() const SMC_REQUIRES(mutex_) { return flow_; }
    bool stopping() const SMC_REQUIRES(mutex_) { return stopping_; }
    bool terminated() const noexcept { return terminated_.load(); }
    // Neither stopping nor terminated: a flow may go on.
    bool live() const SMC_REQUIRES(mutex_) { return !stopping_ && !terminated_; }

    // The first step of stopping (false if it was taken already): every wait gives up, no
    // token is handed out. finishStop() then clears every link (its buffers unregistered).
    bool beginStop();
    void finishStop();

    // The flow token, waited for at most `timeout`: not_connected once the group ended or
    // stops, timed_out if a flow held it all that time.
    Result<FlowToken> acquireFlow(Flow flow, std::chrono::milliseconds timeout);
    Result<FlowToken> acquireFlow(Flow flow)
    {
        return acquireFlow(flow, config_.timeouts.flowStart);
    }

    // The link takes `slot` (state ACTIVATING) and every buffer is registered on it; on
    // failure the slot is left as it was.
    Result<void> attach(unsigned slot, NewLink link);
    // The slot is free again, once the last call that used its channel returned.
    void clearLink(unsigned slot);
    Result<void> breakLink(unsigned slot);
    // The group ends: DELETE_LINK ALL on a link left, the host told, the links cleared a
    // little later (the peer takes the DELETE_LINK first). Once only.
    void terminate(std::string reason, llc::DeleteReason code, bool orderly);

    // `m` on the wire, with the group's header version.
    std::vector<std::byte> wire(llc::Message m) const;
    // May wait for a send slot; never under the lock.
    Result<void> send(unsigned slot, const llc::Message& m);
    // The one waiter: set before the awaited message can come, then await()ed.
    void arm(Waiter& w);
    void disarm(Waiter& w);
    Result<llc::Message> await(Waiter& w, std::chrono::milliseconds timeout);
    // Send `m` on `sendSlot` and wait for `type` on `waitSlot`; with `relay`, each such
    // message goes to it first (Waiter::relay), and the wait ends when it says done. A
    // timeout that finds it took a message since waits again: silence ends it within two.
    Result<llc::Message> exchange(unsigned sendSlot, const llc::Message& m, unsigned waitSlot,
                                  llc::Type type, bool response, std::chrono::milliseconds timeout,
                                  Waiter::Relay relay = {});
    // `m` came on `slot`: Yes if it was what the waiter waits for and nothing else (a
    // crossing DELETE_LINK request also answers our own, and still runs as a request);
    // Relay if the waiter's relay must take it: the caller then calls relay() unlocked.
    Answer answerWaiter(unsigned slot, const llc::Message& m) SMC_REQUIRES(mutex_);
    // Runs the waiter's relay on `m` (after answerWaiter said Relay) and sends its answer,
    // or ends the wait. Not under the lock: the send may wait for a send slot.
    void relay(const llc::Message& m);
    // The waiter on `slot` gives up: its link went down.
    void failWaiter(unsigned slot) SMC_REQUIRES(mutex_);

    // The limits, as negotiated in CONFIRM_LINK: each side keeps the smaller of both.
    unsigned maxLinks() const noexcept { return maxLinks_; }
    unsigned maxConns() const noexcept { return maxConns_; }
    void adoptLimits(std::uint8_t peerLinks, std::uint8_t peerConns);
    // A CONFIRM_LINK: our end of the link and the limits we offer.
    llc::ConfirmLink confirmLink(const LinkAddress& local, std::uint8_t linkId) const;
    // The longest message our links carry: an SMC-Rv2 group's ADD_LINK has its rkeys.
    std::size_t maxMessage() const noexcept { return maxLinkMessage(config_.version); }
    // The new link is ACTIVE with its type; returns the asymmetric link that a new
    // symmetric one makes unnecessary, if any.
    std::optional<unsigned> activate(unsigned slot, GroupType newType);

    // Observability and the data path (each takes the lock for itself).
    // `linkId`: only if the link there has that id (0: any).
    std::shared_ptr<LinkChannel> activeChannel(unsigned slot, std::uint8_t linkId = 0) const;
    std::optional<unsigned> anyActive() const;

private:
    friend class FlowToken;
    void releaseFlow();
    // Ends `w`'s wait: disarmed, and no relay of its still running.
    void release(MutexLocker& lock, Waiter& w) SMC_REQUIRES(mutex_);
    // Until `w`'s running relay call (if any) has ended.
    void waitForRelay(MutexLocker& lock, Waiter& w) SMC_REQUIRES(mutex_);
    // timeouts.wait after terminate(): every link cleared once no flow holds the token (none
    // can take it any more), so a terminated group still held holds no QP.
    void clearLinksWhenIdle();

    const LlcConfig config_;
    std::atomic<unsigned> maxLinks_, maxConns_;
    LinkProvider& provider_;
    LlcHost& host_;
    LinkReports& reports_;
    Executor& executor_;
    SlotRegistrar registrar_;
    BufferPool* pool_ = nullptr;
    RtokenTable rtokens_;

    mutable Mutex mutex_;
    ConditionVariable changed_;
    LinkTable links_ SMC_GUARDED_BY(mutex_);
    // Per slot, the channel itself: links_[slot].channel only refers to it (an alias that
    // shares `users`), so when clearLink drops the table's copy, `drained` is ready once the
    // last call that copied it returned.
    struct Owned {
        std::shared_ptr<LinkChannel> channel;
        std::future<void> drained;
    };
    std::array<Owned, kMaxLinks> owned_ SMC_GUARDED_BY(mutex_);
    Flow flow_ SMC_GUARDED_BY(mutex_) = Flow::None;
    Waiter* waiter_ SMC_GUARDED_BY(mutex_) = nullptr;
    // The waiter whose relay runs: set with its `relaying`, which keeps it alive until cleared.
    Waiter* relayed_ SMC_GUARDED_BY(mutex_) = nullptr;
    LlcStats stats_ SMC_GUARDED_BY(mutex_);
    bool stopping_ SMC_GUARDED_BY(mutex_) = false;
    std::atomic<bool> terminated_{false};

    // Declared last: it goes first, before what its task uses.
    SerialQueue reaper_;
};

} // namespace smc
