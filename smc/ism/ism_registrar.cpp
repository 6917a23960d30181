// SPDX-License-Identifier: MIT
// IsmRegistrar: RMB <-> DMB.
#include "smc/ism/ism_registrar.h"

#include "pool/errors.h"

namespace smc
{

std::error_code IsmRegistrar::registerBuffer(BufferDesc& desc, unsigned link)
{
    if (link != 0)
        return PoolErrc::InvalidLink;
    if (desc.kind() != BufferKind::Rmb)
        return {};
    Result<DmbInfo> dmb = device_.registerDmb(desc.memory(), desc.size());
    if (!dmb)
        return dmb.error();
    desc.setDmbToken(dmb->token);
    LinkRegistration& reg = desc.registration(0);
    reg.addr = reinterpret_cast<std::uintptr_t>(dmb->data);
    reg.handle = dmb->index;
    return {};
}

void IsmRegistrar::unregisterBuffer(BufferDesc& desc, unsigned link) noexcept
{
    if (link != 0 || desc.dmbToken() == 0)
        return;
    (void)device_.unregisterDmb(desc.dmbToken());
    desc.setDmbToken(0);
}

} // namespace smc
