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

    // A row and how many times it was taken before: a connection that keeps
    // both learns when its row was deleted and taken by another RMB.
    struct Row {
        unsigned index = 0;
        std::uint32_t generation = 0;
    };

    // A peer RMB learnt on `link` (CLC or CONFIRM_RKEY). The same (rkey,
    // vaddr) on that link gives back its existing row; `created` (if given)
    // tells which: true when this call took the row. A full table is
    // std::errc::no_buffer_space.
    Result<Row> addRow(unsigned link, Rtoken token, bool* created = nullptr);
    Result<unsigned> add(unsigned link, Rtoken token)
    {
        Result<Row> row = addRow(link, token);
        return row ? Result<unsigned>(row->index) : Result<unsigned>(row.error());
    }
    // The RMB whose rkey on `knownLink` is `knownRkey` is reachable on
    // `newLink` as `token` (ADD_LINK_CONT, the v2 ADD_LINK extension).
    Result<unsigned> setByRkey(unsigned knownLink, std::uint32_t knownRkey, unsigned newLink,
                               Rtoken token);
    // Row `row` is reachable on `link` as `token` (CONFIRM_RKEY's other links).
    Result<void> set(unsigned row, unsigned link, Rtoken token);
    // The peer freed the RMB whose rkey on `link` is `rkey`: the whole row goes.
    Result<unsigned> remove(unsigned link, std::uint32_t rkey);
    // The row goes if it is still the one `row` names (not deleted since);
    // false otherwise.
    bool removeRow(Row row);
    // A link is gone: its column empties in every row.
    void clearLink(unsigned link);

    // The row whose rkey on `link` is `rkey`.
    std::optional<unsigned> find(unsigned link, std::uint32_t rkey) const;
    std::optional<Rtoken> get(unsigned row, unsigned link) const;
    // The same, if the row is still the one `row` names (not deleted since).
    std::optional<Rtoken> get(Row row, unsigned link) const;
    // Whether `row` is still taken by the RMB it was handed out for.
    bool holds(Row row) const;
    unsigned used() const;
    bool full() const { return used() == kRows; }

private:
    std::optional<unsigned> findLocked(unsigned link, std::uint32_t rkey) const
        SMC_REQUIRES(mutex_);

    mutable Mutex mutex_;
    std::bitset<kRows> used_ SMC_GUARDED_BY(mutex_);
    std::array<std::array<Rtoken, kMaxLinks>, kRows> rows_ SMC_GUARDED_BY(mutex_){};
    std::array<std::uint32_t, kRows> generations_ SMC_GUARDED_BY(mutex_){};
};

} // namespace smc
