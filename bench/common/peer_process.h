// SPDX-License-Identifier: MIT
// PeerProcess: the far end of the two-process benchmarks, this program re-run as a server.
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "smc/socket/socket.h"

namespace smc::bench
{

// What a benchmark connection asks the serving process for (its first byte).
enum class PeerCommand : char {
    Sink = 'S',   // read until EOF, then answer the byte count (8 bytes, host order)
    Echo = 'E',   // then a 4-byte message size: echo every message of that size until EOF
    Source = 'O', // then a 4-byte message size and an 8-byte count: send that many messages
                  // of that size (bytes 0x5a), then shut down writing
};

// How both processes of a run are set up.
struct PeerSetup {
    unsigned busyPollUs = 20; // SocketOptions::busyPoll (only SMC-D spins on it)
    std::string host = "127.0.0.1";
    std::string smcrDevice; // an ibverbs device: SMC-R cells too ("" = none)
};

// The serving side: if argv says "--serve BUSY_POLL_US HOST [DEVICE]", listen on HOST (an
// SMC-D, a plain TCP and, with DEVICE, an SMC-R listener), print the ports on stdout, serve
// until stdin closes and exit the process (never returns). Else false.
bool servePeerIfAsked(int argc, char** argv);

// Runs this program again with --serve and learns its ports. The child ends when this
// object is destroyed (its stdin closes).
class PeerProcess
{
public:
    PeerProcess(const char* self, PeerSetup setup);
    ~PeerProcess();
    PeerProcess(const PeerProcess&) = delete;
    PeerProcess& operator=(const PeerProcess&) = delete;

    // The transports of a row, in column order: smcd, smcr (with a device), tcp.
    std::vector<Transport> transports() const;
    // The client's stack (with the SMC-R device when set up).
    std::unique_ptr<SmcStack> clientStack() const;
    // A connection to the peer over `transport`; dies unless that transport was chosen.
    // `tweak` changes our end's options (autocorking, zero-copy threshold).
    Socket connect(SmcStack& stack, Transport transport,
                   const std::function<void(SocketOptions&)>& tweak = {}) const;
    // The peer's process id (its CPU time: processCpu).
    pid_t pid() const noexcept { return pid_; }

private:
    PeerSetup setup_;
    pid_t pid_ = -1;
    int toChild_ = -1;
    std::uint16_t smcdPort_ = 0, smcrPort_ = 0, tcpPort_ = 0;
};

// Reads exactly into.size() bytes: false on an error or the end of the stream first.
bool readExactly(Socket& s, std::span<std::byte> into);
// Sends all of `data`: false on an error.
bool writeAll(Socket& s, std::span<const std::byte> data);

// The column name of `transport` in tables and CSV: smcd, smcr, tcp.
const char* columnName(Transport transport);

} // namespace smc::bench
