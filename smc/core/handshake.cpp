// SPDX-License-Identifier: MIT
// LinkGroup::Handshake: a connection's share of CLC, holding the group's RKEY flow until done.
#include "smc/core/conn_errors.h"
#include "smc/core/link_group.h"

namespace smc
{

Result<LinkGroup::Handshake> LinkGroup::beginHandshake(std::size_t rmbBytes,
                                                       std::size_t sndbufBytes,
                                                       std::optional<std::uint8_t> linkId)
{
    Result<FlowToken> token = llc_->acquireFlow(Flow::Rkey);
    if (!token)
        return token.error();
    Result<Connection*> conn = openConnection(rmbBytes, sndbufBytes, linkId);
    if (!conn)
        return conn.error();
    return Handshake(this, *conn, std::move(*token));
}

LinkGroup::Handshake& LinkGroup::Handshake::operator=(Handshake&& other) noexcept
{
    if (this != &other) {
        abandon();
        group_ = std::exchange(other.group_, nullptr);
        conn_ = std::exchange(other.conn_, nullptr);
        token_ = std::move(other.token_);
    }
    return *this;
}

RtokenTable::Rtoken LinkGroup::Handshake::rtoken() const noexcept
{
    const LinkRegistration& r = conn_->rmb->registration(conn_->link());
    return {r.rkey, r.addr};
}

void LinkGroup::Handshake::abandon() noexcept
{
    if (LinkGroup* g = std::exchange(group_, nullptr)) {
        token_.release(); // closeConnection takes it again for DELETE_RKEY
        (void)g->closeConnection(*conn_);
    }
}

Result<void> LinkGroup::Handshake::complete(RtokenTable::Rtoken peerRmb)
{
    if (group_ == nullptr)
        return ConnErrc::HandshakeDone;
    if (group_->terminated()) {
        abandon();
        return std::make_error_code(std::errc::not_connected);
    }
    RtokenTable& rtokens = group_->llc_->rtokens();
    const unsigned link = conn_->link(); // stable: we hold the flow
    Result<unsigned> row = rtokens.add(link, peerRmb);
    Result<void> r = row ? group_->llc_->confirmRkey(token_, *conn_->rmb.desc(), link)
                         : Result<void>(row.error());
    if (!r) {
        if (row) // nobody will use it; the peer's DELETE_RKEY may find it gone
            (void)rtokens.remove(link, peerRmb.rkey);
        abandon();
        return r;
    }
    conn_->peerRmb_.store(static_cast<int>(*row), std::memory_order_release);
    group_ = nullptr;
    token_.release();
    return {};
}

} // namespace smc
