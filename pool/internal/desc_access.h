// SPDX-License-Identifier: MIT
// DescAccess: the pool internals' door to BufferDesc's private state.
#pragma once

#include <boost/intrusive/list.hpp>

#include "pool/buffer_desc.h"

namespace smc
{

struct DescAccess {
    using RegState = BufferDesc::RegState;
    static constexpr std::uint64_t kFree = BufferDesc::Free;
    static constexpr std::uint64_t kUsed = BufferDesc::Used;
    static constexpr std::uint64_t kUseMask = BufferDesc::kUseMask;

    static constexpr std::uint64_t pack(std::uint64_t generation, std::uint64_t use) noexcept
    {
        return (generation << 2) | use;
    }
    static constexpr std::uint64_t generationOf(std::uint64_t state) noexcept { return state >> 2; }

    using BucketHook =
        boost::intrusive::member_hook<BufferDesc, boost::intrusive::list_member_hook<>,
                                      &BufferDesc::bucketHook_>;

    static auto& state(BufferDesc& d) noexcept { return d.state_; }
    static auto& live(BufferDesc& d) noexcept { return d.live_; }
    static auto& nextFree(BufferDesc& d) noexcept { return d.nextFree_; }
    static auto& onStack(BufferDesc& d) noexcept { return d.onStack_; }
    static auto& regState(BufferDesc& d, unsigned link) noexcept { return d.regState_[link]; }
    static auto& bucketHook(BufferDesc& d) noexcept { return d.bucketHook_; }
    static std::uint32_t index(const BufferDesc& d) noexcept { return d.index_; }
    static BufferPool* pool(const BufferDesc& d) noexcept { return d.pool_; }

    static void setIndex(BufferDesc& d, std::uint32_t index) noexcept { d.index_ = index; }
    static void assign(BufferDesc& d, BufferPool* pool, BufferKind kind, unsigned sizeClass,
                       std::shared_ptr<std::byte> memory) noexcept
    {
        d.pool_ = pool;
        d.kind_ = kind;
        d.sizeClass_ = static_cast<std::uint8_t>(sizeClass);
        d.size_ = classBytes(sizeClass);
        d.data_ = memory.get();
        d.memory_ = std::move(memory);
        d.dmbToken_ = 0;
        d.reg_ = {};
    }
    static void clear(BufferDesc& d) noexcept
    {
        d.memory_.reset();
        d.data_ = nullptr;
        d.size_ = 0;
    }

    static BufferRef makeRef(BufferDesc* d, std::uint64_t generation) noexcept
    {
        return BufferRef(d, generation);
    }
};

} // namespace smc
