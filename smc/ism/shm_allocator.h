// SPDX-License-Identifier: MIT
// ShmAllocator: buffer memory in sealed memfds, so a DMB can be mapped by a peer process.
#pragma once

#include <cstddef>
#include <map>
#include <memory>

#include "base/mutex.h"
#include "base/result.h"
#include "base/unique_fd.h"
#include "pool/page_allocator.h"

namespace smc
{

// Makes a memfd of `bytes` (MFD_CLOEXEC | MFD_ALLOW_SEALING), sized and sealed
// with F_SEAL_SHRINK | F_SEAL_GROW | F_SEAL_SEAL: nobody, its creator
// included, can truncate it under a peer's mapping (no SIGBUS) or change the
// seals. Never named: nothing appears in /dev/shm. Errors: the errno of
// memfd_create, ftruncate or fcntl. Does not block.
Result<UniqueFd> makeSealedMemfd(std::size_t bytes) noexcept;

// A PageAllocator whose every allocation is its own sealed memfd mapped
// MAP_SHARED. It remembers address -> memfd so that the ISM device can hand
// the memfd of a buffer the pool gives it to a peer. Thread-safe.
//
// A buffer's deleter unmaps it and closes its memfd; it holds the
// allocator's state, not the allocator, so memory may outlive the allocator
// (an in-process DmbAttachment, for instance).
class ShmAllocator final : public PageAllocator
{
public:
    ShmAllocator();
    ~ShmAllocator() override;
    ShmAllocator(const ShmAllocator&) = delete;
    ShmAllocator& operator=(const ShmAllocator&) = delete;

    // Null when memfd_create, ftruncate, sealing or mmap fail. Does not block.
    std::shared_ptr<std::byte> allocate(std::size_t bytes) noexcept override;

    // True when [address, address + bytes) is exactly one live allocation.
    bool owns(const std::byte* address, std::size_t bytes) const noexcept;
    // A duplicate of the memfd behind exactly that allocation. Errors:
    // invalid_argument (not one of ours), the errno of fcntl(F_DUPFD_CLOEXEC).
    Result<UniqueFd> dupMemfd(const std::byte* address, std::size_t bytes) const noexcept;
    // Revocation: a fresh sealed memfd is mapped MAP_FIXED over the
    // allocation (same address, zero pages) and the old memfd closed, so
    // whoever still maps the old one sees only the old, dead pages. The
    // caller must keep everyone of this process off the buffer meanwhile.
    // Errors: invalid_argument (not one of ours), the errno of
    // makeSealedMemfd or mmap (then nothing changed).
    Result<void> replacePages(std::byte* address, std::size_t bytes) noexcept;
    // Live allocations (for tests).
    std::size_t liveCount() const noexcept;

private:
    struct State;
    std::shared_ptr<State> state_;
};

} // namespace smc
