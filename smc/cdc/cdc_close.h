// SPDX-License-Identifier: MIT
// Linux's SMC connection close states as a pure state machine: events in, state and CDC flags out.
#pragma once

#include <cstdint>
#include <string_view>

#include "smc/cdc/cdc_messages.h"

namespace smc::cdc
{

// Linux's enum smc_state values (connection notes §4). INIT and LISTEN belong to the
// socket before it has a connection and are not modelled; a connection starts Active.
enum class CloseState : std::uint8_t {
    Active = 1,
    Closed = 7,
    PeerCloseWait1 = 20, // we shut down (or closed); waiting for the peer
    PeerCloseWait2 = 21, // ... and the peer has shut down writing
    AppCloseWait1 = 22,  // the peer shut down or closed; waiting for the application
    AppCloseWait2 = 23,  // ... and the application has shut down writing
    AppFinCloseWait = 24,
    PeerFinCloseWait = 25,
    PeerAbortWait = 26, // Linux: abort waiting for its tx work; abort() here goes to Closed
    ProcessAbort = 27,  // the peer aborted; the application must still close
};

// Linux's name without the SMC_ prefix ("PEERCLOSEWAIT1").
std::string_view name(CloseState s) noexcept;

// What one event asks of the caller.
struct CloseAction {
    CloseState from = CloseState::Active;
    CloseState to = CloseState::Active;
    // Push corked data and wait until nothing is prepared (Linux: SO_LINGER or 2 s) before
    // the CDC below is sent.
    bool drain = false;
    // Flags to add to the stream (CdcStream::addConnFlags, sticky) and send in a CDC now;
    // none set: no CDC.
    ConnFlags send;

    bool sends() const noexcept { return send.any(); }
    friend bool operator==(const CloseAction&, const CloseAction&) = default;
};

// One connection's close state (§4.1 active close, §4.2 passive close, §4.3 abort). It
// remembers the flags it had sent and the ones received, and whether the application has
// released the socket, because Linux's transitions depend on them. Pure logic: no locks,
// no I/O, nothing blocks; the caller serialises calls and does what the action says.
class CloseMachine
{
public:
    CloseMachine() = default;
    // A machine in any state, e.g. for tests of single transitions.
    CloseMachine(CloseState state, ConnFlags sent, ConnFlags received, bool released) noexcept
        : state_(state), sent_(sent), received_(received), released_(released)
    {
    }

    CloseState state() const noexcept { return state_; }
    // The flags we hold (Linux local_tx_ctrl): sent, or after abort() only set.
    ConnFlags sent() const noexcept { return sent_; }
    ConnFlags received() const noexcept { return received_; }
    bool released() const noexcept { return released_; }

    // shutdown(SHUT_WR): Active -> PeerCloseWait1 and AppCloseWait1 -> AppCloseWait2, each
    // after a drain and with done_writing; no change in any other state.
    CloseAction shutdownWrite() noexcept;
    // close() (released = true) or shutdown(SHUT_RDWR) (released = false): Linux's
    // smc_close_active. The final CDC carries peer_conn_abort when unreadData (our ring
    // still holds bytes the application has not read), else peer_conn_closed.
    CloseAction close(bool unreadData, bool released = true) noexcept;
    // A CDC from the peer with connection flags (only its new flags matter; they are kept
    // sticky): Linux's smc_close_passive_work. Sends nothing.
    CloseAction peerFlags(ConnFlags flags) noexcept;
    // The link or the peer is gone (link group termination, failover impossible, failed
    // validation): every state goes to Closed and nothing can be sent; the abort flag is
    // recorded as ours so the stream refuses further sends (Linux smc_close_active_abort).
    CloseAction abort() noexcept;

private:
    CloseAction to(CloseState from, CloseState next, bool drain = false,
                   ConnFlags send = {}) noexcept;
    ConnFlags finalFlags(bool unreadData) const noexcept;
    bool sentAnyClose() const noexcept { return sent_.peerConnClosed || sent_.peerConnAbort; }
    bool receivedAnyClose() const noexcept
    {
        return received_.peerConnClosed || received_.peerConnAbort;
    }

    CloseState state_ = CloseState::Active;
    ConnFlags sent_;
    ConnFlags received_;
    bool released_ = false;
};

} // namespace smc::cdc
