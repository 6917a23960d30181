// SPDX-License-Identifier: MIT
// The connection's side of the shim's reads and writes, with the socket calls' semantics.
#pragma once

#include <sys/socket.h>
#include <sys/types.h>
#include <sys/uio.h>

#include <cstddef>
#include <span>

#include "smc/preload/shim.h"

namespace smc::preload
{

// Each returns what the hooked call returns (-1 with errno set on an error): partial I/O,
// EAGAIN, EPIPE with SIGPIPE unless MSG_NOSIGNAL, EINTR, MSG_DONTWAIT, MSG_MORE, MSG_WAITALL and
// MSG_PEEK as Linux's stream sockets have them, EOPNOTSUPP in a child for its parent's
// connection. A blocking call waits as the connection does.

// What a call on `fd` with `flags` goes to: a handshake under way is waited for unless the
// number or the call (MSG_DONTWAIT) is non-blocking.
Route routed(int fd, int flags, Use use);

ssize_t received(const Conn& conn, int fd, std::span<std::byte> into, int flags);
ssize_t sent(const Conn& conn, int fd, std::span<const std::byte> data, int flags);
// Scatter: one receive into a buffer of the iovecs' size (at most 1 MiB), copied out.
ssize_t receivedv(const Conn& conn, int fd, const iovec* iov, int count, int flags);
// Gather: the iovecs in order, each but the last sent with MSG_MORE (one announcement); a
// short send ends it, as a stream socket's partial write does (a full ring announces anyway).
ssize_t sentv(const Conn& conn, int fd, const iovec* iov, int count, int flags);
// sendfile(2) to an SMC connection: the file's bytes read and sent, 64 KiB at a time.
ssize_t sentFile(const Conn& conn, int out, int in, off_t* offset, std::size_t count);

// splice(2) needs a pipe at one end; at an SMC connection's end the bytes go through a buffer
// (64 KiB at most a call), never more than the other end takes, so none is lost. Out of the
// connection: at most what the pipe has room for, waiting for room as the kernel does (EAGAIN
// with SPLICE_F_NONBLOCK or a non-blocking pipe). Into it: tee(2) copies the pipe's bytes,
// and only what the connection took is then read out of the pipe (we are taken to be its only
// reader, as splice's caller is).
bool isPipe(int fd) noexcept;
ssize_t splicedOut(const Conn& conn, int fd, int pipe, std::size_t len, unsigned flags);
ssize_t splicedIn(const Conn& conn, int fd, int pipe, std::size_t len, unsigned flags);

// Numbers sent to another process (SCM_RIGHTS): their ready descriptors are held there too,
// from before the message leaves.
void passing(const msghdr* msg);

} // namespace smc::preload
