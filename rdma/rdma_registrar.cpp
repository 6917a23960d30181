// SPDX-License-Identifier: MIT
// RdmaRegistrar: ibv_reg_mr / ibv_dereg_mr per buffer and link.
#include "rdma/rdma_registrar.h"

#include <new>

#include "pool/errors.h"

namespace smc::rdma
{

void RdmaRegistrar::setLink(unsigned link, ProtectionDomain pd)
{
    MutexLocker lock(mutex_);
    links_.at(link) = std::move(pd);
}

void RdmaRegistrar::clearLink(unsigned link)
{
    MutexLocker lock(mutex_);
    links_.at(link).reset();
}

std::error_code RdmaRegistrar::registerBuffer(BufferDesc& desc, unsigned link)
{
    if (link >= kMaxLinks)
        return PoolErrc::InvalidLink;
    std::optional<ProtectionDomain> pd;
    {
        MutexLocker lock(mutex_);
        pd = links_[link];
    }
    if (!pd)
        return PoolErrc::NoSuchLink;
    const int access = desc.kind() == BufferKind::Rmb
                           ? IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE
                           : IBV_ACCESS_LOCAL_WRITE;
    Result<MemoryRegion> mr = MemoryRegion::create(*pd, desc.data(), desc.size(), access);
    if (!mr)
        return mr.error();
    // The handle owns the MR (and through it keeps the PD alive) until unregister.
    auto* owned = new (std::nothrow) MemoryRegion(std::move(*mr));
    if (owned == nullptr)
        return std::make_error_code(std::errc::not_enough_memory);
    desc.registration(link) = {owned->lkey(), owned->rkey(), owned->addr(),
                               reinterpret_cast<std::uintptr_t>(owned)};
    return {};
}

void RdmaRegistrar::unregisterBuffer(BufferDesc& desc, unsigned link) noexcept
{
    LinkRegistration& reg = desc.registration(link);
    delete reinterpret_cast<MemoryRegion*>(reg.handle); // ibv_dereg_mr
    reg = {};
}

} // namespace smc::rdma
