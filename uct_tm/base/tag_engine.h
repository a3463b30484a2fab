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
 *    UCS_ERR_ALREADY_EXISTS for a buffer already posted.
 *
 * A transport calls match() when a tagged message arrives; a receive it
 * returns is "in flight": the transport writes into it (scatter() or the
 * iov list) and finishes it with complete() or complete_rndv(). Callbacks may
 * re-enter the engine (post, cancel) and the transport.
 */
#ifndef UCT_TM_BASE_TAG_ENGINE_H_
#define UCT_TM_BASE_TAG_ENGINE_H_

#include "address_set.h"

#include "match/slot_pool.h"
#include "match/tag_matcher.h"

#include <uct/api/uct.h>

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <sys/uio.h>
#include <vector>

namespace uct_tm {

inline constexpr size_t kMaxRecvIov = 8;

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
        match::RecvHandle handle;
        uint32_t          index        = 0;
        uint32_t          gen          = 1;
        uint8_t           state        = 0;
        bool              holds_buffer = false;
        uint32_t          free_link_   = 0;
        uint32_t         &free_link() { return free_link_; }
    };

    explicit TagEngine(const TagEngineLimits &limits);
    ~TagEngine();
    TagEngine(const TagEngine &)            = delete;
    TagEngine &operator=(const TagEngine &) = delete;

    /* uct_iface_tag_recv_zcopy. */
    ucs_status_t post(uct_tag_t tag, uct_tag_t mask, const uct_iov_t *iov, size_t iovcnt,
                      uct_tag_context_t *ctx);

    /* uct_iface_tag_recv_cancel. UCS_ERR_NO_ELEM: ctx is not posted on this
     * engine (never posted, or already completed). */
    ucs_status_t cancel(uct_tag_context_t *ctx, int force);

    /* A message tagged `tag` arrived: the earliest-posted matching receive,
     * after its tag_consumed_cb ran, or null. The receive stays valid until
     * complete()/complete_rndv(). */
    Recv *match(uct_tag_t tag) {
        if (posted_ == 0) {
            return nullptr; /* the common unexpected case costs one compare */
        }
        return match_posted(tag);
    }

    /* Copies `length` bytes at message offset `offset` into the receive,
     * dropping what does not fit. Returns the bytes written. */
    size_t scatter(Recv *recv, size_t offset, const void *data, size_t length) const {
        if (recv->iovcnt == 1) { /* what UCP and most users post */
            const size_t capacity = recv->iov[0].iov_len;
            const size_t n = (offset < capacity) ? std::min(capacity - offset, length) : 0;
            memcpy(static_cast<char *>(recv->iov[0].iov_base) + offset, data, n);
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
     * `status`, or UCS_ERR_MESSAGE_TRUNCATED when length > capacity. */
    void complete(Recv *recv, uct_tag_t stag, uint64_t imm, size_t length, ucs_status_t status);

    /* Finishes an in-flight receive matched by a software rendezvous request:
     * rndv_cb(stag, header, header_length, UCS_OK, UCT_TAG_RECV_CB_INLINE_DATA). */
    void complete_rndv(Recv *recv, uct_tag_t stag, const void *header, unsigned header_length);

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

    /* Lifetime counters: what the layer above did with the tag list. */
    struct Counters {
        uint64_t posts     = 0; /* receives posted */
        uint64_t matches   = 0; /* arrivals that matched a posted receive */
        uint64_t cancels   = 0; /* receives cancelled (forced or not) before matching */
        uint64_t refused   = 0; /* posts refused: list full or buffer already posted */
    };
    const Counters &counters() const { return counters_; }

    size_t posted() const { return posted_; }
    size_t in_flight() const { return in_flight_; }
    const TagEngineLimits &limits() const { return limits_; }

  private:
    enum : uint8_t { kFree = 0, kPosted, kMatched, kOrphaned, kCancelled };

    struct Priv; /* what the engine keeps in uct_tag_context::priv */

    Recv    *match_posted(uct_tag_t tag);
    size_t   scatter_iov(Recv *recv, size_t offset, const void *data, size_t length) const;
    Recv    *lookup(uct_tag_context_t *ctx);
    void     release(Recv *recv);
    unsigned deliver_cancelled();

    TagEngineLimits           limits_;
    match::TagMatcher         matcher_;
    match::SlotPool<Recv>     recvs_;
    AddressSet                buffers_;
    struct Pending {
        Recv    *recv;
        uint32_t gen;
    };
    std::vector<Pending>      cancelled_; /* awaiting completed_cb(UCS_ERR_CANCELED) */
    std::vector<Pending>      delivering_;
    size_t                    posted_    = 0;
    size_t                    in_flight_ = 0;
    Counters                  counters_;
    OrphanHook                orphan_hook_     = nullptr;
    void                     *orphan_hook_arg_ = nullptr;
};

}  // namespace uct_tm

#endif
