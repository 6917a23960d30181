// SPDX-License-Identifier: MIT
// The SMC experimental TCP option on a cgroup's SYNs and SYN-ACKs (BPF sock_ops).
#pragma once

#include <string>

namespace smc::interop
{

// Loads the program and attaches it to the cgroup v2 directory `cgroupDir` (every TCP socket
// of its processes then offers SMC in its handshake). Returns 0 or -errno; a verifier
// rejection leaves the verifier's log in `log`. Needs CAP_BPF and CAP_NET_ADMIN.
int attachSmcTcpOption(const char* cgroupDir, std::string& log);

} // namespace smc::interop
