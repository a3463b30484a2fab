#include "sm_transport.h"

#include "sm_config.h"
#include "sm_iface.h"
#include "sm_md.h"

#include <cstdio>
#include <cstring>

namespace uct_tm {
namespace sm {
namespace {

/* One device, "tm_shm", on the shared-memory MD "tm". */
unsigned sm_devices(uct_md_h md, abi::DeviceDesc *out) {
    if (!is_shm_md(md)) {
        return 0;
    }
    abi::DeviceDesc &d = out[0];
    snprintf(d.name, sizeof(d.name), "tm_shm");
    d.type = UCT_DEVICE_TYPE_SHM;
    /* Memory has no PCI location UCX 1.13 could name; the FIFO's NUMA
     * placement is done with hwloc when the iface opens. */
    d.sys_device = UCS_SYS_DEVICE_ID_UNKNOWN;
    return 1;
}

constexpr abi::TransportDesc transport_desc = SmIface::describe(
    "tm_sm", sm_devices, "TM shared memory transport", "TM_SM_", sm_config_table);

}  // namespace

const abi::TransportDesc &SmIface::transport() { return transport_desc; }

bool SmIface::ep_is_connected(const SmEp *ep, const uct_device_addr_t *dev_addr,
                              const uct_iface_addr_t *iface_addr, const uct_ep_addr_t *) const {
    if ((iface_addr == nullptr) || !is_reachable(dev_addr, iface_addr)) {
        return false;
    }
    IfaceAddress remote;
    memcpy(&remote, iface_addr, sizeof(remote));
    return same_iface(ep->peer->address(), remote);
}

ucs_status_t register_sm_transport() { return abi::register_transport(md_component(), transport_desc); }

}  // namespace sm
}  // namespace uct_tm
