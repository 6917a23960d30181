// SPDX-License-Identifier: MIT
// BufferDesc: one pooled RMB or sndbuf, with per-link registrations; BufferRef: a lease on one.
#pragma once

#include <array>
#include <atomic>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <span>

#include <boost/intrusive/list_hook.hpp>

namespace smc
{

class BufferPool;
struct DescAccess;

enum class BufferKind : std::uint8_t { Rmb = 0, Sndbuf = 1 };
inline constexpr unsigned kBufferKinds = 2;
// Links per link group: 2 symmetric + 1 transient asymmetric (Linux SMC_LINKS_PER_LGR_MAX).
inline constexpr unsigned kMaxLinks = 3;

constexpr const char* toString(BufferKind kind) noexcept
{
    switch (kind) {
    case BufferKind::Rmb:
        return "rmb";
    case BufferKind::Sndbuf:
        return "sndbuf";
    }
    return "?";
}

// What a registrar records for one buffer on one link. For RDMA: the memory
// region's keys and the address the peer writes to. `handle` is the
// registrar's own (e.g. the ibv_mr pointer); the pool never looks at it.
struct LinkRegistration {
    std::uint32_t lkey = 0;
    std::uint32_t rkey = 0;
    std::uint64_t addr = 0;
    std::uintptr_t handle = 0;
};

// One buffer owned by a pool. Users see it through a BufferRef; everything
// that changes it is the pool's or the registrar's business. Cache-line
// aligned: descriptors sit side by side in the pool's table, and two threads
// claiming neighbours must not bounce one line between them.
//
// Lifetime: the descriptor belongs to its pool and dies with it. Its data,
// size and registrations are meaningful only while the reader holds a lease
// on it (or, for a registrar, inside its calls): a free buffer may be
// reclaimed under a memory limit, or refused by a registrar, and its
// descriptor recycled for another buffer.
class alignas(64) BufferDesc
{
public:
    BufferDesc() = default;
    BufferDesc(const BufferDesc&) = delete;
    BufferDesc& operator=(const BufferDesc&) = delete;

    std::byte* data() const noexcept { return data_; }
    std::size_t size() const noexcept { return size_; }
    std::span<std::byte> bytes() const noexcept { return {data_, size_}; }
    BufferKind kind() const noexcept { return kind_; }
    unsigned sizeClass() const noexcept { return sizeClass_; }

    // The memory's owner handle, for registrars that must keep it alive
    // beyond the pool's own use (an ISM DMB that a peer has attached), and
    // for users who need the bytes after the pool is gone: copy it while
    // holding the lease.
    const std::shared_ptr<std::byte>& memory() const noexcept { return memory_; }

    bool isRegistered(unsigned link) const noexcept
    {
        return regState_[link].load(std::memory_order_acquire) == RegState::Registered;
    }
    // Valid only while isRegistered(link).
    const LinkRegistration& registration(unsigned link) const noexcept { return reg_[link]; }
    LinkRegistration& registration(unsigned link) noexcept { return reg_[link]; }

    // SMC-D: the DMB token the registrar obtained for this buffer (0 = none).
    std::uint64_t dmbToken() const noexcept { return dmbToken_; }
    void setDmbToken(std::uint64_t token) noexcept { dmbToken_ = token; }

private:
    friend struct DescAccess;

    enum class RegState : std::uint8_t { Unregistered, Busy, Registered };

    // state_ packs (generation << 2) | Use. The generation moves on every
    // acquire, so a stale BufferRef can never release a buffer someone else holds.
    enum Use : std::uint64_t { Free = 0, Used = 1 };
    static constexpr std::uint64_t kUseMask = 3;

    std::byte* data_ = nullptr;
    std::size_t size_ = 0;
    std::shared_ptr<std::byte> memory_;
    BufferPool* pool_ = nullptr;
    BufferKind kind_ = BufferKind::Rmb;
    std::uint8_t sizeClass_ = 0;
    std::uint32_t index_ = 0; // slot in the pool's descriptor table

    std::atomic<bool> live_{false}; // holds memory; false while vacant in the table
    std::atomic<std::uint64_t> state_{0};
    std::atomic<std::uint32_t> nextFree_{0}; // free-stack link (index + 1, 0 = end)
    std::atomic<bool> onStack_{false};       // linked on a free stack

    std::array<std::atomic<RegState>, kMaxLinks> regState_{};
    std::array<LinkRegistration, kMaxLinks> reg_{};
    std::uint64_t dmbToken_ = 0;

    // Linux-style bucket list membership (global and bucket lock policies).
    boost::intrusive::list_member_hook<> bucketHook_;
};

// A lease on one buffer: what acquire() hands out and release() takes back.
// A plain value; copies are allowed, but only one release succeeds, and a
// release through a stale copy after someone else re-acquired the buffer is
// refused (the generation no longer matches).
//
// Lifetime: a BufferRef does not keep its pool alive (that would cost a
// shared count on every acquire). Releasing or dereferencing one after its
// pool is destroyed is undefined (use-after-free); so is using data() after
// release, when the buffer may be another holder's. A default-constructed
// BufferRef may only be tested and released (InvalidBuffer).
class BufferRef
{
public:
    BufferRef() = default;

    BufferDesc* desc() const noexcept { return desc_; }
    BufferDesc* operator->() const noexcept { return desc_; }
    std::byte* data() const noexcept { return desc_->data(); }
    std::size_t size() const noexcept { return desc_->size(); }
    std::uint64_t generation() const noexcept { return generation_; }
    explicit operator bool() const noexcept { return desc_ != nullptr; }

private:
    friend struct DescAccess;
    BufferRef(BufferDesc* desc, std::uint64_t generation) : desc_(desc), generation_(generation) {}

    BufferDesc* desc_ = nullptr;
    std::uint64_t generation_ = 0;
};

} // namespace smc
