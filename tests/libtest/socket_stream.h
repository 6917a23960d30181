// SPDX-License-Identifier: MIT
// Socket pairs over a listener, and a checked byte stream over a Socket: each byte a function
// of its position and a seed.
#pragma once

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <vector>

#include <gtest/gtest.h>

#include "smc/socket/socket.h"

namespace smc::test
{

struct SocketPair {
    Socket client;
    Socket server;
};

// A connection from `clientStack` to a listener of `serverStack` on 127.0.0.1, both ends; a
// failed step fails the test and leaves that end empty.
inline SocketPair connectPair(SmcStack& serverStack, SmcStack& clientStack,
                              const SocketOptions& serverOptions = {},
                              const SocketOptions& clientOptions = {})
{
    Listener l = std::move(Listener::listen(serverStack, "127.0.0.1", 0, serverOptions)).value();
    SocketPair p;
    Result<Socket> c = Socket::connect(clientStack, "127.0.0.1", l.port(), clientOptions);
    EXPECT_TRUE(c) << c.error().message();
    if (c)
        p.client = std::move(*c);
    Result<Socket> s = l.accept(std::chrono::seconds(10));
    EXPECT_TRUE(s) << s.error().message();
    if (s)
        p.server = std::move(*s);
    return p;
}

// Byte i of stream `seed`: a lost, doubled or misplaced byte shows where a checksum would
// only say that something did.
inline std::byte streamByte(std::uint64_t i, unsigned seed)
{
    return static_cast<std::byte>((i * 2654435761u >> 7) + seed);
}

// Sends `total` bytes of the stream in odd-sized pieces, then shuts the write side.
inline Result<void> sendStream(Socket& s, std::uint64_t total, unsigned seed)
{
    std::vector<std::byte> chunk(50'021);
    for (std::uint64_t sent = 0; sent < total;) {
        const auto n = static_cast<std::size_t>(
            std::min<std::uint64_t>(chunk.size() - sent % 1000, total - sent));
        for (std::size_t i = 0; i < n; ++i)
            chunk[i] = streamByte(sent + i, seed);
        for (std::size_t done = 0; done < n;) {
            Result<std::size_t> m = s.send(std::span(chunk).subspan(done, n - done));
            if (!m)
                return m.error();
            done += *m;
        }
        sent += n;
    }
    return s.shutdown(Shutdown::Write);
}

// Reads to EOF, counting into `received` (and `progress`, for another thread): the number
// of bytes that are not the stream's, or the error that ended it.
inline Result<std::uint64_t> recvStream(Socket& s, unsigned seed, std::uint64_t& received,
                                        std::atomic<std::uint64_t>* progress = nullptr)
{
    std::vector<std::byte> chunk(70'000);
    std::uint64_t wrong = 0;
    for (;;) {
        Result<std::size_t> n = s.recv(chunk);
        if (!n)
            return n.error();
        if (*n == 0)
            return wrong;
        for (std::size_t i = 0; i < *n; ++i)
            wrong += chunk[i] != streamByte(received + i, seed);
        received += *n;
        if (progress)
            progress->store(received);
    }
}

} // namespace smc::test
