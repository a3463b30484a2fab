/*
 * ControlChannel (control.h): CTS (rendezvous go-ahead), ACK (sync send
 * matched, or rendezvous finished without data), CANCEL / CANCEL_ACK
 * (rendezvous withdrawal), CREDIT (eager buffer returned), DELIVER_REQ and
 * PUT_DONE. A reply naming a request that is gone is dropped.
 */
#include "control.h"

#include "owner.h"

#include "common/alloc_status.h"

#include <ucs/debug/log_def.h>

#include <algorithm>

namespace uct_tm {
namespace proto {

void ControlChannel::send(Endpoint *ep, const CtrlHeader &hdr) {
    if (ep->failure != UCS_OK) {
        return; /* nobody to tell */
    }
    if (ep->ctrl.empty()) {
        const ssize_t n = w_.tx().am_send(ep, &hdr, sizeof(hdr), nullptr, 0);
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
    w_.mark_busy(ep);
}

void ControlChannel::send_to(uint32_t source, const CtrlHeader &hdr) {
    Endpoint  *ep = w_.peers().of(source);
    CtrlHeader h  = hdr;
    h.source      = w_.id();
    if (ep != nullptr) {
        send(ep, h);
        return;
    }
    if (!park(source, h)) {
        TM_PROTO_DROPPED_BY(w_, "no endpoint to worker %u for a reply: create one (docs/proto.md)",
                            source);
    }
}

bool ControlChannel::park(uint32_t source, const CtrlHeader &h) {
    /* until we create an endpoint to `source` (or its kHello has us create one) */
    return (parked_.size() < kParkedMax) && (alloc_status([&] {
                                                 parked_.push_back(Parked{source, h});
                                             }) == UCS_OK);
}

void ControlChannel::park_credit(uint32_t source, uint64_t bytes) {
    for (Parked &p : parked_) {
        if ((p.peer == source) && (p.hdr.kind == Kind::kCredit)) {
            p.hdr.value += bytes;
            return;
        }
    }
    CtrlHeader h = {};
    h.kind       = Kind::kCredit;
    h.source     = w_.id();
    h.value      = bytes;
    if (!park(source, h)) {
        TM_PROTO_DROPPED_BY(w_, "no endpoint to worker %u to return %llu bytes of credit to",
                            source, static_cast<unsigned long long>(bytes));
    }
}

void ControlChannel::unpark(Endpoint *ep) {
    auto mine = [ep](const Parked &p) { return p.peer == ep->peer_id; };
    for (const Parked &p : parked_) {
        if (mine(p)) {
            send(ep, p.hdr);
        }
    }
    parked_.erase(std::remove_if(parked_.begin(), parked_.end(), mine), parked_.end());
}

void ControlChannel::send_ack(uint32_t source, uint64_t sreq) {
    CtrlHeader h = {};
    h.kind       = Kind::kAck;
    h.req        = sreq;
    send_to(source, h);
}

/* Sends what return_credit() counted as owed. */
void ControlChannel::flush_credit(Endpoint *ep) {
    if (ep->owed != 0) {
        CtrlHeader h = {};
        h.kind   = Kind::kCredit;
        h.source     = w_.id();
        h.value  = ep->owed;
        ep->owed = 0;
        send(ep, h);
    }
}

void ControlChannel::withdraw_rts(uint32_t source, uint64_t sreq) {
    CtrlHeader h = {};
    h.kind       = Kind::kCancelAck;
    h.req        = sreq;
    /* lost if a receive has it already */
    h.status = w_.rx().unexpected().withdraw_rts(source, sreq) ? UCS_ERR_CANCELED : UCS_OK;
    send_to(source, h);
}

void ControlChannel::handle(const CtrlHeader &hdr) {
    if (hdr.kind == Kind::kCredit) {
        Endpoint *ep = w_.peers().of(hdr.source);
        if (ep != nullptr) {
            ep->credits = std::min<uint64_t>(ep->credits + hdr.value, ep->peer_window);
        }
        return;
    }
    if (hdr.kind == Kind::kCancel) {
        withdraw_rts(hdr.source, hdr.req);
        return;
    }
    if (hdr.kind == Kind::kDeliverReq) {
        /* everything the sender sent before it was processed: delivered */
        send_ack(hdr.source, hdr.req);
        return;
    }
    if (hdr.kind == Kind::kPutDone) {
        Request *r = w_.reqs().lookup(hdr.req);
        if ((r == nullptr) || (r->kind != ReqKind::kRecv) || r->done || !r->peer_part ||
            (r->rmemh == nullptr) || (r->gctx.source != hdr.source)) {
            TM_PROTO_DROPPED_BY(w_, "unexpected write completion from worker %u", hdr.source);
            return;
        }
        r->peer_part = false;
        w_.rndv().part_done(*r, static_cast<ucs_status_t>(hdr.status));
        return;
    }
    handle_reply(hdr);
}

void ControlChannel::handle_reply(const CtrlHeader &hdr) {
    Request *r = w_.reqs().lookup(hdr.req);
    if ((r == nullptr) || (r->kind != ReqKind::kSend) || r->done ||
        (r->ep->peer_id != hdr.source)) {
        return; /* the request completed otherwise (cancel, endpoint destroyed) */
    }
    switch (hdr.kind) {
    case Kind::kCts:
        if ((r->sstate != SendState::kRtsSent) || (hdr.value2 > r->length)) {
            TM_PROTO_DROPPED_BY(w_, "unexpected CTS from worker %u", hdr.source);
            return;
        }
        r->rreq   = hdr.value;
        r->limit  = hdr.value2;
        r->offset = 0;
        r->set_state(SendState::kPushing);
        w_.tx().push_ahead(*r);
        return;
    case Kind::kAck:
        if ((r->sstate == SendState::kEagerSent) || (r->sstate == SendState::kRtsSent) ||
            (r->sstate == SendState::kPutting) || r->await_ack) {
            w_.completions().complete(*r, UCS_OK);
        }
        return;
    case Kind::kCancelAck:
        if ((r->sstate == SendState::kRtsSent) && (hdr.status == UCS_ERR_CANCELED)) {
            w_.completions().complete(*r, UCS_ERR_CANCELED);
        }
        return;
    default:
        return;
    }
}

}  // namespace proto
}  // namespace uct_tm
