// SPDX-License-Identifier: MIT
// ADD_LINK, server side: a new link on an alternate device (or the same: asymmetric).
#include "smc/llc/flows/add_link.h"
#include "smc/llc/link_errors.h"

namespace smc
{

using llc::Message;
using llc::Type;

Result<void> AddLinkFlows::addLink()
{
    if (core_.config().role != Role::Server)
        return LinkErrc::WrongRole; // clients ask with requestAddLink()
    Result<FlowToken> token = core_.acquireFlow(Flow::AddLink);
    if (!token)
        return token.error();
    bool offered = false;
    return serverAddLink(offered);
}

Result<void> AddLinkFlows::serverAddLink(bool& offered)
{
    std::optional<unsigned> via;
    GroupType type;
    LinkAddress viaLocal, viaPeer;
    {
        MutexLocker lock(core_.mutex());
        via = core_.links().survivor();
        type = core_.links().type();
        if (via) {
            viaLocal = core_.links()[*via].local;
            viaPeer = core_.links()[*via].peer;
        }
    }
    if (!via)
        return LinkErrc::NoSuchLink;
    // Linux: a symmetric group is complete; a single one grows only if two
    // links were agreed; an asymmetric one only by a symmetric link, which
    // then replaces the asymmetric one.
    if (type == GroupType::Symmetric || (type == GroupType::Single && core_.maxLinks() <= 1))
        return LinkErrc::NoLinkRoom;
    // An alternate device if we have one; else the same device: asymmetric.
    Result<NewLink> made = core_.provider().create(std::span(&viaLocal.gid, 1), core_.maxMessage());
    if (!made)
        return made.error();
    GroupType newType =
        made->local.gid == viaLocal.gid ? GroupType::AsymmetricLocal : GroupType::Symmetric;
    if (type != GroupType::Single && newType != GroupType::Symmetric)
        return LinkErrc::NoLinkRoom;
    unsigned newSlot;
    {
        MutexLocker lock(core_.mutex());
        newSlot = core_.links().freeSlot(newType).value_or(kMaxLinks);
    }
    if (newSlot == kMaxLinks)
        return LinkErrc::NoLinkRoom;
    const LinkAddress local = made->local;
    if (Result<void> r = core_.attach(newSlot, std::move(*made)); !r)
        return r;
    auto fail = [&](std::error_code ec) {
        core_.clearLink(newSlot);
        return ec;
    };
    llc::AddLink req{false, 0,         local.mac, local.gid,   local.qpn,
                     0,     local.mtu, local.psn, std::nullopt};
    {
        MutexLocker lock(core_.mutex());
        req.linkId = core_.links()[newSlot].linkId;
    }
    const bool v2 = core_.config().version >= 2;
    if (v2) // the rkeys travel with the request (no ADD_LINK_CONT)
        req.ext = addLinkExt(*via, newSlot, local.gid);
    offered = true;
    Result<Message> resp = core_.exchange(*via, {1, false, req}, *via, Type::AddLink, true,
                                          core_.config().timeouts.wait);
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
            MutexLocker lock(core_.mutex());
            core_.links()[newSlot].peer = far;
            channel = core_.links()[newSlot].channel;
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
    Result<Message> confirmed =
        core_.exchange(newSlot, {1, false, core_.confirmLink(local, req.linkId)}, newSlot,
                       Type::ConfirmLink, true, core_.config().timeouts.wait);
    if (!confirmed) {
        (void)core_.send(
            *via,
            {1, false, llc::DeleteLink{false, false, req.linkId, llc::DeleteReason::LostPath}});
        return fail(confirmed.error());
    }
    if (std::optional<unsigned> asym = core_.activate(newSlot, newType)) // a symmetric pair now:
        deletes_.failover(*asym, true,
                          llc::DeleteReason::NoAsymmetricNeeded); // the asymmetric link goes
    return {};
}

} // namespace smc
