/*
 * Send protocols: eager (one AM, or a first fragment and middles), and
 * rendezvous (RTS; the receiver answers with CTS once matched and the data
 * follows as kData fragments of at most what the receiver can hold). The
 * choice: rendezvous from config rndv_thresh, or when the peer's eager credit
 * does not cover the message (back-pressure). Messages to one peer leave in
 * posting order: a send waits behind the ones queued before it.
 */
#include "sender.h"

#include "worker.h"

#include <ucs/debug/log_def.h>

#include <algorithm>
#include <cstring>
#include <new>

namespace uct_tm {
namespace proto {

namespace {

/* The callback of a NO_COMPLETION send given none: its completion is
 * queued like one with a callback, and Completions releases it. */
void quiet_cb(void *, uct_tm_proto_request_t, const uct_tm_proto_info_t *) {}

/* The flags a send takes. */
constexpr unsigned kSendFlags = UCT_TM_PROTO_SEND_INJECT | UCT_TM_PROTO_SEND_SYNC |
                                UCT_TM_PROTO_SEND_REMOTE_DATA |
                                UCT_TM_PROTO_SEND_TRANSMIT_COMPLETE |
                                UCT_TM_PROTO_SEND_DELIVERY_COMPLETE | UCT_TM_PROTO_SEND_FENCE |
                                UCT_TM_PROTO_OP_NO_COMPLETION | UCT_TM_PROTO_SEND_MORE |
                                UCT_TM_PROTO_OP_UNTAGGED;

/* A send still running: its handle for the caller, or with NO_COMPLETION
 * none (the library's now: released when done). */
ucs_status_t running(const Request &r, bool quiet, uint64_t *req) {
    if (quiet) {
        return UCS_OK;
    }
    *req = handed_out(r);
    return UCS_INPROGRESS;
}

struct Pack {
    const void *hdr;
    size_t      hdr_len;
    const void *data;
    size_t      len;
};

size_t pack_cb(void *dest, void *arg) {
    const Pack *p = static_cast<const Pack *>(arg);
    if (p->hdr_len != 0) {
        memcpy(dest, p->hdr, p->hdr_len);
    }
    if (p->len != 0) {
        memcpy(static_cast<char *>(dest) + p->hdr_len, p->data, p->len);
    }
    return p->hdr_len + p->len;
}

/* A tagged eager message's data, described by an iov (Sender::eager_iov_). */
size_t pack_iov_cb(void *dest, void *arg) {
    const uct_iov_t *iov = static_cast<const uct_iov_t *>(arg);
    if (iov->length != 0) { /* an empty message's buffer may be NULL, which memcpy must not get */
        memcpy(dest, iov->buffer, iov->length);
    }
    return iov->length;
}


/* An AM or tagged bcopy message: an optional header, then the elements. */
struct GatherPack {
    const void               *hdr;
    size_t                    hdr_len;
    const uct_tm_proto_iov_t *iov;
    size_t                    iovcnt;
    size_t                    total;
};

size_t gather_pack_cb(void *dest, void *arg) {
    const GatherPack *g = static_cast<const GatherPack *>(arg);
    char             *d = static_cast<char *>(dest);
    if (g->hdr_len != 0) {
        memcpy(d, g->hdr, g->hdr_len);
    }
    iov_gather(g->iov, g->iovcnt, d + g->hdr_len);
    return g->hdr_len + g->total;
}

/* An AM message of a vectored send: a header, then message bytes
 * [offset, offset + len) of the elements. */
struct ElementsPack {
    const void                            *hdr;
    size_t                                 hdr_len;
    const std::vector<uct_tm_proto_iov_t> *elements;
    size_t                                 offset;
    size_t                                 len;
};

size_t elements_pack_cb(void *dest, void *arg) {
    const ElementsPack *p = static_cast<const ElementsPack *>(arg);
    char               *d = static_cast<char *>(dest);
    memcpy(d, p->hdr, p->hdr_len);
    iov_gather_range(*p->elements, p->offset, d + p->hdr_len, p->len);
    return p->hdr_len + p->len;
}

}  // namespace

ssize_t Sender::am_send_part(const Request &r, const void *hdr, size_t hdr_len, size_t offset,
                             size_t len) {
    if (!r.vectored_send()) {
        return am_send(r.ep, hdr, hdr_len, send_data(r) + offset, len);
    }
    ElementsPack p{hdr, hdr_len, &r.elements, offset, len};
    return uct_ep_am_bcopy(r.ep->uct_ep, kAmId, elements_pack_cb, &p, 0);
}

ssize_t Sender::am_send(Endpoint *ep, const void *hdr, size_t hdr_len, const void *data,
                        size_t len) {
    Pack p{hdr, hdr_len, data, len};
    return uct_ep_am_bcopy(ep->uct_ep, kAmId, pack_cb, &p, 0);
}

MsgHeader Sender::message_header(const Request &r, Kind kind) const {
    MsgHeader h = {};
    h.kind   = kind;
    h.flags  = r.wire_flags;
    h.source    = w_id();
    h.tag    = r.tag;
    h.data   = r.data;
    h.length = r.length;
    h.sreq   = r.self;
    return h;
}

/* Inlined into its two callers here. send_eager_now() makes the same calls
 * its own way: it keeps nothing live across them (eager_now_ holds what a
 * refusal needs). */
[[gnu::always_inline]] inline ssize_t Sender::tag_eager(Endpoint *ep, uint64_t tag, uint64_t imm,
                                                        const void *data, size_t len) {
    if (ep->iface->eager_by_zcopy(len)) {
        return tag_eager_zcopy(ep, tag, imm, data, len);
    }
    eager_iov_.buffer = const_cast<void *>(data);
    eager_iov_.length = len;
    return uct_ep_tag_eager_bcopy(ep->uct_ep, tag, imm, pack_iov_cb, &eager_iov_, 0);
}

/* A tagged eager message straight from the caller's buffer: on tm_sm a small
 * one is one inline FIFO element with tag and imm, where bcopy takes a
 * descriptor (and tag_eager_short has no imm for the source id). Eager sends
 * are done when handed over, so a transport that completes the copy later is
 * waited for here (tm_sm copies inside the call). */
[[gnu::always_inline]] inline ssize_t
Sender::tag_eager_zcopy(Endpoint *ep, uint64_t tag, uint64_t imm, const void *data, size_t len) {
    uct_iov_t &iov = eager_iov_; /* memh, stride and count stay as set in the constructor */
    iov.buffer     = const_cast<void *>(data);
    iov.length     = len;
    ucs_status_t status = uct_ep_tag_eager_zcopy(ep->uct_ep, tag, imm, &iov, (len != 0) ? 1 : 0,
                                                 0, &eager_comp_);
    if (status == UCS_INPROGRESS) {
        status = wait_eager_zcopy();
    }
    return (status == UCS_OK) ? static_cast<ssize_t>(len) : static_cast<ssize_t>(status);
}

/* An eager send is done when handed over: a transport that copies the data
 * later is waited for. */
ucs_status_t Sender::wait_eager_zcopy() {
    while (eager_comp_.count != 0) {
        w_.progress_transports(); /* runs no send of ours: nothing nests here */
    }
    const ucs_status_t status = eager_comp_.status;
    eager_comp_.count         = 1;
    eager_comp_.status        = UCS_OK;
    return status;
}

[[gnu::always_inline]] inline ssize_t Sender::am_short(Endpoint *ep, uint64_t tag, uint32_t word,
                                                       uint32_t rdata, const void *data, size_t len,
                                                       uint8_t am_id) {
    char              buf[sizeof(ShortHeader) + kShortMax];
    const ShortHeader h = {word, rdata};
    memcpy(buf, &h, sizeof(h));
    if (len != 0) { /* data may be null then */
        memcpy(buf + sizeof(h), data, len);
    }
    return uct_ep_am_short(ep->uct_ep, am_id, tag, buf, static_cast<unsigned>(sizeof(h) + len));
}

ucs_status_t Sender::send_eager(Request &r) {
    Endpoint    *ep   = r.ep;
    const char  *data = send_data(r);
    const size_t room = ep->iface->max_bcopy;
    if (on_tag_path(r)) {
        /* wide remote data went as a rendezvous request (send_general); the
         * tag API gathers a vectored one in one call (sendv checked) */
        const bool    has_data = (r.wire_flags & kFlagData) != 0;
        const ssize_t n =
                r.vectored_send()
                        ? send_single_iov(ep, r.tag, has_data, r.data, r.elements.data(),
                                          r.elements.size(), iov_nonempty(r.elements), r.length)
                        : tag_eager(ep, r.tag, eager_imm(has_data, r.data), data, r.length);
        if (n < 0) {
            return static_cast<ucs_status_t>(n);
        }
        r.started = true;
        r.offset  = r.length;
        return UCS_OK;
    }
    if (!r.started) {
        MsgHeader h = message_header(r, Kind::kEager);
        size_t    chunk;
        if (sizeof(h) + r.length <= room) {
            chunk = r.length;
        } else {
            h.kind   = Kind::kFirst;
            h.msg_id = r.msg_id;
            chunk    = room - sizeof(h);
        }
        const ssize_t n = am_send_part(r, &h, sizeof(h), 0, chunk);
        if (n < 0) {
            return static_cast<ucs_status_t>(n);
        }
        r.started = true;
        r.offset  = chunk;
    }
    while (r.offset < r.length) {
        FragHeader f = {};
        f.kind   = Kind::kMiddle;
        f.source            = w_id();
        f.msg_id = r.msg_id;
        f.offset = r.offset;
        const size_t  chunk = std::min(r.length - r.offset, room - sizeof(f));
        const ssize_t n     = am_send_part(r, &f, sizeof(f), r.offset, chunk);
        if (n < 0) {
            return static_cast<ucs_status_t>(n);
        }
        r.offset += chunk;
    }
    return UCS_OK;
}

ucs_status_t Sender::send_rts(Request &r) {
    MsgHeader h = message_header(r, Kind::kRts);
    char      get[sizeof(RndvGet) + kMaxRkey];
    const size_t get_len = w_.rndv().pack_rts(r, get);
    if (get_len != 0) {
        h.flags |= kFlagGet;
    } else if (r.vectored_send() && r.ep->iface->rndv_get &&
               (r.ep->iface->attr.cap.flags & UCT_IFACE_FLAG_PUT_ZCOPY)) {
        h.flags |= kFlagPut; /* the elements can be written from, piece by piece */
    }
    if (on_tag_path(r)) {
        char hdr[sizeof(h) + sizeof(get)];
        memcpy(hdr, &h, sizeof(h));
        memcpy(hdr + sizeof(h), get, get_len);
        const ucs_status_t status = uct_ep_tag_rndv_request(
                r.ep->uct_ep, r.tag, hdr, static_cast<unsigned>(sizeof(h) + get_len), 0);
        if (status != UCS_OK) {
            return status;
        }
    } else {
        const ssize_t n = am_send(r.ep, &h, sizeof(h), get, get_len);
        if (n < 0) {
            return static_cast<ucs_status_t>(n);
        }
    }
    r.started = true;
    r.set_state(SendState::kRtsSent);
    return UCS_OK;
}

ucs_status_t Sender::push_data(Request &r) {
    ucs_assertv(r.sstate == SendState::kPushing, "send %#llx pushes data in state %d",
                static_cast<unsigned long long>(r.self), static_cast<int>(r.sstate));
    const size_t room = r.ep->iface->max_bcopy - sizeof(DataHeader);
    while (r.offset < r.limit) {
        DataHeader d = {};
        d.kind   = Kind::kData;
        d.source            = w_id();
        d.rreq   = r.rreq;
        d.offset = r.offset;
        const size_t  chunk = std::min(r.limit - r.offset, room);
        const ssize_t n     = am_send_part(r, &d, sizeof(d), r.offset, chunk);
        if (n < 0) {
            return static_cast<ucs_status_t>(n);
        }
        r.offset += chunk;
    }
    if (!r.await_ack) {
        handed_over(r); /* else the receiver still reads the rest: done on its kAck */
    }
    return UCS_OK;
}

/* Pushes the rendezvous data a receiver asked for. It is no new message
 * (the receiver places it by its request), so it goes ahead of the queued
 * sends: a FENCE send there may be waiting for this very one. */
void Sender::push_ahead(Request &r) {
    const ucs_status_t status = push_data(r);
    if (status == UCS_OK) {
        return;
    }
    if (status != UCS_ERR_NO_RESOURCE) {
        w_.completions().complete(r, status);
        return;
    }
    r.ep->sends.push_front(r.self);
    w_.mark_busy(r.ep);
}

/* All of a send's data left and the protocol awaits nothing more: it
 * completes now, or at the level it asked for. */
void Sender::handed_over(Request &r) {
    if (r.deliver) {
        /* a transport delivers one UCT endpoint's operations in order: the
         * receiver answers once it has processed everything sent before */
        CtrlHeader h = {};
        h.kind      = Kind::kDeliverReq;
        h.source     = w_id();
        h.req       = r.self;
        r.await_ack = true;
        if (r.sstate == SendState::kQueued) {
            r.set_state(SendState::kEagerSent);
        }
        w_.control().send(r.ep, h);
        return;
    }
    if (r.transmit) {
        if (!flush_done(r) &&
            (alloc_status([&] { w_.later(Later::Kind::kFlush, r.self); }) != UCS_OK)) {
            w_.completions().complete(r, UCS_ERR_NO_MEMORY);
        }
        return;
    }
    w_.completions().complete(r, UCS_OK);
}

/* TRANSMIT_COMPLETE: a flush without completion says whether the endpoint
 * still has anything outstanding; false while it has (ask again later). */
bool Sender::flush_done(Request &r) {
    const ucs_status_t status = uct_ep_flush(r.ep->uct_ep, 0, nullptr);
    if ((status == UCS_INPROGRESS) || (status == UCS_ERR_NO_RESOURCE)) {
        return false;
    }
    w_.completions().complete(r, status);
    return true;
}


/* Hands a queued send to the transport as far as it goes. */
ucs_status_t Sender::start_send(Request &r) {
    if (r.sstate == SendState::kPushing) {
        return push_data(r);
    }
    if (r.sstate != SendState::kQueued) {
        return UCS_OK;
    }
    if (r.rndv) {
        return send_rts(r);
    }
    const ucs_status_t status = send_eager(r);
    if (status == UCS_OK) {
        if (r.wire_flags & (kFlagSync | kFlagDeliver)) {
            r.set_state(SendState::kEagerSent);
        } else {
            handed_over(r);
        }
    }
    return status;
}

/* One eager message in one transport call: the transport's tagged eager
 * message on the tag path (narrow remote data only: send_general sends
 * wide data there as a rendezvous request), else one am_short (narrow
 * data) or one am_bcopy after a MsgHeader. */
/* One eager message as AM: one am_short (narrow data) or one am_bcopy after
 * a MsgHeader; an untagged one on its own short id, or with the flag. */
template <bool kUntagged>
[[gnu::always_inline]] inline ssize_t Sender::am_eager(Endpoint *ep, uint64_t tag, bool has_data,
                                                       uint64_t rdata, const void *buffer,
                                                       size_t length) {
    if ((length <= ep->short_max) && data_is_narrow(rdata)) {
        return am_short(ep, tag, source_word(w_id(), has_data), static_cast<uint32_t>(rdata),
                        buffer, length, kUntagged ? kAmShortUntaggedId : kAmShortId);
    }
    MsgHeader h = eager_header(tag, has_data, rdata, length);
    if (kUntagged) {
        h.flags = static_cast<uint8_t>(h.flags | kFlagUntagged);
    }
    return am_send(ep, &h, sizeof(h), buffer, length);
}

[[gnu::always_inline]] inline ssize_t Sender::send_single(Endpoint *ep, uint64_t tag, bool has_data,
                                                          uint64_t rdata, const void *buffer,
                                                          size_t length) {
    if (ep->tag_path) {
        return tag_eager(ep, tag, eager_imm(has_data, rdata), buffer, length);
    }
    return am_eager<false>(ep, tag, has_data, rdata, buffer, length);
}

/* The transport copies the elements itself: tag_eager_zcopy takes the list
 * when the iface's max_iov allows it, a bcopy pack callback gathers them,
 * and an am_short message is gathered on the stack (at most kShortMax). */
ssize_t Sender::send_single_iov(Endpoint *ep, uint64_t tag, bool has_data, uint64_t rdata,
                                const uct_tm_proto_iov_t *iov, size_t iovcnt, size_t nonempty,
                                size_t total) {
    if (ep->tag_path) {
        const uint64_t wire_imm = eager_imm(has_data, rdata); /* narrow: sendv() checked */
        if (ep->iface->tag_eager_zcopy_list(total, nonempty)) {
            uct_iov_t list[UCT_TM_PROTO_IOV_MAX];
            size_t    n = 0;
            for (size_t i = 0; i < iovcnt; ++i) {
                if (iov[i].length != 0) {
                    list[n++] = {iov[i].buffer, iov[i].length, UCT_MEM_HANDLE_NULL, 0, 1};
                }
            }
            ucs_status_t status = uct_ep_tag_eager_zcopy(ep->uct_ep, tag, wire_imm, list, n, 0,
                                                         &eager_comp_);
            if (status == UCS_INPROGRESS) {
                status = wait_eager_zcopy(); /* done when handed over, as tag_eager_zcopy() */
            }
            return (status == UCS_OK) ? static_cast<ssize_t>(total) : static_cast<ssize_t>(status);
        }
        if (!ep->iface->tag_eager_gathers(total, nonempty)) {
            /* more elements than the zcopy takes and longer than one bcopy
             * descriptor: sendv() stages it for the contiguous path */
            return UCS_ERR_UNSUPPORTED;
        }
        GatherPack g = {nullptr, 0, iov, iovcnt, total};
        return uct_ep_tag_eager_bcopy(ep->uct_ep, tag, wire_imm, gather_pack_cb, &g, 0);
    }
    if ((total <= ep->short_max) && data_is_narrow(rdata)) {
        char buf[kShortMax];
        iov_gather(iov, iovcnt, buf);
        return send_single(ep, tag, has_data, rdata, buf, total); /* its am_short */
    }
    const MsgHeader h = eager_header(tag, has_data, rdata, total);
    GatherPack      g = {&h, sizeof(h), iov, iovcnt, total};
    return uct_ep_am_bcopy(ep->uct_ep, kAmId, gather_pack_cb, &g, 0);
}

/* Sender::send found the message eager, single and covered by credit, with
 * nothing queued before it. A refusal goes to send_general(), which decides
 * afresh (and queues on NO_RESOURCE). A message for a tag list (zcopy or
 * bcopy, as tag_eager() picks) is counted sent before the transport call, and
 * what a refusal needs waits in the send side (eager_now_) (docs/perf.md,
 * "Code shape of the hot paths"). */
template <bool kData>
[[gnu::always_inline]] inline ucs_status_t
Sender::eager_now(Endpoint *ep, const void *buffer, size_t length, uint64_t tag, uint64_t rdata,
                  const uct_tm_proto_op_params_t *params, uint64_t *req) {
    Owner *w = ep->worker;
    if (ucs_likely(ep->tag_path)) {
        const uint64_t imm = (uint64_t{source_word(w->id(), kData)} << 32) |
                             static_cast<uint32_t>(rdata);
        w->tx().eager_iov_.buffer = const_cast<void *>(buffer);
        w->tx().eager_iov_.length = length;
        w->tx().eager_now_        = {ep, tag, params, req};
        ep->credits         -= length;
        ++w->stats().eager_sends;
        ucs_status_t status;
        if (ep->iface->eager_by_zcopy(length)) {
            status = uct_ep_tag_eager_zcopy(ep->uct_ep, tag, imm, &w->tx().eager_iov_,
                                            (length != 0) ? 1 : 0, 0, &w->tx().eager_comp_);
        } else {
            const ssize_t n = uct_ep_tag_eager_bcopy(ep->uct_ep, tag, imm, pack_iov_cb,
                                                     &w->tx().eager_iov_, 0);
            status = (n >= 0) ? UCS_OK : static_cast<ucs_status_t>(n);
        }
        if (ucs_likely(status == UCS_OK)) {
            if (req != nullptr) {
                *req = 0;
            }
            return UCS_OK;
        }
        return w->tx().eager_now_refused(status);
    }
    return w->tx().send_eager_now_other(ep, buffer, length, tag, kData, rdata, params, req);
}

ucs_status_t Sender::send_eager_now(Endpoint *ep, const void *buffer, size_t length, uint64_t tag,
                                    const uct_tm_proto_op_params_t *params, uint64_t *req) {
    return eager_now<false>(ep, buffer, length, tag, 0, params, req); /* no remote data */
}

ucs_status_t Sender::send_eager_now_data(Endpoint *ep, const void *buffer, size_t length,
                                         uint64_t tag, const uct_tm_proto_op_params_t *params,
                                         uint64_t *req) {
    if (params->flags & UCT_TM_PROTO_SEND_REMOTE_DATA) {
        return eager_now<true>(ep, buffer, length, tag, params->data, params, req);
    }
    return eager_now<false>(ep, buffer, length, tag, 0, params, req);
}

/* The tagged message above did not complete in the call. */
ucs_status_t Sender::eager_now_refused(ucs_status_t status) {
    const EagerNow a = eager_now_;
    if (status == UCS_INPROGRESS) {
        status = wait_eager_zcopy();
        if (status == UCS_OK) {
            if (a.req != nullptr) {
                *a.req = 0;
            }
            return UCS_OK;
        }
    }
    const size_t length = eager_iov_.length;
    a.ep->credits += length;
    --w_.stats().eager_sends;
    return send_general(a.ep, eager_iov_.buffer, length, a.tag, a.params, a.req);
}

/* Every other message send_eager_now() takes (AM). */
ucs_status_t Sender::send_eager_now_other(Endpoint *ep, const void *buffer, size_t length,
                                          uint64_t tag, bool has_data, uint64_t rdata,
                                          const uct_tm_proto_op_params_t *params, uint64_t *req) {
    const ssize_t n = send_single(ep, tag, has_data, rdata, buffer, length);
    if (n >= 0) {
        ep->credits -= length;
        ++w_.stats().eager_sends;
        if (req != nullptr) {
            *req = 0;
        }
        return UCS_OK;
    }
    return send_general(ep, buffer, length, tag, params, req);
}

ucs_status_t Sender::send_other(Endpoint *ep, const void *buffer, size_t length, uint64_t tag,
                                const uct_tm_proto_op_params_t *params, uint64_t *req) {
    return ep->worker->tx().send_general(ep, buffer, length, tag, params, req);
}

/* The checks send_general() makes of its arguments. */
[[gnu::always_inline]] inline bool Sender::send_args_valid(const Endpoint *ep, const void *buffer,
                                                           size_t                          length,
                                                           const uct_tm_proto_op_params_t *params,
                                                           const uint64_t                 *req,
                                                           const SendVector *vector) const {
    const unsigned flags = (params != nullptr) ? params->flags : 0;
    return (ep != nullptr) && (ep->magic == Endpoint::kMagic) && (ep->worker == &w_) &&
           ((buffer != nullptr) || (length == 0) || (vector != nullptr)) &&
           op_params_valid(params, kSendFlags, req) &&
           !((flags & UCT_TM_PROTO_OP_NO_COMPLETION) && (flags & UCT_TM_PROTO_OP_USER_REQUEST)) &&
           w_.region_valid(params, buffer, length);
}

/* Over a tag list, one tagged eager message at most, and sync messages need
 * the rendezvous request's header to be answered, as does remote data wider
 * than the 32 bits the eager message's imm has room for. An eager message
 * also needs the peer's credit. */
[[gnu::always_inline]] inline bool Sender::needs_rndv(Endpoint *ep, size_t length, bool tag_send,
                                                      bool sync, uint64_t rdata) {
    if ((length >= w_.config().rndv_thresh) ||
        (tag_send && (sync || !data_is_narrow(rdata) || (length > ep->iface->tag_eager_max)))) {
        return true;
    }
    if (length <= ep->credits) {
        return false;
    }
    /* Credit the peer returned may still sit in the transport: a streaming
     * sender runs ahead of the receiver by the whole window and would
     * otherwise turn most messages into rendezvous (64 KiB tag_bw over
     * tm_sm: 88%). Our own callbacks wait for progress(), so none runs here. */
    w_.progress_transports();
    if (length <= ep->credits) {
        return false;
    }
    ++w_.stats()
          .backpressure; /* the peer's buffer for us is full: it takes the data when matched */
    return true;
}

[[gnu::always_inline]] inline Sender::SendPlan
Sender::plan_send(Endpoint *ep, const void *buffer, size_t length, uint64_t tag,
                  const uct_tm_proto_op_params_t *params, const SendVector *vector) {
    SendPlan p;
    p.buffer     = buffer;
    p.length     = length;
    p.vector     = vector;
    p.params     = params;
    p.flags      = (params != nullptr) ? params->flags : 0;
    p.deliver    = !p.sync() && (p.flags & UCT_TM_PROTO_SEND_DELIVERY_COMPLETE);
    p.transmit   = !p.sync() && !p.deliver && (p.flags & UCT_TM_PROTO_SEND_TRANSMIT_COMPLETE);
    p.rdata      = p.has_data() ? params->data : 0;
    p.wire_flags = static_cast<uint8_t>((p.sync() ? kFlagSync : 0) |
                                        (p.has_data() ? kFlagData : 0) |
                                        (p.untagged() ? kFlagUntagged : 0));
    /* fi_msg: AM messages only, matched by untagged receives */
    p.tag       = p.untagged() ? 0 : tag;
    p.tag_send  = ep->tag_path && !p.untagged();
    p.rndv      = needs_rndv(ep, length, p.tag_send, p.sync(), p.rdata);
    if (p.deliver && !p.tag_send && !p.rndv) {
        /* the receiver acknowledges the message itself, before it reports
         * it: a receiver that exits at once has answered (a kDeliverReq
         * sent after the data could find it gone) */
        p.wire_flags |= kFlagDeliver;
    }
    p.batchable = (p.flags & UCT_TM_PROTO_SEND_MORE) && !p.tag_send && !p.rndv && !p.sync() &&
                  !p.deliver && !p.transmit && !p.fence() && ep->sends.empty() &&
                  (sizeof(BatchHeader) + sizeof(BatchEntry) + length <= ep->iface->max_bcopy);
    /* a vectored one reaches here when sendv() did not send it in one call */
    p.one_call = (vector == nullptr) && !p.rndv && !p.sync() && !p.deliver && !p.transmit;
    return p;
}

/* MORE: a small eager message joins the endpoint's batch; any other send
 * sends the batch first. A failed batch fails this send too. */
[[gnu::always_inline]] inline ucs_status_t Sender::send_batched(Endpoint *ep, const SendPlan &p) {
    const auto entry_flags = static_cast<uint8_t>(p.wire_flags & ~kFlagSync);
    if (p.batchable && batch_add(ep, p.tag, entry_flags, p.rdata, p.buffer, p.length, p.vector)) {
        return UCS_OK;
    }
    const ucs_status_t status = flush_batch(ep);
    if ((status == UCS_OK) && p.batchable &&
        batch_add(ep, p.tag, entry_flags, p.rdata, p.buffer, p.length, p.vector)) {
        return UCS_OK;
    }
    if ((status != UCS_OK) && (status != UCS_ERR_NO_RESOURCE)) {
        if (!p.rndv) {
            --w_.stats().eager_sends;
        }
        return status;
    }
    return UCS_ERR_NO_RESOURCE;
}

/* The common case: one eager message, nothing queued (or, fenced,
 * outstanding) before it, done once handed over. */
[[gnu::always_inline]] inline bool Sender::goes_at_once(Endpoint *ep, const SendPlan &p,
                                                        bool batch_pending) {
    return p.one_call && ep->sends.empty() && !batch_pending &&
           !(p.fence() && sends_outstanding(ep)) &&
           (p.tag_send || (sizeof(MsgHeader) + p.length <= ep->iface->max_bcopy));
}

[[gnu::always_inline]] inline ucs_status_t Sender::send_at_once(Endpoint *ep, const SendPlan &p) {
    const ssize_t n = p.untagged()
                          ? am_eager<true>(ep, 0, p.has_data(), p.rdata, p.buffer, p.length)
                          : send_single(ep, p.tag, p.has_data(), p.rdata, p.buffer, p.length);
    return (n >= 0) ? UCS_OK : static_cast<ucs_status_t>(n);
}

/* A plan computed once, then the paths in turn: the endpoint's batch, one
 * transport call, a request. The credit an eager message takes goes back
 * unless a path commits it. */
ucs_status_t Sender::send_general(Endpoint *ep, const void *buffer, size_t length, uint64_t tag,
                                  const uct_tm_proto_op_params_t *params, uint64_t *req,
                                  const SendVector *vector) {
    if (!send_args_valid(ep, buffer, length, params, req, vector)) {
        return UCS_ERR_INVALID_PARAM;
    }
    uint64_t unused;
    req  = (req != nullptr) ? req : &unused;
    *req = 0;
    const SendPlan plan = plan_send(ep, buffer, length, tag, params, vector);
    CreditHold     credit(ep, plan.rndv ? 0 : length);
    ++(plan.rndv ? w_.stats().rndv_sends : w_.stats().eager_sends);

    ucs_status_t status = UCS_ERR_NO_RESOURCE; /* not sent: the next path takes it */
    if (plan.batchable || !ep->batch.empty()) {
        status = send_batched(ep, plan);
    }
    const bool batch_pending = !ep->batch.empty();
    if ((status == UCS_ERR_NO_RESOURCE) && goes_at_once(ep, plan, batch_pending)) {
        status = send_at_once(ep, plan);
    }
    if (status == UCS_ERR_NO_RESOURCE) {
        return send_request(ep, plan, batch_pending, credit, req);
    }
    if (status == UCS_OK) {
        credit.commit();
    }
    return status;
}

ucs_status_t Sender::send_request(Endpoint *ep, const SendPlan &p, bool batch_pending,
                                  CreditHold &credit, uint64_t *req) {
    uint64_t handle;
    Request *r = new_send(ep, p, &handle);
    if (r == nullptr) {
        return UCS_ERR_NO_MEMORY;
    }
    ucs_status_t status = UCS_OK;
    if ((p.flags & UCT_TM_PROTO_SEND_INJECT) && p.rndv) {
        /* read after return */
        status = alloc_status([&] { r->bounce.assign(r->sbuf, r->sbuf + p.length); });
    }
    if (status == UCS_OK) {
        status = (ep->sends.empty() && !batch_pending && !fence_holds(*r)) ? start_send(*r)
                                                                           : UCS_ERR_NO_RESOURCE;
    }
    if (status == UCS_OK) {
        left_queue(*r);
    } else if (status == UCS_ERR_NO_RESOURCE) {
        status = queue_send(*r, p);
        if (status == UCS_OK) {
            credit.commit();
            return running(*r, p.quiet(), req);
        }
    }
    if (status != UCS_OK) {
        if (r->started) {
            credit.commit(); /* part of it left */
        }
        if (r->memh != nullptr) { /* an RTS packed but refused */
            w_.completions().drop_memh(*r);
        }
        w_.reqs().release(handle);
        return status;
    }
    credit.commit();
    if (r->done) {
        /* eager, fully out: no request for the caller (its completion is
         * dropped); a failure found on the way (a flush) is the call's */
        status = r->info.status;
        w_.completions().take_last(handle);
        w_.reqs().release(handle);
        return status;
    }
    return running(*r, p.quiet(), req);
}

/* A request for the plan's message; null when out of memory. */
Request *Sender::new_send(Endpoint *ep, const SendPlan &p, uint64_t *handle) {
    Request *r = nullptr;
    if (alloc_status([&] { r = &w_.reqs().allocate(ReqKind::kSend, handle); }) != UCS_OK) {
        return nullptr;
    }
    if ((p.vector != nullptr) && (alloc_status([&] {
                                      r->elements.assign(p.vector->iov,
                                                         p.vector->iov + p.vector->iovcnt);
                                  }) != UCS_OK)) {
        w_.reqs().release(*handle);
        return nullptr;
    }
    r->ep         = ep;
    r->sbuf       = static_cast<const char *>(p.buffer);
    r->length     = p.length;
    r->tag        = p.tag;
    r->data       = p.rdata;
    r->rndv       = p.rndv;
    r->wire_flags = p.wire_flags;
    r->msg_id     = ep->next_msg_id++;
    r->fence      = p.fence();
    r->deliver    = p.deliver;
    r->transmit   = p.transmit;
    r->quiet      = p.quiet();
    if (p.params != nullptr) {
        r->cb  = p.params->cb;
        r->arg = p.params->arg;
    }
    if (p.quiet() && (r->cb == nullptr)) {
        r->cb = quiet_cb; /* queued at completion, so that it is released */
    }
    if (p.flags & UCT_TM_PROTO_OP_USER_REQUEST) {
        RequestPool::adopt(*r, p.params->request);
    }
    if (p.flags & UCT_TM_PROTO_OP_MEMH) {
        r->region = p.params->memh;
    }
    ucs_assertv(!r->vectored_send() || !(p.flags & UCT_TM_PROTO_SEND_INJECT),
                "vectored INJECT send %#llx not staged", static_cast<unsigned long long>(*handle));
    return r;
}

/* Queues the send behind what its endpoint holds; INJECT copies the data
 * now, as the caller may reuse the buffer on return. */
ucs_status_t Sender::queue_send(Request &r, const SendPlan &p) {
    return alloc_status([&] {
        if ((p.flags & UCT_TM_PROTO_SEND_INJECT) && r.bounce.empty()) {
            r.bounce.assign(r.sbuf, r.sbuf + p.length);
        }
        r.ep->sends.push_back(r.self);
        w_.mark_busy(r.ep);
    });
}

/* Drops the completed sends from the endpoint's started list; whether any
 * is left. (Completion does not touch the list: the 8 B paths stay as they
 * are; the list is pruned when it grows and when a fence looks.) */
bool Sender::sends_outstanding(Endpoint *ep) {
    auto &s = ep->started;
    s.erase(std::remove_if(s.begin(), s.end(),
                           [&](uint64_t h) {
                               const Request *r = w_.reqs().lookup(h);
                               return (r == nullptr) || r->done;
                           }),
            s.end());
    return !s.empty();
}

/* Appends a MORE message to the endpoint's batch (copied: the send is done);
 * false when it does not fit beside what the batch holds. */
bool Sender::batch_add(Endpoint *ep, uint64_t tag, uint8_t wire_flags, uint64_t rdata,
                       const void *data, size_t len, const SendVector *vector) {
    std::vector<char> &b    = ep->batch;
    const size_t       room = ep->iface->max_bcopy;
    const size_t       need = (b.empty() ? sizeof(BatchHeader) : 0) + sizeof(BatchEntry) + len;
    if ((b.size() + need > room) ||
        (alloc_status([&] { b.reserve(room); }) != UCS_OK)) { /* once per endpoint */
        return false;
    }
    auto append = [&b](const void *p, size_t n) {
        const char *c = static_cast<const char *>(p);
        b.insert(b.end(), c, c + n); /* within the reserved room: no allocation */
    };
    if (b.empty()) {
        BatchHeader h = {};
        h.kind        = Kind::kBatch;
        h.source      = w_id();
        append(&h, sizeof(h));
        /* no send may take the one-call path past the batch */
        ep->eager_now_saved = ep->eager_now_limit;
        ep->eager_now_limit = 0;
        w_.mark_busy(ep); /* progress sends it if nothing else does */
    }
    ++w_.stats().batched_sends;
    BatchEntry e = {};
    e.tag        = tag;
    e.data       = rdata;
    e.length     = static_cast<uint32_t>(len);
    e.flags      = wire_flags;
    append(&e, sizeof(e));
    if (vector != nullptr) {
        const size_t at = b.size();
        b.resize(at + len); /* within the reserved room */
        iov_gather(vector->iov, vector->iovcnt, b.data() + at);
    } else if (len != 0) {
        append(data, len);
    }
    return true;
}

/* Sends the endpoint's batch, if any. NO_RESOURCE: it stays (and the
 * endpoint busy); any other failure loses sends that already completed,
 * which is logged (the transport reports the endpoint's failure too). */
ucs_status_t Sender::flush_batch(Endpoint *ep) {
    if (ep->batch.empty()) {
        return UCS_OK;
    }
    const ssize_t n = am_send(ep, ep->batch.data(), ep->batch.size(), nullptr, 0);
    if (n == UCS_ERR_NO_RESOURCE) {
        w_.mark_busy(ep);
        return UCS_ERR_NO_RESOURCE;
    }
    ep->batch.clear(); /* keeps its room */
    ep->eager_now_limit = ep->eager_now_saved;
    if (n < 0) {
        ucs_error("tm_proto: batched messages to worker %u lost: %s", ep->peer_id,
                  ucs_status_string(static_cast<ucs_status_t>(n)));
        return static_cast<ucs_status_t>(n);
    }
    return UCS_OK;
}

/* A fenced send that has not started waits for every send started before it. */
bool Sender::fence_holds(const Request &r) {
    return r.fence && (r.sstate == SendState::kQueued) && !r.started && sends_outstanding(r.ep);
}

/* The send left its endpoint's queue: until it completes, a later fenced
 * send waits for it. */
void Sender::left_queue(Request &r) {
    if (r.done) {
        return;
    }
    auto &s = r.ep->started;
    if ((s.size() >= kStartedPrune) && ((s.size() % kStartedPrune) == 0)) {
        sends_outstanding(r.ep); /* amortized: most of them completed long ago */
    }
    s.push_back(r.self);
}


}  // namespace proto
}  // namespace uct_tm
