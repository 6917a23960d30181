// SPDX-License-Identifier: MIT
// EventFd: eventfd(2) with one write to signal and one read to clear.
#include "base/event_fd.h"

#include <sys/eventfd.h>
#include <unistd.h>

#include <cstdint>

#include "base/sys_error.h"

namespace smc
{

Result<EventFd> EventFd::create() noexcept
{
    UniqueFd fd(::eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC));
    if (!fd)
        return lastError();
    return EventFd(std::move(fd));
}

void EventFd::signal() const noexcept
{
    const std::uint64_t one = 1;
    (void)!::write(fd_.get(), &one, sizeof one);
}

void EventFd::clear() const noexcept
{
    std::uint64_t count = 0;
    (void)!::read(fd_.get(), &count, sizeof count);
}

} // namespace smc
