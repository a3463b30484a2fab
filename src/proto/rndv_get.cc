/*
 * Rendezvous by reading and writing the peer's memory, where the iface can
 * (get_zcopy / put_zcopy; tm_sm: CMA) and its MD registers memory.
 *
 * The sender registers its buffer and sends address and packed rkey with the
 * RTS. Once a receive matched, the receiver reads min(message, buffer) bytes
 * straight into the receive buffer with get_zcopy. From kSplitMin bytes the
 * copy is split, so that both processes copy at once: the receiver registers
 * its buffer and asks the sender (kPutReq) to write the front half with
 * put_zcopy, then reads the back half while the sender writes; the sender reports kPutDone (or,
 * if it cannot write, pushes the front as kData). When every part is in, the
 * receiver answers kAck; the sender deregisters and completes on that kAck
 * (or on a CANCEL_ACK that won, when nobody ever read it). A read the
 * transport refuses falls back to CTS / DATA.
 *
 * Vectors (iov.cc): a vectored send offers no read but a write (kFlagPut),
 * and a receive with one buffer asks it (kPutReq) for everything, written a
 * piece per call (transfer()); a vectored receive is pushed.
 */
#include "worker.h"

#include <ucs/debug/log_def.h>

#include <cstring>

namespace uct_tm {
namespace proto {

namespace {

void transfer_done_cb(uct_completion_t *comp) {
    GetContext *g = reinterpret_cast<GetContext *>(comp);
    guarded(
        "a rendezvous transfer completion", [&]() __attribute__((always_inline)) {
            g->owner->rndv().transfer_done(g, comp->status);
        });
}

void init_context(GetContext &c, Owner *owner, uint64_t req, uint64_t sreq, uint32_t source,
                  uct_component_h component) {
    c             = GetContext();
    c.owner       = owner;
    c.req         = req;
    c.sreq        = sreq;
    c.source      = source;
    c.component   = component;
    c.comp.func   = transfer_done_cb;
    c.comp.count  = 1;
    c.comp.status = UCS_OK;
}

}  // namespace

/* Registers the send buffer and writes RndvGet + rkey; 0 if this send cannot
 * offer a get (the receiver then asks for the data with CTS). */
size_t Rendezvous::pack_rts(Request &r, char *out) {
    Iface *iface = r.ep->iface;
    if (!iface->rndv_get || (r.length == 0) || (r.length > iface->attr.cap.get.max_zcopy) ||
        r.vectored_send()) { /* the get reads one region: elements offer a write (send_rts) */
        return 0;
    }
    if ((r.memh == nullptr) && r.bounce.empty()) {
        r.memh = mapped_memh(r, iface); /* memh_md stays null: not ours to deregister */
    }
    if (r.memh == nullptr) {
        void *addr = const_cast<char *>(w_.tx().send_data(r));
        if ((iface->rcache != nullptr) &&
            ((r.cached = iface->rcache->get(addr, r.length, &r.memh)) != nullptr)) {
            /* the cache's: put back at completion */
        } else if (uct_md_mem_reg(iface->md, addr, r.length, UCT_MD_MEM_ACCESS_RMA, &r.memh) !=
                   UCS_OK) {
            r.memh = nullptr;
            return 0;
        } else {
            ++w_.stats().registrations;
            r.memh_md = iface->md;
        }
    }
    RndvGet g = {};
    g.address     = reinterpret_cast<uintptr_t>(w_.tx().send_data(r));
    g.rkey_length = static_cast<uint16_t>(iface->rkey_size);
    memcpy(out, &g, sizeof(g));
    if (uct_md_mkey_pack(iface->md, r.memh, out + sizeof(g)) != UCS_OK) {
        return 0;
    }
    return sizeof(g) + iface->rkey_size;
}

/* Reads (get) into receive `r`, or writes (put) from send `r`, message
 * bytes [offset, offset + length) at remote `address` + offset, over `ep`:
 * from its one buffer (`memh` its registration, or
 * null) or piece by piece from its elements (memh null: a transport that
 * needs one registers the piece for the call, as for an unregistered
 * buffer), each call at most max_zcopy bytes, all completing on c.comp.
 * UCS_OK: every call completed in w_.place; UCS_INPROGRESS: c.comp's callback
 * reports them all (with the first failure, if a call failed after others
 * started); else the failure, nothing in flight. */
ucs_status_t Rendezvous::transfer(Request &r, GetContext &c, Endpoint *ep, bool put, size_t offset,
                                  size_t length, uint64_t address, uct_mem_h memh) {
    const size_t       max = put ? ep->iface->attr.cap.put.max_zcopy
                                 : ep->iface->attr.cap.get.max_zcopy;
    ucs_status_t       failed = UCS_OK;
    address           += offset;
    c.comp.count       = 1; /* held until the last call is made */
    auto issue = [&](char *buffer, size_t n, uct_mem_h piece_memh) {
        for (size_t done = 0; (done < n) && (failed == UCS_OK);) {
            const size_t chunk = std::min(n - done, max);
            uct_iov_t    iov   = {buffer + done, chunk, piece_memh, 0, 1};
            ++c.comp.count;
            const ucs_status_t s =
                    put ? uct_ep_put_zcopy(ep->uct_ep, &iov, 1, address, c.rkey.rkey, &c.comp)
                        : uct_ep_get_zcopy(ep->uct_ep, &iov, 1, address, c.rkey.rkey, &c.comp);
            if (s != UCS_INPROGRESS) {
                --c.comp.count; /* done, or never started */
                failed = s;
            }
            address += chunk;
            done    += chunk;
        }
    };
    char *const base = put ? const_cast<char *>(w_.tx().send_data(r)) : r.rbuf;
    if (base != nullptr) {
        issue(base + offset, length, memh);
    } else {
        for_each_piece(r.elements, offset, length,
                       [&](char *piece, size_t n) { issue(piece, n, UCT_MEM_HANDLE_NULL); });
    }
    if (--c.comp.count == 0) {
        return failed; /* nothing in flight: UCS_OK, or why not */
    }
    if (put && (failed == UCS_ERR_NO_RESOURCE)) {
        c.refused = true; /* out of send resources midway: push it instead */
    } else if (failed != UCS_OK) { /* (a read is one call: pack_rts, start_get) */
        c.comp.status = failed;
    }
    return UCS_INPROGRESS;
}

uct_mem_h Rendezvous::mapped_memh(const Request &r, const Iface *iface) {
    /* unmapped since the operation started: it registers on its own */
    const uct_mem_h memh = w_.maps().mapped(r.region) ? w_.maps().memh(r.region, iface) : nullptr;
    if (memh != nullptr) {
        w_.maps().use(r.region);
    }
    return memh;
}

/* Asks the sender to write message bytes [0, front) into our buffer. */
bool Rendezvous::ask_put(Request &r, Endpoint *ep, size_t front) {
    Iface *iface = ep->iface;
    if (!(iface->attr.cap.flags & UCT_IFACE_FLAG_PUT_ZCOPY) || !ep->ctrl.empty()) {
        return false;
    }
    r.rmemh        = mapped_memh(r, iface);
    r.rmemh_mapped = r.rmemh != nullptr;
    if (!r.rmemh_mapped && ((iface->rcache == nullptr) ||
                            ((r.cached = iface->rcache->get(r.rbuf, front, &r.rmemh)) ==
                             nullptr))) {
        if (uct_md_mem_reg(iface->md, r.rbuf, front, UCT_MD_MEM_ACCESS_RMA, &r.rmemh) != UCS_OK) {
            r.rmemh = nullptr;
            return false;
        }
        ++w_.stats().registrations;
    }
    char      buf[sizeof(PutHeader) + kMaxRkey];
    PutHeader h = {};
    h.kind        = Kind::kPutReq;
    h.source      = w_.config().id;
    h.sreq        = r.gctx.sreq;
    h.rreq        = r.self;
    h.address     = reinterpret_cast<uintptr_t>(r.rbuf);
    h.length      = front;
    h.rkey_length = static_cast<uint16_t>(iface->rkey_size);
    memcpy(buf, &h, sizeof(h));
    if ((uct_md_mkey_pack(iface->md, r.rmemh, buf + sizeof(h)) != UCS_OK) ||
        (w_.tx().am_send(ep, buf, sizeof(h) + iface->rkey_size, nullptr, 0) < 0)) {
        drop_rmemh(r, iface);
        return false;
    }
    return true;
}

void Rendezvous::drop_rmemh(Request &r, const Iface *iface) {
    if (r.rmemh_mapped) {
        w_.maps().unuse(r.region);
    } else if (r.cached != nullptr) {
        RegistrationCache::put(r.cached);
        r.cached = nullptr;
    } else {
        uct_md_mem_dereg(iface->md, r.rmemh);
    }
    r.rmemh        = nullptr;
    r.rmemh_mapped = false;
}

/* Reads the matched message (with the sender's help from kSplitMin bytes);
 * false if the transport cannot read it (fall back to CTS). */
bool Rendezvous::start_get(Request &r, uint32_t source, uint64_t sreq, const char *get,
                           size_t get_len) {
    Endpoint *ep = w_.peers().of(source);
    RndvGet   g;
    if ((ep == nullptr) || !ep->iface->rndv_get || (get_len < sizeof(g)) ||
        (r.expect > ep->iface->attr.cap.get.max_zcopy)) {
        return false;
    }
    memcpy(&g, get, sizeof(g));
    if ((g.rkey_length != ep->iface->rkey_size) || (get_len != sizeof(g) + g.rkey_length)) {
        TM_PROTO_DROPPED_BY(w_, "malformed rendezvous rkey from worker %u", source);
        return false;
    }
    GetContext &c = r.gctx;
    init_context(c, &w_, r.self, sreq, source, ep->iface->component);
    if (uct_rkey_unpack(c.component, get + sizeof(g), &c.rkey) != UCS_OK) {
        return false;
    }
    c.rkey_unpacked = true;
    /* Ask for the front first: the sender writes it while we read the back
     * (a CMA read completes inside get_zcopy, so asking afterwards would
     * serialize the two copies). */
    const size_t front = (r.expect >= kSplitMin) ? r.expect / 2 : 0;
    const bool   put   = (front != 0) && ask_put(r, ep, front);
    r.parts            = put ? 2 : 1;
    r.peer_part        = put;
    r.ack_after        = true;
    if (put) {
        r.limit  = front; /* kData for the front, if the sender pushes it */
        r.offset = 0;
    }
    const size_t back_from = put ? front : 0;
    ucs_status_t status    = transfer(r, c, ep, false, back_from, r.expect - back_from,
                                      g.address, UCT_MEM_HANDLE_NULL);
    if ((status != UCS_OK) && (status != UCS_INPROGRESS)) {
        if (!put) {
            uct_rkey_release(c.component, &c.rkey);
            c.rkey_unpacked = false;
            r.parts     = 0;
            r.peer_part = false;
            r.ack_after = false;
            return false; /* nothing asked of the sender yet: CTS / DATA instead */
        }
        /* the sender is writing the front already: finish with the error once
         * its part is in (it completes on our kAck) */
        ++w_.stats().rndv_gets;
        part_done(r, status);
        return true;
    }
    ++w_.stats().rndv_gets;
    if (status == UCS_OK) {
        part_done(r, UCS_OK);
    }
    return true;
}

void Rendezvous::transfer_done(GetContext *g, ucs_status_t status) {
    Request *r = w_.reqs().lookup(g->req);
    if (r == nullptr) {
        ucs_error("tm_proto: rendezvous transfer completed for a request we do not hold");
        return;
    }
    if (g->refused && (status == UCS_OK)) {
        /* the calls made are done and the data they moved are in place: the
         * push protocol sends all of it again (the same bytes) */
        g->refused = false;
        uct_rkey_release(g->component, &g->rkey);
        g->rkey_unpacked = false;
        r->offset = 0; /* a send writing (only puts are refused midway); limit: what was asked */
        r->set_state(SendState::kPushing);
        w_.tx().push_ahead(*r);
        return;
    }
    if (r->kind == ReqKind::kSend) {
        put_done(*r, status);
    } else {
        part_done(*r, status);
    }
}

/* One rendezvous transfer into receive `r` ended. */
void Rendezvous::part_done(Request &r, ucs_status_t status) {
    if ((status != UCS_OK) && (r.xfer_status == UCS_OK)) {
        r.xfer_status = status;
    }
    if ((r.parts == 0) || (--r.parts != 0)) {
        return;
    }
    if (r.ack_after) {
        if (r.gctx.rkey_unpacked) { /* not after start_put(): nothing read */
            uct_rkey_release(r.gctx.component, &r.gctx.rkey);
        }
        CtrlHeader h = {};
        h.kind       = Kind::kAck;
        h.req        = r.gctx.sreq;
        w_.control().send_to(r.gctx.source, h);
    }
    if (r.rmemh != nullptr) {
        Endpoint *ep = w_.peers().of(r.gctx.source);
        drop_rmemh(r, (ep != nullptr) ? ep->iface : w_.ifaces().front().get());
    }
    if (r.xfer_status != UCS_OK) {
        w_.completions().complete(r, r.xfer_status);
        return;
    }
    r.received = r.expect;
    w_.completions().finish_recv(r);
}

/* Sender: the receiver asks us to write the front of message `sreq`. */
void Rendezvous::handle_put_request(const PutHeader &h, const char *rkey, size_t rkey_len) {
    Request *r = w_.reqs().lookup(h.sreq);
    if ((r == nullptr) || (r->kind != ReqKind::kSend) || r->done ||
        (r->sstate != SendState::kRtsSent) || (r->ep->peer_id != h.source) ||
        (h.length == 0) || (h.length > r->length) || (rkey_len != h.rkey_length) ||
        (rkey_len != r->ep->iface->rkey_size)) {
        TM_PROTO_DROPPED_BY(w_, "unexpected write request from worker %u", h.source);
        return;
    }
    r->await_ack    = true;
    r->rreq         = h.rreq;
    r->limit        = h.length;
    GetContext &c   = r->gctx;
    init_context(c, &w_, r->self, h.rreq, h.source, r->ep->iface->component);
    ucs_status_t status = uct_rkey_unpack(c.component, rkey, &c.rkey);
    if (status == UCS_OK) {
        c.rkey_unpacked = true;
        status = transfer(*r, c, r->ep, true, 0, h.length, h.address, r->memh);
        if ((status != UCS_OK) && (status != UCS_INPROGRESS)) {
            uct_rkey_release(c.component, &c.rkey);
            c.rkey_unpacked = false;
        }
    }
    if (status == UCS_INPROGRESS) {
        r->set_state(SendState::kPutting);
        return;
    }
    if (status == UCS_OK) {
        r->set_state(SendState::kPutting);
        put_done(*r, UCS_OK);
        return;
    }
    /* cannot write: push the front instead */
    r->offset = 0;
    r->set_state(SendState::kPushing);
    w_.tx().push_ahead(*r);
}

/* A receive with one buffer matched the RTS of a sender that offered to
 * write (kFlagPut: a vectored send): ask for all of it; false if we cannot
 * (then CTS). Done on kPutDone (or the pushed kData, if the sender could
 * not write after all), then kAck as after a read. */
bool Rendezvous::start_put(Request &r, uint32_t source, uint64_t sreq) {
    Endpoint *ep = w_.peers().of(source);
    if (ep == nullptr) {
        return false;
    }
    init_context(r.gctx, &w_, r.self, sreq, source, ep->iface->component);
    if (!ask_put(r, ep, r.expect)) {
        return false;
    }
    r.parts     = 1;
    r.peer_part = true;
    r.ack_after = true;
    r.limit     = r.expect; /* kData, if the sender pushes it */
    r.offset    = 0;
    ++w_.stats().rndv_puts;
    return true;
}

void Rendezvous::put_done(Request &r, ucs_status_t status) {
    uct_rkey_release(r.gctx.component, &r.gctx.rkey);
    r.gctx.rkey_unpacked = false;
    CtrlHeader h = {};
    h.kind       = Kind::kPutDone;
    h.source             = w_.config().id;
    h.status     = static_cast<int16_t>(status);
    h.req        = r.rreq;
    w_.control().send(r.ep, h);
    /* done on the receiver's kAck: it may still be reading our buffer */
}

/* A receive matched a rendezvous request: ask for what fits. */
void Rendezvous::start_rndv_recv(Request &r, uint32_t source, uint64_t sreq, const char *get,
                                 size_t get_len, bool put_offer) {
    CtrlHeader h = {};
    h.req        = sreq;
    if (r.expect == 0) {
        h.kind = Kind::kAck; /* nothing to fetch: the sender is done */
        w_.control().send_to(source, h);
        w_.completions().finish_recv(r);
        return;
    }
    if (const ucs_status_t failure = w_.peer_failure(source); failure != UCS_OK) {
        w_.completions().complete(r, failure); /* its data cannot come any more */
        return;
    }
    /* read it into the buffer, or have a sender that cannot be read write it
     * (into one buffer: one rkey), else have it pushed. A vectored receive is
     * pushed: reading it piece by piece measured slower over tm_sm
     * (docs/perf.md, "Protocol layer"). */
    if ((get_len != 0) && (r.rbuf != nullptr) && start_get(r, source, sreq, get, get_len)) {
        return;
    }
    if (put_offer && (r.rbuf != nullptr) && start_put(r, source, sreq)) {
        return;
    }
    r.parts     = 1; /* kData up to r.limit */
    r.peer_part = true;
    r.limit     = r.expect;
    r.offset    = 0;
    h.kind      = Kind::kCts;
    h.value     = r.self;
    h.value2    = r.expect;
    w_.control().send_to(source, h);
}

}  // namespace proto
}  // namespace uct_tm
