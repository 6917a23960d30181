// SPDX-License-Identifier: MIT
// Registrar: what "register a buffer on a link" means is injected into the pool.
#pragma once

#include <span>
#include <system_error>

#include "pool/buffer_desc.h"

namespace smc
{

// The pool calls a registrar to make a buffer reachable on a link: an RDMA
// memory region on the link's protection domain (SMC-R), or a DMB on an ISM
// device (SMC-D, where the device is link 0). The pool serialises calls per
// (buffer, link); calls for different buffers or links may run concurrently.
//
// A registrar fills desc.registration(link) (and, for SMC-D, the DMB token)
// and returns an empty error_code, or returns why it could not. An error of
// std::errc::not_enough_memory or std::errc::no_space_on_device makes the pool
// try a smaller size class, as Linux does when a DMB cannot be had.
class Registrar
{
public:
    virtual ~Registrar() = default;

    virtual std::error_code registerBuffer(BufferDesc& desc, unsigned link) = 0;
    virtual void unregisterBuffer(BufferDesc& desc, unsigned link) noexcept = 0;

    // Register every buffer in `descs` on a newly added link. All or nothing:
    // on error, whatever this call registered is unregistered again. The
    // default registers one by one; a device may batch or parallelise.
    virtual std::error_code registerBuffers(std::span<BufferDesc* const> descs, unsigned link)
    {
        for (std::size_t i = 0; i < descs.size(); ++i) {
            if (std::error_code ec = registerBuffer(*descs[i], link)) {
                while (i-- > 0)
                    unregisterBuffer(*descs[i], link);
                return ec;
            }
        }
        return {};
    }
};

} // namespace smc
