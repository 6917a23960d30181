// SPDX-License-Identifier: MIT
// LlcEngine: its parts built and stopped in order, and what the links deliver sent where it
// belongs (a waiting flow, the event queue, the keepalive, the host).
#include "smc/llc/llc_engine.h"

#include "smc/cdc/cdc_messages.h"

namespace smc
{

using llc::Message;
using llc::Type;

LlcEngine::LlcEngine(LlcConfig config, LinkProvider& provider, LlcHost& host, Executor& executor)
    : core_(config, provider, host, *this, executor), rkeys_(core_), deleteLinks_(core_),
      addLinks_(core_, deleteLinks_), firstLink_(core_, addLinks_), events_(core_, *this),
      keepalive_(core_, events_)
{
}

LlcEngine::~LlcEngine()
{
    stop();
}

void LlcEngine::stop()
{
    if (!core_.beginStop())
        return;
    keepalive_.stopTimer();
    events_.close();
    core_.finishStop(); // also lets an echo that waits for a send slot go
    keepalive_.close();
}

void LlcEngine::received(unsigned slot, std::uint64_t epoch, std::vector<std::byte> bytes)
{
    if (!bytes.empty() && bytes[0] == std::byte{cdc::kCdcType}) {
        {
            MutexLocker lock(core_.mutex());
            if (core_.links()[slot].epoch != epoch)
                return;
            ++core_.stats().cdcIn;
            core_.links()[slot].lastRx = Clock::now(); // traffic: no TEST_LINK needed
        }
        core_.host().cdcReceived(slot, bytes); // the connections' business, not a violation
        return;
    }
    Result<Message> decoded = llc::decode(bytes);
    bool relay = false;
    {
        MutexLocker lock(core_.mutex());
        Link& link = core_.links()[slot];
        if (link.epoch != epoch)
            return; // a cleared link's channel, still draining
        ++core_.stats().messagesIn;
        link.lastRx = Clock::now();
        if (!decoded) {
            ++core_.stats().malformed;
        } else if (decoded->type() == Type::TestLink && decoded->response) {
            link.testPending = false;
            return;
        } else if (const LlcCore::Answer a = core_.answerWaiter(slot, *decoded);
                   a == LlcCore::Answer::Yes) {
            return; // what a flow waited for
        } else {
            relay = a == LlcCore::Answer::Relay;
        }
    }
    if (relay) {
        core_.relay(*decoded); // answered here, on the delivery thread
        return;
    }
    if (!decoded) {
        // Linux terminates the group on a protocol violation (the event
        // queue does it: this is the delivery of a channel it tears down).
        events_.violation(decoded.error().message());
        return;
    }
    dispatch(slot, epoch, std::move(*decoded));
}

// A message no flow waited for: a request to answer, or one dropped.
void LlcEngine::dispatch(unsigned slot, std::uint64_t epoch, Message m)
{
    const Type type = m.type();
    if (m.response) {
        if (type == Type::ReqAddLink && addLinks_.declined())
            return;                      // the server will not add a link
        core_.count(&LlcStats::dropped); // nobody waits for it (late or duplicate)
        return;
    }
    switch (type) {
    case Type::TestLink:
        keepalive_.echo(slot, epoch, std::move(m));
        return;
    case Type::ConfirmRkey:
    case Type::DeleteRkey:
        // Remote RKEY flows run beside local ones (Linux allows it).
        handleRequest(slot, m);
        return;
    case Type::ReqAddLink:
        if (core_.config().role != Role::Server) {
            core_.count(&LlcStats::dropped);
            return;
        }
        [[fallthrough]];
    case Type::AddLink:
    case Type::DeleteLink:
        events_.request(slot, epoch, std::move(m));
        return;
    default:
        core_.count(&LlcStats::dropped); // CONFIRM_LINK / ADD_LINK_CONT outside a flow
        return;
    }
}

void LlcEngine::down(unsigned slot, std::uint64_t epoch)
{
    {
        MutexLocker lock(core_.mutex());
        if (core_.links()[slot].epoch != epoch)
            return;
        ++core_.stats().linksDown;
        core_.failWaiter(slot);
    }
    events_.lost(slot, epoch);
}

void LlcEngine::handleRequest(unsigned slot, const Message& m)
{
    if (const auto* a = std::get_if<llc::AddLink>(&m.body)) {
        // A server treats a client's ADD_LINK as a suggestion (v1 invite).
        if (core_.config().role == Role::Client)
            addLinks_.answerAddLink(slot, *a);
    } else if (std::holds_alternative<llc::ReqAddLink>(m.body)) {
        // The client asks for a link (v2): run the server's ADD_LINK flow; if
        // it fails before ADD_LINK went out, decline with the response.
        bool offered = false;
        if (!addLinks_.serverAddLink(offered) && !offered)
            (void)core_.send(slot, {2, true, llc::ReqAddLink{}});
    } else if (const auto* del = std::get_if<llc::DeleteLink>(&m.body)) {
        deleteLinks_.remoteDeleteLink(slot, *del);
    } else if (std::holds_alternative<llc::ConfirmRkey>(m.body)) {
        rkeys_.remoteConfirmRkey(slot, m);
    } else if (std::holds_alternative<llc::DeleteRkey>(m.body)) {
        rkeys_.remoteDeleteRkey(slot, m);
    }
}

// --- Observability -------------------------------------------------------------------

std::array<LlcEngine::SlotView, kMaxLinks> LlcEngine::slots() const
{
    MutexLocker lock(core_.mutex());
    std::array<SlotView, kMaxLinks> out{};
    for (unsigned s = 0; s < kMaxLinks; ++s)
        out[s] = {core_.links()[s].state == LinkState::Active, core_.links()[s].linkId};
    return out;
}

GroupType LlcEngine::type() const
{
    MutexLocker lock(core_.mutex());
    return core_.links().type();
}

std::vector<LinkInfo> LlcEngine::links() const
{
    MutexLocker lock(core_.mutex());
    return core_.links().info();
}

unsigned LlcEngine::activeLinks() const
{
    MutexLocker lock(core_.mutex());
    return core_.links().activeCount();
}

std::uint8_t LlcEngine::linkId(unsigned slot) const
{
    MutexLocker lock(core_.mutex());
    const LinkTable& table = core_.links();
    return slot < kMaxLinks && table[slot].state != LinkState::Unused ? table[slot].linkId : 0;
}

LlcStats LlcEngine::stats() const
{
    LlcStats s;
    {
        MutexLocker lock(core_.mutex());
        s = core_.stats();
    }
    s.requestsPending = events_.pending();
    return s;
}

} // namespace smc
