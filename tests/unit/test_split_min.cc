/*
 * SplitMin (tm_sm's RNDV_SPLIT_MIN=auto): the split threshold it chooses
 * from a CMA call's cost, and the timing it takes that cost from.
 */
#include "sm/sm_split_min.h"

#include <gtest/gtest.h>

#include <cerrno>

using uct_tm::sm::CmaCost;
using uct_tm::sm::SplitMin;

namespace {

bool power_of_two(size_t x) { return (x != 0) && ((x & (x - 1)) == 0); }

}  // namespace

/* The two hosts the margin was set between (docs/perf.md, host E and F). */
TEST(SplitMin, SlowCallsKeepSplitsForLargeCopies) {
    EXPECT_EQ(SplitMin::choose(CmaCost{2200, 0.039}), 256u << 10);
}

TEST(SplitMin, CheapCallsSplitFromTheLowest) {
    EXPECT_EQ(SplitMin::choose(CmaCost{970, 0.0565}), SplitMin::kLowest);
    EXPECT_EQ(SplitMin::choose(CmaCost{0, 0.0565}), SplitMin::kLowest);
}

TEST(SplitMin, BoundedAboveWhenBytesCostNothing) {
    EXPECT_EQ(SplitMin::choose(CmaCost{1000, 0}), SplitMin::kHighest);
    EXPECT_EQ(SplitMin::choose(CmaCost{1e12, 0.05}), SplitMin::kHighest);
}

/* Half the chosen size copies in at least kMargin calls, half the next
 * smaller one does not. */
TEST(SplitMin, ChoosesTheSmallestSizeWorthTheCalls) {
    const double per_byte = 0.05;
    for (double call = 100; call < 20000; call *= 1.3) {
        SCOPED_TRACE(call);
        const size_t size = SplitMin::choose(CmaCost{call, per_byte});
        ASSERT_TRUE(power_of_two(size));
        ASSERT_GE(size, SplitMin::kLowest);
        ASSERT_LE(size, SplitMin::kHighest);
        if (size < SplitMin::kHighest) {
            EXPECT_GE(static_cast<double>(size / 2) * per_byte, SplitMin::kMargin * call);
        }
        if (size > SplitMin::kLowest) {
            EXPECT_LT(static_cast<double>(size / 4) * per_byte, SplitMin::kMargin * call);
        }
    }
}

TEST(SplitMin, MeasuresThisHost) {
    CmaCost cost;
    if (!SplitMin::measure(&cost)) {
        ASSERT_TRUE((errno == EPERM) || (errno == ENOSYS)) << "errno " << errno;
        GTEST_SKIP() << "the kernel refuses process_vm_readv here";
    }
    EXPECT_GT(cost.call_ns, 0);
    EXPECT_LT(cost.call_ns, 1e8);
    EXPECT_GT(cost.ns_per_byte, 0) << "64 KiB read no slower than 4 KiB";
    const size_t chosen = SplitMin::for_this_host();
    EXPECT_TRUE(power_of_two(chosen));
    EXPECT_GE(chosen, SplitMin::kLowest);
    EXPECT_LE(chosen, SplitMin::kHighest);
    EXPECT_EQ(SplitMin::for_this_host(), chosen) << "timed once per process";
}
