// SPDX-License-Identifier: MIT
// SmcrConnection: its CDCs, the group's events (a CDC in, failover, the end), close, readiness.
#include "smc/conn/smcr_connection.h"

#include <algorithm>
#include <cassert>
#include <chrono>
#include <utility>

namespace smc::net
{
namespace
{

// How long the closing CDC may trail the TCP FIN (it comes over the link, on other threads).
constexpr std::chrono::seconds kPeerGoneGrace{1};
// How long close() waits for failover when the link went with sent bytes not written yet.
constexpr std::chrono::seconds kCloseFailoverWait{10};

} // namespace

Result<std::unique_ptr<SmcrConnection>>
SmcrConnection::create(std::shared_ptr<LinkGroup> group, ConnectionPtr conn,
                       std::uint32_t peerToken, std::size_t peerRmbBytes, std::size_t autocorkBytes)
{
    if (!group || !conn || conn->sndbuf.size() == 0)
        return std::make_error_code(std::errc::invalid_argument);
    Result<cdc::CdcStream> stream =
        cdc::CdcStream::create(conn->rmb.size(), peerRmbBytes, peerToken);
    if (!stream)
        return std::make_error_code(std::errc::invalid_argument);
    std::unique_ptr<SmcrConnection> c(
        new SmcrConnection(std::move(group), std::move(conn), peerToken, *stream, autocorkBytes));
    SmcrConnection* self = c.get();
    Result<void> r = self->group_->setConnectionEvents(
        *self->conn_, {[self](std::span<const std::byte> m) { self->onCdc(m); },
                       [self](unsigned) { self->onMoved(); }, [self] { self->onEnded(); }});
    if (!r) {
        (void)self->group_->closeConnection(*self->conn_);
        self->released_ = true;
        return r.error();
    }
    return c;
}

SmcrConnection::SmcrConnection(std::shared_ptr<LinkGroup> group, ConnectionPtr conn,
                               std::uint32_t peerToken, cdc::CdcStream stream,
                               std::size_t autocorkBytes)
    : CdcConnection(stream, autocorkBytes), group_(std::move(group)), conn_(std::move(conn)),
      peerToken_(peerToken), peerRingSize_(stream.peerRingSize()), stageBytes_(conn_->sndbuf.size())
{
    MutexLocker lock(hook_->mutex);
    hook_->self = this;
}

SmcrConnection::~SmcrConnection()
{
    close();
}

// --- CDCs out ----------------------------------------------------------------------

void SmcrConnection::stage(const cdc::CdcMessage& m)
{
    ++built_;         // m.seq is built_, wrapped
    cdcOwed_ = false; // this one carries everything the peer is owed
    // A CDC that announces what the one before did shares its entry: the older number stays
    // a lower bound. Bounded: at the cap the newest entry stretches to cover this CDC too,
    // with the same effect, so the worst it does is name an older CDC in a validation.
    const std::uint64_t produced = cdc_.bytesSent;
    if (unconfirmed_.empty() || unconfirmed_.back().producer != produced ||
        unconfirmed_.back().consumer != cdc_.bytesReceived) {
        if (unconfirmed_.size() == kMaxUnconfirmed)
            unconfirmed_.back() = {unconfirmed_.back().number, produced, cdc_.bytesReceived};
        else
            unconfirmed_.push_back({built_, produced, cdc_.bytesReceived});
    }
    assert(staged_ < outbox_.size()); // every stage is delivered in the same txMutex_ hold
    outbox_[staged_++] = cdc::encodeSmcr(m);
    stagedUpTo_ = produced;
}

// The bytes first: RC delivers the CDC after the WRITEs posted before it, so it goes right
// behind them; if that fails, the WRITEs again, each waited for, and a CDC whose bytes could
// not be written is not sent (after a lost link, resendAfterMove writes them and sends
// the current cursors on the new one).
void SmcrConnection::deliver()
{
    const std::size_t n = std::exchange(staged_, 0);
    if (n == 0 || (n == 1 && writeThenTransmit(stagedUpTo_, outbox_[0])))
        return;
    bool lost = !writeOut(stagedUpTo_);
    for (std::size_t i = 0; i < n && !lost; ++i)
        lost = !transmit(outbox_[i]);
    if (!lost)
        return;
    bool closing = false;
    {
        MutexLocker lock(mutex_);
        closing = cdc_.closed && !cdc_.aborted;
    }
    if (closing) // close(): no resend follows it, so it sees the failover through itself
        resendAfterMove(true);
}

// Which CDC the peer has surely processed, from its cursors: it consumed P of our bytes, so
// it saw a CDC announcing a producer >= P; it wrote C bytes into our ring, and only into
// space we announced, so it saw one announcing a consumer >= C - ring. The first CDC that
// announced both is a lower bound of the peer's newest: what a validation may name. (Not
// Linux's last completed send: a completed CDC may still wait in the old link's deliveries
// when the validation comes on the new one, and an in-process link drops them.)
void SmcrConnection::noteProcessed()
{
    const std::uint64_t peerConsumed = cdc_.bytesSent - (peerRingSize_ - cdc_.stream.sendSpace());
    const std::uint64_t peerProduced = cdc_.bytesReceived + cdc_.stream.readable();
    if (peerConsumed == 0 && peerProduced <= ringSize())
        return; // no CDC of ours was needed for that
    // The newest entry always announced both (CdcStream holds the peer to them).
    while (!unconfirmed_.empty() && (unconfirmed_.front().producer < peerConsumed ||
                                     unconfirmed_.front().consumer + ringSize() < peerProduced))
        unconfirmed_.pop_front();
    if (!unconfirmed_.empty())
        confirmed_ = unconfirmed_.front().number;
}

bool SmcrConnection::transmit(const Wire& wire)
{
    for (int attempt = 0; attempt < 3; ++attempt) {
        std::uint64_t moves = 0;
        {
            MutexLocker lock(mutex_);
            moves = moves_; // first: the group changes our link before it counts a move
        }
        const unsigned slot = conn_->link();
        Result<void> r = group_->sendCdc(*conn_, wire);
        if (r) {
            MutexLocker lock(mutex_);
            ++stats_.cdcOut;
            return true;
        }
        // The link went: if failover already moved us, say it on the new one; if not, the
        // resend after the move sends the current cursors there, and sends wait for it.
        if (r.error() == std::errc::not_connected && conn_->link() == slot) {
            MutexLocker lock(mutex_);
            lostLinkAt_ = moves;
            return false;
        }
        if (r.error() != std::errc::not_connected)
            break;
    }
    // A CDC that cannot go while the link stays up (no send slot in time, ...): the peer
    // would never hear of the bytes or the close it carried, so the connection ends here
    // rather than leave both ends waiting.
    MutexLocker lock(mutex_);
    (void)abort(false);
    return true; // nothing to make up for
}

void SmcrConnection::flushOwed()
{
    MutexLocker tx(txMutex_);
    {
        MutexLocker lock(mutex_);
        flushPosted_ = false;
        if (!cdcOwed_ || cdc_.closed) // sent meanwhile, or close() sends its own
            return;
        announce();
    }
    deliver();
}

void SmcrConnection::wake()
{
    ++wakes_;
    changed_.notify_all();
    if (events_)
        events_.signal();
}

void SmcrConnection::wait(MutexLocker& lock, std::uint64_t mark, Deadline until, bool /*forBytes*/)
{
    // In slices: a deadline of Deadline::max() must not overflow the clock's conversions.
    while (wakes_ == mark) {
        const Clock::time_point now = Clock::now();
        if (now >= until)
            return;
        const Clock::duration left = until - now;
        (void)changed_.waitFor(lock, std::min<Clock::duration>(left, std::chrono::seconds(1)));
    }
}

// --- The group's events --------------------------------------------------------------

// Bookkeeping only: a CDC we owe the peer (a window update, an abort) is built and sent by
// flushOwed on a blocking task, as Linux defers it to tx_work when no send slot is free.
void SmcrConnection::onCdc(std::span<const std::byte> bytes)
{
    bool post = false;
    {
        MutexLocker lock(mutex_);
        if (cdc_.closed || cdc_.aborted)
            return;
        ++stats_.cdcIn;
        bool owed = false;
        Result<cdc::CdcMessage> m = cdc::decodeSmcr(bytes);
        if (!m) {
            owed = abort(true);
        } else if (m->producerFlags.failoverValidation) {
            // §2.7: the peer believes we processed its CDC m->seq; if ours is older, a CDC
            // was lost and the streams cannot be trusted any more.
            if (cdc::isStaleSeq(m->seq, lastSeq_))
                owed = abort(true);
            else
                ++stats_.validations;
        } else if (cdc::isStaleSeq(lastSeq_, m->seq)) {
            ++stats_.cdcStale; // a duplicate or a late one from a failed link (§2.5)
        } else if (!receive(*m)) {
            owed = abort(true); // a cursor out of range or backwards: the peer broke the rules
        } else {
            lastSeq_ = m->seq;
            noteProcessed();
            owed = cdc_.stream.wantConsumerUpdate();
            wake();
        }
        cdcOwed_ = cdcOwed_ || owed;
        post = owed && !std::exchange(flushPosted_, true); // one task at a time, at most
    }
    if (post)
        group_->executor().postBlocking([h = hook_] {
            MutexLocker lock(h->mutex);
            if (h->self != nullptr)
                h->self->flushOwed();
        });
}

// The group moves us while it takes the old link down, and a write we have in flight on
// that link ends only then: the resend, which waits for it (txMutex_), runs on a blocking task.
void SmcrConnection::onMoved()
{
    bool post = false;
    {
        MutexLocker lock(mutex_);
        ++moves_;
        ++stats_.moves;
        wake(); // a send waiting for the new link writes there
        post = !cdc_.closed && !cdc_.aborted && !std::exchange(resendPosted_, true);
    }
    if (post)
        group_->executor().postBlocking([h = hook_] {
            MutexLocker lock(h->mutex);
            if (h->self != nullptr) {
                MutexLocker tx(h->self->txMutex_);
                h->self->resendAfterMove(false);
            }
        });
}

void SmcrConnection::resendAfterMove(bool closing)
{
    const Deadline until = Clock::now() + kCloseFailoverWait; // closing only
    for (;;) {
        std::uint64_t produced = 0;
        {
            MutexLocker lock(mutex_);
            if (!closing) {
                resendPosted_ = false;
                if (cdc_.closed || cdc_.aborted)
                    return; // close() sends its own
            } else {
                // Sent bytes not written yet, and the closing CDC: wait for failover.
                while (sendStalled() && !cdc_.aborted && Clock::now() < until)
                    wait(lock, wakes_, until, false);
                if (sendStalled() || cdc_.aborted || Clock::now() >= until)
                    return; // no new link in time, or the group ended: the peer's grace ends it
            }
            produced = cdc_.bytesSent; // stable: sends produce under txMutex_
        }
        // What the old link may not have written (a WRITE it failed, bytes no CDC announced
        // yet) goes again on the new one, from our sndbuf, at the same places; the peer learns
        // of it only from a CDC.
        if (!writeOut(produced)) {
            if (!closing)
                return; // lost again: the next move's resend (or close()) does it
            continue;
        }
        {
            MutexLocker lock(mutex_);
            if ((cdc_.closed && !closing) || cdc_.aborted)
                return;
            // What may be lost is CDCs: the validation says which one the peer must have
            // seen, the full CDC after it carries the current cursors. (A send's CDC may have
            // gone on the new link before these: the peer then processed a newer one than the
            // validation names, which it accepts.) The peer judges the validation within half
            // the sequence space behind its newest. Once ours is more than that ahead of what
            // its cursors prove (tiny sends it has not read, CDCs that repeat one another), the
            // oldest it can still accept: that is wrong only if more than 32767 of our CDCs
            // had not reached it, far more than a link holds in flight.
            constexpr std::uint64_t kHalf = 32767;
            cdc::CdcMessage v;
            v.seq = static_cast<std::uint16_t>(built_ - confirmed_ > kHalf ? built_ - kHalf
                                                                           : confirmed_);
            v.token = peerToken_;
            v.producerFlags.failoverValidation = true;
            assert(staged_ == 0);
            outbox_[staged_++] = cdc::encodeSmcr(v);
            announce();
        }
        const std::size_t n = std::exchange(staged_, 0); // written above: no deliver() needed
        bool lost = false;
        for (std::size_t i = 0; i < n && !lost; ++i)
            lost = !transmit(outbox_[i]);
        if (!lost || !closing)
            return;
    }
}

void SmcrConnection::onEnded()
{
    MutexLocker lock(mutex_);
    (void)abort(false); // the links are gone: nobody hears us
}

// --- Close ------------------------------------------------------------------------------

void SmcrConnection::peerGone() noexcept
{
    MutexLocker lock(mutex_);
    if (cdc_.closed)
        return;
    const cdc::ConnFlags f = cdc_.stream.peerConnFlags();
    if (!f.peerConnClosed && !f.peerConnAbort) {
        // The FIN can overtake the peer's last CDCs: a live group may still bring them.
        if (!cdc_.aborted && !group_->terminated()) {
            if (!graceTimer_)
                armPeerGoneGrace();
            return;
        }
        (void)abort(false); // died without a word: nothing more will come
    }
    wake();
}

void SmcrConnection::armPeerGoneGrace()
{
    graceCdcIn_ = stats_.cdcIn;
    // The timer fires on a short-task thread; the hook may be held by a flush waiting for a
    // send slot, so the work goes to a blocking thread.
    Executor& executor = group_->executor();
    graceTimer_ = executor.postAfter(kPeerGoneGrace, [g = hook_, &executor] {
        executor.postBlocking([g] {
            MutexLocker lock(g->mutex);
            if (g->self != nullptr)
                g->self->onPeerGoneGrace();
        });
    });
}

void SmcrConnection::onPeerGoneGrace()
{
    MutexLocker lock(mutex_);
    graceTimer_.reset();
    if (cdc_.closed || cdc_.aborted)
        return;
    const cdc::ConnFlags f = cdc_.stream.peerConnFlags();
    if (f.peerConnClosed || f.peerConnAbort)
        return; // the close came (and woke the readers)
    if (stats_.cdcIn != graceCdcIn_ && !group_->terminated()) {
        armPeerGoneGrace(); // still talking: the close may be behind its data
        return;
    }
    (void)abort(false); // no close came: the peer died
}

void SmcrConnection::detach() noexcept
{
    {
        MutexLocker g(hook_->mutex); // a running grace timer or flush is done once we have it
        hook_->self = nullptr;
    }
    std::optional<Executor::TimerId> timer;
    {
        MutexLocker lock(mutex_);
        timer = std::exchange(graceTimer_, std::nullopt);
    }
    if (timer)
        (void)group_->executor().cancel(*timer);
    (void)group_->setConnectionEvents(*conn_, {}); // waits for a running handler
}

void SmcrConnection::release() noexcept
{
    if (!std::exchange(released_, true))
        (void)group_->closeConnection(*conn_); // an ended one: its buffers went back already
}

// --- Observability -------------------------------------------------------------------------

bool SmcrConnection::sendStalled() const
{
    // A write the lost link failed: sends wait for failover (onMoved wakes the poller then).
    return lostLinkAt_ && *lostLinkAt_ == moves_;
}

int SmcrConnection::enableEvents(int /*pulse*/) noexcept
{
    MutexLocker lock(mutex_);
    if (!events_)
        if (Result<EventFd> e = EventFd::create())
            events_ = std::move(*e);
    return events_ ? events_.fd() : -1;
}

void SmcrConnection::drainEvents() noexcept
{
    MutexLocker lock(mutex_);
    if (events_)
        events_.clear();
}

void SmcrConnection::describe(ConnectionInfo& info) const
{
    info.linkId = group_->linkId(conn_->link());
    info.rmbBytes = ringSize();
    info.peerRmbBytes = peerRingSize_;
    info.transport = Transport::SmcR;
    info.version = group_->llcVersion();
    info.token = conn_->token;
    info.peerToken = peerToken_;
}

SmcrStats SmcrConnection::stats() const
{
    MutexLocker lock(mutex_);
    return stats_;
}

} // namespace smc::net
