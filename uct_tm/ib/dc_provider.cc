#include "dc_provider.h"

#include <cerrno>
#include <cstring>
#include <memory>

#ifdef UCT_TM_HAVE_MLX5DV
#include "dc_mlx5_verbs.h"
#endif

namespace uct_tm {
namespace ib {

const char *dc_provider_names[] = {"auto", "mlx5", "ondemand", nullptr};

namespace {

Mlx5DcSupport unusable(std::string reason) { return Mlx5DcSupport{false, std::move(reason)}; }

#ifdef UCT_TM_HAVE_MLX5DV
/* Any key: the trial DCT never receives. */
constexpr uint64_t kTrialDcKey = 0x746d5f6463ull;
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
    const DcQpHandle dct = create_dct(ctx, pd, cq, srq, kTrialDcKey);
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
