/*
 * Receives: posting (an earlier unexpected message first, else a queue),
 * a message's arrival matched across the receive tiers or queued as
 * unexpected, probe, truncation. The ordering rule and its proof are in docs/proto.md
 * "Ordering": tier 0 (the transport's tag list) holds receives older than
 * every software one, as it takes receives only while software holds none;
 * in software, tier 1 (the matcher, any source) and tier 2 (a matcher per
 * source) are merged by posting sequence at each arrival.
 */
#include "receiver.h"

#include "worker.h"

#include <ucs/debug/log_def.h>

#include <algorithm>
#include <cstring>

namespace uct_tm {
namespace proto {

void Receiver::unexpected_bytes(int64_t delta) {
    w_.stats().unexpected_bytes += delta;
    w_.stats().unexpected_peak = std::max(w_.stats().unexpected_peak, w_.stats().unexpected_bytes);
}

/* A conforming sender never has more unexpected bytes here than the credit
 * we granted it (it spends credit on every eager byte and gets it back only
 * after they left the buffer), and together the senders' windows fit the
 * cap: neither check refuses one. */
bool Receiver::fits(const Account &acct, uint64_t length, uint32_t source) {
    if ((acct.bytes > w_.window()) || (length > w_.window() - acct.bytes)) {
        w_.refuse(source, "eager bytes beyond the credit granted to it");
        return false;
    }
    /* senders with endpoints hold at most a window each, MAX_PEERS of them
     * (ep_create()), those without one window together */
    const uint64_t cap = w_.config().unexpected_cap + w_.window();
    if ((w_.stats().unexpected_bytes > cap) || (length > cap - w_.stats().unexpected_bytes)) {
        w_.refuse(source, "the unexpected buffer is full");
        return false;
    }
    return true;
}

void Receiver::release_charge(Unexpected &u) {
    unexpected_bytes(-static_cast<int64_t>(u.length));
    if (u.charged != nullptr) {
        u.charged->bytes -= std::min(u.charged->bytes, u.length);
        u.charged = nullptr;
    }
}

void Receiver::erase_partial(uint32_t source, uint32_t msg_id) {
    if (Partial *part = partial_.find(source, msg_id)) {
        if (part->charged != nullptr) {
            part->charged->fragmented -= std::min<uint32_t>(part->charged->fragmented, 1);
        }
        partial_.erase(source, msg_id);
    }
}

/* A first fragment of `first_len` bytes arrived: the rest goes to receive
 * `req` or to unexpected slot `unex`. */
void Receiver::track_fragments(const MsgHeader &h, size_t first_len, uint64_t req, uint32_t unex,
                               Account &acct) {
    Partial part;
    part.req     = req;
    part.unex    = unex;
    part.source  = h.source;
    part.length  = h.length;
    part.arrived = first_len;
    part.sreq    = h.sreq;
    part.sync    = (h.flags & kFlagSync) != 0;
    part.deliver = (h.flags & kFlagDeliver) != 0;
    part.charged = &acct;
    /* a message id the sender used again (a new endpoint of its) replaces
     * the old message, which can no longer finish */
    const Partial *old      = partial_.find(h.source, h.msg_id);
    Account *const replaced = (old != nullptr) ? old->charged : nullptr;
    if (partial_.set(h.source, h.msg_id, part) != UCS_OK) {
        ucs_error("tm_proto: out of memory tracking a message from worker %u", h.source);
        return;
    }
    if (replaced != nullptr) {
        replaced->fragmented -= std::min<uint32_t>(replaced->fragmented, 1);
    }
    ++acct.fragmented;
}

/* A message that matched receive `r`, by kind: a rendezvous request starts
 * the transfer, an eager message completes the receive, a first fragment
 * waits for the rest. */
[[gnu::always_inline]] inline void Receiver::message_matched(Request &r, const MsgHeader &h,
                                                             const char *payload, size_t len,
                                                             Endpoint *ep, Account &acct) {
    ++w_.stats().expected;
    r.set_state(RecvState::kArriving);
    accept_message(r, h, ep);
    if (h.kind == Kind::kRts) {
        w_.rndv().start_rndv_recv(r, h.source, h.sreq, payload, len, h.flags & kFlagPut);
        return;
    }
    place(r, 0, payload, len);
    r.offset = len;
    if (h.kind == Kind::kEager) {
        w_.completions().finish_recv(r);
        if (h.flags & (kFlagSync | kFlagDeliver)) {
            w_.control().send_ack(h.source, h.sreq);
        }
        /* message_consumed(), the endpoint known */
        w_.control().return_credit(h.source, ep, h.length);
        w_.completions().publish_now(r);
        return;
    }
    track_fragments(h, len, r.self, UINT32_MAX, acct);
}

void Receiver::handle_message(const MsgHeader &h, const char *payload, size_t len,
                              const Iface *iface) {
    Endpoint *ep;
    if (ucs_unlikely(!w_.bound(h.source, iface, &ep))) {
        w_.refuse(h.source, "arrived over another transport than our endpoint to it");
        return;
    }
    Account &acct = w_.account_of(ep);
    if (ucs_unlikely(h.kind == Kind::kFirst) && (acct.fragmented >= kMaxOpenFragmented)) {
        w_.refuse(h.source, "too many fragmented messages begun and not finished");
        return;
    }
    Request *r = ucs_likely(!(h.flags & kFlagUntagged)) ? posted_.match(h.tag, h.source)
                                                        : match_untagged(h);
    if (r != nullptr) {
        message_matched(*r, h, payload, len, ep, acct);
    } else {
        message_unexpected(h, payload, len, acct);
    }
}

/* A message no receive was posted for waits, buffered, for a receive or a
 * probe (or, with buffered receives, goes to the application). */
void Receiver::message_unexpected(const MsgHeader &h, const char *payload, size_t len,
                                  Account &acct) {
    if ((h.kind != Kind::kRts) && !fits(acct, h.length, h.source)) {
        return;
    }
    ++w_.stats().unexpected;
    uint32_t idx;
    if (!buffer_unexpected(h, payload, len, acct, &idx)) {
        return;
    }
    if (w_.config().buffered_cb != nullptr) {
        hold_buffered(idx); /* buffered receives: the application's, out of matching */
    } else if (!enqueue_unexpected(idx)) {
        return;
    }
    if (h.kind == Kind::kFirst) {
        track_fragments(h, len, 0, idx, acct);
    } else if (h.flags & kFlagDeliver) {
        w_.control().send_ack(h.source, h.sreq); /* buffered: delivered */
    }
}

/* An unexpected entry for the message in *idx: a rendezvous request keeps
 * its RndvGet and rkey, if any; an eager message gets room for all of its
 * data, charged to `acct`. False when out of memory (logged). */
bool Receiver::buffer_unexpected(const MsgHeader &h, const char *payload, size_t len, Account &acct,
                                 uint32_t *idx) {
    if (alloc_status([&] { *idx = unexpected_.allocate(); }) != UCS_OK) {
        ucs_error("tm_proto: out of memory for an unexpected message from worker %u", h.source);
        return false;
    }
    Unexpected &u = unexpected_[*idx];
    u.rndv        = (h.kind == Kind::kRts);
    u.put_offer = u.rndv && (h.flags & kFlagPut);
    u.sync        = (h.flags & kFlagSync) != 0;
    u.source      = h.source;
    u.has_data    = (h.flags & kFlagData) != 0;
    u.rdata       = h.data;
    u.tag         = h.tag; /* 0 for untagged messages: the arrival paths see to it */
    u.untagged    = (h.flags & kFlagUntagged) != 0;
    u.length      = h.length;
    u.sreq        = h.sreq;
    u.msg_id      = h.msg_id;
    if (alloc_status([&] {
            if (u.rndv) {
                u.data.assign(payload, payload + len);
            } else {
                u.data.resize(h.length);
            }
        }) != UCS_OK) {
        ucs_error("tm_proto: out of memory buffering %zu bytes from worker %u",
                  static_cast<size_t>(u.rndv ? len : h.length), h.source);
        unexpected_.release(*idx);
        return false;
    }
    if (!u.rndv) {
        if (len != 0) {
            memcpy(u.data.data(), payload, len);
        }
        u.arrived = len;
        unexpected_bytes(static_cast<int64_t>(h.length));
        acct.bytes += h.length;
        u.charged   = &acct;
    }
    return true;
}

/* Puts a buffered message where receives look for it; false when the
 * queue refused it (logged, the entry dropped). */
bool Receiver::enqueue_unexpected(uint32_t idx) {
    Unexpected        &u      = unexpected_[idx];
    const ucs_status_t status = u.untagged
                                    ? alloc_status([&] { unexpected_.enqueue_untagged(idx); })
                                    : alloc_status([&] { return unexpected_.enqueue(idx); });
    if (status != UCS_OK) {
        ucs_error("tm_proto: unexpected queue refused a message: %s", ucs_status_string(status));
        if (!u.rndv) {
            release_charge(u);
        }
        unexpected_.release(idx);
        return false;
    }
    return true;
}

/* A receive takes an unexpected message (already out of the matcher). */
void Receiver::deliver_unexpected(Request &r, uint32_t idx) {
    Unexpected &u = unexpected_[idx];
    MsgHeader   h = {};
    h.tag    = u.tag;
    h.length = u.length;
    h.data   = u.rdata;
    h.flags  = static_cast<uint8_t>((u.has_data ? kFlagData : 0) | (u.untagged ? kFlagUntagged : 0));
    h.source = u.source;
    r.set_state(RecvState::kArriving);
    accept_message(r, h, w_.peers().of(u.source));
    if (u.rndv) {
        /* nothing in it touches the unexpected queue: the RndvGet is read in place */
        w_.rndv().start_rndv_recv(r, u.source, u.sreq, u.data.data(), u.data.size(), u.put_offer);
        unexpected_.remove(idx);
        return;
    }
    place(r, 0, u.data.data(), u.arrived);
    r.offset = u.arrived;
    release_charge(u);
    if (u.arrived == u.length) {
        w_.completions().finish_recv(r);
        w_.control().message_consumed(u.source, u.length, u.sync, u.sreq);
    } else if (const ucs_status_t failure = w_.peer_failure(u.source); failure != UCS_OK) {
        w_.completions().complete(r, failure); /* the rest cannot come any more */
        erase_partial(u.source, u.msg_id);
    } else {
        if (Partial *part = partial_.find(u.source, u.msg_id)) {
            part->unex = UINT32_MAX;
            part->req  = r.self;
        }
    }
    unexpected_.remove(idx);
}

/* Drops an unexpected message (already out of the matcher): a rendezvous
 * sender is told it is done, an eager one gets its credit back. */
void Receiver::drop_unexpected(uint32_t idx) {
    Unexpected &u = unexpected_[idx];
    if (u.rndv) {
        CtrlHeader h = {};
        h.kind = Kind::kAck;
        h.req  = u.sreq;
        w_.control().send_to(u.source, h);
    } else {
        release_charge(u);
        if (u.arrived == u.length) {
            w_.control().message_consumed(u.source, u.length, u.sync, u.sreq);
        } else if (w_.peer_failure(u.source) != UCS_OK) {
            erase_partial(u.source, u.msg_id); /* the rest cannot come any more */
        } else if (Partial *part = partial_.find(u.source, u.msg_id)) {
            part->unex = UINT32_MAX; /* later fragments are dropped */
        }
    }
    unexpected_.remove(idx);
}

void Receiver::fill_info(uct_tm_proto_info_t *info, const Unexpected &u) const {
    info->status = UCS_OK;
    info->tag    = u.tag;
    info->length = u.length;
    info->data   = u.rdata;
    info->flags  = (u.has_data ? UCT_TM_PROTO_INFO_REMOTE_DATA : 0) |
                   (u.untagged ? UCT_TM_PROTO_INFO_UNTAGGED : 0);
    info->source = u.source;
    info->buffer = nullptr;
    info->ep     = user_handle(w_.peers().of(u.source));
}

/* Inlined into recv_general(): tier 0 while software holds no receive (and
 * no tagged message is arriving in fragments), else tier 1 or (directed) 2. */
[[gnu::always_inline]] inline ucs_status_t Receiver::post_recv(Request &r) {
    r.seq = posted_.next_seq();
    /* a vectored receive goes to the tag list as an iov list if the
     * transport takes that many elements (tested last: without a tag list
     * it costs nothing) */
    if (!r.has_source && tag_list_.enabled() && posted_.empty() && !gathers_.open() &&
        (((r.rbuf != nullptr) || (r.capacity == 0)) ? tag_list_.post(r) : tag_list_.post_iov(r))) {
        ++w_.stats().offloaded_recvs;
        return UCS_OK;
    }
    const ucs_status_t status =
            alloc_status([&]() __attribute__((always_inline)) { return posted_.hold(r); });
    if (status == UCS_OK) {
        ++w_.stats().software_recvs;
    }
    return status;
}

/* recv() found nothing to match first and nothing held in software: the
 * receive goes to the transport's tag list, unless it refuses (a size the
 * list does not take goes to software before a request is made). */
ucs_status_t Receiver::recv_offloaded(void *buffer, size_t length, uint64_t tag, uint64_t mask,
                                      const uct_tm_proto_op_params_t *params, uint64_t *req) {
    uint64_t handle;
    Request *r;
    if (tag_list_.takes(length) &&
        ((r = new_recv<true>(buffer, length, params, &handle)) != nullptr)) {
        r->tag  = tag;
        r->mask = mask;
        r->seq  = posted_.next_seq();
        if (tag_list_.post(*r)) {
            ++w_.stats().offloaded_recvs;
            *req = handed_out(*r);
            return UCS_INPROGRESS;
        }
        reqs_.release(handle); /* the tag list refused it: software holds it */
    }
    return recv_general(buffer, length, tag, mask, nullptr, params, req);
}

ucs_status_t Receiver::recv_direct(void *buffer, size_t length, uint64_t tag, uint64_t mask,
                                   const uct_tm_proto_op_params_t *params, uint64_t *req) {
    if (tag_list_.takes(length)) {
        DirectRecv *d = direct_recv_in(params->request);
        tag_list_.prepare_direct(d);
        d->rbuf     = static_cast<char *>(buffer);
        d->capacity = length;
        d->tag      = tag;
        d->mask     = mask;
        d->consumed = false;
        auto *pub            = static_cast<uct_tm_proto_request_status_t *>(params->request);
        pub->status          = UCS_INPROGRESS;
        *user_handle_in(pub) = 0; /* a DirectRecv, not a request slot */
        /* all done before the post (the list is complete at any callback),
         * so nothing is live across it; a refusal undoes it (direct_refused) */
        ++w_.stats().offloaded_recvs;
        if (req != nullptr) {
            *req = 0;
        }
        direct_post_ = {params, req};
        if (ucs_likely(tag_list_.post_direct(d, buffer, length, tag, mask) == UCS_OK)) {
            return UCS_INPROGRESS;
        }
        return direct_refused();
    }
    return recv_general(buffer, length, tag, mask, nullptr, params, req);
}

ucs_status_t Receiver::direct_refused() {
    const DirectPost a = direct_post_;
    DirectRecv      *d = direct_recv_in(a.params->request);
    tag_list_.unlist_direct(d);
    --w_.stats().offloaded_recvs;
    return recv_general(d->rbuf, d->capacity, d->tag, d->mask, nullptr, a.params, a.req);
}

/* A receive into one buffer: checked, then matched or held (kUntagged:
 * among the untagged ones). Inlined into its two callers. */
template <bool kUntagged>
[[gnu::always_inline]] inline ucs_status_t
Receiver::recv_contiguous(void *buffer, size_t length, uint64_t tag, uint64_t mask,
                          Endpoint *source, const uct_tm_proto_op_params_t *params, uint64_t *req) {
    if (((buffer == nullptr) && (length != 0)) || !recv_args_valid(source, params, req) ||
        !w_.region_valid(params, buffer, length)) {
        return UCS_ERR_INVALID_PARAM;
    }
    uint64_t unused;
    req  = (req != nullptr) ? req : &unused;
    *req = 0;
    uint64_t handle;
    Request *r = new_recv(buffer, length, params, &handle);
    if (r == nullptr) {
        return UCS_ERR_NO_MEMORY;
    }
    if constexpr (kUntagged) {
        r->has_source = source != nullptr;
        r->src_filter = (source != nullptr) ? source->peer_id : 0;
        return post_untagged(*r, handle, source, req);
    }
    return match_or_post_inline(*r, handle, tag, mask, source, req);
}

ucs_status_t Receiver::recv_general(void *buffer, size_t length, uint64_t tag, uint64_t mask,
                                    Endpoint *source, const uct_tm_proto_op_params_t *params,
                                    uint64_t *req) {
    if (ucs_unlikely((params != nullptr) &&
                     (params->flags & (UCT_TM_PROTO_OP_UNTAGGED | UCT_TM_PROTO_RECV_MULTI)))) {
        return recv_untagged(buffer, length, source, params, req); /* out of the tagged path */
    }
    return recv_contiguous<false>(buffer, length, tag, mask, source, params, req);
}

ucs_status_t Receiver::match_or_post(Request &r, uint64_t handle, uint64_t tag, uint64_t mask,
                                     Endpoint *source, uint64_t *req) {
    if (r.untagged) { /* recvv */
        r.has_source = source != nullptr;
        r.src_filter = (source != nullptr) ? source->peer_id : 0;
        return post_untagged(r, handle, source, req);
    }
    return match_or_post_inline(r, handle, tag, mask, source, req);
}

[[gnu::always_inline]] inline ucs_status_t
Receiver::match_or_post_inline(Request &r, uint64_t handle, uint64_t tag, uint64_t mask,
                               Endpoint *source, uint64_t *req) {
    r.tag        = tag;
    r.mask       = mask;
    r.has_source = source != nullptr;
    r.src_filter = (source != nullptr) ? source->peer_id : 0;
    uint32_t idx;
    /* the common empty case inline, asked of the matcher (software_idle()) */
    if ((matcher_.unexpected_count() != 0) &&
        unexpected_.find(tag, mask, r.has_source, r.src_filter, &idx, true)) {
        deliver_unexpected(r, idx);
    } else {
        const ucs_status_t status = ucs_unlikely(source_failed(source)) ? source->failure
                                                                        : post_recv(r);
        if (status != UCS_OK) {
            reqs_.release(handle);
            return status;
        }
    }
    *req = handed_out(r);
    return UCS_INPROGRESS;
}

/* ---- fi_msg: untagged receives and multi-receives -------------------------- */

/* The receive an untagged message goes to: the earliest matching one of
 * tier 3, or a child of a multi-receive; null: none (or out of memory for
 * a child: the message waits as unexpected). */
[[gnu::noinline]] Request *Receiver::match_untagged(const MsgHeader &h) {
    Request *r = posted_.match_untagged(h.source);
    if ((r == nullptr) || !r->multi) {
        return r;
    }
    Request *c = new_child(*r);
    if (c != nullptr) {
        lend(*r, *c, h.length);
    }
    return c;
}

/* A child receive for multi-receive `m`: null when out of memory. */
Request *Receiver::new_child(Request &m) {
    uint64_t handle;
    Request *c = nullptr;
    if (alloc_status([&] { c = &reqs_.allocate(ReqKind::kRecv, &handle); }) != UCS_OK) {
        ucs_error("tm_proto: out of memory for a message into a multi-receive: it waits");
        return nullptr;
    }
    c->cb       = m.cb; /* queued at completion; child_done() calls m's */
    c->arg      = m.arg;
    c->parent   = m.self;
    c->untagged = true;
    return c;
}

/* Lends child `c` the next bytes of `m` for a message of `length` bytes;
 * `m` is released from tier 3 once fewer than min_multi_recv bytes are left. */
void Receiver::lend(Request &m, Request &c, uint64_t length) {
    const size_t left = m.capacity - m.used;
    c.rbuf            = m.rbuf + m.used;
    c.capacity        = static_cast<size_t>(std::min<uint64_t>(length, left));
    m.used           += c.capacity;
    ++m.children;
    if (m.capacity - m.used < w_.config().min_multi_recv) {
        posted_.withdraw(m);
        m.set_state(RecvState::kArriving);
        multi_maybe_done(m);
    }
}

/* A multi-receive released and with every child delivered completes. */
void Receiver::multi_maybe_done(Request &m) {
    if (m.done || (m.rstate == RecvState::kPosted) || (m.children != 0)) {
        return;
    }
    m.info        = uct_tm_proto_info_t{};
    m.info.flags  = UCT_TM_PROTO_INFO_UNTAGGED | UCT_TM_PROTO_INFO_MULTI_RECV;
    m.info.length = m.used;
    m.info.buffer = m.rbuf;
    w_.completions().complete(m, m.multi_status);
}

/* Completions::deliver() found child `c` complete: its message is reported
 * through the multi-receive's callback, and the child let go. */
void Receiver::child_done(Request &c) {
    uct_tm_proto_info_t info = c.info;
    info.buffer              = c.rbuf;
    const uint64_t parent    = c.parent;
    reqs_.release(c.self);
    Request *m = reqs_.lookup(parent);
    if ((m == nullptr) || m->done) {
        return;
    }
    --m->children;
    if (m->cb != nullptr) {
        m->cb(m->arg, parent, &info);
    }
    if ((m = reqs_.lookup(parent)) != nullptr) {
        multi_maybe_done(*m);
    }
}

/* recv() with UNTAGGED (or MULTI): checked as every receive is, and a
 * multi-receive is untagged, reports through its callback, has room. */
ucs_status_t Receiver::recv_untagged(void *buffer, size_t length, Endpoint *source,
                                     const uct_tm_proto_op_params_t *params, uint64_t *req) {
    const unsigned flags = params->flags;
    if (!(flags & UCT_TM_PROTO_OP_UNTAGGED) ||
        ((flags & UCT_TM_PROTO_RECV_MULTI) &&
         ((params->cb == nullptr) || (flags & UCT_TM_PROTO_OP_USER_REQUEST) || (length == 0)))) {
        return UCS_ERR_INVALID_PARAM;
    }
    return recv_contiguous<true>(buffer, length, 0, 0, source, params, req);
}

/* An untagged receive: the earliest untagged message that arrived, or tier
 * 3; a multi-receive takes as many as it has room for first. */
[[gnu::noinline]] ucs_status_t Receiver::post_untagged(Request &r, uint64_t handle,
                                                       const Endpoint *source, uint64_t *req) {
    uint32_t idx;
    if (!r.multi && unexpected_.find_untagged(r.has_source, r.src_filter, &idx)) {
        deliver_unexpected(r, idx);
        *req = handed_out(r);
        return UCS_INPROGRESS;
    }
    if (ucs_unlikely(source_failed(source))) {
        reqs_.release(handle);
        return source->failure;
    }
    if (alloc_status([&] { posted_.hold_untagged(r); }) != UCS_OK) {
        reqs_.release(handle);
        return UCS_ERR_NO_MEMORY;
    }
    ++w_.stats().software_recvs;
    while (r.multi && (r.rstate == RecvState::kPosted) && (unexpected_.untagged_count() != 0)) {
        Request *c = new_child(r);
        if (c == nullptr) {
            break;
        }
        if (!unexpected_.find_untagged(r.has_source, r.src_filter, &idx)) {
            reqs_.release(c->self);
            break;
        }
        lend(r, *c, unexpected_[idx].length);
        deliver_unexpected(*c, idx);
    }
    *req = handed_out(r);
    return UCS_INPROGRESS;
}

/* Buffered receives: message `idx` no receive matched is claimed for the
 * application and reported once it arrived whole (a rendezvous request at
 * once, its data stays at the sender). */
void Receiver::hold_buffered(uint32_t idx) {
    Unexpected    &u   = unexpected_[idx];
    const uint64_t msg = unexpected_.claim(idx);
    u.held             = true;
    if (u.rndv || (u.arrived == u.length)) {
        if (alloc_status([&] { w_.later(Later::Kind::kBuffered, msg); }) != UCS_OK) {
            ucs_error("tm_proto: out of memory reporting a message from worker %u: dropped",
                      u.source);
            drop_unexpected(idx);
        }
    }
}

void Receiver::report_buffered(uint64_t msg) {
    uint32_t          idx;
    const Unexpected *u = unexpected_.claimed(msg, &idx);
    if (u == nullptr) {
        return; /* taken or dropped already */
    }
    uct_tm_proto_info_t info;
    fill_info(&info, *u);
    const bool data = !u->rndv;
    w_.config().buffered_cb(w_.config().buffered_arg, msg, &info, data ? u->data.data() : nullptr,
                            data ? u->arrived : 0);
}

ucs_status_t Receiver::probe(uint64_t tag, uint64_t mask, Endpoint *source, unsigned flags,
                             void *buffer, size_t length, size_t *copied, uct_tm_proto_info_t *info,
                             uint64_t *msg) {
    if (copied != nullptr) {
        *copied = 0;
    }
    const unsigned action = flags & (UCT_TM_PROTO_PROBE_CLAIM | UCT_TM_PROTO_PROBE_DISCARD);
    if (!(flags & UCT_TM_PROTO_PROBE_PEEK) ||
        (flags & ~unsigned(UCT_TM_PROTO_PROBE_PEEK | UCT_TM_PROTO_PROBE_CLAIM |
                           UCT_TM_PROTO_PROBE_DISCARD)) ||
        (action == (UCT_TM_PROTO_PROBE_CLAIM | UCT_TM_PROTO_PROBE_DISCARD)) ||
        ((action == UCT_TM_PROTO_PROBE_CLAIM) && (msg == nullptr)) ||
        ((source != nullptr) && ((source->magic != Endpoint::kMagic) || (source->worker != &w_))) ||
        ((buffer == nullptr) && (length != 0))) {
        return UCS_ERR_INVALID_PARAM;
    }
    uint32_t idx;
    if (!unexpected_.find(tag, mask, source != nullptr, (source != nullptr) ? source->peer_id : 0,
                          &idx, action != 0)) {
        return UCS_ERR_NO_ELEM;
    }
    Unexpected &u = unexpected_[idx];
    if (info != nullptr) {
        fill_info(info, u);
    }
    /* the eager bytes here so far: fragments arrive in order, so a prefix */
    const size_t n = u.rndv ? 0 : std::min<uint64_t>(length, u.arrived);
    if (n != 0) {
        memcpy(buffer, u.data.data(), n);
    }
    if (copied != nullptr) {
        *copied = n;
    }
    if (action == UCT_TM_PROTO_PROBE_CLAIM) {
        *msg = unexpected_.claim(idx);
    } else if (action == UCT_TM_PROTO_PROBE_DISCARD) {
        drop_unexpected(idx);
    }
    return UCS_OK;
}

ucs_status_t Receiver::recv_claimed(uint64_t msg, void *buffer, size_t length,
                                    const uct_tm_proto_op_params_t *params, uint64_t *req) {
    uint32_t idx;
    if ((unexpected_.claimed(msg, &idx) == nullptr) || ((buffer == nullptr) && (length != 0)) ||
        !op_params_valid(params, 0, req) || !w_.region_valid(params, buffer, length)) {
        return UCS_ERR_INVALID_PARAM;
    }
    uint64_t unused;
    req = (req != nullptr) ? req : &unused;
    uint64_t handle;
    Request *r = new_recv(buffer, length, params, &handle);
    if (r == nullptr) {
        return UCS_ERR_NO_MEMORY;
    }
    deliver_unexpected(*r, idx);
    *req = handed_out(*r);
    return UCS_INPROGRESS;
}

ucs_status_t Receiver::discard_claimed(uint64_t msg) {
    uint32_t idx;
    if (unexpected_.claimed(msg, &idx) == nullptr) {
        return UCS_ERR_INVALID_PARAM;
    }
    drop_unexpected(idx);
    return UCS_OK;
}

}  // namespace proto
}  // namespace uct_tm
