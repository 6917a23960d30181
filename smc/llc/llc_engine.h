// SPDX-License-Identifier: MIT
// LlcEngine: the LLC side of a link group: its links, the one-at-a-time flow token, the flows.
#pragma once

#include <atomic>
#include <chrono>
#include <deque>
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
    // beyond LlcEngine::kMaxPendingRequests they are dropped. Pending: now
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

// What the engine needs from the connections above it (the link group).
// Called without the engine's lock held.

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

// One LLC flow at a time per group (Linux llc_flow_lcl/rmt, simplified to
// one token); it is held for as long as this object lives.
enum class Flow : std::uint8_t { None, AddLink, DeleteLink, Rkey, FirstLink };
class LlcEngine;
class [[nodiscard]] FlowToken
{
public:
    FlowToken() = default;
    FlowToken(FlowToken&& other) noexcept : engine_(std::exchange(other.engine_, nullptr)) {}
    FlowToken& operator=(FlowToken&& other) noexcept;
    ~FlowToken() { release(); }
    explicit operator bool() const noexcept { return engine_ != nullptr; }
    void release() noexcept;

private:
    friend class LlcEngine;
    explicit FlowToken(LlcEngine* engine) : engine_(engine) {}
    LlcEngine* engine_ = nullptr;
};

class LlcEngine
{
public:
    // Peer requests that wait for the flow token, at most (one more is parked
    // while a flow runs, as Linux's delayed event). A legitimate peer has one
    // flow at a time: a few dozen is plenty.
    static constexpr std::size_t kMaxPendingRequests = 32;

    // The provider and host must outlive the engine; so must the executor.
    LlcEngine(LlcConfig config, LinkProvider& provider, LlcHost& host, Executor& executor);
    // stop().
    ~LlcEngine();
    LlcEngine(const LlcEngine&) = delete;
    LlcEngine& operator=(const LlcEngine&) = delete;

    // What the group's pool registers buffers through; then setPool().
    Registrar& registrar() noexcept { return registrar_; }
    void setPool(BufferPool& pool) noexcept { pool_ = &pool; }
    // No flow, event or timer runs after this returns; every link is cleared
    // (its buffers unregistered). Waits for a running flow to see it.
    void stop();

    // The flows; LinkGroup's header says what each returns and how long it
    // blocks.
    Result<void> start(NewLink first);
    // start() in two steps, for CLC's order (LinkGroup::beginFirstContact): link 0 is
    // attached under `token` (a FirstLink flow; the client's wait for CONFIRM_LINK armed at
    // once), then confirmFirst() runs CONFIRM_LINK under a token of its own.
    Result<void> prepareFirst(const FlowToken& token, NewLink first);
    Result<void> confirmFirst(const std::optional<LinkAddress>& peer);
    Result<void> addLink();
    Result<void> requestAddLink();
    Result<void> deleteLink(unsigned slot);
    void terminate(std::string reason, llc::DeleteReason code, bool orderly);
    // A TEST_LINK on every active link now; one not answered within timeouts.wait goes
    // down (LinkGroup::probeLinks). Blocks at most for one send per link.
    void probeLinks();
    Result<void> breakLink(unsigned slot);

    // The RKEY flows of one connection's RMB, holding `token` (acquire one
    // with acquireFlow(Flow::Rkey, ...)).
    Result<FlowToken> acquireFlow(Flow flow, std::chrono::milliseconds timeout);
    Result<FlowToken> acquireFlow(Flow flow)
    {
        return acquireFlow(flow, config_.timeouts.flowStart);
    }
    // CONFIRM_RKEY: our RMB on every ACTIVE link but `via` (CLC told `via`).
    Result<void> confirmRkey(const FlowToken& token, const BufferDesc& rmb, unsigned via);
    // DELETE_RKEY: the peer forgets our RMB (the whole row).
    Result<void> deleteRkey(const FlowToken& token, const BufferDesc& rmb);

    // Data path: the channel of `slot` if it is ACTIVE.
    std::shared_ptr<LinkChannel> activeChannel(unsigned slot) const;
    // Slots that are ACTIVE, and their link ids.
    struct SlotView {
        bool active = false;
        std::uint8_t linkId = 0;
    };
    std::array<SlotView, kMaxLinks> slots() const;
    std::optional<unsigned> anyActive() const;

    bool terminated() const noexcept { return terminated_.load(); }
    Role role() const noexcept { return config_.role; }
    GroupType type() const;
    std::vector<LinkInfo> links() const;
    unsigned activeLinks() const;
    std::uint8_t linkId(unsigned slot) const;
    LlcStats stats() const;
    RtokenTable& rtokens() noexcept { return rtokens_; }
    const RtokenTable& rtokens() const noexcept { return rtokens_; }
    unsigned maxLinks() const noexcept { return maxLinks_; }
    unsigned maxConns() const noexcept { return maxConns_; }

private:
    friend class FlowToken;
    struct Waiter {
        unsigned slot;
        llc::Type type;
        bool response;
        std::optional<llc::Message> got;
        bool linkDown = false;
    };
    // What the event queue runs: a request from the peer, or (no request) a
    // link down; `epoch` names the attach of `slot` it came from.
    struct Event {
        unsigned slot = 0;
        std::uint64_t epoch = 0;
        std::optional<llc::Message> request;
    };
    enum class ReqAddLink : std::uint8_t { Idle, Waiting, Added, Declined };
    // A link's TEST_LINK answers: the newest request still owed one, and
    // whether its echo task runs; `epoch` names the attach they are for.
    struct Echo {
        std::uint64_t epoch = 0;
        std::optional<llc::Message> owed;
        bool running = false;
    };

    // llc_engine.cpp: links, messages; llc_events.cpp: the event queue.
    Result<void> attach(unsigned slot, NewLink link);
    void clearLink(unsigned slot);
    // timeouts.wait after terminate(), on the event queue: every link cleared once no flow
    // holds the token (none can take it any more), so a terminated group still held holds
    // no QP.
    void clearLinksWhenIdle();
    void onMessage(unsigned slot, std::uint64_t epoch, std::vector<std::byte> bytes);
    void onDown(unsigned slot, std::uint64_t epoch);
    void queueRequest(unsigned slot, std::uint64_t epoch, llc::Message m) SMC_REQUIRES(mutex_);
    void scheduleEvents() SMC_REQUIRES(mutex_);
    void runEvents();
    void releaseFlow();
    // `m` on the wire, with the group's header version.
    std::vector<std::byte> wire(llc::Message m) const;
    Result<void> send(unsigned slot, const llc::Message& m);
    Result<llc::Message> await(Waiter& w, std::chrono::milliseconds timeout);
    Result<llc::Message> exchange(unsigned sendSlot, const llc::Message& m, unsigned waitSlot,
                                  llc::Type type, bool response, std::chrono::milliseconds timeout);
    void handleRequest(unsigned slot, const llc::Message& m);

    // flows/confirm_link.cpp
    llc::ConfirmLink confirmLink(const LinkAddress& local, std::uint8_t linkId) const;
    Result<void> confirmPrepared(FlowToken token, const std::optional<LinkAddress>& peer);
    void adoptLimits(std::uint8_t peerLinks, std::uint8_t peerConns);
    // flows/add_link_server.cpp, flows/add_link_client.cpp, flows/rkey_exchange.cpp
    Result<void> serverAddLink(bool& offered);
    bool clientAddLink(unsigned via, const llc::AddLink& req);
    Result<std::optional<llc::Message>> exchangeRkeys(unsigned via, unsigned newSlot,
                                                      std::uint8_t linkId,
                                                      std::optional<llc::Message> opening);
    llc::AddLinkV2Ext addLinkExt(unsigned via, unsigned newSlot, const Gid& newGid);
    bool saveAddLinkRkeys(unsigned via, unsigned newSlot,
                          const std::optional<llc::AddLinkV2Ext>& ext);
    // The longest message our links carry: an SMC-Rv2 group's ADD_LINK has its rkeys.
    std::size_t maxMessage() const noexcept { return maxLinkMessage(config_.version); }
    std::optional<unsigned> activate(unsigned slot, GroupType newType);
    // flows/delete_link.cpp
    void failover(unsigned slot, bool tellPeer,
                  llc::DeleteReason reason = llc::DeleteReason::LostPath);
    void remoteDeleteLink(unsigned via, const llc::DeleteLink& req);
    // flows/rkey.cpp
    void remoteConfirmRkey(unsigned slot, const llc::Message& m);
    void remoteDeleteRkey(unsigned slot, const llc::Message& m);
    // flows/test_link.cpp
    void testLinks();
    // Active links whose TEST_LINK went unanswered for timeouts.wait go down.
    void expireProbes(Clock::time_point now) SMC_REQUIRES(mutex_);
    // Active links without a TEST_LINK out (only those quiet for timeouts.testLink when
    // `idleOnly`) get one: marked here, their channels returned to send it on after the lock.
    std::vector<std::shared_ptr<LinkChannel>> markProbes(Clock::time_point now, bool idleOnly)
        SMC_REQUIRES(mutex_);
    void echoTestLink(unsigned slot, std::uint64_t epoch, llc::Message m) SMC_REQUIRES(mutex_);
    void sendEchoes(unsigned slot, std::uint64_t epoch);

    const LlcConfig config_;
    std::atomic<unsigned> maxLinks_, maxConns_; // negotiated in CONFIRM_LINK
    LinkProvider& provider_;
    LlcHost& host_;
    Executor& executor_;
    SlotRegistrar registrar_;
    BufferPool* pool_ = nullptr;
    RtokenTable rtokens_;

    mutable Mutex mutex_;
    // Woken on every change a flow or a waiter may wait for.
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
    std::deque<Event> queue_ SMC_GUARDED_BY(mutex_);              // peer requests, in order
    std::deque<Event> downs_ SMC_GUARDED_BY(mutex_);              // links to fail over, first
    std::optional<Event> delayed_ SMC_GUARDED_BY(mutex_);         // one parked while a flow runs
    std::optional<std::string> violation_ SMC_GUARDED_BY(mutex_); // malformed: terminate
    ReqAddLink reqAddLink_ SMC_GUARDED_BY(mutex_) = ReqAddLink::Idle; // a client's request
    bool eventsPosted_ SMC_GUARDED_BY(mutex_) = false; // a runEvents() task waits to run
    std::array<Echo, kMaxLinks> echoes_ SMC_GUARDED_BY(mutex_);
    LlcStats stats_ SMC_GUARDED_BY(mutex_);
    bool stopping_ SMC_GUARDED_BY(mutex_) = false;
    bool firstPrepared_ SMC_GUARDED_BY(mutex_) = false; // prepareFirst() ran, confirm not yet
    // The client's wait for the server's CONFIRM_LINK, armed by prepareFirst(): read and
    // written under mutex_ through waiter_, else only by the first link's flow.
    Waiter firstWaiter_{};
    std::atomic<bool> terminated_{false};

    // Declared last: they go first, before what their tasks use.
    SerialQueue events_;
    // One per link: an echo that waits for a send slot holds up only its link.
    std::array<std::unique_ptr<SerialQueue>, kMaxLinks> echoQueues_;
    std::unique_ptr<PeriodicTimer> testTimer_;
};

} // namespace smc
