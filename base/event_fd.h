// SPDX-License-Identifier: MIT
// EventFd: a non-blocking eventfd that wakes a poll or epoll wait.
#pragma once

#include "base/result.h"
#include "base/unique_fd.h"

namespace smc
{

// Readable from the first signal() until clear(). Never blocks (a full counter stays
// readable). Close-on-exec.
class EventFd
{
public:
    // Errors: eventfd(2)'s.
    static Result<EventFd> create() noexcept;
    EventFd() = default;

    int fd() const noexcept { return fd_.get(); }
    explicit operator bool() const noexcept { return fd_.valid(); }
    void signal() const noexcept;
    void clear() const noexcept;

private:
    explicit EventFd(UniqueFd fd) noexcept : fd_(std::move(fd)) {}
    UniqueFd fd_;
};

} // namespace smc
