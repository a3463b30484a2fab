/*
 * TagList: tier 0 of docs/proto.md "Ordering", the transport's tag list.
 * The worker posts a receive here only while software holds none (tiers 1
 * and 2 empty), so every receive the transport holds is older than every
 * one software holds and the transport's own choice (its earliest match) is
 * the earliest overall. A refused post (EXCEEDS_LIMIT, NO_RESOURCE,
 * ALREADY_EXISTS, any error) leaves the receive to software; offloading
 * resumes once tiers 1 and 2 are empty again.
 *
 * Two kinds of receive go there: a request slot (its OffloadContext), and a
 * DirectRecv in the caller's memory, which the list of live ones here lets
 * cancel_user() check and worker destruction take off. The transport calls
 * back through the contexts' callbacks (tag_arrivals.cc).
 */
#ifndef UCT_TM_PROTO_TAG_LIST_H_
#define UCT_TM_PROTO_TAG_LIST_H_

#include "direct_recv.h"
#include "iface.h"
#include "request.h"

#include <uct/api/uct.h>

#include <cstddef>
#include <cstdint>

namespace uct_tm {
namespace proto {

/* The callbacks of an offloaded request's context and of a DirectRecv's
 * (tag_arrivals.cc). */
uct_tag_context_t offload_context();
uct_tag_context_t direct_context();

class TagList {
  public:
    /* Receives go to `iface`'s tag list from now on; the contexts name `worker`. */
    void enable(Iface *iface, Worker *worker);

    bool enabled() const { return uct_iface_ != nullptr; }

    /* Whether the list takes a buffer of `length` bytes (one unsigned
     * compare; nothing before enable()). */
    bool takes(size_t length) const { return (length - recv_min_) <= recv_span_; }

    /* Posts receive `r` (buffer, capacity, tag and mask set); false when
     * the list does not take it (software keeps it). Inline: the 8 B
     * receive path. */
    bool post(Request &r) {
        if (!takes(r.capacity)) {
            return false;
        }
        iov_.buffer = r.rbuf; /* the transport reads it during the call only */
        iov_.length = r.capacity;
        return submit(r, &iov_, (r.capacity != 0) ? 1 : 0);
    }

    /* post() for a vectored receive (rbuf null, its elements in r.elements):
     * false also when its nonempty elements are more than the transport's
     * tag receive takes (its max_iov; software keeps it then). */
    bool post_iov(Request &r) {
        uct_iov_t list[UCT_TM_PROTO_IOV_MAX];
        size_t    n = 0;
        for (const uct_tm_proto_iov_t &e : r.elements) {
            if (e.length == 0) {
                continue;
            }
            if (n == recv_max_iov_) {
                return false;
            }
            list[n++] = {e.buffer, e.length, UCT_MEM_HANDLE_NULL, 0, 1};
        }
        return takes(r.capacity) && submit(r, list, n);
    }

    /* Readies a DirectRecv's context for post_direct(). */
    void prepare_direct(DirectRecv *d) const {
        d->uct.tag_consumed_cb = direct_ctx_.tag_consumed_cb;
        d->uct.completed_cb    = direct_ctx_.completed_cb;
        d->uct.rndv_cb         = direct_ctx_.rndv_cb;
        d->worker              = worker_;
    }

    /* Lists a DirectRecv, then posts it: it is listed before any callback
     * can come. A refusal (any status but UCS_OK) is undone by the caller
     * with unlist_direct(). */
    ucs_status_t post_direct(DirectRecv *d, void *buffer, size_t length, uint64_t tag,
                             uint64_t mask) {
        direct_.push(d);
        iov_.buffer = buffer;
        iov_.length = length;
        return uct_iface_tag_recv_zcopy(uct_iface_, tag, mask, &iov_, (length != 0) ? 1 : 0,
                                        &d->uct);
    }

    /* A DirectRecv left the list (completed, moved to a slot, refused). */
    void unlist_direct(DirectRecv *d) { direct_.erase(d); }

    /* Asks the transport to cancel offloaded receive `r`: UCS_OK, then
     * completed_cb follows with UCS_ERR_CANCELED, or normally if a message
     * won. */
    ucs_status_t cancel(Request &r);

    /* Takes `r` off the list if it is there, without a callback. */
    void forget(Request &r);

    /* cancel() for the DirectRecv in caller memory `request`;
     * UCS_ERR_INVALID_PARAM if it holds none of ours. */
    ucs_status_t cancel_direct(void *request);

    /* Takes every DirectRecv off the list (forced: no callback) and
     * publishes UCS_ERR_CANCELED in its memory. */
    void cancel_directs();

  private:
    /* post()'s and post_iov()'s end: `iov` read during the call only. */
    [[gnu::always_inline]] bool submit(Request &r, const uct_iov_t *iov, size_t iovcnt) {
        if (r.octx.request != &r) {
            /* once per pool slot (slots never move); priv belongs to the transport */
            r.octx.uct     = offload_ctx_;
            r.octx.worker  = worker_;
            r.octx.request = &r;
        }
        r.octx.req = r.self;
        const ucs_status_t status = uct_iface_tag_recv_zcopy(uct_iface_, r.tag, r.mask,
                                                             const_cast<uct_iov_t *>(iov), iovcnt,
                                                             &r.octx.uct);
        if (status != UCS_OK) {
            return false;
        }
        r.set_state(RecvState::kOffloaded);
        r.tier = 0;
        return true;
    }

    uct_iface_h       uct_iface_ = nullptr;
    Worker           *worker_    = nullptr;
    uct_tag_context_t offload_ctx_ = {}; /* offload_context() */
    uct_tag_context_t direct_ctx_  = {}; /* direct_context() */
    DirectRecvList    direct_;          /* DirectRecvs in the list */
    /* the list takes buffers of recv_min_ to recv_min_ + recv_span_ bytes
     * (SIZE_MAX and 0 until enabled: no real buffer) */
    size_t            recv_min_  = SIZE_MAX;
    size_t            recv_span_ = 0;
    size_t            recv_max_iov_ = 1; /* the transport's tag receive max_iov */
    /* a post's iov, set up once: the transport reads it during the call only */
    uct_iov_t         iov_ = {nullptr, 0, UCT_MEM_HANDLE_NULL, 0, 1};
};

}  // namespace proto
}  // namespace uct_tm

#endif
