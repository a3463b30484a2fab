#include "rc_transport.h"

#include "ib_device.h"
#include "ib_md.h"
#include "rc_config.h"
#include "rc_iface.h"

#include <cstdio>

namespace uct_tm {
namespace ib {
namespace {

/* One device per active port of the MD's verbs device: "tm_<dev>:<port>"
 * (UCX's own rc transports call it "<dev>:<port>"; UCP merges resources by
 * device name, so ours differ). */
unsigned rc_devices(uct_md_h md, abi::DeviceDesc *out) {
    const IbMd *ibmd = ib_md(md);
    if (ibmd == nullptr) {
        return 0;
    }
    const DeviceInfo *info = find_device(ibmd->device);
    unsigned          n    = 0;
    for (size_t i = 0; (info != nullptr) && (i < info->ports.size()) && (n < abi::kMaxDevices); ++i) {
        abi::DeviceDesc &d = out[n++];
        snprintf(d.name, sizeof(d.name), "%s%s:%u", kMdPrefix, info->name.c_str(),
                 info->ports[i].num);
        d.type       = UCT_DEVICE_TYPE_NET;
        d.sys_device = UCS_SYS_DEVICE_ID_UNKNOWN;
    }
    return n;
}

/* The one place where the connection mode is decided: tm_rc's endpoints are
 * connected at once, endpoint to endpoint; tm_dc is the same iface with its
 * endpoints connected on demand by iface address (RC queue pairs, not DC). */
constexpr abi::TransportDesc transport_desc =
    RcIface::describe_as<&RcIface::transport, ConnectAtOnce>("tm_rc", rc_devices,
                                                             "TM RC verbs transport", "TM_RC_",
                                                             rc_config_table);

constexpr abi::TransportDesc dc_transport_desc =
    RcIface::describe_as<&RcIface::dc_transport, ConnectOnDemand>(
        "tm_dc", rc_devices, "TM DC verbs transport (on-demand RC)", "TM_DC_", dc_config_table);

}  // namespace

const abi::TransportDesc &RcIface::transport() { return transport_desc; }
const abi::TransportDesc &RcIface::dc_transport() { return dc_transport_desc; }

ucs_status_t register_rc_transport() {
    const ucs_status_t status = abi::register_transport(md_component(), transport_desc);
    return (status == UCS_OK) ? abi::register_transport(md_component(), dc_transport_desc) : status;
}

}  // namespace ib
}  // namespace uct_tm
