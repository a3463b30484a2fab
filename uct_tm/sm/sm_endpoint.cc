/*
 * tm_sm endpoints: creation against a peer's iface address, destruction,
 * pending requests, flush and check.
 */
#include "sm_iface.h"

#include "common/alloc_status.h"

#include <ucs/debug/log_def.h>

#include <algorithm>
#include <cstring>
#include <new>
#include <unistd.h>

namespace uct_tm {
namespace sm {

/* ---- lifetime ------------------------------------------------------------------- */

ucs_status_t SmIface::ep_create(const uct_ep_params_t *params, uct_ep_h *ep_p) {
    if ((params == nullptr) || (ep_p == nullptr) ||
        !(params->field_mask & UCT_EP_PARAM_FIELD_IFACE_ADDR) || (params->iface_addr == nullptr)) {
        ucs_error("tm_sm: ep_create needs the remote iface address (CONNECT_TO_IFACE)");
        return UCS_ERR_INVALID_PARAM;
    }
    if ((params->field_mask & UCT_EP_PARAM_FIELD_DEV_ADDR) && (params->dev_addr != nullptr) &&
        !is_reachable(params->dev_addr, nullptr)) {
        return UCS_ERR_UNREACHABLE;
    }
    if (segment_lost_) {
        return UCS_ERR_IO_ERROR; /* no peer could answer us */
    }
    IfaceAddress remote;
    memcpy(&remote, params->iface_addr, sizeof(remote));
    if ((remote.segment.pid <= 0) || (remote.segment.uid != getuid()) ||
        (remote.segment.size < sizeof(SegmentHeader)) || (remote.iface_serial == 0)) {
        ucs_error("tm_sm: ep_create: malformed iface address (pid %d uid %u size %lu)",
                  remote.segment.pid, remote.segment.uid,
                  static_cast<unsigned long>(remote.segment.size));
        return UCS_ERR_INVALID_PARAM;
    }
    SmEp *ep = new (std::nothrow) SmEp;
    if (ep == nullptr) {
        return UCS_ERR_NO_MEMORY;
    }
    RemotePeer  *peer;
    ucs_status_t status = find_or_attach(remote, &peer);
    if (status != UCS_OK) {
        delete ep;
        return status;
    }
    if (alloc_status([&] {
            peer->eps.push_back(ep);
        }) != UCS_OK) {
        put_peer(peer);
        delete ep;
        return UCS_ERR_NO_MEMORY;
    }
    ++num_eps_;
    ep->super.iface   = abi::to_uct(&base);
    ep->iface         = this;
    ep->peer          = peer;
    ep->inline_cap    = std::min(inline_cap_, peer->inline_capacity());
    ep->bcopy_bounce  = peer->geometry().seg_size < bcopy_max_; /* bounce_: from init */
    if ((ep->inline_cap < inline_cap_) || (peer->geometry().seg_size < geometry_.seg_size) ||
        (peer->max_fragments() < geometry_.fifo_elems / 2)) {
        ucs_diag("tm_sm: process %d receives with a smaller geometry than ours (FIFO element "
                 "%u B, SEG_SIZE %u, FIFO_SIZE %u; ours %u B, %u, %u): larger messages go "
                 "through its descriptors, in fragments, or are refused", peer->pid(),
                 peer->geometry().elem_size, peer->geometry().seg_size,
                 peer->geometry().fifo_elems, geometry_.elem_size, geometry_.seg_size,
                 geometry_.fifo_elems);
    }
    *ep_p = &ep->super;
    return UCS_OK;
}

void SmIface::ep_destroy(SmEp *ep) {
    const MayQueueWork mark{this};
    RemotePeer *peer = ep->peer;
    peer->eps.erase(std::remove(peer->eps.begin(), peer->eps.end(), ep), peer->eps.end());
    pending_eps_.remove(ep);
    drop_backlog(ep);
    rndv_.forget_ep(ep);
    staging_.forget_ep(ep);
    flush_waiters_.forget(ep);
    --num_eps_;
    delete ep;
    put_peer(peer);
}

/* ---- pending and flush ---------------------------------------------------------------- */

ucs_status_t SmIface::pending_add(SmEp *ep, uct_pending_req_t *req) {
    const MayQueueWork mark{this};
    if (req == nullptr) {
        return UCS_ERR_INVALID_PARAM;
    }
    if (ep->failed || ep->peer->dead() ||
        (ep->pending.empty() && !ep->backlog.active && ep->peer->fifo().has_room(1))) {
        return UCS_ERR_BUSY; /* resources are there (or never will be): retry the send */
    }
    return pending_eps_.add(ep, req);
}

void SmIface::pending_purge(SmEp *ep, uct_pending_purge_callback_t cb, void *arg) {
    ep->pending.purge(cb, arg);
}

unsigned SmIface::dispatch_pending() {
    return pending_eps_.dispatch(
        [](SmEp *ep) { return !ep->failed && ep->peer->fifo().has_room(1); }, dispatching_);
}

bool SmIface::flush_done(const SmEp *ep) const {
    if (ep != nullptr) {
        return (ep->rndv_outstanding == 0) && (ep->gets_outstanding == 0) &&
               ep->peer->outbox.empty() && !ep->backlog.active;
    }
    /* every endpoint's gets too: split ones and those reported later */
    return rndv_.sends_idle() && staging_.pulls_idle() && !rndv_.has_splits() &&
           !rndv_.has_deferred_gets() && !has_outbox_ && backlogged_.empty();
}

ucs_status_t SmIface::flush(unsigned flags, uct_completion_t *comp) {
    const MayQueueWork mark{this};
    if (flags & UCT_FLUSH_FLAG_CANCEL) {
        return UCS_ERR_UNSUPPORTED; /* UCT defines cancel for endpoints only */
    }
    if (flush_done(nullptr)) {
        return UCS_OK;
    }
    return flush_waiters_.wait(nullptr, comp);
}

ucs_status_t SmIface::ep_flush(SmEp *ep, unsigned flags, uct_completion_t *comp) {
    const MayQueueWork mark{this};
    if (flags & UCT_FLUSH_FLAG_CANCEL) {
        /* Best effort: withdraw our rendezvous sends, then the endpoint is
         * in error state and only good for destruction. */
        rndv_.cancel_ep(ep);
        staging_.cancel_gets(ep); /* pipelined gets complete as cancelled */
        drop_backlog(ep);
        ep->failed = true;
        return UCS_OK;
    }
    /* Requests queued behind a flush dispatched from the queue are later
     * operations: refusing for them would put the flush back in front of
     * them, forever. */
    if (!ep->pending.empty() && !dispatching_) {
        return UCS_ERR_NO_RESOURCE;
    }
    if (flush_done(ep)) {
        return UCS_OK;
    }
    return flush_waiters_.wait(ep, comp);
}

void SmIface::complete_flushes() {
    flush_waiters_.complete_done([this](const SmEp *ep) { return flush_done(ep); });
}

ucs_status_t SmIface::ep_check(SmEp *ep, unsigned, uct_completion_t *) {
    const MayQueueWork mark{this};
    /* Like a keepalive round: a dead peer is reported through the error
     * handler from the next progress call, not from inside this call. */
    if (!ep->peer->reported() && !ep->peer->check_alive()) {
        next_check_ = 0;
    }
    return UCS_OK;
}

}  // namespace sm
}  // namespace uct_tm
