// SPDX-License-Identifier: MIT
// Runs LLC peer fuzzer inputs once each without libFuzzer: the seeds (no arguments) or the
// given files and directories (crash reproducers). A broken invariant traps, as when fuzzing.
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iterator>

#include "tests/fuzz/llc_peer.h"
#include "tests/fuzz/llc_peer_seeds.h"

namespace
{

void replay(const std::string& name, const std::vector<std::uint8_t>& input,
            const smc::fuzz::PeerOptions& options)
{
    std::printf("replay %s (%zu bytes)\n", name.c_str(), input.size());
    std::fflush(stdout);
    smc::fuzz::runPeerInput(input, options);
}

std::vector<std::uint8_t> readFile(const std::filesystem::path& path)
{
    std::ifstream in(path, std::ios::binary);
    return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

} // namespace

int main(int argc, char** argv)
{
    const smc::fuzz::PeerOptions options = smc::fuzz::PeerOptions::fromEnvironment();
    unsigned n = 0;
    if (argc == 1) {
        for (const auto& [name, input] : smc::fuzz::peerSeeds()) {
            replay(name, input, options);
            ++n;
        }
    }
    for (int i = 1; i < argc; ++i) {
        const std::filesystem::path arg(argv[i]);
        if (std::filesystem::is_directory(arg)) {
            for (const auto& entry : std::filesystem::directory_iterator(arg))
                if (entry.is_regular_file() && entry.path().filename().string()[0] != '.') {
                    replay(entry.path().string(), readFile(entry.path()), options);
                    ++n;
                }
        } else {
            replay(arg.string(), readFile(arg), options);
            ++n;
        }
    }
    std::printf("%u inputs replayed, every invariant held\n", n);
    return 0;
}

// Undefined behaviour fails a replay as it fails the fuzzer (UBSan builds only).
extern "C" const char* __ubsan_default_options()
{
    return "halt_on_error=1:print_stacktrace=1";
}
