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
 * Memory: entries live in chunked pools and are reused; steady-state
 * operations do not allocate. Pools and hash tables only grow when a queue
 * reaches a new maximum depth.
 *
 * Not thread safe: one matcher per worker. A moved-from matcher may only be
 * destroyed or assigned to.
 */
#ifndef UCT_TM_MATCH_TAG_MATCHER_H_
#define UCT_TM_MATCH_TAG_MATCHER_H_

#include <ucs/type/status.h>

#include <cstddef>
#include <cstdint>
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
 * rejected (a handle kept across 2^32 reuses of its slot would alias).
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
};

/* Counters for diagnostics and tests. */
struct MatcherStats {
    uint64_t posted_matches       = 0; /* arrivals that matched a posted receive */
    uint64_t unexpected_matches   = 0; /* post(), claim() and take() that removed an unexpected message */
    uint64_t fallback_scans       = 0; /* searches that walked a linear list */
    uint64_t unexpected_index_builds = 0;
    uint32_t mask_classes_in_use  = 0; /* non-exact posted mask classes holding receives */
};

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
    PostResult post(Tag tag, Tag mask, void *ctx);

    /*
     * Post a receive without looking at the unexpected queue (UCT transports:
     * the layer above owns past arrivals). Same errors as post().
     */
    PostResult post_expected_only(Tag tag, Tag mask, void *ctx);

    /*
     * A message tagged `tag` arrives. If a posted receive matches, the
     * earliest-posted one is removed and returned. Otherwise the message is
     * queued as unexpected with `cookie`.
     * Errors: UCS_ERR_EXCEEDS_LIMIT (max_unexpected reached and no posted
     *         receive matched: a matching arrival is never refused),
     *         UCS_ERR_NO_MEMORY. Nothing changes on error.
     */
    ArriveResult arrive(Tag tag, uint64_t cookie);

    /*
     * Like arrive() but never queues: returns matched = false when no posted
     * receive matches (the caller handles the unexpected message itself).
     */
    ArriveResult match_posted(Tag tag);

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

    size_t posted_count() const;
    size_t unexpected_count() const;
    /* Bytes held by pools and indexes (for memory-per-entry measurements). */
    size_t memory_bytes() const;
    MatcherStats stats() const;
    const MatcherOptions &options() const;

  private:
    struct Impl;
    /* Non-template halves of cancel_matching()/drain(): remove, then report
     * from a private copy so callbacks may re-enter the matcher. */
    std::vector<void *> remove_matching(Tag tag, Tag mask);
    std::vector<void *> remove_all_posted();
    std::vector<Message> remove_all_unexpected();

    std::unique_ptr<Impl> impl_;
};

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
