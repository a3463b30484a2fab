/*
 * TagEngine: UCT's tag-offload semantics on top of the software matcher.
 *
 * Owns the receives an iface has posted (uct_iface_tag_recv_zcopy) and
 * enforces the UCT contract once for every transport that matches in
 * software:
 *  - a posted receive matches only messages that arrive after it was posted
 *    (earlier ones went to the iface's unexpected callbacks);
 *  - an arriving message takes the earliest-posted matching receive;
 *  - tag_consumed_cb first, then exactly one of completed_cb or rndv_cb;
 *  - a message longer than the posted buffers fills them and completes with
 *    UCS_ERR_MESSAGE_TRUNCATED and the sender's full length;
 *  - cancel(force=0) completes the receive later, from progress(), with
 *    UCS_ERR_CANCELED, or normally if a message already claimed it;
 *    cancel(force=1) never calls back and the context is free at once;
 *  - UCS_ERR_EXCEEDS_LIMIT past the configured list size,
 *    UCS_ERR_ALREADY_EXISTS for a context already posted (or awaiting its
 *    cancellation). One buffer may be in several receives at once: nothing
 *    but the sender writes into it, one message at a time, so unlike a NIC
 *    (HwTagEngine, rc_mlx5) there is no reason to refuse it, and refusing it
 *    sends every later receive of a streaming MPI benchmark to UCP's
 *    software queue.
 *
 * Where receives live: while every posted receive has an exact tag (a
 * streaming MPI or UCP receiver), in per-tag queues (ExactTagQueues), so a
 * post or a match is one probe of a small table; the first masked receive
 * moves them all into the software matcher (src/match), which then takes
 * every post until the list is empty again. The earliest-posted rule holds
 * either way (tests/unit/test_tag_engine_differential.cc).
 *
 * A transport calls match() when a tagged message arrives; a receive it
 * returns is "in flight": the transport writes into it (scatter() or the
 * iov list) and finishes it with complete() or complete_rndv(). Callbacks may
 * re-enter the engine (post, cancel) and the transport.
 */
#ifndef UCT_TM_TAG_TAG_ENGINE_H_
#define UCT_TM_TAG_TAG_ENGINE_H_

#include "context_handle.h"
#include "common/alloc_status.h"
#include "base/copy_bytes.h"
#include "exact_tag_queues.h"
#include "uct_iov.h"

#include "common/ucs_assert.h"
#include "match/slot_pool.h"
#include "match/tag_matcher.h"

#include <uct/api/uct.h>
#include <ucs/sys/compiler_def.h>

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <new>
#include <sys/uio.h>
#include <vector>

namespace uct_tm {

inline constexpr size_t kMaxRecvIov = 8;

/* A receive may be of any length: the engine writes at most what arrives. */
struct TagEngineLimits {
    size_t list_size = 1024; /* posted receives at once */
    size_t max_iov   = 1;    /* iovcnt per receive, 1..kMaxRecvIov */
};

class TagEngine {
  public:
    /* A receive that left the matcher and awaits its data. */
    struct Recv {
        uct_tag_context_t *ctx      = nullptr;
        uct_tag_t          tag      = 0;
        size_t             capacity = 0; /* total bytes of the posted iov */
        uint32_t           iovcnt   = 0;
        struct iovec       iov[kMaxRecvIov];

        /* Internal state. */
        match::RecvHandle handle;       /* in the matcher (!exact) */
        uint32_t          index        = 0;
        uint32_t          gen          = 1;
        Recv             *prev         = nullptr; /* neighbours in its tag's exact queue (exact) */
        Recv             *next         = nullptr; /* also: the next spare one (free) */
        uint8_t           state        = 0;
        bool              exact        = false; /* posted in exact_, not in the matcher */
        uint32_t          free_link_   = 0;
        uint32_t         &free_link() { return free_link_; }
    };

    explicit TagEngine(const TagEngineLimits &limits);
    ~TagEngine();
    TagEngine(const TagEngine &)            = delete;
    TagEngine &operator=(const TagEngine &) = delete;

    /* uct_iface_tag_recv_zcopy. */
    ucs_status_t post(uct_tag_t tag, uct_tag_t mask, const uct_iov_t *iov, size_t iovcnt,
                      uct_tag_context_t *ctx) {
        /* One contiguous buffer, room in the list: what UCP and most users
         * post, kept inline (a streaming receiver posts once per message). */
        if (ucs_likely(is_one_buffer(iov, iovcnt) && (ctx != nullptr) &&
                       (posted_ < limits_.list_size))) {
            return post_contig(tag, mask, iov, ctx);
        }
        return post_general(tag, mask, iov, iovcnt, ctx);
    }

    /* uct_iface_tag_recv_cancel. UCS_ERR_NO_ELEM: ctx is not posted on this
     * engine (never posted, or already completed). */
    ucs_status_t cancel(uct_tag_context_t *ctx, int force);

    /* A message tagged `tag` arrived: the earliest-posted matching receive,
     * after its tag_consumed_cb ran, or null. The receive stays valid until
     * complete()/complete_rndv(). */
    [[gnu::always_inline]] Recv *match(uct_tag_t tag) {
        Recv *recv;
        if (exact_posted_ > 0) { /* then nothing is in the matcher */
            ExactQueues::Queue *q = exact_.find(tag);
            if (q == nullptr) {
                return nullptr;
            }
            recv = q->head;
            unlink_exact(q, recv);
        } else {
            if (posted_ == 0) {
                return nullptr; /* the common unexpected case costs two compares */
            }
            const match::ArriveResult result = matcher_.match_posted(tag);
            if (!result.matched) {
                return nullptr;
            }
            recv = static_cast<Recv *>(result.recv.ctx);
        }
        ucs_assertv(recv->state == kPosted, "matched a receive in state %d", recv->state);
        recv->state = kMatched;
        --posted_;
        ++in_flight_;
        ++counters_.matches;
        recv->ctx->tag_consumed_cb(recv->ctx);
        return recv;
    }

    /* Copies `length` bytes at message offset `offset` into the receive,
     * dropping what does not fit. Returns the bytes written. */
    size_t scatter(Recv *recv, size_t offset, const void *data, size_t length) const {
        if (recv->iovcnt == 1) { /* what UCP and most users post */
            const size_t capacity = recv->iov[0].iov_len;
            const size_t n = (offset < capacity) ? std::min(capacity - offset, length) : 0;
            copy_bytes(static_cast<char *>(recv->iov[0].iov_base) + offset, data, n);
            return n;
        }
        return scatter_iov(recv, offset, data, length);
    }

    /* Local iovecs covering message bytes [0, min(length, capacity)). */
    size_t iovecs(const Recv *recv, size_t length, struct iovec *out) const;

    /* False once the receive was cancelled with force while in flight: the
     * transport must stop writing into it (and complete() stays silent). */
    bool wanted(const Recv *recv) const { return recv->state == kMatched; }

    /* Finishes an in-flight receive: completed_cb(stag, imm, length) with
     * `status`, or UCS_ERR_MESSAGE_TRUNCATED when length > capacity; no
     * callback if it was cancelled with force (`known_wanted`: the caller
     * just saw wanted() and ran no callback since). */
    [[gnu::always_inline]] void complete(Recv *recv, uct_tag_t stag, uint64_t imm, size_t length,
                                         ucs_status_t status, bool known_wanted = false) {
        ucs_assertv((recv->state == kMatched) || (recv->state == kOrphaned),
                    "completed a receive in state %d", recv->state);
        uct_tag_context_t *ctx = recv->ctx;
        if ((status == UCS_OK) && (length > recv->capacity)) {
            status = UCS_ERR_MESSAGE_TRUNCATED;
        }
        const bool notify = known_wanted || (recv->state == kMatched);
        release_in_flight(recv); /* first: the callback may post the same buffer again */
        if (notify) {
            ctx->completed_cb(ctx, stag, imm, length, nullptr, status);
        }
    }

    /* Finishes an in-flight receive matched by a software rendezvous request:
     * rndv_cb(stag, header, header_length, UCS_OK, UCT_TAG_RECV_CB_INLINE_DATA). */
    void complete_rndv(Recv *recv, uct_tag_t stag, const void *header, unsigned header_length);
    /* Whether a receive's rndv_cb is running. UCP answers a software
     * rendezvous request from rndv_cb with a GET into the buffer it posted
     * and deregisters that buffer only after rndv_cb returns; the GET's
     * completion must come after that, as an RDMA READ's does. */
    bool in_rndv_callback() const { return rndv_callbacks_ != 0; }

    /* Called when a receive is cancelled with force while in flight, before
     * cancel() returns: the transport must make sure nothing writes into its
     * buffers afterwards (they are the user's again). */
    using OrphanHook = void (*)(void *arg, const Recv *recv);
    void set_orphan_hook(OrphanHook hook, void *arg) {
        orphan_hook_     = hook;
        orphan_hook_arg_ = arg;
    }

    /* Delivers deferred cancellations; returns how many. */
    unsigned progress() {
        return cancelled_.empty() ? 0 : deliver_cancelled();
    }
    bool has_cancelled() const { return !cancelled_.empty(); }

    /* Lifetime counters: what the layer above did with the tag list. */
    struct Counters {
        uint64_t posts     = 0; /* receives posted */
        uint64_t matches   = 0; /* arrivals that matched a posted receive */
        uint64_t cancels   = 0; /* receives cancelled (forced or not) before matching */
        uint64_t refused   = 0; /* posts refused: list full or context already posted */
    };
    const Counters &counters() const { return counters_; }

    size_t posted() const { return posted_; }
    size_t in_flight() const { return in_flight_; }
    const TagEngineLimits &limits() const { return limits_; }

  private:
    enum : uint8_t { kFree = 0, kPosted, kMatched, kOrphaned, kCancelled };

    using ExactQueues = ExactTagQueues<Recv>;
    using RecvPool    = match::SlotPool<Recv>;

    /* A valid one-buffer exact receive while every table has room: posted
     * without a call (docs/perf.md, "Code shape of the hot paths"). Anything
     * else takes post_general(). */
    ucs_status_t post_contig(uct_tag_t tag, uct_tag_t mask, const uct_iov_t *iov,
                             uct_tag_context_t *ctx) {
        if (ucs_unlikely((mask != ~uct_tag_t{0}) || (posted_ != exact_posted_) ||
                         (spare_ == nullptr))) {
            return post_general(tag, mask, iov, 1, ctx);
        }
        if (ucs_unlikely(already_posted(ctx))) {
            return UCS_ERR_ALREADY_EXISTS;
        }
        void *const         buffer = iov->buffer;
        const size_t        length = iov->length;
        ExactQueues::Queue *q      = exact_.find_or_insert_in_room(tag);
        if (ucs_unlikely(q == nullptr)) { /* a new tag and the table must grow */
            return post_general(tag, mask, iov, 1, ctx);
        }
        Recv &recv = *spare_;
        spare_     = recv.next;
        link_exact(q, &recv);
        recv.capacity        = length;
        recv.iovcnt          = 1;
        recv.iov[0].iov_base = buffer;
        recv.iov[0].iov_len  = length;
        publish(recv, tag, ctx);
        return UCS_OK;
    }

    /* Marks a queued receive posted and gives `ctx` its handle. */
    [[gnu::always_inline]] void publish(Recv &recv, uct_tag_t tag, uct_tag_context_t *ctx) {
        ucs_assertv(recv.state == kFree, "posted a receive in state %d", recv.state);
        recv.ctx   = ctx;
        recv.tag   = tag;
        recv.state = kPosted;
        ContextHandle::bind(ctx, this, recv.index, recv.gen);
        ++posted_;
        ++counters_.posts;
    }

    /* Posts a validated receive; fill_iov(recv) stores its buffers. */
    template <typename FillIov>
    [[gnu::always_inline]] ucs_status_t admit(uct_tag_t tag, uct_tag_t mask, uct_tag_context_t *ctx,
                                              const FillIov &fill_iov) {
        if (already_posted(ctx)) {
            return UCS_ERR_ALREADY_EXISTS;
        }
        Recv *entry = spare_;
        if (entry != nullptr) {
            spare_ = entry->next;
        } else if (alloc_status([&] {
                       const RecvPool::Slot slot = recvs_.allocate_slot();
                       entry                     = slot.entry;
                       entry->index              = slot.index;
                   }) != UCS_OK) {
            return UCS_ERR_NO_MEMORY;
        }
        Recv              &recv   = *entry;
        const ucs_status_t status = enqueue(&recv, tag, mask);
        if (ucs_unlikely(status != UCS_OK)) {
            recv.next = spare_;
            spare_    = &recv;
            return status;
        }
        fill_iov(recv);
        publish(recv, tag, ctx);
        return UCS_OK;
    }

    /* Queues a receive being posted: in exact_ while the matcher holds
     * nothing (so the earliest-posted matching receive is the head of the
     * tag's queue), else in the matcher; a masked receive first moves every
     * exact one into the matcher, in posting order. */
    ucs_status_t enqueue(Recv *recv, uct_tag_t tag, uct_tag_t mask) {
        if (ucs_likely((mask == ~uct_tag_t{0}) && (posted_ == exact_posted_))) {
            ExactQueues::Queue *q;
            if (alloc_status([&] { q = exact_.find_or_insert(tag); }) != UCS_OK) {
                return UCS_ERR_NO_MEMORY;
            }
            link_exact(q, recv);
            return UCS_OK;
        }
        return enqueue_in_matcher(recv, tag, mask);
    }
    /* Appends `recv` to its tag's queue `q` (maybe just created, empty). */
    void link_exact(ExactQueues::Queue *q, Recv *recv) {
        recv->exact = true;
        recv->next  = nullptr;
        if (q->head == nullptr) {
            recv->prev = nullptr;
            q->head    = recv;
        } else {
            recv->prev    = q->tail;
            q->tail->next = recv;
        }
        q->tail = recv;
        ++exact_posted_;
    }
    ucs_status_t enqueue_in_matcher(Recv *recv, uct_tag_t tag, uct_tag_t mask);
    /* Moves every receive of exact_ into the matcher. */
    ucs_status_t spill_exact();

    /* Takes `recv` out of its tag's queue `q`. */
    void unlink_exact(ExactQueues::Queue *q, Recv *recv) {
        if (recv->prev == nullptr) {
            q->head = recv->next;
        } else {
            recv->prev->next = recv->next;
        }
        if (recv->next == nullptr) {
            q->tail = recv->prev;
        } else {
            recv->next->prev = recv->prev;
        }
        if (q->head == nullptr) {
            exact_.erase(q);
        }
        recv->exact = false;
        --exact_posted_;
    }

    ucs_status_t post_general(uct_tag_t tag, uct_tag_t mask, const uct_iov_t *iov, size_t iovcnt,
                              uct_tag_context_t *ctx);
    size_t   scatter_iov(Recv *recv, size_t offset, const void *data, size_t length) const;
    /* The receive `ctx` is posted to or in flight in (not one cancelled with
     * force), or null. */
    Recv *lookup(uct_tag_context_t *ctx) {
        Recv *recv = ContextHandle::find(ctx, this, recvs_.issued(),
                                         [this](uint32_t i) -> Recv & { return recvs_[i]; });
        if ((recv == nullptr) || (recv->state == kFree) || (recv->state == kOrphaned)) {
            return nullptr;
        }
        return recv;
    }
    /* A context is in one receive at a time: counts the refusal. */
    bool already_posted(uct_tag_context_t *ctx) {
        if (lookup(ctx) == nullptr) {
            return false;
        }
        ++counters_.refused;
        return true;
    }
    [[gnu::always_inline]] void release(Recv *recv) {
        if ((recv->state == kMatched) || (recv->state == kOrphaned)) {
            --in_flight_;
        }
        free_recv(recv);
    }
    /* release() of a receive known to be in flight (matched or orphaned). */
    [[gnu::always_inline]] void release_in_flight(Recv *recv) {
        ucs_assert(in_flight_ > 0);
        --in_flight_;
        free_recv(recv);
    }
    [[gnu::always_inline]] void free_recv(Recv *recv) {
        ucs_assertv(recv->state != kFree, "freed a free receive");
        recv->state = kFree;
        recv->ctx   = nullptr;
        ++recv->gen;
        recv->next = spare_;
        spare_     = recv;
    }
    unsigned deliver_cancelled();

    TagEngineLimits           limits_;
    match::TagMatcher         matcher_;
    ExactQueues               exact_;
    size_t                    exact_posted_ = 0; /* receives in exact_ */
    RecvPool                  recvs_; /* every Recv ever made; they are never given back */
    Recv                     *spare_ = nullptr; /* free ones, linked by `next` (idle then) */
    struct Pending {
        Recv    *recv;
        uint32_t gen;
    };
    std::vector<Pending>      cancelled_; /* awaiting completed_cb(UCS_ERR_CANCELED) */
    std::vector<Pending>      delivering_;
    size_t                    posted_    = 0;
    size_t                    in_flight_ = 0;
    unsigned                  rndv_callbacks_ = 0; /* rndv_cb calls running (nested) */
    Counters                  counters_;
    OrphanHook                orphan_hook_     = nullptr;
    void                     *orphan_hook_arg_ = nullptr;
};

}  // namespace uct_tm

#endif
