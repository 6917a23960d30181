// SPDX-License-Identifier: MIT
// CONFIRM_LINK: the group's first link (the server asks, the client answers) and its limits.
#include "smc/llc/llc_engine.h"

namespace smc
{

using llc::Message;
using llc::Type;

// One CONFIRM_LINK for every use (first link, either side; a new link's last
// step): our end of the link and the limits we offer (bytes 34/35).
llc::ConfirmLink LlcEngine::confirmLink(const LinkAddress& local, std::uint8_t linkId) const
{
    return {local.mac,
            local.gid,
            local.qpn,
            linkId,
            {},
            static_cast<std::uint8_t>(maxLinks_.load()),
            static_cast<std::uint8_t>(maxConns_.load())};
}

// Each side keeps the smaller of both limits. A peer that sends 0 (Linux v1:
// no max conns; no max links) leaves ours as they are; out-of-range values
// are clamped to Linux's ranges.
void LlcEngine::adoptLimits(std::uint8_t peerLinks, std::uint8_t peerConns)
{
    if (peerLinks != 0)
        maxLinks_ = std::min<unsigned>(maxLinks_, std::max<unsigned>(peerLinks, 1));
    if (peerConns != 0)
        maxConns_ = std::min<unsigned>(maxConns_, std::max<unsigned>(peerConns, 16));
}

Result<void> LlcEngine::start(NewLink first)
{
    Result<FlowToken> token = acquireFlow(Flow::FirstLink);
    if (!token)
        return token.error();
    if (Result<void> r = prepareFirst(*token, std::move(first)); !r)
        return r;
    return confirmPrepared(std::move(*token), std::nullopt);
}

Result<void> LlcEngine::prepareFirst(const FlowToken& token, NewLink first)
{
    if (!token)
        return std::make_error_code(std::errc::invalid_argument);
    // The client waits for the server's CONFIRM_LINK from the first byte on.
    if (config_.role == Role::Client) {
        MutexLocker lock(mutex_);
        firstWaiter_ = Waiter{0, Type::ConfirmLink, false, std::nullopt, false};
        waiter_ = &firstWaiter_;
    }
    Result<void> result = attach(0, std::move(first));
    MutexLocker lock(mutex_);
    if (!result) {
        waiter_ = nullptr;
        return result;
    }
    firstPrepared_ = true;
    return {};
}

Result<void> LlcEngine::confirmFirst(const std::optional<LinkAddress>& peer)
{
    Result<FlowToken> token = acquireFlow(Flow::FirstLink);
    if (!token)
        return token.error();
    return confirmPrepared(std::move(*token), peer);
}

// CONFIRM_LINK on the prepared link 0; the server first connects it to `peer`
// (the client's address from CLC), if given.
Result<void> LlcEngine::confirmPrepared(FlowToken token, const std::optional<LinkAddress>& peer)
{
    LinkAddress local;
    std::uint8_t linkId;
    std::shared_ptr<LinkChannel> channel;
    {
        MutexLocker lock(mutex_);
        if (!std::exchange(firstPrepared_, false))
            return std::make_error_code(std::errc::invalid_argument);
        local = links_[0].local;
        linkId = links_[0].linkId;
        channel = links_[0].channel;
    }
    Result<void> result;
    if (!channel) {
        result = std::make_error_code(std::errc::not_connected); // the group ended meanwhile
    } else if (config_.role == Role::Server) {
        if (peer)
            result = channel->connect(*peer);
        Result<Message> reply = result ? exchange(0, {1, false, confirmLink(local, linkId)}, 0,
                                                  Type::ConfirmLink, true, config_.timeouts.wait)
                                       : Result<Message>(result.error());
        if (reply) {
            const auto& r = std::get<llc::ConfirmLink>(reply->body);
            adoptLimits(r.maxLinks, r.maxConns);
            MutexLocker lock(mutex_);
            links_[0].peer = {r.qpn, 0, r.gid, r.mac, local.mtu};
        } else {
            result = reply.error();
        }
    } else {
        Result<Message> req = await(firstWaiter_, config_.timeouts.firstLink);
        if (!req) {
            result = req.error();
        } else if (std::get<llc::ConfirmLink>(req->body).linkId == 0) {
            MutexLocker lock(mutex_);
            ++stats_.linkIdsRefused; // 0 names no link
            result = std::make_error_code(std::errc::protocol_error);
        } else {
            const auto& c = std::get<llc::ConfirmLink>(req->body);
            adoptLimits(c.maxLinks, c.maxConns);
            {
                MutexLocker lock(mutex_);
                links_[0].linkId = c.linkId; // the server numbers links
                links_[0].peer = {c.qpn, 0, c.gid, c.mac, local.mtu};
            }
            result = send(0, {1, true, confirmLink(local, c.linkId)});
        }
    }
    {
        MutexLocker lock(mutex_);
        if (waiter_ == &firstWaiter_)
            waiter_ = nullptr;
    }
    const bool attached = channel != nullptr;
    channel.reset(); // clearLink() waits for every other reference to go
    if (result) {
        MutexLocker lock(mutex_);
        links_[0].state = LinkState::Active;
    } else if (attached) {
        clearLink(0); // before the flow goes: no failover of a link never up
    }
    token.release();
    if (!result)
        return result;
    if (config_.role == Role::Server && maxLinks_ > 1)
        (void)addLink(); // a single link is fine if no second one can be had
    return {};
}

} // namespace smc
