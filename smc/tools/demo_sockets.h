// SPDX-License-Identifier: MIT
// smc-lgr-demo --sockets: SMC sockets between two stacks of one process, shown smcss-style.
#pragma once

#include <string>

namespace smc::demo
{

struct SocketDemo {
    std::string device; // loopback-ism (SMC-D), inproc (SMC-R in process), or an RDMA device
    std::string host = "127.0.0.1";
    unsigned conns = 4;
    bool json = false;
};

// Opens `conns` connections from a client stack to a server stack, moves a few KiB each way
// on each, prints both stacks' connections (an smcss table, or one JSON line per side), and
// closes them. 0 when every connection used the transport asked for and every byte arrived.
int runSockets(const SocketDemo& demo);

} // namespace smc::demo
