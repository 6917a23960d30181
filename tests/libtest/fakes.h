// SPDX-License-Identifier: MIT
// Test doubles for pool unit tests: a bookkeeping registrar and a failing page allocator.
#pragma once

#include <atomic>
#include <cstddef>
#include <functional>
#include <mutex>
#include <set>
#include <utility>

#include "pool/page_allocator.h"
#include "pool/registrar.h"

namespace smc::test
{

// Registers nothing for real; records which (buffer, link) pairs are
// registered and flags any double registration or unbalanced unregister.
class FakeRegistrar : public Registrar
{
public:
    std::error_code registerBuffer(BufferDesc& desc, unsigned link) override
    {
        std::lock_guard lock(mutex_);
        ++calls_;
        if (failNext_ > 0) {
            --failNext_;
            return std::make_error_code(std::errc::io_error);
        }
        if (failWhen_ && failWhen_(desc, link))
            return std::make_error_code(std::errc::io_error);
        if (!live_.emplace(&desc, link).second)
            ++violations_;
        desc.registration(link) = {0x1000u + link, 0x2000u + link,
                                   reinterpret_cast<std::uintptr_t>(desc.data()), 0};
        return {};
    }

    void unregisterBuffer(BufferDesc& desc, unsigned link) noexcept override
    {
        std::lock_guard lock(mutex_);
        if (live_.erase({&desc, link}) != 1)
            ++violations_;
        ++unregistered_;
    }

    void failNext(int n)
    {
        std::lock_guard lock(mutex_);
        failNext_ = n;
    }
    void failWhen(std::function<bool(const BufferDesc&, unsigned)> f)
    {
        std::lock_guard lock(mutex_);
        failWhen_ = std::move(f);
    }
    bool isRegistered(const BufferDesc* desc, unsigned link) const
    {
        std::lock_guard lock(mutex_);
        return live_.count({const_cast<BufferDesc*>(desc), link}) == 1;
    }
    std::size_t liveCount() const
    {
        std::lock_guard lock(mutex_);
        return live_.size();
    }
    std::size_t liveOn(unsigned link) const
    {
        std::lock_guard lock(mutex_);
        std::size_t n = 0;
        for (const auto& [d, l] : live_)
            n += l == link;
        return n;
    }
    int violations() const
    {
        std::lock_guard lock(mutex_);
        return violations_;
    }
    int calls() const
    {
        std::lock_guard lock(mutex_);
        return calls_;
    }
    int unregistered() const
    {
        std::lock_guard lock(mutex_);
        return unregistered_;
    }

private:
    mutable std::mutex mutex_;
    std::set<std::pair<BufferDesc*, unsigned>> live_;
    std::function<bool(const BufferDesc&, unsigned)> failWhen_;
    int failNext_ = 0;
    int violations_ = 0;
    int calls_ = 0;
    int unregistered_ = 0;
};

// Real mmap memory, but refuses requests of `failFrom` bytes or more, and
// counts what is still out so a test can prove nothing leaked.
class CountingAllocator : public PageAllocator
{
public:
    std::shared_ptr<std::byte> allocate(std::size_t bytes) noexcept override
    {
        if (bytes >= failFrom.load())
            return nullptr;
        std::shared_ptr<std::byte> inner = MmapAllocator::instance().allocate(bytes);
        if (!inner)
            return nullptr;
        live.fetch_add(bytes);
        std::byte* p = inner.get();
        return {p, [this, bytes, inner](std::byte*) mutable {
                    inner.reset();
                    live.fetch_sub(bytes);
                }};
    }

    std::atomic<std::size_t> failFrom{~std::size_t{0}};
    std::atomic<std::size_t> live{0};
};

} // namespace smc::test
