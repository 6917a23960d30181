// SPDX-License-Identifier: MIT
// RtokenTable operations, with Linux's duplicate detection and whole-row deletion.
#include "smc/llc/rtoken_table.h"

#include "smc/llc/link_errors.h"

namespace smc
{

std::optional<unsigned> RtokenTable::findLocked(unsigned link, std::uint32_t rkey) const
{
    for (unsigned r = 0; r < kRows; ++r)
        if (used_[r] && rows_[r][link].rkey == rkey)
            return r;
    return std::nullopt;
}

Result<RtokenTable::Row> RtokenTable::addRow(unsigned link, Rtoken token, bool* created)
{
    if (created != nullptr)
        *created = false;
    if (link >= kMaxLinks)
        return LinkErrc::InvalidSlot;
    MutexLocker lock(mutex_);
    for (unsigned r = 0; r < kRows; ++r)
        if (used_[r] && rows_[r][link] == token)
            return Row{r, generations_[r]}; // already known: Linux hands back the same row
    for (unsigned r = 0; r < kRows; ++r) {
        if (!used_[r]) {
            used_.set(r);
            rows_[r] = {};
            rows_[r][link] = token;
            if (created != nullptr)
                *created = true;
            return Row{r, ++generations_[r]};
        }
    }
    return std::make_error_code(std::errc::no_buffer_space);
}

Result<unsigned> RtokenTable::setByRkey(unsigned knownLink, std::uint32_t knownRkey,
                                        unsigned newLink, Rtoken token)
{
    if (knownLink >= kMaxLinks || newLink >= kMaxLinks)
        return LinkErrc::InvalidSlot;
    MutexLocker lock(mutex_);
    std::optional<unsigned> row = findLocked(knownLink, knownRkey);
    if (!row)
        return std::make_error_code(std::errc::no_such_file_or_directory);
    rows_[*row][newLink] = token;
    return *row;
}

Result<void> RtokenTable::set(unsigned row, unsigned link, Rtoken token)
{
    if (link >= kMaxLinks)
        return LinkErrc::InvalidSlot;
    MutexLocker lock(mutex_);
    if (row >= kRows || !used_[row])
        return std::make_error_code(std::errc::no_such_file_or_directory);
    rows_[row][link] = token;
    return {};
}

Result<unsigned> RtokenTable::remove(unsigned link, std::uint32_t rkey)
{
    if (link >= kMaxLinks)
        return LinkErrc::InvalidSlot;
    MutexLocker lock(mutex_);
    std::optional<unsigned> row = findLocked(link, rkey);
    if (!row)
        return std::make_error_code(std::errc::no_such_file_or_directory);
    rows_[*row] = {};
    used_.reset(*row);
    return *row;
}

bool RtokenTable::removeRow(Row row)
{
    MutexLocker lock(mutex_);
    if (row.index >= kRows || !used_[row.index] || generations_[row.index] != row.generation)
        return false;
    rows_[row.index] = {};
    used_.reset(row.index);
    return true;
}

void RtokenTable::clearLink(unsigned link)
{
    if (link >= kMaxLinks)
        return;
    MutexLocker lock(mutex_);
    for (auto& row : rows_)
        row[link] = {};
}

std::optional<unsigned> RtokenTable::find(unsigned link, std::uint32_t rkey) const
{
    if (link >= kMaxLinks)
        return std::nullopt;
    MutexLocker lock(mutex_);
    return findLocked(link, rkey);
}

std::optional<RtokenTable::Rtoken> RtokenTable::get(unsigned row, unsigned link) const
{
    MutexLocker lock(mutex_);
    if (row >= kRows || link >= kMaxLinks || !used_[row] || rows_[row][link].rkey == 0)
        return std::nullopt;
    return rows_[row][link];
}

std::optional<RtokenTable::Rtoken> RtokenTable::get(Row row, unsigned link) const
{
    MutexLocker lock(mutex_);
    if (row.index >= kRows || link >= kMaxLinks || !used_[row.index] ||
        generations_[row.index] != row.generation || rows_[row.index][link].rkey == 0)
        return std::nullopt;
    return rows_[row.index][link];
}

bool RtokenTable::holds(Row row) const
{
    MutexLocker lock(mutex_);
    return row.index < kRows && used_[row.index] && generations_[row.index] == row.generation;
}

unsigned RtokenTable::used() const
{
    MutexLocker lock(mutex_);
    return static_cast<unsigned>(used_.count());
}

} // namespace smc
