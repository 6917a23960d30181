// SPDX-License-Identifier: MIT
// SMC's experimental TCP option (kind 254, magic E2D4C3D9) on our SYNs and SYN-ACKs, by a BPF
// sock_ops program: Linux's SMC goes SMC only with it in the peer's TCP handshake.
#pragma once

#include <memory>
#include <string>

#include "base/result.h"
#include "base/unique_fd.h"
#include "smc/net/socket_marker.h"

namespace smc::net
{

// The program, a map of the sockets it serves, and its link to this process's cgroup (v2).
// Only sockets marked here get the option: other sockets of the cgroup are left alone. The
// link ends with the object (a bpf_link, so nothing outlives the process).
class SmcTcpOption final : public SocketMarker
{
public:
    // Errors: operation_not_permitted (neither root nor CAP_BPF and CAP_NET_ADMIN),
    // not_supported (no cgroup v2 mounted, or no cgroup v2 path in /proc/self/cgroup),
    // invalid_argument (the kernel's verifier refused the program: too old for header
    // options, before 5.10), bpf(2)'s other errnos. Does not block.
    static Result<std::unique_ptr<SmcTcpOption>> attach();
    ~SmcTcpOption() override;
    SmcTcpOption(const SmcTcpOption&) = delete;
    SmcTcpOption& operator=(const SmcTcpOption&) = delete;

    // Marks `fd`, a TCP socket before connect(2) or listen(2): its SYN, or a listener's
    // SYN-ACKs (its accepted sockets inherit it), carry the option. unmark() once connect or
    // listen returned (the program acts during those calls); a socket closed while marked
    // leaves only its map entry behind (the map has room for kMaxMarked). Errors: bpf(2)'s
    // (no_space_on_device when the map is full). Neither blocks.
    Result<void> mark(int fd) const noexcept override;
    void unmark(int fd) const noexcept override;

    static constexpr unsigned kMaxMarked = 4096;

private:
    SmcTcpOption(UniqueFd map, UniqueFd link) : map_(std::move(map)), link_(std::move(link)) {}
    UniqueFd map_;  // socket cookie -> marked
    UniqueFd link_; // the program's link to the cgroup; the link holds the program
};

// The option on every TCP socket of the cgroup v2 directory `cgroupDir` (tools and tests that
// speak to Linux's SMC from programs without this library). A legacy attachment: it stays
// until detached or the cgroup goes. Errors as attach()'s; a refused program leaves the
// verifier's log in `log`. Does not block.
Result<void> attachSmcTcpOptionToCgroup(const std::string& cgroupDir, std::string& log);

} // namespace smc::net
