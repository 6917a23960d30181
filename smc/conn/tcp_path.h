// SPDX-License-Identifier: MIT
// TcpPath: a connection's bytes on plain TCP (forced, or a fallback), as a DataPath.
#pragma once

#include <atomic>
#include <cstddef>

#include "smc/conn/data_path.h"

namespace smc::net
{

// The TCP socket carries the bytes itself: what DataPath asks is what the kernel does, and
// the application polls the socket (ownPollFd). The socket stays its owner's (SocketImpl).
// One sender and one receiver may run at once.
class TcpPath final : public DataPath
{
public:
    // `skipPeerClc`: a DECLINE went out before the peer's PROPOSAL was read (a listener past
    // its handshake limit): the first receive discards that PROPOSAL.
    TcpPath(int fd, bool skipPeerClc) noexcept;

    Result<std::size_t> send(std::span<const std::byte> data, Deadline deadline, bool nonBlocking,
                             bool hold) override;
    Result<std::size_t> recv(std::span<std::byte> into, Deadline deadline,
                             bool nonBlocking) override;
    Result<std::size_t> peek(std::span<std::byte> into, Deadline deadline,
                             bool nonBlocking) override;
    Result<void> flush() override { return {}; } // TCP pushes by itself
    Result<RecvView> recvView(std::span<std::byte> copy, std::size_t threshold, Deadline deadline,
                              bool nonBlocking) override;
    Result<void> releaseView() override; // invalid_argument: TCP hands out no views
    Result<void> shutdownWrite() override { return shutdown(false, true); }
    Result<void> shutdown(bool read, bool write) override;
    Result<void> setCork(bool on) override;
    Result<void> setNoDelay(bool on) override;
    void close() noexcept override { closed_ = true; }
    void peerGone() noexcept override {}
    bool readable() const override;
    std::size_t unread() const override;
    bool abandoned() const override;
    bool writable() const override;
    void fillInfo(ConnectionInfo& info) const override;
    int enableEvents(int /*pulse*/) noexcept override { return -1; }
    void drainEvents() noexcept override {}
    int ownPollFd() const noexcept override { return fd_; }

private:
    // Waits for `events` on the socket (EAGAIN seen): try_again when non-blocking.
    Result<void> await(short events, Deadline deadline, bool nonBlocking) const;
    template <typename Io>
    Result<std::size_t> transfer(Io io, short events, Deadline deadline, bool nonBlocking) const;
    // recv and peek (`flags` MSG_PEEK), past a PROPOSAL left unread.
    Result<std::size_t> receive(std::span<std::byte> into, Deadline deadline, bool nonBlocking,
                                int flags);

    const int fd_;
    std::size_t clcLeft_ = 0; // of the peer's PROPOSAL still to discard; the receiver's alone
    std::atomic<bool> closed_{false};
};

} // namespace smc::net
