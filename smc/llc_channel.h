// SPDX-License-Identifier: MIT
// LlcChannel: one link's control-message channel, whatever carries it (RC QP, in-process pair).
#pragma once

#include <cstddef>
#include <functional>
#include <span>
#include <vector>

#include "pool/result.h"

namespace smc
{

class LlcChannel
{
public:
    struct Callbacks {
        // One message, as received (the link group decodes and validates it).
        std::function<void(std::vector<std::byte>)> onMessage;
        // The link is down (peer gone, QP error, killed). Called once.
        std::function<void()> onDown;
    };

    virtual ~LlcChannel() = default;
    // Deliveries start; callbacks run on the channel's own thread.
    virtual void start(Callbacks callbacks) = 0;
    virtual Result<void> send(std::span<const std::byte> message) = 0;
    // Take the link down: both ends learn it.
    virtual void shutdown() noexcept = 0;
    virtual bool isUp() const noexcept = 0;
};

} // namespace smc
