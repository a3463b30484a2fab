/*
 * tm_rc endpoints: queue-pair setup and connection, destruction, liveness
 * (probes, failure), pending requests and flush.
 */
#include "rc_iface.h"

#include "common/alloc_status.h"

#include "ib_device.h"

#include <ucs/debug/log_def.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <new>

namespace uct_tm {
namespace ib {

/* ---- endpoint lifetime ------------------------------------------------------------------- */

ucs_status_t RcIface::ep_create(const uct_ep_params_t *params, uct_ep_h *ep_p) {
    return connect_->ep_create(params, ep_p);
}

ucs_status_t ConnectAtOnce::ep_create(const uct_ep_params_t *params, uct_ep_h *ep_p) {
    if (params->field_mask & (UCT_EP_PARAM_FIELD_IFACE_ADDR | UCT_EP_PARAM_FIELD_SOCKADDR)) {
        return UCS_ERR_UNSUPPORTED; /* CONNECT_TO_EP only */
    }
    RcEp *ep = nullptr;
    const ucs_status_t status = iface_.new_ep(&ep);
    if (status == UCS_OK) {
        *ep_p = &ep->super;
    }
    return status;
}

void ConnectAtOnce::query(uct_iface_attr_t *attr) const {
    attr->cap.flags |= UCT_IFACE_FLAG_CONNECT_TO_EP;
    attr->iface_addr_len = 0;
    attr->ep_addr_len    = sizeof(EpAddress);
}

ucs_status_t RcIface::new_ep(RcEp **ep_p, bool with_qp) {
    RcEp *ep = new (std::nothrow) RcEp;
    if (ep == nullptr) {
        return UCS_ERR_NO_MEMORY;
    }
    ep->super.iface = abi::to_uct(&base);
    ep->iface       = this;
    if (with_qp) {
        const ucs_status_t status = create_qp(ep);
        if (status != UCS_OK) {
            delete ep;
            return status;
        }
    }
    if (alloc_status([&] { eps_.push_back(ep); }) != UCS_OK) {
        destroy_qp(ep);
        delete ep;
        return UCS_ERR_NO_MEMORY;
    }
    *ep_p = ep;
    return UCS_OK;
}

ucs_status_t RcIface::create_qp(RcEp *ep) {
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
        ucs_error("%s: ibv_create_qp on %s (%zu queue pairs open): %s", opened_as().name,
                  md_->device.c_str(), qp_eps_.size(), strerror(errno));
        return UCS_ERR_IO_ERROR;
    }
    max_inline_  = qp_eps_.empty() ? qa.cap.max_inline_data : std::min(max_inline_, qa.cap.max_inline_data);
    ep->sq_avail = tx_queue_len_;
    struct ibv_qp_attr attr = {};
    attr.qp_state        = IBV_QPS_INIT;
    attr.pkey_index      = 0;
    attr.port_num        = port_;
    attr.qp_access_flags = IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_READ | IBV_ACCESS_REMOTE_WRITE;
    if ((ibv_modify_qp(ep->qp, &attr,
                       IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT | IBV_QP_ACCESS_FLAGS) != 0)) {
        ucs_error("%s: QP to INIT: %s", opened_as().name, strerror(errno));
        ibv_destroy_qp(ep->qp);
        ep->qp = nullptr;
        return UCS_ERR_IO_ERROR;
    }
    if (alloc_status([&] { qp_eps_[ep->qp->qp_num] = ep; }) != UCS_OK) {
        ibv_destroy_qp(ep->qp);
        ep->qp = nullptr;
        return UCS_ERR_NO_MEMORY;
    }
    counters_.max_qps = std::max<uint64_t>(counters_.max_qps, qp_eps_.size());
    return UCS_OK;
}

void RcIface::destroy_qp(RcEp *ep) {
    if (ep->qp == nullptr) {
        return;
    }
    qp_eps_.erase(ep->qp->qp_num);
    ibv_destroy_qp(ep->qp);
    ep->qp            = nullptr;
    ep->connected     = false;
    ep->qp_in_error   = false;
    ep->remote_qp_num = 0;
}

void RcIface::ep_destroy(RcEp *ep) {
    connect_->ep_destroying(ep);
    pending_purge(ep, nullptr, nullptr);
    pending_eps_.remove(ep);
    flush_waiters_.forget(ep);
    /* Our rendezvous sends on it never get their FIN: gone without a callback. */
    rndv_.forget_ep(ep);
    /* Send completions still due name this endpoint: they complete silently,
     * from an errored QP, before the endpoint and its QP go. */
    for (TxOp &op : tx_ops_) {
        if ((op.type != TxOp::Type::kFree) && (op.ep == ep)) {
            op.comp = nullptr;
        }
    }
    ep->notified = true;
    ep->failed   = true;
    if (ep->outstanding == 0) {
        free_ep(ep);
        return;
    }
    /* outstanding sends: it has a QP */
    struct ibv_qp_attr attr = {};
    attr.qp_state           = IBV_QPS_ERR;
    ibv_modify_qp(ep->qp, &attr, IBV_QP_STATE);
    ep->super.iface = nullptr; /* reaped by handle_tx() when its last completion arrives */
}

void RcIface::free_ep(RcEp *ep) {
    connect_->ep_freed(ep);
    destroy_qp(ep);
    eps_.erase(std::remove(eps_.begin(), eps_.end(), ep), eps_.end());
    delete ep;
}

ucs_status_t RcIface::ep_get_address(RcEp *ep, uct_ep_addr_t *addr) const {
    return connect_->ep_get_address(ep, addr);
}

ucs_status_t ConnectAtOnce::ep_get_address(RcEp *ep, uct_ep_addr_t *addr) const {
    if (ep->qp == nullptr) {
        return UCS_ERR_UNSUPPORTED;
    }
    const EpAddress a = {ep->qp->qp_num, static_cast<uint32_t>(iface_.seg_size_)};
    memcpy(addr, &a, sizeof(a));
    return UCS_OK;
}

ucs_status_t RcIface::ep_connect_to_ep(RcEp *ep, const uct_device_addr_t *dev_addr,
                                       const uct_ep_addr_t *ep_addr) {
    return connect_->ep_connect_to_ep(ep, dev_addr, ep_addr);
}

ucs_status_t ConnectAtOnce::ep_connect_to_ep(RcEp *ep, const uct_device_addr_t *dev_addr,
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
    if (!iface_.is_reachable(dev_addr, nullptr)) {
        return UCS_ERR_UNREACHABLE;
    }
    if (rep.seg_size < kMinSegSize) {
        ucs_error("tm_rc: endpoint address of QP 0x%x receives %u-byte messages, below the "
                  "least SEG_SIZE (%zu): malformed", rep.qp_num, rep.seg_size, kMinSegSize);
        return UCS_ERR_INVALID_PARAM;
    }
    return iface_.connect_qp(ep, remote, rep);
}

ucs_status_t RcIface::connect_qp(RcEp *ep, const DeviceAddress &remote, const EpAddress &rep) {
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

bool RcIface::ep_is_connected(const RcEp *ep, const uct_device_addr_t *dev_addr,
                              const uct_iface_addr_t *iface_addr,
                              const uct_ep_addr_t *ep_addr) const {
    return connect_->ep_is_connected(ep, dev_addr, iface_addr, ep_addr);
}

bool ConnectAtOnce::ep_is_connected(const RcEp *ep, const uct_device_addr_t       *dev_addr,
                                    const uct_iface_addr_t *, const uct_ep_addr_t *ep_addr) const {
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

/* ---- liveness and failure ----------------------------------------------------------------- */

ucs_status_t RcIface::post_probe(RcEp *ep) {
    /* A header-only SEND the peer drops: its QP must acknowledge it, or the
     * send fails when the retries run out. Not a zero-length RDMA WRITE (no
     * receive consumed): Soft-RoCE in Linux 6.1 never completes one, and
     * every later send on the QP then waits behind it. NO_RESOURCE: sends
     * in flight or queued will tell. */
    const ucs_status_t status = send_message(ep, probe_header(), 0, nullptr, 0, nullptr, 0, nullptr);
    if (status == UCS_OK) {
        ++counters_.keepalives;
    }
    return status;
}

ucs_status_t RcIface::ep_check(RcEp *ep, unsigned flags, uct_completion_t *comp) {
    if ((flags != 0) || (comp != nullptr)) {
        return UCS_ERR_INVALID_PARAM; /* uct.h: reserved, reported through the error handler */
    }
    if ((ep->qp == nullptr) && connect_->check_unconnected(ep)) {
        return UCS_OK; /* tm_dc: no connection to probe, the target iface is asked */
    }
    if (ep->failed || !ep->connected || (ep->outstanding > 0)) {
        return UCS_OK; /* reported already, connecting (times out), or in flight tells */
    }
    const ucs_status_t status = post_probe(ep);
    return (status == UCS_ERR_NO_RESOURCE) ? UCS_OK : status;
}

void RcIface::error_qp_when_idle(RcEp *ep) {
    if (ep->failed && (ep->outstanding == 0) && !ep->qp_in_error && (ep->qp != nullptr)) {
        ep->qp_in_error         = true;
        struct ibv_qp_attr attr = {};
        attr.qp_state           = IBV_QPS_ERR;
        ibv_modify_qp(ep->qp, &attr, IBV_QP_STATE);
    }
}

void RcIface::fail_ep(RcEp *ep, ucs_status_t status) {
    ep->failed = true;
    connect_->ep_failed(ep); /* tm_dc: out of the pool, or a passive one reaped */
    error_qp_when_idle(ep);
    rndv_.fail_ep(ep, status); /* its rendezvous sends will never see their FIN */
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
            return !ep->failed && ep->connected && (ep->sq_avail > 0) && !free_tx_bufs_.empty() &&
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
        rndv_.cancel_ep(ep);
        ep->failed   = true;
        ep->notified = true;
        if (ep->qp != nullptr) {
            struct ibv_qp_attr attr = {};
            attr.qp_state           = IBV_QPS_ERR;
            ibv_modify_qp(ep->qp, &attr, IBV_QP_STATE);
        }
    } else if (!ep->pending.empty() && !dispatching_) {
        /* From the queue's dispatch, those behind are later operations. */
        return UCS_ERR_NO_RESOURCE;
    }
    if (flush_done(ep)) {
        return UCS_OK;
    }
    return flush_waiters_.wait(ep, comp);
}
}  // namespace ib
}  // namespace uct_tm
