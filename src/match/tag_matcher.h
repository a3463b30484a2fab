/*
 * uct-tm software tag matcher.
 *
 * A single-threaded engine holding two queues:
 *  - posted receives: (tag, mask, user context), in posting order;
 *  - unexpected messages: (tag, user cookie), in arrival order.
 *
 * Matching rule (UCT's): a message tagged `t` matches a receive (`r`, `m`) iff
 * `(t & m) == (r & m)`. Bits of `r` outside `m` are ignored.
 *
 * Ordering rule (MPI's): an arriving message matches the earliest-posted
 * matching receive; a newly posted receive (or a probe) takes the
 * earliest-arrived matching unexpected message. Every posted receive leaves the
 * engine exactly once: matched, cancelled or drained.
 *
 * Cost: exact receives (mask = all ones) are hashed, O(1) at any depth. Every
 * other distinct mask in use gets its own hash index keyed by `tag & mask`; an
 * arrival looks up each index once and takes the candidate with the lowest
 * posting sequence, so the cost follows the number of distinct masks, not the
 * number of receives. Past `Options::max_mask_classes` distinct masks, extra
 * masks share one linear list (bounded fallback). The unexpected side keeps an
 * exact-tag index, an arrival-ordered list (answers mask 0 in O(1)) and up to
 * `Options::max_unexpected_indexes` mask indexes built on demand; a mask with no
 * index falls back to a scan of the arrival list.
 *
 * Memory: entries live in pools and are reused; steady-state operations do
 * not allocate. Pools and hash tables only grow when a queue reaches a new
 * maximum depth.
 *
 * Speed: post / post_expected_only of an exact receive, and arrive /
 * match_posted while only exact receives are posted, are inline (this header)
 * and touch one table line and one entry; everything else is out of line.
 * arrive_batch / match_posted_batch take a burst of arrivals (a FIFO or CQ
 * poll) and start every lookup's memory loads before matching the first one.
 *
 * Not thread safe: one matcher per worker. A moved-from matcher may only be
 * destroyed or assigned to.
 */
#ifndef UCT_TM_MATCH_TAG_MATCHER_H_
#define UCT_TM_MATCH_TAG_MATCHER_H_

#include "bucket_table.h"
#include "flat_pool.h"

#include <ucs/type/status.h>

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <memory>
#include <vector>

namespace uct_tm {
namespace match {

using Tag = uint64_t;

inline constexpr Tag kExactMask = ~Tag{0};

/* True iff a message tagged `msg_tag` matches a receive (`recv_tag`, `mask`). */
inline constexpr bool tag_matches(Tag msg_tag, Tag recv_tag, Tag mask) {
    return ((msg_tag ^ recv_tag) & mask) == 0;
}

/*
 * Identifies one posted receive, or one unexpected message. A default
 * constructed handle is null. A handle goes stale when its entry leaves the
 * engine; stale handles are detected by a 32-bit generation per slot and
 * rejected (a handle kept across 2^31 reuses of its slot would alias).
 */
struct Handle {
    uint32_t index      = 0;
    uint32_t generation = 0; /* 0 = null handle */

    constexpr bool is_null() const { return generation == 0; }
    friend constexpr bool operator==(Handle a, Handle b) {
        return a.index == b.index && a.generation == b.generation;
    }
    friend constexpr bool operator!=(Handle a, Handle b) { return !(a == b); }
};

using RecvHandle = Handle;
using MsgHandle  = Handle;

/* An unexpected message as stored: its tag and the caller's cookie. */
struct Message {
    Tag       tag    = 0;
    uint64_t  cookie = 0;
    MsgHandle handle;  /* valid until the message leaves the engine */
};

/* A posted receive as stored: `tag` is the tag as posted (bits outside
 * `mask` included); cancel_matching() filters on it. */
struct Receive {
    Tag   tag  = 0;
    Tag   mask = 0;
    void *ctx  = nullptr;
};

/* Outcome of post(): either the receive is queued, or it took an unexpected message. */
struct PostResult {
    ucs_status_t status  = UCS_OK; /* UCS_OK, or an error (nothing changed) */
    bool         matched = false;  /* true: `message` was unexpected and is now consumed */
    RecvHandle   handle;           /* queued receive (when !matched) */
    Message      message;          /* the consumed unexpected message (when matched) */
};

/* Outcome of arrive(): either a posted receive matched, or the message is queued. */
struct ArriveResult {
    ucs_status_t status  = UCS_OK; /* UCS_OK, or an error (nothing changed) */
    bool         matched = false;  /* true: `recv` left the posted queue */
    Receive      recv;             /* the matched receive (when matched) */
    MsgHandle    handle;           /* the queued unexpected message (when !matched) */
};

struct MatcherOptions {
    /* Maximum posted receives; post() beyond it returns UCS_ERR_EXCEEDS_LIMIT. */
    size_t   max_posted = SIZE_MAX;
    /* Maximum unexpected messages; arrive() beyond it returns UCS_ERR_EXCEEDS_LIMIT. */
    size_t   max_unexpected = SIZE_MAX;
    /* Distinct non-exact masks with their own posted-side index (0..1024);
     * receives with further masks share one linear list. */
    uint32_t max_mask_classes = 64;
    /* Mask indexes on the unexpected side besides the exact one (0..4). */
    uint32_t max_unexpected_indexes = 4;
    /* Below this many unexpected messages, a masked search scans instead of
     * building an index. */
    uint32_t unexpected_index_threshold = 32;
    /* Once the exact-receive index holds this many bytes (its lines start
     * missing the caches), an exact post whose index line is not next to the
     * previous post's prefetches that line and is inserted up to 16 posts
     * later; arrivals look at those staged receives too (invisible to the
     * contract). 0: from the first post; SIZE_MAX: never. */
    size_t   staging_min_index_bytes = size_t{512} << 10;
};

/* Counters for diagnostics and tests. */
struct MatcherStats {
    uint64_t posted_matches       = 0; /* arrivals that matched a posted receive */
    uint64_t unexpected_matches   = 0; /* post(), claim() and take() that removed an unexpected message */
    uint64_t fallback_scans       = 0; /* searches that walked a linear list */
    uint64_t unexpected_index_builds = 0;
    uint32_t mask_classes_in_use  = 0; /* non-exact posted mask classes holding receives */
};

namespace detail {

struct Links {
    uint32_t next;
    uint32_t prev;
};

/* A posted receive. Zero-filled = never used. */
struct PostedEntry {
    Tag      tag;  /* as posted */
    void    *ctx;
    uint64_t seq;  /* posting order */
    Links    link; /* FIFO ring of its key (or the overflow ring); free list while free */
    uint32_t gen;  /* odd while posted: handles carry it */
    uint16_t cls;  /* 0 = exact, else its mask class (kOverflowClass: overflow ring) */
    uint16_t unused;

    uint32_t &free_link() { return link.next; }
};
static_assert(sizeof(PostedEntry) == 40, "posted receive entry must stay compact");

}  // namespace detail

class TagMatcher {
  public:
    explicit TagMatcher(const MatcherOptions &options = MatcherOptions());
    ~TagMatcher();
    TagMatcher(TagMatcher &&) noexcept;
    TagMatcher &operator=(TagMatcher &&) noexcept;
    TagMatcher(const TagMatcher &)            = delete;
    TagMatcher &operator=(const TagMatcher &) = delete;

    /*
     * Post a receive. If an unexpected message matches, the earliest-arrived
     * one is removed and returned (matched = true, nothing is queued).
     * Otherwise the receive is queued and its handle returned.
     * Errors: UCS_ERR_EXCEEDS_LIMIT (max_posted reached and nothing
     *         unexpected matched: a receive that takes an unexpected message
     *         is never refused), UCS_ERR_NO_MEMORY (pool growth failed).
     *         Nothing changes on error.
     */
    [[gnu::always_inline]] PostResult post(Tag tag, Tag mask, void *ctx) {
        if (__builtin_expect((mask == kExactMask) && (unexpected_count_ == 0) && exact_post_ready(), 1)) {
            return post_exact(tag, ctx);
        }
        return post_general(tag, mask, ctx, true);
    }

    /*
     * Post a receive without looking at the unexpected queue (UCT transports:
     * the layer above owns past arrivals). Same errors as post().
     */
    [[gnu::always_inline]] PostResult post_expected_only(Tag tag, Tag mask, void *ctx) {
        if (__builtin_expect((mask == kExactMask) && exact_post_ready(), 1)) {
            return post_exact(tag, ctx);
        }
        return post_general(tag, mask, ctx, false);
    }

    /*
     * A message tagged `tag` arrives. If a posted receive matches, the
     * earliest-posted one is removed and returned. Otherwise the message is
     * queued as unexpected with `cookie`.
     * Errors: UCS_ERR_EXCEEDS_LIMIT (max_unexpected reached and no posted
     *         receive matched: a matching arrival is never refused),
     *         UCS_ERR_NO_MEMORY. Nothing changes on error.
     */
    [[gnu::always_inline]] ArriveResult arrive(Tag tag, uint64_t cookie) {
        if (__builtin_expect(masked_posted_ == 0, 1)) {
            return arrive_exact(tag, exact_.hash_low(tag), cookie);
        }
        return arrive_general(tag, cookie, true);
    }

    /*
     * Like arrive() but never queues: returns matched = false when no posted
     * receive matches (the caller handles the unexpected message itself).
     */
    [[gnu::always_inline]] ArriveResult match_posted(Tag tag) {
        if (__builtin_expect(masked_posted_ == 0, 1)) {
            return match_exact(tag, exact_.hash_low(tag));
        }
        return arrive_general(tag, 0, false);
    }

    /*
     * The context of the receive match_posted(tag) would return, left
     * posted; null if none. Lets a caller holding receives in several
     * matchers (by source) take the earliest by its own posting order.
     */
    void *peek_posted(Tag tag);

    /*
     * A burst of n arrivals (e.g. the headers one FIFO or CQ poll returned):
     * exactly as n calls arrive(tags[i], cookies[i]) -- or match_posted(tags[i])
     * -- in index order, with the results in out[0, n). The difference is
     * speed on deep queues: the index lines (and the likely entries) of the
     * whole burst are requested from memory before the first one is matched,
     * so their cache misses overlap instead of following one another.
     * Errors are per message, as for arrive(); n = 0 does nothing.
     */
    void arrive_batch(const Tag *tags, const uint64_t *cookies, size_t n, ArriveResult *out);
    void match_posted_batch(const Tag *tags, size_t n, ArriveResult *out);

    /*
     * Cancel a posted receive; on UCS_OK its context is stored in *ctx (may be
     * null). Returns
     *   UCS_ERR_INVALID_PARAM: null handle, or index never issued;
     *   UCS_ERR_NO_ELEM: the receive already left (matched, cancelled, drained).
     */
    ucs_status_t cancel(RecvHandle handle, void **ctx = nullptr);

    /*
     * Probe the unexpected queue for the earliest-arrived message matching
     * (tag, mask). peek() leaves it queued; claim() removes it.
     * Returns UCS_OK with *msg filled, or UCS_ERR_NO_ELEM if none matches.
     * UCS_ERR_INVALID_PARAM if msg is null.
     */
    ucs_status_t peek(Tag tag, Tag mask, Message *msg);
    ucs_status_t claim(Tag tag, Tag mask, Message *msg);

    /*
     * Remove one unexpected message by handle (e.g. after a peek).
     * Errors as cancel(). On UCS_OK *msg (if non-null) gets its contents.
     */
    ucs_status_t take(MsgHandle handle, Message *msg = nullptr);

    /*
     * Cancel every posted receive whose tag, restricted to `mask`, equals
     * `tag & mask` (mask 0 cancels all). `on_cancel(ctx)` is called once per
     * receive, in posting order, after it left the engine (it may call back
     * into the matcher). Returns the number cancelled.
     */
    template <typename Fn> size_t cancel_matching(Tag tag, Tag mask, Fn &&on_cancel);

    /*
     * Empty the engine. Posted receives are reported to on_recv(ctx) in
     * posting order, then unexpected messages to on_msg(const Message &) in
     * arrival order. All handles become stale. Options are kept.
     */
    template <typename RecvFn, typename MsgFn> void drain(RecvFn &&on_recv, MsgFn &&on_msg);

    size_t posted_count() const { return posted_.live(); }
    size_t unexpected_count() const { return unexpected_count_; }
    /* Bytes held by pools and indexes (for memory-per-entry measurements). */
    size_t memory_bytes() const;
    MatcherStats stats() const;
    const MatcherOptions &options() const;

  private:
    struct Impl;
    using Entry = detail::PostedEntry;
    using Table = detail::BucketTable;

    /* Key of an exact receive: its tag. */
    struct ExactKey {
        const detail::FlatPool<Entry> *pool;
        Tag operator()(uint32_t i) const { return (*pool)[i].tag; }
    };
    ExactKey exact_key() const { return ExactKey{&posted_}; }

    /* An exact receive can be queued without growing anything or hitting
     * max_posted (the index has room for it and for every staged receive). */
    bool exact_post_ready() const {
        return (posted_.live() < posted_room_) && (exact_.size() + stage_count_ < exact_.max_size());
    }

    PostResult   post_exact(Tag tag, void *ctx);
    void         index_exact(uint32_t idx, Table::Hash h);
    void         unstage_oldest();
    void         unstage_all();
    void         stage_exact(uint32_t idx, Table::Hash h);
    bool         take_staged(Tag tag, Table::Hash h, Receive *recv);
    ArriveResult arrive_exact(Tag tag, Table::Hash h, uint64_t cookie);
    ArriveResult match_exact(Tag tag, Table::Hash h);
    bool         take_exact_any(Tag tag, Table::Hash h, Receive *recv);
    void         take_exact(Table::Ref slot, Table::Hash h, Receive *recv);

    /* Out of line: masks, unexpected messages, growth, limits, errors. */
    PostResult   post_general(Tag tag, Tag mask, void *ctx, bool check_unexpected);
    PostResult   enqueue_posted(Tag tag, Tag mask, void *ctx);
    ArriveResult arrive_general(Tag tag, uint64_t cookie, bool queue);
    ArriveResult queue_unexpected(Tag tag, uint64_t cookie);
    bool         take_posted_any(Tag tag, Receive *recv);
    /* The earliest posted receive a tag matches, where it heads its key's
     * ring (table null: the overflow ring); idx kNoIndex if none. */
    struct Found {
        uint32_t    idx   = UINT32_MAX;
        uint64_t    seq   = UINT64_MAX;
        Tag         mask  = 0;
        Table      *table = nullptr;
        Table::Ref  slot  = nullptr;
        Table::Hash hash{};
    };
    /* take_posted_any()'s and peek_posted()'s steps (tag_matcher.cc) */
    Found        find_posted_any(Tag tag);
    uint32_t     scan_overflow(Tag tag, uint64_t before);
    void         unlink_head(uint32_t idx, Table *table, Table::Ref slot, Table::Hash h);
    void         remove_posted(uint32_t idx);
    void         batch(const Tag *tags, const uint64_t *cookies, size_t n, ArriveResult *out);
    void         update_posted_room();

    /* Non-template halves of cancel_matching()/drain(): remove, then report
     * from a private copy so callbacks may re-enter the matcher. */
    std::vector<void *> remove_matching(Tag tag, Tag mask);
    std::vector<void *> remove_all_posted();
    std::vector<Message> remove_all_unexpected();

    /* Hot state of the exact fast path, inline in the object. */
    detail::FlatPool<Entry> posted_;
    Table                   exact_;
    /* min(max_posted, pool capacity): below it an exact post needs no growth */
    size_t                  posted_room_      = 0;
    uint64_t                posted_seq_       = 0;
    /* receives in masked classes or the overflow ring: arrivals then merge classes */
    size_t                  masked_posted_    = 0;
    size_t                  unexpected_count_ = 0;

    /* Staged exact posts (see MatcherOptions::staging_min_index_bytes): the
     * entry is written at once, its index line prefetched, and the index
     * insert done kStage posts later, or before any operation other than an
     * exact post or arrival. Staged receives are newer than every indexed
     * one (the ring is inserted in order, and a post that is not staged
     * first inserts all staged ones), so an arrival takes an index hit if
     * there is one, else the oldest staged match. */
    static constexpr uint32_t kStage = 16;
    struct Staged {
        Table::Hash h;
        uint32_t    idx; /* kNoIndex: taken by an arrival */
    };
    Staged      stage_[kStage];
    alignas(16) int8_t stage_ctrl_[kStage] = {}; /* control bytes by position; kEmptyCtrl: taken */
    uint32_t    stage_head_  = 0;
    uint32_t    stage_count_ = 0;
    bool        staging_     = false;
    uintptr_t   last_home_   = 0; /* previous exact post's index line (compared only) */
    std::unique_ptr<Impl>   impl_;
};

/* The exact fast path reads every member it needs before its first store:
 * stores through the table's vector type may alias anything, and would force
 * reloads. */
/* Inserts a written exact entry into the index (or appends it to its key's ring). */
[[gnu::always_inline]] inline void TagMatcher::index_exact(uint32_t idx, Table::Hash h) {
    Entry *const       base  = posted_.data();
    const Table::Found found = exact_.find_or_insert_fast(
            base[idx].tag, h, [base](uint32_t i) { return base[i].tag; }, idx);
    Entry &e = base[idx];
    if (__builtin_expect(found.inserted, 1)) {
        e.link = detail::Links{idx, idx};
    } else {
        /* append to the key's FIFO ring: the head's prev is the tail */
        const uint32_t first  = *found.ref;
        const uint32_t tail   = base[first].link.prev;
        e.link                = detail::Links{first, tail};
        base[tail].link.next  = idx;
        base[first].link.prev = idx;
    }
}

[[gnu::always_inline]] inline void TagMatcher::unstage_oldest() {
    /* its control byte is left as is: past stage_count_, take_staged() never
     * looks at it, and the next staged post overwrites it */
    const Staged s = stage_[stage_head_];
    stage_head_    = (stage_head_ + 1) % kStage;
    --stage_count_;
    if (s.idx != kNoIndex) {
        index_exact(s.idx, s.h);
    }
}

[[gnu::always_inline]] inline PostResult TagMatcher::post_exact(Tag tag, void *ctx) {
    Entry *const      base = posted_.data();
    const Table::Hash h    = exact_.hash_low(tag);
    const uint32_t    idx  = posted_.take();
    Entry            &e    = base[idx];
    e.tag              = tag;
    e.ctx              = ctx;
    e.seq              = posted_seq_++;
    e.cls              = 0;
    const uint32_t gen = e.gen + 1;
    e.gen              = gen;
    /* The handle as one 64-bit word, formed before the index update (which
     * spills registers): callers copy it with one 64-bit load, and store
     * forwarding serves that only from a store of the same width -- two
     * 32-bit halves cost a ~15-cycle stall on every post. */
    const uint64_t handle_bits = uint64_t{idx} | (uint64_t{gen} << 32);
    if (__builtin_expect(!staging_, 1)) {
        index_exact(idx, h);
    } else {
        stage_exact(idx, h);
    }
    PostResult result;
    static_assert(sizeof(Handle) == sizeof(handle_bits), "Handle is two 32-bit words");
    memcpy(static_cast<void *>(&result.handle), &handle_bits, sizeof(handle_bits));
    return result;
}

/* Staged unless its line is the previous post's or the next one (a sequence
 * of tags walks the index in order: the line is in the cache or on its way,
 * and staging would only cost). */
[[gnu::always_inline]] inline void TagMatcher::stage_exact(uint32_t idx, Table::Hash h) {
    const uintptr_t home = reinterpret_cast<uintptr_t>(h.home);
    const uintptr_t step = home - last_home_ + sizeof(*h.home);
    last_home_           = home;
    if (step <= 2 * sizeof(*h.home)) {
        if (stage_count_ != 0) {
            unstage_all(); /* keep the index older than the stage */
        }
        index_exact(idx, h);
        return;
    }
    exact_.prefetch(h);
    if (stage_count_ == kStage) {
        unstage_oldest();
    }
    const uint32_t pos = (stage_head_ + stage_count_++) % kStage;
    stage_[pos]        = Staged{h, idx};
    detail::TableGroup::set16(stage_ctrl_, pos, h.ctrl);
}

/* The oldest staged receive with tag `tag`, removed; false if none. The
 * control bytes of the stage are compared at once, entries only on a match. */
inline bool TagMatcher::take_staged(Tag tag, Table::Hash h, Receive *recv) {
    uint32_t m = detail::TableGroup::match16(stage_ctrl_, h.ctrl);
    /* in ring order from the oldest, restricted to the staged ones */
    m = ((m >> stage_head_) | (m << (kStage - stage_head_))) & ((1u << stage_count_) - 1);
    Entry *const base = posted_.data();
    for (; m != 0; m &= m - 1) {
        const uint32_t i   = detail::lowest(m);
        const uint32_t pos = (stage_head_ + i) % kStage;
        const uint32_t idx = stage_[pos].idx;
        if (base[idx].tag == tag) {
            Entry &e   = base[idx];
            recv->tag  = tag;
            recv->mask = kExactMask;
            recv->ctx  = e.ctx;
            e.gen += 1;
            posted_.release(idx);
            stage_[pos].idx  = kNoIndex;
            detail::TableGroup::set16(stage_ctrl_, pos, detail::kEmptyCtrl);
            if (i + 1 == stage_count_) {
                --stage_count_; /* the newest: no hole left behind */
            }
            return true;
        }
    }
    return false;
}

/* Removes the receive at the head of an exact key's ring (the key's oldest). */
[[gnu::always_inline]] inline void TagMatcher::take_exact(Table::Ref slot, Table::Hash h,
                                                          Receive *recv) {
    Entry *const   base = posted_.data();
    const uint32_t idx  = *slot;
    Entry         &e    = base[idx];
    const uint32_t next = e.link.next;
    recv->tag           = e.tag;
    recv->mask          = kExactMask;
    recv->ctx           = e.ctx;
    if (__builtin_expect(next == idx, 1)) {
        exact_.erase(slot, h);
    } else {
        const uint32_t prev  = e.link.prev;
        base[prev].link.next = next;
        base[next].link.prev = prev;
        *slot                = next;
    }
    e.gen += 1;
    posted_.release(idx);
}

/* The oldest exact receive for `tag` (indexed, else staged), removed; false if none. */
[[gnu::always_inline]] inline bool TagMatcher::take_exact_any(Tag tag, Table::Hash h, Receive *recv) {
    Entry *const     base = posted_.data();
    const Table::Ref slot = exact_.find_fast(tag, h, [base](uint32_t i) { return base[i].tag; });
    if (__builtin_expect(slot != nullptr, 1)) {
        take_exact(slot, h, recv);
        return true;
    }
    return (stage_count_ != 0) && take_staged(tag, h, recv);
}

[[gnu::always_inline]] inline ArriveResult TagMatcher::match_exact(Tag tag, Table::Hash h) {
    ArriveResult result;
    result.matched = take_exact_any(tag, h, &result.recv);
    return result;
}

[[gnu::always_inline]] inline ArriveResult TagMatcher::arrive_exact(Tag tag, Table::Hash h,
                                                                    uint64_t cookie) {
    ArriveResult result;
    if (__builtin_expect(take_exact_any(tag, h, &result.recv), 1)) {
        result.matched = true;
        return result;
    }
    return queue_unexpected(tag, cookie);
}

template <typename Fn> size_t TagMatcher::cancel_matching(Tag tag, Tag mask, Fn &&on_cancel) {
    std::vector<void *> ctxs = remove_matching(tag, mask);
    for (void *ctx : ctxs) {
        on_cancel(ctx);
    }
    return ctxs.size();
}

template <typename RecvFn, typename MsgFn>
void TagMatcher::drain(RecvFn &&on_recv, MsgFn &&on_msg) {
    std::vector<void *>  ctxs = remove_all_posted();
    std::vector<Message> msgs = remove_all_unexpected();
    for (void *ctx : ctxs) {
        on_recv(ctx);
    }
    for (const Message &msg : msgs) {
        on_msg(msg);
    }
}

}  // namespace match
}  // namespace uct_tm

#endif
