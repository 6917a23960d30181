// SPDX-License-Identifier: MIT
// RdmaRegistrar: the pool's Registrar for SMC-R: one memory region per buffer per link.
#pragma once

#include <array>
#include <optional>

#include "base/mutex.h"
#include "pool/registrar.h"
#include "rdma/verbs.h"

namespace smc::rdma
{

// Registers a buffer on a link's protection domain: an RMB with local and
// remote write (the peer RDMA-writes into it), a sndbuf with local write.
// The registration records lkey, rkey and the buffer's virtual address (the
// MR's iova, what the peer targets). Assign a link's PD with setLink() before
// the pool's addLink(); clear it only after the pool's removeLink().
class RdmaRegistrar final : public Registrar
{
public:
    RdmaRegistrar() = default;
    // Every link on `pd`: a link's own registrar, as a link group keeps one.
    explicit RdmaRegistrar(const ProtectionDomain& pd) { links_.fill(pd); }

    void setLink(unsigned link, ProtectionDomain pd);
    void clearLink(unsigned link);

    std::error_code registerBuffer(BufferDesc& desc, unsigned link) override;
    void unregisterBuffer(BufferDesc& desc, unsigned link) noexcept override;

private:
    Mutex mutex_; // control path only
    std::array<std::optional<ProtectionDomain>, kMaxLinks> links_ SMC_GUARDED_BY(mutex_);
};

} // namespace smc::rdma
