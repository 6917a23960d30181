// SPDX-License-Identifier: MIT
// LinkGroup first contact in CLC's order: the first link prepared, a connection on it, then
// CONFIRM_LINK.
#include "smc/core/link_group.h"

namespace smc
{

Result<LinkGroup::Handshake> LinkGroup::beginFirstContact(NewLink first, std::size_t rmbBytes,
                                                          std::size_t sndbufBytes)
{
    if (llc_->terminated())
        return std::make_error_code(std::errc::not_connected);
    if (llc_->linkId(0) != 0 || llc_->activeLinks() != 0 || conns_.size() != 0)
        return std::make_error_code(std::errc::invalid_argument); // not a new group
    Result<FlowToken> token = llc_->acquireFlow(Flow::FirstLink);
    if (!token)
        return token.error();
    if (Result<void> r = llc_->prepareFirst(*token, std::move(first)); !r)
        return r.error();
    // Slot 0, ACTIVATING: openConnection() would only take an ACTIVE link.
    Result<ConnectionPtr> conn =
        openWithBuffers(rmbBytes, sndbufBytes,
                        [](const ConnectionTable::Loads&) { return std::optional<unsigned>(0); });
    if (!conn)
        return conn.error();
    // The token goes with the Handshake: complete() or abandon() release it, and
    // confirmFirstLink() takes one of its own.
    return Handshake(this, std::move(*conn), std::move(*token));
}

Result<void> LinkGroup::confirmFirstLink(const std::optional<LinkAddress>& peer)
{
    return llc_->confirmFirst(peer);
}

} // namespace smc
