// SPDX-License-Identifier: MIT
// ADD_LINK, server side: a new link on an alternate device (or the same: asymmetric).
#include "smc/llc/link_errors.h"
#include "smc/llc/llc_engine.h"

namespace smc
{

using llc::Message;
using llc::Type;

Result<void> LlcEngine::addLink()
{
    if (config_.role != Role::Server)
        return LinkErrc::WrongRole; // clients ask with requestAddLink()
    Result<FlowToken> token = acquireFlow(Flow::AddLink);
    if (!token)
        return token.error();
    bool offered = false;
    return serverAddLink(offered);
}

// Holding the flow token. `offered`: ADD_LINK went out (a REQ_ADD_LINK that
// never got that far is declined by the caller).
Result<void> LlcEngine::serverAddLink(bool& offered)
{
    std::optional<unsigned> via;
    GroupType type;
    LinkAddress viaLocal, viaPeer;
    {
        MutexLocker lock(mutex_);
        via = links_.survivor();
        type = links_.type();
        if (via) {
            viaLocal = links_[*via].local;
            viaPeer = links_[*via].peer;
        }
    }
    if (!via)
        return LinkErrc::NoSuchLink;
    // Linux: a symmetric group is complete; a single one grows only if two
    // links were agreed; an asymmetric one only by a symmetric link, which
    // then replaces the asymmetric one.
    if (type == GroupType::Symmetric || (type == GroupType::Single && maxLinks_ <= 1))
        return LinkErrc::NoLinkRoom;
    // An alternate device if we have one; else the same device: asymmetric.
    Result<NewLink> made = provider_.create(std::span(&viaLocal.gid, 1), maxMessage());
    if (!made)
        return made.error();
    GroupType newType =
        made->local.gid == viaLocal.gid ? GroupType::AsymmetricLocal : GroupType::Symmetric;
    if (type != GroupType::Single && newType != GroupType::Symmetric)
        return LinkErrc::NoLinkRoom;
    unsigned newSlot;
    {
        MutexLocker lock(mutex_);
        newSlot = links_.freeSlot(newType).value_or(kMaxLinks);
    }
    if (newSlot == kMaxLinks)
        return LinkErrc::NoLinkRoom;
    const LinkAddress local = made->local;
    if (Result<void> r = attach(newSlot, std::move(*made)); !r)
        return r;
    auto fail = [&](std::error_code ec) {
        clearLink(newSlot);
        return ec;
    };
    llc::AddLink req{false, 0,         local.mac, local.gid,   local.qpn,
                     0,     local.mtu, local.psn, std::nullopt};
    {
        MutexLocker lock(mutex_);
        req.linkId = links_[newSlot].linkId;
    }
    const bool v2 = config_.version >= 2;
    if (v2) // the rkeys travel with the request (no ADD_LINK_CONT)
        req.ext = addLinkExt(*via, newSlot, local.gid);
    offered = true;
    Result<Message> resp =
        exchange(*via, {1, false, req}, *via, Type::AddLink, true, config_.timeouts.wait);
    if (!resp)
        return fail(resp.error());
    const auto& answer = std::get<llc::AddLink>(resp->body);
    if (answer.reject)
        return fail(std::make_error_code(std::errc::connection_refused));
    // The peer answered from the device it already uses: it has no other.
    if (type == GroupType::Single && newType == GroupType::Symmetric && answer.gid == viaPeer.gid &&
        answer.mac == viaPeer.mac)
        newType = GroupType::AsymmetricPeer;
    const LinkAddress far{answer.qpn, answer.psn, answer.gid, answer.mac, answer.mtu};
    Result<void> connected;
    {
        std::shared_ptr<LinkChannel> channel; // dropped before fail() clears the link
        {
            MutexLocker lock(mutex_);
            links_[newSlot].peer = far;
            channel = links_[newSlot].channel;
        }
        connected = channel->connect(far);
    }
    if (!connected)
        return fail(connected.error());
    if (v2) {
        if (!saveAddLinkRkeys(*via, newSlot, answer.ext))
            return fail(std::make_error_code(std::errc::protocol_error));
    } else if (Result<std::optional<Message>> r =
                   exchangeRkeys(*via, newSlot, req.linkId, std::nullopt);
               !r) {
        return fail(r.error());
    }
    // CONFIRM_LINK travels on the new link itself.
    Result<Message> confirmed = exchange(newSlot, {1, false, confirmLink(local, req.linkId)},
                                         newSlot, Type::ConfirmLink, true, config_.timeouts.wait);
    if (!confirmed) {
        (void)send(*via, {1, false,
                          llc::DeleteLink{false, false, req.linkId, llc::DeleteReason::LostPath}});
        return fail(confirmed.error());
    }
    if (std::optional<unsigned> asym = activate(newSlot, newType))    // a symmetric pair now:
        failover(*asym, true, llc::DeleteReason::NoAsymmetricNeeded); // the asymmetric link goes
    return {};
}

// The new link is ACTIVE with its type; returns the asymmetric link that a
// new symmetric one makes unnecessary, if any.
std::optional<unsigned> LlcEngine::activate(unsigned slot, GroupType newType)
{
    MutexLocker lock(mutex_);
    links_.activate(slot, newType);
    if (newType == GroupType::Symmetric)
        return links_.asymmetricOther(slot);
    return std::nullopt;
}

} // namespace smc
