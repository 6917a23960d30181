// SPDX-License-Identifier: MIT
// The RDMA device the rxe suites use: $SMC_RDMA_DEVICE, else the first one.
#pragma once

#include <cstdlib>
#include <string>

namespace smc::test
{

// "" asks rdma::Context::open() for the first device.
inline std::string rdmaDeviceName()
{
    const char* name = std::getenv("SMC_RDMA_DEVICE");
    return name ? name : "";
}

} // namespace smc::test
