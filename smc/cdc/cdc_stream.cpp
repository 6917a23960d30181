// SPDX-License-Identifier: MIT
// CdcStream: checked cursor updates, the window update rule, and the CDC to send.
#include "smc/cdc/cdc_stream.h"

namespace smc::cdc
{

Result<CdcStream> CdcStream::create(std::size_t ringSize, std::size_t peerRingSize,
                                    std::uint32_t peerToken) noexcept
{
    if (ringSize == 0 || ringSize > kMaxRingSize || peerRingSize == 0 ||
        peerRingSize > kMaxRingSize)
        return CdcErrc::BadRingSize;
    return CdcStream(ringSize, peerRingSize, peerToken);
}

std::size_t CdcStream::sendSpace() const noexcept
{
    // producer_ is at most one ring ahead of peerConsumer_ (produce and onPeerCdc keep it).
    return peerRingSize_ - diff(peerRingSize_, peerConsumer_, producer_);
}

Result<void> CdcStream::produce(std::size_t n) noexcept
{
    if (n > sendSpace())
        return CdcErrc::ExceedsSpace;
    producer_ = advance(producer_, n, peerRingSize_);
    return {};
}

Result<void> CdcStream::consume(std::size_t n) noexcept
{
    if (n > bytesToRcv_)
        return CdcErrc::ExceedsReadable;
    consumer_ = advance(consumer_, n, ringSize_);
    bytesToRcv_ -= n;
    return {};
}

std::size_t CdcStream::toConfirm() const noexcept
{
    return diff(ringSize_, advertised_, consumer_);
}

Result<void> CdcStream::onPeerCdc(const CdcMessage& m) noexcept
{
    if (m.producerFlags.failoverValidation)
        return {};
    // Producer: the peer may write only into space we advertised, so it is at most one
    // ring ahead of advertised_; and it may not fall behind what it told us before.
    const Result<std::size_t> written = validateCursor(ringSize_, advertised_, m.producer);
    if (!written)
        return written.error();
    const std::size_t consumedSince = toConfirm();
    if (*written < consumedSince + bytesToRcv_)
        return CdcErrc::CursorBackwards;
    // Consumer: not behind the last one, and not beyond what we produced.
    const Result<std::size_t> freed = validateCursor(peerRingSize_, peerConsumer_, m.consumer);
    if (!freed)
        return freed.error();
    if (*freed > diff(peerRingSize_, peerConsumer_, producer_))
        return CdcErrc::CursorBeyondProducer;

    peerProducer_ = m.producer;
    bytesToRcv_ = *written - consumedSince;
    peerConsumer_ = m.consumer;
    peerFlags_ = m.producerFlags;
    received_ |= m.connFlags;
    return {};
}

bool CdcStream::wantConsumerUpdate() const noexcept
{
    if (peerFlags_.consCursUpdReq)
        return true;
    if (toConfirm() <= windowUpdateLimit(ringSize_))
        return false;
    // What the peer believes is free: our ring minus its data beyond what we advertised.
    const std::size_t senderFree = ringSize_ - diffLarge(ringSize_, advertised_, peerProducer_);
    return senderFree <= ringSize_ / 2 || peerFlags_.writeBlocked;
}

CdcMessage CdcStream::nextCdc(std::size_t pending) noexcept
{
    CdcMessage m;
    m.seq = ++seq_;
    m.token = peerToken_;
    m.producer = producer_;
    m.consumer = consumer_;
    const std::size_t space = sendSpace();
    m.producerFlags.writeBlocked = pending > space || space == 0;
    m.connFlags = sent_;
    advertised_ = consumer_;
    peerFlags_.consCursUpdReq = false;
    if (bytesToRcv_ == 0)
        peerFlags_.writeBlocked = false;
    return m;
}

} // namespace smc::cdc
