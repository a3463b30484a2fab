/*
 * Receives: posting (an earlier unexpected message first, else a queue),
 * arrival matching across the receive tiers, unexpected messages, probe,
 * truncation. The ordering rule and its proof are in docs/proto.md
 * "Ordering": tier 0 (the transport's tag list) holds receives older than
 * every tier-1 receive (the matcher), which are older than every tier-2
 * receive (source-filtered ones and those posted after them); a receive
 * joins tier k only while every tier above k is empty, so the first tier
 * with a match holds the earliest matching receive.
 */
#include "worker.h"

#include <ucs/debug/log_def.h>

#include <algorithm>
#include <cstring>
#include <new>
#include <stdexcept>

namespace uct_tm {
namespace proto {

namespace {

/* Copies a header out of (unaligned) AM data; false if the data is shorter. */
template <typename Header> bool read_header(const char *p, size_t length, Header *h) {
    if (length < sizeof(Header)) {
        return false;
    }
    memcpy(h, p, sizeof(Header));
    return true;
}

}  // namespace

template <typename Header>
bool Worker::dispatch(const char *p, size_t length,
                      void (Worker::*handler)(const Header &, const char *, size_t)) {
    Header h;
    if (!read_header(p, length, &h)) {
        return false;
    }
    (this->*handler)(h, p + sizeof(h), length - sizeof(h));
    return true;
}

ucs_status_t Worker::handle_am(const void *data, size_t length, const Iface *iface) {
    if (length < kSourceOffset + sizeof(uint32_t)) {
        TM_PROTO_DROPPED("dropped a %zu-byte message", length);
        return UCS_OK;
    }
    const char *p = static_cast<const char *>(data);
    Kind        kind;
    memcpy(&kind, p, 1);
    /* a message's source is checked with the rest of it (handle_message) */
    if ((kind != Kind::kEager) && (kind != Kind::kFirst) && (kind != Kind::kRts) &&
        !bound_source(p, iface)) {
        return UCS_OK;
    }
    switch (kind) {
    case Kind::kEager:
    case Kind::kFirst:
    case Kind::kRts: {
        MsgHeader h;
        if (!read_header(p, length, &h)) {
            break;
        }
        const size_t len = length - sizeof(h);
        /* an eager message never exceeds the credit we give a peer */
        if (((kind != Kind::kRts) && (h.length > window_)) ||
            ((kind == Kind::kEager) && (len != h.length)) ||
            ((kind == Kind::kFirst) && (len >= h.length)) || ((kind == Kind::kRts) && (len != 0) && !(h.flags & kFlagGet))) {
            break;
        }
        handle_message(h, p + sizeof(h), len, iface);
        return UCS_OK;
    }
    case Kind::kMiddle:
        if (!dispatch(p, length, &Worker::handle_fragment)) {
            break;
        }
        return UCS_OK;
    case Kind::kData:
        if (!dispatch(p, length, &Worker::handle_data)) {
            break;
        }
        return UCS_OK;
    case Kind::kPutReq: {
        PutHeader ph;
        if (!read_header(p, length, &ph)) {
            break;
        }
        handle_put_request(ph, p + sizeof(ph), length - sizeof(ph));
        return UCS_OK;
    }
    case Kind::kCts:
    case Kind::kPutDone:
    case Kind::kAck:
    case Kind::kCancel:
    case Kind::kCancelAck:
    case Kind::kCredit: {
        CtrlHeader c;
        if ((length != sizeof(c)) || !read_header(p, length, &c)) {
            break;
        }
        handle_ctrl(c);
        return UCS_OK;
    }
    default:
        break;
    }
    TM_PROTO_DROPPED("dropped a malformed message (kind %u, %zu bytes)",
                     static_cast<unsigned>(static_cast<uint8_t>(kind)), length);
    return UCS_OK;
}

/* A small eager message: the AM header (the tag), ShortHeader, the payload. */
ucs_status_t Worker::handle_am_short(const void *data, size_t length, const Iface *iface) {
    const char *p = static_cast<const char *>(data);
    uint64_t    tag;
    ShortHeader sh;
    if (length < sizeof(tag) + sizeof(sh)) {
        TM_PROTO_DROPPED("dropped a %zu-byte short message", length);
        return UCS_OK;
    }
    memcpy(&tag, p, sizeof(tag));
    memcpy(&sh, p + sizeof(tag), sizeof(sh));
    MsgHeader h = {};
    h.kind   = Kind::kEager;
    h.source = sh.source;
    h.imm    = sh.imm;
    h.tag    = tag;
    h.length = length - sizeof(tag) - sizeof(sh);
    handle_message(h, p + sizeof(tag) + sizeof(sh), h.length, iface);
    return UCS_OK;
}

bool Worker::bound_source(const char *header, const Iface *iface) {
    uint32_t source;
    memcpy(&source, header + kSourceOffset, sizeof(source));
    Endpoint *ep;
    if (!bound(source, iface, &ep)) {
        refuse(source, "arrived over another transport than our endpoint to it");
        return false;
    }
    return true;
}

/* The earliest posted receive that matches, removed from its tier; or null. */
[[gnu::always_inline]] inline Request *Worker::match_arrival(uint64_t tag, uint32_t source) {
    if (matcher_.posted_count() != 0) {
        const match::ArriveResult ar = matcher_.match_posted(tag);
        if (ar.matched) {
            return static_cast<Request *>(ar.recv.ctx);
        }
    }
    return (tier2_live_ != 0) ? match_tier2(tag, source) : nullptr;
}

/* The earliest source-filtered (tier 2) receive that matches; or null. */
Request *Worker::match_tier2(uint64_t tag, uint32_t source) {
    for (auto it = tier2_.begin(); it != tier2_.end(); ++it) {
        Request *r = reqs_.lookup(*it);
        if ((r == nullptr) || r->done || (r->rstate != RecvState::kPosted)) {
            continue;
        }
        if (match::tag_matches(tag, r->tag, r->mask) &&
            (!r->has_source || (r->src_filter == source))) {
            tier2_.erase(it);
            --tier2_live_;
            if (tier2_live_ == 0) {
                tier2_.clear();
            }
            return r;
        }
    }
    return nullptr;
}





/* A sync sender learns its message matched or was discarded. */
void Worker::send_ack(uint32_t source, uint64_t sreq) {
    CtrlHeader h = {};
    h.kind = Kind::kAck;
    h.req  = sreq;
    send_ctrl_to(source, h);
}

/* A receive matched a rendezvous request: ask for what fits. */
void Worker::start_rndv_recv(Request &r, uint32_t source, uint64_t sreq, const char *get,
                             size_t get_len) {
    CtrlHeader h = {};
    h.req        = sreq;
    if (r.expect == 0) {
        h.kind = Kind::kAck; /* nothing to fetch: the sender is done */
        send_ctrl_to(source, h);
        finish_recv(r);
        return;
    }
    if ((get_len != 0) && start_get(r, source, sreq, get, get_len)) {
        return;
    }
    r.parts  = 1; /* kData up to r.limit */
    r.limit  = r.expect;
    r.offset = 0;
    h.kind   = Kind::kCts;
    h.value  = r.self;
    h.value2 = r.expect;
    send_ctrl_to(source, h);
}

void Worker::unexpected_bytes(int64_t delta) {
    stats_.unexpected_bytes += delta;
    stats_.unexpected_peak = std::max(stats_.unexpected_peak, stats_.unexpected_bytes);
}

/* A conforming sender never has more unexpected bytes here than the credit
 * we granted it (it spends credit on every eager byte and gets it back only
 * after they left the buffer), and together the senders' windows fit the
 * cap: neither check refuses one. */
bool Worker::fits(const Account &acct, uint64_t length, uint32_t source) {
    if ((acct.bytes > window_) || (length > window_ - acct.bytes)) {
        refuse(source, "eager bytes beyond the credit granted to it");
        return false;
    }
    /* senders with endpoints hold at most a window each, MAX_PEERS of them
     * (ep_create()), those without one window together */
    const uint64_t cap = config_.unexpected_cap + window_;
    if ((stats_.unexpected_bytes > cap) || (length > cap - stats_.unexpected_bytes)) {
        refuse(source, "the unexpected buffer is full");
        return false;
    }
    return true;
}

void Worker::release_charge(Unexpected &u) {
    unexpected_bytes(-static_cast<int64_t>(u.length));
    if (u.charged != nullptr) {
        u.charged->bytes -= std::min(u.charged->bytes, u.length);
        u.charged = nullptr;
    }
}

void Worker::erase_partial(uint32_t source, uint32_t msg_id) {
    if (Partial *part = partial_.find(source, msg_id)) {
        if (part->charged != nullptr) {
            part->charged->fragmented -= std::min<uint32_t>(part->charged->fragmented, 1);
        }
        partial_.erase(source, msg_id);
    }
}

/* A first fragment of `first_len` bytes arrived: the rest goes to receive
 * `req` or to unexpected slot `unex`. */
void Worker::track_fragments(const MsgHeader &h, size_t first_len, uint64_t req, uint32_t unex,
                             Account &acct) {
    Partial part;
    part.req     = req;
    part.unex    = unex;
    part.source  = h.source;
    part.length  = h.length;
    part.arrived = first_len;
    part.sreq    = h.sreq;
    part.sync    = (h.flags & kFlagSync) != 0;
    part.charged = &acct;
    /* a message id the sender used again (a new endpoint of its) replaces
     * the old message, which can no longer finish */
    const Partial *old      = partial_.find(h.source, h.msg_id);
    Account *const replaced = (old != nullptr) ? old->charged : nullptr;
    if (!partial_.set(h.source, h.msg_id, part)) {
        ucs_error("tm_proto: out of memory tracking a message from worker %u", h.source);
        return;
    }
    if (replaced != nullptr) {
        replaced->fragmented -= std::min<uint32_t>(replaced->fragmented, 1);
    }
    ++acct.fragmented;
}

void Worker::handle_message(const MsgHeader &h, const char *payload, size_t len,
                            const Iface *iface) {
    Endpoint *ep;
    if (ucs_unlikely(!bound(h.source, iface, &ep))) {
        refuse(h.source, "arrived over another transport than our endpoint to it");
        return;
    }
    const bool sync = (h.flags & kFlagSync) != 0;
    Account   &acct = account_of(ep);
    if (ucs_unlikely(h.kind == Kind::kFirst) && (acct.fragmented >= kMaxOpenFragmented)) {
        refuse(h.source, "too many fragmented messages begun and not finished");
        return;
    }
    Request *r = match_arrival(h.tag, h.source);
    if (r != nullptr) {
        ++stats_.expected;
        accept_message(*r, h);
        if (h.kind == Kind::kRts) {
            start_rndv_recv(*r, h.source, h.sreq, payload, len);
            return;
        }
        place(*r, 0, payload, len);
        r->offset = len;
        if (h.kind == Kind::kEager) {
            finish_recv(*r);
            if (sync) {
                send_ack(h.source, h.sreq);
            }
            return_credit(ep, h.length); /* message_consumed(), the endpoint known */
            publish_now(*r);
            return;
        }
        track_fragments(h, len, r->self, UINT32_MAX, acct);
        return;
    }

    if ((h.kind != Kind::kRts) && !fits(acct, h.length, h.source)) {
        return;
    }
    ++stats_.unexpected;
    uint32_t idx;
    try {
        idx = unex_.allocate();
    } catch (const std::bad_alloc &) {
        ucs_error("tm_proto: out of memory for an unexpected message from worker %u", h.source);
        return;
    }
    Unexpected &u = unex_[idx];
    u.rndv   = (h.kind == Kind::kRts);
    u.sync   = sync;
    u.source = h.source;
    u.imm    = h.imm;
    u.tag    = h.tag;
    u.length = h.length;
    u.sreq   = h.sreq;
    u.msg_id = h.msg_id;
    if (u.rndv) {
        u.data.assign(payload, payload + len); /* the RndvGet and rkey, if any */
    } else {
        try {
            u.data.resize(h.length);
        } catch (const std::exception &) {
            ucs_error("tm_proto: out of memory buffering %zu bytes from worker %u",
                      static_cast<size_t>(h.length), h.source);
            unex_.release(idx);
            return;
        }
        if (len != 0) {
            memcpy(u.data.data(), payload, len);
        }
        u.arrived = len;
        unexpected_bytes(static_cast<int64_t>(h.length));
        acct.bytes += h.length;
        u.charged   = &acct;
    }
    const match::ArriveResult ar = matcher_.arrive(h.tag, idx);
    if (ar.status != UCS_OK) {
        ucs_error("tm_proto: unexpected queue refused a message: %s", ucs_status_string(ar.status));
        if (!u.rndv) {
            release_charge(u);
        }
        unex_.release(idx);
        return;
    }
    u.mh = ar.handle;
    arrival_.push_back(unex_.handle(idx));
    if (h.kind == Kind::kFirst) {
        track_fragments(h, len, 0, idx, acct);
    }
}

void Worker::handle_fragment(const FragHeader &f, const char *payload, size_t len) {
    Partial *found = partial_.find(f.source, f.msg_id);
    if ((found == nullptr) || (f.offset != found->arrived) || (len > found->length - found->arrived) ||
        (len == 0)) {
        TM_PROTO_DROPPED("dropped a fragment from worker %u (message %u, offset %llu)",
                         f.source, f.msg_id, static_cast<unsigned long long>(f.offset));
        return;
    }
    Partial &part = *found;
    part.arrived += len;
    const bool last = part.arrived == part.length;
    if (part.req != 0) {
        Request *r = reqs_.lookup(part.req);
        if (r != nullptr) {
            place(*r, f.offset, payload, len);
            r->offset = part.arrived;
            if (last) {
                finish_recv(*r);
            }
        }
    } else if (part.unex != UINT32_MAX) {
        Unexpected &u = unex_[part.unex];
        memcpy(u.data.data() + f.offset, payload, len);
        u.arrived = part.arrived;
    }
    if (last) {
        const Partial done = part;
        erase_partial(f.source, f.msg_id);
        if (done.unex == UINT32_MAX) {
            message_consumed(done.source, done.length, done.sync, done.sreq);
        }
        /* still unexpected: consumed when a receive or a discard takes it */
    }
}

void Worker::handle_data(const DataHeader &d, const char *payload, size_t len) {
    Request *r = reqs_.lookup(d.rreq);
    if ((r == nullptr) || (r->kind != ReqKind::kRecv) || r->done ||
        (r->rstate != RecvState::kArriving) || (r->parts == 0) || (d.offset != r->offset) ||
        (len > r->limit - r->offset) || (len == 0) || (d.source != r->info.source)) {
        TM_PROTO_DROPPED("dropped rendezvous data (offset %llu, %zu bytes)",
                         static_cast<unsigned long long>(d.offset), len);
        return;
    }
    place(*r, d.offset, payload, len);
    r->offset += len;
    if (r->offset == r->limit) {
        part_done(*r, UCS_OK);
    }
}

void Worker::trim_arrival() {
    uint32_t idx;
    while (!arrival_.empty() && (unex_.lookup(arrival_.front(), &idx) == nullptr)) {
        arrival_.pop_front();
    }
    if (arrival_.size() > 2 * unex_.live() + 64) {
        arrival_.erase(std::remove_if(arrival_.begin(), arrival_.end(),
                                      [this](uint64_t h) {
                                          uint32_t i;
                                          return unex_.lookup(h, &i) == nullptr;
                                      }),
                       arrival_.end());
    }
}

/* The earliest unexpected message matching (and from `source`), not
 * claimed; with `remove` it leaves the matcher. */
bool Worker::take_unexpected(uint64_t tag, uint64_t mask, bool has_source, uint32_t source,
                             uint32_t *idx, bool remove) {
    if (matcher_.unexpected_count() == 0) {
        return false;
    }
    if (!has_source) {
        match::Message m;
        const ucs_status_t status =
                remove ? matcher_.claim(tag, mask, &m) : matcher_.peek(tag, mask, &m);
        if (status != UCS_OK) {
            return false;
        }
        *idx = static_cast<uint32_t>(m.cookie);
        return true;
    }
    trim_arrival();
    for (uint64_t h : arrival_) {
        uint32_t    i;
        Unexpected *u = unex_.lookup(h, &i);
        if ((u == nullptr) || u->claimed || (u->source != source) ||
            !match::tag_matches(u->tag, tag, mask)) {
            continue;
        }
        if (remove && (matcher_.take(u->mh) != UCS_OK)) {
            return false;
        }
        *idx = i;
        return true;
    }
    return false;
}

/* A receive takes an unexpected message (already out of the matcher). */
void Worker::deliver_unexpected(Request &r, uint32_t idx) {
    Unexpected &u = unex_[idx];
    MsgHeader   h = {};
    h.tag    = u.tag;
    h.length = u.length;
    h.imm    = u.imm;
    h.source = u.source;
    accept_message(r, h);
    if (u.rndv) {
        const uint32_t          source = u.source;
        const uint64_t          sreq   = u.sreq;
        const std::vector<char> get    = u.data;
        unex_.release(idx);
        trim_arrival();
        start_rndv_recv(r, source, sreq, get.data(), get.size());
        return;
    }
    place(r, 0, u.data.data(), u.arrived);
    r.offset = u.arrived;
    release_charge(u);
    if (u.arrived == u.length) {
        finish_recv(r);
        message_consumed(u.source, u.length, u.sync, u.sreq);
    } else {
        if (Partial *part = partial_.find(u.source, u.msg_id)) {
            part->unex = UINT32_MAX;
            part->req  = r.self;
        }
    }
    unex_.release(idx);
    trim_arrival();
}

/* Drops an unexpected message (already out of the matcher): a rendezvous
 * sender is told it is done, an eager one gets its credit back. */
void Worker::drop_unexpected(uint32_t idx) {
    Unexpected &u = unex_[idx];
    if (u.rndv) {
        CtrlHeader h = {};
        h.kind = Kind::kAck;
        h.req  = u.sreq;
        send_ctrl_to(u.source, h);
    } else {
        release_charge(u);
        if (u.arrived == u.length) {
            message_consumed(u.source, u.length, u.sync, u.sreq);
        } else {
            if (Partial *part = partial_.find(u.source, u.msg_id)) {
                part->unex = UINT32_MAX; /* later fragments are dropped */
            }
        }
    }
    unex_.release(idx);
    trim_arrival();
}

void Worker::fill_info(uct_tm_proto_info_t *info, const Unexpected &u) const {
    info->status = UCS_OK;
    info->tag    = u.tag;
    info->length = u.length;
    info->imm    = u.imm;
    info->source = u.source;
    info->ep     = reinterpret_cast<uct_tm_proto_ep_h>(endpoint_of(u.source));
}

/* Inlined into recv_general(). */
[[gnu::always_inline]] inline ucs_status_t Worker::post_recv(Request &r) {
    r.seq = next_seq_++;
    if (r.has_source || (tier2_live_ != 0)) {
        tier2_.push_back(r.self);
        ++tier2_live_;
        r.tier = 2;
        ++stats_.software_recvs;
        return UCS_OK;
    }
    if ((offload_iface_ != nullptr) && (matcher_.posted_count() == 0) && (gathers_open_ == 0) &&
        try_offload(r)) {
        return UCS_OK;
    }
    const match::PostResult pr = matcher_.post_expected_only(r.tag, r.mask, &r);
    if (pr.status != UCS_OK) {
        return pr.status;
    }
    r.mh   = pr.handle;
    r.tier = 1;
    ++stats_.software_recvs;
    return UCS_OK;
}

/* recv() found nothing to match first and nothing held in software: the
 * receive goes to the transport's tag list, unless it refuses (a size the
 * list does not take goes to software before a request is made). */
ucs_status_t Worker::recv_offloaded(void *buffer, size_t length, uint64_t tag, uint64_t mask,
                                    const uct_tm_proto_op_params_t *params, uint64_t *req) {
    uint64_t handle;
    Request *r;
    if (((length - recv_min_) <= recv_span_) &&
        ((r = new_recv<true>(buffer, length, params, &handle)) != nullptr)) {
        r->tag  = tag;
        r->mask = mask;
        r->seq  = next_seq_++;
        if (try_offload(*r)) {
            *req = handed_out(*r);
            return UCS_INPROGRESS;
        }
        reqs_.release(handle); /* the tag list refused it: software holds it */
    }
    return recv_general(buffer, length, tag, mask, nullptr, params, req);
}

ucs_status_t Worker::recv_direct(void *buffer, size_t length, uint64_t tag, uint64_t mask,
                                 const uct_tm_proto_op_params_t *params, uint64_t *req) {
    if ((length - recv_min_) <= recv_span_) {
        DirectRecv *d  = direct_recv_in(params->request);
        d->uct.tag_consumed_cb = direct_ctx_.tag_consumed_cb;
        d->uct.completed_cb    = direct_ctx_.completed_cb;
        d->uct.rndv_cb         = direct_ctx_.rndv_cb;
        d->worker   = this;
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
        direct_.push(d);
        ++stats_.offloaded_recvs;
        if (req != nullptr) {
            *req = 0;
        }
        recv_iov_.buffer = buffer; /* the transport reads it during the call only */
        recv_iov_.length = length;
        direct_post_     = {params, req};
        const ucs_status_t status = uct_iface_tag_recv_zcopy(offload_iface_->iface, tag, mask,
                                                             &recv_iov_,
                                                             (length != 0) ? 1 : 0, &d->uct);
        if (ucs_likely(status == UCS_OK)) {
            return UCS_INPROGRESS;
        }
        return direct_refused();
    }
    return recv_general(buffer, length, tag, mask, nullptr, params, req);
}

ucs_status_t Worker::direct_refused() {
    const DirectPost a = direct_post_;
    DirectRecv      *d = direct_recv_in(a.params->request);
    direct_.erase(d);
    --stats_.offloaded_recvs;
    return recv_general(recv_iov_.buffer, recv_iov_.length, d->tag, d->mask, nullptr, a.params,
                        a.req);
}

ucs_status_t Worker::recv_general(void *buffer, size_t length, uint64_t tag, uint64_t mask,
                                  Endpoint *source, const uct_tm_proto_op_params_t *params,
                                  uint64_t *req) {
    if (((buffer == nullptr) && (length != 0)) || !op_params_valid(params, 0, req) ||
        ((source != nullptr) && ((source->magic != Endpoint::kMagic) || (source->worker != this)))) {
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
    r->tag        = tag;
    r->mask       = mask;
    r->has_source = source != nullptr;
    r->src_filter = (source != nullptr) ? source->peer_id : 0;
    uint32_t idx;
    if ((matcher_.unexpected_count() != 0) && /* inline: the common empty case */
        take_unexpected(tag, mask, r->has_source, r->src_filter, &idx, true)) {
        deliver_unexpected(*r, idx);
    } else {
        const ucs_status_t status = post_recv(*r);
        if (status != UCS_OK) {
            reqs_.release(handle);
            return status;
        }
    }
    *req = handed_out(*r);
    return UCS_INPROGRESS;
}

ucs_status_t Worker::probe(uint64_t tag, uint64_t mask, Endpoint *source, unsigned flags,
                           uct_tm_proto_info_t *info, uint64_t *msg) {
    const unsigned action = flags & (UCT_TM_PROTO_PROBE_CLAIM | UCT_TM_PROTO_PROBE_DISCARD);
    if (!(flags & UCT_TM_PROTO_PROBE_PEEK) ||
        (flags & ~unsigned(UCT_TM_PROTO_PROBE_PEEK | UCT_TM_PROTO_PROBE_CLAIM |
                           UCT_TM_PROTO_PROBE_DISCARD)) ||
        (action == (UCT_TM_PROTO_PROBE_CLAIM | UCT_TM_PROTO_PROBE_DISCARD)) ||
        ((action == UCT_TM_PROTO_PROBE_CLAIM) && (msg == nullptr)) ||
        ((source != nullptr) && ((source->magic != Endpoint::kMagic) || (source->worker != this)))) {
        return UCS_ERR_INVALID_PARAM;
    }
    uint32_t idx;
    if (!take_unexpected(tag, mask, source != nullptr, (source != nullptr) ? source->peer_id : 0,
                         &idx, action != 0)) {
        return UCS_ERR_NO_ELEM;
    }
    Unexpected &u = unex_[idx];
    if (info != nullptr) {
        fill_info(info, u);
    }
    if (action == UCT_TM_PROTO_PROBE_CLAIM) {
        u.claimed = true;
        *msg      = unex_.handle(idx);
    } else if (action == UCT_TM_PROTO_PROBE_DISCARD) {
        drop_unexpected(idx);
    }
    return UCS_OK;
}

ucs_status_t Worker::recv_claimed(uint64_t msg, void *buffer, size_t length,
                                  const uct_tm_proto_op_params_t *params, uint64_t *req) {
    uint32_t    idx;
    Unexpected *u = unex_.lookup(msg, &idx);
    if ((u == nullptr) || !u->claimed || ((buffer == nullptr) && (length != 0)) ||
        !op_params_valid(params, 0, req)) {
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

ucs_status_t Worker::discard_claimed(uint64_t msg) {
    uint32_t    idx;
    Unexpected *u = unex_.lookup(msg, &idx);
    if ((u == nullptr) || !u->claimed) {
        return UCS_ERR_INVALID_PARAM;
    }
    drop_unexpected(idx);
    return UCS_OK;
}

}  // namespace proto
}  // namespace uct_tm
