/*
 * Unit tests for uct_tm::match::TagMatcher, written against the public
 * contract in src/match/tag_matcher.h (not against the implementation).
 *
 * Conventions used below:
 *  - receive contexts are distinct addresses inside a static buffer (ctx(i));
 *  - message cookies are small integers chosen by each test;
 *  - wherever the header leaves something open (e.g. whether Receive::tag is
 *    returned as posted or normalised to tag & mask, what handle a consumed
 *    message reports) the tests do not depend on it.
 */
#include "match/tag_matcher.h"
#include "match/bucket_table.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <array>
#include <cstdint>
#include <deque>
#include <map>
#include <numeric>
#include <random>
#include <set>
#include <string>
#include <unordered_map>
#include <unordered_set>
#include <utility>
#include <vector>

namespace {

using uct_tm::match::ArriveResult;
using uct_tm::match::Handle;
using uct_tm::match::kExactMask;
using uct_tm::match::MatcherOptions;
using uct_tm::match::MatcherStats;
using uct_tm::match::Message;
using uct_tm::match::MsgHandle;
using uct_tm::match::PostResult;
using uct_tm::match::Receive;
using uct_tm::match::RecvHandle;
using uct_tm::match::Tag;
using uct_tm::match::tag_matches;
using uct_tm::match::TagMatcher;

/* Distinct, stable, non-null context pointers. */
constexpr size_t kCtxCount = 1 << 16;
char g_ctx_storage[kCtxCount];
void *ctx(size_t i) { return &g_ctx_storage[i % kCtxCount]; }
size_t ctx_index(void *p) { return static_cast<size_t>(static_cast<char *>(p) - g_ctx_storage); }

constexpr Tag kT = 0x0123456789ABCDEFull;

/* Post a receive that is expected to be queued; returns its handle. */
RecvHandle post_queued(TagMatcher &m, Tag tag, Tag mask, void *c) {
    PostResult r = m.post(tag, mask, c);
    EXPECT_EQ(UCS_OK, r.status);
    EXPECT_FALSE(r.matched);
    EXPECT_FALSE(r.handle.is_null());
    return r.handle;
}

/* A message arrives that is expected to be queued as unexpected. */
MsgHandle arrive_unexpected(TagMatcher &m, Tag tag, uint64_t cookie) {
    ArriveResult r = m.arrive(tag, cookie);
    EXPECT_EQ(UCS_OK, r.status);
    EXPECT_FALSE(r.matched);
    EXPECT_FALSE(r.handle.is_null());
    return r.handle;
}

struct Drained {
    std::vector<void *>  recvs;
    std::vector<Message> msgs;
    std::vector<char>    order; /* 'r' / 'm' per callback, in call order */
};

Drained drain_all(TagMatcher &m) {
    Drained d;
    m.drain(
            [&](void *c) {
                d.recvs.push_back(c);
                d.order.push_back('r');
            },
            [&](const Message &msg) {
                d.msgs.push_back(msg);
                d.order.push_back('m');
            });
    return d;
}

std::vector<uint64_t> cookies_of(const std::vector<Message> &msgs) {
    std::vector<uint64_t> out;
    for (const Message &m : msgs) out.push_back(m.cookie);
    return out;
}

/* ========================================================================== */
/* Matching rule                                                              */
/* ========================================================================== */

TEST(TagMatchesFunction, ImplementsMaskedEquality) {
    static_assert(tag_matches(0x1234, 0x1234, kExactMask), "");
    static_assert(!tag_matches(0x1235, 0x1234, kExactMask), "");
    static_assert(tag_matches(0x12AB, 0x12FF, 0xFF00), "");
    static_assert(!tag_matches(0x13AB, 0x12FF, 0xFF00), "");
    static_assert(tag_matches(~Tag{0}, 0, 0), "");
    EXPECT_TRUE(tag_matches(0, ~Tag{0}, 0));
    EXPECT_FALSE(tag_matches(Tag{1} << 63, 0, kExactMask));
    std::mt19937_64 rng(7);
    for (int i = 0; i < 10000; ++i) {
        Tag t = rng(), r = rng(), m = rng();
        if (i % 3 == 0) r = (t & m) | (r & ~m); /* force a match */
        EXPECT_EQ((t & m) == (r & m), tag_matches(t, r, m));
    }
}

TEST(TagMatcherMatchingRule, ArrivalMatchesMaskedReceiveIgnoringBitsOutsideMask) {
    TagMatcher m;
    /* Receive tag has junk (0xFF) in the bits outside its mask. */
    post_queued(m, 0x12FF, 0xFF00, ctx(1));

    ArriveResult miss = m.match_posted(0x13FF); /* differs inside the mask */
    EXPECT_EQ(UCS_OK, miss.status);
    EXPECT_FALSE(miss.matched);
    EXPECT_EQ(1u, m.posted_count());

    ArriveResult hit = m.arrive(0x1200, 42); /* differs only outside the mask */
    EXPECT_EQ(UCS_OK, hit.status);
    ASSERT_TRUE(hit.matched);
    EXPECT_EQ(ctx(1), hit.recv.ctx);
    EXPECT_EQ(Tag{0xFF00}, hit.recv.mask);
    EXPECT_EQ(Tag{0x1200}, hit.recv.tag & hit.recv.mask);
    EXPECT_EQ(0u, m.posted_count());
    EXPECT_EQ(0u, m.unexpected_count());
}

TEST(TagMatcherMatchingRule, PostedMaskedReceiveTakesUnexpectedIgnoringBitsOutsideMask) {
    TagMatcher m;
    arrive_unexpected(m, 0x13AA, 1); /* differs inside the mask */
    arrive_unexpected(m, 0x1234, 2);

    PostResult r = m.post(0x12FF, 0xFF00, ctx(1));
    EXPECT_EQ(UCS_OK, r.status);
    ASSERT_TRUE(r.matched);
    EXPECT_EQ(2u, r.message.cookie);
    EXPECT_EQ(Tag{0x1234}, r.message.tag);
    EXPECT_EQ(0u, m.posted_count());
    EXPECT_EQ(1u, m.unexpected_count());
}

TEST(TagMatcherMatchingRule, MaskZeroIsWildcard) {
    TagMatcher m;
    std::mt19937_64 rng(11);
    for (int i = 0; i < 200; ++i) {
        post_queued(m, rng(), 0, ctx(i));
    }
    for (int i = 0; i < 200; ++i) {
        ArriveResult a = m.arrive(rng(), i);
        ASSERT_TRUE(a.matched) << i;
        EXPECT_EQ(ctx(i), a.recv.ctx);
        EXPECT_EQ(Tag{0}, a.recv.mask);
    }
    EXPECT_EQ(0u, m.posted_count());
    EXPECT_EQ(0u, m.unexpected_count());

    /* and on the unexpected side */
    arrive_unexpected(m, 0xDEADBEEF, 7);
    PostResult p = m.post(0x42, 0, ctx(1));
    ASSERT_TRUE(p.matched);
    EXPECT_EQ(7u, p.message.cookie);
}

TEST(TagMatcherMatchingRule, ExactMaskMatchesOnlyTheSameTag) {
    TagMatcher m;
    post_queued(m, kT, kExactMask, ctx(1));
    for (Tag other : {kT ^ 1, kT ^ (Tag{1} << 63), kT ^ (Tag{1} << 32), Tag{0}, ~kT}) {
        ArriveResult a = m.match_posted(other);
        EXPECT_EQ(UCS_OK, a.status);
        EXPECT_FALSE(a.matched) << std::hex << other;
    }
    EXPECT_EQ(1u, m.posted_count());
    ArriveResult a = m.arrive(kT, 0);
    ASSERT_TRUE(a.matched);
    EXPECT_EQ(ctx(1), a.recv.ctx);
    EXPECT_EQ(kExactMask, a.recv.mask);
    EXPECT_EQ(kT, a.recv.tag);

    /* unexpected side */
    arrive_unexpected(m, kT ^ 1, 1);
    arrive_unexpected(m, kT, 2);
    Message msg;
    ASSERT_EQ(UCS_OK, m.peek(kT, kExactMask, &msg));
    EXPECT_EQ(2u, msg.cookie);
    EXPECT_EQ(UCS_ERR_NO_ELEM, m.peek(kT ^ 2, kExactMask, &msg));
}

/* ========================================================================== */
/* Ordering: earliest-posted matching receive wins                            */
/* ========================================================================== */

struct RecvSpec {
    Tag tag;
    Tag mask;
};

/* Five receives with five different masks, all matching kT (some carry junk
 * outside their mask). */
const std::vector<RecvSpec> &matching_specs() {
    static const std::vector<RecvSpec> specs = {
            {kT, kExactMask},
            {(kT & 0xFFFF0000FFFF0000ull) | 0x0000AAAA0000AAAAull, 0xFFFF0000FFFF0000ull},
            {(kT & 0xFFull) | 0x5500ull, 0xFFull},
            {0xFEEDFACECAFEBEEFull, 0},
            {kT & 0xF0F0F0F0F0F0F0F0ull, 0xF0F0F0F0F0F0F0F0ull},
    };
    return specs;
}

class TagMatcherOrdering : public ::testing::TestWithParam<uint32_t /* max_mask_classes */> {
  protected:
    MatcherOptions opts() const {
        MatcherOptions o;
        o.max_mask_classes = GetParam();
        return o;
    }
};

TEST_P(TagMatcherOrdering, AllPermutationsOfDistinctMasksMatchInPostingOrder) {
    const auto &specs = matching_specs();
    for (const RecvSpec &s : specs) ASSERT_TRUE(tag_matches(kT, s.tag, s.mask));

    std::vector<size_t> perm(specs.size());
    std::iota(perm.begin(), perm.end(), 0);
    size_t n_perms = 0;
    do {
        ++n_perms;
        TagMatcher m(opts());
        for (size_t i : perm) post_queued(m, specs[i].tag, specs[i].mask, ctx(i));
        ASSERT_EQ(specs.size(), m.posted_count());
        for (size_t k = 0; k < perm.size(); ++k) {
            ArriveResult a = m.arrive(kT, k);
            ASSERT_EQ(UCS_OK, a.status);
            ASSERT_TRUE(a.matched);
            ASSERT_EQ(ctx(perm[k]), a.recv.ctx) << "permutation #" << n_perms << " arrival " << k;
            ASSERT_EQ(specs[perm[k]].mask, a.recv.mask);
        }
        EXPECT_EQ(0u, m.posted_count());
        ArriveResult extra = m.arrive(kT, 99);
        EXPECT_FALSE(extra.matched);
        EXPECT_EQ(1u, m.unexpected_count());
    } while (std::next_permutation(perm.begin(), perm.end()));
    EXPECT_EQ(120u, n_perms);
}

/* peek_posted() names the receive match_posted() then takes, and leaves it
 * posted: over every class and the overflow list, in every posting order. */
TEST_P(TagMatcherOrdering, PeekPostedNamesWhatMatchPostedTakes) {
    const auto         &specs = matching_specs();
    std::vector<size_t> perm(specs.size());
    std::iota(perm.begin(), perm.end(), 0);
    do {
        TagMatcher m(opts());
        for (size_t i : perm) post_queued(m, specs[i].tag, specs[i].mask, ctx(i));
        post_queued(m, kT ^ 1, kExactMask, ctx(99)); /* matches nothing asked */
        for (size_t k = 0; k < perm.size(); ++k) {
            const size_t held = m.posted_count();
            ASSERT_EQ(ctx(perm[k]), m.peek_posted(kT)) << "arrival " << k;
            ASSERT_EQ(held, m.posted_count()) << "peek_posted took the receive";
            const ArriveResult a = m.match_posted(kT);
            ASSERT_TRUE(a.matched);
            ASSERT_EQ(ctx(perm[k]), a.recv.ctx);
        }
        EXPECT_EQ(nullptr, m.peek_posted(kT));
        EXPECT_EQ(1u, m.posted_count());
    } while (std::next_permutation(perm.begin(), perm.end()));
}

/* Receives the matcher holds staged (exact posts not yet in the index)
 * are seen by peek_posted() as by match_posted(), oldest first. */
TEST(TagMatcherPeekPosted, SeesStagedReceives) {
    MatcherOptions o;
    o.staging_min_index_bytes = 0; /* stage from the first post */
    TagMatcher m(o);
    for (uintptr_t i = 1; i <= 40; ++i) post_queued(m, kT + i, kExactMask, ctx(i));
    post_queued(m, kT + 7, kExactMask, ctx(1007));
    for (uintptr_t i : {7, 1007}) {
        ASSERT_EQ(ctx(i), m.peek_posted(kT + 7));
        const ArriveResult a = m.match_posted(kT + 7);
        ASSERT_TRUE(a.matched);
        EXPECT_EQ(ctx(i), a.recv.ctx);
    }
    EXPECT_EQ(nullptr, m.peek_posted(kT + 7));
    EXPECT_EQ(ctx(40), m.peek_posted(kT + 40));
    EXPECT_EQ(39u, m.posted_count());
}

TEST_P(TagMatcherOrdering, AllPermutationsWithNonMatchingReceivesInterleaved) {
    /* 4 receives that match kT, 3 that do not (same mask classes as some of
     * the matching ones, so that the index buckets are shared). */
    const Tag mA = 0xFFFF0000FFFF0000ull, mB = 0xFFull, mC = 0x00FF00FF00000000ull;
    const std::vector<RecvSpec> specs = {
            {kT, kExactMask},           /* 0 match */
            {kT & mA, mA},              /* 1 match */
            {kT | 0xFF00, mB},          /* 2 match (junk outside mB) */
            {0, 0},                     /* 3 match */
            {kT ^ 1, kExactMask},       /* 4 no    */
            {(kT ^ (Tag{1} << 48)) & mA, mA}, /* 5 no */
            {~kT & mC, mC},             /* 6 no    */
    };
    const size_t n_match = 4;
    for (size_t i = 0; i < specs.size(); ++i) {
        ASSERT_EQ(i < n_match, tag_matches(kT, specs[i].tag, specs[i].mask)) << i;
    }

    std::vector<size_t> perm(specs.size());
    std::iota(perm.begin(), perm.end(), 0);
    size_t n_perms = 0;
    do {
        ++n_perms;
        TagMatcher m(opts());
        for (size_t i : perm) post_queued(m, specs[i].tag, specs[i].mask, ctx(i));

        std::vector<void *> want_matched, want_left;
        for (size_t i : perm) (i < n_match ? want_matched : want_left).push_back(ctx(i));

        for (size_t k = 0; k < n_match; ++k) {
            ArriveResult a = m.arrive(kT, k);
            ASSERT_TRUE(a.matched);
            ASSERT_EQ(want_matched[k], a.recv.ctx) << "permutation #" << n_perms;
        }
        ASSERT_FALSE(m.match_posted(kT).matched);
        ASSERT_EQ(specs.size() - n_match, m.posted_count());

        Drained d = drain_all(m);
        ASSERT_EQ(want_left, d.recvs) << "permutation #" << n_perms;
        ASSERT_TRUE(d.msgs.empty());
    } while (std::next_permutation(perm.begin(), perm.end()));
    EXPECT_EQ(5040u, n_perms);
}

TEST_P(TagMatcherOrdering, ArrivalsMatchingSubsetsTakeEarliestOfThatSubset) {
    /* A message that matches only some receives must skip the others but
     * still respect posting order among those it matches. */
    const Tag t2 = kT ^ (Tag{1} << 63); /* matches specs 2 (mask 0xFF) and 3 (mask 0) */
    const auto &specs = matching_specs();
    std::vector<size_t> perm(specs.size());
    std::iota(perm.begin(), perm.end(), 0);
    do {
        TagMatcher m(opts());
        for (size_t i : perm) post_queued(m, specs[i].tag, specs[i].mask, ctx(i));
        std::vector<size_t> t2_order;
        for (size_t i : perm)
            if (tag_matches(t2, specs[i].tag, specs[i].mask)) t2_order.push_back(i);
        ASSERT_EQ(2u, t2_order.size());

        ArriveResult a = m.arrive(t2, 0);
        ASSERT_TRUE(a.matched);
        ASSERT_EQ(ctx(t2_order[0]), a.recv.ctx);

        /* the remaining four in posting order for kT */
        std::vector<size_t> rest;
        for (size_t i : perm)
            if (i != t2_order[0]) rest.push_back(i);
        for (size_t k = 0; k < rest.size(); ++k) {
            ArriveResult b = m.arrive(kT, k);
            ASSERT_TRUE(b.matched);
            ASSERT_EQ(ctx(rest[k]), b.recv.ctx);
        }
    } while (std::next_permutation(perm.begin(), perm.end()));
}

TEST_P(TagMatcherOrdering, SameMaskReceivesAreFifo) {
    TagMatcher m(opts());
    const Tag mask = 0xFFFF;
    for (int i = 0; i < 50; ++i) {
        post_queued(m, kT, i % 2 ? kExactMask : mask, ctx(i));
    }
    for (int i = 0; i < 50; ++i) {
        ArriveResult a = m.arrive(kT, 0);
        ASSERT_TRUE(a.matched);
        EXPECT_EQ(ctx(i), a.recv.ctx);
    }
}

INSTANTIATE_TEST_SUITE_P(MaskClasses, TagMatcherOrdering, ::testing::Values(64u, 2u, 1u, 0u),
                         [](const ::testing::TestParamInfo<uint32_t> &info) {
                             return "max_mask_classes_" + std::to_string(info.param);
                         });

/* ========================================================================== */
/* Unexpected first: post() takes the earliest-arrived matching message       */
/* ========================================================================== */

struct UnexpOpts {
    uint32_t    max_unexpected_indexes;
    uint32_t    unexpected_index_threshold;
    const char *name;
};

class TagMatcherUnexpected : public ::testing::TestWithParam<UnexpOpts> {
  protected:
    MatcherOptions opts() const {
        MatcherOptions o;
        o.max_unexpected_indexes     = GetParam().max_unexpected_indexes;
        o.unexpected_index_threshold = GetParam().unexpected_index_threshold;
        return o;
    }
};

TEST_P(TagMatcherUnexpected, PostTakesEarliestArrivedExactMatch) {
    TagMatcher m(opts());
    arrive_unexpected(m, kT, 1);
    arrive_unexpected(m, kT ^ 1, 2);
    arrive_unexpected(m, kT, 3);
    ASSERT_EQ(3u, m.unexpected_count());

    PostResult p = m.post(kT, kExactMask, ctx(0));
    EXPECT_EQ(UCS_OK, p.status);
    ASSERT_TRUE(p.matched);
    EXPECT_EQ(1u, p.message.cookie);
    EXPECT_EQ(kT, p.message.tag);
    EXPECT_EQ(2u, m.unexpected_count());
    EXPECT_EQ(0u, m.posted_count());

    p = m.post(kT, kExactMask, ctx(1));
    ASSERT_TRUE(p.matched);
    EXPECT_EQ(3u, p.message.cookie);
    EXPECT_EQ(1u, m.unexpected_count());

    p = m.post(kT, kExactMask, ctx(2));
    EXPECT_EQ(UCS_OK, p.status);
    EXPECT_FALSE(p.matched);
    EXPECT_FALSE(p.handle.is_null());
    EXPECT_EQ(1u, m.posted_count());
    EXPECT_EQ(1u, m.unexpected_count());
}

TEST_P(TagMatcherUnexpected, PostTakesEarliestArrivedMaskedAndWildcardMatch) {
    TagMatcher m(opts());
    const Tag hi = 0xFFFFFFFF00000000ull;
    /* cookie i, tags chosen so that different masks pick different messages */
    const std::vector<Tag> tags = {
            0x1111111100000001ull, /* 0 */
            0x2222222200000002ull, /* 1 */
            0x1111111100000003ull, /* 2 */
            0x2222222200000001ull, /* 3 */
            0x1111111100000001ull, /* 4 */
    };
    for (size_t i = 0; i < tags.size(); ++i) arrive_unexpected(m, tags[i], i);

    auto take = [&](Tag tag, Tag mask) -> int64_t {
        PostResult p = m.post(tag, mask, ctx(0));
        EXPECT_EQ(UCS_OK, p.status);
        if (!p.matched) {
            void *c = nullptr;
            EXPECT_EQ(UCS_OK, m.cancel(p.handle, &c)); /* keep the posted side empty */
            return -1;
        }
        EXPECT_TRUE(tag_matches(p.message.tag, tag, mask));
        EXPECT_EQ(tags[p.message.cookie], p.message.tag);
        return static_cast<int64_t>(p.message.cookie);
    };

    EXPECT_EQ(1, take(0x22222222FFFFFFFFull, hi));          /* junk outside the mask */
    EXPECT_EQ(0, take(0xABCD000000000001ull, 0xFFFFFFFFull)); /* junk outside the mask */
    EXPECT_EQ(2, take(0x42, 0));                              /* wildcard: earliest left */
    EXPECT_EQ(3, take(0x2222222200000001ull, kExactMask));
    EXPECT_EQ(4, take(0x1111111100000001ull, 0xFFFFFFFFull));
    EXPECT_EQ(0u, m.unexpected_count());
    EXPECT_EQ(-1, take(0, 0));
    EXPECT_EQ(0u, m.posted_count());
}

TEST_P(TagMatcherUnexpected, AllArrivalPermutationsProbeEarliestArrived) {
    /* Five messages; probes with different masks; for every arrival order the
     * message taken must be the earliest-arrived matching one. */
    const std::vector<Tag> tags = {0x00000000000000A1ull, 0x00000000000000B1ull,
                                   0x00000001000000A2ull, 0x10000001000000B2ull,
                                   0x10000000000000A1ull};
    const std::vector<RecvSpec> probes = {
            {0x00000000000000A0ull, 0xF0ull},            /* tags 0, 2, 4 */
            {0x00000001000000B0ull, 0x00000001000000F0ull}, /* tag 3 */
            {0x10000000000000A1ull, kExactMask},         /* tag 4 */
            {0, 0},                                      /* anything */
            {0x1, 0xF},                                  /* tags 0, 1, 4 */
    };
    std::vector<size_t> perm(tags.size());
    std::iota(perm.begin(), perm.end(), 0);
    do {
        for (int variant = 0; variant < 3; ++variant) {
            TagMatcher m(opts());
            for (size_t i : perm) arrive_unexpected(m, tags[i], i);
            std::vector<size_t> ref(perm); /* arrival order */
            for (size_t pi = 0; pi < probes.size(); ++pi) {
                /* rotate the probe order per variant so that different
                 * messages are left for later probes */
                const RecvSpec &pr = probes[(pi + variant) % probes.size()];
                auto it = std::find_if(ref.begin(), ref.end(), [&](size_t i) {
                    return tag_matches(tags[i], pr.tag, pr.mask);
                });
                Message peeked;
                ucs_status_t st = m.peek(pr.tag, pr.mask, &peeked);
                if (it == ref.end()) {
                    ASSERT_EQ(UCS_ERR_NO_ELEM, st);
                    continue;
                }
                ASSERT_EQ(UCS_OK, st);
                ASSERT_EQ(*it, peeked.cookie);
                if (variant == 1) {
                    Message claimed;
                    ASSERT_EQ(UCS_OK, m.claim(pr.tag, pr.mask, &claimed));
                    ASSERT_EQ(*it, claimed.cookie);
                    ASSERT_EQ(tags[*it], claimed.tag);
                } else {
                    PostResult p = m.post(pr.tag, pr.mask, ctx(pi));
                    ASSERT_EQ(UCS_OK, p.status);
                    ASSERT_TRUE(p.matched);
                    ASSERT_EQ(*it, p.message.cookie);
                    ASSERT_EQ(tags[*it], p.message.tag);
                }
                ref.erase(it);
                ASSERT_EQ(ref.size(), m.unexpected_count());
            }
            ASSERT_EQ(0u, m.posted_count());
        }
    } while (std::next_permutation(perm.begin(), perm.end()));
}

TEST_P(TagMatcherUnexpected, PostExpectedOnlyNeverConsumesUnexpected) {
    TagMatcher m(opts());
    arrive_unexpected(m, kT, 1);
    PostResult p = m.post_expected_only(kT, kExactMask, ctx(1));
    EXPECT_EQ(UCS_OK, p.status);
    EXPECT_FALSE(p.matched);
    EXPECT_FALSE(p.handle.is_null());
    PostResult p0 = m.post_expected_only(0, 0, ctx(2));
    EXPECT_FALSE(p0.matched);
    EXPECT_EQ(2u, m.posted_count());
    EXPECT_EQ(1u, m.unexpected_count());

    /* the old unexpected message is still there */
    Message msg;
    ASSERT_EQ(UCS_OK, m.peek(kT, kExactMask, &msg));
    EXPECT_EQ(1u, msg.cookie);

    /* a new arrival goes to the posted receives, in posting order */
    ArriveResult a = m.arrive(kT, 2);
    ASSERT_TRUE(a.matched);
    EXPECT_EQ(ctx(1), a.recv.ctx);
    a = m.arrive(kT, 3);
    ASSERT_TRUE(a.matched);
    EXPECT_EQ(ctx(2), a.recv.ctx);
    EXPECT_EQ(0u, m.posted_count());
    EXPECT_EQ(1u, m.unexpected_count());
}

TEST_P(TagMatcherUnexpected, MatchPostedNeverQueues) {
    TagMatcher m(opts());
    ArriveResult a = m.match_posted(kT);
    EXPECT_EQ(UCS_OK, a.status);
    EXPECT_FALSE(a.matched);
    EXPECT_EQ(0u, m.unexpected_count());
    Message msg;
    EXPECT_EQ(UCS_ERR_NO_ELEM, m.peek(0, 0, &msg));

    post_queued(m, 0, 0, ctx(1));
    post_queued(m, kT, kExactMask, ctx(2));
    a = m.match_posted(kT);
    EXPECT_EQ(UCS_OK, a.status);
    ASSERT_TRUE(a.matched);
    EXPECT_EQ(ctx(1), a.recv.ctx);
    a = m.match_posted(kT);
    ASSERT_TRUE(a.matched);
    EXPECT_EQ(ctx(2), a.recv.ctx);
    a = m.match_posted(kT);
    EXPECT_FALSE(a.matched);
    EXPECT_EQ(0u, m.posted_count());
    EXPECT_EQ(0u, m.unexpected_count());
}

INSTANTIATE_TEST_SUITE_P(Indexes, TagMatcherUnexpected,
                         ::testing::Values(UnexpOpts{4, 32, "default"},
                                           UnexpOpts{4, 0, "always_index"},
                                           UnexpOpts{0, 0, "never_index"},
                                           UnexpOpts{1, 2, "one_index"}),
                         [](const ::testing::TestParamInfo<UnexpOpts> &info) {
                             return std::string(info.param.name);
                         });


/* ========================================================================== */
/* cancel()                                                                   */
/* ========================================================================== */

TEST(TagMatcherCancel, OkReturnsContextAndRemovesReceive) {
    TagMatcher m;
    RecvHandle h = post_queued(m, kT, 0xFFFF, ctx(5));
    ASSERT_EQ(1u, m.posted_count());
    void *c = nullptr;
    EXPECT_EQ(UCS_OK, m.cancel(h, &c));
    EXPECT_EQ(ctx(5), c);
    EXPECT_EQ(0u, m.posted_count());
    /* the cancelled receive no longer matches: the arrival is queued */
    ArriveResult a = m.arrive(kT, 1);
    EXPECT_EQ(UCS_OK, a.status);
    EXPECT_FALSE(a.matched);
    EXPECT_EQ(1u, m.unexpected_count());
}

TEST(TagMatcherCancel, CtxOutputIsOptional) {
    TagMatcher m;
    RecvHandle h = post_queued(m, kT, kExactMask, ctx(1));
    EXPECT_EQ(UCS_OK, m.cancel(h));
    EXPECT_EQ(0u, m.posted_count());
    EXPECT_EQ(UCS_ERR_NO_ELEM, m.cancel(h));
}

TEST(TagMatcherCancel, NullContextIsAValidContext) {
    TagMatcher m;
    RecvHandle h = post_queued(m, kT, kExactMask, nullptr);
    void *c = ctx(9);
    EXPECT_EQ(UCS_OK, m.cancel(h, &c));
    EXPECT_EQ(nullptr, c);
}

TEST(TagMatcherCancel, CancelOfMiddleReceiveKeepsOrderOfOthers) {
    TagMatcher m;
    post_queued(m, kT, kExactMask, ctx(0));
    RecvHandle h1 = post_queued(m, kT & 0xFF, 0xFF, ctx(1));
    post_queued(m, 0, 0, ctx(2));
    RecvHandle h3 = post_queued(m, kT, kExactMask, ctx(3));
    post_queued(m, kT & 0xFF, 0xFF, ctx(4));
    void *c = nullptr;
    ASSERT_EQ(UCS_OK, m.cancel(h1, &c));
    EXPECT_EQ(ctx(1), c);
    ASSERT_EQ(UCS_OK, m.cancel(h3, &c));
    EXPECT_EQ(ctx(3), c);
    for (size_t want : {0, 2, 4}) {
        ArriveResult a = m.arrive(kT, 0);
        ASSERT_TRUE(a.matched);
        EXPECT_EQ(ctx(want), a.recv.ctx);
    }
    EXPECT_EQ(0u, m.posted_count());
}

TEST(TagMatcherCancel, CancelAfterMatchIsNoElemAndMatchDeliveredOnce) {
    TagMatcher m;
    RecvHandle h = post_queued(m, kT, kExactMask, ctx(1));
    ArriveResult a = m.arrive(kT, 7); /* the match happens first ... */
    ASSERT_TRUE(a.matched);
    EXPECT_EQ(ctx(1), a.recv.ctx);

    void *c = ctx(100);
    ucs_status_t st = m.cancel(h, &c); /* ... then the cancel loses the race */
    EXPECT_EQ(UCS_ERR_NO_ELEM, st);
    EXPECT_NE(UCS_OK, st);
    EXPECT_EQ(0u, m.posted_count());

    /* delivered once: a second identical arrival does not match again */
    ArriveResult b = m.arrive(kT, 8);
    EXPECT_FALSE(b.matched);
    EXPECT_EQ(1u, m.unexpected_count());
    ArriveResult c2 = m.match_posted(kT);
    EXPECT_FALSE(c2.matched);
}

TEST(TagMatcherCancel, CancelAfterMatchPostedIsNoElem) {
    TagMatcher m;
    RecvHandle h = post_queued(m, 0, 0, ctx(1));
    ASSERT_TRUE(m.match_posted(kT).matched);
    EXPECT_EQ(UCS_ERR_NO_ELEM, m.cancel(h));
}

TEST(TagMatcherCancel, ArrivalRightAfterCancelDoesNotMatchCancelledReceive) {
    TagMatcher m;
    RecvHandle h1 = post_queued(m, kT, kExactMask, ctx(1));
    post_queued(m, kT & 0xFFFF, 0xFFFF, ctx(2));
    ASSERT_EQ(UCS_OK, m.cancel(h1)); /* the cancel happens first ... */
    ArriveResult a = m.arrive(kT, 0); /* ... then the arrival */
    ASSERT_TRUE(a.matched);
    EXPECT_EQ(ctx(2), a.recv.ctx);
    ArriveResult b = m.arrive(kT, 1);
    EXPECT_FALSE(b.matched);
    EXPECT_EQ(1u, m.unexpected_count());
    EXPECT_EQ(0u, m.posted_count());
}

TEST(TagMatcherCancel, DoubleCancelIsNoElem) {
    TagMatcher m;
    RecvHandle h = post_queued(m, kT, 0xF0, ctx(1));
    post_queued(m, kT, 0xF0, ctx(2));
    EXPECT_EQ(UCS_OK, m.cancel(h));
    EXPECT_EQ(UCS_ERR_NO_ELEM, m.cancel(h));
    EXPECT_EQ(1u, m.posted_count()); /* the other one is untouched */
}

TEST(TagMatcherCancel, NullHandleIsInvalidParam) {
    TagMatcher m;
    EXPECT_EQ(UCS_ERR_INVALID_PARAM, m.cancel(RecvHandle{}));
    post_queued(m, kT, kExactMask, ctx(1));
    void *c = nullptr;
    EXPECT_EQ(UCS_ERR_INVALID_PARAM, m.cancel(RecvHandle{}, &c));
    RecvHandle null_with_index;
    null_with_index.index = 0; /* generation 0 => null, whatever the index */
    EXPECT_EQ(UCS_ERR_INVALID_PARAM, m.cancel(null_with_index));
    EXPECT_EQ(1u, m.posted_count());
}

TEST(TagMatcherCancel, NeverIssuedIndexIsInvalidParam) {
    TagMatcher m;
    std::vector<RecvHandle> hs;
    for (int i = 0; i < 10; ++i) hs.push_back(post_queued(m, kT, kExactMask, ctx(i)));
    uint32_t max_index = 0;
    for (RecvHandle h : hs) max_index = std::max(max_index, h.index);

    for (uint32_t idx : {max_index + 100000u, UINT32_MAX, UINT32_MAX - 1}) {
        RecvHandle bogus;
        bogus.index      = idx;
        bogus.generation = 1;
        EXPECT_EQ(UCS_ERR_INVALID_PARAM, m.cancel(bogus)) << idx;
        bogus.generation = hs[0].generation;
        EXPECT_EQ(UCS_ERR_INVALID_PARAM, m.cancel(bogus)) << idx;
    }
    EXPECT_EQ(10u, m.posted_count());
}

TEST(TagMatcherCancel, NeverIssuedIndexOnFreshMatcherIsInvalidParam) {
    /* Nothing was ever posted, so no index was issued. */
    TagMatcher m;
    RecvHandle h;
    h.index      = 0;
    h.generation = 1;
    EXPECT_EQ(UCS_ERR_INVALID_PARAM, m.cancel(h));
    h.index = 1;
    EXPECT_EQ(UCS_ERR_INVALID_PARAM, m.cancel(h));
}

/* ========================================================================== */
/* peek / claim / take                                                        */
/* ========================================================================== */

TEST(TagMatcherProbe, PeekLeavesMessageQueued) {
    TagMatcher m;
    MsgHandle h = arrive_unexpected(m, kT, 11);
    for (int i = 0; i < 3; ++i) {
        Message msg;
        ASSERT_EQ(UCS_OK, m.peek(kT, kExactMask, &msg));
        EXPECT_EQ(kT, msg.tag);
        EXPECT_EQ(11u, msg.cookie);
        EXPECT_EQ(h, msg.handle);
        EXPECT_EQ(1u, m.unexpected_count());
    }
    /* still there for a post */
    PostResult p = m.post(kT, kExactMask, ctx(0));
    ASSERT_TRUE(p.matched);
    EXPECT_EQ(11u, p.message.cookie);
}

TEST(TagMatcherProbe, ClaimRemovesMessage) {
    TagMatcher m;
    MsgHandle h = arrive_unexpected(m, kT, 11);
    Message msg;
    ASSERT_EQ(UCS_OK, m.claim(kT, kExactMask, &msg));
    EXPECT_EQ(kT, msg.tag);
    EXPECT_EQ(11u, msg.cookie);
    EXPECT_EQ(0u, m.unexpected_count());
    EXPECT_EQ(UCS_ERR_NO_ELEM, m.peek(kT, kExactMask, &msg));
    EXPECT_EQ(UCS_ERR_NO_ELEM, m.claim(kT, kExactMask, &msg));
    EXPECT_EQ(UCS_ERR_NO_ELEM, m.take(h)); /* the handle went stale */
    PostResult p = m.post(kT, kExactMask, ctx(0));
    EXPECT_FALSE(p.matched);
}

TEST(TagMatcherProbe, EarliestArrivedWinsWithMasks) {
    TagMatcher m;
    arrive_unexpected(m, 0x100, 0);
    arrive_unexpected(m, 0x201, 1);
    arrive_unexpected(m, 0x301, 2);
    arrive_unexpected(m, 0x202, 3);
    Message msg;
    ASSERT_EQ(UCS_OK, m.peek(0, 0, &msg));
    EXPECT_EQ(0u, msg.cookie);
    ASSERT_EQ(UCS_OK, m.peek(0x2FF, 0xF00, &msg));
    EXPECT_EQ(1u, msg.cookie);
    ASSERT_EQ(UCS_OK, m.peek(0x001, 0x0FF, &msg));
    EXPECT_EQ(1u, msg.cookie);
    ASSERT_EQ(UCS_OK, m.peek(0x202, kExactMask, &msg));
    EXPECT_EQ(3u, msg.cookie);

    ASSERT_EQ(UCS_OK, m.claim(0x001, 0x0FF, &msg));
    EXPECT_EQ(1u, msg.cookie);
    ASSERT_EQ(UCS_OK, m.claim(0x001, 0x0FF, &msg));
    EXPECT_EQ(2u, msg.cookie);
    EXPECT_EQ(UCS_ERR_NO_ELEM, m.claim(0x001, 0x0FF, &msg));
    ASSERT_EQ(UCS_OK, m.claim(0x200, 0xF00, &msg));
    EXPECT_EQ(3u, msg.cookie);
    ASSERT_EQ(UCS_OK, m.claim(0, 0, &msg));
    EXPECT_EQ(0u, msg.cookie);
    EXPECT_EQ(0u, m.unexpected_count());
}

TEST(TagMatcherProbe, TakeAfterPeek) {
    TagMatcher m;
    arrive_unexpected(m, 0x10, 0);
    arrive_unexpected(m, 0x20, 1);
    arrive_unexpected(m, 0x10, 2);
    Message peeked;
    ASSERT_EQ(UCS_OK, m.peek(0x20, kExactMask, &peeked));
    ASSERT_EQ(1u, peeked.cookie);

    Message taken;
    ASSERT_EQ(UCS_OK, m.take(peeked.handle, &taken));
    EXPECT_EQ(0x20u, taken.tag);
    EXPECT_EQ(1u, taken.cookie);
    EXPECT_EQ(2u, m.unexpected_count());
    EXPECT_EQ(UCS_ERR_NO_ELEM, m.take(peeked.handle, &taken));
    EXPECT_EQ(UCS_ERR_NO_ELEM, m.peek(0x20, kExactMask, &taken));

    /* the others keep arrival order */
    ASSERT_EQ(UCS_OK, m.claim(0, 0, &taken));
    EXPECT_EQ(0u, taken.cookie);
    ASSERT_EQ(UCS_OK, m.peek(0, 0, &peeked));
    EXPECT_EQ(2u, peeked.cookie);
    EXPECT_EQ(UCS_OK, m.take(peeked.handle)); /* msg output is optional */
    EXPECT_EQ(0u, m.unexpected_count());
}

TEST(TagMatcherProbe, TakeByArrivalHandle) {
    TagMatcher m;
    MsgHandle h0 = arrive_unexpected(m, kT, 0);
    MsgHandle h1 = arrive_unexpected(m, kT, 1);
    MsgHandle h2 = arrive_unexpected(m, kT, 2);
    EXPECT_NE(h0, h1);
    EXPECT_NE(h1, h2);
    Message msg;
    ASSERT_EQ(UCS_OK, m.take(h1, &msg));
    EXPECT_EQ(1u, msg.cookie);
    PostResult p = m.post(kT, kExactMask, ctx(0));
    ASSERT_TRUE(p.matched);
    EXPECT_EQ(0u, p.message.cookie);
    EXPECT_EQ(UCS_ERR_NO_ELEM, m.take(h0)); /* consumed by the post */
    ASSERT_EQ(UCS_OK, m.take(h2, &msg));
    EXPECT_EQ(2u, msg.cookie);
    EXPECT_EQ(0u, m.unexpected_count());
}

TEST(TagMatcherProbe, TakeStaleHandleIsNoElem) {
    TagMatcher m;
    MsgHandle h = arrive_unexpected(m, kT, 0);
    Message msg;
    ASSERT_EQ(UCS_OK, m.claim(kT, kExactMask, &msg));
    EXPECT_EQ(UCS_ERR_NO_ELEM, m.take(h, &msg));
    EXPECT_EQ(UCS_ERR_NO_ELEM, m.take(h));
}

TEST(TagMatcherProbe, TakeNullOrNeverIssuedHandleIsInvalidParam) {
    TagMatcher m;
    MsgHandle h = arrive_unexpected(m, kT, 0);
    Message msg;
    EXPECT_EQ(UCS_ERR_INVALID_PARAM, m.take(MsgHandle{}, &msg));
    MsgHandle bogus;
    bogus.index      = h.index + 100000u;
    bogus.generation = h.generation;
    EXPECT_EQ(UCS_ERR_INVALID_PARAM, m.take(bogus, &msg));
    bogus.index = UINT32_MAX;
    EXPECT_EQ(UCS_ERR_INVALID_PARAM, m.take(bogus));
    EXPECT_EQ(1u, m.unexpected_count());
}

TEST(TagMatcherProbe, NullMessagePointerIsInvalidParam) {
    TagMatcher m;
    arrive_unexpected(m, kT, 0);
    EXPECT_EQ(UCS_ERR_INVALID_PARAM, m.peek(kT, kExactMask, nullptr));
    EXPECT_EQ(UCS_ERR_INVALID_PARAM, m.claim(kT, kExactMask, nullptr));
    EXPECT_EQ(UCS_ERR_INVALID_PARAM, m.claim(0, 0, nullptr));
    EXPECT_EQ(1u, m.unexpected_count()); /* the failed claim consumed nothing */
    Message msg;
    ASSERT_EQ(UCS_OK, m.claim(kT, kExactMask, &msg));
    EXPECT_EQ(0u, msg.cookie);
}

TEST(TagMatcherProbe, NoElemWhenNothingMatches) {
    TagMatcher m;
    Message msg;
    EXPECT_EQ(UCS_ERR_NO_ELEM, m.peek(0, 0, &msg));
    EXPECT_EQ(UCS_ERR_NO_ELEM, m.claim(0, 0, &msg));
    arrive_unexpected(m, 0x1234, 0);
    EXPECT_EQ(UCS_ERR_NO_ELEM, m.peek(0x1235, kExactMask, &msg));
    EXPECT_EQ(UCS_ERR_NO_ELEM, m.peek(0x2234, 0xF000, &msg));
    EXPECT_EQ(UCS_ERR_NO_ELEM, m.claim(0x0034, 0xFF00, &msg));
    EXPECT_EQ(1u, m.unexpected_count());
    /* posted receives are not seen by probes */
    post_queued(m, 0x9999, kExactMask, ctx(0));
    EXPECT_EQ(UCS_ERR_NO_ELEM, m.peek(0x9999, kExactMask, &msg));
}

/* ========================================================================== */
/* cancel_matching()                                                          */
/* ========================================================================== */

TEST(TagMatcherCancelMatching, CancelsMatchingInPostingOrderAndLeavesOthers) {
    TagMatcher m;
    const Tag gA = 0xA000000000000000ull, gB = 0xB000000000000000ull;
    const Tag gmask = 0xF000000000000000ull;
    /* receive tags carry no bits outside their own mask */
    struct R {
        Tag  tag, mask;
        bool cancel;
    };
    const std::vector<R> rs = {
            {gA | 1, kExactMask, true},
            {gB | 1, kExactMask, false},
            {gA, 0xF0000000000000FFull, true},
            {gB | 0x10, 0xF0000000000000F0ull, false},
            {gA | 2, kExactMask, true},
            {0, 0, false}, /* mask-0 receive: tag 0, hi nibble 0 != A */
            {gA | 0x10, 0xF0000000000000F0ull, true},
            {gB, gmask, false},
    };
    std::vector<RecvHandle> hs;
    for (size_t i = 0; i < rs.size(); ++i) hs.push_back(post_queued(m, rs[i].tag, rs[i].mask, ctx(i)));

    std::vector<void *> got;
    size_t n = m.cancel_matching(gA | 0x0FFF, gmask, [&](void *c) { got.push_back(c); });
    std::vector<void *> want, rest;
    for (size_t i = 0; i < rs.size(); ++i) (rs[i].cancel ? want : rest).push_back(ctx(i));
    EXPECT_EQ(want.size(), n);
    EXPECT_EQ(want, got);
    EXPECT_EQ(rest.size(), m.posted_count());

    for (size_t i = 0; i < rs.size(); ++i) {
        void *c = nullptr;
        EXPECT_EQ(rs[i].cancel ? UCS_ERR_NO_ELEM : UCS_OK, m.cancel(hs[i], &c)) << i;
        if (!rs[i].cancel) {
            EXPECT_EQ(ctx(i), c);
            ASSERT_EQ(UCS_OK, m.post(rs[i].tag, rs[i].mask, ctx(i)).status); /* re-post */
        }
    }
    /* the survivors (now re-posted in the same relative order) still match */
    ArriveResult a = m.arrive(gB | 1, 0);
    ASSERT_TRUE(a.matched);
    EXPECT_EQ(ctx(1), a.recv.ctx);
    a = m.arrive(gB | 0x10, 0);
    ASSERT_TRUE(a.matched);
    EXPECT_EQ(ctx(3), a.recv.ctx);
    a = m.arrive(gA | 1, 0); /* only the mask-0 receive can take it */
    ASSERT_TRUE(a.matched);
    EXPECT_EQ(ctx(5), a.recv.ctx);
    a = m.arrive(gB | 0x77, 0);
    ASSERT_TRUE(a.matched);
    EXPECT_EQ(ctx(7), a.recv.ctx);
    EXPECT_EQ(0u, m.posted_count());
}

TEST(TagMatcherCancelMatching, SurvivorsMatchWithoutRepost) {
    TagMatcher m;
    post_queued(m, 0x11, kExactMask, ctx(0));
    post_queued(m, 0x21, kExactMask, ctx(1));
    post_queued(m, 0x10, 0xF0, ctx(2));
    post_queued(m, 0x20, 0xF0, ctx(3));
    std::vector<void *> got;
    EXPECT_EQ(2u, m.cancel_matching(0x1F, 0xF0, [&](void *c) { got.push_back(c); }));
    EXPECT_EQ((std::vector<void *>{ctx(0), ctx(2)}), got);
    EXPECT_FALSE(m.match_posted(0x11).matched);
    ArriveResult a = m.arrive(0x21, 0);
    ASSERT_TRUE(a.matched);
    EXPECT_EQ(ctx(1), a.recv.ctx);
    a = m.arrive(0x21, 0);
    ASSERT_TRUE(a.matched);
    EXPECT_EQ(ctx(3), a.recv.ctx);
}

TEST(TagMatcherCancelMatching, MaskZeroCancelsAllAndNoneMatchingReturnsZero) {
    TagMatcher m;
    std::vector<void *> want;
    for (int i = 0; i < 20; ++i) {
        Tag mask = (i % 4 == 0) ? kExactMask : (i % 4 == 1) ? 0xFF : (i % 4 == 2) ? 0 : 0xFF00;
        post_queued(m, Tag(i) & mask, mask, ctx(i));
        want.push_back(ctx(i));
    }
    int calls = 0;
    EXPECT_EQ(0u, m.cancel_matching(0x12345, kExactMask, [&](void *) { ++calls; }));
    EXPECT_EQ(0, calls);
    EXPECT_EQ(20u, m.posted_count());

    std::vector<void *> got;
    EXPECT_EQ(20u, m.cancel_matching(0xFFFF, 0, [&](void *c) { got.push_back(c); }));
    EXPECT_EQ(want, got);
    EXPECT_EQ(0u, m.posted_count());
    EXPECT_FALSE(m.match_posted(0).matched);
}

TEST(TagMatcherCancelMatching, DoesNotTouchUnexpectedMessages) {
    TagMatcher m;
    arrive_unexpected(m, kT, 1);
    post_queued(m, kT ^ 1, kExactMask, ctx(0));
    EXPECT_EQ(1u, m.cancel_matching(0, 0, [](void *) {}));
    EXPECT_EQ(1u, m.unexpected_count());
}

TEST(TagMatcherCancelMatching, CallbackMayReenterMatcher) {
    TagMatcher m;
    for (int i = 0; i < 4; ++i) post_queued(m, 0x100 | i, kExactMask, ctx(i));
    post_queued(m, 0x200, kExactMask, ctx(10));

    std::vector<void *> got;
    std::vector<RecvHandle> reposted;
    size_t n = m.cancel_matching(0x100, 0xF00, [&](void *c) {
        got.push_back(c);
        /* the cancelled receives have all left: nothing to match for them */
        EXPECT_FALSE(m.match_posted(0x100 | ctx_index(c)).matched);
        /* re-post from inside the callback, with a new context */
        PostResult p = m.post(0x300 | ctx_index(c), kExactMask, ctx(20 + ctx_index(c)));
        EXPECT_EQ(UCS_OK, p.status);
        EXPECT_FALSE(p.matched);
        reposted.push_back(p.handle);
        /* arrivals from inside the callback work too */
        ArriveResult a = m.arrive(0x900, 5);
        EXPECT_EQ(UCS_OK, a.status);
    });
    EXPECT_EQ(4u, n);
    EXPECT_EQ((std::vector<void *>{ctx(0), ctx(1), ctx(2), ctx(3)}), got);
    EXPECT_EQ(5u, m.posted_count());
    EXPECT_EQ(4u, m.unexpected_count());
    for (int i = 0; i < 4; ++i) {
        ArriveResult a = m.arrive(0x300 | i, 0);
        ASSERT_TRUE(a.matched);
        EXPECT_EQ(ctx(20 + i), a.recv.ctx);
    }
    ArriveResult a = m.arrive(0x200, 0);
    ASSERT_TRUE(a.matched);
    EXPECT_EQ(ctx(10), a.recv.ctx);
}

TEST(TagMatcherCancelMatching, CallbackMayCancelMatchingAgain) {
    TagMatcher m;
    post_queued(m, 0x10, kExactMask, ctx(0));
    post_queued(m, 0x20, kExactMask, ctx(1));
    post_queued(m, 0x11, kExactMask, ctx(2));
    std::vector<void *> inner;
    size_t outer = m.cancel_matching(0x10, 0xF0, [&](void *) {
        m.cancel_matching(0x20, kExactMask, [&](void *c) { inner.push_back(c); });
    });
    EXPECT_EQ(2u, outer);
    EXPECT_EQ((std::vector<void *>{ctx(1)}), inner); /* only once: second call finds none */
    EXPECT_EQ(0u, m.posted_count());
}

/* ========================================================================== */
/* drain()                                                                    */
/* ========================================================================== */

TEST(TagMatcherDrain, ReportsPostedInPostingOrderThenUnexpectedInArrivalOrder) {
    MatcherOptions o;
    o.max_mask_classes = 2; /* posting order must hold across indexed and fallback masks */
    TagMatcher m(o);
    /* unexpected messages first (they would match some receives, which is
     * why the receives are posted with post_expected_only) */
    const std::vector<Tag> msg_tags = {0x10, 0x1, 0x999, 0x2, 0x20, 0x10};
    std::vector<MsgHandle> mh;
    for (size_t i = 0; i < msg_tags.size(); ++i) mh.push_back(arrive_unexpected(m, msg_tags[i], 100 + i));

    const std::vector<RecvSpec> specs = {
            {0x1, kExactMask}, {0x10, 0xF0},     {0, 0},           {0x100, 0xF00},
            {0x1000, 0xF000},  {0x2, kExactMask}, {0x20, 0xF0},     {0x10000, 0xF0000},
    };
    std::vector<RecvHandle> rh;
    for (size_t i = 0; i < specs.size(); ++i) {
        PostResult p = m.post_expected_only(specs[i].tag, specs[i].mask, ctx(i));
        ASSERT_EQ(UCS_OK, p.status);
        ASSERT_FALSE(p.matched);
        rh.push_back(p.handle);
    }
    /* take something out of the middle of both queues */
    ASSERT_EQ(UCS_OK, m.cancel(rh[3]));
    ASSERT_EQ(UCS_OK, m.take(mh[2]));
    Message peeked;
    ASSERT_EQ(UCS_OK, m.peek(0x20, kExactMask, &peeked));

    ASSERT_EQ(7u, m.posted_count());
    ASSERT_EQ(5u, m.unexpected_count());

    Drained d = drain_all(m);
    std::vector<void *> want_r;
    for (size_t i = 0; i < specs.size(); ++i)
        if (i != 3) want_r.push_back(ctx(i));
    EXPECT_EQ(want_r, d.recvs);
    EXPECT_EQ((std::vector<uint64_t>{100, 101, 103, 104, 105}), cookies_of(d.msgs));
    std::vector<Tag> got_tags;
    for (const Message &msg : d.msgs) got_tags.push_back(msg.tag);
    EXPECT_EQ((std::vector<Tag>{0x10, 0x1, 0x2, 0x20, 0x10}), got_tags);
    EXPECT_EQ(std::string("rrrrrrrmmmmm"), std::string(d.order.begin(), d.order.end()));

    EXPECT_EQ(0u, m.posted_count());
    EXPECT_EQ(0u, m.unexpected_count());
    for (RecvHandle h : rh) EXPECT_EQ(UCS_ERR_NO_ELEM, m.cancel(h));
    for (MsgHandle h : mh) EXPECT_EQ(UCS_ERR_NO_ELEM, m.take(h));
    EXPECT_EQ(UCS_ERR_NO_ELEM, m.take(peeked.handle));
    Message msg;
    EXPECT_EQ(UCS_ERR_NO_ELEM, m.peek(0, 0, &msg));
    EXPECT_FALSE(m.match_posted(0x1).matched);
}

TEST(TagMatcherDrain, EmptyMatcherCallsNothing) {
    TagMatcher m;
    Drained d = drain_all(m);
    EXPECT_TRUE(d.order.empty());
}

TEST(TagMatcherDrain, MatcherIsUsableAfterDrainAndKeepsOptions) {
    MatcherOptions o;
    o.max_posted       = 3;
    o.max_unexpected   = 2;
    o.max_mask_classes = 3;
    TagMatcher m(o);
    for (int round = 0; round < 3; ++round) {
        std::vector<RecvHandle> old;
        old.push_back(post_queued(m, 0x1, kExactMask, ctx(0)));
        old.push_back(post_queued(m, 0x10, 0xF0, ctx(1)));
        old.push_back(post_queued(m, 0x100, 0xF00, ctx(2)));
        EXPECT_EQ(UCS_ERR_EXCEEDS_LIMIT, m.post(0x2, kExactMask, ctx(3)).status);
        arrive_unexpected(m, 0x5, 10);
        arrive_unexpected(m, 0x6, 11);
        EXPECT_EQ(UCS_ERR_EXCEEDS_LIMIT, m.arrive(0x7, 12).status);

        Drained d = drain_all(m);
        EXPECT_EQ((std::vector<void *>{ctx(0), ctx(1), ctx(2)}), d.recvs);
        EXPECT_EQ((std::vector<uint64_t>{10, 11}), cookies_of(d.msgs));
        EXPECT_EQ(3u, m.options().max_posted);
        EXPECT_EQ(2u, m.options().max_unexpected);
        EXPECT_EQ(3u, m.options().max_mask_classes);

        /* usable again, and new handles are not confused with old ones */
        RecvHandle h = post_queued(m, 0x10, 0xF0, ctx(7));
        for (RecvHandle oh : old) {
            EXPECT_NE(oh, h);
            EXPECT_EQ(UCS_ERR_NO_ELEM, m.cancel(oh));
        }
        ArriveResult a = m.arrive(0x1A, 0);
        ASSERT_TRUE(a.matched);
        EXPECT_EQ(ctx(7), a.recv.ctx);
        arrive_unexpected(m, 0x77, 1);
        PostResult p = m.post(0x77, kExactMask, ctx(8));
        ASSERT_TRUE(p.matched);
        EXPECT_EQ(1u, p.message.cookie);
        EXPECT_EQ(0u, m.posted_count());
        EXPECT_EQ(0u, m.unexpected_count());
    }
}

TEST(TagMatcherDrain, CallbacksMayReenterMatcher) {
    TagMatcher m;
    post_queued(m, 0x1, kExactMask, ctx(0));
    post_queued(m, 0x2, kExactMask, ctx(1));
    arrive_unexpected(m, 0x3, 5);
    std::vector<void *> rs;
    std::vector<uint64_t> ms;
    m.drain(
            [&](void *c) {
                rs.push_back(c);
                post_queued(m, 0x40 + ctx_index(c), kExactMask, ctx(10 + ctx_index(c)));
            },
            [&](const Message &msg) {
                ms.push_back(msg.cookie);
                arrive_unexpected(m, 0x50, 6);
            });
    EXPECT_EQ((std::vector<void *>{ctx(0), ctx(1)}), rs);
    EXPECT_EQ((std::vector<uint64_t>{5}), ms);
    EXPECT_EQ(2u, m.posted_count());
    EXPECT_EQ(1u, m.unexpected_count());
    ArriveResult a = m.arrive(0x41, 0);
    ASSERT_TRUE(a.matched);
    EXPECT_EQ(ctx(11), a.recv.ctx);
}


/* ========================================================================== */
/* Exactly once                                                               */
/* ========================================================================== */

/* Small tag space so that matches are frequent; tags carry no bits outside
 * the masks they are posted with. */
const std::array<int, 6> kTagBits = {0, 3, 17, 31, 47, 63};
Tag random_tag(std::mt19937_64 &rng) {
    Tag t = 0;
    for (int b : kTagBits)
        if (rng() & 1) t |= Tag{1} << b;
    return t;
}

class TagMatcherExactlyOnce : public ::testing::TestWithParam<uint32_t /* seed */> {};

TEST_P(TagMatcherExactlyOnce, EveryContextAndCookieLeavesExactlyOnce) {
    std::mt19937_64 rng(GetParam());
    MatcherOptions o;
    o.max_mask_classes           = 1 + GetParam() % 3;
    o.max_unexpected_indexes     = GetParam() % 3;
    o.unexpected_index_threshold = 4;
    TagMatcher m(o);

    const std::vector<Tag> masks = {kExactMask, 0, Tag{1} | (Tag{1} << 63), Tag{1} << 17,
                                    (Tag{1} << 3) | (Tag{1} << 31), Tag{1} << 47, Tag{0x8} | (Tag{1} << 17)};
    const size_t N = 3000;
    std::vector<int>        recv_left(N, 0);
    std::vector<RecvHandle> recv_handle(N);
    std::vector<bool>       recv_issued(N, false);
    std::vector<int>        msg_left;
    std::vector<MsgHandle>  msg_handle;
    size_t next_recv = 0;

    auto leave = [&](void *c) {
        size_t i = ctx_index(c);
        ASSERT_LT(i, N);
        ++recv_left[i];
    };

    for (int op = 0; op < 30000 || next_recv < N; ++op) {
        unsigned kind = rng() % 100;
        if (next_recv < N && kind < 35) {
            size_t i = next_recv++;
            Tag mask = masks[rng() % masks.size()];
            Tag tag  = random_tag(rng) & mask;
            PostResult p = (kind < 20) ? m.post_expected_only(tag, mask, ctx(i)) : m.post(tag, mask, ctx(i));
            ASSERT_EQ(UCS_OK, p.status);
            recv_issued[i] = true;
            if (p.matched) {
                ++recv_left[i]; /* matched at post time: never queued */
                ASSERT_LT(p.message.cookie, msg_left.size());
                ++msg_left[p.message.cookie];
            } else {
                recv_handle[i] = p.handle;
            }
        } else if (kind < 60) {
            uint64_t cookie = msg_left.size();
            ArriveResult a = m.arrive(random_tag(rng), cookie);
            ASSERT_EQ(UCS_OK, a.status);
            msg_left.push_back(0);
            msg_handle.push_back(a.matched ? MsgHandle{} : a.handle);
            if (a.matched) {
                leave(a.recv.ctx);
                ++msg_left[cookie]; /* never queued */
            }
        } else if (kind < 65) {
            ArriveResult a = m.match_posted(random_tag(rng));
            ASSERT_EQ(UCS_OK, a.status);
            if (a.matched) leave(a.recv.ctx);
        } else if (kind < 80 && next_recv > 0) {
            size_t i = rng() % next_recv;
            void *c = nullptr;
            ucs_status_t st = m.cancel(recv_handle[i], &c);
            if (recv_handle[i].is_null()) {
                ASSERT_EQ(UCS_ERR_INVALID_PARAM, st); /* it matched at post time */
            } else if (recv_left[i] == 0) {
                ASSERT_EQ(UCS_OK, st) << "receive " << i << " is still posted";
                ASSERT_EQ(ctx(i), c);
                leave(c);
            } else {
                ASSERT_EQ(UCS_ERR_NO_ELEM, st) << "receive " << i << " already left";
            }
        } else if (kind < 88 && !msg_left.empty()) {
            Message msg;
            Tag mask = masks[rng() % masks.size()];
            ucs_status_t st = m.claim(random_tag(rng), mask, &msg);
            if (st == UCS_OK) {
                ASSERT_LT(msg.cookie, msg_left.size());
                ++msg_left[msg.cookie];
            } else {
                ASSERT_EQ(UCS_ERR_NO_ELEM, st);
            }
        } else if (kind < 96 && !msg_left.empty()) {
            size_t k = rng() % msg_left.size();
            Message msg;
            ucs_status_t st = m.take(msg_handle[k], &msg);
            if (msg_handle[k].is_null()) {
                ASSERT_EQ(UCS_ERR_INVALID_PARAM, st);
            } else if (msg_left[k] == 0) {
                ASSERT_EQ(UCS_OK, st);
                ASSERT_EQ(k, msg.cookie);
                ++msg_left[k];
            } else {
                ASSERT_EQ(UCS_ERR_NO_ELEM, st);
            }
        } else if (kind < 98) {
            Tag mask = masks[rng() % masks.size()];
            m.cancel_matching(random_tag(rng), mask, leave);
        }
        if (HasFatalFailure()) return;
    }
    Drained d = drain_all(m);
    for (void *c : d.recvs) leave(c);
    for (const Message &msg : d.msgs) {
        ASSERT_LT(msg.cookie, msg_left.size());
        ++msg_left[msg.cookie];
    }
    EXPECT_EQ(0u, m.posted_count());
    EXPECT_EQ(0u, m.unexpected_count());
    for (size_t i = 0; i < N; ++i) ASSERT_EQ(1, recv_left[i]) << "receive ctx " << i;
    for (size_t k = 0; k < msg_left.size(); ++k) ASSERT_EQ(1, msg_left[k]) << "message cookie " << k;
}

INSTANTIATE_TEST_SUITE_P(Seeds, TagMatcherExactlyOnce, ::testing::Values(1u, 2u, 3u, 42u, 1234u, 99991u));

/* ========================================================================== */
/* Limits                                                                     */
/* ========================================================================== */

TEST(TagMatcherLimits, MaxPostedExceedsLimitAndChangesNothing) {
    MatcherOptions o;
    o.max_posted = 3;
    TagMatcher m(o);
    RecvHandle h0 = post_queued(m, kT, kExactMask, ctx(0));
    post_queued(m, kT & 0xFF, 0xFF, ctx(1));
    post_queued(m, 0, 0, ctx(2));
    ASSERT_EQ(3u, m.posted_count());
    const size_t mem = m.memory_bytes();

    PostResult p = m.post(kT, kExactMask, ctx(3));
    EXPECT_EQ(UCS_ERR_EXCEEDS_LIMIT, p.status);
    EXPECT_FALSE(p.matched);
    p = m.post_expected_only(0x55, 0xF0, ctx(4));
    EXPECT_EQ(UCS_ERR_EXCEEDS_LIMIT, p.status);
    EXPECT_EQ(3u, m.posted_count());
    EXPECT_EQ(0u, m.unexpected_count());
    EXPECT_EQ(mem, m.memory_bytes());

    /* earlier entries still match, in posting order; rejected ones never do */
    for (int i = 0; i < 3; ++i) {
        ArriveResult a = m.arrive(kT, 0);
        ASSERT_TRUE(a.matched);
        EXPECT_EQ(ctx(i), a.recv.ctx);
    }
    EXPECT_FALSE(m.match_posted(kT).matched);
    EXPECT_FALSE(m.match_posted(0x55).matched);
    EXPECT_EQ(UCS_ERR_NO_ELEM, m.cancel(h0));

    /* room again */
    post_queued(m, 1, kExactMask, ctx(5));
    post_queued(m, 2, kExactMask, ctx(6));
    post_queued(m, 3, kExactMask, ctx(7));
    EXPECT_EQ(UCS_ERR_EXCEEDS_LIMIT, m.post(4, kExactMask, ctx(8)).status);
    EXPECT_EQ(3u, m.posted_count());
}

TEST(TagMatcherLimits, MaxUnexpectedExceedsLimitAndChangesNothing) {
    MatcherOptions o;
    o.max_unexpected = 2;
    TagMatcher m(o);
    MsgHandle h0 = arrive_unexpected(m, 0x10, 0);
    arrive_unexpected(m, 0x20, 1);
    ArriveResult a = m.arrive(0x10, 2);
    EXPECT_EQ(UCS_ERR_EXCEEDS_LIMIT, a.status);
    EXPECT_FALSE(a.matched);
    EXPECT_EQ(2u, m.unexpected_count());
    EXPECT_EQ(0u, m.posted_count());

    Message msg;
    ASSERT_EQ(UCS_OK, m.peek(0x10, kExactMask, &msg));
    EXPECT_EQ(0u, msg.cookie);
    EXPECT_EQ(h0, msg.handle);
    ASSERT_EQ(UCS_OK, m.claim(0x10, kExactMask, &msg));
    EXPECT_EQ(0u, msg.cookie);
    /* the rejected message (cookie 2) was never queued */
    EXPECT_EQ(UCS_ERR_NO_ELEM, m.peek(0x10, kExactMask, &msg));

    /* match_posted never queues, so it is not limited */
    arrive_unexpected(m, 0x30, 3);
    ASSERT_EQ(2u, m.unexpected_count());
    ArriveResult mp = m.match_posted(0x40);
    EXPECT_EQ(UCS_OK, mp.status);
    EXPECT_FALSE(mp.matched);

    Drained d = drain_all(m);
    EXPECT_EQ((std::vector<uint64_t>{1, 3}), cookies_of(d.msgs));
}

/* ========================================================================== */
/* Many distinct masks                                                        */
/* ========================================================================== */

std::vector<Tag> distinct_masks(size_t n) {
    std::vector<Tag> out;
    for (size_t i = 0; i < n; ++i) out.push_back(Tag{0xF} << (2 * i) | (Tag{1} << 63));
    return out;
}

TEST(TagMatcherManyMasks, PostedSideBeyondMaxMaskClassesKeepsPostingOrder) {
    MatcherOptions o;
    o.max_mask_classes = 4;
    const std::vector<Tag> masks = distinct_masks(20);
    std::vector<RecvSpec> specs;
    for (Tag mk : masks) specs.push_back({kT & mk, mk});        /* matches kT */
    specs.push_back({kT, kExactMask});
    specs.push_back({0, 0});
    const size_t n_match = specs.size();
    for (Tag mk : masks) specs.push_back({(kT ^ (Tag{1} << 63)) & mk, mk}); /* never matches kT */
    for (size_t i = 0; i < specs.size(); ++i)
        ASSERT_EQ(i < n_match, tag_matches(kT, specs[i].tag, specs[i].mask)) << i;

    std::mt19937_64 rng(5);
    std::vector<size_t> order(specs.size());
    std::iota(order.begin(), order.end(), 0);
    for (int round = 0; round < 40; ++round) {
        std::shuffle(order.begin(), order.end(), rng);
        TagMatcher m(o);
        for (size_t i : order) {
            PostResult p = m.post_expected_only(specs[i].tag, specs[i].mask, ctx(i));
            ASSERT_EQ(UCS_OK, p.status);
            ASSERT_FALSE(p.matched);
        }
        const uint64_t scans_before = m.stats().fallback_scans;
        std::vector<void *> want_match, want_left;
        for (size_t i : order) (i < n_match ? want_match : want_left).push_back(ctx(i));
        for (size_t k = 0; k < n_match; ++k) {
            ArriveResult a = m.arrive(kT, k);
            ASSERT_TRUE(a.matched);
            ASSERT_EQ(want_match[k], a.recv.ctx) << "round " << round << " arrival " << k;
        }
        ASSERT_FALSE(m.match_posted(kT).matched);
        /* 16 of the masks are past max_mask_classes: some arrival had to walk
         * the shared list */
        EXPECT_GT(m.stats().fallback_scans, scans_before);
        EXPECT_GT(m.stats().mask_classes_in_use, 0u);
        Drained d = drain_all(m);
        ASSERT_EQ(want_left, d.recvs);
        EXPECT_EQ(0u, m.stats().mask_classes_in_use);
    }
}

TEST(TagMatcherManyMasks, WithinMaxMaskClassesNoFallbackScans) {
    MatcherOptions o;
    o.max_mask_classes = 4;
    TagMatcher m(o);
    const std::vector<Tag> masks = distinct_masks(4);
    for (int rep = 0; rep < 10; ++rep) {
        for (size_t i = 0; i < masks.size(); ++i) {
            post_queued(m, kT & masks[i], masks[i], ctx(rep * 10 + i));
            post_queued(m, kT, kExactMask, ctx(1000 + rep * 10 + i));
        }
    }
    EXPECT_EQ(4u, m.stats().mask_classes_in_use);
    for (int k = 0; k < 80; ++k) {
        ASSERT_TRUE(m.arrive(kT, k).matched);
        ArriveResult miss = m.match_posted(~kT);
        ASSERT_FALSE(miss.matched);
    }
    EXPECT_EQ(0u, m.posted_count());
    EXPECT_EQ(0u, m.stats().fallback_scans);
    EXPECT_EQ(0u, m.stats().mask_classes_in_use);
    EXPECT_EQ(80u, m.stats().posted_matches);
}

TEST(TagMatcherManyMasks, MaskClassesInUseCountsDistinctNonExactMasksHoldingReceives) {
    TagMatcher m;
    EXPECT_EQ(0u, m.stats().mask_classes_in_use);
    post_queued(m, 1, kExactMask, ctx(0));
    post_queued(m, 2, kExactMask, ctx(1));
    EXPECT_EQ(0u, m.stats().mask_classes_in_use);
    RecvHandle a = post_queued(m, 0x10, 0xF0, ctx(2));
    RecvHandle b = post_queued(m, 0x20, 0xF0, ctx(3));
    RecvHandle c = post_queued(m, 0x100, 0xF00, ctx(4));
    RecvHandle d = post_queued(m, 0x1000, 0xF000, ctx(5));
    EXPECT_EQ(3u, m.stats().mask_classes_in_use);
    ASSERT_EQ(UCS_OK, m.cancel(a));
    EXPECT_EQ(3u, m.stats().mask_classes_in_use);
    ASSERT_EQ(UCS_OK, m.cancel(b));
    EXPECT_EQ(2u, m.stats().mask_classes_in_use);
    ASSERT_EQ(UCS_OK, m.cancel(c));
    ASSERT_EQ(UCS_OK, m.cancel(d));
    EXPECT_EQ(0u, m.stats().mask_classes_in_use);
}

/* Naive reference for the unexpected side. */
struct RefMsg {
    Tag       tag;
    uint64_t  cookie;
    MsgHandle handle;
};

TEST(TagMatcherManyMasks, UnexpectedSideManyMasksAndDeepQueueReturnsEarliestArrived) {
    MatcherOptions o;
    o.max_unexpected_indexes     = 2;
    o.unexpected_index_threshold = 8;
    TagMatcher m(o);
    std::mt19937_64 rng(17);
    const std::vector<Tag> masks = {Tag{1},
                                    Tag{1} << 63,
                                    (Tag{1} << 3) | (Tag{1} << 17),
                                    Tag{1} << 31,
                                    (Tag{1} << 47) | 1,
                                    (Tag{1} << 17) | (Tag{1} << 63),
                                    0x8000800080008000ull};
    std::deque<RefMsg> ref;
    uint64_t cookie = 0;
    for (int i = 0; i < 300; ++i) {
        Tag t = random_tag(rng);
        ref.push_back({t, cookie, arrive_unexpected(m, t, cookie)});
        ++cookie;
    }
    ASSERT_EQ(300u, m.unexpected_count());
    for (int step = 0; step < 3000; ++step) {
        Tag mask = masks[rng() % masks.size()];
        Tag tag  = random_tag(rng);
        auto it  = std::find_if(ref.begin(), ref.end(),
                                [&](const RefMsg &r) { return tag_matches(r.tag, tag, mask); });
        Message msg;
        switch (rng() % 4) {
        case 0: {
            ucs_status_t st = m.peek(tag, mask, &msg);
            if (it == ref.end()) {
                ASSERT_EQ(UCS_ERR_NO_ELEM, st);
            } else {
                ASSERT_EQ(UCS_OK, st);
                ASSERT_EQ(it->cookie, msg.cookie) << "step " << step;
                ASSERT_EQ(it->handle, msg.handle);
            }
            break;
        }
        case 1: {
            ucs_status_t st = m.claim(tag, mask, &msg);
            if (it == ref.end()) {
                ASSERT_EQ(UCS_ERR_NO_ELEM, st);
            } else {
                ASSERT_EQ(UCS_OK, st);
                ASSERT_EQ(it->cookie, msg.cookie) << "step " << step;
                ref.erase(it);
            }
            break;
        }
        case 2: {
            PostResult p = m.post(tag, mask, ctx(step));
            ASSERT_EQ(UCS_OK, p.status);
            if (it == ref.end()) {
                ASSERT_FALSE(p.matched);
                ASSERT_EQ(UCS_OK, m.cancel(p.handle));
            } else {
                ASSERT_TRUE(p.matched);
                ASSERT_EQ(it->cookie, p.message.cookie) << "step " << step;
                ref.erase(it);
            }
            break;
        }
        default: {
            /* keep the queue deep, and sometimes take one out of the middle */
            Tag t = random_tag(rng);
            ref.push_back({t, cookie, arrive_unexpected(m, t, cookie)});
            ++cookie;
            if (rng() % 4 == 0 && !ref.empty()) {
                size_t k = rng() % ref.size();
                ASSERT_EQ(UCS_OK, m.take(ref[k].handle, &msg));
                ASSERT_EQ(ref[k].cookie, msg.cookie);
                ref.erase(ref.begin() + k);
            }
            break;
        }
        }
        ASSERT_EQ(ref.size(), m.unexpected_count());
    }
    EXPECT_GT(m.stats().unexpected_index_builds, 0u);
    Drained d = drain_all(m);
    std::vector<uint64_t> want;
    for (const RefMsg &r : ref) want.push_back(r.cookie);
    EXPECT_EQ(want, cookies_of(d.msgs));
}

TEST(TagMatcherManyMasks, NoUnexpectedIndexBelowThreshold) {
    MatcherOptions o;
    o.unexpected_index_threshold = 32;
    TagMatcher m(o);
    for (uint64_t i = 0; i < 10; ++i) arrive_unexpected(m, i << 4, i);
    Message msg;
    for (int rep = 0; rep < 5; ++rep) {
        for (Tag mask : {Tag{0xF0}, Tag{0x30}, Tag{0xC0}, Tag{0x10}, Tag{0x80}}) {
            ASSERT_EQ(UCS_OK, m.peek(0x90, mask, &msg));
            EXPECT_TRUE(tag_matches(msg.tag, 0x90, mask));
        }
    }
    ASSERT_EQ(UCS_OK, m.peek(0x90, 0xF0, &msg));
    EXPECT_EQ(9u, msg.cookie);
    EXPECT_EQ(0u, m.stats().unexpected_index_builds);
    /* the masked searches had to walk the arrival list */
    EXPECT_GT(m.stats().fallback_scans, 0u);
}

TEST(TagMatcherManyMasks, NoUnexpectedIndexWhenMaxIndexesIsZero) {
    MatcherOptions o;
    o.max_unexpected_indexes     = 0;
    o.unexpected_index_threshold = 0;
    TagMatcher m(o);
    for (uint64_t i = 0; i < 200; ++i) arrive_unexpected(m, i, i);
    Message msg;
    ASSERT_EQ(UCS_OK, m.peek(0x85, 0xFF, &msg));
    EXPECT_EQ(0x85u, msg.cookie);
    ASSERT_EQ(UCS_OK, m.claim(0x3, 0x3, &msg));
    EXPECT_EQ(3u, msg.cookie);
    ASSERT_EQ(UCS_OK, m.claim(0x3, 0x3, &msg));
    EXPECT_EQ(7u, msg.cookie);
    EXPECT_EQ(0u, m.stats().unexpected_index_builds);
    EXPECT_GT(m.stats().fallback_scans, 0u);
}

TEST(TagMatcherManyMasks, ExactAndWildcardSearchesBuildNoIndex) {
    MatcherOptions o;
    o.unexpected_index_threshold = 4;
    TagMatcher m(o);
    for (uint64_t i = 0; i < 200; ++i) arrive_unexpected(m, i % 50, i);
    Message msg;
    for (uint64_t i = 0; i < 50; ++i) {
        ASSERT_EQ(UCS_OK, m.peek(i, kExactMask, &msg));
        EXPECT_EQ(i, msg.cookie);
    }
    ASSERT_EQ(UCS_OK, m.claim(0, 0, &msg));
    EXPECT_EQ(0u, msg.cookie);
    PostResult p = m.post(7, kExactMask, ctx(0));
    ASSERT_TRUE(p.matched);
    EXPECT_EQ(7u, p.message.cookie);
    p = m.post(123, 0, ctx(0));
    ASSERT_TRUE(p.matched);
    EXPECT_EQ(1u, p.message.cookie);
    EXPECT_EQ(0u, m.stats().unexpected_index_builds);
}

TEST(TagMatcherManyMasks, MaskedSearchesAboveThresholdBuildIndexes) {
    MatcherOptions o;
    o.max_unexpected_indexes     = 4;
    o.unexpected_index_threshold = 16;
    TagMatcher m(o);
    for (uint64_t i = 0; i < 200; ++i) arrive_unexpected(m, i, i);
    Message msg;
    for (int rep = 0; rep < 20; ++rep) {
        ASSERT_EQ(UCS_OK, m.peek(0x42, 0xFF, &msg));
        EXPECT_EQ(0x42u, msg.cookie);
    }
    EXPECT_GT(m.stats().unexpected_index_builds, 0u);
    /* the index stays in step with later changes */
    ASSERT_EQ(UCS_OK, m.take(msg.handle));
    EXPECT_EQ(UCS_ERR_NO_ELEM, m.peek(0x42, 0xFF, &msg));
    arrive_unexpected(m, 0x142, 1000);
    arrive_unexpected(m, 0x42, 1001);
    ASSERT_EQ(UCS_OK, m.claim(0x42, 0xFF, &msg));
    EXPECT_EQ(1000u, msg.cookie);
    ASSERT_EQ(UCS_OK, m.claim(0x42, 0xFF, &msg));
    EXPECT_EQ(1001u, msg.cookie);
    EXPECT_EQ(UCS_ERR_NO_ELEM, m.claim(0x42, 0xFF, &msg));
}

/* ========================================================================== */
/* Handle reuse (generation)                                                  */
/* ========================================================================== */

TEST(TagMatcherHandles, StaleReceiveHandleRejectedAfterSlotReuse) {
    TagMatcher m;
    std::vector<RecvHandle> old;
    bool reused = false;
    for (int i = 0; i < 200; ++i) {
        RecvHandle h = post_queued(m, kT, (i % 2) ? kExactMask : 0xFF, ctx(i));
        for (RecvHandle o : old) {
            ASSERT_NE(o, h);
            reused |= (o.index == h.index);
        }
        /* every stale handle is rejected while the new receive is live */
        for (RecvHandle o : old) ASSERT_EQ(UCS_ERR_NO_ELEM, m.cancel(o));
        ASSERT_EQ(1u, m.posted_count());
        if (i % 3 == 0) {
            ArriveResult a = m.arrive(kT, 0); /* leave by match */
            ASSERT_TRUE(a.matched);
            ASSERT_EQ(ctx(i), a.recv.ctx);
        } else {
            void *c = nullptr;
            ASSERT_EQ(UCS_OK, m.cancel(h, &c)); /* leave by cancel */
            ASSERT_EQ(ctx(i), c);
        }
        old.push_back(h);
    }
    EXPECT_TRUE(reused) << "slots were never reused: the test did not exercise generations";
}

TEST(TagMatcherHandles, StaleMessageHandleRejectedAfterSlotReuse) {
    TagMatcher m;
    std::vector<MsgHandle> old;
    bool reused = false;
    for (uint64_t i = 0; i < 200; ++i) {
        MsgHandle h = arrive_unexpected(m, kT, i);
        for (MsgHandle o : old) {
            ASSERT_NE(o, h);
            reused |= (o.index == h.index);
        }
        for (MsgHandle o : old) ASSERT_EQ(UCS_ERR_NO_ELEM, m.take(o));
        ASSERT_EQ(1u, m.unexpected_count());
        Message msg;
        switch (i % 3) {
        case 0:
            ASSERT_EQ(UCS_OK, m.claim(kT, kExactMask, &msg));
            break;
        case 1:
            ASSERT_EQ(UCS_OK, m.take(h, &msg));
            break;
        default: {
            PostResult p = m.post(kT, 0xFF, ctx(0));
            ASSERT_TRUE(p.matched);
            msg = p.message;
        }
        }
        ASSERT_EQ(i, msg.cookie);
        old.push_back(h);
    }
    EXPECT_TRUE(reused) << "slots were never reused: the test did not exercise generations";
}

TEST(TagMatcherHandles, HandlesAreDistinctAndNonNull) {
    TagMatcher m;
    std::set<std::pair<uint32_t, uint32_t>> seen;
    for (int i = 0; i < 100; ++i) {
        RecvHandle h = post_queued(m, i, kExactMask, ctx(i));
        EXPECT_TRUE(seen.insert({h.index, h.generation}).second);
    }
    for (int i = 0; i < 100; ++i) {
        void *c = nullptr;
        RecvHandle h = m.post(i, kExactMask, ctx(0)).handle;
        ASSERT_EQ(UCS_OK, m.cancel(h, &c));
    }
}

/* ========================================================================== */
/* Move                                                                       */
/* ========================================================================== */

TEST(TagMatcherMove, MoveConstructionKeepsState) {
    MatcherOptions o;
    o.max_posted = 5;
    TagMatcher a(o);
    RecvHandle h0 = post_queued(a, 0x1, kExactMask, ctx(0));
    post_queued(a, 0x10, 0xF0, ctx(1));
    post_queued(a, 0x2, kExactMask, ctx(2));
    MsgHandle mh = arrive_unexpected(a, 0x99, 7);
    arrive_unexpected(a, 0x98, 8);

    TagMatcher b(std::move(a));
    EXPECT_EQ(3u, b.posted_count());
    EXPECT_EQ(2u, b.unexpected_count());
    EXPECT_EQ(5u, b.options().max_posted);
    void *c = nullptr;
    ASSERT_EQ(UCS_OK, b.cancel(h0, &c));
    EXPECT_EQ(ctx(0), c);
    ArriveResult r = b.arrive(0x12, 0);
    ASSERT_TRUE(r.matched);
    EXPECT_EQ(ctx(1), r.recv.ctx);
    Message msg;
    ASSERT_EQ(UCS_OK, b.take(mh, &msg));
    EXPECT_EQ(7u, msg.cookie);
    ASSERT_EQ(UCS_OK, b.peek(0, 0, &msg));
    EXPECT_EQ(8u, msg.cookie);
    Drained d = drain_all(b);
    EXPECT_EQ((std::vector<void *>{ctx(2)}), d.recvs);
    EXPECT_EQ((std::vector<uint64_t>{8}), cookies_of(d.msgs));
}

TEST(TagMatcherMove, MoveAssignmentKeepsStateAndDropsTargetState) {
    TagMatcher src;
    RecvHandle h = post_queued(src, 0x1, kExactMask, ctx(0));
    post_queued(src, 0x10, 0xF0, ctx(1));
    arrive_unexpected(src, 0x99, 7);

    MatcherOptions o;
    o.max_unexpected = 1;
    TagMatcher dst(o);
    post_queued(dst, 0x555, kExactMask, ctx(50));
    arrive_unexpected(dst, 0x777, 70);

    dst = std::move(src);
    EXPECT_EQ(2u, dst.posted_count());
    EXPECT_EQ(1u, dst.unexpected_count());
    EXPECT_EQ(SIZE_MAX, dst.options().max_unexpected);
    EXPECT_FALSE(dst.match_posted(0x555).matched); /* the old target state is gone */
    Message msg;
    EXPECT_EQ(UCS_ERR_NO_ELEM, dst.peek(0x777, kExactMask, &msg));
    void *c = nullptr;
    ASSERT_EQ(UCS_OK, dst.cancel(h, &c));
    EXPECT_EQ(ctx(0), c);
    PostResult p = dst.post(0x99, kExactMask, ctx(2));
    ASSERT_TRUE(p.matched);
    EXPECT_EQ(7u, p.message.cookie);
    arrive_unexpected(dst, 0x1, 8);
    arrive_unexpected(dst, 0x2, 9); /* max_unexpected of the source (unlimited) applies */
    Drained d = drain_all(dst);
    EXPECT_EQ((std::vector<void *>{ctx(1)}), d.recvs);
    EXPECT_EQ((std::vector<uint64_t>{8, 9}), cookies_of(d.msgs));

    /* a moved-from matcher can be assigned a new one and used */
    src = TagMatcher();
    post_queued(src, 0x3, kExactMask, ctx(3));
    ArriveResult a = src.arrive(0x3, 0);
    ASSERT_TRUE(a.matched);
    EXPECT_EQ(ctx(3), a.recv.ctx);
}

/* ========================================================================== */
/* Counts, memory, stats                                                      */
/* ========================================================================== */

TEST(TagMatcherCounts, PostedAndUnexpectedCountsTrackEveryOperation) {
    TagMatcher m;
    EXPECT_EQ(0u, m.posted_count());
    EXPECT_EQ(0u, m.unexpected_count());
    RecvHandle h1 = post_queued(m, 0x1, kExactMask, ctx(1));
    post_queued(m, 0x10, 0xF0, ctx(2));
    post_queued(m, 0x100, 0xF00, ctx(3));
    EXPECT_EQ(3u, m.posted_count());
    m.arrive(0x1, 0); /* match */
    EXPECT_EQ(2u, m.posted_count());
    EXPECT_EQ(0u, m.unexpected_count());
    m.arrive(0x2, 1); /* unexpected */
    m.arrive(0x3, 2);
    m.arrive(0x4, 3);
    EXPECT_EQ(2u, m.posted_count());
    EXPECT_EQ(3u, m.unexpected_count());
    m.match_posted(0x5); /* no match, no queue */
    EXPECT_EQ(3u, m.unexpected_count());
    m.match_posted(0x1F); /* match */
    EXPECT_EQ(1u, m.posted_count());
    EXPECT_EQ(UCS_ERR_NO_ELEM, m.cancel(h1));
    EXPECT_EQ(1u, m.posted_count());
    Message msg;
    m.peek(0, 0, &msg);
    EXPECT_EQ(3u, m.unexpected_count());
    m.claim(0x2, kExactMask, &msg);
    EXPECT_EQ(2u, m.unexpected_count());
    PostResult p = m.post(0x3, kExactMask, ctx(4)); /* takes unexpected */
    ASSERT_TRUE(p.matched);
    EXPECT_EQ(1u, m.posted_count());
    EXPECT_EQ(1u, m.unexpected_count());
    m.post_expected_only(0x4, kExactMask, ctx(5));
    EXPECT_EQ(2u, m.posted_count());
    EXPECT_EQ(1u, m.unexpected_count());
    EXPECT_EQ(1u, m.cancel_matching(0x4, kExactMask, [](void *) {}));
    EXPECT_EQ(1u, m.posted_count());
    m.peek(0, 0, &msg);
    m.take(msg.handle);
    EXPECT_EQ(0u, m.unexpected_count());
    m.arrive(0x9, 9);
    drain_all(m);
    EXPECT_EQ(0u, m.posted_count());
    EXPECT_EQ(0u, m.unexpected_count());
}

TEST(TagMatcherCounts, MemoryBytesPositiveAndGrowsWithDepth) {
    TagMatcher m;
    for (int i = 0; i < 10; ++i) post_queued(m, i, (i % 2) ? kExactMask : 0xFF, ctx(i));
    const size_t small = m.memory_bytes();
    EXPECT_GT(small, 0u);
    for (int i = 10; i < 20000; ++i) post_queued(m, i, (i % 2) ? kExactMask : 0xFF, ctx(i));
    const size_t big = m.memory_bytes();
    EXPECT_GT(big, small);

    TagMatcher u;
    for (uint64_t i = 0; i < 10; ++i) arrive_unexpected(u, i, i);
    const size_t usmall = u.memory_bytes();
    EXPECT_GT(usmall, 0u);
    for (uint64_t i = 10; i < 20000; ++i) arrive_unexpected(u, i, i);
    EXPECT_GT(u.memory_bytes(), usmall);
}

TEST(TagMatcherCounts, MemoryDoesNotGrowWhenCyclingAtTheSameDepth) {
    TagMatcher m;
    auto fill = [&]() {
        std::vector<RecvHandle> hs;
        for (int i = 0; i < 1000; ++i) hs.push_back(post_queued(m, i, (i % 2) ? kExactMask : 0xFFFF, ctx(i)));
        /* low 16 bits >= 0x8000: no posted receive (tags < 1000) matches */
        for (uint64_t i = 0; i < 1000; ++i) arrive_unexpected(m, 0x108000 + i, i);
        return hs;
    };
    auto empty = [&](const std::vector<RecvHandle> &hs) {
        for (RecvHandle h : hs) ASSERT_EQ(UCS_OK, m.cancel(h));
        Message msg;
        for (uint64_t i = 0; i < 1000; ++i) ASSERT_EQ(UCS_OK, m.claim(0x108000 + i, kExactMask, &msg));
    };
    empty(fill());
    const size_t after_first = m.memory_bytes();
    for (int round = 0; round < 5; ++round) {
        empty(fill());
        EXPECT_LE(m.memory_bytes(), after_first) << "round " << round;
    }
}

TEST(TagMatcherCounts, StatsCountMatches) {
    TagMatcher m;
    post_queued(m, 1, kExactMask, ctx(0));
    post_queued(m, 2, kExactMask, ctx(1));
    RecvHandle h = post_queued(m, 3, kExactMask, ctx(2));
    ASSERT_TRUE(m.arrive(1, 0).matched);
    ASSERT_TRUE(m.match_posted(2).matched);
    ASSERT_EQ(UCS_OK, m.cancel(h));
    EXPECT_FALSE(m.arrive(5, 1).matched);
    EXPECT_FALSE(m.arrive(6, 2).matched);
    arrive_unexpected(m, 7, 3);
    MatcherStats s = m.stats();
    EXPECT_EQ(2u, s.posted_matches);
    EXPECT_EQ(0u, s.unexpected_matches);

    Message msg;
    ASSERT_EQ(UCS_OK, m.peek(5, kExactMask, &msg));
    EXPECT_EQ(0u, m.stats().unexpected_matches); /* a peek takes nothing */
    ASSERT_TRUE(m.post(5, kExactMask, ctx(3)).matched);
    ASSERT_EQ(UCS_OK, m.claim(6, kExactMask, &msg));
    s = m.stats();
    EXPECT_EQ(2u, s.posted_matches);
    EXPECT_EQ(2u, s.unexpected_matches);
    EXPECT_FALSE(m.post_expected_only(7, kExactMask, ctx(4)).matched);
    EXPECT_EQ(2u, m.stats().unexpected_matches);
}

TEST(TagMatcherCounts, OptionsAreReturned) {
    MatcherOptions o;
    o.max_posted                 = 11;
    o.max_unexpected             = 12;
    o.max_mask_classes           = 13;
    o.max_unexpected_indexes     = 3;
    o.unexpected_index_threshold = 15;
    TagMatcher m(o);
    EXPECT_EQ(11u, m.options().max_posted);
    EXPECT_EQ(12u, m.options().max_unexpected);
    EXPECT_EQ(13u, m.options().max_mask_classes);
    EXPECT_EQ(3u, m.options().max_unexpected_indexes);
    EXPECT_EQ(15u, m.options().unexpected_index_threshold);
}

/* ========================================================================== */
/* Randomised comparison with a naive model of the whole contract             */
/* ========================================================================== */

struct ModelCase {
    uint32_t    seed;
    uint32_t    max_mask_classes;
    uint32_t    max_unexpected_indexes;
    uint32_t    unexpected_index_threshold;
    size_t      staging_min_index_bytes = MatcherOptions().staging_min_index_bytes;
};

class TagMatcherModel : public ::testing::TestWithParam<ModelCase> {};

TEST_P(TagMatcherModel, RandomOperationsAgreeWithNaiveModel) {
    const ModelCase mc = GetParam();
    MatcherOptions o;
    o.max_mask_classes           = mc.max_mask_classes;
    o.max_unexpected_indexes     = mc.max_unexpected_indexes;
    o.unexpected_index_threshold = mc.unexpected_index_threshold;
    o.staging_min_index_bytes    = mc.staging_min_index_bytes;
    TagMatcher m(o);
    std::mt19937_64 rng(mc.seed);

    std::vector<Tag> masks = {kExactMask, 0};
    while (masks.size() < 14) {
        Tag mk = random_tag(rng);
        if (mk != 0 && std::find(masks.begin(), masks.end(), mk) == masks.end()) masks.push_back(mk);
    }
    struct RefRecv {
        Tag        tag, mask;
        void      *c;
        RecvHandle h;
    };
    std::vector<RefRecv>   posted; /* posting order */
    std::vector<RefMsg>    unexp;  /* arrival order */
    std::vector<RecvHandle> all_recv_handles;
    std::vector<MsgHandle>  all_msg_handles;
    size_t   next_ctx = 0;
    uint64_t next_cookie = 0;

    auto find_posted = [&](Tag t) {
        return std::find_if(posted.begin(), posted.end(),
                            [&](const RefRecv &r) { return tag_matches(t, r.tag, r.mask); });
    };
    auto find_unexp = [&](Tag tag, Tag mask) {
        return std::find_if(unexp.begin(), unexp.end(),
                            [&](const RefMsg &r) { return tag_matches(r.tag, tag, mask); });
    };

    for (int step = 0; step < 20000; ++step) {
        SCOPED_TRACE("step " + std::to_string(step));
        const unsigned kind = rng() % 100;
        const Tag tag  = random_tag(rng);
        const Tag mask = masks[rng() % masks.size()];
        Message msg;
        if (kind < 22) { /* post */
            void *c = ctx(next_ctx++);
            PostResult p = m.post(tag & mask, mask, c);
            ASSERT_EQ(UCS_OK, p.status);
            auto it = find_unexp(tag, mask);
            if (it != unexp.end()) {
                ASSERT_TRUE(p.matched);
                ASSERT_EQ(it->cookie, p.message.cookie);
                ASSERT_EQ(it->tag, p.message.tag);
                unexp.erase(it);
            } else {
                ASSERT_FALSE(p.matched);
                posted.push_back({tag & mask, mask, c, p.handle});
                all_recv_handles.push_back(p.handle);
            }
        } else if (kind < 32) { /* post_expected_only */
            void *c = ctx(next_ctx++);
            PostResult p = m.post_expected_only(tag & mask, mask, c);
            ASSERT_EQ(UCS_OK, p.status);
            ASSERT_FALSE(p.matched);
            posted.push_back({tag & mask, mask, c, p.handle});
            all_recv_handles.push_back(p.handle);
        } else if (kind < 57) { /* arrive */
            uint64_t ck = next_cookie++;
            ArriveResult a = m.arrive(tag, ck);
            ASSERT_EQ(UCS_OK, a.status);
            auto it = find_posted(tag);
            if (it != posted.end()) {
                ASSERT_TRUE(a.matched);
                ASSERT_EQ(it->c, a.recv.ctx);
                ASSERT_EQ(it->mask, a.recv.mask);
                ASSERT_EQ(it->tag, a.recv.tag & a.recv.mask);
                posted.erase(it);
            } else {
                ASSERT_FALSE(a.matched);
                unexp.push_back({tag, ck, a.handle});
                all_msg_handles.push_back(a.handle);
            }
        } else if (kind < 62) { /* match_posted */
            ArriveResult a = m.match_posted(tag);
            ASSERT_EQ(UCS_OK, a.status);
            auto it = find_posted(tag);
            ASSERT_EQ(it != posted.end(), a.matched);
            if (a.matched) {
                ASSERT_EQ(it->c, a.recv.ctx);
                posted.erase(it);
            }
        } else if (kind < 72 && !all_recv_handles.empty()) { /* cancel */
            RecvHandle h = all_recv_handles[rng() % all_recv_handles.size()];
            auto it = std::find_if(posted.begin(), posted.end(), [&](const RefRecv &r) { return r.h == h; });
            void *c = nullptr;
            ucs_status_t st = m.cancel(h, &c);
            if (it != posted.end()) {
                ASSERT_EQ(UCS_OK, st);
                ASSERT_EQ(it->c, c);
                posted.erase(it);
            } else {
                ASSERT_EQ(UCS_ERR_NO_ELEM, st);
            }
        } else if (kind < 79) { /* peek */
            ucs_status_t st = m.peek(tag, mask, &msg);
            auto it = find_unexp(tag, mask);
            if (it != unexp.end()) {
                ASSERT_EQ(UCS_OK, st);
                ASSERT_EQ(it->cookie, msg.cookie);
                ASSERT_EQ(it->tag, msg.tag);
                ASSERT_EQ(it->handle, msg.handle);
            } else {
                ASSERT_EQ(UCS_ERR_NO_ELEM, st);
            }
        } else if (kind < 86) { /* claim */
            ucs_status_t st = m.claim(tag, mask, &msg);
            auto it = find_unexp(tag, mask);
            if (it != unexp.end()) {
                ASSERT_EQ(UCS_OK, st);
                ASSERT_EQ(it->cookie, msg.cookie);
                unexp.erase(it);
            } else {
                ASSERT_EQ(UCS_ERR_NO_ELEM, st);
            }
        } else if (kind < 93 && !all_msg_handles.empty()) { /* take */
            MsgHandle h = all_msg_handles[rng() % all_msg_handles.size()];
            auto it = std::find_if(unexp.begin(), unexp.end(), [&](const RefMsg &r) { return r.handle == h; });
            ucs_status_t st = m.take(h, &msg);
            if (it != unexp.end()) {
                ASSERT_EQ(UCS_OK, st);
                ASSERT_EQ(it->cookie, msg.cookie);
                unexp.erase(it);
            } else {
                ASSERT_EQ(UCS_ERR_NO_ELEM, st);
            }
        } else if (kind < 97) { /* cancel_matching */
            std::vector<void *> want, got;
            std::vector<RefRecv> keep;
            for (const RefRecv &r : posted) {
                if ((r.tag & mask) == (tag & mask)) want.push_back(r.c);
                else keep.push_back(r);
            }
            size_t n = m.cancel_matching(tag, mask, [&](void *c) { got.push_back(c); });
            ASSERT_EQ(want.size(), n);
            ASSERT_EQ(want, got);
            posted.swap(keep);
        } else if (kind < 98) { /* drain */
            Drained d = drain_all(m);
            std::vector<void *> want_r;
            for (const RefRecv &r : posted) want_r.push_back(r.c);
            std::vector<uint64_t> want_m;
            for (const RefMsg &r : unexp) want_m.push_back(r.cookie);
            ASSERT_EQ(want_r, d.recvs);
            ASSERT_EQ(want_m, cookies_of(d.msgs));
            posted.clear();
            unexp.clear();
        }
        ASSERT_EQ(posted.size(), m.posted_count());
        ASSERT_EQ(unexp.size(), m.unexpected_count());
        /* keep the model cheap: forget long-gone handles now and then */
        if (all_recv_handles.size() > 4000) all_recv_handles.erase(all_recv_handles.begin(), all_recv_handles.begin() + 2000);
        if (all_msg_handles.size() > 4000) all_msg_handles.erase(all_msg_handles.begin(), all_msg_handles.begin() + 2000);
    }
    Drained d = drain_all(m);
    std::vector<void *> want_r;
    for (const RefRecv &r : posted) want_r.push_back(r.c);
    std::vector<uint64_t> want_m;
    for (const RefMsg &r : unexp) want_m.push_back(r.cookie);
    EXPECT_EQ(want_r, d.recvs);
    EXPECT_EQ(want_m, cookies_of(d.msgs));
}

INSTANTIATE_TEST_SUITE_P(
        Configs, TagMatcherModel,
        ::testing::Values(ModelCase{1, 64, 4, 32}, ModelCase{2, 64, 4, 32}, ModelCase{3, 2, 1, 4},
                          ModelCase{4, 1, 0, 0}, ModelCase{5, 4, 4, 0}, ModelCase{6, 3, 2, 8},
                          ModelCase{7, 1024, 4, 1}, ModelCase{8, 0, 3, 2},
                          ModelCase{9, 64, 4, 32, 0}, ModelCase{10, 2, 1, 4, 0}),
        [](const ::testing::TestParamInfo<ModelCase> &info) {
            const ModelCase &c = info.param;
            return "seed" + std::to_string(c.seed) + "_classes" + std::to_string(c.max_mask_classes) +
                   "_uidx" + std::to_string(c.max_unexpected_indexes) + "_thr" +
                   std::to_string(c.unexpected_index_threshold) +
                   (c.staging_min_index_bytes == 0 ? "_staged" : "");
        });

/* ========================================================================== */
/* Deep queues with many distinct keys (hash tables grow, shrink, collide)    */
/* ========================================================================== */

TEST(TagMatcherDeep, ManyDistinctTagsAgreeWithPerKeyFifoModel) {
    /* Exact receives/probes plus one mask class M; everything else the model
     * would have to scan is avoided so that the model stays O(1) per step. */
    const Tag M = ~Tag{0xFFFF};
    std::mt19937_64 rng(2024);
    std::vector<Tag> pool;
    for (Tag i = 0; i < 3000; ++i) pool.push_back(i);             /* one M key, dense low bits */
    for (int i = 0; i < 3000; ++i) pool.push_back(rng());         /* spread everywhere */
    for (Tag i = 0; i < 1000; ++i) pool.push_back((i << 16) | 7); /* many M keys, same low bits */

    struct PR {
        uint64_t   seq;
        void      *c;
        RecvHandle h;
        Tag        tag;
        bool       masked;
    };
    struct UM {
        uint64_t  seq;
        uint64_t  cookie;
        MsgHandle h;
        Tag       tag;
    };
    std::unordered_map<Tag, std::deque<PR>> p_exact, p_masked;
    std::unordered_map<Tag, std::deque<UM>> u_exact, u_masked;
    std::map<uint64_t, UM>                  u_order;
    std::vector<PR>                         all_posted;
    std::unordered_set<uint64_t>            p_alive;
    size_t   p_live = 0;
    uint64_t seq = 0, cookie = 0;

    auto erase_seq = [](auto &dq, uint64_t sq) {
        auto it = std::find_if(dq.begin(), dq.end(), [&](const auto &x) { return x.seq == sq; });
        ASSERT_TRUE(it != dq.end());
        dq.erase(it);
    };
    auto remove_posted = [&](const PR &r) {
        erase_seq(r.masked ? p_masked[r.tag & M] : p_exact[r.tag], r.seq);
        p_alive.erase(r.seq);
        --p_live;
    };
    auto remove_unexp = [&](const UM &u) {
        erase_seq(u_exact[u.tag], u.seq);
        erase_seq(u_masked[u.tag & M], u.seq);
        u_order.erase(u.seq);
    };
    /* earliest-arrived for an exact / M / wildcard probe, or nullptr */
    auto find_unexp = [&](Tag t, int kind) -> const UM * {
        if (kind == 2) return u_order.empty() ? nullptr : &u_order.begin()->second;
        auto &dq = (kind == 0) ? u_exact[t] : u_masked[t & M];
        return dq.empty() ? nullptr : &dq.front();
    };

    TagMatcher m;
    for (int step = 0; step < 150000; ++step) {
        const Tag t  = pool[rng() % pool.size()];
        const int op = static_cast<int>(rng() % 100);
        const int pk = static_cast<int>(rng() % 10) < 6 ? 0 : 1; /* exact or M */
        Message msg;
        if (op < 40) { /* post (exact or M) */
            const UM *u = find_unexp(t, pk);
            void *c = ctx(step);
            PostResult p = m.post(pk ? (t & M) : t, pk ? M : kExactMask, c);
            ASSERT_EQ(UCS_OK, p.status);
            if (u != nullptr) {
                ASSERT_TRUE(p.matched) << step;
                ASSERT_EQ(u->cookie, p.message.cookie) << step;
                UM copy = *u;
                remove_unexp(copy);
            } else {
                ASSERT_FALSE(p.matched) << step;
                PR r{seq++, c, p.handle, t, pk == 1};
                (pk ? p_masked[t & M] : p_exact[t]).push_back(r);
                all_posted.push_back(r);
                p_alive.insert(r.seq);
                ++p_live;
            }
        } else if (op < 75) { /* arrive */
            auto &de = p_exact[t];
            auto &dm = p_masked[t & M];
            const PR *best = nullptr;
            if (!de.empty()) best = &de.front();
            if (!dm.empty() && (best == nullptr || dm.front().seq < best->seq)) best = &dm.front();
            ArriveResult a = m.arrive(t, cookie);
            ASSERT_EQ(UCS_OK, a.status);
            if (best != nullptr) {
                ASSERT_TRUE(a.matched) << step;
                ASSERT_EQ(best->c, a.recv.ctx) << step;
                PR copy = *best;
                remove_posted(copy);
            } else {
                ASSERT_FALSE(a.matched) << step;
                UM u{seq++, cookie, a.handle, t};
                u_exact[t].push_back(u);
                u_masked[t & M].push_back(u);
                u_order.emplace(u.seq, u);
            }
            ++cookie;
        } else if (op < 85 && !all_posted.empty()) { /* cancel a random receive */
            const PR r = all_posted[rng() % all_posted.size()];
            void *c = nullptr;
            ucs_status_t st = m.cancel(r.h, &c);
            if (p_alive.count(r.seq)) {
                ASSERT_EQ(UCS_OK, st) << step;
                ASSERT_EQ(r.c, c);
                remove_posted(r);
            } else {
                ASSERT_EQ(UCS_ERR_NO_ELEM, st) << step;
            }
        } else { /* claim: exact, M or wildcard */
            const int kind = (op < 93) ? pk : 2;
            const UM *u = find_unexp(t, kind);
            ucs_status_t st = (kind == 0) ? m.claim(t, kExactMask, &msg)
                              : (kind == 1) ? m.claim(t | 0xFFFF, M, &msg)
                                            : m.claim(t, 0, &msg);
            if (u != nullptr) {
                ASSERT_EQ(UCS_OK, st) << step;
                ASSERT_EQ(u->cookie, msg.cookie) << step;
                UM copy = *u;
                remove_unexp(copy);
            } else {
                ASSERT_EQ(UCS_ERR_NO_ELEM, st) << step;
            }
        }
        ASSERT_EQ(p_live, m.posted_count()) << step;
        ASSERT_EQ(u_order.size(), m.unexpected_count()) << step;
        if (all_posted.size() > 20000) all_posted.erase(all_posted.begin(), all_posted.begin() + 10000);
    }
    EXPECT_GT(m.posted_count() + m.unexpected_count(), 100u); /* the queues did get deep */
    Drained d = drain_all(m);
    std::vector<uint64_t> want;
    for (const auto &kv : u_order) want.push_back(kv.second.cookie);
    EXPECT_EQ(want, cookies_of(d.msgs));
    EXPECT_EQ(p_live, d.recvs.size());
}

/* ========================================================================== */
/* Options in their documented ranges                                         */
/* ========================================================================== */

TEST(TagMatcherOptions, DocumentedRangeLimitsAreKept) {
    MatcherOptions hi;
    hi.max_mask_classes       = 1024; /* documented range 0..1024 */
    hi.max_unexpected_indexes = 4;    /* documented range 0..4 */
    TagMatcher m(hi);
    EXPECT_EQ(1024u, m.options().max_mask_classes);
    EXPECT_EQ(4u, m.options().max_unexpected_indexes);

    MatcherOptions lo;
    lo.max_mask_classes       = 0;
    lo.max_unexpected_indexes = 0;
    TagMatcher n(lo);
    EXPECT_EQ(0u, n.options().max_mask_classes);
    EXPECT_EQ(0u, n.options().max_unexpected_indexes);
}

TEST(TagMatcherOptions, ZeroMaskClassesStillKeepsPostingOrder) {
    /* max_mask_classes = 0: every non-exact mask shares the linear list. */
    MatcherOptions o;
    o.max_mask_classes = 0;
    TagMatcher m(o);
    const std::vector<Tag> masks = distinct_masks(6);
    for (size_t i = 0; i < masks.size(); ++i) {
        post_queued(m, kT & masks[i], masks[i], ctx(2 * i));
        post_queued(m, kT, kExactMask, ctx(2 * i + 1));
    }
    post_queued(m, 0, 0, ctx(100));
    EXPECT_EQ(0u, m.stats().mask_classes_in_use);
    for (size_t k = 0; k < 2 * masks.size(); ++k) {
        ArriveResult a = m.arrive(kT, k);
        ASSERT_TRUE(a.matched);
        EXPECT_EQ(ctx(k), a.recv.ctx);
    }
    ArriveResult a = m.arrive(0x5, 0);
    ASSERT_TRUE(a.matched);
    EXPECT_EQ(ctx(100), a.recv.ctx);
    EXPECT_GT(m.stats().fallback_scans, 0u);
}

TEST(TagMatcherOptions, FourUnexpectedIndexesServeFourMasks) {
    /* max_unexpected_indexes = 4 (documented maximum): four masks searched
     * over and over on a deep queue all end up indexed, so they stop walking
     * the arrival list. */
    MatcherOptions o;
    o.max_unexpected_indexes     = 4;
    o.unexpected_index_threshold = 16;
    TagMatcher m(o);
    for (uint64_t i = 0; i < 512; ++i) arrive_unexpected(m, i, i);
    std::vector<Tag> masks;
    for (int b = 0; b < 4; ++b) masks.push_back((Tag{1} << b) | 0x100);
    Message msg;
    for (int round = 0; round < 20; ++round) {
        for (Tag mk : masks) ASSERT_EQ(UCS_OK, m.peek(0, mk, &msg));
    }
    const uint64_t scans = m.stats().fallback_scans;
    for (Tag mk : masks) {
        ASSERT_EQ(UCS_OK, m.peek(0, mk, &msg));
        EXPECT_EQ(0u, msg.cookie);
    }
    EXPECT_EQ(scans, m.stats().fallback_scans) << "some of the 4 masks still scan the arrival list";
    EXPECT_GE(m.stats().unexpected_index_builds, 4u); /* one per mask at least */
}

}  // namespace

/* Long FIFO rotations at a fixed depth: the key index fills groups, leaves
 * tombstones and must clean them up in place; every arrival must still take
 * exactly the oldest receive, with sequential (runs of 8 share a group) and
 * with random tags. */
TEST(TagMatcherDeepRotation, FifoStaysExactThroughTableCleanups) {
    for (bool sequential : {true, false}) {
        for (size_t depth : {size_t{7}, size_t{100}, size_t{1000}, size_t{5000}}) {
            TagMatcher m;
            auto tag_of = [&](uint64_t i) {
                return sequential ? (uint64_t{0x15} << 40) | i : (i * 0x9e3779b97f4a7c15ull) ^ (i >> 7);
            };
            for (uint64_t i = 0; i < depth; ++i) post_queued(m, tag_of(i), kExactMask, ctx(i));
            /* The first cleanup after the initial fill may double the index
             * once; after that the footprint must stay put. */
            size_t mem_steady = 0;
            for (uint64_t head = 0; head < 200000; ++head) {
                if (head == 50000) mem_steady = m.memory_bytes();
                ArriveResult a = m.arrive(tag_of(head), head);
                ASSERT_TRUE(a.matched) << "depth " << depth << " step " << head;
                ASSERT_EQ(ctx(head), a.recv.ctx) << "depth " << depth << " step " << head;
                PostResult p = m.post(tag_of(head + depth), kExactMask, ctx(head + depth));
                ASSERT_EQ(UCS_OK, p.status);
                ASSERT_FALSE(p.matched);
            }
            EXPECT_EQ(depth, m.posted_count());
            EXPECT_EQ(mem_steady, m.memory_bytes()) << "depth " << depth << " grew while cycling";
        }
    }
}

/* ========================================================================== */
/* Batches of arrivals                                                        */
/* ========================================================================== */

namespace {

/* Field-by-field equality of two arrival outcomes. */
void expect_same_arrival(const ArriveResult &want, const ArriveResult &got, size_t i) {
    EXPECT_EQ(want.status, got.status) << "message " << i;
    EXPECT_EQ(want.matched, got.matched) << "message " << i;
    if (want.status == UCS_OK && want.matched) {
        EXPECT_EQ(want.recv.ctx, got.recv.ctx) << "message " << i;
        EXPECT_EQ(want.recv.tag, got.recv.tag) << "message " << i;
        EXPECT_EQ(want.recv.mask, got.recv.mask) << "message " << i;
    } else if (want.status == UCS_OK) {
        EXPECT_EQ(want.handle, got.handle) << "message " << i;
    }
}

struct BatchCase {
    uint32_t seed;
    size_t   max_unexpected;
    int      masked_percent; /* receives posted with a partial mask */
    size_t   depth;          /* receives posted before the bursts */
    size_t   staging_min_index_bytes = MatcherOptions().staging_min_index_bytes;
};

class TagMatcherBatch : public ::testing::TestWithParam<BatchCase> {};

}  // namespace

/* arrive_batch / match_posted_batch are n calls of arrive / match_posted in
 * order: a matcher fed bursts ends every step in the same state as a twin fed
 * the same messages one by one (same results, same handles, same counts). */
TEST_P(TagMatcherBatch, BurstsEqualOneByOneArrivals) {
    const BatchCase bc = GetParam();
    std::mt19937_64 rng(bc.seed);
    MatcherOptions o;
    o.max_unexpected          = bc.max_unexpected;
    o.staging_min_index_bytes = bc.staging_min_index_bytes;
    TagMatcher one(o), burst(o);
    const Tag masks[] = {0xffffffff00000000ull, 0x00000000ffffffffull, 0};
    std::vector<Tag> live; /* tags posted so far (arrivals pick from them) */
    size_t next_ctx = 0;
    uint64_t cookie = 0;
    auto post_both = [&](size_t count) {
        for (size_t i = 0; i < count; ++i) {
            const bool masked = static_cast<int>(rng() % 100) < bc.masked_percent;
            const Tag  mask   = masked ? masks[rng() % 3] : kExactMask;
            const Tag  tag    = (rng() % 4 == 0 && !live.empty()) ? live[rng() % live.size()] : rng() % 50000;
            void      *c      = ctx(next_ctx++);
            PostResult a = one.post_expected_only(tag, mask, c);
            PostResult b = burst.post_expected_only(tag, mask, c);
            ASSERT_EQ(a.status, b.status);
            ASSERT_EQ(a.handle, b.handle);
            live.push_back(tag);
        }
    };
    post_both(bc.depth);
    ASSERT_FALSE(HasFatalFailure());
    for (int round = 0; round < 400; ++round) {
        const size_t n = rng() % 41; /* 0 .. 40: across the internal window of 16 */
        std::vector<Tag>      tags(n);
        std::vector<uint64_t> cookies(n);
        for (size_t i = 0; i < n; ++i) {
            /* mostly tags of posted receives (repeats within a burst are
             * common), some that match nothing */
            tags[i]    = (rng() % 5 != 0 && !live.empty()) ? live[rng() % live.size()] : 100000 + rng() % 1000;
            cookies[i] = cookie++;
        }
        const bool match_only = (round % 3) == 0;
        std::vector<ArriveResult> got(n + 1);
        got[n].status = UCS_ERR_BUSY; /* canary: nothing past n is written */
        if (match_only) {
            burst.match_posted_batch(tags.data(), n, got.data());
        } else {
            burst.arrive_batch(tags.data(), cookies.data(), n, got.data());
        }
        EXPECT_EQ(UCS_ERR_BUSY, got[n].status);
        for (size_t i = 0; i < n; ++i) {
            const ArriveResult want = match_only ? one.match_posted(tags[i]) : one.arrive(tags[i], cookies[i]);
            expect_same_arrival(want, got[i], i);
        }
        ASSERT_EQ(one.posted_count(), burst.posted_count()) << "round " << round;
        ASSERT_EQ(one.unexpected_count(), burst.unexpected_count()) << "round " << round;
        ASSERT_EQ(one.stats().posted_matches, burst.stats().posted_matches);
        if (HasFatalFailure()) return;
        post_both(rng() % 30);
        if (one.unexpected_count() > 200) {
            Drained a = drain_all(one), b = drain_all(burst);
            ASSERT_EQ(a.recvs, b.recvs);
            ASSERT_EQ(cookies_of(a.msgs), cookies_of(b.msgs));
            live.clear();
        }
    }
    Drained a = drain_all(one), b = drain_all(burst);
    EXPECT_EQ(a.recvs, b.recvs);
    EXPECT_EQ(cookies_of(a.msgs), cookies_of(b.msgs));
}

INSTANTIATE_TEST_SUITE_P(Configs, TagMatcherBatch,
                         ::testing::Values(BatchCase{1, SIZE_MAX, 0, 0}, BatchCase{2, SIZE_MAX, 0, 5000},
                                           BatchCase{3, SIZE_MAX, 30, 100}, BatchCase{4, 5, 0, 50},
                                           BatchCase{5, 7, 20, 3000}, BatchCase{6, SIZE_MAX, 100, 200},
                                           BatchCase{7, SIZE_MAX, 0, 300, 0}, BatchCase{8, 9, 10, 40, 0}),
                         [](const ::testing::TestParamInfo<BatchCase> &info) {
                             const BatchCase &c = info.param;
                             return "seed" + std::to_string(c.seed) + "_masked" +
                                    std::to_string(c.masked_percent) + "_depth" + std::to_string(c.depth) +
                                    (c.max_unexpected == SIZE_MAX ? std::string() : "_maxu" + std::to_string(c.max_unexpected)) +
                                    (c.staging_min_index_bytes == 0 ? "_staged" : "");
                         });

TEST(TagMatcherBatchContract, RepeatedTagInOneBurstTakesReceivesOldestFirst) {
    TagMatcher m;
    for (int i = 0; i < 3; ++i) post_queued(m, kT, kExactMask, ctx(i));
    const Tag      tags[4]    = {kT, kT, kT, kT};
    const uint64_t cookies[4] = {10, 11, 12, 13};
    ArriveResult   out[4];
    m.arrive_batch(tags, cookies, 4, out);
    for (int i = 0; i < 3; ++i) {
        ASSERT_TRUE(out[i].matched) << i;
        EXPECT_EQ(ctx(i), out[i].recv.ctx) << i;
    }
    ASSERT_EQ(UCS_OK, out[3].status);
    EXPECT_FALSE(out[3].matched); /* queued as unexpected, in arrival order */
    EXPECT_EQ(0u, m.posted_count());
    EXPECT_EQ(1u, m.unexpected_count());
    PostResult p = m.post(kT, kExactMask, ctx(9));
    ASSERT_TRUE(p.matched);
    EXPECT_EQ(13u, p.message.cookie);
    EXPECT_EQ(out[3].handle, p.message.handle);
}

TEST(TagMatcherBatchContract, MaskedReceivesMergeByPostingOrderWithinABurst) {
    TagMatcher m;
    const Tag hi = 0xffffffff00000000ull;
    post_queued(m, 0x500000001ull, hi, ctx(0));          /* any tag 0x5_xxxxxxxx */
    post_queued(m, 0x500000002ull, kExactMask, ctx(1));  /* exact */
    post_queued(m, 0x500000002ull, kExactMask, ctx(2));
    post_queued(m, 0, 0, ctx(3));                        /* wildcard */
    const Tag    tags[5] = {0x500000002ull, 0x500000002ull, 0x500000002ull, 0x700000000ull, 0x500000002ull};
    ArriveResult out[5];
    m.match_posted_batch(tags, 5, out);
    const int want[5] = {0, 1, 2, 3, -1};
    for (int i = 0; i < 5; ++i) {
        if (want[i] < 0) {
            EXPECT_FALSE(out[i].matched) << i;
        } else {
            ASSERT_TRUE(out[i].matched) << i;
            EXPECT_EQ(ctx(want[i]), out[i].recv.ctx) << i;
        }
    }
    EXPECT_EQ(hi, out[0].recv.mask);
    EXPECT_EQ(kExactMask, out[1].recv.mask);
    EXPECT_EQ(Tag{0}, out[3].recv.mask);
    EXPECT_EQ(0u, m.posted_count());
    EXPECT_EQ(0u, m.unexpected_count()); /* match_posted never queues */
}

TEST(TagMatcherBatchContract, LimitsApplyPerMessage) {
    MatcherOptions o;
    o.max_unexpected = 2;
    TagMatcher m(o);
    post_queued(m, 7, kExactMask, ctx(0));
    const Tag      tags[5]    = {1, 2, 3, 7, 4};
    const uint64_t cookies[5] = {0, 1, 2, 3, 4};
    ArriveResult   out[5];
    m.arrive_batch(tags, cookies, 5, out);
    EXPECT_EQ(UCS_OK, out[0].status);
    EXPECT_EQ(UCS_OK, out[1].status);
    EXPECT_EQ(UCS_ERR_EXCEEDS_LIMIT, out[2].status); /* nothing changed for it */
    EXPECT_EQ(UCS_OK, out[3].status);                /* a match is never refused */
    EXPECT_TRUE(out[3].matched);
    EXPECT_EQ(UCS_ERR_EXCEEDS_LIMIT, out[4].status);
    EXPECT_EQ(2u, m.unexpected_count());
    EXPECT_EQ((std::vector<uint64_t>{0, 1}), cookies_of(drain_all(m).msgs));
}

TEST(TagMatcherBatchContract, EmptyBurstDoesNothing) {
    TagMatcher m;
    post_queued(m, 1, kExactMask, ctx(0));
    ArriveResult out[1];
    out[0].status = UCS_ERR_BUSY;
    m.arrive_batch(nullptr, nullptr, 0, out);
    m.match_posted_batch(nullptr, 0, out);
    EXPECT_EQ(UCS_ERR_BUSY, out[0].status);
    EXPECT_EQ(1u, m.posted_count());
}

/* ========================================================================== */
/* Memory per posted receive                                                  */
/* ========================================================================== */

/* The foundation target: <= 64 bytes per posted receive. Below ~1 Ki receives
 * the fixed part (an empty matcher, the first pool and table allocations)
 * dominates, so the bound is checked from 1 Ki up, at many depths that are
 * not powers of two (pool and index grow in steps). */
TEST(TagMatcherMemory, AtMost64BytesPerPostedReceiveFrom1KiUp) {
    TagMatcher m;
    double     worst = 0;
    size_t     worst_at = 0;
    for (uint64_t i = 0; i < (uint64_t{1} << 20) + 4096; ++i) {
        post_queued(m, i * 0x9e3779b97f4a7c15ull, kExactMask, ctx(i));
        const size_t n = i + 1;
        if (n >= 1024 && (n % 97 == 0 || (n & (n - 1)) == 0)) {
            const double b = static_cast<double>(m.memory_bytes()) / static_cast<double>(n);
            if (b > worst) {
                worst    = b;
                worst_at = n;
            }
        }
        if (HasFailure()) return;
    }
    printf("[memory] worst %.1f bytes per posted receive (at depth %zu)\n", worst, worst_at);
    EXPECT_LE(worst, 64.0) << "at depth " << worst_at;
}

/* ========================================================================== */
/* Index internals: overflow counts                                           */
/* ========================================================================== */

/* Hundreds of keys with one home group: its overflow count saturates, keys
 * spill along their probe sequences, and every lookup (present or absent)
 * stays right while they are inserted and erased in any order. */
TEST(BucketTableOverflow, KeysSharingOneHomeGroupStayFindable) {
    using uct_tm::match::detail::BucketTable;
    std::vector<Tag> keys_of_index; /* head index -> key */
    auto key_of = [&](uint32_t i) { return keys_of_index[i]; };
    BucketTable t;
    while (t.memory_bytes() < 1024 * 64) {
        ASSERT_TRUE(t.grow(key_of)); /* 1024 groups, empty */
    }
    std::mt19937_64 rng(5);
    const BucketTable::Hash h0 = t.hash(rng());
    std::vector<Tag> same_home;
    while (same_home.size() < 400) {
        const Tag k = rng();
        if (t.hash(k).home == h0.home) same_home.push_back(k);
    }
    std::vector<Tag> inserted;
    for (Tag k : same_home) {
        ASSERT_TRUE(t.has_room());
        keys_of_index.push_back(k);
        BucketTable::Ref ref = t.find_fast(k, t.hash(k), key_of);
        ASSERT_EQ(nullptr, ref);
        const BucketTable::Found f =
                t.find_or_insert_fast(k, t.hash(k), key_of, static_cast<uint32_t>(keys_of_index.size() - 1));
        ASSERT_TRUE(f.inserted);
        inserted.push_back(k);
    }
    EXPECT_EQ(400u, t.size());
    std::shuffle(inserted.begin(), inserted.end(), rng);
    for (size_t n = 0; n < inserted.size(); ++n) {
        const Tag k = inserted[n];
        BucketTable::Ref ref = t.find_fast(k, t.hash(k), key_of);
        ASSERT_NE(nullptr, ref) << n;
        ASSERT_EQ(k, key_of(*ref));
        t.erase(ref, t.hash(k));
        ASSERT_EQ(nullptr, t.find_fast(k, t.hash(k), key_of)) << n;
        for (size_t j = n + 1; j < inserted.size(); j += 37) {
            ASSERT_NE(nullptr, t.find_fast(inserted[j], t.hash(inserted[j]), key_of)) << n << " " << j;
        }
    }
    EXPECT_EQ(0u, t.size());
}

/* ========================================================================== */
/* Staged index inserts (MatcherOptions::staging_min_index_bytes)             */
/* ========================================================================== */

namespace {
MatcherOptions staged_options() {
    MatcherOptions o;
    o.staging_min_index_bytes = 0; /* stage from the first post */
    return o;
}
}  // namespace

TEST(TagMatcherStaging, StagedReceivesKeepPostingOrderAgainstIndexedOnes) {
    TagMatcher m(staged_options());
    /* more than the stage holds: the oldest get indexed, the newest stay staged */
    for (int i = 0; i < 40; ++i) post_queued(m, kT, kExactMask, ctx(i));
    for (int i = 0; i < 40; ++i) {
        ArriveResult a = m.arrive(kT, i);
        ASSERT_TRUE(a.matched) << i;
        EXPECT_EQ(ctx(i), a.recv.ctx) << i;
    }
    EXPECT_FALSE(m.match_posted(kT).matched);
}

/* Posts alternate between tags whose index lines are far apart (staged) and
 * a tag posted right after itself (same line: not staged, which first
 * inserts everything staged): posting order still decides. */
TEST(TagMatcherStaging, UnstagedPostAfterStagedOnesKeepsOrder) {
    TagMatcher m(staged_options());
    std::mt19937_64 rng(3);
    std::vector<Tag> order;
    for (int i = 0; i < 300; ++i) {
        const Tag t = (i % 3 == 2) ? order.back() : rng() % 7; /* repeats: same line as the previous post */
        post_queued(m, t, kExactMask, ctx(i));
        order.push_back(t);
    }
    std::vector<bool> taken(order.size(), false);
    for (int i = 0; i < 300; ++i) {
        ArriveResult a = m.match_posted(order[i]);
        ASSERT_TRUE(a.matched) << i;
        /* the oldest receive with that tag: the first not yet taken */
        size_t want = 0;
        while (taken[want] || order[want] != order[i]) ++want;
        taken[want] = true;
        EXPECT_EQ(ctx(want), a.recv.ctx) << i;
    }
    EXPECT_EQ(0u, m.posted_count());
}

TEST(TagMatcherStaging, NewestStagedReceiveMatchesAndCancelSeesIt) {
    TagMatcher m(staged_options());
    for (int i = 0; i < 100; ++i) post_queued(m, 1000 + i * 7919, kExactMask, ctx(i));
    RecvHandle   h = post_queued(m, 7, kExactMask, ctx(100));
    ArriveResult a = m.match_posted(7); /* the receive posted just before */
    ASSERT_TRUE(a.matched);
    EXPECT_EQ(ctx(100), a.recv.ctx);
    EXPECT_EQ(UCS_ERR_NO_ELEM, m.cancel(h)); /* it left by the match */
    RecvHandle h2 = post_queued(m, 8, kExactMask, ctx(101));
    void      *c  = nullptr;
    EXPECT_EQ(UCS_OK, m.cancel(h2, &c)); /* a staged receive can be cancelled */
    EXPECT_EQ(ctx(101), c);
    EXPECT_FALSE(m.match_posted(8).matched);
    EXPECT_EQ(100u, m.posted_count());
}

TEST(TagMatcherStaging, MaskedReceivesAndDrainSeeStagedOnes) {
    TagMatcher m(staged_options());
    post_queued(m, 0x42, kExactMask, ctx(0)); /* staged */
    post_queued(m, 0x40, 0xF0, ctx(1));       /* masked: everything staged is indexed first */
    post_queued(m, 0x42, kExactMask, ctx(2));
    post_queued(m, 0x43, kExactMask, ctx(3));
    ArriveResult a = m.arrive(0x42, 0);
    ASSERT_TRUE(a.matched);
    EXPECT_EQ(ctx(0), a.recv.ctx);
    a = m.arrive(0x42, 1);
    ASSERT_TRUE(a.matched);
    EXPECT_EQ(ctx(1), a.recv.ctx); /* the masked one was posted before ctx(2) */
    Drained d = drain_all(m);
    EXPECT_EQ((std::vector<void *>{ctx(2), ctx(3)}), d.recvs);
}

/* A deep FIFO rotation with the default threshold (the index outgrows
 * 512 KiB, so posts are staged), with cancels of just-posted receives,
 * arrivals of the newest and of absent tags mixed in. */
TEST(TagMatcherStaging, DeepRotationWithDefaultThresholdStaysExact) {
    TagMatcher     m;
    const uint64_t depth  = 40000;
    auto           tag_of = [](uint64_t i) { return (i * 0x9e3779b97f4a7c15ull) ^ (i >> 5); };
    std::deque<std::pair<uint64_t, RecvHandle>> live; /* posting order */
    uint64_t next = 0;
    for (; next < depth; ++next) live.emplace_back(next, post_queued(m, tag_of(next), kExactMask, ctx(next)));
    std::mt19937_64 rng(11);
    for (int step = 0; step < 200000; ++step) {
        const unsigned kind = rng() % 100;
        if (kind < 80) { /* oldest leaves, a new one arrives at the tail */
            ArriveResult a = m.arrive(tag_of(live.front().first), step);
            ASSERT_TRUE(a.matched) << step;
            ASSERT_EQ(ctx(live.front().first), a.recv.ctx) << step;
            live.pop_front();
        } else if (kind < 88) { /* the newest leaves by a match */
            ArriveResult a = m.match_posted(tag_of(live.back().first));
            ASSERT_TRUE(a.matched) << step;
            ASSERT_EQ(ctx(live.back().first), a.recv.ctx) << step;
            live.pop_back();
        } else if (kind < 96) { /* one of the newest leaves by cancel */
            const size_t k = live.size() - 1 - rng() % std::min<size_t>(live.size(), 20);
            void        *c = nullptr;
            ASSERT_EQ(UCS_OK, m.cancel(live[k].second, &c)) << step;
            ASSERT_EQ(ctx(live[k].first), c);
            ASSERT_EQ(UCS_ERR_NO_ELEM, m.cancel(live[k].second));
            live.erase(live.begin() + static_cast<long>(k));
        } else { /* nothing posted has this tag */
            ASSERT_FALSE(m.match_posted(tag_of(next + 1000000)).matched) << step;
        }
        while (live.size() < depth) {
            live.emplace_back(next, post_queued(m, tag_of(next), kExactMask, ctx(next)));
            ++next;
        }
        if (HasFatalFailure()) return;
    }
    ASSERT_EQ(live.size(), m.posted_count());
    Drained d = drain_all(m);
    ASSERT_EQ(live.size(), d.recvs.size());
    for (size_t i = 0; i < live.size(); ++i) ASSERT_EQ(ctx(live[i].first), d.recvs[i]) << i;
}
