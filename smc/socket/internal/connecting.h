// SPDX-License-Identifier: MIT
// Connecting: a Socket::connectAsync under way, and the connection it ends in.
#pragma once

#include <atomic>
#include <memory>
#include <optional>

#include "base/event_fd.h"
#include "base/mutex.h"
#include "base/result.h"
#include "base/unique_fd.h"
#include "smc/net/tcp.h"
#include "smc/socket/internal/socket_impl.h"

namespace smc
{

// The TCP connect and the client handshake run as one task on the stack's handshake threads,
// as Socket::connect would run them; the socket waits for its end, or polls fd(). Thread-safe.
class Connecting
{
public:
    // Posts the task. Errors: eventfd(2)'s. Does not block.
    static Result<std::shared_ptr<Connecting>> start(StackCore& stack, net::SocketAddress to,
                                                     const SocketOptions& options);

    // Readable once the connect is over (connected or failed); stays so.
    int fd() const noexcept { return done_.fd(); }
    // The connection: resource_unavailable_try_again while under way when `nonBlocking`, else
    // waits for the end. Errors: Socket::connect's.
    Result<std::shared_ptr<SocketImpl>> await(bool nonBlocking);
    // The connection once there is one, without a lock (the calls of a connected socket).
    SocketImpl* connection() const noexcept { return made_.load(std::memory_order_acquire); }
    // The socket's non-blocking flag, handed to the connection once there is one.
    void setNonBlocking(bool on) noexcept;
    bool nonBlocking() const noexcept { return nonBlocking_.load(); }
    // The socket is closed: a handshake under way is cut short (its TCP socket shut down), a
    // connection made later is closed at once; waiters get not_connected. Never blocks.
    void abandon() noexcept;

private:
    explicit Connecting(EventFd done) noexcept : done_(std::move(done)) {}
    // The task's steps: whether abandon() ran; the TCP socket the handshake runs on (false:
    // abandoned); the end.
    bool closed() noexcept;
    bool follow(int tcp) noexcept;
    void finish(Result<std::shared_ptr<SocketImpl>> result) noexcept;

    const EventFd done_;
    std::atomic<bool> nonBlocking_{false};
    std::atomic<SocketImpl*> made_{nullptr}; // result_'s connection, once set
    Mutex mutex_;
    ConditionVariable changed_;
    std::optional<Result<std::shared_ptr<SocketImpl>>> result_ SMC_GUARDED_BY(mutex_);
    bool abandoned_ SMC_GUARDED_BY(mutex_) = false;
    UniqueFd following_ SMC_GUARDED_BY(mutex_); // a dup of the handshake's TCP socket
};

} // namespace smc
