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

namespace smc::net
{

// Where an SMC-D RMB of ours goes back when its connection is done with it. Given with its
// peer, the stack may keep it granted to that peer process for a later connection; without
// (or when it keeps no more), it is revoked first, as a peer that mapped it keeps the old
// pages, and goes into the pool. Never blocks.
class DmbHome
{
public:
    virtual void giveBack(const BufferRef& rmb, const IsmGid* peer) noexcept = 0;

protected:
    ~DmbHome() = default;
};

// An SMC-D RMB of ours from the pool until it goes back to its home. Move-only; empty once
// moved from or given back. Either side's.
class OwnDmb
{
public:
    OwnDmb() = default;
    OwnDmb(DmbHome& home, BufferRef rmb) noexcept : home_(&home), rmb_(std::move(rmb)) {}
    OwnDmb(OwnDmb&& other) noexcept : home_(other.home_), rmb_(std::exchange(other.rmb_, {})) {}
    OwnDmb& operator=(OwnDmb&& other) noexcept
    {
        if (this != &other) {
            reset();
            home_ = other.home_;
            rmb_ = std::exchange(other.rmb_, {});
        }
        return *this;
    }
    ~OwnDmb() { reset(); }

    const BufferRef& get() const noexcept { return rmb_; }
    BufferDesc* operator->() const noexcept { return rmb_.operator->(); }
    explicit operator bool() const noexcept { return static_cast<bool>(rmb_); }
    // Gives it back; with `peer`, the process its last connection had mapped it (see DmbHome).
    void reset(const IsmGid* peer = nullptr) noexcept
    {
        if (rmb_)
            home_->giveBack(std::exchange(rmb_, {}), peer);
    }

private:
    DmbHome* home_ = nullptr;
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
