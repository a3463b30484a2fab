/*
 * Vectored sends and receives (docs/proto.md "Vectors"). A vector with at
 * most one nonempty element is the contiguous operation on that element
 * (offload and zero copy as usual). Longer ones: a send that goes as one
 * eager message at once is gathered by the transport (send_single_iov);
 * any other keeps its element list in its request and every message of it
 * gathers its bytes from the elements (Sender::am_send_part), unless a copy
 * is due anyway (INJECT, NO_COMPLETION, a tagged eager message no single
 * tag API call gathers): that one is gathered into the send side's staging
 * buffer (a request still using it takes it over). A rendezvous read in
 * place offers no get: it is pushed (kCts / kData). A receive
 * goes to the tag list as an iov list within the transport's max_iov
 * (post_recv, TagList::post_iov), else software holds it and every arrival
 * path scatters through place(); its rendezvous is pushed by the sender
 * (kCts / kData) rather than read into one registered buffer.
 */
#include "iov.h"
#include "worker.h"

#include <algorithm>
#include <cstring>

namespace uct_tm {
namespace proto {

bool iov_check(const uct_tm_proto_iov_t *iov, size_t iovcnt, IovShape *shape) {
    *shape = IovShape();
    if (((iov == nullptr) && (iovcnt != 0)) || (iovcnt > UCT_TM_PROTO_IOV_MAX)) {
        return false;
    }
    for (size_t i = 0; i < iovcnt; ++i) {
        const size_t len = iov[i].length;
        if (len == 0) {
            continue; /* its buffer may be anything, NULL included */
        }
        if ((iov[i].buffer == nullptr) || (len > SIZE_MAX - shape->total)) {
            return false;
        }
        shape->total += len;
        shape->single = iov[i].buffer;
        ++shape->nonempty;
    }
    if (shape->nonempty > 1) {
        shape->single = nullptr;
    }
    return true;
}

void iov_scatter(const std::vector<uct_tm_proto_iov_t> &iov, size_t offset, const char *data,
                 size_t len) {
    for_each_piece(iov, offset, len, [&data](char *element, size_t n) {
        memcpy(element, data, n);
        data += n;
    });
}

void iov_gather_range(const std::vector<uct_tm_proto_iov_t> &iov, size_t offset, char *dest,
                      size_t len) {
    for_each_piece(iov, offset, len, [&dest](const char *element, size_t n) {
        memcpy(dest, element, n);
        dest += n;
    });
}

void iov_gather(const uct_tm_proto_iov_t *iov, size_t iovcnt, char *dest) {
    for (size_t i = 0; i < iovcnt; ++i) {
        if (iov[i].length != 0) { /* its buffer may be NULL then */
            memcpy(dest, iov[i].buffer, iov[i].length);
            dest += iov[i].length;
        }
    }
}

ucs_status_t Sender::sendv(Endpoint *ep, const uct_tm_proto_iov_t *iov, size_t iovcnt, uint64_t tag,
                           const uct_tm_proto_op_params_t *params, uint64_t *req) {
    IovShape shape;
    if (!iov_check(iov, iovcnt, &shape)) {
        return UCS_ERR_INVALID_PARAM;
    }
    if (shape.nonempty <= 1) {
        return send(ep, shape.single, shape.total, tag, params, req);
    }
    /* one eager message, nothing queued before it (Sender::send's test): the
     * transport gathers; anything else, or a refusal, goes to sendv_general() */
    const unsigned flags    = (params != nullptr) ? params->flags : 0;
    const bool     has_data = (flags & UCT_TM_PROTO_SEND_REMOTE_DATA) != 0;
    const uint64_t rdata    = has_data ? params->data : 0;
    /* remote data wider than 32 bits over a tag list, any other flag than
     * these: send_general decides */
    if ((shape.total < ep->eager_now_limit) && (shape.total <= ep->credits) && ep->sends.empty() &&
        !(flags & UCT_TM_PROTO_SEND_SYNC) && !(ep->tag_path && !data_is_narrow(rdata)) &&
        op_params_valid(params,
                        UCT_TM_PROTO_SEND_INJECT | UCT_TM_PROTO_SEND_SYNC |
                            UCT_TM_PROTO_SEND_REMOTE_DATA,
                        req) &&
        (send_single_iov(ep, tag, has_data, rdata, iov, iovcnt, shape.nonempty, shape.total) >=
         0)) {
        ep->credits -= shape.total;
        ++w_.stats().eager_sends;
        if (req != nullptr) {
            *req = 0;
        }
        return UCS_OK;
    }
    return sendv_general(ep, iov, iovcnt, shape, tag, params, req);
}

/* Any vectored send but one eager message at once reads the elements where
 * they lie (fragments and pushed rendezvous data gathered by pack callbacks,
 * a queued tagged eager message by the tag API's own gather), except where a
 * copy is due anyway: INJECT (and NO_COMPLETION, which hands out no request
 * to say when the buffers are free again), or a tagged eager message no
 * single tag API call gathers (more elements than its zcopy takes, longer
 * than one bcopy descriptor). */
ucs_status_t Sender::sendv_general(Endpoint *ep, const uct_tm_proto_iov_t *iov, size_t iovcnt,
                                   const IovShape &shape, uint64_t tag,
                                   const uct_tm_proto_op_params_t *params, uint64_t *req) {
    uct_tm_proto_op_params_t staged = {};
    if (params != nullptr) {
        staged = *params;
        if (!(params->flags & UCT_TM_PROTO_OP_USER_REQUEST)) {
            staged.request = nullptr; /* callers without the flag need not set it */
        }
    }
    staged.flags &= ~unsigned(UCT_TM_PROTO_OP_MEMH); /* the region of which element? none used */
    const unsigned flags = (params != nullptr) ? params->flags : 0;
    const bool copy_due  = (flags & (UCT_TM_PROTO_SEND_INJECT | UCT_TM_PROTO_OP_NO_COMPLETION)) ||
                          (ep->tag_path && !(flags & UCT_TM_PROTO_OP_UNTAGGED) &&
                           (shape.total <= ep->iface->tag_eager_max) &&
                           !ep->iface->tag_eager_gathers(shape.total, shape.nonempty));
    if (!copy_due) {
        const SendVector vector = {iov, iovcnt};
        return send_general(ep, nullptr, shape.total, tag, &staged, req, &vector);
    }
    return send_staged(ep, iov, iovcnt, shape.total, tag, &staged, req);
}

/* Staged: the staging buffer is the data, and a send still using it when
 * send_general returns takes it over as its bounce buffer (a moved vector
 * keeps its memory, so the address a rendezvous request gave, or its
 * registration, stays valid): one copy, never INJECT's second. The flags
 * are checked there as for send. */
ucs_status_t Sender::send_staged(Endpoint *ep, const uct_tm_proto_iov_t *iov, size_t iovcnt,
                                 size_t total, uint64_t tag, uct_tm_proto_op_params_t *staged,
                                 uint64_t *req) {
    /* the staging is the copy; but a send without completion hands out no
     * request to take the staging over: it copies like INJECT instead */
    if (staged->flags & UCT_TM_PROTO_OP_NO_COMPLETION) {
        staged->flags |= UCT_TM_PROTO_SEND_INJECT;
    } else {
        staged->flags &= ~unsigned(UCT_TM_PROTO_SEND_INJECT);
    }
    if (alloc_status([&] { stage_.resize(total); }) != UCS_OK) {
        return UCS_ERR_NO_MEMORY;
    }
    iov_gather(iov, iovcnt, stage_.data());
    const ucs_status_t status = send_general(ep, stage_.data(), total, tag, staged, req);
    if (status == UCS_INPROGRESS) {
        Request *r = (staged->flags & UCT_TM_PROTO_OP_USER_REQUEST)
                         ? w_.reqs().lookup_user(staged->request)
                         : w_.reqs().lookup(*req);
        ucs_assertv((r != nullptr) && r->bounce.empty() && (r->sbuf == stage_.data()),
                    "vectored send %p: no staged request", static_cast<void *>(r));
        r->bounce = std::move(stage_);
        stage_    = std::vector<char>(); /* moved-from: empty, made valid explicitly */
    } else if (stage_.capacity() > kStageKeep) {
        std::vector<char>().swap(stage_); /* a rendezvous-sized message: not kept for good */
    }
    return status;
}

/* The vectored receives' common steps: a vector with at most one nonempty
 * element goes to `contiguous(buffer, length)`; else, once `valid()`, a
 * request for the elements goes to `take(request, handle, req)`. */
template <typename Contiguous, typename Valid, typename Take>
ucs_status_t Receiver::recv_vector(const uct_tm_proto_iov_t *iov, size_t iovcnt,
                                   const uct_tm_proto_op_params_t *params, uint64_t *req,
                                   Contiguous &&contiguous, Valid &&valid, Take &&take) {
    IovShape shape;
    if (!iov_check(iov, iovcnt, &shape)) {
        return UCS_ERR_INVALID_PARAM;
    }
    if (shape.nonempty <= 1) {
        return contiguous(shape.single, shape.total);
    }
    if (!valid()) {
        return UCS_ERR_INVALID_PARAM;
    }
    uint64_t unused;
    req  = (req != nullptr) ? req : &unused;
    *req = 0;
    uint64_t handle;
    Request *r = new_iov_recv(iov, iovcnt, shape.total, params, &handle);
    if (r == nullptr) {
        return UCS_ERR_NO_MEMORY;
    }
    return take(*r, handle, req);
}

ucs_status_t Receiver::recvv(const uct_tm_proto_iov_t *iov, size_t iovcnt, uint64_t tag,
                             uint64_t mask, Endpoint *source,
                             const uct_tm_proto_op_params_t *params, uint64_t *req) {
    if ((params != nullptr) && (params->flags & UCT_TM_PROTO_RECV_MULTI)) {
        return UCS_ERR_INVALID_PARAM; /* a multi-receive is one buffer */
    }
    return recv_vector(
        iov, iovcnt, params, req,
        [&](void *buffer, size_t length) {
            return recv(buffer, length, tag, mask, source, params, req);
        },
        [&] { return recv_args_valid(source, params, req); },
        [&](Request &r, uint64_t handle, uint64_t *out) {
            return match_or_post(r, handle, tag, mask, source, out);
        });
}

ucs_status_t Receiver::recv_claimedv(uint64_t msg, const uct_tm_proto_iov_t *iov, size_t iovcnt,
                                     const uct_tm_proto_op_params_t *params, uint64_t *req) {
    uint32_t idx = 0;
    return recv_vector(
        iov, iovcnt, params, req,
        [&](void *buffer, size_t length) { return recv_claimed(msg, buffer, length, params, req); },
        [&] {
            return (unexpected().claimed(msg, &idx) != nullptr) && op_params_valid(params, 0, req);
        },
        [&](Request &r, uint64_t, uint64_t *out) {
            deliver_unexpected(r, idx);
            *out = handed_out(r);
            return UCS_INPROGRESS;
        });
}

/* A receive request for the elements: no buffer (place() scatters when
 * rbuf is null), `total` bytes of capacity; null when out of memory. */
Request *Receiver::new_iov_recv(const uct_tm_proto_iov_t *iov, size_t iovcnt, size_t total,
                                const uct_tm_proto_op_params_t *params, uint64_t *handle) {
    Request *r = new_recv(nullptr, total, params, handle);
    if (r == nullptr) {
        return nullptr;
    }
    /* the slot's vector keeps its capacity: no allocation once warm */
    if (alloc_status([&] { r->elements.assign(iov, iov + iovcnt); }) != UCS_OK) {
        reqs_.release(*handle);
        return nullptr;
    }
    return r;
}

}  // namespace proto
}  // namespace uct_tm
