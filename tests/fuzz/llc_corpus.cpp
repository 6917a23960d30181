// SPDX-License-Identifier: MIT
// Writes the LLC fuzzer's seed corpus: one valid message of each type and version.
#include <cstdio>
#include <fstream>
#include <string>

#include "smc/llc/llc_messages.h"

int main(int argc, char** argv)
{
    using namespace smc::llc;
    if (argc != 2) {
        std::fprintf(stderr, "usage: %s DIR\n", argv[0]);
        return 2;
    }
    AddLink ext;
    ext.ext = AddLinkV2Ext{true, {}, {{1, 2, 3}, {4, 5, 6}}};
    const Message seeds[] = {
        {1, false, ConfirmLink{{1, 2, 3, 4, 5, 6}, {}, 77, 1, {1, 2, 3, 4}, 2, 0}},
        {2, true, ConfirmLink{}},
        {1, false, AddLink{false, 0, {}, {}, 5, 2, 3, 9, std::nullopt}},
        {1, true, AddLink{true, 1, {}, {}, 0, 0, 0, 0, std::nullopt}},
        {2, false, ext},
        {1, false, AddLinkCont{2, 2, {{1, 2, 3}, {4, 5, 6}}}},
        {1, false, DeleteLink{true, true, 0, DeleteReason::ProgramTerminated}},
        {2, false, ReqAddLink{{Gid{}, Gid{1}}}},
        {1, false, ConfirmRkey{false, false, 1, 2, {{2, 3, 4}, {3, 4, 5}}}},
        {1, false, ConfirmRkeyCont{}},
        {1, false, TestLink{}},
        {1, false, DeleteRkey{false, 0, 0, {1, 2, 3}}},
        {2, false, DeleteRkey{false, 0, 0, {1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12}}},
    };
    int n = 0;
    for (const Message& m : seeds) {
        const auto wire = encode(m);
        std::ofstream(std::string(argv[1]) + "/seed-" + std::to_string(n++), std::ios::binary)
            .write(reinterpret_cast<const char*>(wire.data()), std::streamsize(wire.size()));
    }
    return 0;
}
