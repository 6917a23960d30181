// SPDX-License-Identifier: MIT
// Writes the LLC peer fuzzer's seed corpus (peerSeeds()) into a directory.
#include <cstdio>
#include <fstream>

#include "tests/fuzz/llc_peer_seeds.h"

int main(int argc, char** argv)
{
    if (argc != 2) {
        std::fprintf(stderr, "usage: %s DIR\n", argv[0]);
        return 2;
    }
    for (const auto& [name, input] : smc::fuzz::peerSeeds()) {
        std::ofstream out(std::string(argv[1]) + "/peer-" + name, std::ios::binary);
        out.write(reinterpret_cast<const char*>(input.data()),
                  static_cast<std::streamsize>(input.size()));
        if (!out) {
            std::fprintf(stderr, "%s: cannot write %s/peer-%s\n", argv[0], argv[1], name.c_str());
            return 1;
        }
    }
    return 0;
}
