// SPDX-License-Identifier: MIT
// RDMA device discovery over libibverbs, with "no RDMA here" as a clear error.
#pragma once

#include <string>
#include <vector>

#include "pool/result.h"

namespace smc::rdma
{

// Names of the RDMA devices on this host (e.g. "rxe0", "mlx5_0"). A host
// whose kernel has no RDMA support answers std::errc::function_not_supported;
// one with support but no device answers std::errc::no_such_device.
Result<std::vector<std::string>> listDevices();

} // namespace smc::rdma
