/*
 * Send protocols: eager (one AM, or a first fragment and middles), and
 * rendezvous (RTS; the receiver answers with CTS once matched and the data
 * follows as kData fragments of at most what the receiver can hold). The
 * choice: rendezvous from config rndv_thresh, or when the peer's eager credit
 * does not cover the message (back-pressure). Messages to one peer leave in
 * posting order: a send waits behind the ones queued before it.
 */
#include "worker.h"

#include <ucs/debug/log_def.h>

#include <cstring>
#include <new>

namespace uct_tm {
namespace proto {

namespace {

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

/* A tagged eager message's data, described by an iov (Worker::eager_iov_). */
size_t pack_iov_cb(void *dest, void *arg) {
    const uct_iov_t *iov = static_cast<const uct_iov_t *>(arg);
    if (iov->length != 0) { /* an empty message's buffer may be NULL, which memcpy must not get */
        memcpy(dest, iov->buffer, iov->length);
    }
    return iov->length;
}

}  // namespace

ssize_t Worker::am_send(Endpoint *ep, const void *hdr, size_t hdr_len, const void *data,
                        size_t len) {
    Pack p{hdr, hdr_len, data, len};
    return uct_ep_am_bcopy(ep->uct_ep, kAmId, pack_cb, &p, 0);
}

MsgHeader Worker::message_header(const Request &r, Kind kind) const {
    MsgHeader h = {};
    h.kind   = kind;
    h.flags  = r.wire_flags;
    h.source = config_.id;
    h.tag    = r.tag;
    h.imm    = r.imm;
    h.length = r.length;
    h.sreq   = r.self;
    return h;
}

/* Inlined into its two callers here. send_eager_now() makes the same calls
 * its own way: it keeps nothing live across them (eager_now_ holds what a
 * refusal needs). */
[[gnu::always_inline]] inline ssize_t Worker::tag_eager(Endpoint *ep, uint64_t tag, uint32_t imm,
                                                        const void *data, size_t len) {
    const uint64_t wire_imm = (uint64_t{config_.id} << 32) | imm;
    if (ep->iface->eager_by_zcopy(len)) {
        return tag_eager_zcopy(ep, tag, wire_imm, data, len);
    }
    eager_iov_.buffer = const_cast<void *>(data);
    eager_iov_.length = len;
    return uct_ep_tag_eager_bcopy(ep->uct_ep, tag, wire_imm, pack_iov_cb, &eager_iov_, 0);
}

/* A tagged eager message straight from the caller's buffer: on tm_sm a small
 * one is one inline FIFO element with tag and imm, where bcopy takes a
 * descriptor (and tag_eager_short has no imm for the source id). Eager sends
 * are done when handed over, so a transport that completes the copy later is
 * waited for here (tm_sm copies inside the call). */
[[gnu::always_inline]] inline ssize_t Worker::tag_eager_zcopy(Endpoint *ep, uint64_t tag,
                                                              uint64_t imm, const void *data,
                                                              size_t len) {
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
ucs_status_t Worker::wait_eager_zcopy() {
    while (eager_comp_.count != 0) {
        uct_worker_progress(uworker_); /* runs no send of ours: nothing nests here */
    }
    const ucs_status_t status = eager_comp_.status;
    eager_comp_.count         = 1;
    eager_comp_.status        = UCS_OK;
    return status;
}

[[gnu::always_inline]] inline ssize_t Worker::am_short(Endpoint *ep, uint64_t tag, uint32_t imm,
                                                       const void *data, size_t len) {
    char              buf[sizeof(ShortHeader) + kShortMax];
    const ShortHeader h = {config_.id, imm};
    memcpy(buf, &h, sizeof(h));
    if (len != 0) { /* data may be null then */
        memcpy(buf + sizeof(h), data, len);
    }
    return uct_ep_am_short(ep->uct_ep, kAmShortId, tag, buf, static_cast<unsigned>(sizeof(h) + len));
}

ucs_status_t Worker::send_eager(Request &r) {
    Endpoint    *ep   = r.ep;
    const char  *data = send_data(r);
    const size_t room = ep->iface->max_bcopy;
    if (ep->tag_path) {
        const ssize_t n = tag_eager(ep, r.tag, r.imm, data, r.length);
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
        const ssize_t n = am_send(ep, &h, sizeof(h), data, chunk);
        if (n < 0) {
            return static_cast<ucs_status_t>(n);
        }
        r.started = true;
        r.offset  = chunk;
    }
    while (r.offset < r.length) {
        FragHeader f = {};
        f.kind   = Kind::kMiddle;
        f.source = config_.id;
        f.msg_id = r.msg_id;
        f.offset = r.offset;
        const size_t  chunk = std::min(r.length - r.offset, room - sizeof(f));
        const ssize_t n     = am_send(ep, &f, sizeof(f), data + r.offset, chunk);
        if (n < 0) {
            return static_cast<ucs_status_t>(n);
        }
        r.offset += chunk;
    }
    return UCS_OK;
}

ucs_status_t Worker::send_rts(Request &r) {
    MsgHeader h = message_header(r, Kind::kRts);
    char      get[sizeof(RndvGet) + kMaxRkey];
    const size_t get_len = pack_rts(r, get);
    if (get_len != 0) {
        h.flags |= kFlagGet;
    }
    if (r.ep->tag_path) {
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

ucs_status_t Worker::push_data(Request &r) {
    ucs_assertv(r.sstate == SendState::kPushing, "send %#llx pushes data in state %d",
                static_cast<unsigned long long>(r.self), static_cast<int>(r.sstate));
    const char  *data = send_data(r);
    const size_t room = r.ep->iface->max_bcopy - sizeof(DataHeader);
    while (r.offset < r.limit) {
        DataHeader d = {};
        d.kind   = Kind::kData;
        d.source = config_.id;
        d.rreq   = r.rreq;
        d.offset = r.offset;
        const size_t  chunk = std::min(r.limit - r.offset, room);
        const ssize_t n     = am_send(r.ep, &d, sizeof(d), data + r.offset, chunk);
        if (n < 0) {
            return static_cast<ucs_status_t>(n);
        }
        r.offset += chunk;
    }
    if (!r.await_ack) {
        complete(r, UCS_OK); /* else the receiver still reads the rest: done on its kAck */
    }
    return UCS_OK;
}

/* Hands a queued send to the transport as far as it goes. */
ucs_status_t Worker::start_send(Request &r) {
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
        if (r.wire_flags & kFlagSync) {
            r.set_state(SendState::kEagerSent);
        } else {
            complete(r, UCS_OK);
        }
    }
    return status;
}

/* One eager message in one transport call: the transport's tagged eager
 * message on the tag path, else one am_short or one am_bcopy after a
 * MsgHeader. */
[[gnu::always_inline]] inline ssize_t Worker::send_single(Endpoint *ep, uint64_t tag, uint32_t imm,
                                                          const void *buffer, size_t length) {
    if (ep->tag_path) {
        return tag_eager(ep, tag, imm, buffer, length);
    }
    if (length <= ep->short_max) {
        return am_short(ep, tag, imm, buffer, length);
    }
    MsgHeader h = {};
    h.kind   = Kind::kEager;
    h.source = config_.id;
    h.tag    = tag;
    h.imm    = imm;
    h.length = length;
    return am_send(ep, &h, sizeof(h), buffer, length);
}

/* Worker::send found the message eager, single and covered by credit, with
 * nothing queued before it. A refusal goes to send_general(), which decides
 * afresh (and queues on NO_RESOURCE). A message for a tag list (zcopy or
 * bcopy, as tag_eager() picks) is counted sent before the transport call, and
 * what a refusal needs waits in the worker (eager_now_) (docs/perf.md, "Code shape of the hot paths"). */
ucs_status_t Worker::send_eager_now(Endpoint *ep, const void *buffer, size_t length, uint64_t tag,
                                    const uct_tm_proto_op_params_t *params, uint64_t *req) {
    Worker *w = ep->worker;
    if (ucs_likely(ep->tag_path)) {
        const uint64_t imm = (uint64_t{w->config_.id} << 32) |
                             ((params != nullptr) ? params->imm : 0);
        w->eager_iov_.buffer = const_cast<void *>(buffer);
        w->eager_iov_.length = length;
        w->eager_now_        = {ep, tag, params, req};
        ep->credits         -= length;
        ++w->stats_.eager_sends;
        ucs_status_t status;
        if (ep->iface->eager_by_zcopy(length)) {
            status = uct_ep_tag_eager_zcopy(ep->uct_ep, tag, imm, &w->eager_iov_,
                                            (length != 0) ? 1 : 0, 0, &w->eager_comp_);
        } else {
            const ssize_t n = uct_ep_tag_eager_bcopy(ep->uct_ep, tag, imm, pack_iov_cb,
                                                     &w->eager_iov_, 0);
            status = (n >= 0) ? UCS_OK : static_cast<ucs_status_t>(n);
        }
        if (ucs_likely(status == UCS_OK)) {
            if (req != nullptr) {
                *req = 0;
            }
            return UCS_OK;
        }
        return w->eager_now_refused(status);
    }
    return w->send_eager_now_other(ep, buffer, length, tag, params, req);
}

/* The tagged message above did not complete in the call. */
ucs_status_t Worker::eager_now_refused(ucs_status_t status) {
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
    --stats_.eager_sends;
    return send_general(a.ep, eager_iov_.buffer, length, a.tag, a.params, a.req);
}

/* Every other message send_eager_now() takes (AM). */
ucs_status_t Worker::send_eager_now_other(Endpoint *ep, const void *buffer, size_t length,
                                          uint64_t tag, const uct_tm_proto_op_params_t *params,
                                          uint64_t *req) {
    const ssize_t n = send_single(ep, tag, (params != nullptr) ? params->imm : 0, buffer, length);
    if (n >= 0) {
        ep->credits -= length;
        ++stats_.eager_sends;
        if (req != nullptr) {
            *req = 0;
        }
        return UCS_OK;
    }
    return send_general(ep, buffer, length, tag, params, req);
}

ucs_status_t Worker::send_general(Endpoint *ep, const void *buffer, size_t length, uint64_t tag,
                                  const uct_tm_proto_op_params_t *params, uint64_t *req) {
    const unsigned flags = (params != nullptr) ? params->flags : 0;
    const bool     user  = (flags & UCT_TM_PROTO_OP_USER_REQUEST) != 0;
    if ((ep == nullptr) || (ep->magic != Endpoint::kMagic) || (ep->worker != this) ||
        ((buffer == nullptr) && (length != 0)) ||
        !op_params_valid(params, UCT_TM_PROTO_SEND_INJECT | UCT_TM_PROTO_SEND_SYNC, req) ||
        !region_valid(params, buffer, length)) {
        return UCS_ERR_INVALID_PARAM;
    }
    uint64_t unused;
    req  = (req != nullptr) ? req : &unused;
    *req = 0;
    const uint32_t imm  = (params != nullptr) ? params->imm : 0;
    const bool     sync = (flags & UCT_TM_PROTO_SEND_SYNC) != 0;
    /* over a tag list: one tagged eager message at most, and sync messages
     * need the rendezvous request's header to be answered */
    const bool tag_send = ep->tag_path;
    bool rndv = (length >= config_.rndv_thresh) ||
                (tag_send && (sync || (length > ep->iface->tag_eager_max)));
    if (!rndv && (length > ep->credits)) {
        /* Credit the peer returned may still sit in the transport: a streaming
         * sender runs ahead of the receiver by the whole window and would
         * otherwise turn most messages into rendezvous (64 KiB tag_bw over
         * tm_sm: 88%). Our own callbacks wait for progress(), so none runs here. */
        uct_worker_progress(uworker_);
        if (length > ep->credits) {
            rndv = true; /* the peer's buffer for us is full: it takes the data when matched */
            ++stats_.backpressure;
        }
    }
    if (!rndv) {
        ep->credits -= length;
        ++stats_.eager_sends;
    } else {
        ++stats_.rndv_sends;
    }

    /* the common case: one eager message, nothing queued before it */
    if (!rndv && !sync && ep->sends.empty() &&
        (tag_send || (sizeof(MsgHeader) + length <= ep->iface->max_bcopy))) {
        const ssize_t n = send_single(ep, tag, imm, buffer, length);
        if (n >= 0) {
            return UCS_OK;
        }
        if (n != UCS_ERR_NO_RESOURCE) {
            ep->credits += length;
            return static_cast<ucs_status_t>(n);
        }
    }

    uint64_t handle;
    Request *r = nullptr;
    if (alloc_status([&] { r = &reqs_.allocate(ReqKind::kSend, &handle); }) != UCS_OK) {
        if (!rndv) {
            ep->credits += length;
        }
        return UCS_ERR_NO_MEMORY;
    }
    r->ep         = ep;
    r->sbuf       = static_cast<const char *>(buffer);
    r->length     = length;
    r->tag        = tag;
    r->imm        = imm;
    r->rndv       = rndv;
    r->wire_flags = sync ? kFlagSync : 0;
    r->msg_id     = ep->next_msg_id++;
    if (params != nullptr) {
        r->cb  = params->cb;
        r->arg = params->arg;
    }
    if (user) {
        RequestPool::adopt(*r, params->request);
    }
    if (flags & UCT_TM_PROTO_OP_MEMH) {
        r->region = params->memh;
    }
    ucs_status_t status = UCS_OK;
    if ((flags & UCT_TM_PROTO_SEND_INJECT) && rndv) {
        /* read after return */
        status = alloc_status([&] { r->bounce.assign(r->sbuf, r->sbuf + length); });
    }
    if (status == UCS_OK) {
        status = ep->sends.empty() ? start_send(*r) : UCS_ERR_NO_RESOURCE;
    }
    if (status == UCS_ERR_NO_RESOURCE) {
        status = alloc_status([&] {
            if ((flags & UCT_TM_PROTO_SEND_INJECT) && r->bounce.empty()) {
                r->bounce.assign(r->sbuf, r->sbuf + length);
            }
            ep->sends.push_back(handle);
            mark_busy(ep);
        });
        if (status == UCS_OK) {
            *req = handed_out(*r);
            return UCS_INPROGRESS;
        }
    }
    if (status != UCS_OK) {
        if (!rndv && !r->started) {
            ep->credits += length;
        }
        if (r->memh != nullptr) { /* an RTS packed but refused */
            drop_memh(*r);
        }
        reqs_.release(handle);
        return status;
    }
    if (r->done) {
        /* eager, fully out: no request for the caller (its completion is dropped) */
        completions_.take_last(handle);
        reqs_.release(handle);
        return UCS_OK;
    }
    *req = handed_out(*r);
    return UCS_INPROGRESS;
}

unsigned Worker::progress_queues() {
    unsigned n = 0;
    for (size_t i = 0; i < busy_.size();) {
        Endpoint *ep = busy_[i];
        while (!ep->ctrl.empty()) {
            const ssize_t s = am_send(ep, &ep->ctrl.front(), sizeof(CtrlHeader), nullptr, 0);
            if (s == UCS_ERR_NO_RESOURCE) {
                break;
            }
            ep->ctrl.pop_front();
            ++n;
        }
        while (!ep->sends.empty()) {
            Request *r = reqs_.lookup(ep->sends.front());
            if ((r == nullptr) || r->done) {
                ep->sends.pop_front();
                continue;
            }
            const ucs_status_t status = start_send(*r);
            if (status == UCS_ERR_NO_RESOURCE) {
                break;
            }
            if (status != UCS_OK) {
                complete(*r, status);
            }
            ep->sends.pop_front();
            ++n;
        }
        if (ep->ctrl.empty() && ep->sends.empty()) {
            ep->busy = false;
            busy_[i] = busy_.back();
            busy_.pop_back();
        } else {
            ++i;
        }
    }
    return n;
}

}  // namespace proto
}  // namespace uct_tm
