// SPDX-License-Identifier: MIT
// LinkChannel: what carries one link, control messages and data (RDMA WRITE), whatever it is.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <span>
#include <vector>

#include "base/result.h"
#include "base/wire_ids.h"
#include "smc/transport/link_address.h"

namespace smc
{

// The longest control message of a link: 44 bytes (CDC, LLC v1), or 8 KiB on an SMC-Rv2
// link (Linux SMC_WR_BUF_V2_SIZE: ADD_LINK with its rkeys).
inline constexpr std::size_t kShortMessages = 44;
inline constexpr std::size_t kLongMessages = 8192;
// The longest message of a group's links, by the group's LLC version.
constexpr std::size_t maxLinkMessage(std::uint8_t llcVersion) noexcept
{
    return llcVersion >= 2 ? kLongMessages : kShortMessages;
}

class LinkChannel
{
public:
    struct Callbacks {
        // One message, as received (the link group decodes and validates it).
        std::function<void(std::vector<std::byte>)> onMessage;
        // The link is down (peer gone, QP error, killed). Called once.
        std::function<void()> onDown;
    };

    virtual ~LinkChannel() = default;
    // Deliveries start; callbacks run one at a time, in order, on the
    // executor's short-task threads (a serial queue per channel), never on a
    // caller's thread nor on the completion thread, so a callback may send.
    virtual void start(Callbacks callbacks) = 0;
    virtual Result<void> send(std::span<const std::byte> message) = 0;
    // The end that offered the link learns the far end (ADD_LINK response).
    virtual Result<void> connect(const LinkAddress& /*peer*/) { return {}; }
    // RDMA WRITE `length` bytes at `src` (registered on this link under
    // `lkey`) to the peer's `remoteAddr` under `rkey`. Errors: not_connected
    // (the link is down, or this write took it down), timed_out (no
    // completion in time), the transport's own. Blocks until the write
    // completed.
    virtual Result<void> write(const void* /*src*/, std::size_t /*length*/, std::uint32_t /*lkey*/,
                               std::uint64_t /*remoteAddr*/, std::uint32_t /*rkey*/)
    {
        return std::make_error_code(std::errc::operation_not_supported);
    }
    // write() without waiting, so that a message can go right behind the WRITE (RC delivers
    // it after the WRITE's bytes); sendAfterWrites() sends one without waiting and tells
    // `landed` its completion, which comes after those of the WRITEs posted before it: true
    // means their bytes landed. `landed` runs exactly once unless the call fails, possibly
    // before it returns, on whatever thread sees the completion; it must not block. Errors:
    // write()'s and send()'s (timed_out: no room to post in time). Both block only for room
    // to post. Without a transport's own, postWrite is write() and sendAfterWrites is send()
    // followed by `landed(true)`.
    using Landed = std::function<void(bool landed)>;
    virtual Result<void> postWrite(const void* src, std::size_t length, std::uint32_t lkey,
                                   std::uint64_t remoteAddr, std::uint32_t rkey)
    {
        return write(src, length, lkey, remoteAddr, rkey);
    }
    virtual Result<void> sendAfterWrites(std::span<const std::byte> message, Landed landed)
    {
        Result<void> r = send(message);
        if (r)
            landed(true);
        return r;
    }
    // Take the link down: this end reports onDown; the far end learns it
    // when its transport does (in process at once, over RDMA by the LLC).
    virtual void shutdown() noexcept = 0;
    // Take the link down in order, as a group does with a link it clears away: what was sent
    // reaches the peer first (a short, bounded wait), then as shutdown().
    virtual void close() noexcept { shutdown(); }
    virtual bool isUp() const noexcept = 0;
};

} // namespace smc
