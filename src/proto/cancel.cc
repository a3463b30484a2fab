/*
 * Cancellation. A receive not matched yet leaves its queue and completes
 * with UCS_ERR_CANCELED; one already matched completes normally. A
 * rendezvous send still queued completes with UCS_ERR_CANCELED at once; one
 * whose RTS went out asks the receiver, which withdraws the RTS only if no
 * receive took it: the sender completes with UCS_ERR_CANCELED on that
 * answer, or normally once the data went out. The receiver never reads the
 * sender's memory (the sender pushes the data itself), so a cancelled
 * buffer is never touched after completion.
 */
#include "worker.h"

#include <algorithm>

namespace uct_tm {
namespace proto {

ucs_status_t Worker::cancel(uint64_t req) {
    Request *r = reqs_.lookup(req);
    if (r == nullptr) {
        return UCS_ERR_INVALID_PARAM;
    }
    if (r->done) {
        return UCS_ERR_NO_ELEM;
    }
    return (r->kind == ReqKind::kSend) ? cancel_send(*r) : cancel_recv(*r);
}

ucs_status_t Worker::cancel_user(void *request) {
    if ((request == nullptr) ||
        ((reinterpret_cast<uintptr_t>(request) % UCT_TM_PROTO_REQUEST_ALIGN) != 0)) {
        return UCS_ERR_INVALID_PARAM;
    }
    if (static_cast<uct_tm_proto_request_status_t *>(request)->status != UCS_INPROGRESS) {
        return UCS_ERR_NO_ELEM; /* final: the memory holds no request any more */
    }
    if (*user_handle_in(request) == 0) {
        return rx_.tag_list().cancel_direct(request);
    }
    /* the memory is the caller's: its handle is believed only if it names
     * a live request tied to this very memory */
    const Request *r = reqs_.lookup_user(request);
    if (r == nullptr) {
        return UCS_ERR_INVALID_PARAM;
    }
    return cancel(r->self);
}

ucs_status_t Worker::cancel_recv(Request &r) {
    if (r.rstate == RecvState::kOffloaded) {
        return rx_.tag_list().cancel(r);
    }
    if (r.rstate == RecvState::kPosted) {
        withdraw_recv(r, UCS_ERR_CANCELED);
    }
    return UCS_OK; /* else matched: it completes normally */
}

void Worker::withdraw_recv(Request &r, ucs_status_t status) {
    if (!rx_.posted().withdraw(r)) {
        return;
    }
    if (r.multi) {
        /* released: it completes with `status` once the messages it took are reported */
        r.multi_status = status;
        r.set_state(RecvState::kArriving);
        rx_.multi_maybe_done(r);
        return;
    }
    completions_.complete(r, status);
}

ucs_status_t Worker::cancel_send(Request &r) {
    if ((r.sstate == SendState::kQueued) && !r.started) {
        auto &q = r.ep->sends;
        q.erase(std::remove(q.begin(), q.end(), r.self), q.end());
        if (!r.rndv) {
            r.ep->credits += r.length;
        }
        completions_.complete(r, UCS_ERR_CANCELED);
        return UCS_OK;
    }
    if (r.sstate == SendState::kRtsSent) {
        if (!r.cancel) {
            r.cancel     = true;
            CtrlHeader h = {};
            h.kind       = Kind::kCancel;
            h.source     = config_.id;
            h.req        = r.self;
            control_.send(r.ep, h);
        }
        return UCS_OK;
    }
    if ((r.sstate == SendState::kPushing) || (r.sstate == SendState::kPutting)) {
        return UCS_OK; /* the receiver asked for the data: it completes normally */
    }
    return UCS_ERR_BUSY; /* eager data is out */
}

}  // namespace proto
}  // namespace uct_tm
