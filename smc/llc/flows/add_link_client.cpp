// SPDX-License-Identifier: MIT
// ADD_LINK, client side: answering the server's ADD_LINK, and asking for one (REQ_ADD_LINK).
#include "smc/llc/flows/add_link.h"
#include "smc/llc/link_errors.h"

namespace smc
{

using llc::Message;
using llc::Type;

Result<void> AddLinkFlows::requestAddLink()
{
    if (core_.config().role != Role::Client)
        return LinkErrc::WrongRole; // a server adds links itself: addLink()
    Result<FlowToken> token = core_.acquireFlow(Flow::AddLink);
    if (!token)
        return token.error();
    unsigned via = kMaxLinks; // none: at max links
    llc::ReqAddLink req;
    bool busy;
    {
        MutexLocker lock(core_.mutex());
        busy = request_ != Request::Idle; // another caller waits for its answer
        if (core_.links().activeCount() < core_.maxLinks())
            via = core_.links().survivor().value_or(kMaxLinks);
        if (via != kMaxLinks)
            req.gids.push_back(core_.links()[via].local.gid); // our candidate device
        if (!busy)
            request_ = Request::Waiting;
    }
    if (busy)
        return std::make_error_code(std::errc::operation_in_progress);
    // Sent, the flow is released: the server's ADD_LINK is a remote flow
    // here, run by the event queue.
    Result<void> sent =
        via != kMaxLinks ? core_.send(via, {2, false, req}) : Result<void>(LinkErrc::NoLinkRoom);
    token->release();
    MutexLocker lock(core_.mutex());
    if (sent)
        (void)core_.changed().waitFor(lock, core_.config().timeouts.flowStart,
                                      [&]() SMC_REQUIRES(core_.mutex()) {
                                          return request_ != Request::Waiting || !core_.live();
                                      });
    const Request outcome = std::exchange(request_, Request::Idle);
    if (!sent)
        return sent;
    if (outcome == Request::Added)
        return {};
    return std::make_error_code(outcome == Request::Declined ? std::errc::connection_refused
                                                             : std::errc::timed_out);
}

void AddLinkFlows::answerAddLink(unsigned via, const llc::AddLink& req)
{
    const bool added = clientAddLink(via, req);
    MutexLocker lock(core_.mutex());
    if (request_ == Request::Waiting)
        request_ = added ? Request::Added : Request::Declined;
    core_.changed().notify_all();
}

bool AddLinkFlows::declined()
{
    MutexLocker lock(core_.mutex());
    if (core_.config().role != Role::Client || request_ != Request::Waiting)
        return false;
    request_ = Request::Declined;
    core_.changed().notify_all();
    return true;
}

bool AddLinkFlows::clientAddLink(unsigned via, const llc::AddLink& req)
{
    auto reject = [&] {
        llc::AddLink r = req;
        r.reject = true;
        r.rejectReason = 1; // no alternate path
        r.ext.reset();      // a v2 reject is 44 bytes
        (void)core_.send(via, {1, true, r});
        return false;
    };
    GroupType type;
    LinkAddress viaLocal, viaPeer;
    bool badId;
    {
        MutexLocker lock(core_.mutex());
        type = core_.links().type();
        viaLocal = core_.links()[via].local;
        viaPeer = core_.links()[via].peer;
        // Two links with one id would share rtoken columns and DELETE_LINKs;
        // 0 means "no link". Linux's server never numbers a link so (nor
        // does ours): rejected, before a QP is made.
        badId = req.linkId == 0 || core_.links().slotOf(req.linkId).has_value();
        if (badId)
            ++core_.stats().linkIdsRefused;
    }
    if (badId || req.mtu == 0 || type == GroupType::Symmetric ||
        (type == GroupType::Single && core_.maxLinks() <= 1))
        return reject();
    // The server offers the device it already uses: it has no other one.
    const bool peerSingle = req.gid == viaPeer.gid && req.mac == viaPeer.mac;
    const LinkAddress peer{req.qpn, req.psn, req.gid, req.mac, req.mtu};
    Result<NewLink> joined =
        core_.provider().join(peer, std::span(&viaLocal.gid, 1), core_.maxMessage());
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
        MutexLocker lock(core_.mutex());
        slot = core_.links().freeSlot(newType);
    }
    if (!slot)
        return reject();
    const LinkAddress local = joined->local;
    llc::AddLink answer{false,      0,         local.mac, local.gid,   local.qpn,
                        req.linkId, local.mtu, local.psn, std::nullopt};
    if (!core_.attach(*slot, std::move(*joined)))
        return reject();
    {
        MutexLocker lock(core_.mutex());
        core_.links()[*slot].linkId = req.linkId;
        core_.links()[*slot].peer = peer;
    }
    // The rkeys: v2 in both ADD_LINKs, v1 in ADD_LINK_CONTs; CONFIRM_LINK comes on the new
    // link after the last of ours.
    Result<Message> confirm = std::make_error_code(std::errc::protocol_error);
    if (core_.config().version >= 2) {
        if (!saveAddLinkRkeys(via, *slot, req.ext)) {
            core_.clearLink(*slot);
            return reject();
        }
        answer.ext = addLinkExt(via, *slot, local.gid);
        confirm = core_.exchange(via, {2, true, answer}, *slot, Type::ConfirmLink, false,
                                 core_.config().timeouts.wait);
    } else {
        Result<std::optional<Message>> last =
            exchangeRkeys(via, *slot, req.linkId, Message{1, true, answer});
        if (!last && last.error() != std::errc::protocol_error) {
            core_.clearLink(*slot); // the server gave up: it clears its end itself
            return false;
        }
        if (last)
            confirm = core_.exchange(via, **last, *slot, Type::ConfirmLink, false,
                                     core_.config().timeouts.wait);
    }
    bool confirmed = confirm.has_value();
    if (confirmed && std::get<llc::ConfirmLink>(confirm->body).linkId != req.linkId) {
        MutexLocker lock(core_.mutex());
        ++core_.stats().linkIdsRefused; // it confirms some other link
        confirmed = false;
    }
    if (!confirmed || !core_.send(*slot, {1, true, core_.confirmLink(local, req.linkId)})) {
        (void)core_.send(
            via,
            {1, false, llc::DeleteLink{false, false, req.linkId, llc::DeleteReason::LostPath}});
        core_.clearLink(*slot);
        return false;
    }
    (void)core_.activate(*slot, newType); // the server deletes an asymmetric link itself
    return true;
}

} // namespace smc
