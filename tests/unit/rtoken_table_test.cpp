// SPDX-License-Identifier: MIT
// RtokenTable: Linux's add/set/delete semantics, duplicates, full table, link clearing.
#include "smc/llc/rtoken_table.h"

#include <gtest/gtest.h>

#include "smc/llc/link_errors.h"

namespace smc
{
namespace
{

TEST(RtokenTable, AddFindsDuplicatesOnTheSameLink)
{
    RtokenTable t;
    Result<unsigned> a = t.add(0, {0x10, 0x1000});
    Result<unsigned> b = t.add(0, {0x20, 0x2000});
    ASSERT_TRUE(a && b);
    EXPECT_NE(*a, *b);
    EXPECT_EQ(*t.add(0, {0x10, 0x1000}), *a) << "same rtoken, same row";
    EXPECT_NE(*t.add(1, {0x10, 0x1000}), *a) << "another link's column is another key";
    EXPECT_EQ(t.used(), 3u);
}

TEST(RtokenTable, NewLinkColumnsAreFilledByKnownRkey)
{
    RtokenTable t;
    const unsigned row = *t.add(0, {0x10, 0x1000});
    ASSERT_EQ(*t.setByRkey(0, 0x10, 2, {0x99, 0x9000}), row);
    EXPECT_EQ(t.get(row, 2), (RtokenTable::Rtoken{0x99, 0x9000}));
    EXPECT_EQ(t.setByRkey(0, 0x77, 2, {1, 1}).error(), std::errc::no_such_file_or_directory);
    ASSERT_TRUE(t.set(row, 1, {0x55, 0x5000}));
    EXPECT_EQ(t.get(row, 1), (RtokenTable::Rtoken{0x55, 0x5000}));
    EXPECT_FALSE(t.set(200, 1, {1, 1})) << "unused row";
}

TEST(RtokenTable, DeleteRemovesTheWholeRow)
{
    RtokenTable t;
    const unsigned row = *t.add(0, {0x10, 0x1000});
    ASSERT_TRUE(t.set(row, 1, {0x11, 0x1100}));
    // Linux sends DELETE_RKEY with one link's rkey; every column goes.
    ASSERT_EQ(*t.remove(1, 0x11), row);
    EXPECT_FALSE(t.get(row, 0));
    EXPECT_FALSE(t.get(row, 1));
    EXPECT_EQ(t.used(), 0u);
    EXPECT_EQ(t.remove(0, 0x10).error(), std::errc::no_such_file_or_directory);
}

TEST(RtokenTable, ClearLinkEmptiesOneColumn)
{
    RtokenTable t;
    const unsigned row = *t.add(0, {0x10, 0x1000});
    ASSERT_TRUE(t.set(row, 1, {0x11, 0x1100}));
    t.clearLink(0);
    EXPECT_FALSE(t.get(row, 0));
    EXPECT_TRUE(t.get(row, 1)) << "the row survives on the other link";
    EXPECT_EQ(t.used(), 1u);
}

TEST(RtokenTable, FullTableIsAClearError)
{
    RtokenTable t;
    for (unsigned i = 0; i < RtokenTable::kRows; ++i)
        ASSERT_TRUE(t.add(0, {i + 1, i}));
    EXPECT_TRUE(t.full());
    EXPECT_EQ(t.add(0, {1000, 1}).error(), std::errc::no_buffer_space);
    EXPECT_EQ(t.add(3, {1, 1}).error(), LinkErrc::InvalidSlot);
}

// A row deleted and taken again by another RMB is not the row it was: a
// connection holding the old one finds nothing through it.
TEST(RtokenTable, ARowTakenAgainHasANewGeneration)
{
    RtokenTable t;
    const RtokenTable::Row first = *t.addRow(0, {0x10, 0x1000});
    EXPECT_EQ(t.addRow(0, {0x10, 0x1000})->generation, first.generation) << "same RMB, same row";
    ASSERT_TRUE(t.remove(0, 0x10));
    EXPECT_FALSE(t.holds(first));
    const RtokenTable::Row second = *t.addRow(0, {0x20, 0x2000});
    ASSERT_EQ(second.index, first.index);
    EXPECT_NE(second.generation, first.generation);
    EXPECT_FALSE(t.get(first, 0));
    EXPECT_FALSE(t.holds(first));
    ASSERT_TRUE(t.get(second, 0));
    EXPECT_EQ(t.get(second, 0)->rkey, 0x20u);
}

// addRow says whether it took the row; removeRow takes out only the row it
// names (the generation it was handed), never one taken again since.
TEST(RtokenTable, AddRowTellsANewRowAndRemoveRowOnlyThatOne)
{
    RtokenTable t;
    bool created = false;
    const RtokenTable::Row first = *t.addRow(0, {0x10, 0x1000}, &created);
    EXPECT_TRUE(created);
    EXPECT_EQ(t.addRow(0, {0x10, 0x1000}, &created)->index, first.index);
    EXPECT_FALSE(created) << "known already";
    ASSERT_TRUE(t.removeRow(first));
    EXPECT_FALSE(t.removeRow(first)) << "gone already";
    const RtokenTable::Row second = *t.addRow(0, {0x20, 0x2000}, &created);
    ASSERT_TRUE(created);
    ASSERT_EQ(second.index, first.index);
    EXPECT_FALSE(t.removeRow(first)) << "the row was taken again";
    EXPECT_TRUE(t.holds(second));
}

} // namespace
} // namespace smc
