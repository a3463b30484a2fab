/*
 * The data path shared by fi_tagged and fi_msg: checks, the layer's send
 * and receive (vectored or not), FI_PEEK / FI_CLAIM / FI_DISCARD through
 * the layer's probe, and completions into the bound CQs.
 */
#include "endpoint.h"
#include "iov.h"

#include <ucs/debug/log_def.h>

#include <algorithm>
#include <cstring>
#include <new>

namespace uct_tm {
namespace fabric {

ssize_t Endpoint::send_any(const Xfer &x) noexcept {
    return guarded([&] { return send(x); });
}

/* An inject with a counter bound: no entry, but an op the counter counts. */
ssize_t Endpoint::send_counted(uct_tm_proto_ep_h ep, const void *buf, size_t len, uint64_t tag,
                               uct_tm_proto_op_params_t *params, uint64_t flags) {
    return send_op(ep, buf, len, tag, params, nullptr, flags, false);
}

ssize_t Endpoint::recv_any(const Xfer &x) noexcept {
    return guarded([&] { return recv(x); });
}

ssize_t Endpoint::check_send(const Xfer &x, uct_tm_proto_ep_h *ep) const {
    if (!enabled_) {
        return -FI_EOPBADSTATE;
    }
    if ((x.flags & ~kTxOpFlags) != 0) {
        return -FI_EBADFLAGS;
    }
    if ((caps_ & x.kind()) == 0) {
        return -FI_EOPNOTSUPP;
    }
    *ep = peer(x.addr);
    return (*ep == nullptr) ? no_peer(x.addr) : 0;
}

ssize_t Endpoint::send(const Xfer &x) {
    Vector            v;
    uct_tm_proto_ep_h ep  = nullptr;
    const ssize_t     ret = check_send(x, &ep);
    if (ret != 0) {
        return ret;
    }
    const ssize_t vret = v.assign(x.iov, x.count);
    if (vret != 0) {
        return vret;
    }
    if ((v.total > kMaxMsgSize) || ((x.flags & FI_INJECT) && (v.total > kInjectSize))) {
        return -FI_EMSGSIZE;
    }
    const bool               report = !x.quiet && (!tx_selective_ || (x.flags & FI_COMPLETION));
    Op                      &op     = new_op(x, FI_SEND | x.kind(), v.total, report);
    uct_tm_proto_op_params_t params{};
    params.flags = send_flags(x.flags, x.tagged);
    params.data  = x.data;
    params.cb    = on_complete;
    params.arg   = &op;
    if (x.desc != nullptr) {
        use_desc(x, v, &params);
    }
    uct_tm_proto_request_t req    = 0;
    const ucs_status_t     status = (v.count == 1)
                                        ? uct_tm_proto_send(ep, v.iov[0].buffer, v.iov[0].length, x.tag,
                                                            &params, &req)
                                        : uct_tm_proto_sendv(ep, v.iov.data(), v.count, x.tag, &params,
                                                             &req);
    return started(op, status, req);
}

ssize_t Endpoint::check_recv(const Xfer &x, uct_tm_proto_ep_h *source) const {
    /* the common post (no multi-receive, probe or discard) skips to the peer */
    if (!enabled_ || ((x.flags & ~FI_COMPLETION) != 0) || ((caps_ & x.kind()) == 0)) {
        const ssize_t ret = check_recv_flags(x);
        if (ret != 0) {
            return ret;
        }
    }
    *source = nullptr;
    if ((caps_ & FI_DIRECTED_RECV) && (x.addr != FI_ADDR_UNSPEC)) {
        *source = peer(x.addr);
        if (*source == nullptr) {
            return no_peer(x.addr);
        }
    }
    return 0;
}

ssize_t Endpoint::check_recv_flags(const Xfer &x) const {
    if (!enabled_) {
        return -FI_EOPBADSTATE;
    }
    const uint64_t allowed = x.tagged ? ((kRxOpFlags & ~FI_MULTI_RECV) | kProbeFlags) : kRxOpFlags;
    if ((x.flags & ~allowed) != 0) {
        return -FI_EBADFLAGS;
    }
    if ((x.flags & FI_MULTI_RECV) && (!(caps_ & FI_MULTI_RECV) || (x.count != 1) ||
                                      (x.iov == nullptr) || (x.iov[0].iov_len == 0))) {
        return (caps_ & FI_MULTI_RECV) ? -FI_EINVAL : -FI_EOPNOTSUPP; /* one non-empty buffer */
    }
    if ((caps_ & x.kind()) == 0) {
        return -FI_EOPNOTSUPP;
    }
    if ((x.flags & FI_DISCARD) && !(x.flags & (FI_PEEK | FI_CLAIM))) {
        return -FI_EINVAL; /* discard what? */
    }
    return 0;
}

ssize_t Endpoint::recv(const Xfer &x) {
    uct_tm_proto_ep_h source = nullptr;
    const ssize_t     ret    = check_recv(x, &source);
    if (ret != 0) {
        return ret;
    }
    if (x.flags & FI_PEEK) {
        return peek(x, source);
    }
    if (x.flags & FI_CLAIM) {
        return claimed(x);
    }
    Vector        v;
    const ssize_t vret = v.assign(x.iov, x.count);
    if (vret != 0) {
        return vret;
    }
    const bool report = !rx_selective_ || (x.flags & FI_COMPLETION);
    Op        &op     = new_op(x, FI_RECV | x.kind(), v.total, report);
    op.buf            = (v.count > 0) ? v.iov[0].buffer : nullptr;
    op.multi          = (x.flags & FI_MULTI_RECV) != 0;
    uct_tm_proto_op_params_t params{};
    params.flags = bit(!x.tagged, UCT_TM_PROTO_OP_UNTAGGED) |
                   bit(op.multi, UCT_TM_PROTO_RECV_MULTI);
    params.cb    = on_complete;
    params.arg   = &op;
    if (x.desc != nullptr) {
        use_desc(x, v, &params);
    }
    uct_tm_proto_request_t req    = 0;
    const ucs_status_t     status = (v.count == 1)
                                        ? uct_tm_proto_recv(worker_, op.buf, v.total, x.tag, ~x.ignore,
                                                            source, &params, &req)
                                        : uct_tm_proto_recvv(worker_, v.iov.data(), v.count, x.tag,
                                                             ~x.ignore, source, &params, &req);
    return started(op, status, req);
}

/* fi_tagged(3) FI_PEEK: a completion describing the earliest matching
 * unexpected message (its data copied into the first buffer when all of
 * what fits is here: buf then points at it), or an FI_ENOMSG error. */
ssize_t Endpoint::peek(const Xfer &x, uct_tm_proto_ep_h source) {
    if ((x.flags & FI_CLAIM) && (x.context == nullptr)) {
        return -FI_EINVAL; /* the claim is kept in the caller's fi_context */
    }
    if ((x.count > 0) && (x.iov == nullptr)) {
        return -FI_EINVAL;
    }
    progress(); /* let what has arrived be seen */
    const bool discard = (x.flags & FI_DISCARD) != 0;
    void      *buf     = (!discard && (x.count > 0)) ? x.iov[0].iov_base : nullptr;
    size_t     len     = (buf != nullptr) ? x.iov[0].iov_len : 0;
    unsigned   flags   = UCT_TM_PROTO_PROBE_PEEK;
    flags |= bit(x.flags & FI_CLAIM, UCT_TM_PROTO_PROBE_CLAIM);
    flags |= bit(discard, UCT_TM_PROTO_PROBE_DISCARD);
    uct_tm_proto_info_t info{};
    uct_tm_proto_msg_t  msg    = 0;
    size_t              copied = 0;
    const ucs_status_t  status = uct_tm_proto_probe_copy(worker_, x.tag, ~x.ignore, source, flags,
                                                         buf, len, &copied, &info, &msg);
    Completion          c;
    c.entry.op_context = x.context;
    c.entry.flags      = FI_RECV | FI_TAGGED;
    c.entry.tag        = x.tag;
    if (status == UCS_ERR_NO_ELEM) {
        c.err        = FI_ENOMSG;
        c.prov_errno = status;
        rx_cq_->push(c);
        return 0;
    }
    if (status != UCS_OK) {
        return fi_error(status);
    }
    c.entry.tag = info.tag;
    c.entry.len = discard ? 0 : info.length;
    c.entry.buf = ((copied > 0) && (copied == std::min(len, info.length))) ? buf : nullptr;
    if (info.flags & UCT_TM_PROTO_INFO_REMOTE_DATA) {
        c.entry.flags |= FI_REMOTE_CQ_DATA;
        c.entry.data = info.data;
    }
    c.source = source_of(info.ep);
    if (x.flags & FI_CLAIM) {
        static_cast<fi_context *>(x.context)->internal[0] = reinterpret_cast<void *>(msg);
    }
    rx_cq_->push(c);
    return 0;
}

/* FI_CLAIM without FI_PEEK: receive (or, with FI_DISCARD, drop) the
 * message an earlier PEEK | CLAIM with this context took. */
ssize_t Endpoint::claimed(const Xfer &x) {
    auto *ctx = static_cast<fi_context *>(x.context);
    if ((ctx == nullptr) || (ctx->internal[0] == nullptr)) {
        return -FI_EINVAL;
    }
    const auto msg = reinterpret_cast<uct_tm_proto_msg_t>(ctx->internal[0]);
    if (x.flags & FI_DISCARD) {
        const ucs_status_t status = uct_tm_proto_discard_claimed(worker_, msg);
        if (status != UCS_OK) {
            return fi_error(status);
        }
        ctx->internal[0] = nullptr;
        Completion c;
        c.entry.op_context = x.context;
        c.entry.flags      = FI_RECV | FI_TAGGED;
        c.entry.tag        = x.tag;
        rx_cq_->push(c);
        return 0;
    }
    Vector        v;
    const ssize_t vret = v.assign(x.iov, x.count);
    if (vret != 0) {
        return vret;
    }
    Op &op = new_op(x, FI_RECV | FI_TAGGED, v.total, !rx_selective_ || (x.flags & FI_COMPLETION));
    op.buf = (v.count > 0) ? v.iov[0].buffer : nullptr;
    uct_tm_proto_op_params_t params{};
    params.cb  = on_complete;
    params.arg = &op;
    if (x.desc != nullptr) {
        use_desc(x, v, &params);
    }
    uct_tm_proto_request_t req    = 0;
    const ucs_status_t     status = (v.count == 1)
                                        ? uct_tm_proto_recv_claimed(worker_, msg, op.buf, v.total,
                                                                    &params, &req)
                                        : uct_tm_proto_recv_claimedv(worker_, msg, v.iov.data(),
                                                                     v.count, &params, &req);
    if ((status == UCS_OK) || (status == UCS_INPROGRESS)) {
        ctx->internal[0] = nullptr;
    }
    return started(op, status, req);
}

/* A single buffer inside an MR goes with the region's mapping (mapped
 * into this worker on first use), so a rendezvous need not register it. */
void Endpoint::use_desc(const Xfer &x, const Vector &v, uct_tm_proto_op_params_t *params) {
    Mr                      *mr   = (v.count == 1) ? mr_of_desc(domain_, x.desc) : nullptr;
    const uct_tm_proto_mem_h memh = (mr != nullptr) ? mr->map_for(this, worker_, v.iov[0].buffer,
                                                                  v.iov[0].length)
                                                    : 0;
    if (memh != 0) {
        params->flags |= UCT_TM_PROTO_OP_MEMH;
        params->memh = memh;
    }
}

Op &Endpoint::new_op(const Xfer &x, uint64_t flags, size_t len, bool report) {
    Op *op = take_op(x.context, flags, nullptr, len, report);
    if (op == nullptr) {
        throw std::bad_alloc();
    }
    return *op;
}

/* The layer's answer to a post: in flight, done at once, or refused
 * (nothing happened: no completion). */
ssize_t Endpoint::started(Op &op, ucs_status_t status, uct_tm_proto_request_t req) {
    if (status == UCS_INPROGRESS) {
        op.req = req;
        return 0;
    }
    if (status == UCS_OK) {
        uct_tm_proto_info_t info{};
        info.status = UCS_OK;
        complete(op, 0, info);
        return 0;
    }
    cq_for(op.flags)->drop_room();
    ops_.release(op);
    return fi_error(status);
}

/* Every field a receive's entry takes from the message, each written once. */
inline void Endpoint::report_recv(Op &op, const uct_tm_proto_info_t &info, Completion *c) const {
    const bool data = (info.flags & UCT_TM_PROTO_INFO_REMOTE_DATA) != 0;
    c->entry.flags  = op.flags | (data ? FI_REMOTE_CQ_DATA : 0);
    c->entry.len    = std::min(info.length, op.len);
    c->entry.buf    = op.buf;
    c->entry.data   = data ? info.data : 0;
    c->entry.tag    = (op.flags & FI_TAGGED) ? info.tag : 0;
    c->source       = source_of(info.ep);
}

/* The status into the entry: truncation with the bytes that did not fit
 * in `room` in olen. */
void Endpoint::set_status(Completion *c, const uct_tm_proto_info_t &info, size_t room) {
    if (info.status == UCS_ERR_MESSAGE_TRUNCATED) {
        c->err  = FI_ETRUNC;
        c->olen = (info.length > room) ? (info.length - room) : 0;
    } else if (info.status != UCS_OK) {
        c->err = -fi_error(info.status);
    }
    c->prov_errno = info.status;
}

/* Successes go to the CQ if the op asked for a completion, errors always;
 * a bound counter counts both. */
void Endpoint::finish(Op &op, Completion &c, const uct_tm_proto_info_t &info, size_t room) {
    set_status(&c, info, room);
    Cq   *cq     = cq_for(op.flags);
    Cntr *cntr   = cntr_for(op.flags);
    if ((c.err != 0) || op.report) {
        cq->push(c);
    }
    if (cntr != nullptr) {
        cntr->completed(c.err != 0);
    }
}

/* One message of a multi-receive, placed at info.buffer, with the rest of
 * the buffer for room; the op stays until the release. */
void Endpoint::complete_part(Op &op, const uct_tm_proto_info_t &info) {
    const auto  *at   = static_cast<const uint8_t *>(info.buffer);
    const size_t room = op.len - static_cast<size_t>(at - static_cast<const uint8_t *>(op.buf));
    Completion   c;
    c.entry.op_context = op.context;
    report_recv(op, info, &c);
    c.entry.buf = info.buffer;
    c.entry.len = std::min(info.length, room);
    finish(op, c, info, room);
}

/* A multi-receive's release: an entry of its own, FI_MULTI_RECV alone
 * (it reports no message), always written: the application waits for it
 * to reuse the buffer. */
void Endpoint::complete_multi(Op &op, const uct_tm_proto_info_t &info) {
    Completion c;
    c.entry.op_context = op.context;
    c.entry.flags      = FI_MULTI_RECV;
    c.entry.buf        = op.buf;
    if (info.status != UCS_OK) {
        c.err        = -fi_error(info.status);
        c.prov_errno = info.status;
    }
    rx_cq_->emplace_held() = c; /* the room its post held */
}

void Endpoint::complete(Op &op, uct_tm_proto_request_t req, const uct_tm_proto_info_t &info) {
    if (op.multi) {
        complete_any_multi(op, req, info);
        return;
    }
    const bool send  = (op.flags & FI_SEND) != 0;
    const bool error = info.status != UCS_OK;
    Cq        *cq    = send ? tx_cq_ : rx_cq_;
    Cntr      *cntr  = send ? tx_cntr_ : rx_cntr_;
    if (error || op.report) { /* written in the CQ's ring, every field once */
        Completion &c      = cq->emplace_held();
        c.entry.op_context = op.context;
        c.err              = 0; /* olen and prov_errno are read only with an error */
        if (send) {
            c.entry.flags = op.flags;
            c.entry.len   = 0;
            c.entry.buf   = nullptr;
            c.entry.data  = 0;
            c.entry.tag   = 0;
            c.source      = FI_ADDR_NOTAVAIL;
        } else {
            report_recv(op, info, &c);
        }
        if (error) {
            c.olen = 0;
            set_status(&c, info, op.len);
        }
    } else {
        cq->drop_room();
    }
    if (cntr != nullptr) {
        cntr->completed(error);
    }
    release(op, req);
}

/* A multi-receive's message (the op stays) or its release. */
void Endpoint::complete_any_multi(Op &op, uct_tm_proto_request_t req,
                                  const uct_tm_proto_info_t &info) {
    if (!(info.flags & UCT_TM_PROTO_INFO_MULTI_RECV)) {
        complete_part(op, info);
        return;
    }
    complete_multi(op, info);
    release(op, req);
}

void Endpoint::release(Op &op, uct_tm_proto_request_t req) {
    if (req != 0) {
        uct_tm_proto_request_release(worker_, req); /* the layer is done with it */
    }
    ops_.release(op);
}

/* A send without op (fi_inject, no counter) failed after its post: an
 * error entry without context, as it had none. */
void Endpoint::quiet_failed(uint64_t kind, const uct_tm_proto_info_t &info) {
    Completion c;
    c.entry.flags = FI_SEND | kind;
    set_status(&c, info, 0);
    try {
        tx_cq_->push(c);
    } catch (const std::bad_alloc &) {
        ucs_error("tm fabric: out of memory: an inject's error entry lost");
    }
}

/* Inside the layer's progress: nothing may unwind into it. A completion
 * without held room (a multi-receive's part, an inject's error) is lost
 * only if memory ran out, and said so. */
void Endpoint::on_complete(void *arg, uct_tm_proto_request_t req, const uct_tm_proto_info_t *info) {
    Op *op = static_cast<Op *>(arg);
    try {
        op->ep->complete(*op, req, *info);
    } catch (const std::bad_alloc &) {
        ucs_error("tm fabric: out of memory: a completion entry lost");
    }
}

}  // namespace fabric
}  // namespace uct_tm
