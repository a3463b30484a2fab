/*
 * Differential test: uct_tm::match::TagMatcher against the linear reference
 * model (tests/common/reference_matcher.h), driven by the op-stream
 * interpreter (tests/common/matcher_op_stream.h).
 *
 *  - RandomOps: several PRNG seeds, >= 3 million operations in total, queue
 *    depths wandering between 0 and ~300, zero divergences; bursts of
 *    arrivals (arrive_batch, match_posted_batch) are checked message by
 *    message against the model applying them one at a time.
 *  - RandomBytes: the byte decoder used by the libFuzzer target, on random
 *    buffers.
 *  - CheckerSelfTest: the checker must notice deliberately wrong models, so
 *    the zero-divergence result above cannot be vacuous.
 *
 * On a divergence the failing prefix is re-run with tracing, delta-minimized
 * and printed as a sequence of concrete calls.
 */
#include "matcher_op_stream.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <cinttypes>
#include <cstdint>
#include <cstdio>
#include <string>
#include <vector>

namespace {

using uct_tm::match_test::MatcherOpStream;
using uct_tm::match_test::Op;
using Result = MatcherOpStream::Result;
using Config = MatcherOpStream::Config;

namespace mt = uct_tm::match_test;

/* Re-run a failing seed with recording, minimize, and describe the repro. */
std::string explain_failure(uint64_t seed, uint64_t num_ops, const Config &base) {
    Config c = base;
    c.record = true;
    MatcherOpStream s(c);
    Result          r = s.run_random(seed, num_ops);
    if (r.ok) {
        return "(re-run did not diverge: nondeterminism?)";
    }
    std::vector<Op> ops = s.recorded();
    std::string     out = "failing prefix: " + std::to_string(ops.size()) + " ops\n";
    if (ops.size() <= 2000000) {
        std::vector<Op> min = MatcherOpStream::minimize(ops, base, 3000, 30.0);
        out += "minimized to " + std::to_string(min.size()) + " ops:\n";
        out += MatcherOpStream::describe(min, base);
    }
    return out;
}

double seconds_since(std::chrono::steady_clock::time_point t0) {
    return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

/* ------------------------------------------------------------ random ops */

struct SeedCase {
    uint64_t seed;
    uint64_t ops;
};

class MatcherDifferential : public ::testing::TestWithParam<SeedCase> {};

TEST_P(MatcherDifferential, RandomOps) {
    const SeedCase sc = GetParam();
    auto           t0 = std::chrono::steady_clock::now();
    MatcherOpStream s;
    Result          r = s.run_random(sc.seed, sc.ops);
    double          t = seconds_since(t0);
    printf("[seed 0x%016" PRIx64 "] %.2fs %s\n", sc.seed, t, r.summary().c_str());
    ASSERT_TRUE(r.ok) << r.divergence << "\n" << explain_failure(sc.seed, sc.ops, Config());
    EXPECT_EQ(sc.ops, r.ops);

    /* The stream must have reached the interesting states. */
    const MatcherOpStream::Coverage &c = r.cov;
    EXPECT_GT(c.post_matched, 0u);
    EXPECT_GT(c.arrive_matched, 0u);
    EXPECT_GT(c.match_posted_hits, 0u);
    EXPECT_GT(c.cancel_ok, 0u);
    EXPECT_GT(c.take_ok, 0u);
    EXPECT_GT(c.peek_hits, 0u);
    EXPECT_GT(c.claim_hits, 0u);
    EXPECT_GT(c.cancel_matching_n, 0u);
    EXPECT_GT(c.drained, 0u);
    EXPECT_GT(c.exceeds_limit, 0u);
    EXPECT_GT(c.no_elem, 0u);
    EXPECT_GT(c.invalid_param, 0u);
    EXPECT_GT(c.stale_handle_ops, 0u);
    EXPECT_GT(c.reentrant_ops, 0u);
    EXPECT_GT(c.junk_tags, 0u);
    EXPECT_GE(c.max_posted_depth, 150u);
    EXPECT_GE(c.max_unexpected_depth, 150u);
    EXPECT_LE(c.max_posted_depth, 3500u);
    EXPECT_LE(c.max_unexpected_depth, 3500u);
    EXPECT_GT(c.recreates, 10u);
    EXPECT_GT(c.batch_msgs, 1000u);
    EXPECT_GT(c.batch_matched, 100u);
}

/* 8 seeds x 1M = 8 million operations. */
INSTANTIATE_TEST_SUITE_P(Seeds, MatcherDifferential,
                         ::testing::Values(SeedCase{0x1ull, 1000000}, SeedCase{0x2ull, 1000000},
                                           SeedCase{0xc0ffee, 1000000},
                                           SeedCase{0xdeadbeefcafe, 1000000},
                                           SeedCase{0x5eed0005, 1000000},
                                           SeedCase{0x9e3779b97f4a7c15ull, 1000000},
                                           SeedCase{0x123456789abcdefull, 1000000},
                                           SeedCase{0xfeedface0000ull, 1000000}),
                         [](const ::testing::TestParamInfo<SeedCase> &info) {
                             char buf[32];
                             snprintf(buf, sizeof(buf), "seed_%" PRIx64, info.param.seed);
                             return std::string(buf);
                         });

/* ----------------------------------------------------------- random bytes */

TEST(MatcherDifferentialBytes, RandomBuffers) {
    mt::OpSource    rng   = mt::OpSource::from_seed(77);
    uint64_t        total = 0;
    std::vector<uint8_t> buf;
    for (int i = 0; i < 3000; ++i) {
        buf.resize(64 + rng.below(4096));
        for (uint8_t &b : buf) {
            b = rng.u8();
        }
        MatcherOpStream s;
        Result          r = s.run_bytes(buf.data(), buf.size());
        total += r.ops;
        if (!r.ok) {
            Config c;
            c.trace      = true;
            c.trace_keep = 0;
            MatcherOpStream t(c);
            Result          r2 = t.run_bytes(buf.data(), buf.size());
            FAIL() << "buffer " << i << ": " << r2.divergence;
        }
    }
    printf("[bytes] %" PRIu64 " ops over 3000 buffers\n", total);
    EXPECT_GT(total, 100000u);
}

TEST(MatcherDifferentialBytes, EmptyAndTinyInputs) {
    uint8_t zeros[64] = {};
    for (size_t n = 0; n <= sizeof(zeros); ++n) {
        MatcherOpStream s;
        Result          r = s.run_bytes(zeros, n);
        ASSERT_TRUE(r.ok) << r.divergence;
    }
}

/* Replaying the recorded ops reproduces the same run. */
TEST(MatcherDifferentialBytes, ReplayIsDeterministic) {
    Config c;
    c.record = true;
    MatcherOpStream s(c);
    Result          r = s.run_random(4242, 20000);
    ASSERT_TRUE(r.ok) << r.divergence;
    MatcherOpStream s2;
    Result          r2 = s2.replay(s.recorded());
    ASSERT_TRUE(r2.ok) << r2.divergence;
    EXPECT_EQ(r.ops, r2.ops);
    EXPECT_EQ(r.summary(), r2.summary());
}

/* ------------------------------------------------------------- options */

/* options() reports what the matcher was created with, for every value in the
 * documented ranges (max_mask_classes 1..1024, max_unexpected_indexes 0..8). */
TEST(MatcherDifferentialContract, OptionsEchoDocumentedRanges) {
    /* Documented ranges: max_mask_classes 0..1024, max_unexpected_indexes
     * 0..4; values inside are kept, values above are clamped to the maximum. */
    for (uint32_t idx = 0; idx <= 6; ++idx) {
        for (uint32_t classes : {0u, 1u, 2u, 64u, 1024u, 5000u}) {
            uct_tm::match::MatcherOptions o;
            o.max_posted                 = 7;
            o.max_unexpected             = 9;
            o.max_mask_classes           = classes;
            o.max_unexpected_indexes     = idx;
            o.unexpected_index_threshold = 3;
            uct_tm::match::TagMatcher m(o);
            const uct_tm::match::MatcherOptions &got = m.options();
            EXPECT_EQ(o.max_posted, got.max_posted);
            EXPECT_EQ(o.max_unexpected, got.max_unexpected);
            EXPECT_EQ(std::min(classes, 1024u), got.max_mask_classes);
            EXPECT_EQ(std::min(idx, 4u), got.max_unexpected_indexes) << "max_unexpected_indexes=" << idx;
            EXPECT_EQ(o.unexpected_index_threshold, got.unexpected_index_threshold);
        }
    }
}

/* ------------------------------------------------------ checker self-test */

struct FaultCase {
    const char *name;
    unsigned    fault;
};

class CheckerSelfTest : public ::testing::TestWithParam<FaultCase> {};

/* A deliberately wrong model must be caught quickly, from several seeds. */
TEST_P(CheckerSelfTest, DetectsWrongModel) {
    const FaultCase fc = GetParam();
    Config          c;
    c.model_faults = fc.fault;
    for (uint64_t seed = 1; seed <= 3; ++seed) {
        MatcherOpStream s(c);
        Result          r = s.run_random(seed * 1000003, 300000);
        EXPECT_FALSE(r.ok) << fc.name << ": seed " << seed << " ran " << r.ops
                           << " ops without noticing the wrong model";
        if (!r.ok) {
            EXPECT_NE(std::string::npos, r.divergence.find("divergence at op #"));
            if (seed == 1) {
                printf("[%s] caught after %" PRIu64 " ops: %s\n", fc.name, r.ops,
                       r.divergence.substr(0, 200).c_str());
            }
        }
    }
}

INSTANTIATE_TEST_SUITE_P(
        Faults, CheckerSelfTest,
        ::testing::Values(FaultCase{"PostTakesLatest", mt::kFaultPostTakesLatest},
                          FaultCase{"ArriveTakesLatest", mt::kFaultArriveTakesLatest},
                          FaultCase{"IgnoreMask", mt::kFaultIgnoreMask},
                          FaultCase{"RecvTagUnmasked", mt::kFaultRecvTagUnmasked},
                          FaultCase{"CancelMatchingReversed", mt::kFaultCancelMatchingReversed},
                          FaultCase{"PostedLimitOffByOne", mt::kFaultPostedLimitOffByOne},
                          FaultCase{"UnexpectedLimitOffByOne", mt::kFaultUnexpectedLimitOffByOne},
                          FaultCase{"DrainDropsLastMsg", mt::kFaultDrainDropsLastMsg},
                          FaultCase{"StaleIsInvalid", mt::kFaultStaleIsInvalid},
                          FaultCase{"PeekRemoves", mt::kFaultPeekRemoves},
                          FaultCase{"MatchPostedQueues", mt::kFaultMatchPostedQueues}),
        [](const ::testing::TestParamInfo<FaultCase> &info) {
            return std::string(info.param.name);
        });

/* The fuzz decoder path notices a wrong model too. */
TEST(CheckerSelfTestBytes, DetectsWrongModelFromBytes) {
    Config c;
    c.model_faults      = mt::kFaultPostTakesLatest | mt::kFaultArriveTakesLatest;
    mt::OpSource rng    = mt::OpSource::from_seed(99);
    bool         caught = false;
    std::vector<uint8_t> buf(4096);
    for (int i = 0; i < 2000 && !caught; ++i) {
        for (uint8_t &b : buf) {
            b = rng.u8();
        }
        MatcherOpStream s(c);
        caught = !s.run_bytes(buf.data(), buf.size()).ok;
    }
    EXPECT_TRUE(caught);
}

/* Minimization keeps a diverging sequence and makes it short. */
TEST(CheckerSelfTestBytes, MinimizesARepro) {
    Config c;
    c.model_faults = mt::kFaultArriveTakesLatest;
    c.record       = true;
    MatcherOpStream s(c);
    Result          r = s.run_random(7, 100000);
    ASSERT_FALSE(r.ok);
    Config plain;
    plain.model_faults   = c.model_faults;
    std::vector<Op> min  = MatcherOpStream::minimize(s.recorded(), plain, 3000, 20.0);
    MatcherOpStream s2(plain);
    EXPECT_FALSE(s2.replay(min).ok);
    EXPECT_LE(min.size(), 10u);
    printf("[minimize] %zu ops -> %zu ops:\n%s", s.recorded().size(), min.size(),
           MatcherOpStream::describe(min, plain).c_str());
}

}  // namespace
