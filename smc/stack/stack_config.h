// SPDX-License-Identifier: MIT
// How a stack and its sockets are configured, and what a stack counts.
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "base/wire_ids.h"
#include "pool/lock_policy.h"
#include "rdma/link_config.h"
#include "smc/clc/decline_code.h"
#include "smc/conn/signal_policy.h"
#include "smc/llc/llc_timeouts.h"

namespace smc
{

// What a socket tries when it connects or accepts.
enum class Mode : std::uint8_t {
    Auto, // SMC-D when the peer is a process of this host, else SMC-R if the stack has it
          // (a client offers both; a server takes SMC-D first, as Linux tries SMC-Dv2
          // first), else a fallback to TCP
    SmcD, // SMC-D only
    SmcR, // SMC-R only (the stack needs an SMC-R device): v2 and v1 (SmcrConfig::offerV2)
    Tcp,  // plain TCP, no CLC at all (both ends must agree: a CLC peer would wait for it)
};

struct SocketOptions {
    Mode mode = Mode::Auto;
    // Our receive buffer (the DMB, its 32-byte CDC head included), rounded up to a size
    // class; Linux asks for sk_rcvbuf / 2 = 64 KiB by default. A smaller class is taken
    // when memory or the device runs short.
    std::size_t rmbBytes = 64 * 1024;
    // SMC-R: our send buffer, rounded up to a size class; 0: as rmbBytes (Linux asks for
    // sk_sndbuf / 2). SMC-D has none: a send writes into the peer's DMB.
    std::size_t sndbufBytes = 0;
    std::chrono::milliseconds connectTimeout{30'000};
    std::chrono::milliseconds clcTimeout{6'000}; // Linux CLC_WAIT_TIME, per message
    std::chrono::milliseconds sendTimeout{-1};   // negative: block forever
    std::chrono::milliseconds recvTimeout{-1};
    // SMC-D: a blocked send or recv first watches the shared doorbell this long (spinning,
    // like net.core.busy_poll) before it sleeps in a futex. A peer that answers sooner is
    // seen in well under a microsecond instead of after two context switches; 0 sleeps at
    // once (no CPU spent waiting).
    std::chrono::microseconds busyPoll{20};
    // Autocorking (Linux's net.smc.autocorking_size): while other sends of this
    // socket wait behind the one in progress, its bytes go into the peer's ring without being
    // announced; the last send of the queue announces them all with one CDC and one doorbell.
    // At most this many bytes stay unannounced; 0 turns it off. The last send of a queue is
    // never held back, so a lone sender pays nothing for it.
    std::size_t autocorkBytes = 64 * 1024;
    // Socket::recvZeroCopy copies instead of handing out a view below this many bytes: a
    // read this small, or the piece of one past the ring's wrap (a straggler). Below it a
    // copy costs less than the application's extra release call (bench/zerocopy_recv).
    std::size_t zeroCopyThreshold = 4096;
    // SMC-D: whether a blocked send or recv that a signal handler woke fails with
    // std::errc::interrupted (SignalPolicy); null: it goes on waiting. smc-run's answers as
    // the kernel does for a socket (the handlers' SA_RESTART, the socket's timeouts).
    SignalPolicy onSignal = nullptr;
};

// The SMC-R send buffer `options` ask for (sndbufBytes, else rmbBytes).
inline std::size_t sndbufBytes(const SocketOptions& options) noexcept
{
    return options.sndbufBytes != 0 ? options.sndbufBytes : options.rmbBytes;
}

// What a listener has besides the options of the connections it hands out.
struct ListenerOptions {
    // Handshakes queued or running (Linux's limit_smc_hs), past which a new connection goes
    // to TCP at once (a DECLINE, PEERNOSMC, as Linux's SYN without the SMC option makes it)
    // instead of waiting; 0: no limit. So does a new connection from a host that has half
    // of it waiting for its CLC messages already.
    std::size_t handshakeLimit = 256;
    // Connections done with their handshake that wait for accept(), at most (listen(2)'s
    // backlog; 0 counts as 1; those in their handshake are handshakeLimit's). Past it the
    // listener stops taking connections and the kernel's listen queue holds them; queued
    // connections that are already over (abandoned by their peer, nothing to read) are
    // dropped to make room and never handed out. Not with sharedAcceptQueue.
    std::size_t backlog = 4096;
    // For comparison only (bench/conn_rate): accept on the handshake pool, behind the
    // handshakes, as Linux did before 2022 (one workqueue for both); a burst of handshakes
    // starves accept() and the listen queue overflows. No limit applies then.
    bool sharedAcceptQueue = false;
};

// The stack's SMC-R device: what makes links, and what CLC announces of it.
struct SmcrConfig {
    // The ibverbs device the stack opens for its links.
    std::string device;
    // More devices (their port `link.port`) whose GIDs give the groups alternate paths, as
    // Linux takes further RNICs of the same pnetid: a symmetric second link, which carries
    // the connections when a port of the other goes down, and is added again when it
    // comes back up.
    std::vector<std::string> alternates;
    rdma::LinkConfig link; // for `device` and `alternates`
    // Our RoCE GID and MAC as the PROPOSAL announces them; a zero GID: the device's RoCE v2
    // IPv4-mapped one. A zero MAC: that GID's netdev's.
    Gid gid{};
    Mac mac{};
    // Unset: 8 random bytes per stack (not Linux's MAC-based id: processes share a MAC).
    std::optional<SystemId> systemId;
    // New link groups: their limits (as Linux's, and agreed with the peer in CONFIRM_LINK),
    // their LLC timeouts, and how long one without connections lives.
    struct Groups {
        unsigned maxConns = 255; // Linux 16..255
        unsigned maxLinks = 2;   // symmetric links wanted (Linux 1..2)
        LlcTimeouts timeouts;
        // 0: Linux's delay for the role, 600 s for a server and 610 s for a client, so the
        // server ends a shared idle group first.
        std::chrono::milliseconds idleFree{0};
    } groups;
    // Clients offer SMC-Rv2 as well as v1, as Linux does with a UEID (servers take v2 from
    // any peer whose RoCE v2 IPv4 GID is in a local subnet, and before v1). Linux servers on
    // RoCE v2-only devices such as rxe take nothing else. Off: v1 only.
    bool offerV2 = true;
};

struct StackConfig {
    // The user EID offered and accepted for SMC-Dv2 (Linux needs one for loopback-ism): 1..32
    // of A-Z 0-9 . -, as `smcr ueid add` takes it.
    std::string ueid = "SMC-CORE-LOOPBACK";
    LockPolicy poolPolicy = LockPolicy::Default;
    std::size_t poolMemoryLimit = 0; // 0: none
    // Every interval the SMC-D pool frees the free buffers (each a memfd mapping and three
    // fds) beyond what the last interval leased, keeping at least poolKeepFreeBytes: a burst
    // does not leave its buffers behind for good. 0: never.
    std::chrono::milliseconds poolTrimInterval{10'000};
    std::size_t poolKeepFreeBytes = 256 * 1024;
    // SMC-D RMBs stay granted to the peer process of their last connection, up to this many
    // bytes (half of them for one peer), so that the next connection between the two
    // processes maps nothing (docs/design.md, "Kept DMBs"); what the trim interval saw no
    // use of goes back to the pool. 0: every RMB goes back to the pool at once.
    std::size_t keptDmbBytes = 64 * 1024 * 1024;
    // The handshake pool's threads at most: server CLC handshakes (which wait for the peer)
    // and Socket::connectAsync's connects; a listener's accept never runs on it
    // (ListenerOptions::sharedAcceptQueue aside).
    unsigned handshakeThreads = 16;
    std::optional<SmcrConfig> smcr; // none: no SMC-R
    // With an SMC-R device: SMC's TCP option on our sockets' SYNs and SYN-ACKs, which Linux
    // needs to go SMC (else it falls back, PEERNOSMC). A BPF program on this process's cgroup
    // (v2) that touches only our sockets; it needs root, or CAP_BPF and CAP_NET_ADMIN. If it
    // cannot be had the stack works without: tcpOptionError() says why.
    bool smcTcpOption = true;
};

// Connections by how they ended up, as `smcd stats` counts them, and fallbacks by reason
// (Linux's decline codes), per role.
struct StackStats {
    std::uint64_t smcdClient = 0;
    std::uint64_t smcdServer = 0;
    std::uint64_t smcrClient = 0;
    std::uint64_t smcrServer = 0;
    std::uint64_t tcpForced = 0; // Mode::Tcp
    std::map<clc::DeclineCode, std::uint64_t> clientFallbacks;
    std::map<clc::DeclineCode, std::uint64_t> serverFallbacks;
    std::uint64_t handshakeErrors = 0; // hard errors: CLC timed out or malformed
    // Server connections sent to TCP because the listener's handshakes were past its limit
    // (also counted in serverFallbacks as PEERNOSMC).
    std::uint64_t handshakesLimited = 0;
    // SMC-D connections whose RMB was one the peer process had mapped already (kept).
    std::uint64_t rmbsReused = 0;
    // Bytes of RMBs kept for their peers now (StackConfig::keptDmbBytes; the pool counts them
    // in use).
    std::uint64_t keptRmbBytes = 0;
    // Ready descriptors (socket pairs) that served another connection of this process
    // (smc-run; net::ReadyFd::reuseWhenDone).
    std::uint64_t readyPairsReused = 0;
};

} // namespace smc
