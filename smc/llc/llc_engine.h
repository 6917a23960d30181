// SPDX-License-Identifier: MIT
// LlcEngine: the LLC side of a link group: what its links deliver, dispatched to its flows.
#pragma once

#include <array>
#include <chrono>
#include <optional>
#include <string>
#include <vector>

#include "smc/llc/flows/add_link.h"
#include "smc/llc/flows/delete_link.h"
#include "smc/llc/flows/first_link.h"
#include "smc/llc/flows/rkey.h"
#include "smc/llc/keepalive.h"
#include "smc/llc/llc_core.h"
#include "smc/llc/llc_events.h"

namespace smc
{

// The parts it is made of: LlcCore (links, lock, flow token, messages out), LlcEvents (peer
// requests and lost links, in order), Keepalive (TEST_LINK), and one class per flow.
class LlcEngine final : private LinkReports, private LlcEvents::Handler
{
public:
    static constexpr std::size_t kMaxPendingRequests = LlcEvents::kMaxPending;

    // The provider and host must outlive the engine; so must the executor.
    LlcEngine(LlcConfig config, LinkProvider& provider, LlcHost& host, Executor& executor);
    // stop().
    ~LlcEngine();
    LlcEngine(const LlcEngine&) = delete;
    LlcEngine& operator=(const LlcEngine&) = delete;

    // What the group's pool registers buffers through; then setPool().
    Registrar& registrar() noexcept { return core_.registrar(); }
    void setPool(BufferPool& pool) noexcept { core_.setPool(pool); }
    // No flow, event or timer runs after this returns; every link is cleared
    // (its buffers unregistered). Waits for a running flow to see it.
    void stop();

    // The flows; LinkGroup's header says what each returns and how long it
    // blocks.
    Result<void> start(NewLink first) { return firstLink_.start(std::move(first)); }
    // start() in two steps, for CLC's order (LinkGroup::beginFirstContact): link 0 is
    // attached under `token` (a FirstLink flow; the client's wait for CONFIRM_LINK armed at
    // once), then confirmFirst() runs CONFIRM_LINK under a token of its own.
    Result<void> prepareFirst(const FlowToken& token, NewLink first)
    {
        return firstLink_.prepareFirst(token, std::move(first));
    }
    Result<void> confirmFirst(const std::optional<LinkAddress>& peer)
    {
        return firstLink_.confirmFirst(peer);
    }
    Result<void> addLink() { return addLinks_.addLink(); }
    Result<void> requestAddLink() { return addLinks_.requestAddLink(); }
    Result<void> deleteLink(unsigned slot) { return deleteLinks_.deleteLink(slot); }
    void terminate(std::string reason, llc::DeleteReason code, bool orderly)
    {
        core_.terminate(std::move(reason), code, orderly);
    }
    // A TEST_LINK on every active link now; one not answered within timeouts.wait goes
    // down (LinkGroup::probeLinks). Blocks at most for one send per link.
    void probeLinks() { keepalive_.probeLinks(); }
    Result<void> breakLink(unsigned slot) { return core_.breakLink(slot); }

    // The RKEY flows of one connection's RMB, holding `token` (acquire one
    // with acquireFlow(Flow::Rkey, ...)).
    Result<FlowToken> acquireFlow(Flow flow, std::chrono::milliseconds timeout)
    {
        return core_.acquireFlow(flow, timeout);
    }
    Result<FlowToken> acquireFlow(Flow flow) { return core_.acquireFlow(flow); }
    // CONFIRM_RKEY: our RMB on every ACTIVE link but `via` (CLC told `via`).
    Result<void> confirmRkey(const FlowToken& /*token*/, const BufferDesc& rmb, unsigned via)
    {
        return rkeys_.confirmRkey(rmb, via);
    }
    // DELETE_RKEY: the peer forgets our RMB (the whole row).
    Result<void> deleteRkey(const FlowToken& /*token*/, const BufferDesc& rmb)
    {
        return rkeys_.deleteRkey(rmb);
    }

    // Data path: the channel of `slot` if it is ACTIVE (and, unless 0, has that link id).
    std::shared_ptr<LinkChannel> activeChannel(unsigned slot, std::uint8_t linkId = 0) const
    {
        return core_.activeChannel(slot, linkId);
    }
    // Slots that are ACTIVE, and their link ids.
    struct SlotView {
        bool active = false;
        std::uint8_t linkId = 0;
    };
    std::array<SlotView, kMaxLinks> slots() const;
    std::optional<unsigned> anyActive() const { return core_.anyActive(); }

    bool terminated() const noexcept { return core_.terminated(); }
    Role role() const noexcept { return core_.config().role; }
    GroupType type() const;
    std::vector<LinkInfo> links() const;
    unsigned activeLinks() const;
    std::uint8_t linkId(unsigned slot) const;
    LlcStats stats() const;
    RtokenTable& rtokens() noexcept { return core_.rtokens(); }
    const RtokenTable& rtokens() const noexcept { return core_.rtokens(); }
    unsigned maxLinks() const noexcept { return core_.maxLinks(); }
    unsigned maxConns() const noexcept { return core_.maxConns(); }

private:
    // LinkReports
    void received(unsigned slot, std::uint64_t epoch, std::vector<std::byte> bytes) override;
    void down(unsigned slot, std::uint64_t epoch) override;
    void flowReleased() override { events_.flowReleased(); }
    void dispatch(unsigned slot, std::uint64_t epoch, llc::Message m);
    // LlcEvents::Handler
    void handleRequest(unsigned slot, const llc::Message& m) override;
    void linkLost(unsigned slot) override { deleteLinks_.failover(slot, true); }

    // Declared in the order they are built and the reverse of their teardown: each part
    // uses only those before it.
    LlcCore core_;
    RkeyFlows rkeys_;
    DeleteLinkFlow deleteLinks_;
    AddLinkFlows addLinks_;
    FirstLinkFlow firstLink_;
    LlcEvents events_;
    Keepalive keepalive_;
};

} // namespace smc
