// SPDX-License-Identifier: MIT
// The LLC peer fuzzer's seed inputs: one per LLC flow, played the way a good peer plays it.
#pragma once

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

namespace smc::fuzz
{

// (name, input) pairs: the corpus llc-peer-corpus writes and llc-peer-replay runs.
std::vector<std::pair<std::string, std::vector<std::uint8_t>>> peerSeeds();

} // namespace smc::fuzz
