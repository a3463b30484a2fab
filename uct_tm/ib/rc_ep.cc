/*
 * tm_rc endpoints: queue-pair setup, every send path, rendezvous, RDMA
 * get/put, pending requests, flush, and send completions.
 */
#include "rc_iface.h"

#include "ib_device.h"

#include "base/clock.h"
#include "tag/uct_iov.h"

#include <ucs/debug/log_def.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <new>

namespace uct_tm {
namespace ib {
namespace {

/* check_rndv_qps(): how often a QP's state is queried (a system call) while
 * rendezvous sends wait on it; the bound on noticing a QP the device failed. */
constexpr uint64_t kQpCheckIntervalNs = 100 * 1000 * 1000;

/* Rendezvous operation ids travel in app_ctx: slot index and a generation. */
constexpr uint32_t kRndvIndexBits = 20;
constexpr uint32_t kRndvIndexMask = (1u << kRndvIndexBits) - 1;

uint32_t rndv_id(uint32_t index, uint32_t gen) { return (gen << kRndvIndexBits) | index; }

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

}  // namespace

/* ---- endpoint lifetime ------------------------------------------------------------------- */

ucs_status_t RcIface::ep_create(const uct_ep_params_t *params, uct_ep_h *ep_p) {
    if (params->field_mask & (UCT_EP_PARAM_FIELD_IFACE_ADDR | UCT_EP_PARAM_FIELD_SOCKADDR)) {
        return UCS_ERR_UNSUPPORTED; /* CONNECT_TO_EP only */
    }
    RcEp *ep = new (std::nothrow) RcEp;
    if (ep == nullptr) {
        return UCS_ERR_NO_MEMORY;
    }
    ep->super.iface = abi::to_uct(&base);
    ep->iface       = this;
    struct ibv_qp_init_attr qa = {};
    qa.send_cq          = tx_cq_;
    qa.recv_cq          = rx_cq_;
    qa.srq              = srq_;
    qa.qp_type          = IBV_QPT_RC;
    qa.sq_sig_all       = 0;
    qa.cap.max_send_wr  = tx_queue_len_;
    qa.cap.max_send_sge = std::min(md_->attr.orig_attr.max_sge, 8);
    qa.cap.max_inline_data = static_cast<uint32_t>(config_.max_inline);
    ep->qp = ibv_create_qp(md_->pd, &qa);
    if (ep->qp == nullptr) {
        /* Some devices grant no inline data at all. */
        qa.cap.max_inline_data = 0;
        ep->qp = ibv_create_qp(md_->pd, &qa);
    }
    if (ep->qp == nullptr) {
        ucs_error("tm_rc: ibv_create_qp on %s: %s", md_->device.c_str(), strerror(errno));
        delete ep;
        return UCS_ERR_IO_ERROR;
    }
    max_inline_  = eps_.empty() ? qa.cap.max_inline_data : std::min(max_inline_, qa.cap.max_inline_data);
    ep->sq_avail = tx_queue_len_;
    struct ibv_qp_attr attr = {};
    attr.qp_state        = IBV_QPS_INIT;
    attr.pkey_index      = 0;
    attr.port_num        = port_;
    attr.qp_access_flags = IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_READ | IBV_ACCESS_REMOTE_WRITE;
    if (ibv_modify_qp(ep->qp, &attr,
                      IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT | IBV_QP_ACCESS_FLAGS) != 0) {
        ucs_error("tm_rc: QP to INIT: %s", strerror(errno));
        ibv_destroy_qp(ep->qp);
        delete ep;
        return UCS_ERR_IO_ERROR;
    }
    try {
        eps_.push_back(ep);
    } catch (const std::bad_alloc &) {
        ibv_destroy_qp(ep->qp);
        delete ep;
        return UCS_ERR_NO_MEMORY;
    }
    *ep_p = &ep->super;
    return UCS_OK;
}

void RcIface::ep_destroy(RcEp *ep) {
    pending_purge(ep, nullptr, nullptr);
    pending_eps_.remove(ep);
    flush_waiters_.forget(ep);
    /* Our rendezvous sends on it never get their FIN: gone without a callback. */
    for (uint32_t i = 0; i < rndv_sends_.size(); ++i) {
        if ((rndv_sends_[i].active || rndv_sends_[i].retired) && (rndv_sends_[i].ep == ep)) {
            release_rndv_send(i);
        }
    }
    /* Send completions still due name this endpoint: they complete silently,
     * from an errored QP, before the endpoint and its QP go. */
    for (TxOp &op : tx_ops_) {
        if ((op.type != TxOp::Type::kFree) && (op.ep == ep)) {
            op.comp = nullptr;
        }
    }
    for (RndvRecv &r : rndv_recvs_) {
        if (r.active && (r.ep == ep)) {
            r.ep = nullptr; /* no FIN to send */
        }
    }
    ep->notified = true;
    ep->failed   = true;
    if (ep->outstanding == 0) {
        ibv_destroy_qp(ep->qp);
        eps_.erase(std::remove(eps_.begin(), eps_.end(), ep), eps_.end());
        delete ep;
        return;
    }
    struct ibv_qp_attr attr = {};
    attr.qp_state           = IBV_QPS_ERR;
    ibv_modify_qp(ep->qp, &attr, IBV_QP_STATE);
    ep->super.iface = nullptr; /* reaped by handle_tx() when its last completion arrives */
}

ucs_status_t RcIface::ep_get_address(RcEp *ep, uct_ep_addr_t *addr) const {
    const EpAddress a = {ep->qp->qp_num, static_cast<uint32_t>(seg_size_)};
    memcpy(addr, &a, sizeof(a));
    return UCS_OK;
}

ucs_status_t RcIface::ep_connect_to_ep(RcEp *ep, const uct_device_addr_t *dev_addr,
                                       const uct_ep_addr_t *ep_addr) {
    if ((dev_addr == nullptr) || (ep_addr == nullptr)) {
        return UCS_ERR_INVALID_PARAM;
    }
    if (ep->connected) {
        return UCS_ERR_ALREADY_EXISTS;
    }
    DeviceAddress remote;
    EpAddress     rep;
    memcpy(&remote, dev_addr, sizeof(remote));
    memcpy(&rep, ep_addr, sizeof(rep));
    if (!is_reachable(dev_addr, nullptr)) {
        return UCS_ERR_UNREACHABLE;
    }
    if (rep.seg_size < kMinSegSize) {
        ucs_error("tm_rc: endpoint address of QP 0x%x receives %u-byte messages, below the "
                  "least SEG_SIZE (%zu): malformed", rep.qp_num, rep.seg_size, kMinSegSize);
        return UCS_ERR_INVALID_PARAM;
    }
    const auto &dev = md_->attr.orig_attr;
    struct ibv_qp_attr attr = {};
    attr.qp_state = IBV_QPS_RTR;
    enum ibv_mtu mtu = std::min(static_cast<enum ibv_mtu>(dev_addr_.mtu),
                                static_cast<enum ibv_mtu>(remote.mtu));
    if (config_.path_mtu != 0) {
        for (enum ibv_mtu m : {IBV_MTU_256, IBV_MTU_512, IBV_MTU_1024, IBV_MTU_2048, IBV_MTU_4096}) {
            if (mtu_bytes(m) <= config_.path_mtu) {
                mtu = std::min(m, static_cast<enum ibv_mtu>(dev_addr_.mtu));
            }
        }
    }
    attr.path_mtu           = mtu;
    ep->path_mtu            = mtu_bytes(mtu);
    attr.dest_qp_num        = rep.qp_num;
    attr.rq_psn             = 0;
    attr.max_dest_rd_atomic = static_cast<uint8_t>(std::min(dev.max_qp_rd_atom, 16));
    attr.min_rnr_timer      = 12;
    attr.ah_attr.port_num   = port_;
    attr.ah_attr.dlid       = remote.lid;
    if (remote.roce) {
        attr.ah_attr.is_global      = 1;
        memcpy(attr.ah_attr.grh.dgid.raw, remote.gid, sizeof(remote.gid));
        attr.ah_attr.grh.sgid_index = static_cast<uint8_t>(gid_index_);
        attr.ah_attr.grh.hop_limit  = 64;
    }
    if (ibv_modify_qp(ep->qp, &attr,
                      IBV_QP_STATE | IBV_QP_AV | IBV_QP_PATH_MTU | IBV_QP_DEST_QPN |
                          IBV_QP_RQ_PSN | IBV_QP_MAX_DEST_RD_ATOMIC | IBV_QP_MIN_RNR_TIMER) != 0) {
        ucs_error("tm_rc: QP 0x%x to RTR (remote QP 0x%x): %s", ep->qp->qp_num, rep.qp_num,
                  strerror(errno));
        return UCS_ERR_IO_ERROR;
    }
    attr          = {};
    attr.qp_state = IBV_QPS_RTS;
    attr.timeout  = static_cast<uint8_t>(std::min(config_.timeout, 31u));
    attr.retry_cnt = static_cast<uint8_t>(std::min(config_.retry_count, 7u));
    attr.rnr_retry = static_cast<uint8_t>(std::min(config_.rnr_retry, 7u));
    attr.sq_psn    = 0;
    attr.max_rd_atomic = static_cast<uint8_t>(std::min(dev.max_qp_rd_atom, 16));
    if (ibv_modify_qp(ep->qp, &attr,
                      IBV_QP_STATE | IBV_QP_TIMEOUT | IBV_QP_RETRY_CNT | IBV_QP_RNR_RETRY |
                          IBV_QP_SQ_PSN | IBV_QP_MAX_QP_RD_ATOMIC) != 0) {
        ucs_error("tm_rc: QP 0x%x to RTS: %s", ep->qp->qp_num, strerror(errno));
        return UCS_ERR_IO_ERROR;
    }
    ep->connected     = true;
    ep->remote_qp_num = rep.qp_num;
    ep->remote_dev    = remote;
    ep->max_send      = std::min<uint32_t>(static_cast<uint32_t>(seg_size_), rep.seg_size);
    if (ep->max_send < seg_size_) {
        ucs_diag("tm_rc: QP 0x%x: the peer receives at most %u bytes per message (its SEG_SIZE; "
                 "ours %zu): larger sends are refused", ep->qp->qp_num, rep.seg_size, seg_size_);
    }
    return UCS_OK;
}

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

bool RcIface::ep_is_connected(const RcEp *ep, const uct_device_addr_t *dev_addr,
                              const uct_iface_addr_t *,
                              const uct_ep_addr_t *ep_addr) const {
    if (!ep->connected || (dev_addr == nullptr) || (ep_addr == nullptr)) {
        return false;
    }
    DeviceAddress remote;
    EpAddress     rep;
    memcpy(&remote, dev_addr, sizeof(remote));
    memcpy(&rep, ep_addr, sizeof(rep));
    return (rep.qp_num == ep->remote_qp_num) && (remote.lid == ep->remote_dev.lid) &&
           (memcmp(remote.gid, ep->remote_dev.gid, sizeof(remote.gid)) == 0);
}

/* ---- send resources -------------------------------------------------------------------- */

ucs_status_t RcIface::tx_ready(RcEp *ep, bool needs_buf) const {
    if (ucs_unlikely(ep->failed)) {
        return UCS_ERR_CONNECTION_RESET;
    }
    if (ucs_unlikely(!ep->connected || (ep->sq_avail == 0) || (tx_ops_used_ == tx_ops_.size()) ||
                     (needs_buf && free_tx_bufs_.empty()) ||
                     (!ep->pending.empty() && !dispatching_))) {
        return UCS_ERR_NO_RESOURCE;
    }
    return UCS_OK;
}

uint32_t RcIface::alloc_tx_op() {
    const uint32_t index = free_tx_op_;
    free_tx_op_          = tx_ops_[index].next_free;
    ++tx_ops_used_;
    return index;
}

void RcIface::free_tx_op(uint32_t index) {
    TxOp &op = tx_ops_[index];
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

ucs_status_t RcIface::post_send(RcEp *ep, struct ibv_send_wr *wr, const TxOp &desc) {
    const uint32_t index = alloc_tx_op();
    tx_ops_[index]       = desc;
    tx_ops_[index].ep    = ep;
    wr->wr_id            = index;
    wr->send_flags |= IBV_SEND_SIGNALED;
    wr->next             = nullptr;
    struct ibv_send_wr *bad = nullptr;
    const int           rc  = ibv_post_send(ep->qp, wr, &bad);
    if (ucs_unlikely(rc != 0)) {
        ucs_error("tm_rc: ibv_post_send on QP 0x%x: %s", ep->qp->qp_num, strerror(rc));
        tx_ops_[index].comp = nullptr;
        free_tx_op(index);
        return UCS_ERR_IO_ERROR;
    }
    --ep->sq_avail;
    ++ep->outstanding;
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
    bool zcopy = (comp != nullptr) && (payload > 0) && (total > max_inline_);
    for (size_t i = 0; zcopy && (i < iovcnt); ++i) {
        zcopy = (iov[i].length == 0) || (mr_of(iov[i].memh) != nullptr);
    }
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
        for (size_t i = 0; i < iovcnt; ++i) {
            const size_t len = iov[i].length;
            if (len > 0) {
                sge[nsge++] = {reinterpret_cast<uintptr_t>(iov[i].buffer),
                               static_cast<uint32_t>(len), mr_of(iov[i].memh)->lkey};
            }
        }
        op.type = TxOp::Type::kZcopy;
        op.comp = comp;
    } else {
        size_t offset = head;
        for (size_t i = 0; i < iovcnt; ++i) {
            const size_t len = iov[i].length;
            memcpy(buf + offset, iov[i].buffer, len);
            offset += len;
        }
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

/* ---- rendezvous ------------------------------------------------------------------------- */

ucs_status_ptr_t RcIface::tag_rndv_zcopy(RcEp *ep, uct_tag_t tag, const void *header,
                                         unsigned header_length, const uct_iov_t *iov,
                                         size_t iovcnt, uct_completion_t *comp) {
    size_t       length;
    ucs_status_t status = check_iov(iov, iovcnt, IovLimits{1, kMaxZcopy}, &length);
    if (status != UCS_OK) {
        return UCS_STATUS_PTR(status);
    }
    if ((header_length > 0) && (header == nullptr)) {
        return UCS_STATUS_PTR(UCS_ERR_INVALID_PARAM);
    }
    if (header_length > max_rndv_hdr()) {
        return UCS_STATUS_PTR(UCS_ERR_EXCEEDS_LIMIT);
    }
    /* No entry: a message of no bytes. */
    void *const     buffer = (iovcnt > 0) ? iov->buffer : nullptr;
    const uct_mem_h memh   = (iovcnt > 0) ? iov->memh : UCT_MEM_HANDLE_NULL;
    status = tx_ready(ep, true);
    if (status != UCS_OK) {
        return UCS_STATUS_PTR(status);
    }
    if (free_rndv_sends_.empty()) {
        return UCS_STATUS_PTR(UCS_ERR_NO_RESOURCE);
    }
    struct ibv_mr *mr      = mr_of(memh);
    struct ibv_mr *temp_mr = nullptr;
    if ((mr == nullptr) && (length > 0)) {
        temp_mr = ibv_reg_mr(md_->pd, buffer, length, IBV_ACCESS_REMOTE_READ);
        if (temp_mr == nullptr) {
            ucs_error("tm_rc: registering a rendezvous buffer of %zu bytes: %s", length,
                      strerror(errno));
            return UCS_STATUS_PTR(UCS_ERR_IO_ERROR);
        }
        ++counters_.temp_regs;
        mr = temp_mr;
    }
    const uint32_t index = free_rndv_sends_.back();
    RndvSend      &s     = rndv_sends_[index];
    struct ibv_rvh rvh;
    rvh.va   = htobe64(reinterpret_cast<uintptr_t>(buffer));
    uint32_t rkey = (mr != nullptr) ? mr->rkey : 0;
    if (ucs_unlikely(config_.corrupt_rkey != 0) &&
        (++rndv_sends_started_ == config_.corrupt_rkey)) {
        /* The key byte of the rkey (rxe and mlx5 alike): same MR index, a
         * key the device refuses. */
        rkey ^= 0xffu;
        ucs_diag("tm_rc: rendezvous send %u advertises a corrupted rkey (UCX_TM_RC_CORRUPT_RKEY)",
                 rndv_sends_started_);
    }
    rvh.rkey = htobe32(rkey);
    rvh.len  = htobe32(static_cast<uint32_t>(length));
    char prefix[sizeof(rvh) + 0];
    memcpy(prefix, &rvh, sizeof(rvh));
    /* header + rvh + the layer above's header, copied */
    const uct_iov_t hdr_iov = {const_cast<void *>(header), header_length, UCT_MEM_HANDLE_NULL, 0, 1};
    status = send_message(ep, tag_header(IBV_TMH_RNDV, tag, rndv_id(index, s.gen)), 0,
                          prefix, sizeof(prefix), &hdr_iov, 1, nullptr);
    if (status != UCS_OK) {
        if (temp_mr != nullptr) {
            ibv_dereg_mr(temp_mr);
        }
        return UCS_STATUS_PTR(status);
    }
    free_rndv_sends_.pop_back();
    ++ep->rndv_sends;
    s.active  = true;
    s.comp    = comp;
    s.ep      = ep;
    s.temp_mr = temp_mr;
    return &s;
}

ucs_status_t RcIface::tag_rndv_cancel(RcEp *, void *op) {
    auto *s = static_cast<RndvSend *>(op);
    if ((rndv_sends_.empty()) || (s < rndv_sends_.data()) ||
        (s >= rndv_sends_.data() + rndv_sends_.size()) || !s->active) {
        return UCS_ERR_INVALID_PARAM;
    }
    const uint32_t index = static_cast<uint32_t>(s - rndv_sends_.data());
    RcEp          *ep    = s->ep;
    s->active            = false;
    s->comp              = nullptr;
    /* Tell the receiver; until it acknowledges, a READ it already started
     * must still find the buffer registered. */
    const bool saved = dispatching_;
    dispatching_     = true;
    const ucs_status_t status =
        ep->failed ? UCS_ERR_CONNECTION_RESET
                   : send_message(ep, rndv_cancel_header(rndv_id(index, s->gen)), 0, nullptr,
                                  0, nullptr, 0, nullptr);
    dispatching_ = saved;
    if (status == UCS_OK) {
        s->retired = true;
    } else {
        /* No receiver will read it any more (failed endpoint), or the queue is
         * full: keep the registration until the endpoint goes. */
        s->retired = s->temp_mr != nullptr;
        if (!s->retired) {
            release_rndv_send(index);
        }
    }
    return UCS_OK;
}

void RcIface::release_rndv_send(uint32_t index) {
    RndvSend &s = rndv_sends_[index];
    if (s.temp_mr != nullptr) {
        ibv_dereg_mr(s.temp_mr);
        s.temp_mr = nullptr;
    }
    if ((s.ep != nullptr) && (--s.ep->rndv_sends == 0)) {
        s.ep->probe_due_ns = 0;
    }
    s.active  = false;
    s.retired = false;
    s.comp    = nullptr;
    s.ep      = nullptr;
    ++s.gen;
    free_rndv_sends_.push_back(index);
}

ucs_status_t RcIface::tag_rndv_request(RcEp *ep, uct_tag_t tag, const void *header,
                                       unsigned header_length) {
    if ((header_length > 0) && (header == nullptr)) {
        return UCS_ERR_INVALID_PARAM;
    }
    const uct_iov_t iov = {const_cast<void *>(header), header_length, UCT_MEM_HANDLE_NULL, 0, 1};
    return send_message(ep, rndv_request_header(tag), 0, nullptr, 0, &iov, 1, nullptr);
}

void RcIface::receive_rndv(RcEp *ep, char *data, size_t length, uct_tag_t tag, uint32_t op) {
    if (ucs_unlikely(!tag_enabled() || (length < sizeof(struct ibv_rvh)))) {
        ++counters_.dropped;
        return;
    }
    struct ibv_rvh rvh;
    memcpy(&rvh, data, sizeof(rvh));
    const uint64_t va       = be64toh(rvh.va);
    const uint32_t rkey     = be32toh(rvh.rkey);
    const size_t   msg_len  = be32toh(rvh.len);
    const char    *hdr      = data + sizeof(rvh);
    const unsigned hdr_len  = static_cast<unsigned>(length - sizeof(rvh));
    TagEngine::Recv *recv   = tags_.match(tag);
    if (recv == nullptr) {
        if (params().rndv_cb == nullptr) {
            ++counters_.dropped;
            return;
        }
        ++counters_.unexpected;
        const PackedRkey packed = {kRkeyMagic, rkey, va, msg_len};
        params().rndv_cb(params().rndv_arg, 0, tag, hdr, hdr_len, va, msg_len, &packed);
        return;
    }
    if ((ep == nullptr) || ep->failed || free_rndv_recvs_.empty()) {
        tags_.complete(recv, tag, 0, msg_len,
                       free_rndv_recvs_.empty() ? UCS_ERR_NO_RESOURCE : UCS_ERR_CONNECTION_RESET);
        return;
    }
    const uint32_t index = free_rndv_recvs_.back();
    free_rndv_recvs_.pop_back();
    RndvRecv &r = rndv_recvs_[index];
    r        = RndvRecv{};
    r.active = true;
    r.recv   = recv;
    r.ep     = ep;
    r.tag    = tag;
    r.length = msg_len;
    r.op     = op;
    r.va     = va;
    r.rkey   = rkey;
    /* READs start after this batch of arrivals: a cancel that came in the
     * same batch withdraws the receive before anything is read. */
    deferred_reads_.push_back(index);
}

void RcIface::start_rndv_reads() {
    for (size_t i = 0; i < deferred_reads_.size(); ++i) {
        const uint32_t index = deferred_reads_[i];
        if (rndv_recvs_[index].active && !rndv_recvs_[index].started) {
            start_rndv_read(index);
        }
    }
    deferred_reads_.clear();
}

void RcIface::start_rndv_read(uint32_t index) {
    RndvRecv &r = rndv_recvs_[index];
    r.started   = true;
    RcEp *ep    = r.ep;
    if ((ep == nullptr) || ep->failed || !tags_.wanted(r.recv)) {
        r.status = UCS_ERR_CONNECTION_RESET;
        finish_rndv_recv(index);
        return;
    }
    ++counters_.rndv_reads;
    if (ucs_unlikely(config_.fail_read != 0) && fail_this_read()) {
        r.status = UCS_ERR_IO_ERROR;
        finish_rndv_recv(index);
        return;
    }
    struct iovec local[kMaxRecvIov];
    const size_t n      = tags_.iovecs(r.recv, r.length, local);
    uint64_t     remote = r.va;
    for (size_t i = 0; i < n; ++i) {
        if (local[i].iov_len == 0) {
            continue;
        }
        if ((ep->sq_avail == 0) || (tx_ops_used_ == tx_ops_.size())) {
            r.status = UCS_ERR_NO_RESOURCE;
            break;
        }
        /* The posted buffers came without their memh: register for this read. */
        struct ibv_mr *mr = ibv_reg_mr(md_->pd, local[i].iov_base, local[i].iov_len,
                                       IBV_ACCESS_LOCAL_WRITE);
        if (mr == nullptr) {
            r.status = UCS_ERR_IO_ERROR;
            break;
        }
        ++counters_.temp_regs;
        struct ibv_sge     sge = {reinterpret_cast<uintptr_t>(local[i].iov_base),
                                  static_cast<uint32_t>(local[i].iov_len), mr->lkey};
        struct ibv_send_wr wr  = {};
        wr.sg_list             = &sge;
        wr.num_sge             = 1;
        wr.opcode              = IBV_WR_RDMA_READ;
        wr.wr.rdma.remote_addr = remote;
        wr.wr.rdma.rkey        = r.rkey;
        TxOp read;
        read.type    = TxOp::Type::kRndvRead;
        read.rndv    = index;
        read.temp_mr = mr;
        if (post_send(ep, &wr, read) != UCS_OK) {
            r.status = UCS_ERR_IO_ERROR;
            break;
        }
        ++r.reads;
        remote += local[i].iov_len;
    }
    if (r.reads == 0) {
        finish_rndv_recv(index);
    }
}

void RcIface::receive_rndv_cancel(RcEp *ep, uint32_t op) {
    for (uint32_t i = 0; i < rndv_recvs_.size(); ++i) {
        RndvRecv &r = rndv_recvs_[i];
        if (!r.active || (r.ep != ep) || (r.op != op)) {
            continue;
        }
        if (r.started) {
            return; /* reading: its FIN acknowledges the cancel */
        }
        r.status = UCS_ERR_CANCELED;
        r.length = 0;
        finish_rndv_recv(i); /* sends the FIN */
        return;
    }
    /* Not matched here (delivered to rndv_cb, or already finished): just
     * acknowledge, so the sender may release the buffer. */
    if ((ep != nullptr) && !ep->failed) {
        send_fin(ep, op);
    }
}

void RcIface::finish_rndv_recv(uint32_t index) {
    RndvRecv &r = rndv_recvs_[index];
    if ((r.ep != nullptr) && !r.ep->failed) {
        acknowledge_read(r.ep, r.op, r.status);
    }
    r.active = false;
    free_rndv_recvs_.push_back(index);
    tags_.complete(r.recv, r.tag, 0, r.length, r.status);
}

ucs_status_t RcIface::send_fin(RcEp *ep, uint32_t op) {
    /* The FIN must go even when the queue is short: it may take the slot
     * the layer above would have used next (it then gets NO_RESOURCE). */
    const bool saved = dispatching_;
    dispatching_     = true;
    ucs_status_t status =
        send_message(ep, tag_header(IBV_TMH_FIN, 0, op), 0, nullptr, 0, nullptr, 0, nullptr);
    dispatching_ = saved;
    if (status != UCS_OK) {
        ucs_error("tm_rc: cannot send a rendezvous FIN: %s (the sender's operation stays pending)",
                  ucs_status_string(status));
    }
    return status;
}

void RcIface::acknowledge_read(RcEp *ep, uint32_t op, ucs_status_t read_status) {
    if (read_status == UCS_ERR_IO_ERROR) {
        fail_rndv_recv(ep, op); /* a FIN would complete the sender's op OK */
    } else {
        send_fin(ep, op); /* read, truncated or cancelled: the sender's buffer is free */
    }
}

void RcIface::receive_rndv_failed(RcEp *ep, uint32_t op) {
    /* As rc_mlx5 after a remote access error on its rendezvous: the
     * operation and every other on this connection complete with the error. */
    ucs_diag("tm_rc: the receiver of rendezvous 0x%x could not read it: endpoint failed", op);
    if ((ep != nullptr) && !ep->failed) {
        fail_ep(ep, UCS_ERR_IO_ERROR);
    }
}

void RcIface::fail_rndv_recv(RcEp *ep, uint32_t op) {
    if ((ep == nullptr) || ep->failed) {
        return; /* the QP is in error already (a real READ error fails it) */
    }
    const bool saved = dispatching_; /* like a FIN, it may take the last slot */
    dispatching_     = true;
    const ucs_status_t status =
        send_message(ep, rndv_failed_header(op), 0, nullptr, 0, nullptr, 0, nullptr);
    dispatching_ = saved;
    if (status != UCS_OK) {
        ucs_error("tm_rc: cannot tell the sender its rendezvous failed: %s",
                  ucs_status_string(status));
    }
    fail_ep(ep, UCS_ERR_IO_ERROR);
}

bool RcIface::fail_this_read() {
    if (++reads_started_ != config_.fail_read) {
        return false;
    }
    ucs_diag("tm_rc: rendezvous READ %u fails (UCX_TM_RC_FAIL_READ)", reads_started_);
    return true;
}

void RcIface::check_rndv_qps() {
    const uint64_t now = monotonic_ns();
    if (now < next_qp_check_ns_) {
        return;
    }
    next_qp_check_ns_ = now + kQpCheckIntervalNs;
    RcEp *in_error[16];
    size_t n = 0;
    for (RcEp *ep : eps_) {
        if ((ep->rndv_sends == 0) || ep->failed || !ep->connected || (n == 16)) {
            continue;
        }
        keepalive(ep, now);
        struct ibv_qp_attr      attr = {};
        struct ibv_qp_init_attr init = {};
        if ((ibv_query_qp(ep->qp, &attr, IBV_QP_STATE, &init) == 0) &&
            (attr.qp_state == IBV_QPS_ERR)) {
            in_error[n++] = ep;
        }
    }
    /* The error handler may destroy endpoints: failed after the scan. */
    for (size_t i = 0; i < n; ++i) {
        if (std::find(eps_.begin(), eps_.end(), in_error[i]) != eps_.end() &&
            !in_error[i]->failed) {
            ucs_diag("tm_rc: QP 0x%x went to the error state with rendezvous sends outstanding: "
                     "endpoint failed", in_error[i]->qp->qp_num);
            fail_ep(in_error[i], UCS_ERR_IO_ERROR);
        }
    }
}

void RcIface::keepalive(RcEp *ep, uint64_t now) {
    const auto keepalive_interval_ns = static_cast<uint64_t>(config_.keepalive_interval * 1e9);
    if (ep->probe_due_ns == 0) { /* waiting since the last check at most */
        ep->probe_due_ns = now + keepalive_interval_ns;
        return;
    }
    if ((now < ep->probe_due_ns) || (ep->outstanding > 0)) {
        return; /* heard from recently, or a send in flight fails if the peer is gone */
    }
    ep->probe_due_ns = now + keepalive_interval_ns;
    if (post_probe(ep) == UCS_OK) {
        ++counters_.keepalives;
    }
}

ucs_status_t RcIface::post_probe(RcEp *ep) {
    if ((ep->sq_avail == 0) || (tx_ops_used_ == tx_ops_.size())) {
        return UCS_ERR_NO_RESOURCE; /* sends in flight will tell */
    }
    /* Zero length: no address or rkey is checked (IB spec 9.4.4; rxe
     * check_rkey), only that the peer's QP answers. */
    struct ibv_send_wr wr = {};
    wr.opcode             = IBV_WR_RDMA_WRITE;
    wr.num_sge            = 0;
    TxOp op;
    op.type = TxOp::Type::kProbe;
    return post_send(ep, &wr, op);
}

ucs_status_t RcIface::ep_check(RcEp *ep, unsigned flags, uct_completion_t *comp) {
    if ((flags != 0) || (comp != nullptr)) {
        return UCS_ERR_INVALID_PARAM; /* uct.h: reserved, reported through the error handler */
    }
    if (ep->failed || !ep->connected || (ep->outstanding > 0)) {
        return UCS_OK; /* reported already, nothing to check yet, or in flight tells */
    }
    const ucs_status_t status = post_probe(ep);
    return (status == UCS_ERR_NO_RESOURCE) ? UCS_OK : status;
}

void RcIface::receive_fin(uint32_t op) {
    const uint32_t index = op & kRndvIndexMask;
    if (index >= rndv_sends_.size()) {
        ++counters_.dropped;
        return;
    }
    RndvSend &s = rndv_sends_[index];
    if (!(s.active || s.retired) || (rndv_id(index, s.gen) != op)) {
        return; /* a second acknowledgement of a cancel */
    }
    uct_completion_t *comp = s.active ? s.comp : nullptr;
    if (s.ep != nullptr) {
        s.ep->probe_due_ns = 0; /* heard from: the keepalive starts over */
    }
    release_rndv_send(index);
    complete(comp, UCS_OK);
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
    case TxOp::Type::kRndvRead: {
        RndvRecv &r = rndv_recvs_[op.rndv];
        if (status != UCS_OK) {
            r.status = status;
        }
        if (--r.reads == 0) {
            finish_rndv_recv(op.rndv);
        }
        break;
    }
    default:
        break;
    }
    if ((ep != nullptr) && (ep->super.iface != nullptr)) {
        error_qp_when_idle(ep);
    }
    if ((ep != nullptr) && (ep->super.iface == nullptr) && (ep->outstanding == 0)) {
        /* destroyed while sends were in flight: its last one is back */
        ibv_destroy_qp(ep->qp);
        eps_.erase(std::remove(eps_.begin(), eps_.end(), ep), eps_.end());
        delete ep;
    }
}

void RcIface::error_qp_when_idle(RcEp *ep) {
    if (ep->failed && (ep->outstanding == 0) && !ep->qp_in_error) {
        ep->qp_in_error         = true;
        struct ibv_qp_attr attr = {};
        attr.qp_state           = IBV_QPS_ERR;
        ibv_modify_qp(ep->qp, &attr, IBV_QP_STATE);
    }
}

void RcIface::fail_ep(RcEp *ep, ucs_status_t status) {
    ep->failed = true;
    error_qp_when_idle(ep);
    /* Rendezvous sends on it will never see their FIN. */
    for (uint32_t i = 0; i < rndv_sends_.size(); ++i) {
        RndvSend &s = rndv_sends_[i];
        if ((s.active || s.retired) && (s.ep == ep)) {
            uct_completion_t *comp = s.active ? s.comp : nullptr;
            release_rndv_send(i);
            complete(comp, status);
        }
    }
    if (!ep->notified && (ep->super.iface != nullptr)) {
        ep->notified = true;
        abi::handle_ep_error(&base, &ep->super, status);
    }
}

/* ---- pending and flush ------------------------------------------------------------------ */

ucs_status_t RcIface::pending_add(RcEp *ep, uct_pending_req_t *req) {
    if (req == nullptr) {
        return UCS_ERR_INVALID_PARAM;
    }
    if (ep->failed || (ep->pending.empty() && (tx_ready(ep, true) == UCS_OK))) {
        return UCS_ERR_BUSY;
    }
    return pending_eps_.add(ep, req);
}

void RcIface::pending_purge(RcEp *ep, uct_pending_purge_callback_t cb, void *arg) {
    ep->pending.purge(cb, arg);
}

unsigned RcIface::dispatch_pending() {
    return pending_eps_.dispatch(
        [this](RcEp *ep) {
            return !ep->failed && (ep->sq_avail > 0) && !free_tx_bufs_.empty() &&
                   (tx_ops_used_ < tx_ops_.size());
        },
        dispatching_);
}

bool RcIface::flush_done(const RcEp *ep) const {
    return (ep != nullptr) ? (ep->outstanding == 0) : (tx_ops_used_ == 0);
}

void RcIface::complete_flushes() {
    flush_waiters_.complete_done([this](const RcEp *ep) { return flush_done(ep); });
}

ucs_status_t RcIface::ep_flush(RcEp *ep, unsigned flags, uct_completion_t *comp) {
    if (flags & UCT_FLUSH_FLAG_CANCEL) {
        /* Everything posted completes with an error; the endpoint is only
         * good for destruction afterwards. */
        for (uint32_t i = 0; i < rndv_sends_.size(); ++i) {
            RndvSend &s = rndv_sends_[i];
            if ((s.active || s.retired) && (s.ep == ep)) {
                uct_completion_t *c = s.active ? s.comp : nullptr;
                release_rndv_send(i);
                complete(c, UCS_ERR_CANCELED);
            }
        }
        ep->failed   = true;
        ep->notified = true;
        struct ibv_qp_attr attr = {};
        attr.qp_state           = IBV_QPS_ERR;
        ibv_modify_qp(ep->qp, &attr, IBV_QP_STATE);
    } else if (!ep->pending.empty()) {
        return UCS_ERR_NO_RESOURCE;
    }
    if (flush_done(ep)) {
        return UCS_OK;
    }
    return flush_waiters_.wait(ep, comp);
}

}  // namespace ib
}  // namespace uct_tm
