// SPDX-License-Identifier: MIT
// LinkTable: a link group's three link slots, their states, ids and the group type they make.
#pragma once

#include <array>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <vector>

#include "pool/buffer_desc.h"
#include "pool/registrar.h"
#include "smc/llc/link_info.h"
#include "smc/transport/link_channel.h"

namespace smc
{

enum class Role : std::uint8_t { Client, Server };
enum class GroupType : std::uint8_t { None, Single, Symmetric, AsymmetricLocal, AsymmetricPeer };
const char* toString(GroupType type) noexcept;

// One slot of the table.
struct Link {
    LinkState state = LinkState::Unused;
    std::uint8_t linkId = 0;
    // Shared so the data path can write without holding the group lock.
    std::shared_ptr<LinkChannel> channel;
    std::shared_ptr<Registrar> registrar;
    LinkAddress local, peer;
    bool asymmetric = false; // the group's asymmetric link (LinkTable::asymKind)
    // Which attach of this slot a callback or a down belongs to: a slot is
    // reused, and its old channel may still report.
    std::uint64_t epoch = 0;
    std::chrono::steady_clock::time_point lastRx{};
    bool testPending = false; // a TEST_LINK went out, no reply yet
    std::chrono::steady_clock::time_point testSentAt{};
};

// Not thread-safe: its owner (LlcEngine) guards it with the group's lock.
class LinkTable
{
public:
    Link& operator[](unsigned slot) noexcept { return links_[slot]; }
    const Link& operator[](unsigned slot) const noexcept { return links_[slot]; }
    std::span<Link, kMaxLinks> all() noexcept { return links_; }

    // An ACTIVE link other than `excluding`.
    std::optional<unsigned> survivor(unsigned excluding = kMaxLinks) const;
    // Linux smc_llc_alloc_alt_link: a symmetric link takes the first free
    // slot, an asymmetric one the last (two symmetric links + one asymmetric).
    std::optional<unsigned> freeSlot(GroupType newType) const;
    // The slot of link `linkId`; never one for 0, which names no link (the
    // id of a client's link before the server numbered it).
    std::optional<unsigned> slotOf(std::uint8_t linkId) const;
    unsigned activeCount() const;
    // What the ACTIVE links make the group.
    GroupType type() const;
    // Marks `slot` ACTIVE; an asymmetric link records what it makes the group.
    void activate(unsigned slot, GroupType newType);
    // The asymmetric ACTIVE link other than `slot`, if any.
    std::optional<unsigned> asymmetricOther(unsigned slot) const;
    // The server numbers links: never 0, never one in use (Linux).
    std::uint8_t nextLinkId();
    std::uint64_t nextEpoch() noexcept { return ++epochs_; }
    std::vector<LinkInfo> info() const;

private:
    std::array<Link, kMaxLinks> links_{};
    std::uint8_t lastLinkId_ = 0;
    std::uint64_t epochs_ = 0;
    GroupType asymKind_ = GroupType::None; // what an asymmetric link makes the group
};

// The pool registers a buffer on slot s through link s's own registrar;
// lock-free, as the pool calls it from any thread.
class SlotRegistrar final : public Registrar
{
public:
    void set(unsigned slot, Registrar* r) noexcept { slots_[slot].store(r); }
    std::error_code registerBuffer(BufferDesc& desc, unsigned link) override;
    void unregisterBuffer(BufferDesc& desc, unsigned link) noexcept override;
    std::error_code registerBuffers(std::span<BufferDesc* const> descs, unsigned link) override;

private:
    std::array<std::atomic<Registrar*>, kMaxLinks> slots_{};
};

} // namespace smc
