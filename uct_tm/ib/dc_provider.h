/*
 * tm_dc's provider seam: which implementation of dynamically connected
 * endpoints an iface runs on its device.
 *
 *   mlx5      DC proper, for mlx5 devices that support DC: probed only
 *             (a trial DCT); there is no DC data path, so it is never
 *             chosen (docs/tm_dc.md).
 *   ondemand  RC queue pairs connected by a UD handshake (rc_on_demand.cc),
 *             on every device.
 *
 * UCX_TM_DC_PROVIDER=auto|mlx5|ondemand. The probe (Mlx5DcSupport) tells per
 * device whether mlx5 DC is usable, and why not; choose_dc_provider() turns
 * the setting and the probe into the provider or a refusal. It is pure so
 * that every combination is tested without the hardware.
 */
#ifndef UCT_TM_IB_DC_PROVIDER_H_
#define UCT_TM_IB_DC_PROVIDER_H_

#include <infiniband/verbs.h>
#include <ucs/type/status.h>

#include <cstdint>
#include <string>

namespace uct_tm {
namespace ib {

/* UCX_TM_DC_PROVIDER, in the order of dc_provider_names. */
enum class DcProviderSetting : unsigned { kAuto = 0, kMlx5 = 1, kOnDemand = 2 };
extern const char *dc_provider_names[]; /* for UCS_CONFIG_TYPE_ENUM */

/* The provider an iface runs. Its value is the provider byte of a tm_dc
 * iface address (IfaceAddress::provider): on-demand is 0, what every
 * on-demand iface has always sent there. */
enum class DcProvider : uint8_t { kOnDemand = 0, kMlx5 = 1 };

inline const char *dc_provider_name(DcProvider p) {
    return (p == DcProvider::kMlx5) ? "mlx5" : "ondemand";
}

/* Whether mlx5 DC can run on a device; if not, why (for the logs). */
struct Mlx5DcSupport {
    bool        usable = false;
    std::string reason; /* empty when usable */
};

/* Where the probe needs a port: DCT creation goes to RTR on it. */
struct DcProbePort {
    uint8_t      num       = 1;
    bool         roce      = false;
    int          gid_index = 0;
    enum ibv_mtu mtu       = IBV_MTU_1024;
};

/* Probes device `ctx` (named `dev_name`): an mlx5 device (mlx5dv_is_supported)
 * whose mlx5dv_query_device answers, and that creates a DCT and brings it to
 * RTR on `port` -- mlx5dv reports no DC capability bit, so creating one is
 * the test, as UCX's own check does. `pd`, `cq` and `srq` are the iface's;
 * the trial DCT is destroyed before this returns. */
Mlx5DcSupport probe_mlx5_dc(struct ibv_context *ctx, const std::string &dev_name,
                            struct ibv_pd *pd, struct ibv_cq *cq, struct ibv_srq *srq,
                            const DcProbePort &port);

/* The outcome of selection: the provider, or a status (not OK) with the
 * error to log; `note` says what was chosen and why (stats, diag). */
struct DcChoice {
    DcProvider   provider = DcProvider::kOnDemand;
    ucs_status_t status   = UCS_OK;
    std::string  note;
};

inline DcChoice choose_dc_provider(DcProviderSetting setting, const Mlx5DcSupport &mlx5,
                                   const std::string &dev_name) {
    DcChoice c;
    switch (setting) {
    case DcProviderSetting::kOnDemand:
        c.note = "on-demand RC (UCX_TM_DC_PROVIDER=ondemand)";
        return c;
    case DcProviderSetting::kMlx5:
        if (mlx5.usable) {
            c.provider = DcProvider::kMlx5;
            c.note     = "mlx5 DC (UCX_TM_DC_PROVIDER=mlx5)";
        } else {
            c.status = UCS_ERR_UNSUPPORTED;
            c.note   = "tm_dc: UCX_TM_DC_PROVIDER=mlx5, but mlx5 DC is not usable on " + dev_name +
                       ": " + mlx5.reason;
        }
        return c;
    case DcProviderSetting::kAuto:
    default:
        if (mlx5.usable) {
            c.provider = DcProvider::kMlx5;
            c.note     = "mlx5 DC (auto)";
        } else {
            c.note = "on-demand RC (auto; mlx5 DC not selected on " + dev_name + ": " +
                     mlx5.reason + ")";
        }
        return c;
    }
}

}  // namespace ib
}  // namespace uct_tm

#endif
