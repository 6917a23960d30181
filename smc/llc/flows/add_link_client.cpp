// SPDX-License-Identifier: MIT
// ADD_LINK, client side: answering the server's ADD_LINK, and asking for one (REQ_ADD_LINK).
#include "smc/llc/link_errors.h"
#include "smc/llc/llc_engine.h"

namespace smc
{

using llc::Message;
using llc::Type;

Result<void> LlcEngine::requestAddLink()
{
    if (config_.role != Role::Client)
        return LinkErrc::WrongRole; // a server adds links itself: addLink()
    Result<FlowToken> token = acquireFlow(Flow::AddLink);
    if (!token)
        return token.error();
    unsigned via = kMaxLinks; // none: at max links
    llc::ReqAddLink req;
    bool busy;
    {
        MutexLocker lock(mutex_);
        busy = reqAddLink_ != ReqAddLink::Idle; // another caller waits for its answer
        if (links_.activeCount() < maxLinks_)
            via = links_.survivor().value_or(kMaxLinks);
        if (via != kMaxLinks)
            req.gids.push_back(links_[via].local.gid); // our candidate device
        if (!busy)
            reqAddLink_ = ReqAddLink::Waiting;
    }
    if (busy)
        return std::make_error_code(std::errc::operation_in_progress);
    // Sent, the flow is released: the server's ADD_LINK is a remote flow
    // here, run by the event queue.
    Result<void> sent =
        via != kMaxLinks ? send(via, {2, false, req}) : Result<void>(LinkErrc::NoLinkRoom);
    token->release();
    MutexLocker lock(mutex_);
    if (sent)
        (void)changed_.waitFor(lock, config_.timeouts.flowStart, [&]() SMC_REQUIRES(mutex_) {
            return reqAddLink_ != ReqAddLink::Waiting || terminated_ || stopping_;
        });
    const ReqAddLink outcome = std::exchange(reqAddLink_, ReqAddLink::Idle);
    if (!sent)
        return sent;
    if (outcome == ReqAddLink::Added)
        return {};
    return std::make_error_code(outcome == ReqAddLink::Declined ? std::errc::connection_refused
                                                                : std::errc::timed_out);
}

// Holding the flow token (the event queue runs it). True: the link is up.
bool LlcEngine::clientAddLink(unsigned via, const llc::AddLink& req)
{
    auto reject = [&] {
        llc::AddLink r = req;
        r.reject = true;
        r.rejectReason = 1; // no alternate path
        r.ext.reset();      // a v2 reject is 44 bytes
        (void)send(via, {1, true, r});
        return false;
    };
    GroupType type;
    LinkAddress viaLocal, viaPeer;
    bool badId;
    {
        MutexLocker lock(mutex_);
        type = links_.type();
        viaLocal = links_[via].local;
        viaPeer = links_[via].peer;
        // Two links with one id would share rtoken columns and DELETE_LINKs;
        // 0 means "no link". Linux's server never numbers a link so (nor
        // does ours): rejected, before a QP is made.
        badId = req.linkId == 0 || links_.slotOf(req.linkId).has_value();
        if (badId)
            ++stats_.linkIdsRefused;
    }
    if (badId || req.mtu == 0 || type == GroupType::Symmetric ||
        (type == GroupType::Single && maxLinks_ <= 1))
        return reject();
    // The server offers the device it already uses: it has no other one.
    const bool peerSingle = req.gid == viaPeer.gid && req.mac == viaPeer.mac;
    const LinkAddress peer{req.qpn, req.psn, req.gid, req.mac, req.mtu};
    Result<NewLink> joined = provider_.join(peer, std::span(&viaLocal.gid, 1), maxMessage());
    if (!joined)
        return reject();
    const bool alternate = joined->local.gid != viaLocal.gid;
    if (peerSingle && !alternate)
        return reject(); // neither side has a second device (Linux)
    const GroupType newType = peerSingle  ? GroupType::AsymmetricPeer
                              : alternate ? GroupType::Symmetric
                                          : GroupType::AsymmetricLocal;
    std::optional<unsigned> slot;
    if (type == GroupType::Single || newType == GroupType::Symmetric) {
        MutexLocker lock(mutex_);
        slot = links_.freeSlot(newType);
    }
    if (!slot)
        return reject();
    const LinkAddress local = joined->local;
    llc::AddLink answer{false,      0,         local.mac, local.gid,   local.qpn,
                        req.linkId, local.mtu, local.psn, std::nullopt};
    if (!attach(*slot, std::move(*joined)))
        return reject();
    {
        MutexLocker lock(mutex_);
        links_[*slot].linkId = req.linkId;
        links_[*slot].peer = peer;
    }
    // The rkeys: v2 in both ADD_LINKs, v1 in ADD_LINK_CONTs; CONFIRM_LINK comes on the new
    // link after the last of ours.
    Result<Message> confirm = std::make_error_code(std::errc::protocol_error);
    if (config_.version >= 2) {
        if (!saveAddLinkRkeys(via, *slot, req.ext)) {
            clearLink(*slot);
            return reject();
        }
        answer.ext = addLinkExt(via, *slot, local.gid);
        confirm = exchange(via, {2, true, answer}, *slot, Type::ConfirmLink, false,
                           config_.timeouts.wait);
    } else {
        Result<std::optional<Message>> last =
            exchangeRkeys(via, *slot, req.linkId, Message{1, true, answer});
        if (!last && last.error() != std::errc::protocol_error) {
            clearLink(*slot); // the server gave up: it clears its end itself
            return false;
        }
        if (last)
            confirm = exchange(via, **last, *slot, Type::ConfirmLink, false, config_.timeouts.wait);
    }
    bool confirmed = confirm.has_value();
    if (confirmed && std::get<llc::ConfirmLink>(confirm->body).linkId != req.linkId) {
        MutexLocker lock(mutex_);
        ++stats_.linkIdsRefused; // it confirms some other link
        confirmed = false;
    }
    if (!confirmed || !send(*slot, {1, true, confirmLink(local, req.linkId)})) {
        (void)send(via, {1, false,
                         llc::DeleteLink{false, false, req.linkId, llc::DeleteReason::LostPath}});
        clearLink(*slot);
        return false;
    }
    (void)activate(*slot, newType); // the server deletes an asymmetric link itself
    return true;
}

} // namespace smc
