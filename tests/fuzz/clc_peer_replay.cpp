// SPDX-License-Identifier: MIT
// Replays the CLC peer's seeds (and any input files given) without libFuzzer; with --write DIR,
// writes the seeds there as the fuzzer's corpus instead.
#include <cstdio>
#include <fstream>
#include <iterator>
#include <string>

#include "tests/fuzz/clc_peer.h"

int main(int argc, char** argv)
{
    const auto seeds = smc::clcpeer::seeds();
    if (argc == 3 && std::string(argv[1]) == "--write") {
        for (std::size_t i = 0; i < seeds.size(); ++i) {
            std::ofstream out(std::string(argv[2]) + "/seed-" + std::to_string(i),
                              std::ios::binary);
            out.write(reinterpret_cast<const char*>(seeds[i].data()),
                      static_cast<std::streamsize>(seeds[i].size()));
        }
        std::printf("clc-peer: %zu seeds written to %s\n", seeds.size(), argv[2]);
        return 0;
    }
    for (const auto& s : seeds)
        smc::clcpeer::run(s);
    for (int i = 1; i < argc; ++i) {
        std::ifstream in(argv[i], std::ios::binary);
        const std::vector<std::uint8_t> bytes((std::istreambuf_iterator<char>(in)), {});
        smc::clcpeer::run(bytes);
    }
    std::printf("clc-peer: %zu seeds and %d inputs: every handshake ended in time, asleep\n",
                seeds.size(), argc - 1);
    return 0;
}
