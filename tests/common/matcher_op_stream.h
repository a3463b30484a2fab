/*
 * Differential op-stream interpreter: TagMatcher vs. ReferenceMatcher.
 *
 * Decodes a byte stream (libFuzzer input) or a seeded PRNG into matcher
 * operations, applies every operation to both the real uct_tm::match::TagMatcher
 * and the linear reference model, and compares the outcomes step by step:
 * statuses, matched flags, the ctx / cookie / tag that came back, handles
 * (real handles are mapped to model entry ids; live and stale handles are kept
 * so that double cancel / stale take are exercised) and both queue counts.
 *
 * No test-framework dependency: divergences are reported in Result (first
 * mismatch only, with the op index and, when tracing, the last calls made).
 *
 * Usage:
 *   MatcherOpStream s;
 *   MatcherOpStream::Result r = s.run_random(seed, 1000000);
 *   if (!r.ok) puts(r.divergence.c_str());
 *
 *   MatcherOpStream s;                      // libFuzzer
 *   if (!s.run_bytes(data, size).ok) abort();
 */
#ifndef UCT_TM_TESTS_COMMON_MATCHER_OP_STREAM_H_
#define UCT_TM_TESTS_COMMON_MATCHER_OP_STREAM_H_

#include "reference_matcher.h"

#include <match/tag_matcher.h>

#include <ucs/type/status.h>

#include <algorithm>
#include <chrono>
#include <cinttypes>
#include <cstdarg>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <deque>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

namespace uct_tm {
namespace match_test {

inline const char *status_name(ucs_status_t s) {
    switch (s) {
    case UCS_OK:
        return "UCS_OK";
    case UCS_ERR_NO_ELEM:
        return "UCS_ERR_NO_ELEM";
    case UCS_ERR_INVALID_PARAM:
        return "UCS_ERR_INVALID_PARAM";
    case UCS_ERR_EXCEEDS_LIMIT:
        return "UCS_ERR_EXCEEDS_LIMIT";
    case UCS_ERR_NO_MEMORY:
        return "UCS_ERR_NO_MEMORY";
    default:
        return "UCS_ERR_<other>";
    }
}

inline std::string strprintf(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
inline std::string strprintf(const char *fmt, ...) {
    char    buf[512];
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(buf, sizeof(buf), fmt, ap);
    va_end(ap);
    if (n < 0) {
        return std::string();
    }
    if (static_cast<size_t>(n) < sizeof(buf)) {
        return std::string(buf, static_cast<size_t>(n));
    }
    std::string s(static_cast<size_t>(n) + 1, '\0');
    va_start(ap, fmt);
    vsnprintf(&s[0], s.size(), fmt, ap);
    va_end(ap);
    s.resize(static_cast<size_t>(n));
    return s;
}

/* Source of decisions: fuzz bytes (zeros past the end) or a splitmix64 PRNG. */
class OpSource {
  public:
    static OpSource from_seed(uint64_t seed) {
        OpSource s;
        s.state_ = seed;
        return s;
    }

    static OpSource from_bytes(const uint8_t *data, size_t size) {
        OpSource s;
        s.data_ = data;
        s.size_ = size;
        return s;
    }

    bool is_random() const { return data_ == nullptr; }
    bool at_end() const { return !is_random() && pos_ >= size_; }

    uint8_t u8() {
        if (is_random()) {
            return static_cast<uint8_t>(next() >> 56);
        }
        return (pos_ < size_) ? data_[pos_++] : 0;
    }

    uint16_t u16() {
        if (is_random()) {
            return static_cast<uint16_t>(next() >> 48);
        }
        uint16_t lo = u8();
        return static_cast<uint16_t>(lo | (uint16_t(u8()) << 8));
    }

    uint32_t u32() {
        if (is_random()) {
            return static_cast<uint32_t>(next() >> 32);
        }
        uint32_t lo = u16();
        return lo | (uint32_t(u16()) << 16);
    }

    uint64_t u64() {
        if (is_random()) {
            return next();
        }
        uint64_t lo = u32();
        return lo | (uint64_t(u32()) << 32);
    }

    /* Uniform-ish in [0, n), n >= 1. Bytes: one byte when n <= 256. */
    uint32_t below(uint32_t n) {
        if (n <= 1) {
            return 0;
        }
        if (is_random()) {
            return static_cast<uint32_t>(((next() >> 32) * uint64_t(n)) >> 32);
        }
        return (n <= 256) ? u8() % n : u16() % n;
    }

  private:
    uint64_t next() {
        uint64_t z = (state_ += 0x9e3779b97f4a7c15ull);
        z          = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
        z          = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
        return z ^ (z >> 31);
    }

    const uint8_t *data_  = nullptr;
    size_t         size_  = 0;
    size_t         pos_   = 0;
    uint64_t       state_ = 0;
};

enum class OpKind : uint8_t {
    kPost,
    kPostExpectedOnly,
    kArrive,
    kMatchPosted,
    kCancel,
    kPeek,
    kClaim,
    kTake,
    kCancelMatching,
    kDrain,
    kRecreate,
    kMoveRoundTrip,
    kArriveBatch,     /* arrive_batch(): a burst of arrivals */
    kMatchPostedBatch, /* match_posted_batch() */
    kCount
};

inline const char *op_kind_name(OpKind k) {
    static const char *const names[] = {"post",  "post_expected_only", "arrive", "match_posted",
                                        "cancel", "peek", "claim", "take", "cancel_matching",
                                        "drain", "recreate", "move_round_trip", "arrive_batch",
                                        "match_posted_batch"};
    return (k < OpKind::kCount) ? names[static_cast<int>(k)] : "?";
}

/* Where an op's tag comes from: decoded, or copied from a queued entry at
 * execution time (so matches and collisions are frequent). */
enum class TagSrc : uint8_t { kFresh, kPosted, kUnexpected };

/* Which handle cancel()/take() use. */
enum class HandleSel : uint8_t { kLive, kStale, kNull, kForged };

/* One decoded operation. Entry references are relative (pick-th live entry),
 * resolved at execution time, so an op vector can be replayed / minimized. */
struct Op {
    OpKind         kind     = OpKind::kPost;
    TagSrc         src      = TagSrc::kFresh;
    HandleSel      sel      = HandleSel::kLive;
    bool           null_out = false; /* pass nullptr as ctx / msg output */
    bool           null_ctx = false; /* post a nullptr ctx */
    bool           reenter  = false; /* cancel_matching/drain: call back into the matcher */
    uint32_t       pick     = 0;
    Tag            tag      = 0;
    Tag            mask     = 0;
    Tag            junk     = 0; /* xor-ed into bits outside the relevant mask */
    match::MatcherOptions opts;  /* kRecreate */
    std::vector<Op>       parts; /* kArriveBatch / kMatchPostedBatch: one tag each */
};

inline std::string options_string(const match::MatcherOptions &o) {
    auto lim = [](size_t v) { return v == SIZE_MAX ? std::string("SIZE_MAX") : std::to_string(v); };
    return strprintf("{max_posted=%s, max_unexpected=%s, max_mask_classes=%u, "
                     "max_unexpected_indexes=%u, unexpected_index_threshold=%u, "
                     "staging_min_index_bytes=%s}",
                     lim(o.max_posted).c_str(), lim(o.max_unexpected).c_str(), o.max_mask_classes,
                     o.max_unexpected_indexes, o.unexpected_index_threshold,
                     lim(o.staging_min_index_bytes).c_str());
}

struct OpStreamConfig {
    unsigned model_faults = kFaultNone; /* checker self-test only */
    bool     trace        = false;      /* log every concrete call (slow) */
    size_t   trace_keep   = 48;         /* calls kept in the report; 0 = all */
    bool     record       = false;      /* keep decoded ops (replay/minimize) */
};

class MatcherOpStream {
  public:
    using Config = OpStreamConfig;

    struct Coverage {
        uint64_t ops_by_kind[static_cast<int>(OpKind::kCount)] = {};
        uint64_t post_matched        = 0;
        uint64_t arrive_matched      = 0;
        uint64_t match_posted_hits   = 0;
        uint64_t cancel_ok           = 0;
        uint64_t take_ok             = 0;
        uint64_t batch_msgs          = 0; /* arrivals made through a batch */
        uint64_t batch_matched       = 0;
        uint64_t peek_hits           = 0;
        uint64_t claim_hits          = 0;
        uint64_t cancel_matching_n   = 0;
        uint64_t drained             = 0;
        uint64_t exceeds_limit       = 0;
        uint64_t no_elem             = 0;
        uint64_t invalid_param       = 0;
        uint64_t stale_handle_ops    = 0;
        uint64_t reentrant_ops       = 0;
        uint64_t junk_tags           = 0;
        size_t   max_posted_depth    = 0;
        size_t   max_unexpected_depth = 0;
        uint64_t depth_sum           = 0; /* posted + unexpected, summed per op */
        /* From TagMatcher::stats(), summed over matcher instances. */
        uint64_t index_builds        = 0;
        uint64_t fallback_scans      = 0;
        uint32_t max_mask_classes    = 0;
        uint64_t recreates           = 0;
    };

    struct Result {
        bool        ok        = true;
        uint64_t    ops       = 0;          /* top-level ops executed (incl. failing one) */
        uint64_t    failed_op = UINT64_MAX; /* index of the diverging op */
        std::string divergence;             /* empty when ok */
        std::string pinned;                 /* how open contract corners were resolved */
        Coverage    cov;

        std::string summary() const {
            const Coverage &c = cov;
            return strprintf(
                "ops=%" PRIu64 " post_matched=%" PRIu64 " arrive_matched=%" PRIu64
                " match_posted_hits=%" PRIu64 " cancel_ok=%" PRIu64 " take_ok=%" PRIu64
                " peek_hits=%" PRIu64 " claim_hits=%" PRIu64 " cancel_matching=%" PRIu64
                " drained=%" PRIu64 " exceeds_limit=%" PRIu64 " no_elem=%" PRIu64
                " invalid_param=%" PRIu64 " stale_ops=%" PRIu64 " reentrant=%" PRIu64
                " junk_tags=%" PRIu64 " max_depth=%zu/%zu avg_depth=%.1f index_builds=%" PRIu64
                " fallback_scans=%" PRIu64 " max_mask_classes=%u recreates=%" PRIu64
                " batch_msgs=%" PRIu64 " batch_matched=%" PRIu64 " [%s]",
                ops, c.post_matched, c.arrive_matched, c.match_posted_hits, c.cancel_ok, c.take_ok,
                c.peek_hits, c.claim_hits, c.cancel_matching_n, c.drained, c.exceeds_limit,
                c.no_elem, c.invalid_param, c.stale_handle_ops, c.reentrant_ops, c.junk_tags,
                c.max_posted_depth, c.max_unexpected_depth,
                ops ? double(c.depth_sum) / double(ops) : 0.0, c.index_builds, c.fallback_scans,
                c.max_mask_classes, c.recreates, c.batch_msgs, c.batch_matched, pinned.c_str());
        }
    };

    explicit MatcherOpStream(const Config &cfg = Config()) : cfg_(cfg) {}

    /* `num_ops` operations drawn from a PRNG seeded with `seed`; queue depths
     * are steered to wander between 0 and ~300. */
    Result run_random(uint64_t seed, uint64_t num_ops) {
        OpSource src = OpSource::from_seed(seed);
        return run(src, num_ops);
    }

    /* Decode the whole buffer (fuzzer input). */
    Result run_bytes(const uint8_t *data, size_t size, uint64_t max_ops = 1u << 20) {
        OpSource src = OpSource::from_bytes(data, size);
        return run(src, max_ops);
    }

    /* Replay decoded ops (ops[0] should be a kRecreate giving the options). */
    Result replay(const std::vector<Op> &ops) {
        reset();
        for (const Op &op : ops) {
            if (!step(op)) {
                break;
            }
        }
        return finish();
    }

    const std::vector<Op> &recorded() const { return recorded_; }

    /* Concrete call log of the last run (Config::trace). */
    std::string trace_log() const {
        std::string s;
        for (const std::string &line : trace_) {
            s += line;
            s += '\n';
        }
        return s;
    }

    /* Greedy delta minimization of a diverging op sequence: drops chunks of
     * ops while the replay still diverges. Bounded by `max_runs` replays and
     * `max_seconds`. Returns the smallest diverging sequence found. */
    static std::vector<Op> minimize(std::vector<Op> ops, const Config &cfg, size_t max_runs = 4000,
                                    double max_seconds = 30.0) {
        Config c = cfg;
        c.trace  = false;
        c.record = false;
        auto t0  = std::chrono::steady_clock::now();
        auto fails = [&](const std::vector<Op> &v, uint64_t *at) {
            MatcherOpStream s(c);
            Result          r = s.replay(v);
            *at               = r.failed_op;
            return !r.ok;
        };
        uint64_t at = 0;
        if (!fails(ops, &at)) {
            return ops;
        }
        ops.resize(std::min<size_t>(ops.size(), at + 1));
        size_t runs  = 0;
        size_t chunk = std::max<size_t>(1, ops.size() / 2);
        for (;;) {
            bool changed = false;
            for (size_t start = 1; start < ops.size();) {
                double el = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0)
                                    .count();
                if (++runs > max_runs || el > max_seconds) {
                    return ops;
                }
                std::vector<Op> cand(ops.begin(), ops.begin() + start);
                size_t          end = std::min(ops.size(), start + chunk);
                cand.insert(cand.end(), ops.begin() + end, ops.end());
                if (fails(cand, &at)) {
                    cand.resize(std::min<size_t>(cand.size(), at + 1));
                    ops.swap(cand);
                    changed = true;
                } else {
                    start += chunk;
                }
            }
            if (chunk == 1 && !changed) {
                return ops;
            }
            chunk = std::max<size_t>(1, chunk / 2);
        }
    }

    /* Human-readable concrete calls of an op sequence (replayed with tracing). */
    static std::string describe(const std::vector<Op> &ops, const Config &cfg) {
        Config c     = cfg;
        c.trace      = true;
        c.trace_keep = 0;
        c.record     = false;
        MatcherOpStream s(c);
        Result          r = s.replay(ops);
        std::string     out = s.trace_log();
        if (!r.ok) {
            out += "=> " + r.divergence + "\n";
        }
        return out;
    }

  private:
    struct StaleRec {
        match::Handle h;
        uint64_t      id;
    };

    using Model = ReferenceMatcher;

    static uint64_t hkey(match::Handle h) { return (uint64_t(h.index) << 32) | h.generation; }

    /* ---------------------------------------------------------------- run */

    void reset() {
        real_  = match::TagMatcher(match::MatcherOptions());
        model_ = Model(SIZE_MAX, SIZE_MAX, cfg_.model_faults);
        opts_  = match::MatcherOptions();
        /* The header fixes these corners: a post()/arrive() that matches is
         * never refused at the limit, and Receive::tag / cancel_matching()
         * use the tag as posted. (-1 would let the first observation decide.) */
        pin_post_limit_ = pin_arrive_limit_ = pin_cancel_view_ = 0;
        max_index_seen_ = 0;
        clear_handles();
        ctx_serial_ = cookie_serial_ = 0;
        op_index_                    = 0;
        failed_                      = false;
        nest_                        = 0;
        result_                      = Result();
        trace_.clear();
        recorded_.clear();
        alpha_       = 4;
        phase_left_  = 0;
        target_posted_ = target_unexpected_ = 16;
    }

    void clear_handles() {
        live_recv_.clear();
        live_msg_.clear();
        live_recv_keys_.clear();
        live_msg_keys_.clear();
        stale_recv_.clear();
        stale_msg_.clear();
        stale_recv_pos_ = stale_msg_pos_ = 0;
        max_index_seen_ = 0;
    }

    Result run(OpSource &src, uint64_t max_ops) {
        reset();
        /* First op: the matcher options. */
        Op first   = Op();
        first.kind = OpKind::kRecreate;
        first.opts = decode_options(src, src.is_random());
        if (step(first)) {
            for (uint64_t i = 1; i < max_ops && !src.at_end(); ++i) {
                Op op = decode_op(src);
                if (!step(op)) {
                    break;
                }
            }
        }
        return finish();
    }

    bool step(const Op &op) {
        if (cfg_.record) {
            recorded_.push_back(op);
        }
        ++result_.ops;
        bool ok = exec(op) && check_stats();
        ++op_index_;
        Coverage &c = result_.cov;
        c.max_posted_depth     = std::max(c.max_posted_depth, model_.posted_count());
        c.max_unexpected_depth = std::max(c.max_unexpected_depth, model_.unexpected_count());
        c.depth_sum += model_.posted_count() + model_.unexpected_count();
        return ok;
    }

    Result finish() {
        collect_real_stats();
        result_.pinned = strprintf(
            "post@max_posted: %s; arrive@max_unexpected: %s; cancel_matching tag: %s",
            pin_post_limit_ < 0 ? "unobserved" : (pin_post_limit_ ? "limit-first" : "match-first"),
            pin_arrive_limit_ < 0 ? "unobserved"
                                  : (pin_arrive_limit_ ? "limit-first" : "match-first"),
            pin_cancel_view_ < 0 ? "unobserved"
                                 : (pin_cancel_view_ ? "masked by recv mask" : "as posted"));
        return result_;
    }

    void collect_real_stats() {
        match::MatcherStats st = real_.stats();
        result_.cov.index_builds += st.unexpected_index_builds;
        result_.cov.fallback_scans += st.fallback_scans;
        result_.cov.max_mask_classes = std::max(result_.cov.max_mask_classes, st.mask_classes_in_use);
        (void)real_.memory_bytes();
    }

    /* ------------------------------------------------------------ decoding */

    static match::MatcherOptions decode_options(OpSource &s, bool random_mode) {
        static const size_t   kLimits[]     = {0, 1, 2, 3, 5, 8, 13, 32, 100};
        static const uint32_t kClasses[]    = {1, 2, 2, 3, 4, 8, 64, 1024};
        static const uint32_t kThresholds[] = {0, 1, 2, 3, 4, 8, 16, 32};
        static const uint32_t kIndexes[]    = {0, 1, 2, 3, 4, 8};
        match::MatcherOptions o;
        uint8_t               b = s.u8();
        if ((b >> 6) == 3 && random_mode) {
            return o; /* library defaults */
        }
        /* Limits: mostly unlimited so queues can get deep. */
        if ((b & 7) < (random_mode ? 2 : 3)) {
            o.max_posted = kLimits[s.below(9)];
        }
        if (((b >> 3) & 7) < (random_mode ? 2 : 3)) {
            o.max_unexpected = kLimits[s.below(9)];
        }
        o.max_mask_classes           = kClasses[s.below(8)];
        o.max_unexpected_indexes     = kIndexes[s.below(6)];
        o.unexpected_index_threshold = kThresholds[s.below(8)];
        /* staged exact posts: from the first post (twice as likely), from a
         * small index, never, the default */
        static const size_t kStaging[] = {0, 0, 1024, SIZE_MAX,
                                          match::MatcherOptions().staging_min_index_bytes};
        o.staging_min_index_bytes = kStaging[s.below(5)];
        return o;
    }

    /* 16 tags in two groups of 8 whose keys share a 32-bit hash fingerprint
     * under the mixing fold ((k >> 3) ^ ((k >> 3) >> 32)) * golden-ratio,
     * high half, plus equal low 3 bits: a generic hash-collision family (and
     * the one a fingerprinting open-addressing table is weakest against). */
    static Tag colliding_tag(uint32_t i) {
        static const std::vector<Tag> family = [] {
            const uint64_t c   = 0x9e3779b97f4a7c15ull;
            uint64_t       inv = c;
            for (int k = 0; k < 6; ++k) {
                inv *= 2 - c * inv;
            }
            std::vector<Tag> v;
            OpSource         rng = OpSource::from_seed(0xc0111de);
            for (uint64_t high : {0x12345678ull, 0x0badf00dull}) {
                size_t group = 0;
                while (group < 8) {
                    uint64_t product = (high << 32) | rng.u32();
                    uint64_t folded  = product * inv;
                    uint64_t hi = folded >> 32, lo = (folded & 0xffffffffull) ^ hi;
                    uint64_t rest = (hi << 32) | lo;
                    if ((rest >> 61) == 0) {
                        v.push_back((rest << 3) | 5);
                        ++group;
                    }
                }
            }
            return v;
        }();
        return family[i % family.size()];
    }

    Tag small_tag(OpSource &s, uint32_t alpha, bool mid) {
        Tag a = s.below(alpha), b = s.below(alpha);
        Tag t = (a << 32) | b;
        if (mid) {
            t |= Tag(s.below(alpha)) << 8;
        }
        return t;
    }

    /* Tag fields of an op. `alt`: the queue a non-fresh tag is copied from. */
    void decode_tag(OpSource &s, Op &op, TagSrc alt) {
        uint8_t m  = s.u8();
        uint8_t kind = m & 15;
        if (kind < 10) {
            op.tag = small_tag(s, alpha_, false);
        } else if (kind < 12) {
            op.tag = small_tag(s, alpha_, true);
        } else if (kind == 12) {
            op.tag = (m & 64) ? colliding_tag(s.below(16)) : s.u64();
        } else {
            op.tag = small_tag(s, alpha_, false);
            if (alt != TagSrc::kFresh) {
                op.src  = alt;
                op.pick = s.u16();
            }
        }
        if (((m >> 4) & 3) == 0) {
            op.junk = s.u64();
        }
    }

    static Tag decode_mask(OpSource &s) {
        static const Tag kPool[] = {0xf0f0f0f0f0f0f0f0ull, 0x0000ffff0000ffffull,
                                    0x0000000000000003ull, 0xffffffff000000ffull,
                                    0x00ff00ff00ff00ffull, 0x8000000100000001ull,
                                    0xfffffffffffffffeull, 0x0000000100000003ull,
                                    0x00000003ffffffffull, 0xffffff00ffffff00ull};
        uint8_t m = s.u8() & 31;
        if (m < 11) {
            return match::kExactMask;
        } else if (m < 12) {
            return 0;
        } else if (m < 15) {
            return 0xffffffffull;
        } else if (m < 18) {
            return 0xffffffff00000000ull;
        } else if (m < 20) {
            return 0xffull;
        } else if (m < 28) {
            return kPool[s.below(10)];
        } else if (m < 30) {
            return s.u64();
        } else {
            /* random, but usually sparse enough to be satisfiable */
            return s.u64() & s.u64();
        }
    }

    void decode_handle(OpSource &s, Op &op) {
        uint8_t m = s.u8();
        uint8_t k = m & 15;
        op.sel    = (k < 11) ? HandleSel::kLive
                 : (k < 14) ? HandleSel::kStale
                 : (k < 15) ? HandleSel::kNull
                            : HandleSel::kForged;
        op.null_out = (m >> 4) == 0;
        op.pick     = s.u16();
    }

    /* Weights per kind, in OpKind order. */
    static OpKind pick_weighted(const uint16_t *w, size_t n, uint32_t r) {
        uint32_t total = 0;
        for (size_t i = 0; i < n; ++i) {
            total += w[i];
        }
        uint32_t x = r % total;
        for (size_t i = 0; i < n; ++i) {
            if (x < w[i]) {
                return static_cast<OpKind>(i);
            }
            x -= w[i];
        }
        return OpKind::kPost;
    }

    bool deep_phase() const { return target_posted_ > 1024 || target_unexpected_ > 1024; }

    OpKind decode_kind(OpSource &s) {
        if (!s.is_random()) {
            /* Neutral table, all kinds reachable from one byte. */
            static const uint16_t w[] = {40, 30, 50, 12, 25, 18, 15, 15, 8, 3, 3, 2, 6, 3};
            return pick_weighted(w, 14, s.u8());
        }
        if (phase_left_ == 0) {
            /* Mostly 0..300; now and then deep (> 1024: pool chunk growth). */
            static const size_t   kTargets[] = {0, 2, 8, 16, 32, 64, 128, 200, 300, 300, 300,
                                                0, 8, 64, 1500, 2500};
            static const uint32_t kAlpha[]   = {2, 4, 4, 4, 4, 8, 16, 256};
            phase_left_        = 300 + s.below(5000);
            uint32_t nt        = (s.below(8) == 0) ? 16 : 11;
            target_posted_     = kTargets[s.below(nt)];
            target_unexpected_ = kTargets[s.below(nt)];
            alpha_             = kAlpha[s.below(8)];
            if (deep_phase()) {
                phase_left_ = 12000; /* time to fill past 1024 entries and back */
                alpha_      = (s.u8() & 1) ? 16 : 256; /* fewer collisions: queues grow */
            }
        }
        --phase_left_;
        uint32_t r = s.u32();
        /* No re-create / drain while a deep phase builds up its queues. */
        switch (deep_phase() ? 4095 : (r & 4095)) {
        case 0:
        case 1:
            return OpKind::kRecreate;
        case 2:
            return OpKind::kDrain;
        case 3:
            return OpKind::kMoveRoundTrip;
        default:
            break;
        }
        /*                          post peo  arr  mp  canc peek clm take cm */
        /* ... then 3 kinds never drawn here (drain, recreate, move), arrive_batch,
         * match_posted_batch */
        static const uint16_t grow_both[] = {30, 30, 45, 4, 6, 12, 4, 4, 1, 0, 0, 0, 1, 0};
        static const uint16_t grow_p[]    = {30, 40, 8, 4, 4, 10, 30, 30, 1, 0, 0, 0, 0, 1};
        static const uint16_t grow_u[]    = {6, 4, 60, 24, 30, 10, 4, 4, 4, 0, 0, 0, 1, 0};
        static const uint16_t shrink[]    = {24, 2, 24, 20, 30, 10, 30, 30, 5, 0, 0, 0, 1, 1};
        size_t p = model_.posted_count(), u = model_.unexpected_count();
        bool   p_low = p < target_posted_ && p < 3000, u_low = u < target_unexpected_ && u < 3000;
        const uint16_t *w = p_low ? (u_low ? grow_both : grow_p) : (u_low ? grow_u : shrink);
        return pick_weighted(w, 14, r >> 12);
    }

    Op decode_op(OpSource &s) {
        Op op;
        op.kind = decode_kind(s);
        switch (op.kind) {
        case OpKind::kPost:
        case OpKind::kPostExpectedOnly:
            decode_tag(s, op, TagSrc::kUnexpected);
            op.mask     = decode_mask(s);
            op.null_ctx = (s.u8() & 31) == 0;
            break;
        case OpKind::kArrive:
        case OpKind::kMatchPosted:
            decode_tag(s, op, TagSrc::kPosted);
            break;
        case OpKind::kPeek:
        case OpKind::kClaim:
            decode_tag(s, op, TagSrc::kUnexpected);
            op.mask     = decode_mask(s);
            op.null_out = (s.u8() & 31) == 0;
            break;
        case OpKind::kCancel:
        case OpKind::kTake:
            decode_handle(s, op);
            break;
        case OpKind::kCancelMatching:
            decode_tag(s, op, TagSrc::kPosted);
            op.mask    = decode_mask(s);
            op.reenter = (s.u8() & 3) == 0;
            op.pick    = (op.pick << 1) | (s.u8() & 1);
            break;
        case OpKind::kDrain:
            op.reenter = (s.u8() & 1) == 0;
            decode_tag(s, op, TagSrc::kFresh);
            op.mask = decode_mask(s);
            op.pick = s.u8();
            break;
        case OpKind::kRecreate:
            op.opts = decode_options(s, s.is_random());
            break;
        case OpKind::kMoveRoundTrip:
            op.pick = s.u8();
            break;
        case OpKind::kArriveBatch:
        case OpKind::kMatchPostedBatch: {
            /* up to 40: bursts cross the matcher's internal window of 16 */
            const uint32_t n = s.below(41);
            op.parts.resize(n);
            for (Op &part : op.parts) {
                part.kind = (op.kind == OpKind::kArriveBatch) ? OpKind::kArrive : OpKind::kMatchPosted;
                decode_tag(s, part, TagSrc::kPosted);
            }
            break;
        }
        default:
            break;
        }
        return op;
    }

    /* ------------------------------------------------------------- helpers */

    bool diverge(const std::string &what) {
        if (failed_) {
            return false;
        }
        failed_             = true;
        result_.ok          = false;
        result_.failed_op   = op_index_;
        result_.divergence  = strprintf("divergence at op #%" PRIu64 ": ", op_index_) + what;
        result_.divergence += strprintf(" (options %s; real counts %zu/%zu, model %zu/%zu)",
                                        options_string(opts_).c_str(), real_.posted_count(),
                                        real_.unexpected_count(), model_.posted_count(),
                                        model_.unexpected_count());
        if (cfg_.trace && !trace_.empty()) {
            result_.divergence += "\nlast calls:\n" + trace_log();
        }
        return false;
    }

    void trace(const std::string &line) {
        if (!cfg_.trace) {
            return;
        }
        trace_.push_back(strprintf("#%" PRIu64 "%s ", op_index_, nest_ ? " (nested)" : "") + line);
        if (cfg_.trace_keep && trace_.size() > cfg_.trace_keep) {
            trace_.pop_front();
        }
    }

    static std::string ctx_str(void *p) {
        return p ? strprintf("ctx#%" PRIuPTR, reinterpret_cast<uintptr_t>(p) / 16) : "nullptr";
    }

    void *next_ctx(bool null_ctx) {
        ++ctx_serial_;
        return null_ctx ? nullptr : reinterpret_cast<void *>(uintptr_t(ctx_serial_) * 16);
    }

    bool check_status(const char *what, ucs_status_t real, ucs_status_t model) {
        Coverage &c = result_.cov;
        if (model == UCS_ERR_EXCEEDS_LIMIT) ++c.exceeds_limit;
        if (model == UCS_ERR_NO_ELEM) ++c.no_elem;
        if (model == UCS_ERR_INVALID_PARAM) ++c.invalid_param;
        if (real != model) {
            return diverge(strprintf("%s: status %s, model expects %s", what, status_name(real),
                                     status_name(model)));
        }
        return true;
    }

    bool register_handle(bool recv, uint64_t id, match::Handle h) {
        max_index_seen_ = std::max(max_index_seen_, h.index);
        if (h.is_null()) {
            return diverge(strprintf("%s queued but its handle is null",
                                     recv ? "receive" : "message"));
        }
        auto &keys = recv ? live_recv_keys_ : live_msg_keys_;
        auto  it   = keys.find(hkey(h));
        if (it != keys.end()) {
            return diverge(strprintf("new %s handle {%u,%u} equals the live handle of entry #%" PRIu64,
                                     recv ? "receive" : "message", h.index, h.generation,
                                     it->second));
        }
        keys.emplace(hkey(h), id);
        (recv ? live_recv_ : live_msg_).emplace(id, h);
        return true;
    }

    void retire(bool recv, uint64_t id) {
        auto &live = recv ? live_recv_ : live_msg_;
        auto  it   = live.find(id);
        if (it == live.end()) {
            return;
        }
        (recv ? live_recv_keys_ : live_msg_keys_).erase(hkey(it->second));
        auto   &ring = recv ? stale_recv_ : stale_msg_;
        size_t &pos  = recv ? stale_recv_pos_ : stale_msg_pos_;
        StaleRec rec{it->second, id};
        if (ring.size() < kStaleKeep) {
            ring.push_back(rec);
        } else {
            ring[pos] = rec;
            pos       = (pos + 1) % kStaleKeep;
        }
        live.erase(it);
    }

    /* Resolve the handle an op uses; *id is the model id (or null/never-issued). */
    void select_handle(const Op &op, bool recv, match::Handle *h, uint64_t *id) {
        HandleSel sel = op.sel;
        if (sel == HandleSel::kLive) {
            size_t n = recv ? model_.posted_count() : model_.unexpected_count();
            if (n > 0) {
                *id     = recv ? model_.posted()[op.pick % n].id : model_.unexpected()[op.pick % n].id;
                auto &live = recv ? live_recv_ : live_msg_;
                auto  it   = live.find(*id);
                *h         = (it != live.end()) ? it->second : match::Handle();
                return;
            }
            sel = HandleSel::kStale;
        }
        if (sel == HandleSel::kStale) {
            auto &ring = recv ? stale_recv_ : stale_msg_;
            if (!ring.empty()) {
                const StaleRec &r = ring[op.pick % ring.size()];
                *h                = r.h;
                *id               = r.id;
                ++result_.cov.stale_handle_ops;
                return;
            }
            sel = HandleSel::kNull;
        }
        if (sel == HandleSel::kNull) {
            *h  = match::Handle();
            *id = Model::kNullId;
            return;
        }
        /* An index no handle ever carried: just past the largest seen (any
         * kind), or far beyond anything a test allocates. */
        if (op.pick & 1) {
            h->index = max_index_seen_ + 1 + ((op.pick >> 1) & 3);
        } else {
            h->index = 0xffffffffu - ((op.pick >> 1) & 7);
        }
        h->generation = 1 + ((op.pick >> 4) & 3);
        *id           = Model::kNeverIssuedId;
    }

    Tag resolve_tag(const Op &op) const {
        if (op.src == TagSrc::kPosted && model_.posted_count() > 0) {
            const Model::Recv &r = model_.posted()[op.pick % model_.posted_count()];
            /* a tag that certainly matches r */
            return r.tag ^ (op.junk & ~r.mask);
        }
        if (op.src == TagSrc::kUnexpected && model_.unexpected_count() > 0) {
            return model_.unexpected()[op.pick % model_.unexpected_count()].tag;
        }
        return op.tag;
    }

    /* MatcherStats against what the model saw since the matcher was created:
     * posted_matches = arrive()/match_posted() hits, unexpected_matches =
     * post()/claim()/take() removals; mask_classes_in_use cannot exceed the
     * class budget nor the distinct non-exact masks posted. */
    bool check_stats() {
        match::MatcherStats st = real_.stats();
        if (st.posted_matches != inst_posted_matches_) {
            return diverge(strprintf("stats().posted_matches = %" PRIu64 ", model counts %" PRIu64
                                     " arrivals that matched",
                                     st.posted_matches, inst_posted_matches_));
        }
        if (st.unexpected_matches != inst_unexpected_min_ + inst_takes_) {
            return diverge(strprintf("stats().unexpected_matches = %" PRIu64 ", model counts %" PRIu64
                                     " posts/claims that took a message (+%" PRIu64 " takes)",
                                     st.unexpected_matches, inst_unexpected_min_, inst_takes_));
        }
        if ((op_index_ & 15) == 0 || model_.posted_count() < 8) {
            std::vector<Tag> masks;
            for (const Model::Recv &r : model_.posted()) {
                if (r.mask != match::kExactMask) {
                    masks.push_back(r.mask);
                }
            }
            std::sort(masks.begin(), masks.end());
            size_t distinct = static_cast<size_t>(std::unique(masks.begin(), masks.end()) -
                                                  masks.begin());
            size_t bound    = std::min<size_t>(distinct, opts_.max_mask_classes);
            if (st.mask_classes_in_use > bound) {
                return diverge(strprintf("stats().mask_classes_in_use = %u, but only %zu distinct "
                                         "non-exact masks are posted (max_mask_classes %u)",
                                         st.mask_classes_in_use, distinct,
                                         opts_.max_mask_classes));
            }
        }
        return true;
    }

    bool check_counts() {
        size_t rp = real_.posted_count(), mp = model_.posted_count();
        size_t ru = real_.unexpected_count(), mu = model_.unexpected_count();
        if (rp != mp) {
            return diverge(strprintf("posted_count() = %zu, model has %zu", rp, mp));
        }
        if (ru != mu) {
            return diverge(strprintf("unexpected_count() = %zu, model has %zu", ru, mu));
        }
        return true;
    }

    /* ---------------------------------------------------------- execution */

    bool exec(const Op &op) {
        ++result_.cov.ops_by_kind[static_cast<int>(op.kind)];
        switch (op.kind) {
        case OpKind::kPost:
            exec_post(op, false);
            break;
        case OpKind::kPostExpectedOnly:
            exec_post(op, true);
            break;
        case OpKind::kArrive:
            exec_arrive(op, false);
            break;
        case OpKind::kMatchPosted:
            exec_arrive(op, true);
            break;
        case OpKind::kCancel:
            exec_cancel(op);
            break;
        case OpKind::kPeek:
            exec_probe(op, false);
            break;
        case OpKind::kClaim:
            exec_probe(op, true);
            break;
        case OpKind::kTake:
            exec_take(op);
            break;
        case OpKind::kCancelMatching:
            exec_cancel_matching(op);
            break;
        case OpKind::kDrain:
            exec_drain(op);
            break;
        case OpKind::kRecreate:
            exec_recreate(op);
            break;
        case OpKind::kMoveRoundTrip:
            exec_move(op);
            break;
        case OpKind::kArriveBatch:
            exec_batch(op, false);
            break;
        case OpKind::kMatchPostedBatch:
            exec_batch(op, true);
            break;
        default:
            break;
        }
        if (failed_) {
            return false;
        }
        return check_counts();
    }

    void exec_post(const Op &op, bool expected_only) {
        const char *name = expected_only ? "post_expected_only" : "post";
        Tag         mask = op.mask;
        Tag         tag  = resolve_tag(op) ^ (op.junk & ~mask);
        if (op.junk & ~mask) ++result_.cov.junk_tags;
        void *ctx = next_ctx(op.null_ctx);

        bool ambiguous = !expected_only && pin_post_limit_ < 0 && model_.posted_full() &&
                         model_.has_unexpected_match(tag, mask);
        match::PostResult rr = expected_only ? real_.post_expected_only(tag, mask, ctx)
                                             : real_.post(tag, mask, ctx);
        if (ambiguous) {
            if (rr.status == UCS_OK && rr.matched) {
                pin_post_limit_ = 0;
            } else if (rr.status == UCS_ERR_EXCEEDS_LIMIT) {
                pin_post_limit_ = 1;
            }
            if (pin_post_limit_ >= 0) {
                model_.semantics().post_limit = pin_post_limit_ ? Model::LimitOrder::kLimitFirst
                                                                : Model::LimitOrder::kMatchFirst;
            }
        }
        Model::PostOutcome mo = expected_only ? model_.post_expected_only(tag, mask, ctx)
                                              : model_.post(tag, mask, ctx);
        if (cfg_.trace) {
            trace(strprintf("%s(tag=0x%" PRIx64 ", mask=0x%" PRIx64 ", %s) -> %s%s", name, tag,
                            mask, ctx_str(ctx).c_str(), status_name(rr.status),
                            rr.status != UCS_OK ? ""
                            : rr.matched
                                ? strprintf(" matched msg{tag=0x%" PRIx64 ", cookie=%" PRIu64 "}",
                                            rr.message.tag, rr.message.cookie)
                                      .c_str()
                                : strprintf(" queued handle{%u,%u}", rr.handle.index,
                                            rr.handle.generation)
                                      .c_str()));
        }
        if (!check_status(name, rr.status, mo.status) || mo.status != UCS_OK) {
            return;
        }
        if (rr.matched != mo.matched) {
            diverge(strprintf("%s(tag=0x%" PRIx64 ", mask=0x%" PRIx64 "): matched=%d, model: %s",
                              name, tag, mask, rr.matched,
                              mo.matched ? strprintf("takes unexpected msg cookie=%" PRIu64
                                                     " tag=0x%" PRIx64,
                                                     mo.msg.cookie, mo.msg.tag)
                                               .c_str()
                                         : "no unexpected message matches, queue it"));
            return;
        }
        if (mo.matched) {
            ++result_.cov.post_matched;
            ++inst_unexpected_min_;
            if (rr.message.cookie != mo.msg.cookie || rr.message.tag != mo.msg.tag) {
                diverge(strprintf("%s(tag=0x%" PRIx64 ", mask=0x%" PRIx64 ") took msg{tag=0x%" PRIx64
                                  ", cookie=%" PRIu64 "}, model: earliest match is msg{tag=0x%" PRIx64
                                  ", cookie=%" PRIu64 "}",
                                  name, tag, mask, rr.message.tag, rr.message.cookie, mo.msg.tag,
                                  mo.msg.cookie));
                return;
            }
            retire(false, mo.msg.id);
        } else {
            register_handle(true, mo.recv_id, rr.handle);
        }
    }

    void exec_arrive(const Op &op, bool match_only) {
        Tag                 tag    = resolve_tag(op);
        uint64_t            cookie = ++cookie_serial_;
        match::ArriveResult rr = match_only ? real_.match_posted(tag) : real_.arrive(tag, cookie);
        check_arrival(match_only ? "match_posted" : "arrive", tag, cookie, match_only, rr);
    }

    /* A burst: every tag is resolved first (the headers a poll returned),
     * then one call hands them all to the matcher, and each outcome is
     * checked against the model applying the arrivals one by one, in order. */
    void exec_batch(const Op &op, bool match_only) {
        const size_t          n = op.parts.size();
        std::vector<Tag>      tags(n);
        std::vector<uint64_t> cookies(n);
        for (size_t i = 0; i < n; ++i) {
            tags[i]    = resolve_tag(op.parts[i]);
            cookies[i] = ++cookie_serial_;
        }
        std::vector<match::ArriveResult> rr(n + 1);
        rr[n].status = UCS_ERR_BUSY; /* canary: nothing past n is written */
        if (match_only) {
            real_.match_posted_batch(tags.data(), n, rr.data());
        } else {
            real_.arrive_batch(tags.data(), cookies.data(), n, rr.data());
        }
        if (cfg_.trace) {
            trace(strprintf("%s(n=%zu)", match_only ? "match_posted_batch" : "arrive_batch", n));
        }
        for (size_t i = 0; i < n && !failed_; ++i) {
            ++result_.cov.batch_msgs;
            result_.cov.batch_matched += rr[i].matched;
            const std::string name = strprintf("%s[%zu of %zu]",
                                               match_only ? "match_posted_batch" : "arrive_batch", i, n);
            check_arrival(name.c_str(), tags[i], cookies[i], match_only, rr[i]);
        }
        if (!failed_ && rr[n].status != UCS_ERR_BUSY) {
            diverge(strprintf("batch of %zu wrote a result past its end", n));
        }
    }

    /* Applies one arrival to the model and compares with what the real
     * matcher returned for it. */
    void check_arrival(const char *name, Tag tag, uint64_t cookie, bool match_only,
                       const match::ArriveResult &rr) {
        bool ambiguous = !match_only && pin_arrive_limit_ < 0 && model_.unexpected_full() &&
                         model_.has_posted_match(tag);
        if (ambiguous) {
            if (rr.status == UCS_OK && rr.matched) {
                pin_arrive_limit_ = 0;
            } else if (rr.status == UCS_ERR_EXCEEDS_LIMIT) {
                pin_arrive_limit_ = 1;
            }
            if (pin_arrive_limit_ >= 0) {
                model_.semantics().arrive_limit = pin_arrive_limit_
                                                          ? Model::LimitOrder::kLimitFirst
                                                          : Model::LimitOrder::kMatchFirst;
            }
        }
        Model::ArriveOutcome mo = match_only ? model_.match_posted(tag) : model_.arrive(tag, cookie);
        if (cfg_.trace) {
            trace(strprintf(
                "%s(tag=0x%" PRIx64 "%s) -> %s%s", name, tag,
                match_only ? "" : strprintf(", cookie=%" PRIu64, cookie).c_str(),
                status_name(rr.status),
                rr.status != UCS_OK ? ""
                : rr.matched
                    ? strprintf(" matched recv{tag=0x%" PRIx64 ", mask=0x%" PRIx64 ", %s}",
                                rr.recv.tag, rr.recv.mask, ctx_str(rr.recv.ctx).c_str())
                          .c_str()
                : match_only ? " no match"
                             : strprintf(" queued handle{%u,%u}", rr.handle.index,
                                         rr.handle.generation)
                                   .c_str()));
        }
        if (!check_status(name, rr.status, mo.status) || mo.status != UCS_OK) {
            return;
        }
        if (rr.matched != mo.matched) {
            diverge(strprintf("%s(tag=0x%" PRIx64 "): matched=%d, model: %s", name, tag, rr.matched,
                              mo.matched ? strprintf("matches recv{tag=0x%" PRIx64
                                                     ", mask=0x%" PRIx64 ", %s}",
                                                     mo.recv.tag, mo.recv.mask,
                                                     ctx_str(mo.recv.ctx).c_str())
                                               .c_str()
                                         : "no posted receive matches"));
            return;
        }
        if (mo.matched) {
            ++(match_only ? result_.cov.match_posted_hits : result_.cov.arrive_matched);
            ++inst_posted_matches_;
            /* Receive "as stored": the tag as posted, bits outside mask included. */
            if (rr.recv.ctx != mo.recv.ctx || rr.recv.mask != mo.recv.mask ||
                rr.recv.tag != mo.recv.tag) {
                diverge(strprintf("%s(tag=0x%" PRIx64 ") matched recv{tag=0x%" PRIx64
                                  ", mask=0x%" PRIx64 ", %s}, model: earliest-posted match is "
                                  "recv{tag=0x%" PRIx64 ", mask=0x%" PRIx64 ", %s}",
                                  name, tag, rr.recv.tag, rr.recv.mask,
                                  ctx_str(rr.recv.ctx).c_str(), mo.recv.tag, mo.recv.mask,
                                  ctx_str(mo.recv.ctx).c_str()));
                return;
            }
            retire(true, mo.recv.id);
        } else if (!match_only) {
            register_handle(false, mo.msg_id, rr.handle);
        } else if (mo.msg_id != 0) {
            /* only with kFaultMatchPostedQueues: the model queued, the real did not */
            register_handle(false, mo.msg_id, rr.handle);
        }
    }

    void exec_cancel(const Op &op) {
        match::Handle h;
        uint64_t      id = 0;
        select_handle(op, true, &h, &id);
        void        *rctx = reinterpret_cast<void *>(uintptr_t(0xdead0));
        ucs_status_t rs   = real_.cancel(h, op.null_out ? nullptr : &rctx);
        void        *mctx = nullptr;
        ucs_status_t ms   = model_.cancel(id, &mctx);
        if (cfg_.trace) {
            trace(strprintf("cancel(handle{%u,%u}%s) -> %s%s", h.index, h.generation,
                            op.null_out ? ", nullptr" : "", status_name(rs),
                            (rs == UCS_OK && !op.null_out) ? (" " + ctx_str(rctx)).c_str() : ""));
        }
        if (!check_status(strprintf("cancel(handle{%u,%u}) [entry #%" PRIu64 "]", h.index,
                                    h.generation, id)
                                  .c_str(),
                          rs, ms) ||
            ms != UCS_OK) {
            return;
        }
        ++result_.cov.cancel_ok;
        if (!op.null_out && rctx != mctx) {
            diverge(strprintf("cancel(handle{%u,%u}) returned %s, model: %s", h.index, h.generation,
                              ctx_str(rctx).c_str(), ctx_str(mctx).c_str()));
            return;
        }
        retire(true, id);
    }

    void exec_take(const Op &op) {
        match::Handle h;
        uint64_t      id = 0;
        select_handle(op, false, &h, &id);
        match::Message rm;
        rm.tag    = 0x5a5a5a5a;
        rm.cookie = 0xdeadbeef;
        ucs_status_t rs = real_.take(h, op.null_out ? nullptr : &rm);
        Model::Msg   mm;
        ucs_status_t ms = model_.take(id, &mm);
        if (cfg_.trace) {
            trace(strprintf("take(handle{%u,%u}%s) -> %s%s", h.index, h.generation,
                            op.null_out ? ", nullptr" : "", status_name(rs),
                            (rs == UCS_OK && !op.null_out)
                                ? strprintf(" msg{tag=0x%" PRIx64 ", cookie=%" PRIu64 "}", rm.tag,
                                            rm.cookie)
                                      .c_str()
                                : ""));
        }
        if (!check_status(strprintf("take(handle{%u,%u}) [entry #%" PRIu64 "]", h.index,
                                    h.generation, id)
                                  .c_str(),
                          rs, ms) ||
            ms != UCS_OK) {
            return;
        }
        ++result_.cov.take_ok;
        ++inst_takes_;
        if (!op.null_out && (rm.tag != mm.tag || rm.cookie != mm.cookie)) {
            diverge(strprintf("take(handle{%u,%u}) returned msg{tag=0x%" PRIx64 ", cookie=%" PRIu64
                              "}, model: msg{tag=0x%" PRIx64 ", cookie=%" PRIu64 "}",
                              h.index, h.generation, rm.tag, rm.cookie, mm.tag, mm.cookie));
            return;
        }
        retire(false, id);
    }

    void exec_probe(const Op &op, bool claim) {
        const char *name = claim ? "claim" : "peek";
        Tag         mask = op.mask;
        Tag         tag  = resolve_tag(op) ^ (op.junk & ~mask);
        if (op.junk & ~mask) ++result_.cov.junk_tags;
        match::Message rm;
        rm.tag    = 0x5a5a5a5a;
        rm.cookie = 0xdeadbeef;
        ucs_status_t rs = claim ? real_.claim(tag, mask, op.null_out ? nullptr : &rm)
                                : real_.peek(tag, mask, op.null_out ? nullptr : &rm);
        Model::Msg   mm;
        ucs_status_t ms = claim ? model_.claim(tag, mask, op.null_out ? nullptr : &mm)
                                : model_.peek(tag, mask, op.null_out ? nullptr : &mm);
        if (cfg_.trace) {
            trace(strprintf("%s(tag=0x%" PRIx64 ", mask=0x%" PRIx64 "%s) -> %s%s", name, tag, mask,
                            op.null_out ? ", nullptr" : "", status_name(rs),
                            rs == UCS_OK ? strprintf(" msg{tag=0x%" PRIx64 ", cookie=%" PRIu64
                                                     ", handle{%u,%u}}",
                                                     rm.tag, rm.cookie, rm.handle.index,
                                                     rm.handle.generation)
                                               .c_str()
                                         : ""));
        }
        if (!check_status(strprintf("%s(tag=0x%" PRIx64 ", mask=0x%" PRIx64 ")", name, tag, mask)
                                  .c_str(),
                          rs, ms) ||
            ms != UCS_OK) {
            return;
        }
        ++(claim ? result_.cov.claim_hits : result_.cov.peek_hits);
        inst_unexpected_min_ += claim;
        if (rm.tag != mm.tag || rm.cookie != mm.cookie) {
            diverge(strprintf("%s(tag=0x%" PRIx64 ", mask=0x%" PRIx64 ") returned msg{tag=0x%" PRIx64
                              ", cookie=%" PRIu64 "}, model: earliest match is msg{tag=0x%" PRIx64
                              ", cookie=%" PRIu64 "}",
                              name, tag, mask, rm.tag, rm.cookie, mm.tag, mm.cookie));
            return;
        }
        if (claim) {
            retire(false, mm.id);
            return;
        }
        auto it = live_msg_.find(mm.id);
        if (it != live_msg_.end() && rm.handle != it->second) {
            diverge(strprintf("peek returned msg handle{%u,%u}, but arrive() queued that message "
                              "as handle{%u,%u}",
                              rm.handle.index, rm.handle.generation, it->second.index,
                              it->second.generation));
        }
    }

    /* A nested op run from inside a cancel_matching()/drain() callback. */
    void exec_nested(const Op &parent, Tag tag, Tag mask) {
        ++result_.cov.reentrant_ops;
        Op n;
        n.tag  = tag;
        n.mask = mask;
        switch (parent.pick % 3) {
        case 0:
            n.kind = OpKind::kArrive;
            break;
        case 1:
            n.kind = OpKind::kPostExpectedOnly;
            break;
        default:
            n.kind = OpKind::kPost;
            break;
        }
        ++nest_;
        exec(n);
        --nest_;
    }

    void exec_cancel_matching(const Op &op) {
        Tag mask = op.mask;
        Tag tag  = resolve_tag(op) ^ (op.junk & ~mask);
        std::vector<void *> got;

        if (pin_cancel_view_ < 0) {
            std::vector<uint64_t> raw = model_.matching_posted_ids(tag, mask, Model::CancelTagView::kRaw);
            std::vector<uint64_t> msk =
                    model_.matching_posted_ids(tag, mask, Model::CancelTagView::kMasked);
            if (raw != msk) {
                /* Open corner: does the receive's tag keep bits outside its own
                 * mask? Let the implementation decide once, then hold it to it. */
                size_t n = real_.cancel_matching(tag, mask, [&](void *c) { got.push_back(c); });
                auto ctxs_of = [&](const std::vector<uint64_t> &ids) {
                    std::vector<void *> v;
                    for (uint64_t id : ids) {
                        for (const Model::Recv &r : model_.posted()) {
                            if (r.id == id) {
                                v.push_back(r.ctx);
                            }
                        }
                    }
                    return v;
                };
                if (got == ctxs_of(raw)) {
                    pin_cancel_view_ = 0;
                } else if (got == ctxs_of(msk)) {
                    pin_cancel_view_ = 1;
                } else {
                    diverge(strprintf("cancel_matching(tag=0x%" PRIx64 ", mask=0x%" PRIx64
                                      ") cancelled %zu receives; neither the posted-tag (%zu) nor "
                                      "the masked-tag (%zu) reading agrees",
                                      tag, mask, got.size(), raw.size(), msk.size()));
                    return;
                }
                model_.semantics().cancel_view = pin_cancel_view_ ? Model::CancelTagView::kMasked
                                                                  : Model::CancelTagView::kRaw;
                std::vector<Model::Recv> expected = model_.cancel_matching(tag, mask);
                for (const Model::Recv &r : expected) {
                    retire(true, r.id);
                }
                result_.cov.cancel_matching_n += expected.size();
                if (n != got.size()) {
                    diverge(strprintf("cancel_matching returned %zu but made %zu callbacks", n,
                                      got.size()));
                }
                return;
            }
        }

        std::vector<Model::Recv> expected = model_.cancel_matching(tag, mask);
        for (const Model::Recv &r : expected) {
            retire(true, r.id);
        }
        result_.cov.cancel_matching_n += expected.size();
        size_t i = 0;
        size_t n = real_.cancel_matching(tag, mask, [&](void *c) {
            size_t k = i++;
            if (failed_) {
                return;
            }
            if (k >= expected.size()) {
                diverge(strprintf("cancel_matching(tag=0x%" PRIx64 ", mask=0x%" PRIx64
                                  "): callback #%zu (%s) but model cancels only %zu",
                                  tag, mask, k, ctx_str(c).c_str(), expected.size()));
                return;
            }
            if (c != expected[k].ctx) {
                diverge(strprintf("cancel_matching(tag=0x%" PRIx64 ", mask=0x%" PRIx64
                                  "): callback #%zu got %s, model expects %s (recv tag=0x%" PRIx64
                                  " mask=0x%" PRIx64 ")",
                                  tag, mask, k, ctx_str(c).c_str(), ctx_str(expected[k].ctx).c_str(),
                                  expected[k].tag, expected[k].mask));
                return;
            }
            if (!check_counts()) {
                return;
            }
            if (op.reenter && k == 0) {
                exec_nested(op, tag, mask);
            }
        });
        if (cfg_.trace) {
            trace(strprintf("cancel_matching(tag=0x%" PRIx64 ", mask=0x%" PRIx64 ") -> %zu", tag,
                            mask, n));
        }
        if (failed_) {
            return;
        }
        if (i != expected.size() || n != expected.size()) {
            diverge(strprintf("cancel_matching(tag=0x%" PRIx64 ", mask=0x%" PRIx64
                              ") returned %zu with %zu callbacks, model cancels %zu",
                              tag, mask, n, i, expected.size()));
        }
    }

    void exec_drain(const Op &op) {
        std::vector<Model::Recv> er;
        std::vector<Model::Msg>  em;
        model_.drain(&er, &em);
        for (const Model::Recv &r : er) {
            retire(true, r.id);
        }
        for (const Model::Msg &m : em) {
            retire(false, m.id);
        }
        /* all remaining live handles (if the model lost some) are stale too */
        while (!live_recv_.empty()) {
            retire(true, live_recv_.begin()->first);
        }
        while (!live_msg_.empty()) {
            retire(false, live_msg_.begin()->first);
        }
        result_.cov.drained += er.size() + em.size();
        size_t ir = 0, im = 0;
        real_.drain(
                [&](void *c) {
                    size_t k = ir++;
                    if (failed_) {
                        return;
                    }
                    if (im != 0) {
                        diverge("drain: a receive was reported after a message");
                        return;
                    }
                    if (k >= er.size() || c != er[k].ctx) {
                        diverge(strprintf("drain: receive callback #%zu got %s, model expects %s",
                                          k, ctx_str(c).c_str(),
                                          k < er.size() ? ctx_str(er[k].ctx).c_str()
                                                        : "no more receives"));
                        return;
                    }
                    if (!check_counts()) {
                        return;
                    }
                    if (op.reenter && k == 0) {
                        exec_nested(op, op.tag, op.mask);
                    }
                },
                [&](const match::Message &m) {
                    size_t k = im++;
                    if (failed_) {
                        return;
                    }
                    if (k >= em.size() || m.tag != em[k].tag || m.cookie != em[k].cookie) {
                        diverge(strprintf(
                                "drain: message callback #%zu got msg{tag=0x%" PRIx64
                                ", cookie=%" PRIu64 "}, model expects %s",
                                k, m.tag, m.cookie,
                                k < em.size() ? strprintf("msg{tag=0x%" PRIx64 ", cookie=%" PRIu64 "}",
                                                          em[k].tag, em[k].cookie)
                                                        .c_str()
                                              : "no more messages"));
                        return;
                    }
                    if (op.reenter && er.empty() && k == 0) {
                        exec_nested(op, op.tag, op.mask);
                    }
                });
        if (cfg_.trace) {
            trace(strprintf("drain() -> %zu receives, %zu messages", ir, im));
        }
        if (failed_) {
            return;
        }
        if (ir != er.size() || im != em.size()) {
            diverge(strprintf("drain reported %zu receives and %zu messages, model %zu and %zu", ir,
                              im, er.size(), em.size()));
        }
    }

    void exec_recreate(const Op &op) {
        collect_real_stats();
        ++result_.cov.recreates;
        opts_  = op.opts;
        real_  = match::TagMatcher(opts_);
        Model::Semantics sem = model_.semantics();
        model_ = Model(opts_.max_posted, opts_.max_unexpected, cfg_.model_faults);
        model_.semantics() = sem;
        clear_handles();
        inst_posted_matches_ = inst_unexpected_min_ = inst_takes_ = 0;
        if (cfg_.trace) {
            trace("TagMatcher m(" + options_string(opts_) + ")");
        }
        const match::MatcherOptions &got = real_.options();
        /* max_unexpected_indexes is checked on its own (a tuning knob an
         * implementation might clamp; see test_matcher_differential.cc). */
        if (got.max_posted != opts_.max_posted || got.max_unexpected != opts_.max_unexpected ||
            got.max_mask_classes != opts_.max_mask_classes ||
            got.unexpected_index_threshold != opts_.unexpected_index_threshold) {
            diverge("options() = " + options_string(got) + " but the matcher was created with " +
                    options_string(opts_) + " (all values within the documented ranges)");
        }
    }

    void exec_move(const Op &op) {
        match::TagMatcher tmp(std::move(real_));
        if (op.pick & 1) {
            match::TagMatcher other(opts_);
            other = std::move(tmp);
            real_ = std::move(other);
        } else {
            real_ = std::move(tmp);
        }
        if (cfg_.trace) {
            trace("move round trip");
        }
    }

    static constexpr size_t kStaleKeep = 256;

    Config                                 cfg_;
    match::TagMatcher                      real_;
    Model                                  model_;
    match::MatcherOptions                  opts_;
    int                                    pin_post_limit_   = -1; /* 0 match-first, 1 limit-first */
    int                                    pin_arrive_limit_ = -1;
    int                                    pin_cancel_view_  = -1; /* 0 raw, 1 masked */
    std::unordered_map<uint64_t, match::Handle> live_recv_, live_msg_;     /* model id -> handle */
    std::unordered_map<uint64_t, uint64_t>      live_recv_keys_, live_msg_keys_; /* handle -> id */
    std::vector<StaleRec>                  stale_recv_, stale_msg_;
    size_t                                 stale_recv_pos_ = 0, stale_msg_pos_ = 0;
    uint64_t                               ctx_serial_ = 0, cookie_serial_ = 0;
    uint64_t                               op_index_   = 0;
    uint64_t inst_posted_matches_ = 0, inst_unexpected_min_ = 0, inst_takes_ = 0;
    uint32_t max_index_seen_ = 0; /* largest handle index observed, either kind */
    bool                                   failed_     = false;
    int                                    nest_       = 0;
    Result                                 result_;
    std::deque<std::string>                trace_;
    std::vector<Op>                        recorded_;
    uint32_t                               alpha_         = 4;
    uint32_t                               phase_left_    = 0;
    size_t                                 target_posted_ = 16, target_unexpected_ = 16;
};

}  // namespace match_test
}  // namespace uct_tm

#endif
