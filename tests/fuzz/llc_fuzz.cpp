// SPDX-License-Identifier: MIT
// libFuzzer target: the LLC decoder must never crash, and what it accepts must re-encode
// to bytes that decode to the same message.
#include <cstdlib>

#include "smc/llc/llc_messages.h"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size)
{
    using namespace smc::llc;
    const std::span<const std::byte> input(reinterpret_cast<const std::byte*>(data), size);
    smc::Result<Message> m = decode(input);
    if (!m)
        return 0;
    smc::Result<Message> again = decode(encode(*m));
    if (!again || !(*again == *m))
        std::abort(); // the codec lost or changed something
    return 0;
}
