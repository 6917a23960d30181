// SPDX-License-Identifier: MIT
// Socket and Listener: SMC connections behind a socket-like API, falling back to TCP.
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>

#include "base/result.h"
#include "smc/clc/decline_code.h"
#include "smc/socket/stack.h"

namespace smc
{

class SocketImpl;
class ListenerImpl;
class Connecting;

enum class Shutdown : std::uint8_t { Read, Write, Both };

// Per send: More is MSG_MORE (more follows at once: do not announce these bytes yet).
enum class SendFlags : std::uint8_t { None, More };

// One connection. Move-only: closing or destroying the handle ends the connection. Calls from
// several threads are allowed: one sender and one receiver may run at once (sends are serialised
// among themselves, receives too).
//
// Errors, for every call below besides its own: not_connected (closed or never connected),
// connection_reset (the peer aborted, or died), broken_pipe (send after shutdown(Write) or
// after the peer closed), timed_out (the call's timeout passed), resource_unavailable_try_again
// (non-blocking and nothing could be done now), interrupted (a signal handler woke a blocked
// send or recv on SMC-D and options.onSignal said to fail it).
class Socket
{
public:
    Socket();
    ~Socket();
    Socket(Socket&&) noexcept;
    Socket& operator=(Socket&&) noexcept;

    // TCP connect, then the CLC handshake as client. A DECLINE from the peer, or one we send
    // (no device, no memory, ...), leaves a TCP connection (Transport::Tcp, fallbackReason()).
    // Errors: the TCP connect's (connection_refused, timed_out, ...); after TCP, timed_out
    // (no CLC answer within options.clcTimeout) and protocol_error (the answer is not CLC,
    // or malformed): as in Linux those are hard errors, not fallbacks. Blocks up to
    // options.connectTimeout for TCP and options.clcTimeout per CLC message.
    static Result<Socket> connect(SmcStack& stack, std::string_view host, std::uint16_t port,
                                  const SocketOptions& options = {});
    // connect() without waiting for it: the TCP connect and the handshake run on the stack's
    // handshake threads, and the socket returns at once. connectFd() becomes readable when
    // they are over, connectResult() says how they ended; until then every other call waits
    // for the end (resource_unavailable_try_again if non-blocking), then goes on, or fails
    // with the connect's error; pollFd() and the queries below answer for no connection.
    // Errors: address_not_available or invalid_argument (host, port), eventfd(2)'s. Blocks
    // only for the resolver when `host` is a name.
    static Result<Socket> connectAsync(SmcStack& stack, std::string_view host, std::uint16_t port,
                                       const SocketOptions& options = {});
    // A connectAsync() socket: a descriptor that turns readable when its connect is over, for
    // the application's poll/epoll. Valid until close(). Errors: not_connected (no connect
    // under way or done by connectAsync). Never blocks.
    Result<int> connectFd() const noexcept;
    // How the connect ended: resource_unavailable_try_again while it is under way, then
    // success or connect()'s error. A socket from connect() or accept() has succeeded. Errors:
    // not_connected (closed, or never connected). Never blocks.
    Result<void> connectResult() const;

    // Up to data.size() bytes; returns how many were taken (≥ 1 unless data is empty).
    // Blocks until some room or options.sendTimeout (negative: forever), unless non-blocking.
    // SendFlags::More (MSG_MORE), or the socket corked: on SMC the bytes are not announced
    // to the peer while its ring has room; the next send without either, setCork(false),
    // setNoDelay(true), shutdown or close announces them (as Linux SMC: no 200 ms timer).
    // Sends queued behind each other are corked by themselves (options.autocorkBytes).
    Result<std::size_t> send(std::span<const std::byte> data, SendFlags flags = SendFlags::None);
    // Up to into.size() bytes; 0 at the end of the stream (the peer shut down writing).
    // Blocks until data, EOF or options.recvTimeout, unless non-blocking.
    Result<std::size_t> recv(std::span<std::byte> into);
    // Zero-copy receive with a hybrid copy (as Linux's TCP_ZEROCOPY_RECEIVE): on SMC-D
    // a view of what arrived, in place in our receive ring (two spans when it wraps), valid
    // until releaseView() or close(); what is below options.zeroCopyThreshold (a short read,
    // or the piece past the wrap) is copied into `copyBuffer` instead, in the same call. On
    // SMC-R and TCP everything is copied (a recv into copyBuffer). Nothing: end of stream.
    // Blocks and fails as recv, and with operation_in_progress while a view is out.
    Result<RecvView> recvZeroCopy(std::span<std::byte> copyBuffer);
    // Done with the view (and the bytes copied with it): the peer may write there again.
    // Errors: invalid_argument (no view out), not_connected. Never blocks.
    Result<void> releaseView();
    // Read: later receives see the end; Write: the peer sees the end of the stream once what
    // was sent is read. Errors: not_connected. Does not block (sent data is already out),
    // beyond one CDC on SMC-R (a send slot: up to 10 s when the link is congested).
    Result<void> shutdown(Shutdown how);
    // Ends the connection: orderly when nothing unread is left here, else an abort (the
    // peer sees connection_reset), as Linux does. Buffers go back to the pool, mappings
    // are dropped. Later calls give not_connected; the destructor closes. SMC-D and TCP
    // never block; SMC-R runs the group's DELETE_RKEY flow (up to the LLC timeouts:
    // flowStart for the flow, then wait for the peer's answer).
    void close() noexcept;

    // A descriptor for the application's poll/epoll: readable when recv() would not block,
    // writable when send() would not (or when either would fail). Level-triggered, like a
    // socket's. For TCP it is the TCP socket itself; on SMC the first call makes it (a socket
    // pair the stack's epoll thread keeps in step with the connection). Valid until close().
    // Errors: not_connected; on SMC, those of making it (socketpair(2), eventfd(2),
    // epoll_ctl(2); io_error if none said why), which leave the connection as it was. Never
    // blocks.
    Result<int> pollFd() const noexcept;
    void setNonBlocking(bool on) noexcept;
    // TCP_CORK: on holds sends back as SendFlags::More does; off announces what is held.
    // On TCP it is the TCP option. Errors: not_connected; on SMC-R, a CDC's (see shutdown).
    // Blocks as shutdown(Write) at most.
    Result<void> setCork(bool on);
    // TCP_NODELAY (on by default here): on SMC, on announces what corking holds back (Linux
    // flushes too) and off changes nothing; on TCP it is the TCP option. Errors and
    // blocking as setCork.
    Result<void> setNoDelay(bool on);

    bool connected() const noexcept;
    // What carries the connection; None for a Socket without one (moved from, never connected).
    Transport transport() const noexcept;
    // Why the connection runs on TCP although SMC was tried; nullopt for SMC or a forced TCP.
    std::optional<clc::DeclineCode> fallbackReason() const noexcept;
    // What `smcss` shows for it.
    ConnectionInfo info() const;

private:
    friend class Listener;
    explicit Socket(std::shared_ptr<SocketImpl> impl) noexcept;
    // The connection, once a connectAsync() is over (waiting for it unless non-blocking).
    Result<SocketImpl*> live() const;
    // The one that is there now, or null (never waits).
    SocketImpl* now() const noexcept;

    std::shared_ptr<SocketImpl> impl_;
    std::shared_ptr<Connecting> connecting_; // connectAsync(): until close()
};

// A listening socket. accept() hands out connections whose handshake is done (SMC or a
// fallback). The listener accepts TCP on a thread of its own and runs handshakes on the
// stack's handshake pool; past ListenerOptions::handshakeLimit pending ones, new connections go to
// TCP at once.
class Listener
{
public:
    Listener();
    ~Listener();
    Listener(Listener&&) noexcept;
    Listener& operator=(Listener&&) noexcept;

    // Binds and listens ("" = every address; port 0 = any free port); `options` for the
    // connections it hands out, `limits` its own. Errors: bind(2)'s and listen(2)'s
    // (address_in_use, permission_denied, ...), address_not_available (host), eventfd(2)'s.
    // Does not block beyond name resolution.
    static Result<Listener> listen(SmcStack& stack, std::string_view host, std::uint16_t port,
                                   const SocketOptions& options = {},
                                   const ListenerOptions& limits = {});

    // The next connection. Blocks up to `timeout` (negative: forever). Errors: timed_out,
    // not_connected (closed). Connections whose handshake failed hard never show up here.
    Result<Socket> accept(std::chrono::milliseconds timeout = std::chrono::milliseconds(-1));
    // Readable when accept() would not block.
    int fd() const noexcept;
    std::uint16_t port() const noexcept;
    // Stops accepting; connections not yet accepted are closed (each as Socket::close()).
    void close() noexcept;

private:
    std::shared_ptr<ListenerImpl> impl_;
};

} // namespace smc
