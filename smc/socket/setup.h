// SPDX-License-Identifier: MIT
// What a CLC handshake ends in: SMC-D or SMC-R set up, or a fallback to TCP.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <utility>
#include <variant>

#include "pool/buffer_desc.h"
#include "smc/clc/clc_messages.h"
#include "smc/core/link_group.h"
#include "smc/ism/shm_ism.h"
#include "smc/socket/internal/stack_core.h"

namespace smc::net
{

// An SMC-D RMB of ours from the pool until it goes back: then revoked first (a peer that
// mapped it keeps the old pages) and no longer marked as a server's. Move-only; empty once
// moved from or given back. Either side's. Never blocks.
class OwnDmb
{
public:
    OwnDmb() = default;
    OwnDmb(StackCore& stack, BufferRef rmb) noexcept : stack_(&stack), rmb_(std::move(rmb)) {}
    OwnDmb(OwnDmb&& other) noexcept : stack_(other.stack_), rmb_(std::exchange(other.rmb_, {})) {}
    OwnDmb& operator=(OwnDmb&& other) noexcept
    {
        if (this != &other) {
            reset();
            stack_ = other.stack_;
            rmb_ = std::exchange(other.rmb_, {});
        }
        return *this;
    }
    ~OwnDmb() { reset(); }

    const BufferRef& get() const noexcept { return rmb_; }
    BufferDesc* operator->() const noexcept { return rmb_.operator->(); }
    explicit operator bool() const noexcept { return static_cast<bool>(rmb_); }
    void reset() noexcept;

private:
    StackCore* stack_ = nullptr;
    BufferRef rmb_;
};

// SMC-D is up: our DMB (granted to the peer), the peer's mapped here.
struct SmcdSetup {
    OwnDmb rmb;
    RemoteDmb peer;
    IsmGid peerGid;
    std::uint32_t groupId = 0; // the SMC-D "link group" the server named (CLC link id)
};

// SMC-R is up: our connection in the group (its RMB, the link it rides; the peer's RMB known
// to it, so LinkGroup::write reaches it), and what CLC told of the peer's side.
struct SmcrSetup {
    std::shared_ptr<LinkGroup> group; // the stack's (LinkGroupManager); lives while held
    ConnectionPtr conn;
    std::uint32_t peerToken = 0;  // the alert token the peer wants in our CDC messages
    std::size_t peerRmbBytes = 0; // no 32-byte CDC head in SMC-R
    bool firstContact = false;    // the group is new
};

// The connection goes on as TCP, the CLC bytes consumed on both sides.
struct Fallback {
    clc::DeclineCode reason{}; // ours, or the peer's diagnosis when it declined
    bool peerDeclined = false;
};

using Outcome = std::variant<SmcdSetup, Fallback, SmcrSetup>;

} // namespace smc::net
