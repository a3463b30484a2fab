/*
 * SlotPool (src/match): the entry allocate_slot() hands out is the one its
 * index addresses, both for fresh slots (across chunk growth) and for reused
 * ones; release(index, entry) and release(index) put the same slot back.
 */
#include "match/slot_pool.h"

#include <gtest/gtest.h>

#include <cstdint>
#include <vector>

namespace {

struct Entry {
    uint32_t  value = 0;
    uint32_t  link  = 0;
    uint32_t &free_link() { return link; }
};

using Pool = uct_tm::match::SlotPool<Entry, 2>; /* chunks of 4: growth after a few slots */

TEST(SlotPool, AllocateSlotReturnsTheEntryItsIndexAddresses) {
    Pool                        pool;
    std::vector<uint32_t>       indexes;
    for (uint32_t i = 0; i < 3 * Pool::kChunkSize + 1; ++i) {
        const Pool::Slot slot = pool.allocate_slot();
        EXPECT_EQ(slot.index, i); /* fresh slots are issued in order */
        EXPECT_EQ(slot.entry, &pool[slot.index]);
        slot.entry->value = 100 + i;
        indexes.push_back(slot.index);
    }
    EXPECT_EQ(pool.live(), indexes.size());
    for (uint32_t index : indexes) {
        EXPECT_EQ(pool[index].value, 100 + index); /* chunks did not move */
    }
}

TEST(SlotPool, ReleasedSlotsComeBackLifoWithTheirEntries) {
    Pool pool;
    for (int i = 0; i < 6; ++i) {
        pool.allocate_slot();
    }
    pool.release(1, pool[1]);
    pool.release(5); /* the lookup form frees the same way */
    EXPECT_EQ(pool.live(), 4u);

    Pool::Slot slot = pool.allocate_slot();
    EXPECT_EQ(slot.index, 5u);
    EXPECT_EQ(slot.entry, &pool[5]);
    slot = pool.allocate_slot();
    EXPECT_EQ(slot.index, 1u);
    EXPECT_EQ(slot.entry, &pool[1]);
    EXPECT_EQ(pool.allocate(), 6u); /* free list empty: a fresh slot */
    EXPECT_EQ(pool.live(), 7u);
    EXPECT_EQ(pool.issued(), 7u);
}

}  // namespace
