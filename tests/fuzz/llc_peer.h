// SPDX-License-Identifier: MIT
// LlcPeer: plays the LLC peer of one live LinkGroup (client or server) from a fuzz input.
#pragma once

#include <algorithm>
#include <array>
#include <chrono>
#include <cstdint>
#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <span>
#include <string>
#include <thread>
#include <type_traits>
#include <utility>
#include <vector>

#include "base/mutex.h"
#include "smc/core/link_group.h"
#include "smc/testing/inproc_fabric.h"
#include "tests/fuzz/peer_input.h"
#include "tests/fuzz/peer_links.h"

namespace smc::fuzz
{

// Known bugs a local run may keep out of its inputs (LLC_PEER_FUZZ_AVOID, a
// comma-separated list of these names) while they block the search. The
// committed harness generates them all by default.
enum Avoid : unsigned {
    kAvoidDupLinkId = 1,     // "dup-link-id": peer link ids 0 or in use
    kAvoidRkeyShift = 2,     // "rkey-shift": v2 DELETE_RKEY with more than 32 rkeys
    kAvoidFlood = 4,         // "flood": bursts of more than 2 messages (Flood, held ones)
    kAvoidUseAfterClose = 8, // "use-after-close": a handle used after close (raw pointers)
};

struct PeerOptions {
    unsigned avoid = 0;
    bool trace = false; // LLC_PEER_FUZZ_TRACE=1: every step, message and answer on stderr
    // How long the group must stay quiet before a step counts as settled
    // (LLC_PEER_FUZZ_QUIET_US): its flows run on their own threads.
    std::chrono::microseconds quiet{1000};

    static PeerOptions fromEnvironment();
};

// Runs one input: builds the group and its peer, plays the steps, checks the
// invariants after each one, then goes quiet, checks that no flow is stuck
// and destroys the group. A violated invariant prints why and traps.
void runPeerInput(std::span<const std::uint8_t> input, const PeerOptions& options);

// One API call at a time, in order, on a thread of its own: the calls block
// for the peer, whom the fuzzer's thread plays meanwhile.
class ApiLane
{
public:
    ApiLane();
    ~ApiLane();
    ApiLane(const ApiLane&) = delete;
    ApiLane& operator=(const ApiLane&) = delete;

    // False (the call is dropped) when 8 calls wait already.
    bool post(std::function<void()> call);
    bool idle() const;
    // Changes whenever a call is posted, starts or ends.
    std::uint64_t progress() const;
    // How long the running call has run (0 if none).
    std::chrono::milliseconds running() const;
    void stop();

private:
    void loop();

    mutable Mutex mutex_;
    ConditionVariable wake_;
    std::deque<std::function<void()>> calls_ SMC_GUARDED_BY(mutex_);
    bool busy_ SMC_GUARDED_BY(mutex_) = false;
    bool stop_ SMC_GUARDED_BY(mutex_) = false;
    Clock::time_point since_ SMC_GUARDED_BY(mutex_){};
    std::uint64_t progress_ SMC_GUARDED_BY(mutex_) = 0;
    std::thread thread_;
};

// Two lanes: calls on the second run beside those on the first.
class ApiLanes
{
public:
    bool post(unsigned lane, std::function<void()> call)
    {
        return lanes_[lane % lanes_.size()].post(std::move(call));
    }
    bool post(std::function<void()> call) { return post(0, std::move(call)); }
    bool idle() const { return lanes_[0].idle() && lanes_[1].idle(); }
    std::uint64_t progress() const { return lanes_[0].progress() + lanes_[1].progress(); }
    std::chrono::milliseconds running() const
    {
        return std::max(lanes_[0].running(), lanes_[1].running());
    }
    void stop()
    {
        for (ApiLane& l : lanes_)
            l.stop();
    }

private:
    std::array<ApiLane, 2> lanes_;
};

class LlcPeer final : private LinkProvider
{
public:
    LlcPeer(std::span<const std::uint8_t> input, const PeerOptions& options);
    ~LlcPeer() override;
    void run();

private:
    // A connection as openConnection hands it out (a pointer, or a shared
    // pointer once the API moves there), and how to pass it back.
    using ConnHandle =
        std::remove_cvref_t<decltype(*std::declval<LinkGroup&>().openConnection(0, 0))>;

    // One link as the peer sees it.
    struct PeerLink {
        std::unique_ptr<InprocChannel> end; // the peer's end
        std::shared_ptr<Tap> tap;           // the group's end
        LinkAddress self, group;
        unsigned device = 0;     // the peer's device it is on
        std::uint8_t linkId = 0; // as the peer knows it
        std::atomic<bool> down{false};
        std::uint64_t sent = 0; // fuzzer thread only
    };
    struct InboxItem {
        unsigned link = 0;
        std::optional<std::vector<std::byte>> bytes; // none: the link went down
    };
    struct Pending {
        unsigned link;
        std::vector<std::byte> bytes;
    };
    // The ADD_LINK the peer takes part in (either side), for ADD_LINK_CONT.
    struct AddFlow {
        bool active = false;
        bool peerServes = false;
        unsigned via = 0, fresh = 0;
        std::uint8_t linkId = 0;
        std::vector<llc::RkeyPair> mine;
        std::size_t sent = 0;
    };

    // llc_peer.cpp: setup, steps, settling, the end.
    void setUp();
    void step();
    void finish();
    void settle(std::chrono::microseconds quiet);
    bool drained();
    std::uint64_t fingerprint();
    bool processInbox();
    void drainLane(std::chrono::milliseconds limit);
    void expectTimeout(std::chrono::milliseconds groupWait);
    void expectReaction();
    std::uint64_t reactionMark();
    void checkLaneStuck();
    // llc_peer_invariants.cpp
    std::optional<std::string> violation();
    std::optional<std::string> registrations();
    void checkInvariants();
    void checkFlowFree();
    std::chrono::milliseconds quietLimit() const;
    [[noreturn]] void fail(const std::string& why);
    void trace(const char* fmt, ...) __attribute__((format(printf, 2, 3)));

    // llc_peer_messages.cpp: what the peer sends.
    void peerStep(Op op);
    std::optional<unsigned> pickLink(std::uint8_t arg);
    PeerLink& link(unsigned index);
    unsigned linkCount();
    void send(unsigned link, const llc::Message& m);
    void sendBytes(unsigned link, std::vector<std::byte> bytes);
    void transmit(unsigned link, const std::vector<std::byte>& bytes);
    void flush(std::vector<Pending>& pending);
    llc::Message canonical(Kind kind, unsigned link);
    std::vector<std::uint8_t> liveLinkIds();
    std::uint8_t freshLinkId();
    std::uint8_t chooseLinkId(unsigned mode, std::uint8_t fuzzed, unsigned via);
    void offerLink(unsigned via, std::uint8_t flags, std::uint8_t linkId);
    std::vector<llc::RkeyPair> peerPairs(std::uint8_t viaId, std::uint8_t newId) const;
    llc::AddLinkCont nextCont();
    // llc_peer_answers.cpp: what the peer answers.
    void onGroupMessage(unsigned link, const llc::Message& m);
    void onRequest(unsigned link, const llc::Message& m);
    void onResponse(unsigned link, const llc::Message& m);
    Answer answer(unsigned link, const llc::Message& proper, const llc::Message& negative,
                  std::chrono::milliseconds groupWait, const std::function<void()>& action = {});
    // llc_peer_api.cpp: the group's API, on the lane.
    void apiStep(Op op, std::uint8_t opcode);
    static std::size_t bufferBytes(std::uint8_t code);
    std::optional<std::uint8_t> apiLinkId(std::uint8_t arg);
    void post(unsigned lane, const char* what, std::function<void()> call);
    void traceResult(const char* what, std::error_code ec, bool contract = true);
    void checkWriteTarget(const Connection* conn, std::error_code ec);

    // LinkProvider: the group's ends of new links.
    Result<NewLink> makeLink(std::span<const Gid> avoid, std::size_t maxMessage) override;
    Result<NewLink> joinLink(const LinkAddress& peer, std::span<const Gid> avoid,
                             std::size_t maxMessage) override;
    unsigned makeLinkLocked(std::span<const Gid> avoid, unsigned peerDevice,
                            std::unique_ptr<LinkChannel>& groupEnd) SMC_REQUIRES(modelMutex_);
    LinkAddress groupAddress(unsigned index, std::span<const Gid> avoid) const;
    std::shared_ptr<Registrar> registrar();

    InputReader in_;
    const PeerOptions options_;
    // The header.
    bool groupServes_ = true;
    unsigned groupDevices_ = 2, peerDevices_ = 2;
    bool muteTestLink_ = false, noFirstConfirm_ = false;
    std::uint8_t peerMaxLinks_ = 2, peerMaxConns_ = 255, firstLinkId_ = 1;
    LinkGroupConfig config_;
    const Clock::time_point born_ = Clock::now();

    // Declared before the links and the group, whose threads use them.
    PeerRmbs rmbs_;
    InprocRegistrar keys_; // the group's registrations (its rkeys)
    Mutex inboxMutex_;
    ConditionVariable inboxChanged_;
    std::deque<InboxItem> inbox_ SMC_GUARDED_BY(inboxMutex_);

    Mutex modelMutex_;
    std::vector<std::unique_ptr<PeerLink>> links_ SMC_GUARDED_BY(modelMutex_);
    // The group's ends of links the peer offered (ADD_LINK), by the peer's qpn.
    std::map<std::uint32_t, std::pair<unsigned, std::unique_ptr<LinkChannel>>>
        parked_ SMC_GUARDED_BY(modelMutex_);

    // The fuzzer thread's.
    AddFlow addFlow_;
    std::uint8_t lastLinkId_ = 0;
    bool holding_ = false, repeating_ = false, quiet_ = false, traceMuted_ = false;
    bool finalChecks_ = false; // the end: the flow token is free
    std::vector<Pending> held_, late_;
    Clock::time_point quietUntil_{};
    bool expectReaction_ = false; // the group owes a reaction to a message...
    std::uint64_t mark_ = 0;      // ... since reactionMark() said this
    Clock::time_point reactionSince_{};
    Clock::time_point quietSince_{};       // the peer went quiet
    Clock::time_point lastGroupRequest_{}; // the group's last message but TEST_LINK
    std::atomic<unsigned> steps_{0};       // read by the API thread's traces
    std::atomic<unsigned> shared_{0};      // bit i: the group knows peer RMB i
    // What makes a write's target unpredictable: the peer deleted RMB i (bit
    // i), or sent rkeys that may name another RMB's row (fuzzed, mutated, raw).
    std::atomic<unsigned> deletedRmbs_{0};
    std::atomic<bool> peerLied_{false};
    std::atomic<int> terminations_{0};

    // The group's RMB rkeys the peer was told, per link id (CLC, CONFIRM_RKEY,
    // ADD_LINK_CONT): the API threads and the fuzzer's add to it.
    Mutex learntMutex_;
    std::map<std::uint8_t, std::set<std::uint32_t>> learnt_ SMC_GUARDED_BY(learntMutex_);

    // The API lanes' (and the end's, once they are drained).
    Mutex apiMutex_;
    std::vector<ConnHandle> conns_ SMC_GUARDED_BY(apiMutex_);
    std::vector<ConnHandle> closed_ SMC_GUARDED_BY(apiMutex_);
    std::vector<LinkGroup::Handshake> handshakes_ SMC_GUARDED_BY(apiMutex_);
    // Completed with a proper rtoken: which peer RMB; and every completed one.
    std::map<const Connection*, unsigned> peerRmbOf_ SMC_GUARDED_BY(apiMutex_);
    std::set<const Connection*> completed_ SMC_GUARDED_BY(apiMutex_);
    std::array<unsigned, kPeerRmbs> rmbUses_ SMC_GUARDED_BY(apiMutex_){}; // handshakes per RMB

    std::unique_ptr<LinkGroup> group_;
    ApiLanes lane_; // goes first: its calls use the group
};

} // namespace smc::fuzz
