/*
 * Control messages between workers: CTS (rendezvous go-ahead), ACK (sync
 * send matched, or rendezvous finished without data), CANCEL / CANCEL_ACK
 * (rendezvous withdrawal) and CREDIT (eager buffer returned). Replies travel
 * over our endpoint to the peer; one refused with NO_RESOURCE waits in the
 * endpoint's control queue. A reply naming a request that is gone is dropped.
 */
#include "worker.h"

#include <ucs/debug/log_def.h>

#include <algorithm>

namespace uct_tm {
namespace proto {

void Worker::send_ctrl(Endpoint *ep, const CtrlHeader &hdr) {
    if (ep->failure != UCS_OK) {
        return; /* nobody to tell */
    }
    if (ep->ctrl.empty()) {
        const ssize_t n = am_send(ep, &hdr, sizeof(hdr), nullptr, 0);
        if (n >= 0) {
            return;
        }
        if (n != UCS_ERR_NO_RESOURCE) {
            ucs_error("tm_proto: control message to worker %u failed: %s", ep->peer_id,
                      ucs_status_string(static_cast<ucs_status_t>(n)));
            return;
        }
    }
    ep->ctrl.push_back(hdr);
    mark_busy(ep);
}

void Worker::send_ctrl_to(uint32_t source, const CtrlHeader &hdr) {
    Endpoint  *ep = peers_.of(source);
    CtrlHeader h  = hdr;
    h.source      = config_.id;
    if (ep != nullptr) {
        send_ctrl(ep, h);
        return;
    }
    if ((parked_.size() < kParkedMax) && (alloc_status([&] {
                                              parked_.push_back(Parked{source, h});
                                          }) == UCS_OK)) {
        return; /* until we create an endpoint to `source` */
    }
    TM_PROTO_DROPPED("no endpoint to worker %u for a reply: create one (docs/proto.md)", source);
}

void Worker::unpark_ctrl(Endpoint *ep) {
    auto mine = [ep](const Parked &p) { return p.peer == ep->peer_id; };
    for (const Parked &p : parked_) {
        if (mine(p)) {
            send_ctrl(ep, p.hdr);
        }
    }
    parked_.erase(std::remove_if(parked_.begin(), parked_.end(), mine), parked_.end());
}

/* Sends what return_credit() counted as owed. */
void Worker::flush_credit(Endpoint *ep) {
    if (ep->owed != 0) {
        CtrlHeader h = {};
        h.kind   = Kind::kCredit;
        h.source = config_.id;
        h.value  = ep->owed;
        ep->owed = 0;
        send_ctrl(ep, h);
    }
}

void Worker::handle_ctrl(const CtrlHeader &hdr) {
    if (hdr.kind == Kind::kCredit) {
        Endpoint *ep = peers_.of(hdr.source);
        if (ep != nullptr) {
            ep->credits = std::min<uint64_t>(ep->credits + hdr.value, ep->peer_window);
        }
        return;
    }
    if (hdr.kind == Kind::kCancel) {
        cancel_rts(hdr.source, hdr.req);
        return;
    }
    if (hdr.kind == Kind::kDeliverReq) {
        /* everything the sender sent before it was processed: delivered */
        send_ack(hdr.source, hdr.req);
        return;
    }
    if (hdr.kind == Kind::kPutDone) {
        Request *r = reqs_.lookup(hdr.req);
        if ((r == nullptr) || (r->kind != ReqKind::kRecv) || r->done || !r->peer_part ||
            (r->rmemh == nullptr) || (r->gctx.source != hdr.source)) {
            TM_PROTO_DROPPED("unexpected write completion from worker %u", hdr.source);
            return;
        }
        r->peer_part = false;
        part_done(*r, static_cast<ucs_status_t>(hdr.status));
        return;
    }
    Request *r = reqs_.lookup(hdr.req);
    if ((r == nullptr) || (r->kind != ReqKind::kSend) || r->done ||
        (r->ep->peer_id != hdr.source)) {
        return; /* the request completed otherwise (cancel, endpoint destroyed) */
    }
    switch (hdr.kind) {
    case Kind::kCts:
        if ((r->sstate != SendState::kRtsSent) || (hdr.value2 > r->length)) {
            TM_PROTO_DROPPED("unexpected CTS from worker %u", hdr.source);
            return;
        }
        r->rreq   = hdr.value;
        r->limit  = hdr.value2;
        r->offset = 0;
        r->set_state(SendState::kPushing);
        push_ahead(*r);
        return;
    case Kind::kAck:
        if ((r->sstate == SendState::kEagerSent) || (r->sstate == SendState::kRtsSent) ||
            (r->sstate == SendState::kPutting) || r->await_ack) {
            complete(*r, UCS_OK);
        }
        return;
    case Kind::kCancelAck:
        if ((r->sstate == SendState::kRtsSent) && (hdr.status == UCS_ERR_CANCELED)) {
            complete(*r, UCS_ERR_CANCELED);
        }
        return;
    default:
        return;
    }
}

}  // namespace proto
}  // namespace uct_tm
