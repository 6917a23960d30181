// SPDX-License-Identifier: MIT
// LinkGroup: up to 3 links to one peer, their connections and buffers (a facade over its parts).
#pragma once

#include <array>
#include <atomic>
#include <chrono>
#include <functional>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "base/executor.h"
#include "base/wire_ids.h"
#include "pool/buffer_pool.h"
#include "smc/core/connection.h"
#include "smc/core/connection_table.h"
#include "smc/llc/llc_engine.h"
#include "smc/llc/rtoken_table.h"
#include "smc/transport/link_provider.h"

namespace smc
{

struct LinkGroupConfig {
    Role role = Role::Client;
    SystemId peer{};
    unsigned maxConns = 255; // Linux 16..255
    unsigned maxLinks = 2;   // symmetric links wanted (Linux 1..2)
    // 2: an SMC-Rv2 group: its LLC messages carry v2 headers, its ADD_LINKs the rkeys (no
    // ADD_LINK_CONT), and its links take messages of up to 8 KiB (kLongMessages).
    std::uint8_t llcVersion = 1;
    LlcTimeouts timeouts;
    // A group without connections for this long is freed (DELETE_LINK ALL,
    // orderly). 0: Linux's delay for the role, 600 s for a server and 610 s
    // for a client, so the server ends a shared idle group first.
    std::chrono::milliseconds idleFree{0};
    PoolConfig pool; // tech must be SmcR
    // The threads the group's flows and timers run on; null: Executor::shared().
    Executor* executor = nullptr;
};

struct LinkGroupStats : LlcStats {
    // CDC messages dropped before any connection saw them: shorter than 26
    // bytes or a length byte other than 44 (malformed), or for an alert
    // token no open connection has (unknownToken; also a late one for a
    // connection just closed). A peer cannot make the group queue or fail.
    std::uint64_t cdcMalformed = 0, cdcUnknownToken = 0;
    std::uint64_t cdcOut = 0; // CDCs the link took (sendCdc, writeSndbufThenCdc)
};

// Errors: besides the codes named per function, every call that waits for
// the peer may return std::errc::timed_out (no answer within the LLC
// timeouts), not_connected (the link or the group is gone meanwhile) and
// connection_refused (the peer declined). Nothing here throws.
class LinkGroup final : private LlcHost
{
public:
    // Told when the group is gone (last link lost, peer said DELETE_LINK ALL,
    // protocol violation, idle); the connections are dead by then: their
    // buffers are back in the pool, write() and closeConnection() say
    // not_connected.
    // Runs on the thread that terminated the group (one of the executor's,
    // or the caller of terminate()): it must not destroy the group.
    using TerminationHandler = std::function<void(std::string reason)>;

    // The provider must outlive the group. Errors: invalid_argument (limits
    // outside Linux's ranges, an LLC version other than 1 or 2, or a pool that is not
    // SMC-R), the pool's own.
    // Does not block.
    static Result<std::unique_ptr<LinkGroup>> create(LinkGroupConfig config,
                                                     LinkProvider& provider);
    // Waits for a running flow to give up (at once: it is told to stop).
    // Connections the application still holds end (state Ended); the group
    // must not be called any more, not even with them.
    ~LinkGroup();

    // The first link (CONFIRM_LINK): the server asks, the client answers.
    // Then the server tries to add a second link, if maxLinks allows (its
    // failure is not start's). Errors: invalid_argument (a NewLink without
    // channel or registrar), protocol_error (client: the server's
    // CONFIRM_LINK names link id 0), the pool's (registering its buffers on
    // the link), the channel's. Blocks for the flow token (up to flowStart)
    // and for the peer up to timeouts.firstLink (client) or wait (server),
    // plus addLink's waits.
    Result<void> start(NewLink first);
    // Server: ADD_LINK flow for one more link (ADD_LINK_CONT rkey exchange).
    // Errors: WrongRole (a client), NoSuchLink (no active link to run it on),
    // NoLinkRoom (the group has its links), connection_refused (the peer
    // rejected the ADD_LINK), protocol_error (an ADD_LINK_CONT for another
    // link, or with a wrong remaining count), the provider's, the pool's
    // (registering its buffers on the new link), the channel's (connect,
    // send). Blocks for the flow token (up to flowStart) and each answer
    // (up to wait).
    Result<void> addLink();
    // Client: ask the server for one more link (REQ_ADD_LINK, sent in its v2
    // form with one candidate GID, 44 bytes); returns once the link is up,
    // or connection_refused when the server declined or the add failed.
    // Errors: WrongRole (a server), NoLinkRoom (at max links),
    // operation_in_progress (another request waits), timed_out (no outcome
    // within flowStart, also when the group ends meanwhile), the channel's.
    // Blocks for the flow token (up to flowStart), then up to flowStart for
    // the outcome.
    Result<void> requestAddLink();
    // Orderly DELETE_LINK of one link; its connections move to another. The
    // last link: the group terminates (DELETE_LINK ALL), and that succeeds.
    // Errors: InvalidSlot, NoSuchLink (no active link there). Blocks for the
    // flow token and up to timeouts.wait for the peer's answer (none is no
    // error).
    Result<void> deleteLink(unsigned slot);
    // Tear the group down: DELETE_LINK ALL to the peer, buffers released.
    // Its links (QPs, buffer registrations) are cleared on the group's
    // threads timeouts.wait later (the peer's time to take the DELETE_LINK),
    // once no flow runs any more, so a terminated group that is still held
    // keeps none. Blocks at most for one send.
    void terminate(std::string reason,
                   llc::DeleteReason code = llc::DeleteReason::ProgramTerminated,
                   bool orderly = true);
    // Asks the peer over every active link now (TEST_LINK); a link it does not answer within
    // timeouts.wait goes down, and the group with its last link. For a claim about the group
    // that only the peer can prove. Blocks at most for one send per link.
    void probeLinks();

    // A connection's buffers and link (the least loaded, or `linkId`: a client
    // rides the link the server chose), without the peer's RMB: see Handshake.
    // The handle stays valid as long as it is held; after close (or the
    // group's end) calls with it fail cleanly. Errors: no_buffer_space (max
    // conns or rtoken rows reached), not_connected (no such link, the group
    // ended or is idle-freed), the pool's (InvalidSize, LimitReached,
    // OutOfMemory, ...). Does not block beyond buffer registration.
    Result<ConnectionPtr> openConnection(std::size_t rmbBytes, std::size_t sndbufBytes,
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
        // Ours, for CLC: the connection, the link CLC names (after announce(), the one it
        // was on then) and its RMB's rtoken there.
        const ConnectionPtr& connection() const noexcept { return conn_; }
        unsigned link() const noexcept;
        RtokenTable::Rtoken rtoken() const noexcept;
        // Server, joining a group (Linux's order): tells the peer our RMB on every other
        // link now (CONFIRM_RKEY) and lets go of the flow token, so the client's CLC round
        // trip holds up no failover and no close. complete() takes the token again, and
        // fails with not_connected if failover moved the connection off link() meanwhile.
        // On error the connection is closed. Errors: HandshakeDone (after complete,
        // abandon or announce), not_connected, connection_refused, timed_out (the peer's
        // CONFIRM_RKEY answer), the channel's. Blocks for that answer (only with more than
        // one link).
        Result<void> announce();
        // The peer's RMB as CLC told it (its rtoken on our connection's link
        // and its size: writes beyond it are refused); then CONFIRM_RKEY
        // tells the peer our RMB on every other link. On error the
        // connection is closed. Errors: HandshakeDone (called twice, or after
        // abandon), invalid_argument (rkey 0 or size 0), no_buffer_space
        // (rtoken table full), not_connected (the group ended),
        // connection_refused (the peer's CONFIRM_RKEY answer is negative),
        // timed_out, the channel's. Blocks for the peer's CONFIRM_RKEY answer
        // (only with more than one link), after announce() for the flow token (up to
        // flowStart) instead.
        Result<void> complete(RtokenTable::Rtoken peerRmb, std::size_t peerRmbBytes);

    private:
        friend class LinkGroup;
        Handshake(LinkGroup* group, ConnectionPtr conn, FlowToken token)
            : group_(group), conn_(std::move(conn)), token_(std::move(token))
        {
        }
        void abandon() noexcept;
        LinkGroup* group_ = nullptr;
        ConnectionPtr conn_;
        FlowToken token_;
        std::optional<unsigned> announced_; // the link announce() named in CLC
    };
    // Errors: openConnection's, and the flow token's (timed_out after
    // flowStart, not_connected). Blocks for the flow token.
    Result<Handshake> beginHandshake(std::size_t rmbBytes, std::size_t sndbufBytes,
                                     std::optional<std::uint8_t> linkId = std::nullopt);
    // First contact in CLC's order, start() in two steps: the connection's RMB must be
    // registered on the new link for ACCEPT/CONFIRM (its rtoken) before CONFIRM_LINK runs.
    // beginFirstContact: `first` takes slot 0 (ACTIVATING, the group's buffers registered on
    // it) and the group's first connection is opened on it; the Handshake's complete()
    // records the peer's RMB from CLC (no CONFIRM_RKEY: there is no other link). Errors:
    // invalid_argument (a NewLink without channel or registrar, or a group that had a first
    // link), the flow token's, openConnection's (the link stays prepared: terminate()). Does
    // not block beyond the flow token and buffer registration.
    Result<Handshake> beginFirstContact(NewLink first, std::size_t rmbBytes,
                                        std::size_t sndbufBytes);
    // Then CONFIRM_LINK on it, as start() does (the server connects the link to `peer`, the
    // client's address from CLC, first; the client ignores it), and for a server the ADD_LINK
    // (its failure is not this one's). On error the link is cleared: terminate() the group.
    // Errors: start()'s, invalid_argument (no prepared link). Blocks as start() does.
    Result<void> confirmFirstLink(const std::optional<LinkAddress>& peer);

    // DELETE_RKEY to the peer, buffers back to the pool (even when the peer
    // could not be told: the error says so). Errors: UnknownConnection
    // (another group's), Closed (closed before), not_connected (the group had
    // ended it, or ends meanwhile), timed_out (the flow token or the peer's
    // answer), the channel's. Waits for writes in flight on it, then for the
    // flow token and the peer's answer.
    Result<void> closeConnection(Connection& conn);
    // The data path: copy `data` into the connection's sndbuf at `offset`
    // and RDMA-WRITE it to the same offset of the peer's RMB over the link
    // the connection rides now; an empty `data` does nothing once the
    // arguments are checked. Nothing goes on the wire unless it fits the
    // peer's RMB. A link that just failed gives not_connected: retry once
    // failover has moved the connection. Errors: UnknownConnection, Closed,
    // SndbufRange, PeerRmbUnknown (no handshake yet), PeerRmbRange,
    // PeerRmbGone (the peer deleted its RMB), not_connected (group ended,
    // or the link went), the channel's. Blocks until the write completed
    // (RDMA) or landed (in process).
    Result<void> write(const Connection& conn, std::size_t offset, std::span<const std::byte> data);
    // A link by its slot and id: a sender that posts without waiting names the link its
    // earlier posts went on, so that none goes on another link before it knows which of them
    // landed (failover changes Connection::link() at any time), nor on a later link in the
    // same slot. linkOf(): the one the connection rides now (id 0: none).
    struct LinkRef {
        unsigned slot = 0;
        std::uint8_t id = 0;
    };
    LinkRef linkOf(const Connection& conn) const;
    // write() in two steps, for a sender that gathers bytes before it writes them:
    // fillSndbuf copies `data` into the connection's sndbuf at `offset` (errors:
    // UnknownConnection, Closed, not_connected (ended), SndbufRange; does not block), and
    // writeSndbuf RDMA-WRITEs `length` bytes of the sndbuf from `sndbufOffset` to
    // `peerOffset` of the peer's RMB on link `via` (errors and blocking as write();
    // not_connected also when that link is gone).
    Result<void> fillSndbuf(const Connection& conn, std::size_t offset,
                            std::span<const std::byte> data);
    Result<void> writeSndbuf(const Connection& conn, LinkRef via, std::size_t sndbufOffset,
                             std::size_t peerOffset, std::size_t length);
    // writeSndbuf() for each piece and sendCdc() at once, on link `via`, none waited for: the CDC
    // is posted right behind the WRITEs (RC delivers it after their bytes), and `landed` is told
    // its completion, which comes after theirs (true: the bytes and the CDC landed). The sndbuf's
    // bytes must stay as they are until then. At most kMaxSndbufPieces pieces, all checked before
    // anything is posted. Errors: theirs (invalid_argument: too many pieces, or the CDC's); then
    // `landed` is never told, and the caller cannot tell what went: some WRITEs may have. `landed`
    // runs once otherwise, possibly before this returns, on the thread that sees the completion; it
    // must not block. Blocks only for room to post.
    struct SndbufPiece {
        std::size_t sndbufOffset = 0;
        std::size_t peerOffset = 0;
        std::size_t length = 0;
    };
    static constexpr std::size_t kMaxSndbufPieces = 3;
    Result<void> writeSndbufThenCdc(const Connection& conn, LinkRef via,
                                    std::span<const SndbufPiece> pieces,
                                    std::span<const std::byte> cdc, LinkChannel::Landed landed);
    // Copies into.size() bytes from `offset` of the connection's own RMB
    // (what the peer wrote there), while the RMB is surely still ours: the
    // group's end waits for the copy. Errors: UnknownConnection, Closed,
    // not_connected (ended), invalid_argument (beyond the RMB). Does not block.
    Result<void> readRmb(const Connection& conn, std::size_t offset, std::span<std::byte> into);
    // A CDC message (SMC-R, 44 bytes, built by the caller: core does not
    // look inside) to the peer, on the link the connection rides now (or `via`). Sent
    // after a write() returned, it reaches the peer after the written bytes
    // (the write completed first). Errors: UnknownConnection, Closed,
    // invalid_argument (not 44 bytes or byte 0 not 0xFE), not_connected
    // (group ended, or the link went: retry once `moved` was told), the
    // channel's. Blocks for a send slot (RDMA; in process it does not).
    Result<void> sendCdc(const Connection& conn, std::span<const std::byte> message,
                         std::optional<LinkRef> via = std::nullopt);
    // The handlers for one connection's CDC messages, failover moves and end
    // (see ConnectionEvents; empty ones: nothing is told). Replacing them,
    // also with {}, waits for a handler that runs now, so once this returns
    // the old ones are never called again; call it without holding a lock a
    // handler takes. Errors: UnknownConnection, Closed or not_connected (no
    // longer open; clearing with {} still succeeds). Blocks only for a
    // running handler. The two newest CDCs that came while no cdc handler was
    // set (older ones are dropped) go to the new one from here, oldest first,
    // on the caller's thread: the peer may send before this side is ready,
    // CDCs are cumulative, and a failover validation keeps the one before it.
    Result<void> setConnectionEvents(const Connection& conn, ConnectionEvents events);
    // Break a link as a failing device would (tests, demos): failover follows.
    // Errors: NoSuchLink. Does not block.
    Result<void> breakLink(unsigned slot);

    // Observability: none of these blocks beyond a short lock.
    void onTerminated(TerminationHandler handler);
    bool terminated() const noexcept { return llc_->terminated(); }
    Role role() const noexcept { return config_.role; }
    std::uint8_t llcVersion() const noexcept { return config_.llcVersion; }
    GroupType type() const { return llc_->type(); }
    std::vector<LinkInfo> links() const;
    unsigned activeLinks() const { return llc_->activeLinks(); }
    std::uint8_t linkId(unsigned slot) const { return llc_->linkId(slot); } // 0: none there
    std::vector<ConnectionPtr> connections() const { return conns_.list(); }
    unsigned connectionCount() const { return static_cast<unsigned>(conns_.size()); }
    bool hasRoom() const; // another connection fits (max conns, rtoken rows)
    const RtokenTable& rtokens() const noexcept { return llc_->rtokens(); }
    BufferPool& pool() noexcept { return *pool_; }
    LinkGroupStats stats() const;
    const SystemId& peer() const noexcept { return config_.peer; }
    Executor& executor() const noexcept { return executor_; } // its events' and timers'
    // The limits both sides agreed on in CONFIRM_LINK (the configured ones
    // before the first link).
    unsigned maxLinks() const noexcept { return llc_->maxLinks(); }
    unsigned maxConns() const noexcept { return llc_->maxConns(); }

private:
    LinkGroup(LinkGroupConfig config, LinkProvider& provider);
    // A connection's RMB and sndbuf from the pool, on the link `pick` chooses;
    // on error the buffers go back. Errors: the pool's, ConnectionTable::open's.
    Result<ConnectionPtr> openWithBuffers(std::size_t rmbBytes, std::size_t sndbufBytes,
                                          const ConnectionTable::PickLink& pick);

    // LlcHost
    std::vector<llc::RkeyPair> rmbRkeys(unsigned from, unsigned to) override;
    void moveConnections(unsigned from, unsigned to) override;
    void groupEnded(std::string reason) override;
    void cdcReceived(unsigned slot, std::span<const std::byte> message) override;

    void armIdleTimer();
    // The data path's checks, with conn.use_ held and the connection Open: a piece's error
    // (SndbufRange, PeerRmbUnknown, PeerRmbRange), and where the connection's WRITEs go now
    // (not_connected: no active link or its rtoken not known there yet; PeerRmbGone).
    struct WriteTarget {
        std::shared_ptr<LinkChannel> channel;
        std::uint64_t vaddr = 0; // the peer RMB's, on that link
        std::uint32_t rkey = 0;
        std::uint32_t lkey = 0; // our sndbuf's, on that link
    };
    static std::error_code pieceError(const Connection& conn, const SndbufPiece& piece)
        SMC_REQUIRES_SHARED(conn.use_);
    // The channel of link `via` if it is still that link and active (id 0 names none).
    std::shared_ptr<LinkChannel> channelOf(LinkRef via) const;
    Result<WriteTarget> writeTarget(const Connection& conn, LinkRef via)
        SMC_REQUIRES_SHARED(conn.use_);
    // Open -> `to` (Closed or Ended), after the writes in flight on it. The
    // state it had: if not Open, its buffers are someone else's to release.
    static Connection::State endConnection(Connection& conn, Connection::State to);

    LinkGroupConfig config_;
    Executor& executor_;
    ConnectionTable conns_;
    std::unique_ptr<LlcEngine> llc_; // its registrar outlives the pool
    std::unique_ptr<BufferPool> pool_;
    Mutex handlerMutex_;
    TerminationHandler onTerminated_ SMC_GUARDED_BY(handlerMutex_);
    std::atomic<std::uint64_t> cdcMalformed_{0}, cdcUnknownToken_{0}, cdcOut_{0};
    SerialQueue idle_; // the idle timer's check; closed first
};

} // namespace smc
