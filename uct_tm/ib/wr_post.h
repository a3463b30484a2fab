/*
 * Posting one send work request through the extended verbs API (ibv_wr_*)
 * instead of ibv_post_send.
 *
 * A DC initiator can only post this way: its destination (address handle,
 * DCT number, access key) is set per work request, between the opcode and
 * the data (mlx5dv_wr_set_dc_addr; post_dci() in dc_mlx5_verbs.h). The iface
 * builds its requests as struct ibv_send_wr, and this is the one place that
 * turns one into ibv_wr_* calls. RC queue pairs (tm_rc, tm_dc's on-demand
 * provider) keep ibv_post_send: Soft-RoCE's ibv_wr_* in rdma-core before 64
 * miscounts multi-entry and inline lengths (docs/tm_dc.md).
 */
#ifndef UCT_TM_IB_WR_POST_H_
#define UCT_TM_IB_WR_POST_H_

#include <infiniband/verbs.h>

#include <cerrno>
#include <cstddef>
#include <cstdint>

namespace uct_tm {
namespace ib {

/* The most scatter-gather entries one request carries (the iface's limit). */
inline constexpr int kMaxWrSge = 8;

/* The send operations a queue pair that posts through post_wr_ex() is
 * created with (ibv_qp_init_attr_ex::send_ops_flags; create_dci()). */
inline constexpr uint64_t kWrExSendOps = IBV_QP_EX_WITH_SEND | IBV_QP_EX_WITH_SEND_WITH_IMM |
                                         IBV_QP_EX_WITH_RDMA_WRITE | IBV_QP_EX_WITH_RDMA_READ;

/* No per-request destination: a connected queue pair. */
struct NoDestination {
    void operator()(struct ibv_qp_ex *) const {}
};

/* Posts `wr` alone (wr.next is ignored) on `qpx`; `set_destination(qpx)`
 * runs between the opcode and the data, where a DC initiator names its
 * target. 0, or an errno: EINVAL for an opcode or a scatter list this path
 * does not carry (nothing was started), else what ibv_wr_complete() said.
 * IBV_SEND_INLINE is not a flag here: the data is copied into the request by
 * ibv_wr_set_inline_data_list(). */
template <typename SetDestination = NoDestination>
int post_wr_ex(struct ibv_qp_ex *qpx, const struct ibv_send_wr &wr,
               SetDestination &&set_destination = SetDestination{}) {
    if ((wr.num_sge < 0) || (wr.num_sge > kMaxWrSge) || ((wr.num_sge > 0) && (wr.sg_list == nullptr))) {
        return EINVAL;
    }
    switch (wr.opcode) {
    case IBV_WR_SEND:
    case IBV_WR_SEND_WITH_IMM:
    case IBV_WR_RDMA_WRITE:
    case IBV_WR_RDMA_READ:
        break;
    default:
        return EINVAL;
    }
    const bool inline_data = (wr.send_flags & IBV_SEND_INLINE) != 0;
    if (inline_data && (wr.opcode == IBV_WR_RDMA_READ)) {
        return EINVAL;
    }
    ibv_wr_start(qpx);
    qpx->wr_id    = wr.wr_id;
    qpx->wr_flags = wr.send_flags & ~static_cast<unsigned>(IBV_SEND_INLINE);
    switch (wr.opcode) {
    case IBV_WR_SEND:
        ibv_wr_send(qpx);
        break;
    case IBV_WR_SEND_WITH_IMM:
        ibv_wr_send_imm(qpx, wr.imm_data);
        break;
    case IBV_WR_RDMA_WRITE:
        ibv_wr_rdma_write(qpx, wr.wr.rdma.rkey, wr.wr.rdma.remote_addr);
        break;
    default: /* IBV_WR_RDMA_READ, checked above */
        ibv_wr_rdma_read(qpx, wr.wr.rdma.rkey, wr.wr.rdma.remote_addr);
        break;
    }
    set_destination(qpx);
    if (inline_data) {
        struct ibv_data_buf bufs[kMaxWrSge];
        for (int i = 0; i < wr.num_sge; ++i) {
            bufs[i].addr   = reinterpret_cast<void *>(static_cast<uintptr_t>(wr.sg_list[i].addr));
            bufs[i].length = wr.sg_list[i].length;
        }
        ibv_wr_set_inline_data_list(qpx, static_cast<size_t>(wr.num_sge), bufs);
    } else {
        ibv_wr_set_sge_list(qpx, static_cast<size_t>(wr.num_sge), wr.sg_list);
    }
    return ibv_wr_complete(qpx);
}

}  // namespace ib
}  // namespace uct_tm

#endif
