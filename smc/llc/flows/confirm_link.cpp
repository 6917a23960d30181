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
    const LinkAddress local = first.local;
    // The client waits for the server's CONFIRM_LINK from the first byte on.
    Waiter firstWaiter{0, Type::ConfirmLink, false, std::nullopt, false};
    if (config_.role == Role::Client) {
        MutexLocker lock(mutex_);
        waiter_ = &firstWaiter;
    }
    Result<void> result = attach(0, std::move(first));
    if (!result) {
        MutexLocker lock(mutex_);
        waiter_ = nullptr;
    } else if (config_.role == Role::Server) {
        std::uint8_t linkId;
        {
            MutexLocker lock(mutex_);
            linkId = links_[0].linkId;
        }
        Result<Message> reply = exchange(0, {1, false, confirmLink(local, linkId)}, 0,
                                         Type::ConfirmLink, true, config_.timeouts.firstLink);
        if (reply) {
            const auto& r = std::get<llc::ConfirmLink>(reply->body);
            adoptLimits(r.maxLinks, r.maxConns);
            MutexLocker lock(mutex_);
            links_[0].peer = {r.qpn, 0, r.gid, r.mac, local.mtu};
        } else {
            result = reply.error();
        }
    } else {
        Result<Message> req = await(firstWaiter, config_.timeouts.firstLink);
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
    if (result) {
        MutexLocker lock(mutex_);
        links_[0].state = LinkState::Active;
    } else {
        clearLink(0); // before the flow goes: no failover of a link never up
    }
    token->release();
    if (!result)
        return result;
    if (config_.role == Role::Server && maxLinks_ > 1)
        (void)addLink(); // a single link is fine if no second one can be had
    return {};
}

} // namespace smc
