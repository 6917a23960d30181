// SPDX-License-Identifier: MIT
// IsmRegistrar: the Registrar that makes an SMC-D pool's RMBs DMBs on an ISM device.
#pragma once

#include "pool/registrar.h"
#include "smc/ism/ism_device.h"

namespace smc
{

// For an SMC-D pool (the device is link 0): an RMB becomes a DMB on the
// device, its token kept in the descriptor; a sndbuf is plain memory, as in
// Linux (with a no-copy device the sender writes through an attached peer DMB).
// The device is borrowed: it must outlive the registrar and every pool that
// uses it (the pool's destructor unregisters its DMBs through it).
class IsmRegistrar final : public Registrar
{
public:
    explicit IsmRegistrar(IsmDevice& device) : device_(device) {}

    std::error_code registerBuffer(BufferDesc& desc, unsigned link) override;
    void unregisterBuffer(BufferDesc& desc, unsigned link) noexcept override;

private:
    IsmDevice& device_;
};

} // namespace smc
