/* The shared counters of tm_sm's split rendezvous copy: both ends take every
 * piece once, and a sender still inside an earlier attempt's RTR (a get
 * retried on the same slot) claims and counts nothing of the new attempt. */
#include "sm/sm_split_claim.h"

#include <gtest/gtest.h>

#include <atomic>
#include <cstdint>
#include <set>

namespace {

using uct_tm::sm::kMaxSplitPieces;
using uct_tm::sm::report_split_pieces;
using uct_tm::sm::SplitClaim;
using uct_tm::sm::SplitClaimer;
using uct_tm::sm::SplitDone;
using Take = SplitClaimer::Take;

TEST(SplitClaim, PacksBothEndsAndTheEpoch) {
    const SplitClaim c = SplitClaim::unpack(SplitClaim{7, kMaxSplitPieces, 0xfffe}.pack());
    EXPECT_EQ(c.lo, 7u);
    EXPECT_EQ(c.hi, kMaxSplitPieces);
    EXPECT_EQ(c.epoch, 0xfffe);
    const SplitDone d = SplitDone::unpack(SplitDone{123456, 9, UCS_ERR_TIMED_OUT}.pack());
    EXPECT_EQ(d.pieces, 123456u);
    EXPECT_EQ(d.epoch, 9);
    EXPECT_EQ(d.status, UCS_ERR_TIMED_OUT);
}

TEST(SplitClaim, APositiveStatusFromThePeerIsAnError) {
    EXPECT_EQ(SplitDone::unpack(uint64_t{1} << 48).status, UCS_ERR_IO_ERROR);
    EXPECT_EQ(SplitDone::unpack(0).status, UCS_OK);
}

TEST(SplitClaim, BothEndsTakeEveryPieceOnce) {
    constexpr uint32_t    kPieces = 9;
    std::atomic<uint64_t> claim{SplitClaim{0, kPieces, 3}.pack()};
    SplitClaimer          back(&claim, 3, true, kPieces), front(&claim, 3, false, kPieces);
    std::set<uint32_t>    taken;
    uint32_t              index;
    for (int turn = 0;; ++turn) {
        SplitClaimer &side = (turn % 3 == 0) ? front : back;
        const Take    take = side.next(&index);
        if (take == Take::kNone) {
            break;
        }
        ASSERT_EQ(take, Take::kTaken);
        EXPECT_TRUE(taken.insert(index).second) << "piece " << index << " taken twice";
    }
    EXPECT_EQ(taken.size(), kPieces);
    EXPECT_EQ(front.next(&index), Take::kNone);
    EXPECT_EQ(back.next(&index), Take::kNone);
}

/* The sender read attempt 4's RTR, then the receiver gave up on it and
 * invited again (attempt 5, new buffers): the sender must not take a piece
 * of attempt 5, whose buffers it never read. */
TEST(SplitClaim, ASenderOfAnEarlierAttemptTakesNothing) {
    constexpr uint32_t    kPieces = 4;
    std::atomic<uint64_t> claim{SplitClaim{0, kPieces, 4}.pack()};
    SplitClaimer          stale(&claim, 4, false, kPieces);
    uint32_t              index;
    ASSERT_EQ(stale.next(&index), Take::kTaken);
    EXPECT_EQ(index, 0u);
    const uint64_t renewed = SplitClaim{0, kPieces, 5}.pack();
    claim.store(renewed);
    EXPECT_EQ(stale.next(&index), Take::kNone);
    EXPECT_EQ(claim.load(), renewed) << "the stale sender claimed a piece of the new attempt";
    /* Also when it read the epoch before the receiver's reset reached it. */
    SplitClaimer late(&claim, 4, false, kPieces);
    EXPECT_EQ(late.next(&index), Take::kNone);
    EXPECT_EQ(claim.load(), renewed);
}

TEST(SplitClaim, ACounterBeyondTheMessageIsRefused) {
    std::atomic<uint64_t> claim{SplitClaim{0, kMaxSplitPieces, 1}.pack()};
    SplitClaimer          back(&claim, 1, true, 16);
    uint32_t              index;
    EXPECT_EQ(back.next(&index), Take::kBad);
    EXPECT_EQ(SplitClaim::unpack(claim.load()).hi, kMaxSplitPieces) << "claimed nothing";
    /* From the front the same word gives the message's pieces, then stops. */
    SplitClaimer front(&claim, 1, false, 16);
    uint32_t     taken = 0;
    while (front.next(&index) == Take::kTaken) {
        ++taken;
    }
    EXPECT_EQ(taken, 16u);
}

TEST(SplitClaim, ReportsCountOnlyIntoTheirOwnAttempt) {
    std::atomic<uint64_t> done{SplitDone{0, 8, UCS_OK}.pack()};
    EXPECT_FALSE(report_split_pieces(&done, 7, 3, UCS_OK)) << "an earlier attempt's sender";
    EXPECT_EQ(SplitDone::unpack(done.load()).pieces, 0u);
    EXPECT_TRUE(report_split_pieces(&done, 8, 2, UCS_ERR_TIMED_OUT));
    EXPECT_TRUE(report_split_pieces(&done, 8, 1, UCS_ERR_NO_MEMORY));
    const SplitDone d = SplitDone::unpack(done.load());
    EXPECT_EQ(d.pieces, 3u);
    EXPECT_EQ(d.status, UCS_ERR_TIMED_OUT) << "the first error stays";
}

}  // namespace
