// SPDX-License-Identifier: MIT
// RtokenTable: the peer's RMBs as seen on each link (Linux lgr->rtokens[255][3]).
#pragma once

#include <array>
#include <bitset>
#include <cstdint>
#include <optional>

#include "base/mutex.h"
#include "base/result.h"
#include "pool/buffer_desc.h"

namespace smc
{

// One row per peer RMB, one column per link slot: where to RDMA-WRITE that
// RMB over that link. Rows are named by index (a connection keeps its row);
// a row is found again by the rkey it has on a given link. Thread-safe.
class RtokenTable
{
public:
    static constexpr unsigned kRows = 255; // Linux SMC_RMBS_PER_LGR_MAX

    struct Rtoken {
        std::uint32_t rkey = 0;
        std::uint64_t vaddr = 0;
        friend bool operator==(const Rtoken&, const Rtoken&) = default;
    };

    // A peer RMB learnt on `link` (CLC or CONFIRM_RKEY). The same (rkey,
    // vaddr) on that link gives back its existing row; a full table is
    // std::errc::no_buffer_space.
    Result<unsigned> add(unsigned link, Rtoken token);
    // The RMB whose rkey on `knownLink` is `knownRkey` is reachable on
    // `newLink` as `token` (ADD_LINK_CONT, the v2 ADD_LINK extension).
    Result<unsigned> setByRkey(unsigned knownLink, std::uint32_t knownRkey, unsigned newLink,
                               Rtoken token);
    // Row `row` is reachable on `link` as `token` (CONFIRM_RKEY's other links).
    Result<void> set(unsigned row, unsigned link, Rtoken token);
    // The peer freed the RMB whose rkey on `link` is `rkey`: the whole row goes.
    Result<unsigned> remove(unsigned link, std::uint32_t rkey);
    // A link is gone: its column empties in every row.
    void clearLink(unsigned link);

    // The row whose rkey on `link` is `rkey`.
    std::optional<unsigned> find(unsigned link, std::uint32_t rkey) const;
    std::optional<Rtoken> get(unsigned row, unsigned link) const;
    unsigned used() const;
    bool full() const { return used() == kRows; }

private:
    std::optional<unsigned> findLocked(unsigned link, std::uint32_t rkey) const
        SMC_REQUIRES(mutex_);

    mutable Mutex mutex_;
    std::bitset<kRows> used_ SMC_GUARDED_BY(mutex_);
    std::array<std::array<Rtoken, kMaxLinks>, kRows> rows_ SMC_GUARDED_BY(mutex_){};
};

} // namespace smc
