// SPDX-License-Identifier: MIT
// PeerProcess: the far end of the two-process benchmarks, this program re-run as a server.
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <string>

#include "smc/socket/socket.h"

namespace smc::bench
{

// What a benchmark connection asks the serving process for (its first byte).
enum class PeerCommand : char {
    Sink = 'S', // read until EOF, then answer the byte count (8 bytes, host order)
    Echo = 'E', // then a 4-byte message size: echo every message of that size until EOF
};

// The serving side: if argv says "--serve BUSY_POLL_US", listen on 127.0.0.1 (one SMC listener, one
// plain TCP listener), print both ports on stdout, serve until stdin closes, and return true
// (main then exits). Else false.
bool servePeerIfAsked(int argc, char** argv);

// Runs this program again with --serve and learns its ports. The child ends when this
// object is destroyed (its stdin closes).
class PeerProcess
{
public:
    // `busyPollUs`: SocketOptions::busyPoll of the server's SMC-D connections.
    PeerProcess(const char* self, unsigned busyPollUs);
    ~PeerProcess();
    PeerProcess(const PeerProcess&) = delete;
    PeerProcess& operator=(const PeerProcess&) = delete;

    std::uint16_t port(Transport transport) const
    {
        return transport == Transport::SmcD ? smcPort_ : tcpPort_;
    }

private:
    pid_t pid_ = -1;
    int toChild_ = -1;
    std::uint16_t smcPort_ = 0;
    std::uint16_t tcpPort_ = 0;
};

// Options a benchmark socket uses for `transport`: SMC-D, or TCP forced on both ends.
SocketOptions optionsFor(Transport transport, unsigned busyPollUs);

} // namespace smc::bench
