#include "tag_list.h"

#include <algorithm>

namespace uct_tm {
namespace proto {

void TagList::enable(Iface *iface, Worker *worker) {
    uct_iface_   = iface->iface;
    worker_      = worker;
    offload_ctx_ = offload_context();
    direct_ctx_  = direct_context();
    const auto &cap = iface->attr.cap.tag.recv;
    /* A transport with a minimum receive (a NIC's tag list, tm_rc's device
     * model) writes a matched rendezvous request into the receive's buffer;
     * one too short for our RTS truncates it to eager data and the sender
     * waits forever. Such receives stay in software, as UCP keeps receives
     * below UCX_TM_THRESH off the tag list. */
    const size_t min = (cap.min_recv > 0) ? std::max(cap.min_recv, iface->rts_max) : 0;
    recv_max_iov_ = std::max<size_t>(cap.max_iov, 1);
    if (cap.max_zcopy >= min) {
        recv_min_  = min;
        recv_span_ = cap.max_zcopy - min;
    }
}

ucs_status_t TagList::cancel(Request &r) {
    return uct_iface_tag_recv_cancel(uct_iface_, &r.octx.uct, 0);
}

void TagList::forget(Request &r) {
    if (r.rstate == RecvState::kOffloaded) {
        /* forced: the transport drops the context without calling back */
        uct_iface_tag_recv_cancel(uct_iface_, &r.octx.uct, 1);
        r.set_state(RecvState::kArriving);
    }
}

ucs_status_t TagList::cancel_direct(void *request) {
    DirectRecv *d = direct_recv_in(request);
    if (!direct_.contains(d)) {
        return UCS_ERR_INVALID_PARAM; /* not a receive of ours */
    }
    if (d->consumed) {
        return UCS_OK; /* matched: it completes normally */
    }
    return uct_iface_tag_recv_cancel(uct_iface_, &d->uct, 0);
}

void TagList::cancel_directs() {
    while (DirectRecv *d = direct_.front()) {
        direct_.erase(d);
        /* forced: the transport drops the context without calling back */
        uct_iface_tag_recv_cancel(uct_iface_, &d->uct, 1);
        publish_failure(status_of(d), UCS_ERR_CANCELED);
    }
}

}  // namespace proto
}  // namespace uct_tm
