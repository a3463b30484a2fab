#include "dc_provider.h"

#include <cerrno>
#include <cstring>
#include <memory>

#ifdef UCT_TM_HAVE_MLX5DV
#include <infiniband/mlx5dv.h>
#endif

namespace uct_tm {
namespace ib {

const char *dc_provider_names[] = {"auto", "mlx5", "ondemand", nullptr};

namespace {

Mlx5DcSupport unusable(std::string reason) { return Mlx5DcSupport{false, std::move(reason)}; }

#ifdef UCT_TM_HAVE_MLX5DV
/* Any key: the trial DCT never receives. */
constexpr uint64_t kTrialDcKey = 0x746d5f6463ull;

struct DcQpDestroy {
    void operator()(struct ibv_qp *qp) const { ibv_destroy_qp(qp); }
};
using DcQpHandle = std::unique_ptr<struct ibv_qp, DcQpDestroy>;

/* The trial DCT on `srq` (the iface's, the TM SRQ when tag matching is in
 * hardware); null with errno set. */
DcQpHandle create_dct(struct ibv_context *ctx, struct ibv_pd *pd, struct ibv_cq *cq,
                      struct ibv_srq *srq) {
    struct ibv_qp_init_attr_ex attr = {};
    attr.qp_type                    = IBV_QPT_DRIVER;
    attr.send_cq                    = cq;
    attr.recv_cq                    = cq;
    attr.srq                        = srq;
    attr.pd                         = pd;
    attr.comp_mask                  = IBV_QP_INIT_ATTR_PD;
    struct mlx5dv_qp_init_attr dv   = {};
    dv.comp_mask                    = MLX5DV_QP_INIT_ATTR_MASK_DC;
    dv.dc_init_attr.dc_type         = MLX5DV_DCTYPE_DCT;
    dv.dc_init_attr.dct_access_key  = kTrialDcKey;
    return DcQpHandle(mlx5dv_create_qp(ctx, &attr, &dv));
}

/* RESET -> INIT -> RTR on `port`, where a DCT starts to answer; 0 or an
 * errno. */
int dct_to_rtr(struct ibv_qp *dct, const DcProbePort &port) {
    struct ibv_qp_attr init = {};
    init.qp_state           = IBV_QPS_INIT;
    init.pkey_index         = 0;
    init.port_num           = port.num;
    init.qp_access_flags    = IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ;
    const int rc            = ibv_modify_qp(dct, &init,
                                            IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT |
                                                IBV_QP_ACCESS_FLAGS);
    if (rc != 0) {
        return rc;
    }
    struct ibv_qp_attr rtr = {};
    rtr.qp_state           = IBV_QPS_RTR;
    rtr.path_mtu           = port.mtu;
    rtr.ah_attr.port_num   = port.num;
    rtr.min_rnr_timer      = 12;
    if (port.roce) {
        rtr.ah_attr.is_global      = 1;
        rtr.ah_attr.grh.sgid_index = static_cast<uint8_t>(port.gid_index);
        rtr.ah_attr.grh.hop_limit  = 1;
    }
    return ibv_modify_qp(dct, &rtr,
                         IBV_QP_STATE | IBV_QP_AV | IBV_QP_PATH_MTU | IBV_QP_MIN_RNR_TIMER);
}
#endif

}  // namespace

Mlx5DcSupport probe_mlx5_dc(struct ibv_context *ctx, const std::string &dev_name,
                            struct ibv_pd *pd, struct ibv_cq *cq, struct ibv_srq *srq,
                            const DcProbePort &port) {
#ifdef UCT_TM_HAVE_MLX5DV
    if (!mlx5dv_is_supported(ctx->device)) {
        return unusable(dev_name + " is not an mlx5 device");
    }
    struct mlx5dv_context dv = {};
    if (mlx5dv_query_device(ctx, &dv) != 0) {
        return unusable(dev_name + ": mlx5dv_query_device failed: " + strerror(errno));
    }
    const DcQpHandle dct = create_dct(ctx, pd, cq, srq);
    if (!dct) {
        return unusable(dev_name + " reports no DC support (creating a DCT: " + strerror(errno) + ")");
    }
    const int rc = dct_to_rtr(dct.get(), port);
    if (rc != 0) {
        return unusable(dev_name + " reports no DC support (a DCT does not reach RTR: " +
                        strerror(rc) + ")");
    }
    /* The device has DC. What is missing is ours: the iface neither posts
     * on DCIs nor addresses replies to a DCT's senders (docs/tm_dc.md). */
    return unusable(dev_name +
                    " supports DC, but this build's mlx5 provider has no data path yet "
                    "(DCIs not wired to the send path, no reply addressing)");
#else
    (void)ctx;
    (void)pd;
    (void)cq;
    (void)srq;
    (void)port;
    return unusable("uct-tm was built without mlx5dv (rdma-core's libmlx5), so without the mlx5 "
                    "DC provider (" + dev_name + " not probed)");
#endif
}

}  // namespace ib
}  // namespace uct_tm
