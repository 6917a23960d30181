// SPDX-License-Identifier: MIT
// LinkGroup: its parts put together (engine, pool, connections), lifetime, the idle timer.
#include "smc/core/link_group.h"

#include <algorithm>
#include <cstring>
#include <utility>

#include "base/bytes.h"
#include "smc/cdc/cdc_messages.h"
#include "smc/core/conn_errors.h"

namespace smc
{

namespace
{
using namespace std::chrono_literals;

LlcConfig llcConfig(const LinkGroupConfig& c)
{
    return {c.role, c.llcVersion, c.maxLinks, c.maxConns, c.timeouts};
}

// What a call on a connection that is no longer Open says: Closed after
// closeConnection(), not_connected once the group ended it.
std::error_code stateError(Connection::State state)
{
    return state == Connection::State::Closed ? make_error_code(ConnErrc::Closed)
                                              : std::make_error_code(std::errc::not_connected);
}
} // namespace

LinkGroup::LinkGroup(LinkGroupConfig config, LinkProvider& provider)
    : config_(std::move(config)),
      executor_(config_.executor ? *config_.executor : Executor::shared()),
      llc_(std::make_unique<LlcEngine>(llcConfig(config_), provider, static_cast<LlcHost&>(*this),
                                       executor_)),
      idle_(executor_, SerialQueue::Kind::Blocking)
{
}

Result<std::unique_ptr<LinkGroup>> LinkGroup::create(LinkGroupConfig config, LinkProvider& provider)
{
    if (config.maxConns < 16 || config.maxConns > 255 || config.maxLinks < 1 ||
        config.maxLinks > 2 || config.pool.tech != Tech::SmcR || config.llcVersion < 1 ||
        config.llcVersion > 2)
        return std::make_error_code(std::errc::invalid_argument);
    std::unique_ptr<LinkGroup> g(new LinkGroup(std::move(config), provider));
    Result<std::unique_ptr<BufferPool>> pool =
        BufferPool::create(g->config_.pool, g->llc_->registrar());
    if (!pool)
        return pool.error();
    g->pool_ = std::move(*pool);
    g->llc_->setPool(*g->pool_);
    return g;
}

LinkGroup::~LinkGroup()
{
    idle_.close();
    llc_->stop(); // links cleared: nothing calls us any more
    for (auto& [token, conn] : conns_.closeAll())
        if (endConnection(*conn, Connection::State::Ended) == Connection::State::Open)
            releaseBuffers(*pool_, conn->rmb, conn->sndbuf);
    pool_.reset(); // before the engine: the pool unregisters through it
}

void LinkGroup::onTerminated(TerminationHandler handler)
{
    MutexLocker lock(handlerMutex_);
    onTerminated_ = std::move(handler);
}

Result<void> LinkGroup::start(NewLink first)
{
    Result<void> r = llc_->start(std::move(first));
    if (r && conns_.size() == 0)
        armIdleTimer();
    return r;
}

Result<void> LinkGroup::addLink()
{
    return llc_->addLink();
}

Result<void> LinkGroup::requestAddLink()
{
    return llc_->requestAddLink();
}

Result<void> LinkGroup::deleteLink(unsigned slot)
{
    return llc_->deleteLink(slot);
}

Result<void> LinkGroup::breakLink(unsigned slot)
{
    return llc_->breakLink(slot);
}

void LinkGroup::terminate(std::string reason, llc::DeleteReason code, bool orderly)
{
    llc_->terminate(std::move(reason), code, orderly);
}

void LinkGroup::probeLinks()
{
    llc_->probeLinks();
}

// --- What the LLC engine asks of us ----------------------------------------------

std::vector<llc::RkeyPair> LinkGroup::rmbRkeys(unsigned from, unsigned to)
{
    return conns_.rkeys(from, to);
}

void LinkGroup::moveConnections(unsigned from, unsigned to)
{
    for (const ConnectionPtr& conn : conns_.move(from, to)) {
        MutexLocker lock(conn->eventsMutex_);
        if (conn->events_.moved)
            conn->events_.moved(to);
    }
}

void LinkGroup::groupEnded(std::string reason)
{
    for (auto& [token, conn] : conns_.closeAll()) { // every buffer back to the pool
        if (endConnection(*conn, Connection::State::Ended) == Connection::State::Open)
            releaseBuffers(*pool_, conn->rmb, conn->sndbuf);
        MutexLocker lock(conn->eventsMutex_);
        if (conn->events_.ended)
            conn->events_.ended();
    }
    TerminationHandler handler;
    {
        MutexLocker lock(handlerMutex_);
        handler = onTerminated_;
    }
    if (handler)
        handler(std::move(reason));
}

// Armed whenever the group has no connections; the check finds out whether
// it had none all along (closeIfIdle is false once a connection came).
void LinkGroup::armIdleTimer()
{
    const std::chrono::milliseconds delay =
        config_.idleFree.count() ? config_.idleFree
                                 : (config_.role == Role::Server ? 600'000ms : 610'000ms);
    const std::uint64_t opened = conns_.opened();
    idle_.postAfter(delay, [this, opened] {
        if (conns_.opened() == opened && conns_.closeIfIdle())
            terminate("idle link group freed", llc::DeleteReason::ProgramTerminated, true);
    });
}

// --- Connections -------------------------------------------------------------------

bool LinkGroup::hasRoom() const
{
    return !llc_->terminated() && !conns_.closed() && conns_.size() < llc_->maxConns() &&
           !llc_->rtokens().full();
}

Result<ConnectionPtr> LinkGroup::openConnection(std::size_t rmbBytes, std::size_t sndbufBytes,
                                                std::optional<std::uint8_t> linkId)
{
    if (llc_->terminated())
        return std::make_error_code(std::errc::not_connected);
    if (!hasRoom())
        return std::make_error_code(std::errc::no_buffer_space);
    // The least loaded ACTIVE link (or the one named), chosen under the
    // table's lock: other openers ran meanwhile, a link may have gone.
    return openWithBuffers(rmbBytes, sndbufBytes, [&](const ConnectionTable::Loads& loads) {
        const auto slots = llc_->slots();
        std::optional<unsigned> best;
        for (unsigned s = 0; s < kMaxLinks; ++s)
            if (slots[s].active &&
                (linkId ? slots[s].linkId == *linkId : !best || loads[s] < loads[*best]))
                best = s;
        return best;
    });
}

Result<ConnectionPtr> LinkGroup::openWithBuffers(std::size_t rmbBytes, std::size_t sndbufBytes,
                                                 const ConnectionTable::PickLink& pick)
{
    Result<BufferRef> rmb = pool_->acquire(BufferKind::Rmb, rmbBytes);
    if (!rmb)
        return rmb.error();
    Result<BufferRef> snd = pool_->acquire(BufferKind::Sndbuf, sndbufBytes);
    if (!snd) {
        (void)pool_->release(*rmb);
        return snd.error();
    }
    Result<ConnectionPtr> conn = conns_.open(this, *rmb, *snd, llc_->maxConns(), pick);
    if (!conn)
        releaseBuffers(*pool_, *rmb, *snd);
    return conn;
}

Connection::State LinkGroup::endConnection(Connection& conn, Connection::State to)
{
    WriteLocker lock(conn.use_);
    const Connection::State was = conn.state_;
    if (was == Connection::State::Open)
        conn.state_ = to;
    return was;
}

Result<void> LinkGroup::closeConnection(Connection& conn)
{
    if (conn.group_ != this)
        return ConnErrc::UnknownConnection;
    if (const Connection::State was = endConnection(conn, Connection::State::Closed);
        was != Connection::State::Open)
        return stateError(was);
    conns_.remove(conn);
    if (conns_.size() == 0)
        armIdleTimer();
    // Linux reuses the RMB even when DELETE_RKEY could not be sent; the
    // caller learns of it from the error.
    Result<FlowToken> token = llc_->acquireFlow(Flow::Rkey);
    Result<void> r = token ? llc_->deleteRkey(*token, *conn.rmb.desc()) : token.error();
    releaseBuffers(*pool_, conn.rmb, conn.sndbuf);
    return r;
}

std::vector<LinkInfo> LinkGroup::links() const
{
    std::vector<LinkInfo> out = llc_->links();
    const ConnectionTable::Loads loads = conns_.loads();
    for (LinkInfo& l : out)
        l.connections = loads[l.slot];
    return out;
}

Result<void> LinkGroup::write(const Connection& conn, std::size_t offset,
                              std::span<const std::byte> data)
{
    if (Result<void> r = fillSndbuf(conn, offset, data); !r)
        return r;
    return writeSndbuf(conn, linkOf(conn), offset, offset, data.size());
}

Result<void> LinkGroup::fillSndbuf(const Connection& conn, std::size_t offset,
                                   std::span<const std::byte> data)
{
    if (conn.group_ != this)
        return ConnErrc::UnknownConnection;
    ReadLocker lock(conn.use_); // the sndbuf stays ours until we are done
    if (conn.state_ != Connection::State::Open)
        return stateError(conn.state_);
    if (offset > conn.sndbuf.size() || data.size() > conn.sndbuf.size() - offset)
        return ConnErrc::SndbufRange;
    if (!data.empty())
        std::memcpy(conn.sndbuf.data() + offset, data.data(), data.size());
    return {};
}

std::error_code LinkGroup::pieceError(const Connection& conn, const SndbufPiece& p)
{
    if (p.sndbufOffset > conn.sndbuf.size() || p.length > conn.sndbuf.size() - p.sndbufOffset)
        return ConnErrc::SndbufRange;
    if (!conn.peer_)
        return ConnErrc::PeerRmbUnknown;
    // Checked here, not left to the peer's NIC: over RC a remote access error breaks the link,
    // and failover would carry the same write to the next one.
    if (p.peerOffset > conn.peer_->bytes || p.length > conn.peer_->bytes - p.peerOffset)
        return ConnErrc::PeerRmbRange;
    return {};
}

LinkGroup::LinkRef LinkGroup::linkOf(const Connection& conn) const
{
    const unsigned slot = conn.link();
    return {slot, llc_->linkId(slot)};
}

std::shared_ptr<LinkChannel> LinkGroup::channelOf(LinkRef via) const
{
    return via.id != 0 ? llc_->activeChannel(via.slot, via.id) : nullptr;
}

Result<LinkGroup::WriteTarget> LinkGroup::writeTarget(const Connection& conn, LinkRef via)
{
    if (!conn.peer_)
        return ConnErrc::PeerRmbUnknown;
    const unsigned slot = via.slot;
    std::shared_ptr<LinkChannel> channel = channelOf(via);
    if (!channel)
        return std::make_error_code(std::errc::not_connected);
    std::optional<RtokenTable::Rtoken> rt = llc_->rtokens().get(conn.peer_->row, slot);
    if (!rt) // deleted by the peer, or not (yet) known on this link
        return llc_->rtokens().holds(conn.peer_->row)
                   ? std::make_error_code(std::errc::not_connected)
                   : std::error_code(ConnErrc::PeerRmbGone);
    return WriteTarget{std::move(channel), rt->vaddr, rt->rkey,
                       conn.sndbuf->registration(slot).lkey};
}

Result<void> LinkGroup::writeSndbuf(const Connection& conn, LinkRef via, std::size_t sndbufOffset,
                                    std::size_t peerOffset, std::size_t length)
{
    if (conn.group_ != this)
        return ConnErrc::UnknownConnection;
    ReadLocker lock(conn.use_); // the buffers stay ours until we are done
    if (conn.state_ != Connection::State::Open)
        return stateError(conn.state_);
    if (std::error_code e = pieceError(conn, {sndbufOffset, peerOffset, length}))
        return e;
    if (length == 0)
        return {};
    Result<WriteTarget> t = writeTarget(conn, via);
    if (!t)
        return t.error();
    return t->channel->write(conn.sndbuf.data() + sndbufOffset, length, t->lkey,
                             t->vaddr + peerOffset, t->rkey);
}

Result<void> LinkGroup::writeSndbufThenCdc(const Connection& conn, LinkRef via,
                                           std::span<const SndbufPiece> pieces,
                                           std::span<const std::byte> cdc,
                                           LinkChannel::Landed landed)
{
    if (conn.group_ != this)
        return ConnErrc::UnknownConnection;
    if (pieces.size() > kMaxSndbufPieces || cdc.size() != cdc::kSmcrCdcSize ||
        cdc[0] != std::byte{cdc::kCdcType})
        return std::make_error_code(std::errc::invalid_argument);
    ReadLocker lock(conn.use_); // the buffers stay ours while we post
    if (conn.state_ != Connection::State::Open)
        return stateError(conn.state_);
    for (const SndbufPiece& p : pieces) // all checked before anything is posted
        if (std::error_code e = pieceError(conn, p))
            return e;
    std::shared_ptr<LinkChannel> channel;
    if (std::any_of(pieces.begin(), pieces.end(), [](const SndbufPiece& p) { return p.length; })) {
        Result<WriteTarget> t = writeTarget(conn, via);
        if (!t)
            return t.error();
        for (const SndbufPiece& p : pieces)
            if (p.length > 0)
                if (Result<void> r =
                        t->channel->postWrite(conn.sndbuf.data() + p.sndbufOffset, p.length,
                                              t->lkey, t->vaddr + p.peerOffset, t->rkey);
                    !r)
                    return r; // those posted before complete on their own
        channel = std::move(t->channel);
    } else { // a CDC alone needs no rtoken: the peer may have deleted its RMB's already
        channel = channelOf(via);
        if (!channel)
            return std::make_error_code(std::errc::not_connected);
    }
    Result<void> r = channel->sendAfterWrites(cdc, std::move(landed));
    if (r)
        cdcOut_.fetch_add(1, std::memory_order_relaxed);
    return r;
}

Result<void> LinkGroup::readRmb(const Connection& conn, std::size_t offset,
                                std::span<std::byte> into)
{
    if (conn.group_ != this)
        return ConnErrc::UnknownConnection;
    ReadLocker lock(conn.use_); // the RMB stays ours until we are done
    if (conn.state_ != Connection::State::Open)
        return stateError(conn.state_);
    if (offset > conn.rmb.size() || into.size() > conn.rmb.size() - offset)
        return std::make_error_code(std::errc::invalid_argument);
    if (!into.empty())
        std::memcpy(into.data(), conn.rmb.data() + offset, into.size());
    return {};
}

// --- CDC: carried by the links, routed here by the alert token ---------------------

namespace
{
constexpr std::size_t kCdcTokenOffset = 4;

std::uint32_t cdcToken(std::span<const std::byte> m)
{
    return static_cast<std::uint32_t>(loadBe(m, kCdcTokenOffset, 4));
}
} // namespace

Result<void> LinkGroup::sendCdc(const Connection& conn, std::span<const std::byte> message,
                                std::optional<LinkRef> via)
{
    if (conn.group_ != this)
        return ConnErrc::UnknownConnection;
    if (message.size() != cdc::kSmcrCdcSize || message[0] != std::byte{cdc::kCdcType})
        return std::make_error_code(std::errc::invalid_argument);
    ReadLocker lock(conn.use_); // closeConnection waits for it
    if (conn.state_ != Connection::State::Open)
        return stateError(conn.state_);
    std::shared_ptr<LinkChannel> channel = via ? channelOf(*via) : llc_->activeChannel(conn.link());
    if (!channel)
        return std::make_error_code(std::errc::not_connected);
    Result<void> r = channel->send(message);
    if (r)
        cdcOut_.fetch_add(1, std::memory_order_relaxed);
    return r;
}

Result<void> LinkGroup::setConnectionEvents(const Connection& conn, ConnectionEvents events)
{
    if (conn.group_ != this)
        return ConnErrc::UnknownConnection;
    const bool clearing = !events.cdc && !events.moved && !events.ended;
    MutexLocker lock(conn.eventsMutex_); // waits for a handler that runs now
    if (!clearing) {
        ReadLocker use(conn.use_);
        if (conn.state_ != Connection::State::Open)
            return stateError(conn.state_);
    }
    conn.events_ = std::move(events);
    if (conn.events_.cdc) {
        for (const auto& parked : std::exchange(conn.parkedCdcs_, {}))
            conn.events_.cdc(parked);
    }
    return {};
}

void LinkGroup::cdcReceived(unsigned /*slot*/, std::span<const std::byte> message)
{
    if (message.size() < cdc::kSmcrCdcMinSize ||
        std::to_integer<std::size_t>(message[1]) != cdc::kSmcrCdcSize) {
        cdcMalformed_.fetch_add(1, std::memory_order_relaxed); // Linux drops it too
        return;
    }
    const ConnectionPtr conn = conns_.find(cdcToken(message));
    if (conn) {
        MutexLocker lock(conn->eventsMutex_);
        if (conn->events_.cdc) {
            conn->events_.cdc(message);
        } else {
            std::array<std::byte, cdc::kSmcrCdcSize> parked{};
            std::memcpy(parked.data(), message.data(), std::min(message.size(), cdc::kSmcrCdcSize));
            if (conn->parkedCdcs_.size() == Connection::kParkedCdcs)
                conn->parkedCdcs_.pop_front();
            conn->parkedCdcs_.push_back(parked);
        }
        return;
    }
    cdcUnknownToken_.fetch_add(1, std::memory_order_relaxed);
}

LinkGroupStats LinkGroup::stats() const
{
    LinkGroupStats s;
    static_cast<LlcStats&>(s) = llc_->stats();
    s.cdcMalformed = cdcMalformed_.load(std::memory_order_relaxed);
    s.cdcUnknownToken = cdcUnknownToken_.load(std::memory_order_relaxed);
    s.cdcOut = cdcOut_.load(std::memory_order_relaxed);
    return s;
}

} // namespace smc
