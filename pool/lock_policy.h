// SPDX-License-Identifier: MIT
// LockPolicy: how a buffer pool's size-class buckets are protected.
#pragma once

#include <cstdint>

namespace smc
{

// How buckets are protected. All three share one interface and one test suite.
enum class LockPolicy : std::uint8_t {
    // One reader/writer lock per kind over all 16 classes; reuse walks the
    // class list and claims the first free buffer (Linux today).
    Global,
    // The same, with one reader/writer lock per (kind, class) bucket (the
    // 2024 per-bucket patch that Linux did not merge).
    Bucket,
    // Ours: a bounded per-thread cache per bucket in front of a lock-free
    // free stack per bucket. Reuse is O(1) whatever the bucket holds, and no
    // lock is shared with link add/remove (docs/design.md).
    Default,
};

constexpr const char* toString(LockPolicy policy) noexcept
{
    switch (policy) {
    case LockPolicy::Global:
        return "global";
    case LockPolicy::Bucket:
        return "bucket";
    case LockPolicy::Default:
        return "default";
    }
    return "?";
}

} // namespace smc
