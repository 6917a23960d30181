// SPDX-License-Identifier: MIT
// ShmAllocator: one sealed memfd per buffer, mapped shared; address -> memfd for the device.
#include "smc/ism/shm_allocator.h"
#include "base/sys_error.h"

#include <cerrno>
#include <new>
#include <utility>

#include <fcntl.h>
#include <sys/mman.h>
#include <unistd.h>

namespace smc
{

struct ShmAllocator::State {
    struct Region {
        UniqueFd memfd;
        std::size_t size = 0;
    };
    mutable Mutex mutex;
    std::map<const std::byte*, Region> regions SMC_GUARDED_BY(mutex);
};

Result<UniqueFd> makeSealedMemfd(std::size_t bytes) noexcept
{
    UniqueFd fd(::memfd_create("smc-dmb", MFD_CLOEXEC | MFD_ALLOW_SEALING));
    if (!fd)
        return lastError();
    if (::ftruncate(fd.get(), static_cast<off_t>(bytes)) != 0)
        return lastError();
    if (::fcntl(fd.get(), F_ADD_SEALS, F_SEAL_SHRINK | F_SEAL_GROW | F_SEAL_SEAL) != 0)
        return lastError();
    return fd;
}

ShmAllocator::ShmAllocator() : state_(std::make_shared<State>()) {}

ShmAllocator::~ShmAllocator() = default;

std::shared_ptr<std::byte> ShmAllocator::allocate(std::size_t bytes) noexcept
{
    if (bytes == 0)
        return nullptr;
    Result<UniqueFd> fd = makeSealedMemfd(bytes);
    if (!fd)
        return nullptr;
    void* p = ::mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_SHARED, fd->get(), 0);
    if (p == MAP_FAILED)
        return nullptr;
    auto* address = static_cast<std::byte*>(p);
    try {
        MutexLocker lock(state_->mutex);
        state_->regions[address] = State::Region{std::move(*fd), bytes};
    } catch (const std::bad_alloc&) {
        ::munmap(address, bytes); // the memfd went with the Region that was not inserted
        return nullptr;
    }
    try {
        // The deleter forgets the region (closing its memfd) and unmaps; the
        // state it holds outlives the allocator if need be.
        return {address, [state = state_, bytes](std::byte* q) {
                    UniqueFd memfd; // closed after the lock
                    {
                        MutexLocker lock(state->mutex);
                        auto it = state->regions.find(q);
                        if (it != state->regions.end()) {
                            memfd = std::move(it->second.memfd);
                            state->regions.erase(it);
                        }
                    }
                    ::munmap(q, bytes);
                }};
    } catch (const std::bad_alloc&) {
        // No control block: the shared_ptr constructor already ran the deleter.
        return nullptr;
    }
}

bool ShmAllocator::owns(const std::byte* address, std::size_t bytes) const noexcept
{
    MutexLocker lock(state_->mutex);
    auto it = state_->regions.find(address);
    return it != state_->regions.end() && it->second.size == bytes;
}

Result<UniqueFd> ShmAllocator::dupMemfd(const std::byte* address, std::size_t bytes) const noexcept
{
    MutexLocker lock(state_->mutex);
    auto it = state_->regions.find(address);
    if (it == state_->regions.end() || it->second.size != bytes)
        return std::make_error_code(std::errc::invalid_argument);
    UniqueFd copy(::fcntl(it->second.memfd.get(), F_DUPFD_CLOEXEC, 0));
    if (!copy)
        return lastError();
    return copy;
}

Result<void> ShmAllocator::replacePages(std::byte* address, std::size_t bytes) noexcept
{
    UniqueFd old; // closed after the lock
    MutexLocker lock(state_->mutex);
    auto it = state_->regions.find(address);
    if (it == state_->regions.end() || it->second.size != bytes)
        return std::make_error_code(std::errc::invalid_argument);
    Result<UniqueFd> fresh = makeSealedMemfd(bytes);
    if (!fresh)
        return fresh.error();
    // MAP_FIXED replaces the old mapping atomically: the address never goes
    // unmapped, so a pointer the pool holds stays valid throughout.
    void* p =
        ::mmap(address, bytes, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_FIXED, fresh->get(), 0);
    if (p == MAP_FAILED)
        return lastError();
    old = std::exchange(it->second.memfd, std::move(*fresh));
    return {};
}

std::size_t ShmAllocator::liveCount() const noexcept
{
    MutexLocker lock(state_->mutex);
    return state_->regions.size();
}

} // namespace smc
