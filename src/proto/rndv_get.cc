/*
 * Rendezvous by get_zcopy, where the iface can read a peer's memory (tm_sm:
 * CMA) and its MD registers memory: the sender registers the buffer and sends
 * its address and packed rkey with the RTS; the receiver, once a receive
 * matched, reads min(message, buffer) bytes straight into the receive buffer
 * and answers kAck; the sender deregisters and completes on that kAck (or on
 * a CANCEL_ACK that won, when the receiver never started reading). A get the
 * transport refuses (NO_RESOURCE, size caps) falls back to CTS / DATA.
 */
#include "worker.h"

#include <ucs/debug/log_def.h>

#include <cstring>

namespace uct_tm {
namespace proto {

struct GetHandlers {
    static void done(uct_completion_t *comp) {
        GetContext *g = reinterpret_cast<GetContext *>(comp);
        Request    *r = g->worker->reqs_.lookup(g->req);
        if (r == nullptr) {
            ucs_error("tm_proto: rendezvous read completed for a receive we do not hold");
            return;
        }
        g->worker->get_done(*r, comp->status);
    }
};

/* Registers the send buffer and writes RndvGet + rkey; 0 if this send cannot
 * offer a get (the receiver then asks for the data with CTS). */
size_t Worker::pack_rts(Request &r, char *out) {
    Iface *iface = r.ep->iface;
    if (!iface->rndv_get || (r.length == 0) || (r.length > iface->attr.cap.get.max_zcopy)) {
        return 0;
    }
    if (r.memh == nullptr) {
        void *addr = const_cast<char *>(send_data(r));
        if (uct_md_mem_reg(iface->md, addr, r.length, UCT_MD_MEM_ACCESS_RMA, &r.memh) != UCS_OK) {
            r.memh = nullptr;
            return 0;
        }
        r.memh_md = iface->md;
    }
    RndvGet g = {};
    g.address     = reinterpret_cast<uintptr_t>(send_data(r));
    g.rkey_length = static_cast<uint16_t>(iface->rkey_size);
    memcpy(out, &g, sizeof(g));
    if (uct_md_mkey_pack(iface->md, r.memh, out + sizeof(g)) != UCS_OK) {
        return 0;
    }
    return sizeof(g) + iface->rkey_size;
}

/* Reads the matched message; false if the transport cannot (fall back to CTS). */
bool Worker::start_get(Request &r, uint32_t source, uint64_t sreq, const char *get,
                       size_t get_len) {
    Endpoint *ep = endpoint_of(source);
    RndvGet   g;
    if ((ep == nullptr) || !ep->iface->rndv_get || (get_len < sizeof(g)) ||
        (r.expect > ep->iface->attr.cap.get.max_zcopy)) {
        return false;
    }
    memcpy(&g, get, sizeof(g));
    if ((g.rkey_length > kMaxRkey) || (get_len != sizeof(g) + g.rkey_length)) {
        ucs_error("tm_proto: malformed rendezvous rkey from worker %u", source);
        return false;
    }
    GetContext &c = r.gctx;
    c           = GetContext();
    c.worker    = this;
    c.req       = r.self;
    c.sreq      = sreq;
    c.source    = source;
    c.component = ep->iface->component;
    if (uct_rkey_unpack(c.component, get + sizeof(g), &c.rkey) != UCS_OK) {
        return false;
    }
    c.comp.func   = GetHandlers::done;
    c.comp.count  = 1;
    c.comp.status = UCS_OK;
    uct_iov_t iov = {};
    iov.buffer    = r.rbuf;
    iov.length    = r.expect;
    iov.memh      = UCT_MEM_HANDLE_NULL;
    iov.count     = 1;
    const ucs_status_t status = uct_ep_get_zcopy(ep->uct_ep, &iov, 1, g.address, c.rkey.rkey,
                                                 &c.comp);
    ++stats_.rndv_gets;
    if (status == UCS_INPROGRESS) {
        return true;
    }
    if (status == UCS_OK) {
        get_done(r, UCS_OK);
        return true;
    }
    --stats_.rndv_gets;
    uct_rkey_release(c.component, &c.rkey);
    return false;
}

void Worker::get_done(Request &r, ucs_status_t status) {
    GetContext &c = r.gctx;
    uct_rkey_release(c.component, &c.rkey);
    CtrlHeader h = {};
    h.kind       = Kind::kAck;
    h.req        = c.sreq;
    send_ctrl_to(c.source, h);
    if (status != UCS_OK) {
        complete(r, status);
        return;
    }
    r.received = r.expect;
    finish_recv(r);
}

}  // namespace proto
}  // namespace uct_tm
