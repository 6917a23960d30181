// SPDX-License-Identifier: MIT
// CdcState: what both SMC data paths keep of a connection's CDC side, and the rules they share.
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <system_error>

#include "base/result.h"
#include "smc/cdc/cdc_close.h"
#include "smc/cdc/cdc_stream.h"
#include "smc/conn/connection_info.h"

namespace smc::net
{

// One SMC connection's CDC side as SMC-D and SMC-R both keep it: the stream and the close
// machine, whether close() ran or the connection aborted, what was produced and not yet
// announced, the byte counts; and the rules both paths decide by, written once here. Not
// thread-safe: its connection's mutex guards it.
struct CdcState {
    CdcState(cdc::CdcStream s, std::size_t autocork) : stream(s), autocorkBytes(autocork) {}

    cdc::CdcStream stream;
    cdc::CloseMachine close;
    bool closing = false;        // close() began: no new copy into the peer's ring
    bool closed = false;         // close() ran: the buffers are going back
    bool aborted = false;        // the peer broke the protocol or died, or we aborted
    std::size_t unannounced = 0; // produced, not yet in a CDC
    bool held = false;           // and held back by the sender (MSG_MORE, TCP_CORK)
    std::uint64_t bytesSent = 0;
    std::uint64_t bytesReceived = 0;
    const std::size_t autocorkBytes; // SocketOptions::autocorkBytes

    // Why a send cannot go on: not_connected (closed), connection_reset (an abort either
    // way), broken_pipe (we shut down writing, or the peer closed); none if it can.
    std::error_code sendRefusal() const noexcept
    {
        const cdc::ConnFlags peer = stream.peerConnFlags();
        if (closed || closing)
            return std::make_error_code(std::errc::not_connected);
        if (aborted || peer.peerConnAbort)
            return std::make_error_code(std::errc::connection_reset);
        if (stream.sentConnFlags().any() || peer.peerConnClosed)
            return std::make_error_code(std::errc::broken_pipe);
        return {};
    }

    // A receive with nothing to read: connection_reset after an abort, 0 at the peer's
    // orderly end, nullopt while more may come.
    std::optional<Result<std::size_t>> endOfStream() const
    {
        const cdc::ConnFlags peer = stream.peerConnFlags();
        if (aborted || peer.peerConnAbort)
            return Result<std::size_t>(std::make_error_code(std::errc::connection_reset));
        if (peer.any())
            return Result<std::size_t>(std::size_t{0});
        return std::nullopt;
    }

    // What `s` (the stream, or a copy that took in the peer's latest CDC) says of an open
    // connection: a receive would not block; the peer is gone and left nothing to read.
    static bool readable(const cdc::CdcStream& s) noexcept
    {
        return s.readable() > 0 || s.peerConnFlags().any();
    }
    static bool abandoned(const cdc::CdcStream& s) noexcept
    {
        const cdc::ConnFlags peer = s.peerConnFlags();
        return peer.peerConnAbort || (peer.peerConnClosed && s.readable() == 0);
    }

    // Its share of what smcss shows: the close state, cursors and byte counts.
    void fill(ConnectionInfo& info) const
    {
        info.state = closed ? "CLOSED" : std::string(cdc::name(close.state()));
        const cdc::Cursor p = stream.producer();
        const cdc::Cursor c = stream.consumer();
        info.producerWrap = p.wrap;
        info.producerCount = p.count;
        info.consumerWrap = c.wrap;
        info.consumerCount = c.count;
        info.bytesSent = bytesSent;
        info.bytesReceived = bytesReceived;
    }

    // A send is leaving: whether what is unannounced must be announced now. It waits while
    // the send holds it back (`hold`: MSG_MORE, corked), or, up to min(autocorkBytes,
    // `limit`), while a send queued behind it or the completion of a CDC on its way
    // (`behind`) will announce it; never when the peer's ring is full (only its reading can
    // make room, and it must hear of the bytes to read them).
    bool announceNow(bool hold, bool behind, std::size_t limit) const noexcept
    {
        if (unannounced == 0 || closed || aborted)
            return false;
        if (stream.sendSpace() == 0)
            return true;
        return !hold && !(behind && unannounced <= std::min(autocorkBytes, limit));
    }

    // The last CDC on its way completed: what autocorking held waits no more (what the
    // sender holds back waits on).
    bool pushDue() const noexcept { return unannounced > 0 && !held && !closed && !aborted; }
};

} // namespace smc::net
