// SPDX-License-Identifier: MIT
// libFuzzer target: a hostile CLC peer over real TCP against a live stack (clc_peer.h).
#include <cstddef>
#include <cstdint>

#include "tests/fuzz/clc_peer.h"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size)
{
    smc::clcpeer::run({data, size});
    return 0;
}
