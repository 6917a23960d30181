// SPDX-License-Identifier: MIT
// FirstLinkFlow: CONFIRM_LINK on the group's first link, the server asking, the client answering.
#include "smc/llc/flows/first_link.h"

namespace smc
{

using llc::Message;
using llc::Type;

Result<void> FirstLinkFlow::start(NewLink first)
{
    Result<FlowToken> token = core_.acquireFlow(Flow::FirstLink);
    if (!token)
        return token.error();
    if (Result<void> r = prepareFirst(*token, std::move(first)); !r)
        return r;
    return confirmPrepared(std::move(*token), std::nullopt);
}

Result<void> FirstLinkFlow::prepareFirst(const FlowToken& token, NewLink first)
{
    if (!token)
        return std::make_error_code(std::errc::invalid_argument);
    // The client waits for the server's CONFIRM_LINK from the first byte on.
    if (core_.config().role == Role::Client) {
        waiter_ = LlcCore::Waiter{};
        waiter_.type = Type::ConfirmLink; // a request, on slot 0
        core_.arm(waiter_);
    }
    Result<void> result = core_.attach(0, std::move(first));
    if (!result) {
        core_.disarm(waiter_);
        return result;
    }
    MutexLocker lock(core_.mutex());
    prepared_ = true;
    return {};
}

Result<void> FirstLinkFlow::confirmFirst(const std::optional<LinkAddress>& peer)
{
    Result<FlowToken> token = core_.acquireFlow(Flow::FirstLink);
    if (!token)
        return token.error();
    return confirmPrepared(std::move(*token), peer);
}

// CONFIRM_LINK on the prepared link 0; the server first connects it to `peer`
// (the client's address from CLC), if given.
Result<void> FirstLinkFlow::confirmPrepared(FlowToken token, const std::optional<LinkAddress>& peer)
{
    LinkAddress local;
    std::uint8_t linkId;
    std::shared_ptr<LinkChannel> channel;
    {
        MutexLocker lock(core_.mutex());
        if (!std::exchange(prepared_, false))
            return std::make_error_code(std::errc::invalid_argument);
        local = core_.links()[0].local;
        linkId = core_.links()[0].linkId;
        channel = core_.links()[0].channel;
    }
    Result<void> result;
    if (!channel) {
        result = std::make_error_code(std::errc::not_connected); // the group ended meanwhile
    } else if (core_.config().role == Role::Server) {
        if (peer)
            result = channel->connect(*peer);
        Result<Message> reply =
            result ? core_.exchange(0, {1, false, core_.confirmLink(local, linkId)}, 0,
                                    Type::ConfirmLink, true, core_.config().timeouts.wait)
                   : Result<Message>(result.error());
        if (reply) {
            const auto& r = std::get<llc::ConfirmLink>(reply->body);
            core_.adoptLimits(r.maxLinks, r.maxConns);
            MutexLocker lock(core_.mutex());
            core_.links()[0].peer = {r.qpn, 0, r.gid, r.mac, local.mtu};
        } else {
            result = reply.error();
        }
    } else {
        Result<Message> req = core_.await(waiter_, core_.config().timeouts.firstLink);
        if (!req) {
            result = req.error();
        } else if (std::get<llc::ConfirmLink>(req->body).linkId == 0) {
            MutexLocker lock(core_.mutex());
            ++core_.stats().linkIdsRefused; // 0 names no link
            result = std::make_error_code(std::errc::protocol_error);
        } else {
            const auto& c = std::get<llc::ConfirmLink>(req->body);
            core_.adoptLimits(c.maxLinks, c.maxConns);
            {
                MutexLocker lock(core_.mutex());
                core_.links()[0].linkId = c.linkId; // the server numbers links
                core_.links()[0].peer = {c.qpn, 0, c.gid, c.mac, local.mtu};
            }
            result = core_.send(0, {1, true, core_.confirmLink(local, c.linkId)});
        }
    }
    core_.disarm(waiter_);
    const bool attached = channel != nullptr;
    channel.reset(); // clearLink() waits for every other reference to go
    if (result) {
        MutexLocker lock(core_.mutex());
        core_.links()[0].state = LinkState::Active;
    } else if (attached) {
        core_.clearLink(0); // before the flow goes: no failover of a link never up
    }
    token.release();
    if (!result)
        return result;
    if (core_.config().role == Role::Server && core_.maxLinks() > 1)
        (void)adds_.addLink(); // a single link is fine if no second one can be had
    return {};
}

} // namespace smc
