// SPDX-License-Identifier: MIT
// main() of the rxe suites: skip (77) without an RDMA device, fail without one in the guest.
#include <cstdio>
#include <cstdlib>

#include <gtest/gtest.h>

#include "rdma/verbs.h"

int main(int argc, char** argv)
{
    ::testing::InitGoogleTest(&argc, argv);
    const char* name = std::getenv("SMC_RDMA_DEVICE");
    smc::Result<smc::rdma::Context> probe = smc::rdma::Context::open(name ? name : "");
    if (!probe) {
        const bool required = std::getenv("SMC_RXE_GUEST") != nullptr;
        std::fprintf(stderr, "%s: no RDMA device: %s\n", required ? "FAIL" : "SKIP",
                     probe.error().message().c_str());
        return required ? 1 : 77; // 77: meson counts it as skipped
    }
    std::printf("RDMA device: %s\n", probe->name().c_str());
    return RUN_ALL_TESTS();
}
