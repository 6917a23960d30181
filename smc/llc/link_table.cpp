// SPDX-License-Identifier: MIT
// LinkTable: slot choice, link ids, group type; SlotRegistrar: registration per slot.
#include "smc/llc/link_table.h"

#include "pool/errors.h"

namespace smc
{

const char* toString(LinkState state) noexcept
{
    switch (state) {
    case LinkState::Unused:
        return "UNUSED";
    case LinkState::Inactive:
        return "INACTIVE";
    case LinkState::Activating:
        return "ACTIVATING";
    case LinkState::Active:
        return "ACTIVE";
    }
    return "?";
}

const char* toString(GroupType type) noexcept
{
    switch (type) {
    case GroupType::None:
        return "NONE";
    case GroupType::Single:
        return "SINGLE";
    case GroupType::Symmetric:
        return "SYM";
    case GroupType::AsymmetricLocal:
        return "ASYM_LOCAL";
    case GroupType::AsymmetricPeer:
        return "ASYM_PEER";
    }
    return "?";
}

std::optional<unsigned> LinkTable::survivor(unsigned excluding) const
{
    for (unsigned s = 0; s < kMaxLinks; ++s)
        if (s != excluding && links_[s].state == LinkState::Active)
            return s;
    return std::nullopt;
}

std::optional<unsigned> LinkTable::freeSlot(GroupType newType) const
{
    for (unsigned i = 0; i < kMaxLinks; ++i) {
        const unsigned s = newType == GroupType::Symmetric ? i : kMaxLinks - 1 - i;
        if (links_[s].state == LinkState::Unused)
            return s;
    }
    return std::nullopt;
}

std::optional<unsigned> LinkTable::slotOf(std::uint8_t linkId) const
{
    if (linkId == 0)
        return std::nullopt;
    for (unsigned s = 0; s < kMaxLinks; ++s)
        if (links_[s].state != LinkState::Unused && links_[s].linkId == linkId)
            return s;
    return std::nullopt;
}

unsigned LinkTable::activeCount() const
{
    unsigned n = 0;
    for (const Link& l : links_)
        n += l.state == LinkState::Active;
    return n;
}

GroupType LinkTable::type() const
{
    const unsigned active = activeCount();
    bool asymmetric = false;
    for (const Link& l : links_)
        asymmetric |= l.state == LinkState::Active && l.asymmetric;
    return active == 0   ? GroupType::None
           : active == 1 ? GroupType::Single
           : asymmetric  ? asymKind_
                         : GroupType::Symmetric;
}

void LinkTable::activate(unsigned slot, GroupType newType)
{
    links_[slot].state = LinkState::Active;
    links_[slot].asymmetric = newType != GroupType::Symmetric;
    if (links_[slot].asymmetric)
        asymKind_ = newType;
}

std::optional<unsigned> LinkTable::asymmetricOther(unsigned slot) const
{
    for (unsigned s = 0; s < kMaxLinks; ++s)
        if (s != slot && links_[s].state == LinkState::Active && links_[s].asymmetric)
            return s;
    return std::nullopt;
}

std::uint8_t LinkTable::nextLinkId()
{
    do
        ++lastLinkId_;
    while (lastLinkId_ == 0 || slotOf(lastLinkId_));
    return lastLinkId_;
}

std::vector<LinkInfo> LinkTable::info() const
{
    std::vector<LinkInfo> out;
    for (unsigned s = 0; s < kMaxLinks; ++s)
        if (links_[s].state != LinkState::Unused)
            out.push_back(
                {s, links_[s].linkId, links_[s].state, 0, links_[s].local, links_[s].peer});
    return out;
}

std::error_code SlotRegistrar::registerBuffer(BufferDesc& desc, unsigned link)
{
    Registrar* r = slots_[link].load();
    return r ? r->registerBuffer(desc, link) : make_error_code(PoolErrc::NoSuchLink);
}

void SlotRegistrar::unregisterBuffer(BufferDesc& desc, unsigned link) noexcept
{
    if (Registrar* r = slots_[link].load())
        r->unregisterBuffer(desc, link);
}

std::error_code SlotRegistrar::registerBuffers(std::span<BufferDesc* const> descs, unsigned link)
{
    Registrar* r = slots_[link].load();
    return r ? r->registerBuffers(descs, link) : make_error_code(PoolErrc::NoSuchLink);
}

} // namespace smc
