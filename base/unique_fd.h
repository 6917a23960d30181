// SPDX-License-Identifier: MIT
// UniqueFd: a file descriptor that closes itself.
#pragma once

#include <fcntl.h>
#include <unistd.h>

#include <atomic>
#include <utility>

namespace smc
{

class UniqueFd
{
public:
    UniqueFd() = default;
    // Takes `fd`, moved to a number at or above placementFloor() if one is set.
    explicit UniqueFd(int fd) noexcept : fd_(placed(fd)) {}
    UniqueFd(UniqueFd&& other) noexcept : fd_(other.release()) {}
    UniqueFd& operator=(UniqueFd&& other) noexcept
    {
        reset(other.release());
        return *this;
    }
    UniqueFd(const UniqueFd&) = delete;
    UniqueFd& operator=(const UniqueFd&) = delete;
    ~UniqueFd() { reset(); }

    int get() const noexcept { return fd_; }
    bool valid() const noexcept { return fd_ >= 0; }
    explicit operator bool() const noexcept { return valid(); }
    [[nodiscard]] int release() noexcept { return std::exchange(fd_, -1); }
    void reset(int fd = -1) noexcept
    {
        if (fd_ >= 0)
            ::close(fd_);
        fd_ = fd;
    }

    // Where descriptors the library makes go: at or above this number (0: wherever the kernel
    // puts them, the lowest free). smc-run sets it, so that an unmodified program's own numbers
    // stay as small as without us: programs size tables by them (an event loop's array,
    // select()'s sets). Past the limit a descriptor stays where it is.
    static std::atomic<int>& placementFloor() noexcept
    {
        static std::atomic<int> floor{0};
        return floor;
    }

private:
    static int placed(int fd) noexcept
    {
        const int floor = placementFloor().load(std::memory_order_relaxed);
        if (fd < 0 || fd >= floor || floor == 0)
            return fd;
        const int high = ::fcntl(fd, F_DUPFD_CLOEXEC, floor);
        if (high < 0)
            return fd;
        ::close(fd);
        return high;
    }

    int fd_ = -1;
};

} // namespace smc
