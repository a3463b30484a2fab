/*
 * Google Benchmark: software tag matcher (uct_tm::match::TagMatcher).
 *
 * Every benchmark keeps the matcher at a constant depth N (the benchmark
 * argument) and times one matched message per iteration, so the reported
 * time per iteration IS the time per matched message (items_per_second is its
 * inverse). The queue is built, and two rotations of warm-up run (first-use
 * allocations, on-demand indexes), before the timed loop. All tags are precomputed; the timed
 * loop does no allocation of its own (see the allocs_per_msg counter, which
 * counts global operator new calls made by the matcher while timed).
 *
 * Cases (named after what one iteration does):
 *   exact_oldest      N exact receives; arrive the OLDEST receive's tag, then
 *                     post a fresh exact receive at the tail (FIFO rotation).
 *                     Random 64-bit tags.
 *   exact_oldest_seq  the same with sequential tags (a counter under a fixed
 *                     high field, like message numbers or a run of ranks).
 *   exact_oldest_burst16  exact_oldest (random tags) with arrivals in bursts
 *                     of 16 through arrive_batch(), posts one at a time
 *                     (see a' below).
 *   exact_newest      N exact receives that never match; post a fresh exact
 *                     receive, then arrive its tag (matches the NEWEST).
 *   mask4_oldest      N receives round-robin over four mask classes (~0,
 *                     0xffffffff00000000, 0x00000000ffffffff,
 *                     0xffff0000ffff0000); arrive a tag matched by exactly the
 *                     oldest receive, then post the next one (FIFO rotation).
 *   unexp_post_oldest N unexpected messages; arrive a fresh tag (queued as
 *                     unexpected), then post() an exact receive for the OLDEST
 *                     unexpected tag (it takes that message).
 *   unexp_claim_mask  N unexpected messages; arrive a fresh message, then
 *                     claim() the OLDEST one with mask 0xffffffff00000000.
 *   machine_*_line    not the matcher: the cost of one random cache line in
 *                     a 64 MiB array, dependent and independent (see g).
 * The depth-1 runs of exact_oldest are the baseline.
 *
 * Counters (also in the JSON output):
 *   bytes_per_posted_recv   memory_bytes() / posted_count() after building the
 *                           queue (posted-side cases); includes fixed overhead,
 *                           so it is large at tiny depths by construction.
 *   bytes_per_unexpected    memory_bytes() / unexpected_count() (unexpected cases).
 *   bytes_empty_matcher     memory_bytes() of the freshly constructed matcher.
 *   allocs_per_msg          operator new calls per timed iteration (expect 0).
 *   fallback_scans_per_msg  MatcherStats::fallback_scans per timed iteration.
 *   index_builds            MatcherStats::unexpected_index_builds while timed.
 */
#include "match/tag_matcher.h"

#include <benchmark/benchmark.h>

#include <sys/mman.h>

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <new>
#include <string>
#include <vector>

/* ---------------------------------------------------------------------------
 * Allocation counting: replace the global operator new (process wide, so it
 * sees the matcher's std containers too). malloc()/mmap() made directly by the
 * matcher are not seen.
 */
static uint64_t g_new_calls = 0;

/* Out of line, so the compiler never pairs an inlined malloc() with an inlined
 * free() across new/delete (-Wmismatched-new-delete). */
#define BENCH_NOINLINE __attribute__((noinline))

BENCH_NOINLINE static void *counted_alloc(std::size_t size, std::size_t align) {
    ++g_new_calls;
    if (size == 0) {
        size = 1;
    }
    if (align <= alignof(std::max_align_t)) {
        return std::malloc(size);
    }
    void *p = nullptr;
    return posix_memalign(&p, align, size) == 0 ? p : nullptr;
}

BENCH_NOINLINE static void counted_free(void *p) noexcept { std::free(p); }

static void *counted_alloc_or_throw(std::size_t size, std::size_t align) {
    if (void *p = counted_alloc(size, align)) {
        return p;
    }
    throw std::bad_alloc();
}

void *operator new(std::size_t size) { return counted_alloc_or_throw(size, 0); }
void *operator new[](std::size_t size) { return counted_alloc_or_throw(size, 0); }
void *operator new(std::size_t size, const std::nothrow_t &) noexcept { return counted_alloc(size, 0); }
void *operator new[](std::size_t size, const std::nothrow_t &) noexcept { return counted_alloc(size, 0); }
void *operator new(std::size_t size, std::align_val_t al) {
    return counted_alloc_or_throw(size, static_cast<std::size_t>(al));
}
void *operator new[](std::size_t size, std::align_val_t al) {
    return counted_alloc_or_throw(size, static_cast<std::size_t>(al));
}
void *operator new(std::size_t size, std::align_val_t al, const std::nothrow_t &) noexcept {
    return counted_alloc(size, static_cast<std::size_t>(al));
}
void *operator new[](std::size_t size, std::align_val_t al, const std::nothrow_t &) noexcept {
    return counted_alloc(size, static_cast<std::size_t>(al));
}
void operator delete(void *p) noexcept { counted_free(p); }
void operator delete[](void *p) noexcept { counted_free(p); }
void operator delete(void *p, std::size_t) noexcept { counted_free(p); }
void operator delete[](void *p, std::size_t) noexcept { counted_free(p); }
void operator delete(void *p, const std::nothrow_t &) noexcept { counted_free(p); }
void operator delete[](void *p, const std::nothrow_t &) noexcept { counted_free(p); }
void operator delete(void *p, std::align_val_t) noexcept { counted_free(p); }
void operator delete[](void *p, std::align_val_t) noexcept { counted_free(p); }
void operator delete(void *p, std::size_t, std::align_val_t) noexcept { counted_free(p); }
void operator delete[](void *p, std::size_t, std::align_val_t) noexcept { counted_free(p); }
void operator delete(void *p, std::align_val_t, const std::nothrow_t &) noexcept { counted_free(p); }
void operator delete[](void *p, std::align_val_t, const std::nothrow_t &) noexcept { counted_free(p); }

namespace {

using uct_tm::match::ArriveResult;
using uct_tm::match::kExactMask;
using uct_tm::match::MatcherStats;
using uct_tm::match::Message;
using uct_tm::match::PostResult;
using uct_tm::match::Tag;
using uct_tm::match::TagMatcher;

constexpr Tag kHighMask  = 0xffffffff00000000ull; /* "any tag in the low half" */
constexpr Tag kLowMask   = 0x00000000ffffffffull;
constexpr Tag kSplitMask = 0xffff0000ffff0000ull;

/* splitmix64 finalizer: a bijection on 64 bits, so distinct inputs give
 * distinct, well spread tags. */
constexpr uint64_t mix64(uint64_t x) {
    x ^= x >> 30;
    x *= 0xbf58476d1ce4e5b9ull;
    x ^= x >> 27;
    x *= 0x94d049bb133111ebull;
    x ^= x >> 31;
    return x;
}

/* Smallest power of two > n + 1 (ring of precomputed tags: a window of n + 1
 * consecutive positions never repeats a slot). */
size_t ring_size(size_t n) {
    size_t r = 4;
    while (r <= n + 1) {
        r <<= 1;
    }
    return r;
}

inline void *pos_ctx(uint64_t pos) { return reinterpret_cast<void *>(static_cast<uintptr_t>(pos + 1)); }

/* Throughput and per-message counters common to every case. */
struct LoopProbe {
    uint64_t     new_calls;
    MatcherStats stats;

    explicit LoopProbe(const TagMatcher &m) : new_calls(g_new_calls), stats(m.stats()) {}

    void report(benchmark::State &state, const TagMatcher &m) const {
        const uint64_t     allocs = g_new_calls - new_calls;
        const MatcherStats after  = m.stats();
        state.SetItemsProcessed(static_cast<int64_t>(state.iterations()));
        state.counters["allocs_per_msg"] =
            benchmark::Counter(static_cast<double>(allocs), benchmark::Counter::kAvgIterations);
        state.counters["fallback_scans_per_msg"] =
            benchmark::Counter(static_cast<double>(after.fallback_scans - stats.fallback_scans),
                               benchmark::Counter::kAvgIterations);
        state.counters["index_builds"] = static_cast<double>(after.unexpected_index_builds -
                                                             stats.unexpected_index_builds);
    }
};

void set_depth_counter(benchmark::State &state, size_t depth) {
    state.counters["depth"] = static_cast<double>(depth);
}

/* Fixed overhead: what an empty matcher already holds. */
void set_empty_bytes(benchmark::State &state, const TagMatcher &m) {
    state.counters["bytes_empty_matcher"] = static_cast<double>(m.memory_bytes());
}

void set_posted_bytes(benchmark::State &state, const TagMatcher &m) {
    const size_t n = m.posted_count();
    state.counters["bytes_per_posted_recv"] =
        n ? static_cast<double>(m.memory_bytes()) / static_cast<double>(n) : 0.0;
}

void set_unexpected_bytes(benchmark::State &state, const TagMatcher &m) {
    const size_t n = m.unexpected_count();
    state.counters["bytes_per_unexpected"] =
        n ? static_cast<double>(m.memory_bytes()) / static_cast<double>(n) : 0.0;
}

bool setup_failed(benchmark::State &state, ucs_status_t status, const char *what) {
    if (status == UCS_OK) {
        return false;
    }
    state.SkipWithError((std::string("setup: ") + what + " failed, status " +
                         std::to_string(static_cast<int>(status))).c_str());
    return true;
}

/* Runs two full rotations of the queue before timing, so one-time events
 * (first use of a mask class, the index's single growth after the initial
 * fill, on-demand unexpected indexes) are not counted as steady state. */
template <typename Step> bool warm_up(Step &step, size_t n) {
    for (size_t i = 0; i < 2 * n + 8; ++i) {
        if (!step()) {
            return false;
        }
    }
    return true;
}

/* ---------------------------------------------------------------------------
 * a. exact tags, match oldest (FIFO rotation). Two tag distributions:
 *    random 64-bit tags (worst case for caches: every lookup lands on an
 *    unrelated line) and sequential tags (a message sequence number, or a
 *    run of source ranks: the MPI-like case).
 */
enum class TagKind { kRandom, kSequential };

/* The tags of ring positions [0, r). Sequential: a context id in the high
 * bits, a counter below. */
std::vector<Tag> fifo_tags(TagKind kind, size_t r) {
    std::vector<Tag> tags(r);
    for (size_t i = 0; i < r; ++i) {
        tags[i] = (kind == TagKind::kRandom) ? mix64(i) : ((uint64_t{0x2a} << 40) | i);
    }
    return tags;
}

/* Posts exact receives for positions [0, n) and records the memory counters. */
bool post_fifo(benchmark::State &state, TagMatcher &m, const std::vector<Tag> &tags, size_t n) {
    set_empty_bytes(state, m);
    for (uint64_t p = 0; p < n; ++p) {
        if (setup_failed(state, m.post(tags[p], kExactMask, pos_ctx(p)).status, "post")) {
            return false;
        }
    }
    set_posted_bytes(state, m);
    set_depth_counter(state, m.posted_count());
    return true;
}

template <TagKind kKind> void BM_exact_oldest_impl(benchmark::State &state) {
    const size_t           n    = static_cast<size_t>(state.range(0));
    const uint64_t         rm   = ring_size(n) - 1;
    const std::vector<Tag> tags = fifo_tags(kKind, rm + 1);
    TagMatcher             m;
    if (!post_fifo(state, m, tags, n)) {
        return;
    }

    uint64_t head = 0; /* position of the oldest receive; queue = [head, head + n) */
    auto step = [&]() -> bool {
        ArriveResult a = m.arrive(tags[head & rm], head);
        PostResult   p = m.post(tags[(head + n) & rm], kExactMask, pos_ctx(head + n));
        const bool ok  = a.matched & (a.recv.ctx == pos_ctx(head)) & (p.status == UCS_OK) & !p.matched;
        ++head;
        return ok;
    };
    if (!warm_up(step, n)) {
        state.SkipWithError("warm-up: oldest receive not matched");
        return;
    }

    LoopProbe probe(m);
    for (auto _ : state) {
        if (BENCHMARK_BUILTIN_EXPECT(!step(), false)) {
            state.SkipWithError("arrival did not match the oldest receive");
            break;
        }
    }
    probe.report(state, m);
}

/* ---------------------------------------------------------------------------
 * a'. the same FIFO rotation with arrivals in bursts, as a transport sees them:
 * a shared-memory FIFO or a CQ poll returns several headers at once. Each
 * round, the application posts B fresh exact receives one at a time (post()),
 * then one poll returns B headers, for the B oldest receives, which go to
 * arrive_batch() in arrival order. B = 16 (what UCX's transports poll per
 * progress call by default), or N when N < 16. The queue depth stays between
 * N and N + B, every message is still one post plus one matched arrival, and
 * the time is reported per message (a round every B iterations).
 */
constexpr size_t kBurst = 16;

template <TagKind kKind> void BM_exact_oldest_burst_impl(benchmark::State &state) {
    const size_t           n    = static_cast<size_t>(state.range(0));
    const size_t           b    = std::min(kBurst, n);
    const uint64_t         rm   = ring_size(n + kBurst) - 1;
    const std::vector<Tag> tags = fifo_tags(kKind, rm + 1);
    TagMatcher             m;
    if (!post_fifo(state, m, tags, n)) {
        return;
    }

    uint64_t     head = 0; /* oldest receive; queue = [head, head + n) between rounds */
    Tag          burst[kBurst];
    uint64_t     cookies[kBurst];
    ArriveResult out[kBurst];
    auto round = [&]() -> bool {
        bool ok = true;
        for (size_t j = 0; j < b; ++j) {
            const uint64_t q = head + n + j;
            PostResult     p = m.post(tags[q & rm], kExactMask, pos_ctx(q));
            ok &= (p.status == UCS_OK) & !p.matched;
        }
        for (size_t j = 0; j < b; ++j) {
            burst[j]   = tags[(head + j) & rm];
            cookies[j] = head + j;
        }
        m.arrive_batch(burst, cookies, b, out);
        for (size_t j = 0; j < b; ++j) {
            ok &= out[j].matched & (out[j].recv.ctx == pos_ctx(head + j));
        }
        head += b;
        return ok;
    };
    for (size_t i = 0; i < (2 * n + 8) / b + 1; ++i) {
        if (!round()) {
            state.SkipWithError("warm-up: a burst did not match the oldest receives");
            return;
        }
    }

    LoopProbe probe(m);
    size_t    k = 0;
    for (auto _ : state) {
        if (++k == b) {
            k = 0;
            if (BENCHMARK_BUILTIN_EXPECT(!round(), false)) {
                state.SkipWithError("a burst did not match the oldest receives");
                break;
            }
        }
    }
    probe.report(state, m);
    state.counters["burst"] = static_cast<double>(b);
}

/* ---------------------------------------------------------------------------
 * b. exact tags, match newest: N standing receives, one fresh receive posted
 * and matched per iteration.
 */
void BM_exact_newest(benchmark::State &state) {
    const size_t   n      = static_cast<size_t>(state.range(0));
    constexpr size_t kFresh = 4096; /* fresh tags, disjoint from the standing ones */
    std::vector<Tag> standing(n), fresh(kFresh);
    for (size_t i = 0; i < n; ++i) {
        standing[i] = mix64(i);
    }
    for (size_t i = 0; i < kFresh; ++i) {
        fresh[i] = mix64(n + i); /* mix64 is a bijection: never a standing tag */
    }

    TagMatcher m;
    set_empty_bytes(state, m);
    for (uint64_t p = 0; p < n; ++p) {
        if (setup_failed(state, m.post(standing[p], kExactMask, pos_ctx(p)).status, "post")) {
            return;
        }
    }
    set_posted_bytes(state, m);
    set_depth_counter(state, m.posted_count());

    uint64_t k = 0;
    void *const ctx = pos_ctx(n);
    auto step = [&]() -> bool {
        const Tag    t = fresh[k & (kFresh - 1)];
        PostResult   p = m.post(t, kExactMask, ctx);
        ArriveResult a = m.arrive(t, k);
        ++k;
        return (p.status == UCS_OK) & !p.matched & a.matched & (a.recv.ctx == ctx);
    };
    if (!warm_up(step, n)) {
        state.SkipWithError("warm-up: newest receive not matched");
        return;
    }

    LoopProbe probe(m);
    for (auto _ : state) {
        if (BENCHMARK_BUILTIN_EXPECT(!step(), false)) {
            state.SkipWithError("arrival did not match the newest receive");
            break;
        }
    }
    probe.report(state, m);
}

/* ---------------------------------------------------------------------------
 * c. four mask classes, round-robin, FIFO rotation.
 *
 * Receive at ring position q has class c = q % 4 and a key u unique among
 * positions of that class. Every receive tag and every arrival tag carries c
 * in bits 63:62 and in bits 31:30; each non-exact mask covers at least one of
 * those fields, so an arrival aimed at class c can never match a receive of
 * another class, and within a class the key is unique:
 *   c = 0  mask ~0                   key: all bits (u in 61:32, junk in 29:0)
 *   c = 1  mask 0xffffffff00000000   key: u in bits 61:32
 *   c = 2  mask 0x00000000ffffffff   key: u in bits 29:0
 *   c = 3  mask 0xffff0000ffff0000   key: u split over bits 61:48 and 29:16
 * The receive's tag differs from the arrival's in bits outside its mask
 * (they must be ignored).
 */
struct Mask4Tags {
    std::vector<Tag> post_tag, arrive_tag;
    uint64_t         rm;
    static constexpr Tag kMasks[4] = {kExactMask, kHighMask, kLowMask, kSplitMask};

    explicit Mask4Tags(size_t n) {
        const size_t r = ring_size(n);
        rm             = r - 1;
        post_tag.resize(r);
        arrive_tag.resize(r);
        for (size_t q = 0; q < r; ++q) {
            const uint64_t c    = q & 3;
            const uint64_t cls  = (c << 62) | (c << 30);
            const uint64_t idx  = q >> 2;                 /* < 2^19 for N <= 1 Mi */
            const uint64_t junk = mix64(q ^ 0x5555aaaa5555aaaaull);
            uint64_t key = 0, keymask = 0; /* bits that identify the receive */
            switch (c) {
            case 0:
                key     = (((idx * 0x9e3779b1ull) & 0x3fffffffull) << 32) | (junk & 0x3fffffffull);
                keymask = 0x3fffffff3fffffffull;
                break;
            case 1:
                key     = ((idx * 0x9e3779b1ull) & 0x3fffffffull) << 32;
                keymask = 0x3fffffff00000000ull;
                break;
            case 2:
                key     = (idx * 0x9e3779b1ull) & 0x3fffffffull;
                keymask = 0x000000003fffffffull;
                break;
            default: {
                const uint64_t u = (idx * 0x9e3779b1ull) & 0xfffffffull; /* 28 bits */
                key     = ((u >> 14) << 48) | ((u & 0x3fff) << 16);
                keymask = 0x3fff00003fff0000ull;
                break;
            }
            }
            const uint64_t free_bits = ~(keymask | 0xc0000000c0000000ull);
            const uint64_t junk2     = mix64(junk);
            arrive_tag[q] = cls | key | (junk & free_bits);
            post_tag[q]   = cls | key | (junk2 & free_bits); /* outside-mask bits differ */
        }
    }
};

void BM_mask4_oldest(benchmark::State &state) {
    const size_t n = static_cast<size_t>(state.range(0));
    Mask4Tags    t(n);
    const uint64_t rm = t.rm;

    TagMatcher m;
    set_empty_bytes(state, m);
    for (uint64_t p = 0; p < n; ++p) {
        if (setup_failed(state, m.post(t.post_tag[p], Mask4Tags::kMasks[p & 3], pos_ctx(p)).status,
                         "post")) {
            return;
        }
    }
    set_posted_bytes(state, m);
    set_depth_counter(state, m.posted_count());

    uint64_t head = 0;
    auto step = [&]() -> bool {
        ArriveResult   a = m.arrive(t.arrive_tag[head & rm], head);
        const uint64_t q = head + n;
        PostResult     p = m.post(t.post_tag[q & rm], Mask4Tags::kMasks[q & 3], pos_ctx(q));
        const bool ok = a.matched & (a.recv.ctx == pos_ctx(head)) & (p.status == UCS_OK) & !p.matched;
        ++head;
        return ok;
    };
    if (!warm_up(step, n)) {
        state.SkipWithError("warm-up: arrival did not match the intended receive");
        return;
    }

    LoopProbe probe(m);
    for (auto _ : state) {
        if (BENCHMARK_BUILTIN_EXPECT(!step(), false)) {
            state.SkipWithError("arrival did not match the intended (oldest) receive");
            break;
        }
    }
    probe.report(state, m);
    state.counters["mask_classes_in_use"] = static_cast<double>(m.stats().mask_classes_in_use);
}

/* ---------------------------------------------------------------------------
 * d. unexpected first: N unexpected messages; arrive a fresh one, then post
 * an exact receive for the oldest (FIFO rotation of the unexpected queue).
 */
void BM_unexp_post_oldest(benchmark::State &state) {
    const size_t   n  = static_cast<size_t>(state.range(0));
    const size_t   r  = ring_size(n);
    const uint64_t rm = r - 1;
    std::vector<Tag> tags(r);
    for (size_t i = 0; i < r; ++i) {
        tags[i] = mix64(i);
    }

    TagMatcher m;
    set_empty_bytes(state, m);
    for (uint64_t p = 0; p < n; ++p) {
        ArriveResult a = m.arrive(tags[p], p);
        if (setup_failed(state, a.status, "arrive")) {
            return;
        }
    }
    set_unexpected_bytes(state, m);
    set_depth_counter(state, m.unexpected_count());

    uint64_t head = 0; /* oldest unexpected message; queue = [head, head + n) */
    void *const ctx = pos_ctx(0);
    auto step = [&]() -> bool {
        const uint64_t q = head + n;
        ArriveResult   a = m.arrive(tags[q & rm], q);
        PostResult     p = m.post(tags[head & rm], kExactMask, ctx);
        const bool ok = (a.status == UCS_OK) & !a.matched & p.matched & (p.message.cookie == head);
        ++head;
        return ok;
    };
    if (!warm_up(step, n)) {
        state.SkipWithError("warm-up: post did not take the oldest unexpected message");
        return;
    }

    LoopProbe probe(m);
    for (auto _ : state) {
        if (BENCHMARK_BUILTIN_EXPECT(!step(), false)) {
            state.SkipWithError("post did not take the oldest unexpected message");
            break;
        }
    }
    probe.report(state, m);
}

/* ---------------------------------------------------------------------------
 * e. masked probe against a deep unexpected queue: N unexpected messages whose
 * high 32 bits are unique; arrive a fresh one, then claim() the oldest with
 * mask 0xffffffff00000000 (probe tag's low half differs from the message's).
 */
void BM_unexp_claim_mask(benchmark::State &state) {
    const size_t   n  = static_cast<size_t>(state.range(0));
    const size_t   r  = ring_size(n);
    const uint64_t rm = r - 1;
    std::vector<Tag> tags(r), probes(r);
    for (size_t i = 0; i < r; ++i) {
        const uint64_t hi = (i * 0x9e3779b1ull) & 0xffffffffull; /* bijective mod 2^32 */
        const uint64_t lo = mix64(i) & 0xffffffffull;
        tags[i]   = (hi << 32) | lo;
        probes[i] = (hi << 32) | (~lo & 0xffffffffull);
    }

    TagMatcher m;
    set_empty_bytes(state, m);
    for (uint64_t p = 0; p < n; ++p) {
        ArriveResult a = m.arrive(tags[p], p);
        if (setup_failed(state, a.status, "arrive")) {
            return;
        }
    }
    set_unexpected_bytes(state, m);
    set_depth_counter(state, m.unexpected_count());

    uint64_t head = 0;
    Message  msg;
    auto step = [&]() -> bool {
        const uint64_t     q  = head + n;
        ArriveResult       a  = m.arrive(tags[q & rm], q);
        const ucs_status_t st = m.claim(probes[head & rm], kHighMask, &msg);
        const bool ok = (a.status == UCS_OK) & !a.matched & (st == UCS_OK) & (msg.cookie == head);
        ++head;
        return ok;
    };
    /* Warm-up: the first masked claim may build the unexpected-side index. */
    if (!warm_up(step, n)) {
        state.SkipWithError("warm-up: claim did not return the oldest message");
        return;
    }
    set_unexpected_bytes(state, m); /* now including the mask index */

    LoopProbe probe(m);
    for (auto _ : state) {
        if (BENCHMARK_BUILTIN_EXPECT(!step(), false)) {
            state.SkipWithError("claim did not return the oldest message");
            break;
        }
    }
    probe.report(state, m);
}

/* ---------------------------------------------------------------------------
 * g. the machine itself, for reading the deep random-tag figures: what one
 * random cache line costs in a 64 MiB array (1 Mi lines: the order of
 * magnitude of a 1 Mi-receive matcher, 2 MiB pages advised like the
 * matcher's tables).
 *   machine_dependent_line    each load's address comes from the previous
 *                             load (a random cyclic permutation): latency.
 *   machine_independent_line  addresses known in advance (read in order from
 *                             an array), so the loads overlap: throughput, the
 *                             floor for any structure that touches a random
 *                             line per operation.
 * The argument is the number of lines.
 */
struct LineBuffer {
    uint64_t *lines = nullptr; /* 8 words (one cache line) per entry */
    size_t    n     = 0;

    explicit LineBuffer(size_t count) : n(count) {
        const size_t bytes = n * 64;
        void        *p     = std::aligned_alloc(size_t{2} << 20, bytes);
        if (p != nullptr) {
            (void)madvise(p, bytes, MADV_HUGEPAGE);
            lines = static_cast<uint64_t *>(p);
            std::memset(p, 0, bytes);
        }
    }
    ~LineBuffer() { std::free(lines); }
    LineBuffer(const LineBuffer &)            = delete;
    LineBuffer &operator=(const LineBuffer &) = delete;
};

void BM_machine_dependent_line(benchmark::State &state) {
    LineBuffer buf(static_cast<size_t>(state.range(0)));
    if (buf.lines == nullptr) {
        state.SkipWithError("64 MiB allocation failed");
        return;
    }
    /* Sattolo's shuffle: one cycle through every line */
    std::vector<uint32_t> perm(buf.n);
    for (size_t i = 0; i < buf.n; ++i) {
        perm[i] = static_cast<uint32_t>(i);
    }
    uint64_t rng = 12345;
    for (size_t i = buf.n - 1; i > 0; --i) {
        rng = mix64(rng + i);
        std::swap(perm[i], perm[rng % i]);
    }
    for (size_t i = 0; i < buf.n; ++i) {
        buf.lines[perm[i] * size_t{8}] = perm[(i + 1) % buf.n];
    }
    uint64_t x = perm[0];
    for (auto _ : state) {
        x = buf.lines[x * 8];
    }
    benchmark::DoNotOptimize(x);
}

void BM_machine_independent_line(benchmark::State &state) {
    LineBuffer buf(static_cast<size_t>(state.range(0)));
    if (buf.lines == nullptr) {
        state.SkipWithError("64 MiB allocation failed");
        return;
    }
    std::vector<uint32_t> where(buf.n);
    for (size_t i = 0; i < buf.n; ++i) {
        where[i] = static_cast<uint32_t>(mix64(i) % buf.n);
    }
    const size_t mask = buf.n - 1; /* a power of two */
    uint64_t     sum  = 0;
    size_t       i    = 0;
    for (auto _ : state) {
        sum += buf.lines[where[i++ & mask] * size_t{8}];
    }
    benchmark::DoNotOptimize(sum);
}

/* Depths 1 .. 1 Mi. MinTime(0.2) keeps the whole run (5 cases x 6 depths,
 * 3 repetitions) around a minute; the 1 Mi queues still rotate several times. */
void depths(benchmark::internal::Benchmark *b) {
    for (int64_t n : {1, 16, 256, 4096, 65536, 1048576}) {
        b->Arg(n);
    }
    b->ArgName("depth");
    b->MinTime(0.2);
    b->Unit(benchmark::kNanosecond);
}

}  // namespace

void BM_exact_oldest(benchmark::State &state) { BM_exact_oldest_impl<TagKind::kRandom>(state); }
void BM_exact_oldest_seq(benchmark::State &state) { BM_exact_oldest_impl<TagKind::kSequential>(state); }
void BM_exact_oldest_burst16(benchmark::State &state) { BM_exact_oldest_burst_impl<TagKind::kRandom>(state); }

BENCHMARK(BM_exact_oldest)->Apply(depths);
BENCHMARK(BM_exact_oldest_seq)->Apply(depths);
BENCHMARK(BM_exact_oldest_burst16)->Apply(depths);
BENCHMARK(BM_exact_newest)->Apply(depths);
BENCHMARK(BM_mask4_oldest)->Apply(depths);
BENCHMARK(BM_unexp_post_oldest)->Apply(depths);
BENCHMARK(BM_unexp_claim_mask)->Apply(depths);
BENCHMARK(BM_machine_dependent_line)->Arg(1 << 20)->ArgName("depth")->MinTime(0.2)->Unit(benchmark::kNanosecond);
BENCHMARK(BM_machine_independent_line)->Arg(1 << 20)->ArgName("depth")->MinTime(0.2)->Unit(benchmark::kNanosecond);

BENCHMARK_MAIN();
