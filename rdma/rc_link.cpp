// SPDX-License-Identifier: MIT
// RcLink: send slots, always re-posted receives, completions on the executor, link-down reporting.
#include "rdma/rc_link.h"

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <random>

#include <fcntl.h>

namespace smc::rdma
{
namespace
{

constexpr std::uint64_t kRecvTag = std::uint64_t{1} << 32;

std::error_code linkIsDown()
{
    return std::make_error_code(std::errc::not_connected);
}

} // namespace

Result<std::unique_ptr<RcLink>> RcLink::create(const Context& context, const ProtectionDomain& pd,
                                               LinkConfig config, Handlers handlers,
                                               Executor& executor)
{
    std::unique_ptr<RcLink> link(new RcLink());
    link->executor_ = &executor;
    link->pd_ = pd;
    link->config_ = config;
    link->handlers_ = std::move(handlers);

    Result<PortInfo> port = context.port(config.port);
    if (!port)
        return port.error();
    if (config.gidIndex < 0) {
        Result<int> index = context.findRoceV2Ipv4Gid(config.port);
        if (!index)
            return index.error();
        link->config_.gidIndex = *index;
    }
    Result<Gid> gid = context.gid(config.port, link->config_.gidIndex);
    if (!gid)
        return gid.error();

    Result<CompletionChannel> channel = CompletionChannel::create(context);
    if (!channel)
        return channel.error();
    link->channel_ = *channel;

    // Like Linux: on allocation failure halve the slot counts and retry.
    std::uint32_t send = config.maxSendWr, recv = config.maxRecvWr;
    std::error_code lastError;
    for (;;) {
        // Room for two RDMA WRITEs per control message, as Linux sizes it.
        Result<CompletionQueue> cq =
            CompletionQueue::create(context, static_cast<int>(3 * send + recv), &*channel);
        Result<QueuePair> qp = cq ? QueuePair::createRc(pd, *cq, *cq, {3 * send, recv, 2, 1})
                                  : Result<QueuePair>(cq.error());
        if (qp) {
            link->cq_ = *cq;
            link->qp_ = *qp;
            break;
        }
        lastError = qp.error();
        if (lastError != std::errc::not_enough_memory || !halveWrCounts(send, recv))
            return lastError;
    }
    link->sendSlots_ = send;
    link->recvSlots_ = recv;
    link->slotBytes_ = std::max(kWrBufferSize, config.maxMessage);
    const std::size_t bytes = link->slotBytes_;
    {
        MutexLocker lock(link->mutex_); // nobody else has the link yet; the analysis cannot know
        link->slots_.resize(send);
    }

    link->sendBuffers_ = std::make_unique<std::byte[]>(send * bytes);
    link->recvBuffers_ = std::make_unique<std::byte[]>(recv * bytes);
    Result<MemoryRegion> sendMr =
        MemoryRegion::create(pd, link->sendBuffers_.get(), send * bytes, IBV_ACCESS_LOCAL_WRITE);
    Result<MemoryRegion> recvMr =
        MemoryRegion::create(pd, link->recvBuffers_.get(), recv * bytes, IBV_ACCESS_LOCAL_WRITE);
    if (!sendMr || !recvMr)
        return sendMr ? recvMr.error() : sendMr.error();
    link->sendMr_ = *sendMr;
    link->recvMr_ = *recvMr;

    std::random_device rd;
    link->local_ = {link->qp_.qpn(), rd() & 0xffffff, *gid, port->activeMtu};

    // Completion events wake the executor's epoll thread, shared by every
    // link. Non-blocking, so that ibv_get_cq_event never stalls that thread
    // (and with it every other link) when the fd has nothing after all.
    const int fd = link->channel_.get()->fd;
    const int flags = fcntl(fd, F_GETFL);
    if (flags < 0 || fcntl(fd, F_SETFL, flags | O_NONBLOCK) != 0)
        return smc::lastError();
    if (Result<void> r = link->cq_.requestNotify(); !r)
        return r.error();
    errno = 0;
    const int id = executor.watch(fd, [l = link.get()] { l->onCompletionEvent(); });
    if (id < 0)
        return smc::lastError();
    link->watchId_.store(id, std::memory_order_release);
    return link;
}

RcLink::~RcLink()
{
    // Before any member goes: after this no completion callback runs.
    if (const int id = watchId_.load(std::memory_order_acquire); id >= 0)
        executor_->unwatch(id);
    std::vector<Done> unfinished; // sends whose completion will never be polled now
    {
        MutexLocker lock(mutex_);
        for (Slot& s : slots_)
            if (s.done)
                unfinished.push_back(std::move(s.done));
    }
    for (Done& d : unfinished)
        d(false);
}

Result<void> RcLink::postRecv(std::uint32_t index) noexcept
{
    ibv_sge sge{};
    sge.addr = reinterpret_cast<std::uintptr_t>(recvBuffers_.get() + index * slotBytes_);
    sge.length = static_cast<std::uint32_t>(slotBytes_);
    sge.lkey = recvMr_.lkey();
    ibv_recv_wr wr{};
    wr.wr_id = kRecvTag | index;
    wr.sg_list = &sge;
    wr.num_sge = 1;
    ibv_recv_wr* bad = nullptr;
    return errnoCode(ibv_post_recv(qp_.get(), &wr, &bad));
}

Result<void> RcLink::connect(const Endpoint& peer)
{
    if (Result<void> r = qp_.toInit(config_.port); !r)
        return r;
    for (std::uint32_t i = 0; i < recvSlots_; ++i) // before RTR: nothing arrives unposted
        if (Result<void> r = postRecv(i); !r)
            return r;
    Endpoint p = peer;
    p.mtu = std::min(peer.mtu, local_.mtu);
    return qp_.toRts(config_.port, config_.gidIndex, local_.psn, p);
}

Result<std::uint32_t> RcLink::takeSlot(std::chrono::milliseconds wait)
{
    MutexLocker lock(mutex_);
    std::uint32_t index = 0;
    auto freeSlot = [&]() SMC_REQUIRES(mutex_) {
        if (isDown())
            return true;
        for (index = 0; index < slots_.size(); ++index)
            if (!slots_[index].busy)
                return true;
        return false;
    };
    if (!slotFreed_.waitFor(lock, wait, freeSlot))
        return std::make_error_code(std::errc::timed_out);
    if (isDown())
        return linkIsDown();
    slots_[index] = {true, false, false, {}, {}};
    return index;
}

void RcLink::awaitSends(std::chrono::milliseconds wait) noexcept
{
    MutexLocker lock(mutex_);
    (void)slotFreed_.waitFor(lock, wait, [&]() SMC_REQUIRES(mutex_) {
        return isDown() || std::none_of(slots_.begin(), slots_.end(),
                                        [](const Slot& slot) { return slot.busy; });
    });
}

std::uint32_t RcLink::freeSendSlots() const
{
    MutexLocker lock(mutex_);
    std::uint32_t n = 0;
    for (const Slot& s : slots_)
        n += !s.busy;
    return n;
}

Result<std::uint32_t> RcLink::post(ibv_send_wr& wr, bool waited, std::chrono::milliseconds slotWait,
                                   std::span<const std::byte> message, Done done)
{
    Result<std::uint32_t> slot = takeSlot(slotWait);
    if (!slot)
        return slot.error();
    ibv_sge copy{};
    if (wr.opcode == IBV_WR_SEND) { // the message goes into the slot's registered buffer
        std::byte* buf = sendBuffers_.get() + *slot * slotBytes_;
        std::memcpy(buf, message.data(), message.size());
        copy = {reinterpret_cast<std::uintptr_t>(buf), static_cast<std::uint32_t>(message.size()),
                sendMr_.lkey()};
        wr.sg_list = &copy;
        wr.num_sge = 1;
    }
    if (waited || done) {
        MutexLocker lock(mutex_);
        slots_[*slot].waited = waited;
        slots_[*slot].done = std::move(done);
    }
    wr.wr_id = *slot;
    wr.send_flags |= IBV_SEND_SIGNALED;
    ibv_send_wr* bad = nullptr;
    if (std::error_code ec = errnoCode(ibv_post_send(qp_.get(), &wr, &bad))) {
        {
            MutexLocker lock(mutex_);
            slots_[*slot] = {};
        }
        linkDown(ec); // Linux: a failed post takes the link down
        return ec;
    }
    return *slot;
}

Result<std::uint32_t> RcLink::postSend(std::span<const std::byte> message, bool waited,
                                       std::chrono::milliseconds slotWait, Done done)
{
    if (message.size() > config_.maxMessage)
        return std::make_error_code(std::errc::message_size);
    ibv_send_wr wr{};
    wr.opcode = IBV_WR_SEND;
    wr.send_flags = IBV_SEND_SOLICITED;
    return post(wr, waited, slotWait, message, std::move(done));
}

Result<std::uint32_t> RcLink::postWrite(const void* src, std::size_t length, std::uint32_t lkey,
                                        RemoteBuffer dst, bool waited,
                                        std::chrono::milliseconds slotWait)
{
    ibv_sge sge{reinterpret_cast<std::uintptr_t>(src), static_cast<std::uint32_t>(length), lkey};
    ibv_send_wr wr{};
    wr.sg_list = &sge;
    wr.num_sge = 1;
    wr.opcode = IBV_WR_RDMA_WRITE;
    wr.wr.rdma.remote_addr = dst.addr;
    wr.wr.rdma.rkey = dst.rkey;
    return post(wr, waited, slotWait, {});
}

Result<void> RcLink::awaitSlot(std::uint32_t slot, std::chrono::milliseconds wait)
{
    MutexLocker lock(mutex_);
    Slot& s = slots_[slot];
    if (!slotFreed_.waitFor(lock, wait, [&] { return s.completed; })) {
        s.waited = false; // nobody waits any more: its completion frees the slot
        return std::make_error_code(std::errc::timed_out);
    }
    const std::error_code status = s.status;
    s = {};
    lock.unlock();
    slotFreed_.notify_all();
    return status;
}

Result<void> RcLink::posted(Result<std::uint32_t> slot)
{
    if (!slot)
        return slot.error();
    return {};
}

Result<void> RcLink::awaited(Result<std::uint32_t> slot, std::chrono::milliseconds wait)
{
    if (!slot)
        return slot.error();
    return awaitSlot(*slot, wait);
}

Result<void> RcLink::send(std::span<const std::byte> message, std::chrono::milliseconds slotWait)
{
    return posted(postSend(message, false, slotWait));
}

Result<void> RcLink::sendThen(std::span<const std::byte> message,
                              std::chrono::milliseconds slotWait, Done done)
{
    return posted(postSend(message, false, slotWait, std::move(done)));
}

Result<void> RcLink::rdmaWrite(const void* src, std::size_t length, std::uint32_t lkey,
                               RemoteBuffer dst, std::chrono::milliseconds wait)
{
    return awaited(postWrite(src, length, lkey, dst, true, wait), wait);
}

Result<void> RcLink::postWrite(const void* src, std::size_t length, std::uint32_t lkey,
                               RemoteBuffer dst, std::chrono::milliseconds slotWait)
{
    return posted(postWrite(src, length, lkey, dst, false, slotWait));
}

Result<void> RcLink::forceError() noexcept
{
    return qp_.toError();
}

void RcLink::linkDown(std::error_code why)
{
    if (down_.exchange(true, std::memory_order_acq_rel))
        return; // reported once
    {
        MutexLocker lock(mutex_); // wake slot waiters: they answer "link down"
    }
    slotFreed_.notify_all();
    if (handlers_.onLinkDown)
        handlers_.onLinkDown(why);
}

void RcLink::handle(const ibv_wc& wc)
{
    const std::error_code status = completionError(wc.status);
    if (wc.wr_id & kRecvTag) {
        const std::uint32_t index = static_cast<std::uint32_t>(wc.wr_id);
        if (status) {
            linkDown(status); // flushed: the QP is in error
            return;
        }
        if (wc.byte_len >= kMessageSize && wc.byte_len <= slotBytes_ && handlers_.onMessage)
            handlers_.onMessage(std::span(recvBuffers_.get() + index * slotBytes_, wc.byte_len));
        if (Result<void> r = postRecv(index); !r) // always re-post
            linkDown(r.error());
        return;
    }
    Done done;
    {
        MutexLocker lock(mutex_);
        Slot& s = slots_[wc.wr_id];
        if (s.waited) {
            s.completed = true; // the waiter frees it
            s.status = status;
        } else {
            done = std::move(s.done);
            s = {};
        }
    }
    slotFreed_.notify_all();
    if (done)
        done(!status);
    if (status)
        linkDown(status);
}

void RcLink::onCompletionEvent()
{
    ibv_cq* cq = nullptr;
    void* ctx = nullptr;
    errno = 0;
    if (ibv_get_cq_event(channel_.get(), &cq, &ctx) != 0) {
        if (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR || errno == 0)
            return; // nothing to read after all: wait for the next wakeup
        // The device went away (the channel reports an error). Stop
        // watching, or the level-triggered fd calls us for ever. unwatch is
        // the last touch of *this: the destructor may run once it returns.
        linkDown(std::make_error_code(std::errc::io_error));
        if (const int id = watchId_.load(std::memory_order_acquire); id >= 0)
            executor_->unwatch(id);
        return;
    }
    ibv_ack_cq_events(cq, 1);
    // Re-arm before draining, so nothing that lands meanwhile is missed.
    if (!cq_.requestNotify())
        linkDown(std::make_error_code(std::errc::io_error));
    ibv_wc wc[16];
    for (;;) {
        Result<int> n = cq_.poll(wc, 16);
        if (!n) {
            linkDown(n.error());
            break;
        }
        if (*n == 0)
            break;
        for (int i = 0; i < *n; ++i)
            handle(wc[i]);
    }
}

} // namespace smc::rdma
