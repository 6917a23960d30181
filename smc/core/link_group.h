// SPDX-License-Identifier: MIT
// LinkGroup: up to 3 links to one peer, their connections and buffers, and the LLC flows.
#pragma once

#include <array>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <span>
#include <string>
#include <thread>
#include <vector>

#include "pool/buffer_pool.h"
#include "smc/llc/llc_messages.h"
#include "smc/llc/rtoken_table.h"
#include "smc/transport/link_provider.h"

namespace smc
{

enum class Role : std::uint8_t { Client, Server };
enum class LinkState : std::uint8_t { Unused, Inactive, Activating, Active };
enum class GroupType : std::uint8_t { None, Single, Symmetric, AsymmetricLocal, AsymmetricPeer };
const char* toString(LinkState state) noexcept;
const char* toString(GroupType type) noexcept;

using SystemId = std::array<std::uint8_t, 8>;

// Linux's LLC timers (llc.h), configurable.
struct LlcTimeouts {
    std::chrono::milliseconds firstLink{5000}; // CONFIRM_LINK of a new link
    std::chrono::milliseconds wait{2000};      // every other LLC wait
    std::chrono::milliseconds flowStart{20000};
    std::chrono::milliseconds testLink{30000}; // TEST_LINK idle interval; 0 = off
};

struct LinkGroupConfig {
    Role role = Role::Client;
    SystemId peer{};
    unsigned maxConns = 255; // Linux 16..255
    unsigned maxLinks = 2;   // symmetric links wanted (Linux 1..2)
    LlcTimeouts timeouts;
    // A group without connections for this long is freed (DELETE_LINK ALL,
    // orderly). 0: Linux's delay for the role, 600 s for a server and 610 s
    // for a client, so the server ends a shared idle group first.
    std::chrono::milliseconds idleFree{0};
    PoolConfig pool; // tech must be SmcR
};

struct Connection {
    std::uint32_t token = 0; // alert token, unique in the group
    BufferRef rmb;
    BufferRef sndbuf;
    unsigned link = 0;               // slot of the link it rides
    std::optional<unsigned> peerRmb; // row in the rtoken table
};

struct LinkInfo {
    unsigned slot = 0;
    std::uint8_t linkId = 0;
    LinkState state = LinkState::Unused;
    unsigned connections = 0;
    LinkAddress local, peer; // the first link's peer PSN is CLC's, not known here
};

struct LinkGroupStats {
    std::uint64_t messagesIn = 0, messagesOut = 0, malformed = 0, dropped = 0, delayed = 0;
    std::uint64_t failovers = 0;
};

class LinkGroup
{
public:
    // Told when the group is gone (last link lost, peer said DELETE_LINK ALL,
    // protocol violation, idle); the connections are dead by then: their
    // buffers are back in the pool, closeConnection() says not_connected.
    // Runs on one of the group's threads: it must not destroy the group.
    using TerminationHandler = std::function<void(std::string reason)>;

    // The provider must outlive the group.
    static Result<std::unique_ptr<LinkGroup>> create(LinkGroupConfig config,
                                                     LinkProvider& provider);
    ~LinkGroup();

    // The first link (CONFIRM_LINK): the server asks, the client answers.
    // Then the server tries to add a second link, if maxLinks allows.
    Result<void> start(NewLink first);
    // Server: ADD_LINK flow for one more link (ADD_LINK_CONT rkey exchange).
    Result<void> addLink();
    // Client: ask the server for one more link (REQ_ADD_LINK, sent in its v2
    // form with one candidate GID, 44 bytes); returns once the link is up,
    // or connection_refused when the server declined or the add failed.
    Result<void> requestAddLink();
    // Orderly DELETE_LINK of one link; its connections move to another.
    Result<void> deleteLink(unsigned slot);
    // Tear the group down: DELETE_LINK ALL to the peer, buffers released.
    void terminate(std::string reason,
                   llc::DeleteReason code = llc::DeleteReason::ProgramTerminated,
                   bool orderly = true);

    // A connection's buffers and link (the least loaded, or `linkId`: a client
    // rides the link the server chose), without the peer's RMB: see Handshake.
    Result<Connection*> openConnection(std::size_t rmbBytes, std::size_t sndbufBytes,
                                       std::optional<std::uint8_t> linkId = std::nullopt);

    // One connection's share of the CLC handshake. From begin to complete()
    // no link comes or goes in this group, so the rtoken the peer sends in
    // CLC stays valid for the link it names. Handshakes of one group run one
    // at a time, and link changes wait for them: Linux serialises every
    // SMC-R handshake behind its global LGR-pending mutexes and registers
    // and confirms rkeys under llc_conf_mutex. Not completed: the connection
    // is closed when the handshake goes.
    class Handshake
    {
    public:
        Handshake(Handshake&& other) noexcept { *this = std::move(other); }
        Handshake& operator=(Handshake&& other) noexcept;
        ~Handshake() { abandon(); }
        // Ours, for CLC: the connection, its link and its RMB's rtoken there.
        Connection* connection() const noexcept { return conn_; }
        RtokenTable::Rtoken rtoken() const noexcept;
        // The peer's RMB as CLC told it (on our connection's link); then
        // CONFIRM_RKEY tells the peer our RMB on every other link. On error
        // the connection is closed.
        Result<void> complete(RtokenTable::Rtoken peerRmb);

    private:
        friend class LinkGroup;
        Handshake(LinkGroup* group, Connection* conn) : group_(group), conn_(conn) {}
        void abandon() noexcept;
        LinkGroup* group_ = nullptr;
        Connection* conn_ = nullptr;
    };
    Result<Handshake> beginHandshake(std::size_t rmbBytes, std::size_t sndbufBytes,
                                     std::optional<std::uint8_t> linkId = std::nullopt);
    // DELETE_RKEY to the peer, buffers back to the pool.
    Result<void> closeConnection(Connection& conn);
    // The data path: copy `data` into the connection's sndbuf at `offset`
    // and RDMA-WRITE it to the same offset of the peer's RMB over the link
    // the connection rides now. A link that just failed gives not_connected:
    // retry once failover has moved the connection.
    Result<void> write(const Connection& conn, std::size_t offset, std::span<const std::byte> data);
    // Break a link as a failing device would (tests, demos): failover follows.
    Result<void> breakLink(unsigned slot);

    void onTerminated(TerminationHandler handler);
    bool terminated() const noexcept { return terminated_.load(); }
    Role role() const noexcept { return config_.role; }
    GroupType type() const;
    std::vector<LinkInfo> links() const;
    unsigned activeLinks() const;
    std::uint8_t linkId(unsigned slot) const; // 0: no link in that slot
    std::vector<const Connection*> connections() const;
    unsigned connectionCount() const;
    bool hasRoom() const; // another connection fits (max conns, rtoken rows)
    const RtokenTable& rtokens() const noexcept { return rtokens_; }
    BufferPool& pool() noexcept { return *pool_; }
    LinkGroupStats stats() const;
    const SystemId& peer() const noexcept { return config_.peer; }
    // The limits both sides agreed on in CONFIRM_LINK (the configured ones
    // before the first link).
    unsigned maxLinks() const noexcept { return maxLinks_; }
    unsigned maxConns() const noexcept { return maxConns_; }

private:
    // The pool registers a buffer on slot s through link s's own registrar.
    class SlotRegistrar final : public Registrar
    {
    public:
        void set(unsigned slot, Registrar* r) noexcept { slots_[slot].store(r); }
        std::error_code registerBuffer(BufferDesc& desc, unsigned link) override;
        void unregisterBuffer(BufferDesc& desc, unsigned link) noexcept override;
        std::error_code registerBuffers(std::span<BufferDesc* const> descs, unsigned link) override;

    private:
        std::array<std::atomic<Registrar*>, kMaxLinks> slots_{};
    };

    struct Link {
        LinkState state = LinkState::Unused;
        std::uint8_t linkId = 0;
        // Shared so the data path can write without holding the group lock.
        std::shared_ptr<LinkChannel> channel;
        std::shared_ptr<Registrar> registrar;
        LinkAddress local, peer;
        bool asymmetric = false; // the group's asymmetric link (asymKind_)
        // Which attach of this slot a callback or a down belongs to: a slot
        // is reused, and its old channel may still report.
        std::uint64_t epoch = 0;
        unsigned connections = 0;
        std::chrono::steady_clock::time_point lastRx{};
        std::atomic<bool> testPending{false};
    };
    // One LLC flow at a time (Linux llc_flow_lcl/rmt, simplified: one token).
    enum class Flow : std::uint8_t { None, AddLink, DeleteLink, Rkey, FirstLink };
    struct Waiter {
        unsigned slot;
        llc::Type type;
        bool response;
        std::optional<llc::Message> got;
        bool linkDown = false;
    };

    LinkGroup(LinkGroupConfig config, LinkProvider& provider);

    Result<void> attach(unsigned slot, NewLink link);
    void onMessage(unsigned slot, std::uint64_t epoch, std::vector<std::byte> bytes);
    void onDown(unsigned slot, std::uint64_t epoch);
    Result<void> send(unsigned slot, const llc::Message& m);
    void arm(Waiter& w);
    Result<llc::Message> await(Waiter& w, std::chrono::milliseconds timeout);
    Result<llc::Message> exchange(unsigned sendSlot, const llc::Message& m, unsigned waitSlot,
                                  llc::Type type, bool response, std::chrono::milliseconds timeout);
    bool acquireFlow(Flow flow, std::chrono::milliseconds timeout);
    void releaseFlow();

    void worker();
    void handleRequest(unsigned slot, const llc::Message& m);
    bool clientAddLink(unsigned slot, const llc::AddLink& req); // true: link up
    Result<void> serverAddLink(bool& offered);
    void remoteDeleteLink(unsigned slot, const llc::DeleteLink& req);
    void failover(unsigned slot, bool tellPeer,
                  llc::DeleteReason reason = llc::DeleteReason::LostPath);
    void clearLink(unsigned slot);
    std::optional<unsigned> survivor(unsigned excluding) const;
    std::optional<unsigned> altSlot(GroupType newType) const;
    unsigned activeLocked() const; // mutex_ held
    std::optional<unsigned> activate(unsigned slot, GroupType newType);
    std::optional<unsigned> slotOf(std::uint8_t linkId) const;
    std::vector<llc::RkeyPair> ownRkeys(unsigned from, unsigned to) const;
    Result<void> confirmRkey(const Connection& conn); // holding the flow
    void adoptLimits(std::uint8_t peerLinks, std::uint8_t peerConns);
    static bool inSequence(const llc::AddLinkCont& cont, bool& first, std::size_t& left);
    std::pair<std::uint8_t, std::uint8_t> limitsForWire() const;
    void setTypeLocked();
    void keepalive();

    LinkGroupConfig config_;
    std::atomic<unsigned> maxLinks_, maxConns_; // negotiated
    LinkProvider& provider_;
    SlotRegistrar registrar_; // outlives the pool
    std::unique_ptr<BufferPool> pool_;
    RtokenTable rtokens_;

    mutable std::mutex mutex_; // links_, connections_, waiter_, flow_, queue_
    std::condition_variable changed_;
    std::array<Link, kMaxLinks> links_;
    std::map<std::uint32_t, std::unique_ptr<Connection>> connections_;
    std::map<std::uint32_t, std::unique_ptr<Connection>> closed_; // ended by terminate()
    std::uint32_t nextToken_ = 1;
    std::uint8_t nextLinkId_ = 0;
    GroupType type_ = GroupType::None;
    GroupType asymKind_ = GroupType::None; // what an asymmetric link makes the group
    Flow flow_ = Flow::None;
    Waiter* waiter_ = nullptr;
    // What the worker runs: a request from the peer, or (no request) a link
    // down; `epoch` names the attach of `slot` it came from.
    struct Event {
        unsigned slot = 0;
        std::uint64_t epoch = 0;
        std::optional<llc::Message> request;
    };
    std::deque<Event> queue_; // requests for the worker
    std::deque<Event> downs_; // links to fail over
    std::uint64_t epochs_ = 0;
    std::optional<Event> delayed_;
    std::optional<std::string> violation_; // a malformed message: terminate
    std::optional<std::chrono::steady_clock::time_point> idleSince_; // no connections since
    bool freeing_ = false; // idle timer fired: no new connections
    enum class ReqAddLink : std::uint8_t { Idle, Waiting, Added, Declined };
    ReqAddLink reqAddLink_ = ReqAddLink::Idle; // a client's requestAddLink()
    LinkGroupStats stats_;
    TerminationHandler onTerminated_;
    std::atomic<bool> terminated_{false};
    bool stopping_ = false;
    std::thread worker_;
    std::thread keepalive_;
};

} // namespace smc
