/* tm_sm's copy into the receiver's descriptors: stream_copy (non-temporal
 * stores) copies exactly the bytes asked at every alignment and length, and
 * CopyMode chooses ordinary or streaming stores from the copy times it is
 * told, as UCX_TM_SM_COPY documents. */
#include "base/stream_copy.h"
#include "sm/sm_copy_mode.h"

#include <gtest/gtest.h>

#include <cstdint>
#include <vector>

namespace {

using uct_tm::stream_copy;
using uct_tm::sm::CopyMode;

/* Every destination and source alignment within a line, lengths around the
 * 64-byte loop's edges and a page-sized one: the bytes asked arrive, and
 * the guard bytes either side of the destination stay untouched. */
TEST(StreamCopy, CopiesExactlyTheBytesAskedAtEveryAlignment) {
    constexpr size_t     kGuard = 64;
    std::vector<uint8_t> src(8192 + 128);
    for (size_t i = 0; i < src.size(); ++i) {
        src[i] = static_cast<uint8_t>(i * 131 + 7);
    }
    const size_t lengths[] = {0, 1, 15, 16, 17, 63, 64, 65, 79, 80, 127, 128, 129, 191, 4096, 8000};
    for (size_t dst_off = 0; dst_off < 64; dst_off += 3) {
        for (size_t src_off = 0; src_off < 64; src_off += 5) {
            for (size_t n : lengths) {
                std::vector<uint8_t> dst(n + 64 + 2 * kGuard, 0xa5);
                uint8_t             *d = dst.data() + kGuard + dst_off;
                stream_copy(d, src.data() + src_off, n);
                for (size_t i = 0; i < n; ++i) {
                    ASSERT_EQ(d[i], src[src_off + i])
                            << "byte " << i << " of " << n << ", dst+" << dst_off << " src+" << src_off;
                }
                for (uint8_t *g = dst.data(); g < d; ++g) {
                    ASSERT_EQ(*g, 0xa5) << "written before the destination, n " << n;
                }
                for (uint8_t *g = d + n; g < dst.data() + dst.size(); ++g) {
                    ASSERT_EQ(*g, 0xa5) << "written after the destination, n " << n;
                }
            }
        }
    }
}

/* 1 GB/s as the slow bound: 1 KiB in 1 us is the boundary. */
constexpr double   kSlowBw = 1.024e9;
constexpr uint64_t kFastNs = 100;   /* per KiB: 10x faster than the bound */
constexpr uint64_t kSlowNs = 10000; /* per KiB: 10x slower */

/* Plans the next 8 KiB message and, if it is timed, reports `ns_per_kib`. */
CopyMode::Plan send(CopyMode &mode, uint64_t ns_per_kib) {
    const CopyMode::Plan plan = mode.plan(8192);
    if (plan.timed) {
        mode.copied(8192, 8 * ns_per_kib);
    }
    return plan;
}

/* Sends cached messages until one is timed (and reports `ns_per_kib` for it). */
void send_until_timed(CopyMode &mode, uint64_t ns_per_kib) {
    for (unsigned i = 0; i < CopyMode::kSampleEvery; ++i) {
        const CopyMode::Plan plan = send(mode, ns_per_kib);
        ASSERT_FALSE(plan.stream);
        if (plan.timed) {
            return;
        }
    }
    FAIL() << "no timed copy in " << CopyMode::kSampleEvery << " messages";
}

TEST(CopyMode, SmallMessagesAreNeitherStreamedNorTimed) {
    CopyMode stream(CopyMode::Setting::kStream, kSlowBw, 4096);
    CopyMode automatic(CopyMode::Setting::kAuto, kSlowBw, 4096);
    for (int i = 0; i < 100; ++i) {
        const CopyMode::Plan a = stream.plan(4095), b = automatic.plan(4095);
        EXPECT_FALSE(a.stream || a.timed || b.stream || b.timed);
    }
    EXPECT_TRUE(stream.plan(4096).stream);
    EXPECT_FALSE(stream.large(4095));
    EXPECT_TRUE(stream.large(4096));
}

/* A bcopy, its size unknown before it packs, counts as large when the
 * previous bcopy was: small ones in a row neither pack aside nor are timed. */
TEST(CopyMode, BcopyFollowsThePreviousBcopysSize) {
    CopyMode stream(CopyMode::Setting::kStream, kSlowBw, 4096);
    CopyMode automatic(CopyMode::Setting::kAuto, kSlowBw, 4096);
    for (int i = 0; i < 100; ++i) {
        const CopyMode::Plan a = stream.plan(CopyMode::kUnknownSize);
        const CopyMode::Plan b = automatic.plan(CopyMode::kUnknownSize);
        EXPECT_FALSE(a.stream || a.timed || b.stream || b.timed);
        stream.bcopy_packed(100);
        automatic.bcopy_packed(100);
    }
    stream.bcopy_packed(8192);
    EXPECT_TRUE(stream.plan(CopyMode::kUnknownSize).stream); /* packed aside, then streamed */
    automatic.bcopy_packed(8192);
    unsigned timed = 0;
    for (unsigned i = 0; i < CopyMode::kSampleEvery; ++i) {
        timed += automatic.plan(CopyMode::kUnknownSize).timed ? 1 : 0;
    }
    EXPECT_EQ(timed, 1u);
    stream.bcopy_packed(4095);
    EXPECT_FALSE(stream.plan(CopyMode::kUnknownSize).stream);
}

TEST(CopyMode, FixedSettingsIgnoreCopyTimes) {
    CopyMode cached(CopyMode::Setting::kCached, kSlowBw, 4096);
    CopyMode stream(CopyMode::Setting::kStream, kSlowBw, 4096);
    for (int i = 0; i < 100; ++i) {
        const CopyMode::Plan c = cached.plan(8192);
        EXPECT_FALSE(c.stream || c.timed); /* nothing to decide: no clock read */
        cached.copied(8192, 8 * kSlowNs);
        const CopyMode::Plan s = stream.plan(8192);
        EXPECT_TRUE(s.stream);
        EXPECT_FALSE(s.timed);
        stream.copied(8192, 8 * kFastNs);
    }
    EXPECT_FALSE(cached.streaming());
    EXPECT_EQ(cached.switches(), 0u);
}

/* auto: one cached copy in kSampleEvery timed; a slow one alone changes
 * nothing; kSlowRun timed slow copies in a row turn streaming on. */
TEST(CopyMode, AutoStreamsAfterARunOfSlowCopiesOnly) {
    CopyMode mode(CopyMode::Setting::kAuto, kSlowBw, 4096);
    unsigned timed = 0;
    for (unsigned i = 0; i < 10 * CopyMode::kSampleEvery; ++i) {
        const CopyMode::Plan plan = mode.plan(8192);
        ASSERT_FALSE(plan.stream);
        if (plan.timed) {
            /* a slow copy now and then, never two timed ones in a row */
            mode.copied(8192, ((timed++ % 2) == 0) ? 8 * kSlowNs : 8 * kFastNs);
        }
    }
    EXPECT_EQ(timed, 10u);
    EXPECT_FALSE(mode.streaming());
    for (unsigned i = 0; i < CopyMode::kSlowRun; ++i) {
        EXPECT_FALSE(mode.streaming());
        send_until_timed(mode, kSlowNs);
    }
    EXPECT_TRUE(mode.streaming());
    EXPECT_EQ(mode.switches(), 1u);
    const CopyMode::Plan plan = mode.plan(8192);
    EXPECT_TRUE(plan.stream);
    EXPECT_FALSE(plan.timed);
}

/* The boundary is the configured bandwidth: just above it is not slow,
 * just below it is. */
TEST(CopyMode, AutoMeasuresAgainstTheConfiguredBandwidth) {
    CopyMode mode(CopyMode::Setting::kAuto, kSlowBw, 4096);
    for (int i = 0; i < 10; ++i) {
        mode.copied(1 << 20, 1024 * 1000 - 1000); /* 1 MiB in 1.023 ms: faster than 1.024 GB/s */
    }
    EXPECT_FALSE(mode.streaming());
    for (unsigned i = 0; i < CopyMode::kSlowRun; ++i) {
        mode.copied(1 << 20, 1024 * 1000 + 1000);
    }
    EXPECT_TRUE(mode.streaming());
    mode.copied(1000, 1000000); /* a small message's time says nothing */
    EXPECT_TRUE(mode.streaming());
}

/* While streaming, every kProbeEvery-th message goes cached and timed; a
 * slow probe keeps streaming, a fast one turns it off. */
TEST(CopyMode, AutoProbesCachedCopiesAndReturnsWhenFast) {
    CopyMode mode(CopyMode::Setting::kAuto, kSlowBw, 4096);
    for (unsigned i = 0; i < CopyMode::kSlowRun; ++i) {
        send_until_timed(mode, kSlowNs);
    }
    ASSERT_TRUE(mode.streaming());
    for (int round = 0; round < 3; ++round) {
        for (unsigned i = 1; i < CopyMode::kProbeEvery; ++i) {
            const CopyMode::Plan plan = send(mode, kFastNs);
            ASSERT_TRUE(plan.stream) << "message " << i << " of round " << round;
            ASSERT_FALSE(plan.timed);
        }
        const CopyMode::Plan probe = send(mode, kSlowNs);
        ASSERT_FALSE(probe.stream);
        ASSERT_TRUE(probe.timed);
        ASSERT_TRUE(mode.streaming());
    }
    for (unsigned i = 1; i < CopyMode::kProbeEvery; ++i) {
        ASSERT_TRUE(send(mode, kSlowNs).stream);
    }
    const CopyMode::Plan probe = send(mode, kFastNs);
    ASSERT_TRUE(probe.timed);
    EXPECT_FALSE(mode.streaming());
    EXPECT_FALSE(mode.plan(8192).stream);
    EXPECT_EQ(mode.switches(), 1u);
}

}  // namespace
