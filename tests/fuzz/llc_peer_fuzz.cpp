// SPDX-License-Identifier: MIT
// libFuzzer target: plays the LLC peer of a live LinkGroup; traps when an invariant breaks.
#include "tests/fuzz/llc_peer.h"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size)
{
    static const smc::fuzz::PeerOptions options = smc::fuzz::PeerOptions::fromEnvironment();
    smc::fuzz::runPeerInput({data, size}, options);
    return 0;
}

// Undefined behaviour is a finding like any other: stop at the first report, with its stack.
extern "C" const char* __ubsan_default_options()
{
    return "halt_on_error=1:print_stacktrace=1";
}
