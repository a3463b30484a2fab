/*
 * tm_rc send paths: send resources (work requests, bounce buffers), active
 * messages, tagged eager sends, software rendezvous requests, RDMA get/put,
 * and send completions.
 */
#include "rc_iface.h"

#include "ib_device.h"

#include "common/ucs_assert.h"
#include "tag/uct_iov.h"

#include <ucs/debug/log_def.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <new>

namespace uct_tm {
namespace ib {
namespace {

/* Whether a message goes with immediate data: the conventions of the
 * hardware tag list (tm_list.h), which a TM NIC's completions need. Eager:
 * when the immediate's low half is not 0, and always when longer than one
 * path MTU; a software rendezvous request: always, immediate 0. */
bool with_immediate(const RcEp *ep, const WireHeader &hdr, uint32_t imm_low, size_t total) {
    if (hdr.opcode != IBV_TMH_EAGER) {
        return false;
    }
    if (hdr.kind == static_cast<uint8_t>(Kind::kRndvRequest)) {
        return true;
    }
    return (imm_low != 0) || (total > ep->path_mtu);
}

/* Whether the layer above registered every non-empty piece of the iov list. */
inline bool all_registered(const uct_iov_t *iov, size_t iovcnt) {
    for (size_t i = 0; i < iovcnt; ++i) {
        if ((iov[i].length != 0) && (mr_of(iov[i].memh) == nullptr)) {
            return false;
        }
    }
    return true;
}

/* The registered iov pieces as scatter/gather entries, the empty ones left
 * out; how many. */
inline int gather_registered(const uct_iov_t *iov, size_t iovcnt, struct ibv_sge *sge) {
    int nsge = 0;
    for (size_t i = 0; i < iovcnt; ++i) {
        const size_t len = iov[i].length;
        if (len > 0) {
            sge[nsge++] = {reinterpret_cast<uintptr_t>(iov[i].buffer), static_cast<uint32_t>(len),
                           mr_of(iov[i].memh)->lkey};
        }
    }
    return nsge;
}

/* The iov list's pieces copied one after the other to `dst`. */
inline void copy_iov(char *dst, const uct_iov_t *iov, size_t iovcnt) {
    for (size_t i = 0; i < iovcnt; ++i) {
        memcpy(dst, iov[i].buffer, iov[i].length);
        dst += iov[i].length;
    }
}

}  // namespace

/* ---- send resources -------------------------------------------------------------------- */

ucs_status_t RcIface::refuse_oversized(RcEp *ep, size_t total) {
    if (!ep->size_warned) {
        ep->size_warned = true;
        ucs_warn("tm_rc: a %zu-byte message on QP 0x%x exceeds what the peer receives (its "
                 "SEG_SIZE %u; ours %zu): refused with UCS_ERR_EXCEEDS_LIMIT; set "
                 "UCX_TM_RC_SEG_SIZE alike on every process", total, ep->qp->qp_num,
                 ep->max_send, seg_size_);
    }
    return UCS_ERR_EXCEEDS_LIMIT;
}

ucs_status_t RcIface::tx_ready(RcEp *ep, bool needs_buf) {
    if (ucs_unlikely(ep->failed)) {
        return UCS_ERR_CONNECTION_RESET;
    }
    if (ucs_unlikely(!ep->connected)) {
        if (ep->qp == nullptr) {
            connect_->request_qp(ep); /* tm_dc: connected when a reply comes; pending go then */
        }
        return UCS_ERR_NO_RESOURCE;
    }
    if (ucs_unlikely((ep->sq_avail == 0) || (tx_ops_used_ == tx_ops_.size()) ||
                     (needs_buf && free_tx_bufs_.empty()) ||
                     (!ep->pending.empty() && !dispatching_))) {
        return UCS_ERR_NO_RESOURCE;
    }
    return UCS_OK;
}

uint32_t RcIface::alloc_tx_op() {
    const uint32_t index = free_tx_op_;
    ucs_assertv(index < tx_ops_.size(), "no free send operation (%u in use)", tx_ops_used_);
    ucs_assertv(tx_ops_[index].type == TxOp::Type::kFree, "free send operation %u has type %d",
                index, static_cast<int>(tx_ops_[index].type));
    free_tx_op_          = tx_ops_[index].next_free;
    ++tx_ops_used_;
    return index;
}

void RcIface::free_tx_op(uint32_t index) {
    TxOp &op = tx_ops_[index];
    ucs_assertv(op.type != TxOp::Type::kFree, "send operation %u freed twice", index);
    if (op.tx_buf >= 0) {
        free_tx_bufs_.push_back(op.tx_buf);
    }
    if (op.temp_mr != nullptr) {
        ibv_dereg_mr(op.temp_mr);
    }
    op           = TxOp{};
    op.next_free = free_tx_op_;
    free_tx_op_  = index;
    --tx_ops_used_;
}

int RcIface::post_wr(RcEp *ep, struct ibv_send_wr *wr) {
    struct ibv_send_wr *bad = nullptr;
    return ibv_post_send(ep->qp, wr, &bad);
}

ucs_status_t RcIface::post_send(RcEp *ep, struct ibv_send_wr *wr, const TxOp &desc) {
    ucs_assert(desc.type != TxOp::Type::kFree);
    const uint32_t index = alloc_tx_op();
    tx_ops_[index]       = desc;
    tx_ops_[index].ep    = ep;
    wr->wr_id            = index;
    wr->send_flags |= IBV_SEND_SIGNALED;
    wr->next             = nullptr;
    const int rc = post_wr(ep, wr);
    if (ucs_unlikely(rc != 0)) {
        ucs_error("tm_rc: ibv_post_send on QP 0x%x: %s", ep->qp->qp_num, strerror(rc));
        tx_ops_[index].comp = nullptr;
        free_tx_op(index);
        return UCS_ERR_IO_ERROR;
    }
    --ep->sq_avail;
    ++ep->outstanding;
    ep->last_use = ++use_clock_; /* tm_dc: the least recently used connection goes first */
    return UCS_OK;
}

ucs_status_t RcIface::send_message(RcEp *ep, const WireHeader &header, uint32_t imm_low,
                                   const void *prefix, size_t prefix_length,
                                   const uct_iov_t *iov, size_t iovcnt,
                                   uct_completion_t *comp) {
    const size_t max_sge = std::min(md_->attr.orig_attr.max_sge, 8);
    size_t       payload;
    const size_t head = sizeof(WireHeader) + prefix_length;
    if (head > seg_size_) {
        return UCS_ERR_EXCEEDS_LIMIT;
    }
    ucs_status_t status = check_iov(iov, iovcnt, IovLimits{max_sge - 1, seg_size_ - head}, &payload);
    if (status != UCS_OK) {
        return status;
    }
    const size_t total = head + payload;
    if (total > seg_size_) {
        return UCS_ERR_EXCEEDS_LIMIT;
    }
    if (ucs_unlikely(ep->connected && (total > ep->max_send))) {
        return refuse_oversized(ep, total);
    }
    /* Zero copy when the layer above registered every piece and waits for a
     * completion; otherwise the message is copied and done on return. */
    const bool zcopy = (comp != nullptr) && (payload > 0) && (total > max_inline_) &&
                       all_registered(iov, iovcnt);
    const bool inline_send = !zcopy && (total <= max_inline_);
    status = tx_ready(ep, !inline_send);
    if (status != UCS_OK) {
        return status;
    }
    struct ibv_send_wr wr = {};
    struct ibv_sge     sge[8];
    TxOp               op;
    op.type = TxOp::Type::kSend;
    char  stack[256];
    char *buf;
    if (inline_send) {
        buf = stack;
    } else {
        op.tx_buf = free_tx_bufs_.back();
        free_tx_bufs_.pop_back();
        buf = tx_buf(op.tx_buf);
    }
    memcpy(buf, &header, sizeof(header));
    if (prefix_length > 0) {
        memcpy(buf + sizeof(header), prefix, prefix_length);
    }
    int nsge = 1;
    if (zcopy) {
        sge[0] = {reinterpret_cast<uintptr_t>(buf), static_cast<uint32_t>(head), tx_mr_->lkey};
        nsge += gather_registered(iov, iovcnt, sge + 1);
        op.type = TxOp::Type::kZcopy;
        op.comp = comp;
    } else {
        copy_iov(buf + head, iov, iovcnt);
        sge[0] = {reinterpret_cast<uintptr_t>(buf), static_cast<uint32_t>(total),
                  inline_send ? 0 : tx_mr_->lkey};
        if (inline_send) {
            wr.send_flags |= IBV_SEND_INLINE;
        }
    }
    wr.sg_list = sge;
    wr.num_sge = nsge;
    wr.opcode  = with_immediate(ep, header, imm_low, total) ? IBV_WR_SEND_WITH_IMM : IBV_WR_SEND;
    wr.imm_data = htobe32(imm_low);
    status = post_send(ep, &wr, op);
    if (status != UCS_OK) {
        return status;
    }
    return zcopy ? UCS_INPROGRESS : UCS_OK;
}

ucs_status_t RcIface::send_urgent(RcEp *ep, const WireHeader &header) {
    /* Past the pending queue: the peer's operation waits for it. */
    const bool saved = dispatching_;
    dispatching_     = true;
    const ucs_status_t status = send_message(ep, header, 0, nullptr, 0, nullptr, 0, nullptr);
    dispatching_ = saved;
    return status;
}

/* ---- active messages -------------------------------------------------------------------- */

ucs_status_t RcIface::am_short(RcEp *ep, uint8_t id, uint64_t header, const void *payload,
                               unsigned length) {
    if (id >= UCT_AM_ID_MAX) {
        return UCS_ERR_INVALID_PARAM;
    }
    const uct_iov_t iov = {const_cast<void *>(payload), length, UCT_MEM_HANDLE_NULL, 0, 1};
    return send_message(ep, am_header(id), 0, &header, sizeof(header), &iov, 1, nullptr);
}

ssize_t RcIface::am_bcopy(RcEp *ep, uint8_t id, uct_pack_callback_t pack_cb, void *arg) {
    if ((id >= UCT_AM_ID_MAX) || (pack_cb == nullptr)) {
        return UCS_ERR_INVALID_PARAM;
    }
    return send_bcopy(ep, am_header(id), 0, pack_cb, arg);
}

ucs_status_t RcIface::am_zcopy(RcEp *ep, uint8_t id, const void *header, unsigned header_length,
                               const uct_iov_t *iov, size_t iovcnt, uct_completion_t *comp) {
    if ((id >= UCT_AM_ID_MAX) || (header_length > 128) ||
        ((header_length > 0) && (header == nullptr))) {
        return UCS_ERR_INVALID_PARAM;
    }
    return send_message(ep, am_header(id), 0, header, header_length, iov, iovcnt, comp);
}

/* ---- tagged eager ----------------------------------------------------------------------- */

ucs_status_t RcIface::tag_eager_short(RcEp *ep, uct_tag_t tag, const void *data, size_t length) {
    if ((length > 0) && (data == nullptr)) {
        return UCS_ERR_INVALID_PARAM;
    }
    const uct_iov_t iov = {const_cast<void *>(data), length, UCT_MEM_HANDLE_NULL, 0, 1};
    return send_message(ep, tag_header(IBV_TMH_EAGER, tag, 0), 0, nullptr, 0, &iov, 1,
                        nullptr);
}

ssize_t RcIface::tag_eager_bcopy(RcEp *ep, uct_tag_t tag, uint64_t imm,
                                 uct_pack_callback_t pack_cb, void *arg) {
    if (pack_cb == nullptr) {
        return UCS_ERR_INVALID_PARAM;
    }
    /* With immediate data as with_immediate() says (rc_wire.h). */
    return send_bcopy(ep, tag_header(IBV_TMH_EAGER, tag, static_cast<uint32_t>(imm >> 32)),
                      static_cast<uint32_t>(imm), pack_cb, arg);
}

/* One SEND from a registered bounce buffer: the header, then what pack_cb
 * writes. Returns the packed length or an error. */
ssize_t RcIface::send_bcopy(RcEp *ep, const WireHeader &hdr, uint32_t imm_low,
                            uct_pack_callback_t pack_cb, void *arg) {
    const ucs_status_t status = tx_ready(ep, true);
    if (status != UCS_OK) {
        return status;
    }
    TxOp op;
    op.type   = TxOp::Type::kSend;
    op.tx_buf = free_tx_bufs_.back();
    char *buf = tx_buf(op.tx_buf);
    memcpy(buf, &hdr, sizeof(hdr));
    const size_t length = pack_cb(buf + sizeof(hdr), arg);
    if (length > seg_size_ - sizeof(hdr)) {
        ucs_error("tm_rc: bcopy pack callback wrote %zu bytes, more than max_bcopy: dropped",
                  length);
        return UCS_ERR_EXCEEDS_LIMIT;
    }
    if (ucs_unlikely(sizeof(hdr) + length > ep->max_send)) {
        return refuse_oversized(ep, sizeof(hdr) + length);
    }
    free_tx_bufs_.pop_back();
    struct ibv_sge     sge = {reinterpret_cast<uintptr_t>(buf),
                              static_cast<uint32_t>(sizeof(hdr) + length), tx_mr_->lkey};
    struct ibv_send_wr wr  = {};
    wr.sg_list = &sge;
    wr.num_sge = 1;
    const bool with_imm = with_immediate(ep, hdr, imm_low, sizeof(hdr) + length);
    wr.opcode  = with_imm ? IBV_WR_SEND_WITH_IMM : IBV_WR_SEND;
    if (with_imm) {
        wr.imm_data = htobe32(imm_low);
    }
    const ucs_status_t posted = post_send(ep, &wr, op);
    return (posted == UCS_OK) ? static_cast<ssize_t>(length) : static_cast<ssize_t>(posted);
}

ucs_status_t RcIface::tag_eager_zcopy(RcEp *ep, uct_tag_t tag, uint64_t imm,
                                      const uct_iov_t *iov, size_t iovcnt,
                                      uct_completion_t *comp) {
    return send_message(ep, tag_header(IBV_TMH_EAGER, tag, static_cast<uint32_t>(imm >> 32)),
                        static_cast<uint32_t>(imm), nullptr, 0, iov, iovcnt, comp);
}

/* ---- software rendezvous request -------------------------------------------------------- */

ucs_status_t RcIface::tag_rndv_request(RcEp *ep, uct_tag_t tag, const void *header,
                                       unsigned header_length) {
    if ((header_length > 0) && (header == nullptr)) {
        return UCS_ERR_INVALID_PARAM;
    }
    const uct_iov_t iov = {const_cast<void *>(header), header_length, UCT_MEM_HANDLE_NULL, 0, 1};
    return send_message(ep, rndv_request_header(tag), 0, nullptr, 0, &iov, 1, nullptr);
}

/* ---- RDMA ----------------------------------------------------------------------------------- */

ucs_status_t RcIface::rdma_zcopy(RcEp *ep, const uct_iov_t *iov, size_t iovcnt,
                                 uint64_t remote_addr, uct_rkey_t rkey, uct_completion_t *comp,
                                 bool write) {
    const size_t max_sge = std::min(md_->attr.orig_attr.max_sge, 8);
    size_t       total;
    ucs_status_t status = check_iov(iov, iovcnt, IovLimits{max_sge - 1, kMaxZcopy}, &total);
    if (status != UCS_OK) {
        return status;
    }
    if ((rkey == UCT_INVALID_RKEY) || (rkey == 0) || !remote_key(rkey)->covers(remote_addr, total)) {
        /* Outside the peer's registration: the NIC would fail the QP. */
        return UCS_ERR_INVALID_PARAM;
    }
    status = tx_ready(ep, false);
    if (status != UCS_OK) {
        return status;
    }
    if (total == 0) {
        return UCS_OK;
    }
    struct ibv_sge sge[8];
    int            nsge    = 0;
    struct ibv_mr *temp_mr = nullptr;
    for (size_t i = 0; i < iovcnt; ++i) {
        const size_t len = iov[i].length * std::max<unsigned>(iov[i].count, 1);
        if (len == 0) {
            continue;
        }
        struct ibv_mr *mr = mr_of(iov[i].memh);
        if (mr == nullptr) {
            if (temp_mr != nullptr) {
                ibv_dereg_mr(temp_mr);
                return UCS_ERR_UNSUPPORTED; /* one unregistered piece at most */
            }
            temp_mr = ibv_reg_mr(md_->pd, iov[i].buffer, len, IBV_ACCESS_LOCAL_WRITE);
            if (temp_mr == nullptr) {
                return UCS_ERR_IO_ERROR;
            }
            ++counters_.temp_regs;
            mr = temp_mr;
        }
        sge[nsge++] = {reinterpret_cast<uintptr_t>(iov[i].buffer), static_cast<uint32_t>(len),
                       mr->lkey};
    }
    struct ibv_send_wr wr  = {};
    wr.sg_list             = sge;
    wr.num_sge             = nsge;
    wr.opcode              = write ? IBV_WR_RDMA_WRITE : IBV_WR_RDMA_READ;
    wr.wr.rdma.remote_addr = remote_addr;
    wr.wr.rdma.rkey        = remote_key(rkey)->rkey;
    TxOp op;
    op.type    = write ? TxOp::Type::kPut : TxOp::Type::kGet;
    op.comp    = comp;
    op.temp_mr = temp_mr;
    status     = post_send(ep, &wr, op);
    return (status == UCS_OK) ? UCS_INPROGRESS : status;
}

/* ---- send completions ------------------------------------------------------------------- */

void RcIface::handle_tx(const struct ibv_wc &wc) {
    const uint32_t index = static_cast<uint32_t>(wc.wr_id);
    if (ucs_unlikely(index >= tx_ops_.size())) {
        return;
    }
    TxOp         op = tx_ops_[index];
    RcEp        *ep = op.ep;
    ucs_status_t status = UCS_OK;
    ucs_assertv(op.type != TxOp::Type::kFree, "completion (wr_id %u) of a free send operation",
                index);
    if (ucs_unlikely(wc.status != IBV_WC_SUCCESS)) {
        status = (wc.status == IBV_WC_WR_FLUSH_ERR) ? UCS_ERR_CANCELED : UCS_ERR_IO_ERROR;
        if (wc.status != IBV_WC_WR_FLUSH_ERR) {
            ++counters_.tx_errors;
            ucs_debug("tm_rc: send completion on QP 0x%x: %s", wc.qp_num,
                      ibv_wc_status_str(wc.status));
        }
        if ((ep != nullptr) && !ep->failed) {
            fail_ep(ep, (wc.status == IBV_WC_RETRY_EXC_ERR || wc.status == IBV_WC_RNR_RETRY_EXC_ERR)
                            ? UCS_ERR_ENDPOINT_TIMEOUT
                            : UCS_ERR_CONNECTION_RESET);
        }
    }
    tx_ops_[index].comp = nullptr;
    free_tx_op(index);
    if (ep != nullptr) {
        ++ep->sq_avail;
        --ep->outstanding;
    }
    switch (op.type) {
    case TxOp::Type::kZcopy:
    case TxOp::Type::kGet:
    case TxOp::Type::kPut:
        complete(op.comp, status);
        break;
    case TxOp::Type::kRndvRead:
        rndv_.read_done(op.rndv, status);
        break;
    default:
        break;
    }
    if ((ep != nullptr) && (ep->super.iface != nullptr)) {
        error_qp_when_idle(ep);
    }
    if ((ep != nullptr) && (ep->super.iface == nullptr) && (ep->outstanding == 0)) {
        free_ep(ep); /* destroyed while sends were in flight: its last one is back */
    }
}

}  // namespace ib
}  // namespace uct_tm
