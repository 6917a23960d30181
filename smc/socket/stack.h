// SPDX-License-Identifier: MIT
// SmcStack: what a process's SMC sockets share (devices, buffer pool, executor, statistics).
#pragma once

#include <array>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <system_error>
#include <vector>

#include "base/result.h"
#include "base/wire_ids.h"
#include "pool/lock_policy.h"
#include "pool/stats.h"
#include "rdma/link_config.h"
#include "smc/clc/decline_code.h"
#include "smc/llc/link_info.h"
#include "smc/llc/llc_timeouts.h"

namespace smc
{

class StackCore;
struct StackHooks;

// What a socket tries when it connects or accepts.
enum class Mode : std::uint8_t {
    Auto, // SMC-D when the peer is a process of this host, else SMC-R if the stack has it
          // (a client offers both; a server takes SMC-D first, as Linux tries SMC-Dv2
          // first), else a fallback to TCP
    SmcD, // SMC-D only
    SmcR, // SMC-R only (the stack needs an SMC-R device): v2 and v1 (SmcrConfig::offerV2)
    Tcp,  // plain TCP, no CLC at all (both ends must agree: a CLC peer would wait for it)
};

enum class Transport : std::uint8_t {
    SmcD, // cross-process loopback-ism: the peer's DMB mapped here
    SmcR, // RDMA over a link group's links (RoCE, or in-process links in tests)
    Tcp,  // plain TCP on the same socket: forced, or a fallback (Socket::fallbackReason)
    None, // no connection: a Socket moved from, or never connected
};
const char* toString(Transport transport) noexcept;

struct SocketOptions {
    Mode mode = Mode::Auto;
    // Our receive buffer (the DMB, its 32-byte CDC head included), rounded up to a size
    // class; Linux asks for sk_rcvbuf / 2 = 64 KiB by default. A smaller class is taken
    // when memory or the device runs short.
    std::size_t rmbBytes = 64 * 1024;
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
    // Listeners (Linux's limit_smc_hs): handshakes of this listener queued or
    // running, past which a new connection goes to TCP at once (a DECLINE, PEERNOSMC, as
    // Linux's SYN without the SMC option makes it) instead of waiting; 0: no limit. So does
    // a new connection from a host that has half of it waiting for its CLC messages already.
    std::size_t handshakeLimit = 256;
    // Listeners: accept on the handshake pool, behind the handshakes, as Linux did before
    // 2022 (one workqueue for both) -- for comparison only: a burst of handshakes
    // starves accept() and the listen queue overflows. No limit applies then.
    bool sharedAcceptQueue = false;
    // Listeners: connections done with their handshake that wait for accept(), at most
    // (listen(2)'s backlog; 0 counts as 1; those in their handshake are handshakeLimit's).
    // Past it the listener stops taking connections and the kernel's listen queue holds them;
    // queued connections that are already over (abandoned by their peer, nothing to read)
    // are dropped to make room and never handed out. Not with sharedAcceptQueue.
    std::size_t backlog = 4096;
};

// What Socket::recvZeroCopy handed out, in stream order: view[0], view[1], then the first
// `copied` bytes of the caller's buffer. Nothing at all: the end of the stream.
struct RecvView {
    std::array<std::span<const std::byte>, 2> view{}; // in our receive ring (SMC-D)
    std::size_t copied = 0;
    std::size_t viewBytes() const noexcept { return view[0].size() + view[1].size(); }
    std::size_t size() const noexcept { return viewBytes() + copied; }
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
    // The handshake pool's threads at most (server CLC handshakes, which wait for the peer);
    // a listener's accept never runs on it (SocketOptions::sharedAcceptQueue aside).
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
};

// One connection as `smcss` shows it.
struct ConnectionInfo {
    Transport transport = Transport::Tcp;
    std::uint8_t version = 0; // SMC: 1 or 2 (SMC-Rv1 or v2; SMC-D here is always v2)
    std::optional<clc::DeclineCode> fallback;
    std::string state; // ACTIVE, PEERCLOSEWAIT1, ..., CLOSED (Linux's names)
    std::string local;
    std::string peer;
    bool server = false;
    std::size_t rmbBytes = 0;     // our receive ring
    std::size_t peerRmbBytes = 0; // the peer's, where we write
    std::uint64_t dmbToken = 0;   // SMC-D: ours
    std::uint64_t peerDmbToken = 0;
    std::uint32_t token = 0; // SMC-R: our alert token
    std::uint32_t peerToken = 0;
    std::uint8_t linkId = 0;        // SMC-R: the link it rides now
    std::uint16_t producerWrap = 0; // our producer cursor into the peer's ring
    std::uint32_t producerCount = 0;
    std::uint16_t consumerWrap = 0; // how far we consumed our ring
    std::uint32_t consumerCount = 0;
    std::uint64_t bytesSent = 0;
    std::uint64_t bytesReceived = 0;
};

// A process's SMC: its loopback-ism device and SMC-D buffer pool, its SMC-R device and link
// groups if configured, the handshake threads, statistics and the list of its connections.
// Sockets and listeners are made with one (Socket::connect, Listener::listen). Thread-safe.
class SmcStack
{
public:
    // Opens the cross-process loopback-ism device and the SMC-D buffer pool, and the SMC-R
    // device if configured. Errors: invalid_argument (a bad UEID, no handshake threads, an
    // SMC-R config without a device), address_not_available (a device without a RoCE v2
    // IPv4 GID, or without the GID given), no_such_device (its GID has no netdev for the
    // MAC), the device's (its Unix socket, the ibverbs device), the pool's. Does not block.
    static Result<std::unique_ptr<SmcStack>> create(StackConfig config = {});
    // Every Socket and Listener made with the stack must be gone first. Waits for running
    // handshakes to end (each within its CLC timeout).
    ~SmcStack();
    SmcStack(const SmcStack&) = delete;
    SmcStack& operator=(const SmcStack&) = delete;

    // None of these blocks beyond a short lock.
    StackStats stats() const;
    PoolStats poolStats() const; // the SMC-D buffer pool's
    // Every connection of the process made with this stack that is not closed yet.
    std::vector<ConnectionInfo> connections() const;
    // The links of every SMC-R link group of the stack (none without an SMC-R device), as
    // `smcr linkgroup` lists them.
    std::vector<LinkInfo> smcrLinks() const;
    // Why SMC's TCP option is not on our sockets' SYNs and SYN-ACKs: function_not_supported
    // when not asked for, or without an SMC-R device; operation_not_permitted without the
    // privilege; none when it is.
    std::error_code tcpOptionError() const noexcept;

private:
    explicit SmcStack(std::unique_ptr<StackCore> core) noexcept;
    friend StackCore& coreOf(SmcStack& stack) noexcept;
    friend Result<std::unique_ptr<SmcStack>> makeStack(StackConfig config, const StackHooks& hooks);

    std::unique_ptr<StackCore> core_;
};

} // namespace smc
