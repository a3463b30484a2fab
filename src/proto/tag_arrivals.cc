/*
 * Arrivals through the transport's tag API, and UCT's callbacks for them.
 * On a tag-capable iface data messages use the tag API: eager messages as
 * tag_eager_zcopy / bcopy with imm = source word << 32 | 32-bit remote data
 * (wire.h), rendezvous (and sync, and wider remote data) messages as tag_rndv_request carrying our MsgHeader; the rest of
 * the rendezvous (CTS, DATA, ACK) is the AM protocol. A receive in the tag
 * list (TagList) is placed by the transport: completed_cb for eager data
 * (truncation included), rndv_cb for a rendezvous request, after
 * tag_consumed_cb. Messages no offloaded receive took come back through the
 * iface's eager_cb / rndv_cb and are matched in software exactly as AM
 * arrivals (handle_message).
 */
#include "worker.h"

#include <ucs/debug/log_def.h>
#include <ucs/sys/compiler_def.h>

#include <cstring>

namespace uct_tm {
namespace proto {

namespace {

/* The message's description, written straight into the receive it
 * completes (both arrival paths below). */
[[gnu::always_inline]] inline void describe_arrival(uct_tm_proto_info_t &info, uint64_t stag,
                                                    uint64_t imm, size_t length, Endpoint *ep) {
    info.tag    = stag;
    info.length = length;
    info.data   = static_cast<uint32_t>(imm);
    info.source = imm_source(imm);
    info.flags  = imm_has_data(imm) ? UCT_TM_PROTO_INFO_REMOTE_DATA : 0;
    info.ep     = user_handle(ep);
}

/* A tag list's rendezvous header: our MsgHeader of kind kRts. */
bool read_rts(const void *header, unsigned length, MsgHeader *h) {
    if ((header == nullptr) || (length < sizeof(*h))) {
        return false;
    }
    memcpy(h, header, sizeof(*h));
    return h->kind == Kind::kRts;
}

/* The transport matched an offloaded receive (tag_consumed_cb). */
[[gnu::always_inline]] inline void consumed(Request &r) {
    if (r.rstate == RecvState::kOffloaded) {
        r.set_state(RecvState::kArriving);
    }
}

}  // namespace

/* ---- a request slot's context ------------------------------------------- */

/* The context sits inside its request: no pool lookup, only the check that
 * the slot still holds the receive that posted it (a reused slot has a new
 * handle). Inline into the callbacks below. */
[[gnu::always_inline]] inline Request *Worker::offloaded_request(OffloadContext *o) {
    Request *r = o->request;
    if (ucs_unlikely((r == nullptr) || (r->self != o->req) || r->done)) {
        ucs_error("tm_proto: transport called back for a receive we do not hold");
        return nullptr;
    }
    return r;
}

void Worker::tag_consumed(OffloadContext *o) {
    if (Request *r = offloaded_request(o)) {
        consumed(*r);
    }
}

/* The arrival writes the message's description straight into the request. */
[[gnu::always_inline]] inline void Worker::offload_completed(Request &r, uint64_t stag,
                                                             uint64_t imm, size_t length,
                                                             ucs_status_t status) {
    consumed(r);
    if (ucs_unlikely(status == UCS_ERR_CANCELED)) {
        completions_.complete(r, status);
        return;
    }
    ++stats_.expected;
    Endpoint *const ep = peers_.of(imm_source(imm));
    describe_arrival(r.info, stag, imm, length, ep);
    completions_.complete(r, status);
    control_.return_credit(imm_source(imm), ep, length);
}

/* The common arrival of an offloaded eager receive, when nothing in it can
 * throw or log: a receive we hold, no callback to queue, the sender's
 * endpoint cached, its owed credit staying below the flush mark: nothing to
 * guard or log (docs/perf.md, "Code shape of the hot paths"). */
[[gnu::always_inline]] inline bool Worker::tag_completed_quietly(OffloadContext *o, uint64_t stag,
                                                                 uint64_t imm, size_t length,
                                                                 ucs_status_t status) {
    Request *r = o->request;
    if ((r == nullptr) || (r->self != o->req) || r->done || (r->cb != nullptr) ||
        (r->memh != nullptr) || ((status != UCS_OK) && (status != UCS_ERR_MESSAGE_TRUNCATED))) {
        return false;
    }
    Endpoint *const ep = peers_.cached(imm_source(imm));
    if ((ep == nullptr) || !control_.stays_owed(ep, length)) {
        return false;
    }
    consumed(*r);
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

void Worker::tag_completed(OffloadContext *o, uint64_t stag, uint64_t imm, size_t length,
                           ucs_status_t status) {
    guarded("completing an offloaded receive", [&]() __attribute__((always_inline)) {
        if (Request *r = offloaded_request(o)) {
            offload_completed(*r, stag, imm, length, status);
        }
    });
}

void Worker::tag_rndv(OffloadContext *o, uint64_t stag, const void *header, unsigned length,
                      ucs_status_t status) {
    guarded("an offloaded receive's rendezvous", [&]() __attribute__((always_inline)) {
        Request *r = offloaded_request(o);
        if (r == nullptr) {
            return;
        }
        if (status != UCS_OK) {
            offload_completed(*r, stag, 0, 0, status);
            return;
        }
        offload_rndv(*r, stag, header, length);
    });
}

void Worker::offload_rndv(Request &r, uint64_t stag, const void *header, unsigned length) {
    r.cold_dirty = true; /* off the eager path: the rendezvous writes any field */
    consumed(r);
    MsgHeader h;
    if (!read_rts(header, length, &h)) {
        TM_PROTO_DROPPED("malformed rendezvous header (%u bytes)", length);
        completions_.complete(r, UCS_ERR_IO_ERROR);
        return;
    }
    ++stats_.expected;
    h.tag = stag;
    accept_message(r, h, peers_.of(h.source));
    rndv_.start_rndv_recv(r, h.source, h.sreq, static_cast<const char *>(header) + sizeof(h),
                          length - sizeof(h), h.flags & kFlagPut);
}

/* ---- a DirectRecv's context ---------------------------------------------- */

/* The common arrival (a message, not a cancel, from the cached sender, its
 * owed credit staying below the flush mark) calls nothing (docs/perf.md, "Code shape of the hot paths"). */
[[gnu::always_inline]] inline bool Worker::tag_completed_quietly(DirectRecv *d, uint64_t stag,
                                                                 uint64_t imm, size_t length,
                                                                 ucs_status_t status) {
    Endpoint *const ep = peers_.cached(imm_source(imm));
    if (ucs_unlikely((status == UCS_ERR_CANCELED) || (ep == nullptr) ||
                     !control_.stays_owed(ep, length))) {
        return false;
    }
    rx_.tag_list().unlist_direct(d);
    ++stats_.expected;
    ep->owed += length;
    uct_tm_proto_request_status_t *pub = status_of(d);
    describe_arrival(pub->info, stag, imm, length, ep);
    pub->info.status = status;
    pub->status      = status; /* last: the caller may reuse the memory once it reads final */
    return true;
}

/* A DirectRecv's arrival: the message described in the caller's memory,
 * the status last (the caller may reuse the memory once it reads final). */
void Worker::tag_completed(DirectRecv *d, uint64_t stag, uint64_t imm, size_t length,
                           ucs_status_t status) {
    rx_.tag_list().unlist_direct(d);
    uct_tm_proto_info_t info = {};
    if (ucs_likely(status != UCS_ERR_CANCELED)) {
        ++stats_.expected;
        Endpoint *const ep = peers_.of(imm_source(imm));
        describe_arrival(info, stag, imm, length, ep);
        guarded(
            "returning credit", [&]() __attribute__((always_inline)) {
                control_.return_credit(imm_source(imm), ep, length);
            });
    }
    info.status = status;
    publish(status_of(d), info);
}

void Worker::tag_rndv(DirectRecv *d, uint64_t stag, const void *header, unsigned length,
                      ucs_status_t status) {
    if (status != UCS_OK) {
        tag_completed(d, stag, 0, 0, status);
        return;
    }
    guarded("an offloaded receive's rendezvous", [&]() __attribute__((always_inline)) {
        move_direct_to_slot(d, stag, header, length);
    });
}

/* A rendezvous arrived for a DirectRecv: the rest of the receive needs a
 * request slot, tied to the same memory. */
void Worker::move_direct_to_slot(DirectRecv *d, uint64_t stag, const void *header,
                                 unsigned length) {
    d->consumed = true;
    rx_.tag_list().unlist_direct(d);
    void    *memory = status_of(d);
    uint64_t handle;
    Request *r = nullptr;
    if (alloc_status([&] { r = &reqs_.allocate(ReqKind::kRecv, &handle); }) != UCS_OK) {
        ucs_error("tm_proto: no memory for a rendezvous into a receive");
        MsgHeader h;
        if (read_rts(header, length, &h)) {
            control_.send_ack(h.source,
                              h.sreq); /* the data will not be read: the sender's buffer is free */
        }
        publish_failure(status_of(d), UCS_ERR_NO_MEMORY);
        return;
    }
    r->rbuf     = d->rbuf;
    r->capacity = d->capacity;
    r->tag      = d->tag;
    r->mask     = d->mask;
    r->set_state(RecvState::kArriving); /* matched already */
    r->tier     = 0;
    RequestPool::adopt(*r, memory);
    offload_rndv(*r, stag, header, length);
}

/* ---- messages no offloaded receive took ---------------------------------- */

void Worker::tagged_eager_arrived(const void *data, size_t length, unsigned flags, uint64_t stag,
                                  uint64_t imm, void **context, const Iface *iface) {
    const char *payload = static_cast<const char *>(data);
    size_t      total   = length;
    if ((flags & UCT_CB_PARAM_FLAG_MORE) || !(flags & UCT_CB_PARAM_FLAG_FIRST)) {
        /* one of several fragments (UCT: in order; `context` is ours for the message) */
        if (context == nullptr) {
            TM_PROTO_DROPPED("dropped a fragmented tagged message without a context");
            return;
        }
        if (!(flags & UCT_CB_PARAM_FLAG_FIRST) && (*context == nullptr)) {
            TM_PROTO_DROPPED("dropped a tagged fragment with no first fragment");
            return;
        }
        switch (rx_.gathers().add(data, length, flags, context)) {
        case TagGathers::Step::kMore:
            return;
        case TagGathers::Step::kBeyondOpen:
            refuse(imm_source(imm),
                   "a fragmented tagged message beyond the bound on open ones");
            return;
        case TagGathers::Step::kTooLong:
            refuse(imm_source(imm), "a tagged message above the per-peer credit");
            return;
        case TagGathers::Step::kComplete:
            break;
        }
        payload = rx_.gathers().data();
        total   = rx_.gathers().size();
    }
    MsgHeader h = {};
    h.kind   = Kind::kEager;
    h.flags  = imm_has_data(imm) ? kFlagData : 0;
    h.source = imm_source(imm);
    h.data   = static_cast<uint32_t>(imm);
    h.tag    = stag;
    h.length = total;
    rx_.handle_message(h, payload, total, iface);
}

void Worker::tagged_rndv_arrived(uint64_t stag, const void *header, unsigned length,
                                 const Iface *iface) {
    MsgHeader h;
    if ((header == nullptr) || (length < sizeof(h))) {
        TM_PROTO_DROPPED("dropped a rendezvous request with a %u-byte header", length);
        return;
    }
    memcpy(&h, header, sizeof(h));
    if ((h.kind != Kind::kRts) || (h.flags & kFlagUntagged)) {
        /* untagged messages never go through a tag list */
        TM_PROTO_DROPPED("dropped a rendezvous request of kind %u, flags %#x",
                         static_cast<unsigned>(static_cast<uint8_t>(h.kind)), h.flags);
        return;
    }
    h.tag = stag;
    rx_.handle_message(h, static_cast<const char *>(header) + sizeof(h), length - sizeof(h), iface);
}

/* ---- UCT's callbacks --------------------------------------------------- */

namespace {

/* UCT's callbacks of a tag context: `Context` (OffloadContext, DirectRecv)
 * starts with it and names the worker, whose overloads for it do the rest. */
template <typename Context> struct TagCallbacks {
    static Context *of(uct_tag_context_t *ctx) { return reinterpret_cast<Context *>(ctx); }

    static void consumed(uct_tag_context_t *ctx) {
        Context *c = of(ctx);
        c->worker->tag_consumed(c);
    }
    /* Out of line, so the common completion stays small (docs/perf.md, "Code shape of the hot paths"). */
    [[gnu::noinline]] static void completed_in_general(uct_tag_context_t *ctx, uct_tag_t stag,
                                                       uint64_t imm, size_t length,
                                                       ucs_status_t status) {
        Context *c = of(ctx);
        c->worker->tag_completed(c, stag, imm, length, status);
    }
    static void completed(uct_tag_context_t *ctx, uct_tag_t stag, uint64_t imm, size_t length,
                          void *, ucs_status_t status) {
        Context *c = of(ctx);
        if (ucs_likely(c->worker->tag_completed_quietly(c, stag, imm, length, status))) {
            return;
        }
        completed_in_general(ctx, stag, imm, length, status);
    }
    static void rndv(uct_tag_context_t *ctx, uct_tag_t stag, const void *header,
                     unsigned header_length, ucs_status_t status, unsigned) {
        Context *c = of(ctx);
        c->worker->tag_rndv(c, stag, header, header_length, status);
    }

    static uct_tag_context_t context() {
        uct_tag_context_t c = {};
        c.tag_consumed_cb = consumed;
        c.completed_cb    = completed;
        c.rndv_cb         = rndv;
        return c;
    }
};

ucs_status_t unexpected_eager_cb(void *arg, void *data, size_t length, unsigned flags,
                                 uct_tag_t stag, uint64_t imm, void **context) {
    guarded("an unexpected tagged message", [&]() __attribute__((always_inline)) {
        const Iface *iface = static_cast<Iface *>(arg);
        iface->worker->tagged_eager_arrived(data, length, flags, stag, imm, context, iface);
    });
    return UCS_OK; /* copied (or dropped): the transport may reuse the data */
}

ucs_status_t unexpected_rndv_cb(void *arg, unsigned, uint64_t stag, const void *header,
                                unsigned header_length, uint64_t, size_t, const void *) {
    guarded("an unexpected rendezvous request", [&]() __attribute__((always_inline)) {
        const Iface *iface = static_cast<Iface *>(arg);
        iface->worker->tagged_rndv_arrived(stag, header, header_length, iface);
    });
    return UCS_OK;
}

}  // namespace

uct_tag_context_t offload_context() { return TagCallbacks<OffloadContext>::context(); }

uct_tag_context_t direct_context() { return TagCallbacks<DirectRecv>::context(); }

void set_tag_callbacks(uct_iface_params_t *params, Iface *iface) {
    params->field_mask |= UCT_IFACE_PARAM_FIELD_HW_TM_EAGER_CB | UCT_IFACE_PARAM_FIELD_HW_TM_EAGER_ARG |
                          UCT_IFACE_PARAM_FIELD_HW_TM_RNDV_CB | UCT_IFACE_PARAM_FIELD_HW_TM_RNDV_ARG;
    params->eager_cb  = unexpected_eager_cb;
    params->eager_arg = iface;
    params->rndv_cb   = unexpected_rndv_cb;
    params->rndv_arg  = iface;
}

}  // namespace proto
}  // namespace uct_tm
