// SPDX-License-Identifier: MIT
// SmcrConnection: its CDCs, the group's events (a CDC in, failover, the end), close, readiness.
#include "smc/conn/smcr_connection.h"

#include <linux/futex.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <algorithm>
#include <cassert>
#include <cerrno>
#include <chrono>
#include <climits>
#include <ctime>
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
                       std::uint32_t peerToken, std::size_t peerRmbBytes, std::size_t autocorkBytes,
                       SignalPolicy onSignal)
{
    if (!group || !conn || conn->sndbuf.size() == 0)
        return std::make_error_code(std::errc::invalid_argument);
    Result<cdc::CdcStream> stream =
        cdc::CdcStream::create(conn->rmb.size(), peerRmbBytes, peerToken);
    if (!stream)
        return std::make_error_code(std::errc::invalid_argument);
    std::unique_ptr<SmcrConnection> c(new SmcrConnection(
        std::move(group), std::move(conn), peerToken, *stream, autocorkBytes, onSignal));
    SmcrConnection* self = c.get();
    // Held until the link is named: a CDC handed over below may make a flush due, which must
    // not post before.
    MutexLocker tx(self->txMutex_);
    Result<void> r = self->group_->setConnectionEvents(
        *self->conn_, {[self](std::span<const std::byte> m) { self->onCdc(m); },
                       [self](unsigned) { self->onMoved(); }, [self] { self->onEnded(); }});
    if (!r) {
        (void)self->group_->closeConnection(*self->conn_);
        self->released_ = true;
        return r.error();
    }
    // After the events are set: a move from here on is told, and its resend names the link
    // again.
    self->via_ = self->group_->linkOf(*self->conn_);
    return c;
}

SmcrConnection::SmcrConnection(std::shared_ptr<LinkGroup> group, ConnectionPtr conn,
                               std::uint32_t peerToken, cdc::CdcStream stream,
                               std::size_t autocorkBytes, SignalPolicy onSignal)
    : CdcConnection(stream, autocorkBytes, onSignal), group_(std::move(group)),
      conn_(std::move(conn)), peerToken_(peerToken), peerRingSize_(stream.peerRingSize()),
      stageBytes_(conn_->sndbuf.size())
{
    MutexLocker lock(hook_->mutex);
    hook_->self = this;
    MutexLocker landed(landedHook_->mutex);
    landedHook_->self = this;
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
// the current cursors on the new one). Nothing goes between a move and its resend.
void SmcrConnection::deliver()
{
    const std::size_t n = std::exchange(staged_, 0);
    if (n == 0)
        return;
    bool closing = false;
    bool lost = false;
    std::uint64_t moves = 0, lostCdcs = 0;
    {
        MutexLocker lock(mutex_);
        // close() sees its CDCs land, unless the TCP connection ended: then the peer is gone
        // (its link may be too: a wait would last until the link's retries run out) or closed.
        closing = cdc_.closed && !cdc_.aborted && !tcpEnded_;
        lost = moveUnresolved();
        moves = moves_;
        lostCdcs = lostCdcs_;
    }
    if (!lost && !(n == 1 && writeThenTransmit(stagedUpTo_, outbox_[0]))) {
        lost = !writeOut(stagedUpTo_);
        for (std::size_t i = 0; i < n && !lost; ++i)
            lost = !transmit(outbox_[i]);
    }
    // close(): no resend follows it, so it sees what the link lost through itself.
    if (closing &&
        (lost || !allLanded(moves, lostCdcs, stagedUpTo_, Clock::now() + kCloseFailoverWait)))
        resendAfterMove(true);
}

bool SmcrConnection::allLanded(std::uint64_t moves, std::uint64_t lostCdcs, std::uint64_t upTo,
                               Deadline until)
{
    MutexLocker lock(mutex_);
    if (awaitLanded(lock, until) && lostCdcs_ == lostCdcs &&
        landed_.load(std::memory_order_acquire) >= upTo)
        return true;
    if (moves_ == moves)
        lostLinkAt_ = moves; // a CDC failed on the way: wait for the move
    return false;
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
    std::uint64_t moves = 0;
    {
        MutexLocker lock(mutex_);
        moves = moves_; // before the send: a move after it is not a stall
    }
    Result<void> r = group_->sendCdc(*conn_, wire, via_);
    MutexLocker lock(mutex_);
    if (r) {
        ++stats_.cdcOut;
        return true;
    }
    // The link went: the resend after the move sends the current cursors on the next one,
    // and sends wait for it.
    if (r.error() == std::errc::not_connected) {
        lostLinkAt_ = moves;
        return false;
    }
    // A CDC that cannot go while the link stays up (no send slot in time, ...): the peer
    // would never hear of the bytes or the close it carried, so the connection ends here
    // rather than leave both ends waiting.
    (void)abort(false);
    return true; // nothing to make up for
}

void SmcrConnection::flushOwed()
{
    MutexLocker tx(txMutex_);
    {
        MutexLocker lock(mutex_);
        flushPosted_ = false;
        if (!(cdcOwed_ || pushDue()) || cdc_.closed) // sent meanwhile, or close() sends its own
            return;
        announce();
    }
    deliver();
}

bool SmcrConnection::pushDue() const
{
    return corking_ == 0 && cdc_.pushDue();
}

void SmcrConnection::postFlush()
{
    if (std::exchange(flushPosted_, true)) // one task at a time, at most
        return;
    group_->executor().postBlocking([h = hook_] {
        MutexLocker lock(h->mutex);
        if (h->self != nullptr)
            h->self->flushOwed();
    });
}

void SmcrConnection::Waiters::wakeAll() noexcept
{
    // Bumped, then the sleepers counted: a sleeper counts itself, then looks at the word (both
    // sequentially consistent), so either it sees the bump or we see it.
    word.fetch_add(1, std::memory_order_seq_cst);
    if (sleepers.load(std::memory_order_seq_cst) > 0)
        (void)::syscall(SYS_futex, &word, FUTEX_WAKE_PRIVATE, INT_MAX, nullptr, nullptr, 0);
}

bool SmcrConnection::Waiters::sleep(std::uint32_t seen, const timespec* timeout) noexcept
{
    sleepers.fetch_add(1, std::memory_order_seq_cst);
    const bool cut =
        word.load(std::memory_order_seq_cst) == seen &&
        ::syscall(SYS_futex, &word, FUTEX_WAIT_PRIVATE, seen, timeout, nullptr, 0) != 0 &&
        errno == EINTR;
    sleepers.fetch_sub(1, std::memory_order_seq_cst);
    return cut;
}

void SmcrConnection::wake()
{
    changed_.wakeAll();
    room_.wakeAll();
    if (events_)
        events_.signal();
}

bool SmcrConnection::wait(MutexLocker& /*lock*/, std::uint64_t mark, Deadline until, bool forBytes)
{
    timespec ts{};
    const timespec* timeout = nullptr;
    if (!sleepLimit(until, ts, timeout))
        return false;
    mutex_.unlock();
    const bool cut = forBytes ? changed_.sleep(static_cast<std::uint32_t>(mark), timeout)
                              : room_.sleep(static_cast<std::uint32_t>(mark >> 32), timeout);
    mutex_.lock();
    return cut;
}

// --- The group's events --------------------------------------------------------------

// Bookkeeping only: a CDC we owe the peer (a window update, an abort) is built and sent by
// flushOwed on a blocking task, as Linux defers it to tx_work when no send slot is free.
void SmcrConnection::onCdc(std::span<const std::byte> bytes)
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
    if (owed)
        postFlush();
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
    const Deadline until = Clock::now() + kCloseFailoverWait;
    for (;;) {
        std::uint64_t produced = 0;
        {
            MutexLocker lock(mutex_);
            if (!closing) {
                resendPosted_ = false;
                if (cdc_.closed || cdc_.aborted)
                    return; // close() sends its own
            } else {
                // Sent bytes not landed, and the closing CDC: wait for failover.
                while (lostLinkAt_ == moves_ && !cdc_.aborted && Clock::now() < until)
                    wait(lock, waitMark(), until, false);
                if (lostLinkAt_ == moves_ || cdc_.aborted)
                    return; // no new link in time, or the group ended: the peer's grace ends it
            }
            // What we posted on the old link ends once the group takes it down: landed, or
            // flushed. Only then is landed_ final for it, and none of it can land after
            // a later byte took its place in our sndbuf.
            // (close(): within its one overall wait.)
            if (!awaitLanded(lock, closing ? until : Clock::now() + kCloseFailoverWait)) {
                (void)abort(false); // the old link never finished: its posts may land late
                return;
            }
            // What the peer consumed surely landed, even if its completion went with the
            // link: back to that at least, so what is written again fits the peer's ring once.
            produced = cdc_.bytesSent; // stable: sends produce under txMutex_
            const std::uint64_t peerConsumed = produced - (peerRingSize_ - cdc_.stream.sendSpace());
            const std::uint64_t from =
                std::max(landed_.load(std::memory_order_acquire), peerConsumed);
            landed_.store(from, std::memory_order_release);
            written_.store(from, std::memory_order_release);
            rewoundAt_ = moves_;
            wake(); // sends may go on again
        }
        via_ = group_->linkOf(*conn_); // the group switched it before it told us
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
            // seen, the full CDC after it carries the current cursors. The peer judges the
            // validation within half the sequence space behind its newest. Once ours is more than
            // that ahead of what its cursors prove (tiny sends it has not read, CDCs that repeat
            // one another), the oldest it can still accept: that is wrong only if more than 32767
            // of our CDCs had not reached it, far more than a link holds in flight.
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
        // Written above: the validation alone, then the full CDC the way deliver() sends it.
        std::uint64_t moves = 0, lostCdcs = 0;
        {
            MutexLocker lock(mutex_);
            moves = moves_;
            lostCdcs = lostCdcs_;
        }
        staged_ = 0;
        const bool lost = !transmit(outbox_[0]) ||
                          (!writeThenTransmit(produced, outbox_[1]) && !transmit(outbox_[1]));
        if (!closing || (!lost && allLanded(moves, lostCdcs, produced, until)))
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
    tcpEnded_ = true;
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
    if (std::exchange(released_, true))
        return;
    {
        // A WRITE still on its way reads our sndbuf, which the pool may hand out next (a CDC
        // alone does not).
        MutexLocker lock(mutex_);
        const Deadline until = Clock::now() + kCloseFailoverWait;
        while (corking_ > 0 && Clock::now() < until)
            wait(lock, waitMark(), until, false);
    }
    {
        MutexLocker lock(landedHook_->mutex); // a running completion is done once we have it
        landedHook_->self = nullptr;
    }
    (void)group_->closeConnection(*conn_); // an ended one: its buffers went back already
}

// --- Observability -------------------------------------------------------------------------

bool SmcrConnection::sendStalled() const
{
    // A write the lost link failed, or a move not resent yet: sends wait for failover and
    // its resend (onMoved and the resend's writes wake the poller). A sndbuf full of bytes on
    // their way: until their completion (onLanded).
    return (lostLinkAt_ && *lostLinkAt_ == moves_) || moveUnresolved() ||
           written_.load(std::memory_order_acquire) - landed_.load(std::memory_order_acquire) >=
               stageBytes_;
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
    info.sndbufBytes = stageBytes_;
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
