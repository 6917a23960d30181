// SPDX-License-Identifier: MIT
// SmcStack: what a process's SMC sockets share (devices, buffer pool, statistics, connections).
#pragma once

#include <memory>
#include <system_error>
#include <vector>

#include "base/result.h"
#include "pool/stats.h"
#include "smc/conn/connection_info.h"
#include "smc/llc/link_info.h"
#include "smc/stack/stack_config.h"

namespace smc
{

class StackCore;
struct StackHooks;

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
    // handshakes to end (each within its CLC timeout) and for the connects of closed
    // connectAsync() sockets (each ends at once, or within connectTimeout).
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
