/*
 * SplitHelp (tm_sm): a peer that writes no piece of our split copies gets
 * whole copies, with a split probe every kProbeEvery; one that helps again
 * gets splits again.
 */
#include "sm/sm_split_help.h"

#include <gtest/gtest.h>

using uct_tm::sm::SplitHelp;

namespace {

/* How many of the next `n` copies want_split() lets split. */
unsigned splits_of(SplitHelp *help, unsigned n) {
    unsigned splits = 0;
    for (unsigned i = 0; i < n; ++i) {
        splits += help->want_split() ? 1 : 0;
    }
    return splits;
}

void decline(SplitHelp *help) {
    for (uint32_t i = 0; i < SplitHelp::kUnhelpedRun; ++i) {
        ASSERT_TRUE(help->want_split());
        help->split_claimed(0);
    }
}

}  // namespace

TEST(SplitHelp, SplitsWhileThePeerHelps) {
    SplitHelp help;
    for (int i = 0; i < 1000; ++i) {
        ASSERT_TRUE(help.want_split()) << i;
        help.split_claimed((i % 3 == 0) ? 0 : 1); /* never two unhelped in a row */
    }
}

TEST(SplitHelp, WholeCopiesAfterAnUnhelpedRun) {
    SplitHelp help;
    decline(&help);
    EXPECT_EQ(splits_of(&help, SplitHelp::kProbeEvery - 1), 0u);
    EXPECT_TRUE(help.want_split()) << "the probe";
    help.split_claimed(0);
    EXPECT_EQ(splits_of(&help, 10 * SplitHelp::kProbeEvery), 10u) << "one probe in kProbeEvery";
}

TEST(SplitHelp, AHelpedProbeResumesSplitting) {
    SplitHelp help;
    decline(&help);
    EXPECT_EQ(splits_of(&help, SplitHelp::kProbeEvery - 1), 0u);
    ASSERT_TRUE(help.want_split());
    help.split_claimed(3);
    EXPECT_EQ(splits_of(&help, 100), 100u);
}
