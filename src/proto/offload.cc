/*
 * Tag offload: receives posted to the transport's tag list (tier 0) while no
 * software-held receive exists (tiers 1 and 2 empty), so every receive the
 * transport holds is older than every one we hold and the transport's own
 * choice (its earliest match) is the earliest overall; docs/proto.md
 * "Ordering". A refused post (EXCEEDS_LIMIT, NO_RESOURCE, ALREADY_EXISTS, any
 * error) goes to tier 1 instead, and offloading resumes once tiers 1 and 2
 * are empty again.
 *
 * On a tag-capable iface data messages use the transport's tag API: eager
 * messages as tag_eager_bcopy with imm = source id << 32 | user imm, and
 * rendezvous (and sync) messages as tag_rndv_request carrying our MsgHeader;
 * the rest of the rendezvous (CTS, DATA) is the AM protocol. Messages no
 * offloaded receive took come back through eager_cb / rndv_cb and are matched
 * in software exactly as AM arrivals.
 */
#include "worker.h"

#include <ucs/debug/log_def.h>
#include <ucs/sys/compiler_def.h>

#include <cstring>

namespace uct_tm {
namespace proto {

namespace {

OffloadContext *context_of(uct_tag_context_t *ctx) {
    return reinterpret_cast<OffloadContext *>(ctx);
}

/* The message's description, written straight into the receive it
 * completes (both arrival paths below). */
[[gnu::always_inline]] inline void describe_arrival(uct_tm_proto_info_t &info, uint64_t stag,
                                                    uint64_t imm, size_t length, Endpoint *ep) {
    info.tag    = stag;
    info.length = length;
    info.imm    = static_cast<uint32_t>(imm);
    info.source = static_cast<uint32_t>(imm >> 32);
    info.ep     = reinterpret_cast<uct_tm_proto_ep_h>(ep);
}

/* A tag list's rendezvous header: our MsgHeader of kind kRts. */
bool read_rts(const void *header, unsigned length, MsgHeader *h) {
    if ((header == nullptr) || (length < sizeof(*h))) {
        return false;
    }
    memcpy(h, header, sizeof(*h));
    return h->kind == Kind::kRts;
}

}  // namespace

/* The context sits inside its request: no pool lookup, only the check that
 * the slot still holds the receive that posted it (a reused slot has a new
 * handle). Inline into the callbacks below, as are the two after it. */
[[gnu::always_inline]] inline Request *Worker::offloaded_request(uct_tag_context_t *ctx) {
    const OffloadContext *o = context_of(ctx);
    Request              *r = o->request;
    if (ucs_unlikely((r == nullptr) || (r->self != o->req) || r->done)) {
        ucs_error("tm_proto: transport called back for a receive we do not hold");
        return nullptr;
    }
    return r;
}

[[gnu::always_inline]] inline void Worker::offload_consumed(Request &r) {
    if (r.rstate == RecvState::kOffloaded) {
        r.rstate = RecvState::kArriving;
    }
}

/* The arrival writes the message's description straight into the request. */
[[gnu::always_inline]] inline void Worker::offload_completed(Request &r, uint64_t stag,
                                                             uint64_t imm, size_t length,
                                                             ucs_status_t status) {
    offload_consumed(r);
    if (ucs_unlikely(status == UCS_ERR_CANCELED)) {
        complete(r, status);
        return;
    }
    ++stats_.expected;
    Endpoint *const ep = endpoint_of(static_cast<uint32_t>(imm >> 32));
    describe_arrival(r.info, stag, imm, length, ep);
    complete(r, status);
    return_credit(ep, length);
}

/* The common arrival of an offloaded eager receive, when nothing in it can
 * throw or log: a receive we hold, no callback to queue, the sender's
 * endpoint cached, its owed credit staying below the flush mark. Then the
 * callback needs neither the exception guard nor a frame of its own; false
 * (nothing done) sends it to the general path. */
[[gnu::always_inline]] inline bool Worker::offload_completed_quietly(uct_tag_context_t *ctx,
                                                                     uint64_t stag, uint64_t imm,
                                                                     size_t length,
                                                                     ucs_status_t status) {
    const OffloadContext *o      = context_of(ctx);
    Request              *r      = o->request;
    const uint32_t        source = static_cast<uint32_t>(imm >> 32);
    Endpoint *const       ep     = last_peer_ep_;
    if ((r == nullptr) || (r->self != o->req) || r->done || (r->cb != nullptr) ||
        (r->memh != nullptr) || ((status != UCS_OK) && (status != UCS_ERR_MESSAGE_TRUNCATED)) ||
        (source != last_peer_) || (ep == nullptr) || (ep->owed + length >= window_ / 4)) {
        return false;
    }
    offload_consumed(*r);
    ++stats_.expected;
    describe_arrival(r->info, stag, imm, length, ep);
    r->info.status = status;
    r->done        = true;
    ep->owed      += length;
    if (r->user != nullptr) {
        reqs_.retire(*r, true); /* nothing touches it after this callback */
    }
    return true;
}

struct TagHandlers {
    static void consumed(uct_tag_context_t *ctx) {
        OffloadContext *o = context_of(ctx);
        if (Request *r = o->worker->offloaded_request(ctx)) {
            o->worker->offload_consumed(*r);
        }
    }
    static void completed(uct_tag_context_t *ctx, uct_tag_t stag, uint64_t imm, size_t length,
                          void *, ucs_status_t status) {
        if (ucs_likely(context_of(ctx)->worker->offload_completed_quietly(ctx, stag, imm, length,
                                                                          status))) {
            return;
        }
        completed_in_general(ctx, stag, imm, length, status);
    }
    [[gnu::noinline]] static void completed_in_general(uct_tag_context_t *ctx, uct_tag_t stag,
                                                       uint64_t imm, size_t length,
                                                       ucs_status_t status) {
        OffloadContext *o = context_of(ctx);
        guarded("completing an offloaded receive", [&]() __attribute__((always_inline)) {
            if (Request *r = o->worker->offloaded_request(ctx)) {
                o->worker->offload_completed(*r, stag, imm, length, status);
            }
        });
    }
    static void rndv(uct_tag_context_t *ctx, uct_tag_t stag, const void *header,
                     unsigned header_length, ucs_status_t status, unsigned) {
        OffloadContext *o = context_of(ctx);
        guarded("an offloaded receive's rendezvous", [&]() __attribute__((always_inline)) {
            Request *r = o->worker->offloaded_request(ctx);
            if (r == nullptr) {
                return;
            }
            if (status != UCS_OK) {
                o->worker->offload_completed(*r, stag, 0, 0, status);
                return;
            }
            o->worker->offload_rndv(*r, stag, header, header_length);
        });
    }
    static ucs_status_t unexpected_eager(void *arg, void *data, size_t length, unsigned flags,
                                         uct_tag_t stag, uint64_t imm, void **context) {
        guarded("an unexpected tagged message", [&]() __attribute__((always_inline)) {
            const Iface *iface = static_cast<Iface *>(arg);
            iface->worker->tag_unexpected_eager(data, length, flags, stag, imm, context, iface);
        });
        return UCS_OK; /* copied (or dropped): the transport may reuse the data */
    }
    static ucs_status_t unexpected_rndv(void *arg, unsigned, uint64_t stag, const void *header,
                                        unsigned header_length, uint64_t, size_t, const void *) {
        guarded("an unexpected rendezvous request", [&]() __attribute__((always_inline)) {
            const Iface *iface = static_cast<Iface *>(arg);
            iface->worker->tag_unexpected_rndv(stag, header, header_length, iface);
        });
        return UCS_OK;
    }
};

/* A DirectRecv's arrival: the message described in the caller's memory,
 * the status last (the caller may reuse the memory once it reads final). */
[[gnu::always_inline]] inline void Worker::direct_completed(DirectRecv *d, uint64_t stag,
                                                            uint64_t imm, size_t length,
                                                            ucs_status_t status) {
    direct_.erase(d);
    uct_tm_proto_info_t info = {};
    if (ucs_likely(status != UCS_ERR_CANCELED)) {
        ++stats_.expected;
        Endpoint *const ep = endpoint_of(static_cast<uint32_t>(imm >> 32));
        describe_arrival(info, stag, imm, length, ep);
        guarded("returning credit", [&]() __attribute__((always_inline)) {
            return_credit(ep, length);
        });
    }
    info.status = status;
    publish(status_of(d), info);
}

/* A rendezvous arrived for a DirectRecv: the rest of the receive needs a
 * request slot, tied to the same memory. */
void Worker::direct_rndv(DirectRecv *d, uint64_t stag, const void *header, unsigned length) {
    d->consumed = true;
    direct_.erase(d);
    void    *memory = status_of(d);
    uint64_t handle;
    Request *r;
    try {
        r = &reqs_.allocate(ReqKind::kRecv, &handle);
    } catch (const std::bad_alloc &) {
        ucs_error("tm_proto: no memory for a rendezvous into a receive");
        MsgHeader h;
        if (read_rts(header, length, &h)) {
            send_ack(h.source, h.sreq); /* the data will not be read: the sender's buffer is free */
        }
        publish_failure(status_of(d), UCS_ERR_NO_MEMORY);
        return;
    }
    r->rbuf     = d->rbuf;
    r->capacity = d->capacity;
    r->tag      = d->tag;
    r->mask     = d->mask;
    r->rstate   = RecvState::kArriving; /* matched already */
    r->tier     = 0;
    RequestPool::adopt(*r, memory);
    offload_rndv(*r, stag, header, length);
}

ucs_status_t Worker::cancel_direct(void *request) {
    DirectRecv *d = direct_recv_in(request);
    if (!direct_.contains(d)) {
        return UCS_ERR_INVALID_PARAM; /* not a receive of ours */
    }
    if (d->consumed) {
        return UCS_OK; /* matched: it completes normally */
    }
    /* UCS_OK: completed_cb follows, with CANCELED, or normally if a message won */
    return uct_iface_tag_recv_cancel(offload_iface_->iface, &d->uct, 0);
}

void Worker::cancel_directs_at_exit() {
    while (DirectRecv *d = direct_.front()) {
        direct_.erase(d);
        /* forced: the transport drops the context without calling back */
        uct_iface_tag_recv_cancel(offload_iface_->iface, &d->uct, 1);
        publish_failure(status_of(d), UCS_ERR_CANCELED);
    }
}

struct DirectHandlers {
    static void consumed(uct_tag_context_t *ctx) {
        DirectRecv *d = reinterpret_cast<DirectRecv *>(ctx);
        d->consumed   = true;
    }
    /* The common arrival (a message, not a cancel, from the cached sender,
     * its owed credit staying below the flush mark) calls nothing, so it
     * needs no frame; the rest goes to direct_completed(). */
    static void completed(uct_tag_context_t *ctx, uct_tag_t stag, uint64_t imm, size_t length,
                          void *data, ucs_status_t status) {
        DirectRecv *d  = reinterpret_cast<DirectRecv *>(ctx);
        Worker     *w  = d->worker;
        Endpoint   *ep = w->last_peer_ep_;
        if (ucs_unlikely((status == UCS_ERR_CANCELED) || (ep == nullptr) ||
                         (static_cast<uint32_t>(imm >> 32) != w->last_peer_) ||
                         (ep->owed + length >= w->window_ / 4))) {
            completed_in_general(ctx, stag, imm, length, data, status);
            return;
        }
        w->direct_.erase(d);
        ++w->stats_.expected;
        ep->owed += length;
        uct_tm_proto_request_status_t *pub = status_of(d);
        describe_arrival(pub->info, stag, imm, length, ep);
        pub->info.status = status;
        pub->status      = status; /* last: the caller may reuse the memory once it reads final */
    }
    [[gnu::noinline]] static void completed_in_general(uct_tag_context_t *ctx, uct_tag_t stag,
                                                       uint64_t imm, size_t length, void *,
                                                       ucs_status_t status) {
        DirectRecv *d = reinterpret_cast<DirectRecv *>(ctx);
        d->worker->direct_completed(d, stag, imm, length, status);
    }
    static void rndv(uct_tag_context_t *ctx, uct_tag_t stag, const void *header,
                     unsigned header_length, ucs_status_t status, unsigned) {
        DirectRecv *d = reinterpret_cast<DirectRecv *>(ctx);
        Worker     *w = d->worker;
        if (status != UCS_OK) {
            w->direct_completed(d, stag, 0, 0, status);
            return;
        }
        guarded("an offloaded receive's rendezvous", [&]() __attribute__((always_inline)) {
            w->direct_rndv(d, stag, header, header_length);
        });
    }
};

namespace {

/* A UCT tag context whose callbacks are Handlers' (priv is the transport's). */
template <typename Handlers> uct_tag_context_t context_with() {
    uct_tag_context_t c = {};
    c.tag_consumed_cb = Handlers::consumed;
    c.completed_cb    = Handlers::completed;
    c.rndv_cb         = Handlers::rndv;
    return c;
}

}  // namespace

uct_tag_context_t direct_context() { return context_with<DirectHandlers>(); }

uct_tag_context_t offload_context() { return context_with<TagHandlers>(); }

void set_tag_callbacks(uct_iface_params_t *params, Iface *iface) {
    params->field_mask |= UCT_IFACE_PARAM_FIELD_HW_TM_EAGER_CB | UCT_IFACE_PARAM_FIELD_HW_TM_EAGER_ARG |
                          UCT_IFACE_PARAM_FIELD_HW_TM_RNDV_CB | UCT_IFACE_PARAM_FIELD_HW_TM_RNDV_ARG;
    params->eager_cb  = TagHandlers::unexpected_eager;
    params->eager_arg = iface;
    params->rndv_cb   = TagHandlers::unexpected_rndv;
    params->rndv_arg  = iface;
}

void Worker::offload_rndv(Request &r, uint64_t stag, const void *header, unsigned length) {
    r.cold_dirty = true; /* off the eager path: the rendezvous writes any field */
    offload_consumed(r);
    MsgHeader h;
    if (!read_rts(header, length, &h)) {
        TM_PROTO_DROPPED("malformed rendezvous header (%u bytes)", length);
        complete(r, UCS_ERR_IO_ERROR);
        return;
    }
    ++stats_.expected;
    h.tag = stag;
    accept_message(r, h);
    start_rndv_recv(r, h.source, h.sreq, static_cast<const char *>(header) + sizeof(h),
                    length - sizeof(h));
}

ucs_status_t Worker::tag_unexpected_eager(const void *data, size_t length, unsigned flags,
                                          uint64_t stag, uint64_t imm, void **context,
                                          const Iface *iface) {
    const char *payload = static_cast<const char *>(data);
    size_t      total   = length;
    TagGather  *g       = nullptr;
    if ((flags & UCT_CB_PARAM_FLAG_MORE) || !(flags & UCT_CB_PARAM_FLAG_FIRST)) {
        /* one of several fragments (UCT: in order; `context` is ours for the message) */
        if (context == nullptr) {
            TM_PROTO_DROPPED("dropped a fragmented tagged message without a context");
            return UCS_OK;
        }
        if (flags & UCT_CB_PARAM_FLAG_FIRST) {
            if (free_gathers_.empty() && (gathers_.size() <= config_.max_peers)) {
                /* a gather per sender (MAX_PEERS of them and one more for
                 * those without endpoint), each at most a window: the source
                 * is in the last fragment only, so no account can pay yet */
                gathers_.push_back(std::make_unique<TagGather>());
                free_gathers_.push_back(gathers_.back().get());
            }
            if (!free_gathers_.empty()) {
                g = free_gathers_.back();
                free_gathers_.pop_back();
                g->data.clear();
                g->dropped = false;
            } else {
                g          = &refused_gather_;
                g->dropped = true;
            }
            *context = g;
            ++gathers_open_;
        } else {
            g = static_cast<TagGather *>(*context);
            if (g == nullptr) {
                TM_PROTO_DROPPED("dropped a tagged fragment with no first fragment");
                return UCS_OK;
            }
        }
        /* an eager message never exceeds the credit we give a peer */
        if (!g->dropped && (g->data.size() + length <= window_)) {
            g->data.insert(g->data.end(), payload, payload + length);
        } else {
            g->dropped = true;
        }
        if (flags & UCT_CB_PARAM_FLAG_MORE) {
            return UCS_OK;
        }
        *context = nullptr;
        --gathers_open_;
        if (g == &refused_gather_) {
            refuse(static_cast<uint32_t>(imm >> 32),
                   "a fragmented tagged message beyond the bound on open ones");
            return UCS_OK;
        }
        free_gathers_.push_back(g); /* reused from the next first fragment on */
        if (g->dropped) {
            refuse(static_cast<uint32_t>(imm >> 32), "a tagged message above the per-peer credit");
            return UCS_OK;
        }
        payload = g->data.data();
        total   = g->data.size();
    }
    MsgHeader h = {};
    h.kind   = Kind::kEager;
    h.source = static_cast<uint32_t>(imm >> 32);
    h.imm    = static_cast<uint32_t>(imm);
    h.tag    = stag;
    h.length = total;
    handle_message(h, payload, total, iface);
    return UCS_OK;
}

ucs_status_t Worker::tag_unexpected_rndv(uint64_t stag, const void *header, unsigned length,
                                         const Iface *iface) {
    MsgHeader h;
    if ((header == nullptr) || (length < sizeof(h))) {
        TM_PROTO_DROPPED("dropped a rendezvous request with a %u-byte header", length);
        return UCS_OK;
    }
    memcpy(&h, header, sizeof(h));
    if (h.kind != Kind::kRts) {
        TM_PROTO_DROPPED("dropped a rendezvous request of kind %u",
                         static_cast<unsigned>(static_cast<uint8_t>(h.kind)));
        return UCS_OK;
    }
    h.tag = stag;
    handle_message(h, static_cast<const char *>(header) + sizeof(h), length - sizeof(h), iface);
    return UCS_OK;
}

void Worker::forget_offloaded(Request &r) {
    if (r.rstate == RecvState::kOffloaded) {
        /* forced: the transport drops the context without calling back */
        uct_iface_tag_recv_cancel(offload_iface_->iface, &r.octx.uct, 1);
        r.rstate = RecvState::kArriving;
    }
}

ucs_status_t Worker::cancel_offloaded(Request &r) {
    /* UCS_OK: completed_cb follows, with CANCELED, or normally if a message won */
    return uct_iface_tag_recv_cancel(offload_iface_->iface, &r.octx.uct, 0);
}

}  // namespace proto
}  // namespace uct_tm
