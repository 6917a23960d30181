// SPDX-License-Identifier: MIT
// A hostile CLC peer over real TCP: what the fuzzer and its seed replay drive.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <vector>

namespace smc::clcpeer
{

// An input: byte 0 picks the side we play (even: a client of the stack's listener, so the
// server handshake is under test; odd: a server that Socket::connect reaches), then steps of
// [op, n, n bytes] until the input ends:
//   op % 5 == 0: send the n bytes;          1: stall n % 32 ms (at most 200 ms in all);
//           2: shut down writing (FIN);     3: reset (RST) and stop;
//           4: read what the stack sent (so its writes never wait on us).
// After the steps the peer stays silent until the handshake is over.
//
// Checks, trapping when one breaks: the handshake under test ends within its deadlines (the
// stack's CLC timeout per message it waits for, plus slack) and, while it waits, the process
// burns at most half the wall time (nobody spins). Nothing else may break either: ASan and
// UBSan watch the rest.
void run(std::span<const std::uint8_t> input);

// Inputs that reach the interesting places: partial headers that stall or end, whole
// messages that stall, resets at every phase, for both sides.
std::vector<std::vector<std::uint8_t>> seeds();

} // namespace smc::clcpeer
