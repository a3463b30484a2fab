#include "dc_mlx5_verbs.h"

#ifdef UCT_TM_HAVE_MLX5DV

#include "ud_channel.h"

namespace uct_tm {
namespace ib {

DcQpHandle create_dct(struct ibv_context *ctx, struct ibv_pd *pd, struct ibv_cq *cq,
                      struct ibv_srq *srq, uint64_t dc_key) {
    struct ibv_qp_init_attr_ex attr = {};
    attr.qp_type   = IBV_QPT_DRIVER;
    attr.send_cq   = cq;
    attr.recv_cq   = cq;
    attr.srq       = srq;
    attr.pd        = pd;
    attr.comp_mask = IBV_QP_INIT_ATTR_PD;
    struct mlx5dv_qp_init_attr dv = {};
    dv.comp_mask                   = MLX5DV_QP_INIT_ATTR_MASK_DC;
    dv.dc_init_attr.dc_type        = MLX5DV_DCTYPE_DCT;
    dv.dc_init_attr.dct_access_key = dc_key;
    return DcQpHandle(mlx5dv_create_qp(ctx, &attr, &dv));
}

namespace {

/* RESET -> INIT, the step DCTs and DCIs share; only a DCT is a target of
 * remote access (a DCI's access flags mean nothing). */
int dc_to_init(struct ibv_qp *qp, const DcProbePort &port, bool target) {
    struct ibv_qp_attr init = {};
    init.qp_state   = IBV_QPS_INIT;
    init.pkey_index = 0;
    init.port_num   = port.num;
    int mask        = IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT;
    if (target) {
        init.qp_access_flags = IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ;
        mask |= IBV_QP_ACCESS_FLAGS;
    }
    return ibv_modify_qp(qp, &init, mask);
}

/* INIT -> RTR: the path MTU and the port; the peer comes per send (DCI)
 * or per packet (DCT). */
int dc_to_rtr(struct ibv_qp *qp, const DcProbePort &port, bool target) {
    struct ibv_qp_attr rtr = {};
    rtr.qp_state         = IBV_QPS_RTR;
    rtr.path_mtu         = port.mtu;
    rtr.ah_attr.port_num = port.num;
    if (port.roce) {
        rtr.ah_attr.is_global      = 1;
        rtr.ah_attr.grh.sgid_index = static_cast<uint8_t>(port.gid_index);
        rtr.ah_attr.grh.hop_limit  = 1;
    }
    int mask = IBV_QP_STATE | IBV_QP_AV | IBV_QP_PATH_MTU;
    if (target) {
        rtr.min_rnr_timer = 12;
        mask |= IBV_QP_MIN_RNR_TIMER;
    }
    return ibv_modify_qp(qp, &rtr, mask);
}

}  // namespace

int dct_to_rtr(struct ibv_qp *dct, const DcProbePort &port) {
    const int rc = dc_to_init(dct, port, true);
    return (rc != 0) ? rc : dc_to_rtr(dct, port, true);
}

DcQpHandle create_dci(struct ibv_context *ctx, struct ibv_pd *pd, struct ibv_cq *send_cq,
                      struct ibv_cq *recv_cq, const DciCaps &caps) {
    struct ibv_qp_init_attr_ex attr = {};
    attr.qp_type             = IBV_QPT_DRIVER;
    attr.send_cq             = send_cq;
    attr.recv_cq             = recv_cq; /* unused by a DCI, but required */
    attr.pd                  = pd;
    attr.cap.max_send_wr     = caps.depth;
    attr.cap.max_send_sge    = caps.max_sge;
    attr.cap.max_inline_data = caps.max_inline;
    attr.comp_mask           = IBV_QP_INIT_ATTR_PD | IBV_QP_INIT_ATTR_SEND_OPS_FLAGS;
    attr.send_ops_flags      = kWrExSendOps; /* what post_dci() posts */
    struct mlx5dv_qp_init_attr dv = {};
    dv.comp_mask                  = MLX5DV_QP_INIT_ATTR_MASK_DC;
    dv.dc_init_attr.dc_type       = MLX5DV_DCTYPE_DCI;
    return DcQpHandle(mlx5dv_create_qp(ctx, &attr, &dv));
}

int dci_to_rts(struct ibv_qp *dci, const DcProbePort &port, const DciCaps &caps) {
    int rc = dc_to_init(dci, port, false);
    if (rc == 0) {
        rc = dc_to_rtr(dci, port, false);
    }
    if (rc != 0) {
        return rc;
    }
    struct ibv_qp_attr rts = {};
    rts.qp_state      = IBV_QPS_RTS;
    rts.timeout       = caps.timeout;
    rts.retry_cnt     = caps.retry_count;
    rts.rnr_retry     = caps.rnr_retry;
    rts.sq_psn        = 0;
    rts.max_rd_atomic = caps.max_rd_atomic;
    return ibv_modify_qp(dci, &rts,
                         IBV_QP_STATE | IBV_QP_TIMEOUT | IBV_QP_RETRY_CNT | IBV_QP_RNR_RETRY |
                             IBV_QP_SQ_PSN | IBV_QP_MAX_QP_RD_ATOMIC);
}

int dci_reset(struct ibv_qp *dci) {
    struct ibv_qp_attr reset = {};
    reset.qp_state           = IBV_QPS_RESET;
    return ibv_modify_qp(dci, &reset, IBV_QP_STATE);
}

DcAhHandle create_dc_ah(struct ibv_pd *pd, const DeviceAddress &peer, const DcProbePort &port) {
    struct ibv_ah_attr attr = peer_ah_attr(peer, port.num, port.gid_index);
    return DcAhHandle(ibv_create_ah(pd, &attr));
}

}  // namespace ib
}  // namespace uct_tm

#endif  // UCT_TM_HAVE_MLX5DV
