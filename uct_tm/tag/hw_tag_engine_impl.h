/*
 * HwTagEngine's definitions. hw_tag_engine.cc instantiates them for the
 * device model and the verbs list; include this header only to instantiate
 * the driver over another list (benchmarks, fakes).
 */
#ifndef UCT_TM_TAG_HW_TAG_ENGINE_IMPL_H_
#define UCT_TM_TAG_HW_TAG_ENGINE_IMPL_H_

#include "hw_tag_engine.h"

#include "common/alloc_status.h"

#include <ucs/debug/log_def.h>

#include <algorithm>
#include <cstring>
#include <new>

namespace uct_tm {

namespace hw_tag_engine_detail {

inline constexpr uint64_t kSyncWrId = UINT64_MAX; /* the SYNC op's completion */

inline match::MatcherOptions shadow_options() {
    match::MatcherOptions options;
    options.max_unexpected = 0; /* the shadow only ever holds posted receives */
    return options;
}

}  // namespace hw_tag_engine_detail

template <typename List>
HwTagEngine<List>::HwTagEngine(List &list, const HwTagEngineConfig &config,
                               const HwTagTransport &transport)
    : list_(list), config_(config), transport_(transport), shadow_(hw_tag_engine_detail::shadow_options()) {
    const TmCaps &caps = list_.caps();
    /* Every receive may have one ADD and one DEL outstanding, plus one SYNC:
     * then a DEL that protects a claimed receive can always be posted. */
    const uint32_t by_ops = (caps.max_ops > 1) ? (caps.max_ops - 1) / 2 : 0;
    list_size_            = std::min({config_.list_size, caps.max_num_tags, by_ops});
    slots_.resize(list_size_);
    free_slots_.reserve(list_size_);
    for (uint32_t i = list_size_; i > 0; --i) {
        free_slots_.push_back(i - 1);
    }
    config_.poll_budget    = std::max<uint32_t>(config_.poll_budget, 1);
    config_.rx_buffer_size = std::max<uint32_t>(config_.rx_buffer_size, sizeof(TmHeader) + sizeof(RndvHeader));
    rx_stride_ = static_cast<size_t>(config_.rx_headroom) + config_.rx_buffer_size;
    rx_pool_.resize(static_cast<size_t>(config_.rx_buffers) * rx_stride_);
}

template <typename List> HwTagEngine<List>::~HwTagEngine() {
    if (posted_ > 0) {
        ucs_debug("tm hw list: closing with %zu receives posted", posted_);
    }
}

template <typename List> ucs_status_t HwTagEngine<List>::start(uint32_t rx_lkey) {
    rx_lkey_ = rx_lkey;
    for (uint32_t i = 0; i < config_.rx_buffers; ++i) {
        TmSge sge;
        sge.addr             = rx_buffer(i);
        sge.length           = config_.rx_buffer_size;
        sge.lkey             = rx_lkey_;
        const ucs_status_t s = list_.post_recv(i, sge);
        if (s != UCS_OK) {
            return s;
        }
    }
    return UCS_OK;
}

template <typename List> void HwTagEngine<List>::repost_rx(uint32_t index) {
    TmSge sge;
    sge.addr   = rx_buffer(index);
    sge.length = config_.rx_buffer_size;
    sge.lkey   = rx_lkey_;
    if (list_.post_recv(index, sge) != UCS_OK) {
        ucs_error("tm hw list: cannot repost untagged buffer %u", index);
    }
}

template <typename List> void HwTagEngine<List>::release_rx(void *data) {
    if (!owns_rx(data)) {
        ucs_error("tm hw list: release_rx(%p) is not an untagged buffer", data);
        return;
    }
    const uint8_t *p = static_cast<const uint8_t *>(data);
    repost_rx(static_cast<uint32_t>(static_cast<size_t>(p - rx_pool_.data()) / rx_stride_));
}

template <typename List>
typename HwTagEngine<List>::Slot *HwTagEngine<List>::slot_of(uint64_t id) {
    const uint32_t index = static_cast<uint32_t>(id);
    const uint32_t gen   = static_cast<uint32_t>(id >> 32);
    if ((index >= slots_.size()) || (slots_[index].gen != gen) || (slots_[index].state == kFree)) {
        ++counters_.anomalies;
        ucs_error("tm hw list: completion for unknown receive 0x%lx", static_cast<unsigned long>(id));
        return nullptr;
    }
    return &slots_[index];
}

template <typename List>
typename HwTagEngine<List>::Slot *HwTagEngine<List>::lookup(uct_tag_context_t *ctx) {
    Slot *s = ContextHandle::find(ctx, this, slots_.size(),
                                  [this](uint32_t i) -> Slot & { return slots_[i]; });
    if ((s == nullptr) || (s->state == kFree) || (s->state == kOrphan) || (s->state == kDone)) {
        return nullptr;
    }
    return s;
}

template <typename List>
ucs_status_t HwTagEngine<List>::reserve(uct_tag_context_t *ctx, uintptr_t key) {
    if (free_slots_.empty()) {
        ++counters_.refused;
        return UCS_ERR_EXCEEDS_LIMIT;
    }
    if (lookup(ctx) != nullptr) { /* a context is in one receive at a time */
        ++counters_.refused;
        return UCS_ERR_ALREADY_EXISTS;
    }
    bool inserted = true;
    if ((key > 1) && (alloc_status([&] { inserted = buffers_.insert(key); }) != UCS_OK)) {
        return UCS_ERR_NO_MEMORY;
    }
    if (!inserted) { /* the NIC could write two messages into it at once */
        ++counters_.refused;
        return UCS_ERR_ALREADY_EXISTS;
    }
    return UCS_OK;
}

template <typename List>
ucs_status_t HwTagEngine<List>::post(uct_tag_t tag, uct_tag_t mask, const uct_iov_t *iov,
                                     size_t iovcnt, uct_tag_context_t *ctx) {
    if (ctx == nullptr) {
        return UCS_ERR_INVALID_PARAM;
    }
    /* One buffer (one sge) of at most what an sge describes. */
    size_t             capacity;
    const ucs_status_t checked = check_iov(
        iov, iovcnt, IovLimits{1, std::min<size_t>(config_.max_length, UINT32_MAX)}, &capacity);
    if (checked != UCS_OK) {
        return checked;
    }
    void              *buffer   = (iovcnt == 1) ? iov[0].buffer : nullptr;
    const uintptr_t    key      = reinterpret_cast<uintptr_t>(buffer);
    const ucs_status_t reserved = reserve(ctx, key);
    if (reserved != UCS_OK) {
        return reserved;
    }
    const uint32_t index = free_slots_.back();
    Slot          &s     = slots_[index];

    TmOp op;
    op.opcode         = TmOpcode::kAdd;
    op.flags          = count_flags();
    op.wr_id          = slot_id(index, s.gen);
    op.recv_wr_id     = op.wr_id;
    op.unexpected_cnt = sw_count_;
    op.tag            = tag & mask;
    op.mask           = mask;
    op.has_sge        = (capacity > 0);
    op.sge.addr       = buffer;
    op.sge.length     = static_cast<uint32_t>(capacity);
    op.sge.lkey       = ((transport_.lkey != nullptr) && (iovcnt == 1))
                            ? transport_.lkey(transport_.arg, iov[0].memh, buffer)
                            : 0;

    const match::PostResult shadow = shadow_.post_expected_only(tag, mask, &s);
    ucs_status_t            status = shadow.status;
    if (status == UCS_OK) {
        status = list_.post_op(op);
        if (status != UCS_OK) {
            shadow_.cancel(shadow.handle);
        }
    }
    if (status != UCS_OK) {
        if (key > 1) {
            buffers_.erase(key);
        }
        ++counters_.refused;
        return status;
    }
    free_slots_.pop_back();
    reported_count_ = sw_count_;
    s.ctx           = ctx;
    s.tag           = tag;
    s.stag          = 0;
    s.buffer        = buffer;
    s.capacity      = capacity;
    s.handle        = op.handle;
    s.shadow        = shadow.handle;
    set_state(s, kPosted);
    s.pending       = 2; /* the ADD completion, and the consume or the DEL */
    s.holds_buffer  = (key > 1);
    s.sw_rndv       = false;
    ContextHandle::bind(ctx, this, index, s.gen);
    ++posted_;
    ++counters_.posts;
    return UCS_OK;
}

template <typename List> ucs_status_t HwTagEngine<List>::post_del(Slot &s) {
    TmOp op;
    op.opcode         = TmOpcode::kDel;
    op.flags          = count_flags();
    op.wr_id          = slot_id(static_cast<uint32_t>(&s - slots_.data()), s.gen);
    op.unexpected_cnt = sw_count_;
    op.handle         = s.handle;
    const ucs_status_t status = list_.post_op(op);
    if (status == UCS_OK) {
        reported_count_ = sw_count_;
        ++s.pending;
    } else {
        ++counters_.anomalies;
        ucs_error("tm hw list: DEL of tag handle %u failed: %s", s.handle,
                  ucs_status_string(status));
    }
    return status;
}

template <typename List> void HwTagEngine<List>::give_back_buffer(Slot &s) {
    if (s.holds_buffer) {
        buffers_.erase(reinterpret_cast<uintptr_t>(s.buffer));
        s.holds_buffer = false;
    }
}

template <typename List> void HwTagEngine<List>::maybe_free(Slot &s) {
    if ((s.pending > 0) || s.sw_rndv) {
        return;
    }
    give_back_buffer(s);
    set_state(s, kFree);
    s.ctx   = nullptr;
    ++s.gen;
    if (s.gen == 0) {
        s.gen = 1;
    }
    free_slots_.push_back(static_cast<uint32_t>(&s - slots_.data()));
}

template <typename List>
ucs_status_t HwTagEngine<List>::cancel(uct_tag_context_t *ctx, int force) {
    Slot *s = lookup(ctx);
    if (s == nullptr) {
        return UCS_ERR_NO_ELEM;
    }
    switch (s->state) {
    case kPosted: {
        const ucs_status_t status = post_del(*s);
        if (status != UCS_OK) {
            return status; /* still posted; cannot happen while ops are reserved per receive */
        }
        shadow_.cancel(s->shadow);
        --posted_;
        ++counters_.cancels;
        if (force) {
            set_state(*s, kOrphan);
            s->ctx   = nullptr;
            give_back_buffer(*s);
        } else {
            set_state(*s, kCancelling);
        }
        return UCS_OK;
    }
    case kConsumed:
    case kCancelling:
    case kClaimed:
        if (force) {
            /* The context and buffer are the user's again: a running software
             * rendezvous must stop writing; the hardware may still write (as
             * with rc_mlx5). */
            if (s->sw_rndv && (transport_.orphan != nullptr)) {
                transport_.orphan(transport_.arg,
                                  slot_id(static_cast<uint32_t>(s - slots_.data()), s->gen));
            }
            set_state(*s, kOrphan);
            s->ctx   = nullptr;
            give_back_buffer(*s);
        }
        return UCS_OK; /* not forced: completes normally (or CANCELED) */
    default:
        return UCS_ERR_NO_ELEM;
    }
}

template <typename List>
void HwTagEngine<List>::deliver(Slot &s, uint64_t stag, uint64_t imm, size_t length,
                                ucs_status_t status) {
    uct_tag_context_t *ctx    = s.ctx;
    const bool         notify = (s.state != kOrphan) && (ctx != nullptr);
    if ((status == UCS_OK) && (length > s.capacity)) {
        status = UCS_ERR_MESSAGE_TRUNCATED;
    }
    set_state(s, kDone);
    s.ctx   = nullptr;
    give_back_buffer(s); /* first: the callback may post the same buffer again */
    if (notify) {
        ctx->completed_cb(ctx, stag, imm, length, nullptr, status);
    }
}

template <typename List>
void HwTagEngine<List>::start_sw_rndv(Slot &s, uint32_t src_qp, const TmHeader &tmh,
                                      const RndvHeader &rvh) {
    ++counters_.sw_rndv;
    s.sw_rndv    = true;
    s.stag       = tmh_tag(tmh);
    s.remote_len = rvh_len(rvh);
    SwRndv op;
    op.token         = slot_id(static_cast<uint32_t>(&s - slots_.data()), s.gen);
    op.src_qp        = src_qp;
    op.tag           = tmh_tag(tmh);
    op.app_ctx       = tmh_app_ctx(tmh);
    op.remote_va     = rvh_va(rvh);
    op.rkey          = rvh_rkey(rvh);
    op.remote_length = rvh_len(rvh);
    op.buffer        = s.buffer;
    op.length        = ((s.state == kOrphan) || s.truncated)
                           ? 0
                           : std::min<size_t>(s.capacity, rvh_len(rvh));
    if (transport_.sw_rndv == nullptr) {
        ucs_error("tm hw list: no software rendezvous in this transport");
        sw_rndv_done(op.token, UCS_ERR_UNSUPPORTED);
        return;
    }
    transport_.sw_rndv(transport_.arg, op);
}

template <typename List> void HwTagEngine<List>::sw_rndv_done(uint64_t token, ucs_status_t status) {
    const uint32_t index = static_cast<uint32_t>(token);
    if ((index >= slots_.size()) || (slots_[index].gen != static_cast<uint32_t>(token >> 32)) ||
        !slots_[index].sw_rndv) {
        ++counters_.anomalies;
        ucs_error("tm hw list: sw_rndv_done for an unknown rendezvous");
        return;
    }
    Slot &s   = slots_[index];
    s.sw_rndv = false;
    if (s.truncated && (status == UCS_OK)) {
        status = UCS_ERR_MESSAGE_TRUNCATED;
    }
    s.truncated = false;
    deliver(s, s.stag, 0, s.remote_len, status);
    maybe_free(s);
}

template <typename List> void HwTagEngine<List>::on_list_op(const TmCompletion &c) {
    if (c.flags & kTmCqeSyncReq) {
        ++counters_.sync_requests;
    }
    if (c.wr_id == hw_tag_engine_detail::kSyncWrId) {
        sync_in_flight_ = false;
        return;
    }
    Slot *s = slot_of(c.wr_id);
    if (s == nullptr) {
        return;
    }
    --s->pending; /* the op's own completion */
    if (c.opcode == TmCqeOpcode::kAdd) {
        if ((c.status != TmCqeStatus::kSuccess) && (s->state == kPosted)) {
            /* The engine refused the tag: no consume will come. */
            shadow_.cancel(s->shadow);
            --posted_;
            --s->pending;
            deliver(*s, s->tag, 0, 0, UCS_ERR_IO_ERROR);
        }
    } else if (c.status == TmCqeStatus::kSuccess) {
        --s->pending; /* removed: no consume will come */
        if (s->state == kCancelling) {
            /* the posted tag and buffer length, as UCX's rc_mlx5 reports them */
            deliver(*s, s->tag, 0, s->capacity, UCS_ERR_CANCELED);
        } else if ((s->state != kOrphan) && (s->state != kClaimed) && (s->state != kDone)) {
            ++counters_.anomalies;
        }
    }
    /* DEL with TM_ERR: the tag was consumed; its completion carries on. */
    maybe_free(*s);
}

template <typename List> void HwTagEngine<List>::on_tagged(const TmCompletion &c) {
    Slot *s = slot_of(c.wr_id);
    if (s == nullptr) {
        return;
    }
    if (c.flags & kTmCqeMatch) {
        ++counters_.hw_matches;
        s->stag = c.tag;
        switch (s->state) {
        case kPosted:
            shadow_.cancel(s->shadow);
            --posted_;
            /* fall through */
        case kCancelling: /* the message won over the cancel */
            set_state(*s, kConsumed);
            s->ctx->tag_consumed_cb(s->ctx);
            break;
        case kOrphan:
            break;
        default:
            ++counters_.anomalies;
            ucs_error("tm hw list: match of a receive in state %d", s->state);
            break;
        }
    }
    if (!(c.flags & kTmCqeDataValid) && (c.status == TmCqeStatus::kSuccess)) {
        return; /* MATCH only: the data follows */
    }
    --s->pending; /* the consume */
    if (c.status == TmCqeStatus::kRndvIncomplete) {
        TmHeader   tmh;
        RndvHeader rvh;
        if ((c.byte_len < sizeof(tmh) + sizeof(rvh)) || (s->capacity < sizeof(tmh) + sizeof(rvh))) {
            /* Too small to hold the headers: nothing to read, but the sender
             * waits for its FIN, which the completion can address (src_qp,
             * priv = TMH.app_ctx). The sender's length is unknown: 0. */
            s->truncated = true;
            start_sw_rndv(*s, c.src_qp, make_tmh(TmhOp::kRndv, s->stag, c.priv), RndvHeader{});
        } else {
            memcpy(&tmh, s->buffer, sizeof(tmh));
            memcpy(&rvh, static_cast<uint8_t *>(s->buffer) + sizeof(tmh), sizeof(rvh));
            start_sw_rndv(*s, c.src_qp, tmh, rvh);
        }
        maybe_free(*s);
        return;
    }
    ucs_status_t status = UCS_OK;
    if (c.status == TmCqeStatus::kLengthError) {
        status = UCS_ERR_MESSAGE_TRUNCATED;
    } else if (c.status != TmCqeStatus::kSuccess) {
        status = UCS_ERR_IO_ERROR;
    }
    const bool sw_rndv_request = (c.flags & kTmCqeMatch) && (c.flags & kTmCqeWithImm) &&
                                 (c.imm == 0); /* one packet, immediate 0 */
    if (sw_rndv_request && (status == UCS_OK) && (s->state == kConsumed)) {
        /* A software rendezvous request: its header is in the buffer. */
        uct_tag_context_t *ctx = s->ctx;
        set_state(*s, kDone);
        s->ctx                 = nullptr;
        give_back_buffer(*s);
        ctx->rndv_cb(ctx, s->stag, s->buffer, c.byte_len, UCS_OK, 0);
    } else {
        const uint64_t imm = (c.flags & kTmCqeRndv)
                                 ? 0 /* app_ctx is the sender's rendezvous op */
                                 : (static_cast<uint64_t>(c.priv) << 32) |
                                       ((c.flags & kTmCqeWithImm) ? c.imm : 0);
        deliver(*s, s->stag, imm, c.byte_len, status);
        if ((c.flags & kTmCqeRndv) && (c.status == TmCqeStatus::kError) &&
            (transport_.rndv_failed != nullptr)) {
            transport_.rndv_failed(transport_.arg, c.src_qp, c.priv);
        }
    }
    maybe_free(*s);
}

template <typename List>
bool HwTagEngine<List>::on_unexpected(const TmCompletion &c, uint8_t *data) {
    if (c.status != TmCqeStatus::kError) {
        ++sw_count_; /* the engine counted it: handled by software, whatever happens next */
    }                /* (kError: a flushed buffer, no message) */
    if (c.flags & kTmCqeSyncReq) {
        ++counters_.sync_requests;
    }
    TmHeader tmh;
    if ((c.status != TmCqeStatus::kSuccess) || (c.byte_len < sizeof(tmh)) ||
        (c.byte_len > config_.rx_buffer_size)) {
        ++counters_.rx_dropped;
        ucs_error("tm hw list: unexpected message dropped (length %u)", c.byte_len);
        return true;
    }
    memcpy(&tmh, data, sizeof(tmh));
    const bool rndv = (tmh.opcode == static_cast<uint8_t>(TmhOp::kRndv));
    RndvHeader rvh{};
    if (rndv) {
        if (c.byte_len < sizeof(tmh) + sizeof(rvh)) {
            ++counters_.rx_dropped;
            ucs_error("tm hw list: rendezvous request without RVH dropped");
            return true;
        }
        memcpy(&rvh, data + sizeof(tmh), sizeof(rvh));
    }
    const uint64_t  stag   = tmh_tag(tmh);
    const uint32_t  hdrs   = sizeof(tmh) + (rndv ? sizeof(rvh) : 0);
    uint8_t        *body   = data + hdrs;
    const size_t    length = c.byte_len - hdrs;
    const bool      sw_rndv_request = !rndv && (tmh.reserved[0] == kTmhRndvRequest);

    /* A receive posted in software order before this message was handled
     * takes it, as the software matcher would have. */
    const uint64_t imm = (static_cast<uint64_t>(tmh_app_ctx(tmh)) << 32) |
                         ((c.flags & kTmCqeWithImm) ? c.imm : 0);
    if (!rndv && !sw_rndv_request) {
        if (EagerDelivery::whole(*this, stag, imm, body, length)) {
            return true;
        }
    } else if (Slot *s = match(stag)) {
        if (rndv) {
            start_sw_rndv(*s, c.src_qp, tmh, rvh);
        } else if (s->state == kClaimed) {
            uct_tag_context_t *ctx = s->ctx;
            set_state(*s, kDone);
            s->ctx                 = nullptr;
            give_back_buffer(*s);
            ctx->rndv_cb(ctx, stag, body, static_cast<unsigned>(length), UCS_OK,
                         UCT_TAG_RECV_CB_INLINE_DATA);
        }
        maybe_free(*s);
        return true;
    }

    ++counters_.unexpected;
    if (rndv || sw_rndv_request) {
        if (transport_.unexpected_rndv != nullptr) {
            transport_.unexpected_rndv(transport_.arg, c.src_qp, stag, body,
                                       static_cast<unsigned>(length), rndv ? rvh_va(rvh) : 0,
                                       rndv ? rvh_rkey(rvh) : 0, rndv ? rvh_len(rvh) : 0);
        }
        return true;
    }
    if (transport_.unexpected_eager == nullptr) {
        return true;
    }
    return transport_.unexpected_eager(transport_.arg, c.src_qp, stag, imm, body, length) !=
           UCS_INPROGRESS;
}

template <typename List>
typename HwTagEngine<List>::Slot *HwTagEngine<List>::match(uint64_t stag) {
    const match::ArriveResult found = shadow_.match_posted(stag);
    if (!found.matched) {
        return nullptr;
    }
    Slot &s = *static_cast<Slot *>(found.recv.ctx);
    --posted_;
    ++counters_.sw_claims;
    set_state(s, kClaimed);
    s.stag  = stag;
    /* DEL before the count that re-enables hardware matching is reported
     * (it travels on this very DEL): the engine cannot match it any more. */
    post_del(s);
    s.ctx->tag_consumed_cb(s.ctx);
    return &s;
}

template <typename List>
size_t HwTagEngine<List>::scatter(Slot *s, size_t offset, const void *data, size_t length) const {
    const size_t n = (offset < s->capacity) ? std::min(s->capacity - offset, length) : 0;
    if (n > 0) {
        memcpy(static_cast<uint8_t *>(s->buffer) + offset, data, n);
    }
    return n;
}

template <typename List>
void HwTagEngine<List>::complete(Slot *s, uint64_t stag, uint64_t imm, size_t length,
                                 ucs_status_t status, bool) {
    deliver(*s, stag, imm, length, status);
    maybe_free(*s);
}

template <typename List> bool HwTagEngine<List>::on_no_tag(const TmCompletion &c, uint8_t *data) {
    if ((c.status != TmCqeStatus::kSuccess) || (c.byte_len > config_.rx_buffer_size) ||
        (c.byte_len < 1)) {
        ++counters_.rx_dropped;
        return true;
    }
    if ((data[0] == static_cast<uint8_t>(TmhOp::kFin)) && (c.byte_len >= sizeof(TmHeader))) {
        TmHeader tmh;
        memcpy(&tmh, data, sizeof(tmh));
        if (transport_.fin != nullptr) {
            transport_.fin(transport_.arg, c.src_qp, tmh_app_ctx(tmh));
        }
        return true;
    }
    if (transport_.no_tag == nullptr) {
        return true;
    }
    return transport_.no_tag(transport_.arg, c.src_qp, data, c.byte_len) != UCS_INPROGRESS;
}

template <typename List> unsigned HwTagEngine<List>::progress() {
    TmCompletion batch[16];
    unsigned     total = 0;
    unsigned     n;
    do {
        n = list_.poll(batch, std::min<unsigned>(16, config_.poll_budget - total));
        for (unsigned i = 0; i < n; ++i) {
            const TmCompletion &c = batch[i];
            switch (c.opcode) {
            case TmCqeOpcode::kAdd:
            case TmCqeOpcode::kDel:
            case TmCqeOpcode::kSync:
                on_list_op(c);
                break;
            case TmCqeOpcode::kTmRecv:
                on_tagged(c);
                break;
            case TmCqeOpcode::kRecv:
            case TmCqeOpcode::kNoTag: {
                if (c.wr_id >= config_.rx_buffers) {
                    ++counters_.anomalies;
                    break;
                }
                const uint32_t index = static_cast<uint32_t>(c.wr_id);
                uint8_t       *data  = rx_buffer(index);
                const bool done = (c.opcode == TmCqeOpcode::kRecv) ? on_unexpected(c, data)
                                                                   : on_no_tag(c, data);
                if (done) {
                    repost_rx(index);
                }
                break;
            }
            }
        }
        total += n;
    } while ((n == 16) && (total < config_.poll_budget));

    /* Report the unexpected count when software handled unexpected messages
     * that no ADD/DEL has reported since: hardware matching stays off until
     * the engine hears it. SYNC_REQ needs nothing more: it means the engine
     * delivered unexpected messages software has not reported; they are
     * either counted already (then this SYNC carries them) or still in the
     * CQ (then the SYNC follows the progress call that polls them). */
    if ((reported_count_ != sw_count_) && !sync_in_flight_) {
        TmOp op;
        op.opcode         = TmOpcode::kSync;
        op.flags          = count_flags();
        op.wr_id          = hw_tag_engine_detail::kSyncWrId;
        op.unexpected_cnt = sw_count_;
        if (list_.post_op(op) == UCS_OK) {
            reported_count_ = sw_count_;
            sync_in_flight_ = true;
            ++counters_.syncs;
        }
    }
    return total;
}

}  // namespace uct_tm

#endif
