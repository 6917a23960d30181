// SPDX-License-Identifier: MIT
// libFuzzer target: the CLC decoder must never crash or read past its input, and what it
// accepts must re-encode to bytes that decode to the same message.
#include <cstdlib>

#include "smc/clc/clc_messages.h"
#include "smc/clc/clc_negotiate.h"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size)
{
    using namespace smc::clc;
    const std::span<const std::byte> input(reinterpret_cast<const std::byte*>(data), size);
    // The stream reader's view: a size is never smaller than the header, and a message that
    // decodes has exactly the size the header announced.
    const smc::Result<std::size_t> need = messageSize(input);
    if (need && *need < kHeaderSize)
        std::abort();
    smc::Result<Message> m = decode(input);
    if (!m)
        return 0;
    if (!need || *need != size)
        std::abort(); // decode accepted what messageSize refused
    smc::Result<std::vector<std::byte>> wire = encode(*m);
    if (!wire)
        std::abort(); // a decoded message must be writable
    smc::Result<Message> again = decode(*wire);
    if (!again || !(*again == *m))
        std::abort(); // the codec lost or changed something
    // Negotiation answers every decoded proposal, for a well-equipped host and a bare one.
    if (const auto* p = std::get_if<Proposal>(&*m)) {
        Capabilities rich;
        rich.ismV2 = {{0x1122334455667788, 0x99aabbccddeeff00, kLoopbackChid}, {7, 0, 0x0101}};
        rich.ismV1 = LocalIsm{1, 0, 0x0123};
        rich.smcrV1 = true;
        rich.ueids = {*makeEid("SMC-BPFTEST-UEID")};
        rich.seid = makeEid("IBM-SYSZ-ISMSEID00000000");
        rich.ipv4 = {{{192, 168, 1, 1}, 24}};
        rich.ipv6 = {{{0x20, 0x01, 0x0d, 0xb8, 0x00, 0x01}, 48}};
        const Negotiation n = negotiate(rich, *p);
        if (const auto* c = std::get_if<Choice>(&n))
            if (c->type == SmcType::SmcD && c->version >= kVersion2 && c->device >= 2)
                std::abort(); // a device we do not have
        if (std::holds_alternative<Choice>(negotiate(Capabilities{}, *p)))
            std::abort(); // a bare host can take nothing
    }
    return 0;
}
