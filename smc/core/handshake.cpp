// SPDX-License-Identifier: MIT
// LinkGroup::Handshake: a connection's share of CLC, holding the group's RKEY flow while it works.
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
    Result<ConnectionPtr> conn = openConnection(rmbBytes, sndbufBytes, linkId);
    if (!conn)
        return conn.error();
    return Handshake(this, std::move(*conn), std::move(*token));
}

LinkGroup::Handshake& LinkGroup::Handshake::operator=(Handshake&& other) noexcept
{
    if (this != &other) {
        abandon();
        group_ = std::exchange(other.group_, nullptr);
        conn_ = std::move(other.conn_);
        token_ = std::move(other.token_);
        announced_ = std::exchange(other.announced_, std::nullopt);
    }
    return *this;
}

unsigned LinkGroup::Handshake::link() const noexcept
{
    return announced_ ? *announced_ : conn_->link(); // stable while we hold the flow
}

RtokenTable::Rtoken LinkGroup::Handshake::rtoken() const noexcept
{
    const LinkRegistration& r = conn_->rmb->registration(link());
    return {r.rkey, r.addr};
}

Result<void> LinkGroup::Handshake::announce()
{
    if (group_ == nullptr || announced_)
        return ConnErrc::HandshakeDone;
    const unsigned link = conn_->link();
    if (Result<void> r = group_->llc_->confirmRkey(token_, *conn_->rmb.desc(), link); !r) {
        abandon();
        return r;
    }
    announced_ = link;
    token_.release();
    return {};
}

void LinkGroup::Handshake::abandon() noexcept
{
    if (LinkGroup* g = std::exchange(group_, nullptr)) {
        token_.release(); // closeConnection takes it again for DELETE_RKEY
        (void)g->closeConnection(*conn_);
    }
}

Result<void> LinkGroup::Handshake::complete(RtokenTable::Rtoken peerRmb, std::size_t peerRmbBytes)
{
    if (group_ == nullptr)
        return ConnErrc::HandshakeDone;
    if (peerRmb.rkey == 0 || peerRmbBytes == 0) { // rkey 0 means "none" in the table
        abandon();
        return std::make_error_code(std::errc::invalid_argument);
    }
    if (group_->terminated()) {
        abandon();
        return std::make_error_code(std::errc::not_connected);
    }
    if (announced_) { // the token again, briefly: rows change only under it
        Result<FlowToken> token = group_->llc_->acquireFlow(Flow::Rkey);
        if (!token) {
            abandon();
            return token.error();
        }
        token_ = std::move(*token);
        if (conn_->link() != *announced_) { // the peer's rtoken is for the link CLC named
            abandon();
            return std::make_error_code(std::errc::not_connected);
        }
    }
    RtokenTable& rtokens = group_->llc_->rtokens();
    const unsigned link = conn_->link(); // stable: we hold the flow
    bool created = false; // false: the row was known (another connection's, or CONFIRM_RKEY's)
    Result<RtokenTable::Row> row = rtokens.addRow(link, peerRmb, &created);
    Result<void> r = !row         ? Result<void>(row.error())
                     : announced_ ? Result<void>()
                                  : group_->llc_->confirmRkey(token_, *conn_->rmb.desc(), link);
    if (r) {
        WriteLocker lock(conn_->use_);
        if (conn_->state_ == Connection::State::Open)
            conn_->peer_ = Connection::PeerRmb{*row, peerRmbBytes};
        else
            r = std::make_error_code(std::errc::not_connected); // the group ended meanwhile
    }
    if (!r) {
        // A row this call took: nobody will use it (the peer's DELETE_RKEY
        // may find it gone). One it was handed stays with whoever has it.
        if (row && created)
            (void)rtokens.removeRow(*row);
        abandon();
        return r;
    }
    group_ = nullptr;
    token_.release();
    return {};
}

} // namespace smc
