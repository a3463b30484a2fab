/* tm_sm's spare receive descriptors: DescRing hands them out least recently
 * used first and refuses a push beyond its capacity (a descriptor given
 * back twice). */
#include "sm/sm_desc_ring.h"

#include <gtest/gtest.h>

#include <cstdint>
#include <vector>

namespace {

using uct_tm::sm::DescRing;

TEST(DescRing, HandsOutTheLeastRecentlyReturnedFirst) {
    DescRing ring;
    ring.reset(5);
    EXPECT_TRUE(ring.empty());
    for (uint32_t d = 10; d < 15; ++d) {
        ASSERT_TRUE(ring.push(d));
    }
    /* Many laps past the end of the slots: order kept across the wrap. */
    std::vector<uint32_t> out;
    for (int i = 0; i < 23; ++i) {
        const uint32_t d = ring.pop();
        out.push_back(d);
        ASSERT_TRUE(ring.push(d));
    }
    for (size_t i = 0; i < out.size(); ++i) {
        EXPECT_EQ(out[i], 10 + i % 5) << "pop " << i;
    }
    EXPECT_EQ(ring.size(), 5u);
}

TEST(DescRing, RefusesMoreThanItsCapacity) {
    DescRing ring;
    ring.reset(3);
    ASSERT_TRUE(ring.push(1));
    ASSERT_TRUE(ring.push(2));
    ASSERT_TRUE(ring.push(3));
    EXPECT_FALSE(ring.push(4));
    EXPECT_EQ(ring.size(), 3u);
    EXPECT_EQ(ring.pop(), 1u);
    EXPECT_TRUE(ring.push(4));
    EXPECT_EQ(ring.pop(), 2u);
    EXPECT_EQ(ring.pop(), 3u);
    EXPECT_EQ(ring.pop(), 4u);
    EXPECT_TRUE(ring.empty());
}

TEST(DescRing, InterleavedPushesAndPopsKeepOrder) {
    DescRing ring;
    ring.reset(4);
    uint32_t next_in = 0, next_out = 0;
    /* Fill levels 0..4 in a pattern that crosses the slot boundary often. */
    for (int step = 0; step < 200; ++step) {
        const bool push = (ring.size() == 0) || ((ring.size() < 4) && ((step * 7) % 3 != 0));
        if (push) {
            ASSERT_TRUE(ring.push(next_in++));
        } else {
            ASSERT_EQ(ring.pop(), next_out++);
        }
    }
    while (!ring.empty()) {
        ASSERT_EQ(ring.pop(), next_out++);
    }
    EXPECT_EQ(next_in, next_out);
}

TEST(DescRing, ResetEmptiesIt) {
    DescRing ring;
    ring.reset(2);
    ASSERT_TRUE(ring.push(7));
    ring.reset(2);
    EXPECT_TRUE(ring.empty());
    ASSERT_TRUE(ring.push(8));
    EXPECT_EQ(ring.pop(), 8u);
}

}  // namespace
