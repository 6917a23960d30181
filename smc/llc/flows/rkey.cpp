// SPDX-License-Identifier: MIT
// CONFIRM_RKEY and DELETE_RKEY: our RMBs told to the peer, and the peer's RMBs in our rtoken table.
#include "smc/llc/flows/rkey.h"

#include <algorithm>
#include <bitset>

namespace smc
{

using llc::Message;
using llc::Type;

Result<void> RkeyFlows::confirmRkey(const BufferDesc& rmb, unsigned via)
{
    llc::ConfirmRkey c;
    {
        MutexLocker lock(core_.mutex());
        c.rkey = rmb.registration(via).rkey;
        c.vaddr = rmb.registration(via).addr;
        for (unsigned s = 0; s < kMaxLinks; ++s)
            if (s != via && core_.links()[s].state == LinkState::Active)
                c.others.push_back(
                    {core_.links()[s].linkId, rmb.registration(s).rkey, rmb.registration(s).addr});
    }
    if (c.others.empty())
        return {}; // with one link, the handshake (CLC) told the peer already
    Result<Message> resp = core_.exchange(via, {1, false, c}, via, Type::ConfirmRkey, true,
                                          core_.config().timeouts.wait);
    if (!resp)
        return resp.error();
    if (std::get<llc::ConfirmRkey>(resp->body).negative)
        return std::make_error_code(std::errc::connection_refused);
    return {};
}

Result<void> RkeyFlows::deleteRkey(const BufferDesc& rmb)
{
    std::optional<unsigned> via = core_.anyActive();
    if (!via)
        return {}; // no link left to tell it on: the peer's group is gone too
    // The peer drops the whole rtoken row, whichever link's rkey we name.
    llc::DeleteRkey d{false, 0, 0, {rmb.registration(*via).rkey}};
    Result<Message> resp = core_.exchange(*via, {1, false, d}, *via, Type::DeleteRkey, true,
                                          core_.config().timeouts.wait);
    if (!resp)
        return resp.error();
    return {};
}

void RkeyFlows::remoteConfirmRkey(unsigned slot, const Message& m)
{
    const auto& c = std::get<llc::ConfirmRkey>(m.body);
    Message reply = m;
    reply.response = true;
    auto& rc = std::get<llc::ConfirmRkey>(reply.body);
    // The RMB may already be known on another of the links it names (the
    // handshake's link, if the connection moved since): same row then.
    std::vector<std::pair<unsigned, RtokenTable::Rtoken>> columns{{slot, {c.rkey, c.vaddr}}};
    bool refused = false;
    {
        MutexLocker lock(core_.mutex());
        // An entry for link 0, for the link the message came on, or for one
        // link twice would overwrite a column the message already fills:
        // refused, nothing stored. An id we do not know is skipped, as Linux
        // does (a link the peer added or deleted meanwhile).
        std::bitset<256> named;
        named.set(0);
        named.set(core_.links()[slot].linkId);
        for (const llc::RtokenEntry& e : c.others) {
            refused |= named.test(e.linkId);
            named.set(e.linkId);
            if (std::optional<unsigned> s = core_.links().slotOf(e.linkId))
                columns.push_back({*s, {e.rkey, e.vaddr}});
        }
        if (refused)
            ++core_.stats().linkIdsRefused;
    }
    if (refused) {
        rc.negative = true; // not retry: the same message would fail again
        (void)core_.send(slot, reply);
        return;
    }
    std::optional<unsigned> row;
    for (const auto& [s, t] : columns)
        if (!row)
            row = core_.rtokens().find(s, t.rkey);
    if (!row) {
        Result<unsigned> added = core_.rtokens().add(slot, {c.rkey, c.vaddr});
        if (added)
            row = *added;
    }
    if (!row) { // every row in use (Linux: NEG|RETRY when smc_rtoken_add finds none)
        rc.negative = rc.retry = true;
        MutexLocker lock(core_.mutex());
        ++core_.stats().rtokenRowsRefused;
    } else
        for (const auto& [s, t] : columns)
            (void)core_.rtokens().set(*row, s, t);
    (void)core_.send(slot, reply);
}

// Linux's answer: v1 echoes the list with bit (7 - i) set for each unknown
// rkey; v2 (up to 255 rkeys) counts them in byte 5 and carries no list, in 44
// bytes. NEG when any was unknown. Nothing of the request's own byte 5 or NEG
// flag is echoed.
void RkeyFlows::remoteDeleteRkey(unsigned slot, const Message& m)
{
    const auto& d = std::get<llc::DeleteRkey>(m.body);
    llc::DeleteRkey answer;
    unsigned unknown = 0;
    for (std::size_t i = 0; i < d.rkeys.size(); ++i) {
        if (core_.rtokens().remove(slot, d.rkeys[i]))
            continue;
        ++unknown;
        if (m.version == 1 && i < 8) // v1 lists at most 8: one bit each
            answer.errorMask |= static_cast<std::uint8_t>(0x80u >> i);
    }
    answer.negative = unknown > 0;
    if (m.version == 1) {
        answer.rkeys = d.rkeys;
    } else {
        answer.invalidCount = static_cast<std::uint8_t>(std::min(unknown, 255u));
        answer.requested = static_cast<std::uint8_t>(std::min<std::size_t>(d.rkeys.size(), 255));
    }
    (void)core_.send(slot, {m.version, true, std::move(answer)});
}

} // namespace smc
