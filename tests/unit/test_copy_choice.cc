/*
 * CopyChoice (tm_sm): a large rendezvous or get in a window of copies goes
 * pipelined unless that ran kSlowerBy times CMA's time per byte, one with
 * no other copy in flight the faster way; each way is measured once first,
 * the way not taken is probed every kProbeEvery-th transfer of its size
 * class (and kind), and the settings cma / pipelined fix the way.
 */
#include "sm/sm_copy_choice.h"

#include <gtest/gtest.h>

using uct_tm::sm::CopyChoice;

namespace {

constexpr size_t kSize = 256 << 10;

/* The ways the next `n` transfers of `bytes` take, each recorded at the
 * cost (ns per byte) its way has. */
unsigned pipelined_of(CopyChoice *choice, unsigned n, size_t bytes, uint64_t cma_ns_per_byte,
                      uint64_t pipelined_ns_per_byte, bool alone = false) {
    unsigned pipelined = 0;
    for (unsigned i = 0; i < n; ++i) {
        const CopyChoice::Way way = choice->choose(bytes, alone);
        pipelined += (way == CopyChoice::kPipelined) ? 1 : 0;
        const uint64_t per_byte = (way == CopyChoice::kPipelined) ? pipelined_ns_per_byte
                                                                  : cma_ns_per_byte;
        choice->record(way, bytes, per_byte * bytes, alone);
    }
    return pipelined;
}

}  // namespace

TEST(CopyChoice, MeasuresEachWayOnceFirst) {
    CopyChoice choice;
    ASSERT_EQ(CopyChoice::kPipelined, choice.choose(kSize, false));
    choice.record(CopyChoice::kPipelined, kSize, kSize, false);
    ASSERT_EQ(CopyChoice::kCma, choice.choose(kSize, false));
    choice.record(CopyChoice::kCma, kSize, kSize, false);
    EXPECT_EQ(1u, choice.chosen(CopyChoice::kPipelined));
    EXPECT_EQ(1u, choice.chosen(CopyChoice::kCma));
    EXPECT_NE(0u, choice.cost(CopyChoice::kCma, kSize, false));
    EXPECT_EQ(0u, choice.cost(CopyChoice::kCma, kSize, true)); /* copies alone: apart */
}

TEST(CopyChoice, PipelinedInAWindowUnlessMuchSlowerThanCma) {
    CopyChoice choice;
    /* pipelined twice as slow: still taken, CMA probed every kProbeEvery-th */
    const unsigned n = 64 * CopyChoice::kProbeEvery;
    EXPECT_EQ(n - 64 - 1, pipelined_of(&choice, n, kSize, 1, 2));
}

TEST(CopyChoice, TheFasterWayForACopyAlone) {
    CopyChoice     choice;
    const unsigned n = 64 * CopyChoice::kProbeEvery;
    /* pipelined 1.5x CMA's time: CMA but for the probes (and the first) */
    EXPECT_EQ(64u + 1u, pipelined_of(&choice, n, kSize, 2, 3, true));
    /* windows meanwhile keep their own measure: pipelined there */
    EXPECT_EQ(n - 64 - 1, pipelined_of(&choice, n, kSize, 2, 3, false));
    /* the pipelined copy turns faster (vCPUs placed close): the next probe brings it back */
    pipelined_of(&choice, 2 * CopyChoice::kProbeEvery, kSize, 2, 1, true);
    EXPECT_GE(pipelined_of(&choice, 60, kSize, 2, 1, true), 59u);
}

TEST(CopyChoice, CmaWhileThePipelinedCopyWaitsForItsOwner) {
    CopyChoice choice;
    pipelined_of(&choice, 2, kSize, 1, 1);
    /* the owner stops progressing: pipelined copies take 100x CMA's time */
    const unsigned slow = pipelined_of(&choice, 64 * CopyChoice::kProbeEvery, kSize, 1, 100);
    EXPECT_LE(slow, 64u + 3u); /* the probes, and the few the average needs to turn */
    /* it progresses again: the next probe brings the pipelined copies back */
    pipelined_of(&choice, 2 * CopyChoice::kProbeEvery, kSize, 1, 1);
    EXPECT_GE(pipelined_of(&choice, 100, kSize, 1, 1), 98u);
}

TEST(CopyChoice, TwoStalledCopiesDoNotTurnIt) {
    CopyChoice choice;
    pipelined_of(&choice, 2, kSize, 1, 1);
    /* two pipelined copies stall 100x (11 ms where 0.1 is usual), then run as before */
    EXPECT_EQ(2u, pipelined_of(&choice, 2, kSize, 1, 100));
    EXPECT_EQ(10u, pipelined_of(&choice, 10, kSize, 1, 1));
}

TEST(CopyChoice, SizeClassesAreMeasuredApart) {
    CopyChoice choice;
    pipelined_of(&choice, 2, 64 << 10, 1, 1);
    EXPECT_EQ(0u, choice.cost(CopyChoice::kCma, 4 << 20, false)); /* 4 MiB not measured yet */
    EXPECT_NE(CopyChoice::size_class(64 << 10), CopyChoice::size_class(4 << 20));
    EXPECT_EQ(CopyChoice::size_class(1ull << 40), CopyChoice::kClasses - 1);
    EXPECT_EQ(CopyChoice::size_class(CopyChoice::kMinBytes), 0u);
}

TEST(CopyChoice, SmallTransfersUseCmaUntimed) {
    CopyChoice choice;
    EXPECT_EQ(CopyChoice::kCma, choice.choose(CopyChoice::kMinBytes - 1, true));
    choice.record(CopyChoice::kCma, CopyChoice::kMinBytes - 1, 1000, true);
    EXPECT_EQ(0u, choice.chosen(CopyChoice::kCma));
}

TEST(CopyChoice, SettingsFixTheWay) {
    CopyChoice cma(CopyChoice::Setting::kCma);
    CopyChoice pipelined(CopyChoice::Setting::kPipelined);
    for (int i = 0; i < 200; ++i) {
        ASSERT_EQ(CopyChoice::kCma, cma.choose(kSize, i % 2 == 0));
        ASSERT_EQ(CopyChoice::kPipelined, pipelined.choose(kSize, i % 2 == 0));
        cma.record(CopyChoice::kCma, kSize, 1000000, i % 2 == 0);
        pipelined.record(CopyChoice::kPipelined, kSize, 1000000, i % 2 == 0);
    }
    EXPECT_EQ(0u, cma.chosen(CopyChoice::kCma)); /* nothing measured with a fixed way */
}
