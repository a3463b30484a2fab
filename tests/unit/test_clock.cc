#include "base/clock.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>

namespace {

/* Settings of "inf" (or beyond 2^64 ns) saturate instead of overflowing the
 * conversion; nothing negative or NaN becomes a huge wait by accident. */
TEST(Clock, SecondsToNsSaturates) {
    EXPECT_EQ(uct_tm::seconds_to_ns(1.5), 1500000000ull);
    EXPECT_EQ(uct_tm::seconds_to_ns(0), 0u);
    EXPECT_EQ(uct_tm::seconds_to_ns(-1), 0u);
    EXPECT_EQ(uct_tm::seconds_to_ns(INFINITY), UINT64_MAX);
    EXPECT_EQ(uct_tm::seconds_to_ns(NAN), UINT64_MAX);
    EXPECT_EQ(uct_tm::seconds_to_ns(1e12), UINT64_MAX);
}

/* A deadline an "inf" timeout sets is never reached: now + UINT64_MAX does
 * not wrap around to just before now. */
TEST(Clock, DeadlineAfterSaturates) {
    EXPECT_EQ(uct_tm::deadline_after(5, 10), 15u);
    EXPECT_EQ(uct_tm::deadline_after(5, 0), 5u);
    const uint64_t now = uct_tm::monotonic_ns();
    EXPECT_EQ(uct_tm::deadline_after(now, UINT64_MAX), UINT64_MAX);
    EXPECT_EQ(uct_tm::deadline_after(now, UINT64_MAX - now), UINT64_MAX);
    EXPECT_EQ(uct_tm::deadline_after(now, UINT64_MAX - now + 1), UINT64_MAX);
    EXPECT_GT(uct_tm::deadline_after(now, uct_tm::seconds_to_ns(INFINITY)), now);
}

}  // namespace
