/*
 * tm_dc's mlx5 DC provider, the verbs objects: the DC target (DCT) an iface
 * receives on, the DC initiators (DCIs) it sends from, and the address
 * handle a send names its peer's port with -- each owned by a handle that
 * destroys it. Only with rdma-core's mlx5dv (UCT_TM_HAVE_MLX5DV).
 *
 * Built and used by the probe (the DCT); the DCI and address-handle parts are
 * compiled but have never run on a DC device (docs/tm_dc.md).
 */
#ifndef UCT_TM_IB_DC_MLX5_VERBS_H_
#define UCT_TM_IB_DC_MLX5_VERBS_H_

#ifdef UCT_TM_HAVE_MLX5DV

#include "dc_provider.h"
#include "rc_wire.h"
#include "wr_post.h"

#include <infiniband/mlx5dv.h>
#include <infiniband/verbs.h>

#include <cstdint>
#include <memory>

namespace uct_tm {
namespace ib {

struct DcQpDestroy {
    void operator()(struct ibv_qp *qp) const { ibv_destroy_qp(qp); }
};
using DcQpHandle = std::unique_ptr<struct ibv_qp, DcQpDestroy>;

struct DcAhDestroy {
    void operator()(struct ibv_ah *ah) const { ibv_destroy_ah(ah); }
};
using DcAhHandle = std::unique_ptr<struct ibv_ah, DcAhDestroy>;

/* A DCT on `srq` (the iface's, the TM SRQ when tag matching is in
 * hardware) answering DCIs that present `dc_key`; null with errno set. */
DcQpHandle create_dct(struct ibv_context *ctx, struct ibv_pd *pd, struct ibv_cq *cq,
                      struct ibv_srq *srq, uint64_t dc_key);

/* INIT then RTR, where a DCT starts to answer; 0 or an errno. */
int dct_to_rtr(struct ibv_qp *dct, const DcProbePort &port);

/* Work-request limits and retries of a DCI; the iface fills the retries
 * from its configuration, as rc_ep.cc does for RC queue pairs. */
struct DciCaps {
    uint32_t depth         = 128; /* send queue entries: DciOps's ring is as long */
    uint32_t max_sge       = 1;
    uint32_t max_inline    = 0;
    uint8_t  timeout       = 14;
    uint8_t  retry_count   = 7;
    uint8_t  rnr_retry     = 7;
    uint8_t  max_rd_atomic = 1;
};

/* A DCI posting with ibv_wr_* (sends with and without immediate data,
 * RDMA write and read) and mlx5dv_wr_set_dc_addr; null with errno set. */
DcQpHandle create_dci(struct ibv_context *ctx, struct ibv_pd *pd, struct ibv_cq *send_cq,
                      struct ibv_cq *recv_cq, const DciCaps &caps);

/* From RESET (a new DCI, or one reset after an error) through INIT and RTR
 * to RTS; 0 or an errno. */
int dci_to_rts(struct ibv_qp *dci, const DcProbePort &port, const DciCaps &caps);

/* An errored DCI back to RESET, the first step of its recovery; 0 or an
 * errno. Its outstanding work requests are gone after this: the caller
 * settles them first (DciOps::fail_outstanding). */
int dci_reset(struct ibv_qp *dci);

/* Where one DCI work request goes: the peer's port (address handle), DCT
 * and access key, from an address that passed check_mlx5_peer_address. */
struct DcDestination {
    struct ibv_ah *ah      = nullptr;
    uint32_t       dct_num = 0;
    uint64_t       dc_key  = 0;
};

/* Posts `wr` on a DCI (`qpx` and `dv` are its two views, taken once when it
 * is made: ibv_qp_to_qp_ex, mlx5dv_qp_ex_from_ibv_qp_ex) to `to`: the
 * posting path the on-demand provider runs on every device (wr_post.h), with
 * mlx5dv_wr_set_dc_addr as its destination step; 0 or an errno. */
inline int post_dci(struct ibv_qp_ex *qpx, struct mlx5dv_qp_ex *dv, const struct ibv_send_wr &wr,
                    const DcDestination &to) {
    return post_wr_ex(qpx, wr, [&](struct ibv_qp_ex *) {
        mlx5dv_wr_set_dc_addr(dv, to.ah, to.dct_num, to.dc_key);
    });
}

/* The address handle of a peer's port, from a device address that passed
 * check_mlx5_peer_address; null with errno set. */
DcAhHandle create_dc_ah(struct ibv_pd *pd, const DeviceAddress &peer, const DcProbePort &port);

}  // namespace ib
}  // namespace uct_tm

#endif  // UCT_TM_HAVE_MLX5DV
#endif
