// SPDX-License-Identifier: MIT
// The rkeys of a new link: v1's ADD_LINK_CONT exchange, the same loop for both sides, and the
// SMC-Rv2 ADD_LINK extension, which carries them all in the request and in the response.
#include "smc/llc/flows/add_link.h"

#include <algorithm>

namespace smc
{

using llc::Message;
using llc::Type;

// The server sends an ADD_LINK_CONT, the client answers with one, until both
// have sent all their RMBs (two per message). `opening` is the client's first
// message (its ADD_LINK response); the server has none. Each message says how
// many entries its sender still had, its own included: after the first, that
// must be what the last one left, or rkeys would pair wrongly (a duplicate, a
// lost one): protocol_error; so is one for another link than the new one. Returns, for the client,
// its last ADD_LINK_CONT: the caller sends it and waits for CONFIRM_LINK on the new link.
// Each ADD_LINK_CONT is answered where it is delivered (a relay, LlcCore::Waiter): the flow
// is woken at the end of the exchange, not for each message (64 connections: 32 round trips).
Result<std::optional<Message>> AddLinkFlows::exchangeRkeys(unsigned via, unsigned newSlot,
                                                           std::uint8_t linkId,
                                                           std::optional<Message> opening)
{
    const bool server = !opening;
    const std::vector<llc::RkeyPair> mine = core_.host().rmbRkeys(via, newSlot);
    std::size_t sent = 0, peerLeft = 0;
    bool first = true;
    auto nextCont = [&] {
        const std::size_t n = std::min<std::size_t>(2, mine.size() - sent);
        llc::AddLinkCont cont{linkId,
                              static_cast<std::uint8_t>(mine.size() - sent),
                              {mine.begin() + sent, mine.begin() + sent + n}};
        sent += n;
        return Message{1, !server, cont};
    };
    std::error_code error;
    std::optional<Message> last; // the client's
    // On the delivery thread, one call at a time (LlcCore::relay); the flow waits meanwhile.
    auto answer = [&](const Message& in) -> std::optional<Message> {
        const auto& pc = std::get<llc::AddLinkCont>(in.body);
        if (pc.linkId != linkId) { // rkeys for some other link
            MutexLocker lock(core_.mutex());
            ++core_.stats().linkIdsRefused;
            error = std::make_error_code(std::errc::protocol_error);
            return std::nullopt;
        }
        if (!first && pc.remaining != peerLeft) {
            error = std::make_error_code(std::errc::protocol_error);
            return std::nullopt;
        }
        first = false;
        peerLeft = pc.remaining - std::min<std::size_t>(pc.remaining, pc.rkeys.size());
        for (const llc::RkeyPair& p : pc.rkeys)
            (void)core_.rtokens().setByRkey(via, p.rkey, newSlot, {p.newRkey, p.newVaddr});
        if (server && sent >= mine.size() && peerLeft == 0)
            return std::nullopt; // both sides have all: CONFIRM_LINK is next
        Message next = nextCont();
        if (!server && sent >= mine.size() && peerLeft == 0) {
            last = std::move(next); // sent by the caller, which then waits for CONFIRM_LINK
            return std::nullopt;
        }
        return next;
    };
    const Message opener = server ? nextCont() : std::move(*opening);
    Result<Message> end = core_.exchange(via, opener, via, Type::AddLinkCont, server,
                                         core_.config().timeouts.wait, answer);
    if (!end)
        return end.error();
    if (error)
        return error;
    return last;
}

// Our RMBs' rkeys on `via` and on the new link, and its GID: what a v2 ADD_LINK (request or
// response) carries. At most 255 rkeys fit, as in Linux (a group has at most 255 connections).
llc::AddLinkV2Ext AddLinkFlows::addLinkExt(unsigned via, unsigned newSlot, const Gid& newGid)
{
    llc::AddLinkV2Ext ext;
    ext.direct = true; // we build no links through a gateway
    ext.clientTargetGid = newGid;
    ext.rkeys = core_.host().rmbRkeys(via, newSlot);
    if (ext.rkeys.size() > llc::kMaxAddLinkRkeys)
        ext.rkeys.resize(llc::kMaxAddLinkRkeys);
    return ext;
}

// The peer's pairs from its v2 ADD_LINK: its RMBs on the new link, found by their rkey on
// `via`. False without the extension: a v2 peer always sends one.
bool AddLinkFlows::saveAddLinkRkeys(unsigned via, unsigned newSlot,
                                    const std::optional<llc::AddLinkV2Ext>& ext)
{
    if (!ext)
        return false;
    for (const llc::RkeyPair& p : ext->rkeys)
        (void)core_.rtokens().setByRkey(via, p.rkey, newSlot, {p.newRkey, p.newVaddr});
    return true;
}

} // namespace smc
