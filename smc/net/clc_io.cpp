// SPDX-License-Identifier: MIT
// CLC over TCP: peek the header, read the message whole, write it whole.
#include "smc/net/clc_io.h"

#include <poll.h>
#include <sys/ioctl.h>
#include <sys/socket.h>

#include <algorithm>
#include <array>
#include <cerrno>

namespace smc::net
{
namespace
{

// SO_RCVLOWAT: how many queued bytes make the socket readable (the default is 1).
void setLowWater(int fd, std::size_t bytes) noexcept
{
    const int n = static_cast<int>(bytes);
    ::setsockopt(fd, SOL_SOCKET, SO_RCVLOWAT, &n, sizeof n);
}

// Whether the peer shut down writing (its FIN is queued behind any bytes), without waiting.
bool peerShutDown(int fd) noexcept
{
    pollfd p{fd, POLLRDHUP, 0};
    return ::poll(&p, 1, 0) == 1 && (p.revents & (POLLRDHUP | POLLHUP)) != 0;
}

// Raises the socket's SO_RCVLOWAT while a peek waits for a whole header, so that poll
// wakes when all of it is there, not at once for the part already queued; puts it back to
// the default (1) after, for whoever polls the socket next.
class LowWater
{
public:
    explicit LowWater(int fd) noexcept : fd_(fd) {}
    ~LowWater()
    {
        if (raised_)
            setLowWater(fd_, 1);
    }
    LowWater(const LowWater&) = delete;
    LowWater& operator=(const LowWater&) = delete;
    void raise(std::size_t bytes) noexcept
    {
        setLowWater(fd_, bytes);
        raised_ = true;
    }

private:
    int fd_;
    bool raised_ = false;
};

// Peeks until `want` bytes are there. A peer that sent part of them and then nothing waits
// out the deadline asleep (SO_RCVLOWAT); one that sent part and closed is seen at once, as
// connection_reset (a peek sees queued bytes, not the FIN behind them: POLLRDHUP does).
Result<std::size_t> peek(int fd, std::span<std::byte> into, Deadline deadline)
{
    LowWater lowWater(fd);
    bool peerDone = false; // the peer shut down writing: what is queued is all there is
    for (;;) {
        const ssize_t n = ::recv(fd, into.data(), into.size(), MSG_PEEK | MSG_DONTWAIT);
        if (n > 0 && static_cast<std::size_t>(n) == into.size())
            return static_cast<std::size_t>(n);
        if (n == 0 || (n > 0 && peerDone))
            return std::make_error_code(std::errc::connection_reset);
        if (n < 0 && errno != EAGAIN && errno != EINTR)
            return lastError();
        if (n > 0)
            lowWater.raise(into.size());
        Result<short> r = waitFor(fd, POLLIN | POLLRDHUP, deadline);
        if (!r)
            return r.error();
        peerDone = (*r & (POLLRDHUP | POLLHUP)) != 0;
    }
}

Result<void> readExactly(int fd, std::span<std::byte> into, Deadline deadline)
{
    std::size_t done = 0;
    while (done < into.size()) {
        const ssize_t n = ::recv(fd, into.data() + done, into.size() - done, MSG_DONTWAIT);
        if (n == 0)
            return std::make_error_code(std::errc::connection_reset);
        if (n > 0) {
            done += static_cast<std::size_t>(n);
            continue;
        }
        if (errno != EAGAIN && errno != EINTR)
            return lastError();
        Result<short> r = waitFor(fd, POLLIN, deadline);
        if (!r)
            return r.error();
    }
    return {};
}

// What a whole header's length field claims, at least the header: how much of a malformed
// message goes, so the stream stays where its sender thinks it is.
std::size_t claimedSize(std::span<const std::byte, clc::kHeaderSize> head)
{
    return std::max<std::size_t>(clc::kHeaderSize, std::to_integer<std::size_t>(head[5]) << 8 |
                                                       std::to_integer<std::size_t>(head[6]));
}

} // namespace

bool firstMessageQueued(int fd, bool& raised, ClcHead* seen) noexcept
{
    std::array<std::byte, kClcLook> look{};
    const ssize_t n = ::recv(fd, look.data(), look.size(), MSG_PEEK | MSG_DONTWAIT);
    if (n < 0 && (errno == EAGAIN || errno == EINTR))
        return false; // nothing yet: readable once anything comes
    if (n > 0) {
        const auto have = static_cast<std::size_t>(n);
        Result<std::size_t> size =
            clc::messageSize(std::span(look).first(std::min(have, clc::kHeaderSize)));
        int queued = 0;
        const std::size_t want = !size                     ? 0 // not CLC, or malformed: decided
                                 : have < clc::kHeaderSize ? clc::kHeaderSize
                                                           : *size;
        if (want > have && (::ioctl(fd, FIONREAD, &queued) != 0 || std::size_t(queued) < want) &&
            !peerShutDown(fd)) {
            setLowWater(fd, want);
            raised = true;
            return false;
        }
    }
    // Decided: all of it is there, or something else, the end or an error (the handshake sees
    // it).
    if (raised)
        setLowWater(fd, 1);
    raised = false;
    if (seen != nullptr) {
        seen->queued = n > 0 ? static_cast<std::size_t>(n) : 0;
        std::copy_n(look.begin(), seen->size(), seen->bytes.begin());
    }
    return true;
}

bool onlyOneMessage(const ClcHead& seen) noexcept
{
    if (seen.size() < clc::kHeaderSize)
        return false;
    Result<std::size_t> size = clc::messageSize(seen.bytes);
    return size && *size == seen.queued && seen.queued < kClcLook;
}

void lowerLowWater(int fd) noexcept
{
    setLowWater(fd, 1);
}

Result<bool> startsWithClc(int fd, Deadline deadline, const ClcHead* seen)
{
    // The eyecatcher and the type decide; a bad length or version after them is malformed
    // CLC (declined), not someone else's protocol.
    std::array<std::byte, 5> head{};
    // Usually all of it is queued already: one look decides. Else byte by byte, so that a
    // short message of another protocol is told at once.
    ssize_t queued = 0;
    if (seen != nullptr && seen->size() > 0) {
        queued = static_cast<ssize_t>(std::min(seen->size(), head.size()));
        std::copy_n(seen->bytes.begin(), queued, head.begin());
    } else {
        queued = ::recv(fd, head.data(), head.size(), MSG_PEEK | MSG_DONTWAIT);
    }
    if (queued > 0 && !clc::messageSize(std::span(head).first(std::size_t(queued))))
        return false;
    if (queued == static_cast<ssize_t>(head.size()))
        return true;
    for (std::size_t want = 1; want <= head.size(); ++want) {
        Result<std::size_t> n = peek(fd, std::span(head).first(want), deadline);
        if (!n)
            return n.error();
        if (!clc::messageSize(std::span(head).first(want)))
            return false;
    }
    return true;
}

Result<bool> skipClc(int fd, std::size_t& left)
{
    if (left == kClcSizeUnknown) {
        std::array<std::byte, clc::kHeaderSize> head{};
        const ssize_t n = ::recv(fd, head.data(), head.size(), MSG_PEEK | MSG_DONTWAIT);
        if (n < 0)
            return errno == EAGAIN || errno == EINTR ? Result<bool>(false)
                                                     : Result<bool>(lastError());
        if (n == 0)
            return true; // the end: recv reports it
        Result<std::size_t> size = clc::messageSize(std::span(head).first(std::size_t(n)));
        const bool partial = std::size_t(n) < head.size();
        const bool ended = partial && size && peerShutDown(fd);
        if (partial && size && !ended) {
            // Readable (our poll, and the application's on this socket) once the whole
            // header is there, or the end: not at once for the part that is.
            setLowWater(fd, head.size());
            return false;
        }
        setLowWater(fd, 1);
        if (!size && partial)
            return true; // not CLC: the application's bytes
        if (ended) {
            // Part of a header, then the end: none of it is the application's.
            (void)!::recv(fd, head.data(), std::size_t(n), MSG_DONTWAIT);
            return true;
        }
        left = size ? *size : claimedSize(head); // malformed: as readClc takes it
    }
    std::array<std::byte, 512> junk;
    while (left > 0) {
        const ssize_t n = ::recv(fd, junk.data(), std::min(left, junk.size()), MSG_DONTWAIT);
        if (n == 0)
            return true;
        if (n < 0)
            return errno == EAGAIN || errno == EINTR ? Result<bool>(false)
                                                     : Result<bool>(lastError());
        left -= static_cast<std::size_t>(n);
    }
    return true;
}

Result<clc::Message> readClc(int fd, Deadline deadline, const ClcHead* seen)
{
    std::array<std::byte, clc::kHeaderSize> head{};
    if (seen != nullptr && seen->size() == head.size()) {
        head = seen->bytes;
    } else if (Result<std::size_t> peeked = peek(fd, head, deadline); !peeked) {
        return peeked.error();
    }
    Result<std::size_t> size = clc::messageSize(head);
    if (!size) {
        // A header whose length or version does not fit: the sender's framing is its
        // length field, so that many bytes (at least the header) go, and the stream stays
        // where the sender thinks it is.
        const std::size_t claimed = claimedSize(head);
        std::vector<std::byte> junk(claimed);
        if (Result<void> r = readExactly(fd, junk, deadline); !r)
            return r.error();
        return size.error();
    }
    // The length field is 16 bits: a message is at most 64 KiB, read whole.
    std::vector<std::byte> bytes(*size);
    if (Result<void> r = readExactly(fd, bytes, deadline); !r)
        return r.error();
    return clc::decode(bytes);
}

Result<void> writeAll(int fd, std::span<const std::byte> bytes, Deadline deadline)
{
    std::size_t done = 0;
    while (done < bytes.size()) {
        const ssize_t n =
            ::send(fd, bytes.data() + done, bytes.size() - done, MSG_NOSIGNAL | MSG_DONTWAIT);
        if (n > 0) {
            done += static_cast<std::size_t>(n);
            continue;
        }
        if (n < 0 && errno != EAGAIN && errno != EINTR)
            return lastError();
        Result<short> r = waitFor(fd, POLLOUT, deadline);
        if (!r)
            return r.error();
    }
    return {};
}

Result<void> writeClc(int fd, const clc::Message& message, Deadline deadline)
{
    Result<std::vector<std::byte>> bytes = clc::encode(message);
    if (!bytes)
        return bytes.error();
    return writeAll(fd, *bytes, deadline);
}

} // namespace smc::net
