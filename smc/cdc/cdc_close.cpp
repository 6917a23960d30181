// SPDX-License-Identifier: MIT
// The close state machine: active close, passive close and abort (connection notes §4).
#include "smc/cdc/cdc_close.h"

namespace smc::cdc
{

std::string_view name(CloseState s) noexcept
{
    switch (s) {
    case CloseState::Active:
        return "ACTIVE";
    case CloseState::Closed:
        return "CLOSED";
    case CloseState::PeerCloseWait1:
        return "PEERCLOSEWAIT1";
    case CloseState::PeerCloseWait2:
        return "PEERCLOSEWAIT2";
    case CloseState::AppCloseWait1:
        return "APPCLOSEWAIT1";
    case CloseState::AppCloseWait2:
        return "APPCLOSEWAIT2";
    case CloseState::AppFinCloseWait:
        return "APPFINCLOSEWAIT";
    case CloseState::PeerFinCloseWait:
        return "PEERFINCLOSEWAIT";
    case CloseState::PeerAbortWait:
        return "PEERABORTWAIT";
    case CloseState::ProcessAbort:
        return "PROCESSABORT";
    }
    return "?";
}

CloseAction CloseMachine::to(CloseState from, CloseState next, bool drain, ConnFlags send) noexcept
{
    state_ = next;
    sent_ |= send;
    return {from, next, drain, send};
}

// Linux smc_close_final: abort when unread data would be lost, else closed.
ConnFlags CloseMachine::finalFlags(bool unreadData) const noexcept
{
    ConnFlags f;
    (unreadData ? f.peerConnAbort : f.peerConnClosed) = true;
    return f;
}

CloseAction CloseMachine::shutdownWrite() noexcept
{
    const CloseState s = state_;
    ConnFlags doneWriting;
    doneWriting.peerDoneWriting = true;
    switch (s) {
    case CloseState::Active:
        return to(s, CloseState::PeerCloseWait1, true, doneWriting);
    case CloseState::AppCloseWait1:
        return to(s, CloseState::AppCloseWait2, true, doneWriting);
    default:
        return to(s, s);
    }
}

CloseAction CloseMachine::close(bool unreadData, bool released) noexcept
{
    released_ = released_ || released;
    const CloseState s = state_;
    // Linux: only done_writing went out so far (a shutdown, not yet a close).
    const bool onlyDoneWriting = sent_.peerDoneWriting && !sentAnyClose();
    switch (s) {
    case CloseState::Active:
        return to(s, CloseState::PeerCloseWait1, true, finalFlags(unreadData));
    case CloseState::AppFinCloseWait:
        return to(s, CloseState::Closed, false,
                  onlyDoneWriting ? finalFlags(unreadData) : ConnFlags{});
    case CloseState::AppCloseWait1:
    case CloseState::AppCloseWait2:
        // The peer only shut down writing: wait for its close in PeerFinCloseWait.
        return to(s, receivedAnyClose() ? CloseState::Closed : CloseState::PeerFinCloseWait,
                  !receivedAnyClose(), finalFlags(unreadData));
    case CloseState::PeerCloseWait1:
    case CloseState::PeerCloseWait2:
        return to(s, s, false, onlyDoneWriting ? finalFlags(unreadData) : ConnFlags{});
    case CloseState::ProcessAbort: {
        ConnFlags abort;
        abort.peerConnAbort = true;
        return to(s, CloseState::Closed, false, abort);
    }
    case CloseState::PeerAbortWait:
        return to(s, CloseState::Closed);
    case CloseState::PeerFinCloseWait:
    case CloseState::Closed:
        return to(s, s);
    }
    return to(s, s);
}

CloseAction CloseMachine::peerFlags(ConnFlags flags) noexcept
{
    received_ |= flags;
    const CloseState s = state_;
    if (received_.peerConnAbort) {
        switch (s) {
        case CloseState::Active:
        case CloseState::AppCloseWait1:
        case CloseState::AppFinCloseWait:
            return to(s, CloseState::ProcessAbort);
        case CloseState::PeerCloseWait1:
        case CloseState::PeerCloseWait2:
            return to(s, sent_.peerDoneWriting && !sentAnyClose() ? CloseState::ProcessAbort
                                                                  : CloseState::Closed);
        case CloseState::AppCloseWait2:
        case CloseState::PeerFinCloseWait:
        case CloseState::PeerAbortWait:
            return to(s, CloseState::Closed);
        case CloseState::ProcessAbort:
        case CloseState::Closed:
            return to(s, s);
        }
        return to(s, s);
    }
    if (!received_.any())
        return to(s, s);
    switch (s) {
    case CloseState::Active:
        return to(s, CloseState::AppCloseWait1);
    case CloseState::PeerCloseWait1:
    case CloseState::PeerCloseWait2: {
        CloseState next = s;
        if (s == CloseState::PeerCloseWait1 && received_.peerDoneWriting)
            next = CloseState::PeerCloseWait2;
        if (receivedAnyClose())
            next = released_ && sentAnyClose() ? CloseState::Closed : CloseState::AppFinCloseWait;
        return to(s, next);
    }
    case CloseState::PeerFinCloseWait:
        return to(s, receivedAnyClose() ? CloseState::Closed : s);
    default: // AppCloseWait1/2 (the application's close completes them), the rest: nothing
        return to(s, s);
    }
}

CloseAction CloseMachine::abort() noexcept
{
    const CloseState s = state_;
    sent_.peerConnAbort = true;
    return to(s, CloseState::Closed);
}

} // namespace smc::cdc
