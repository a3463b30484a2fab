#include "sm_ops.h"

#include "sm_config.h"
#include "sm_iface.h"

#include "base/tm_md.h"
#include "base/topology.h"

#include <cstdio>
#include <cstring>

namespace uct_tm {
namespace sm {
namespace {

SmIface *iface_of(uct_iface_h iface) { return SmIface::from(iface); }
SmEp    *ep_of(uct_ep_h ep) { return SmIface::ep_of(ep); }
SmIface *owner(uct_ep_h ep) { return ep_of(ep)->iface; }

extern "C" {

/* ---- iface ---- */
static ucs_status_t sm_iface_query(uct_iface_h iface, uct_iface_attr_t *attr) {
    return iface_of(iface)->query(attr);
}
static ucs_status_t sm_iface_get_device_address(uct_iface_h iface, uct_device_addr_t *addr) {
    return iface_of(iface)->get_device_address(addr);
}
static ucs_status_t sm_iface_get_address(uct_iface_h iface, uct_iface_addr_t *addr) {
    return iface_of(iface)->get_address(addr);
}
static int sm_iface_is_reachable(const uct_iface_h iface, const uct_device_addr_t *dev_addr,
                                 const uct_iface_addr_t *iface_addr) {
    return iface_of(iface)->is_reachable(dev_addr, iface_addr);
}
static unsigned sm_iface_progress(uct_iface_h iface) { return iface_of(iface)->progress(); }
static ucs_status_t sm_iface_flush(uct_iface_h iface, unsigned flags, uct_completion_t *comp) {
    return iface_of(iface)->flush(flags, comp);
}
static ucs_status_t sm_iface_fence(uct_iface_h, unsigned) {
    return UCS_OK; /* one FIFO per destination: operations stay in order */
}
static void sm_iface_close(uct_iface_h iface) { delete iface_of(iface); }
static void sm_iface_progress_enable(uct_iface_h iface, unsigned flags) {
    abi::progress_enable(iface, flags);
}
static void sm_iface_progress_disable(uct_iface_h iface, unsigned flags) {
    abi::progress_disable(iface, flags);
}
static ucs_status_t sm_iface_tag_recv_zcopy(uct_iface_h iface, uct_tag_t tag, uct_tag_t mask,
                                            const uct_iov_t *iov, size_t iovcnt,
                                            uct_tag_context_t *ctx) {
    return iface_of(iface)->tag_recv_zcopy(tag, mask, iov, iovcnt, ctx);
}
static ucs_status_t sm_iface_tag_recv_cancel(uct_iface_h iface, uct_tag_context_t *ctx, int force) {
    return iface_of(iface)->tag_recv_cancel(ctx, force);
}
static ucs_status_t sm_iface_event_fd_get(uct_iface_h, int *) { return UCS_ERR_UNSUPPORTED; }
static ucs_status_t sm_iface_event_arm(uct_iface_h, unsigned) { return UCS_ERR_UNSUPPORTED; }

/* ---- endpoint lifetime ---- */
static ucs_status_t sm_ep_create(const uct_ep_params_t *params, uct_ep_h *ep_p) {
    if ((params == nullptr) || !(params->field_mask & UCT_EP_PARAM_FIELD_IFACE) ||
        (params->iface == nullptr)) {
        return UCS_ERR_INVALID_PARAM;
    }
    return iface_of(params->iface)->ep_create(params, ep_p);
}
static void sm_ep_destroy(uct_ep_h ep) { owner(ep)->ep_destroy(ep_of(ep)); }

/* ---- endpoint operations ---- */
static ucs_status_t sm_ep_am_short(uct_ep_h ep, uint8_t id, uint64_t header, const void *payload,
                                   unsigned length) {
    return owner(ep)->am_short(ep_of(ep), id, header, payload, length);
}
static ssize_t sm_ep_am_bcopy(uct_ep_h ep, uint8_t id, uct_pack_callback_t pack_cb, void *arg,
                              unsigned) {
    return owner(ep)->am_bcopy(ep_of(ep), id, pack_cb, arg);
}
static ucs_status_t sm_ep_am_zcopy(uct_ep_h ep, uint8_t id, const void *header,
                                   unsigned header_length, const uct_iov_t *iov, size_t iovcnt,
                                   unsigned, uct_completion_t *) {
    return owner(ep)->am_zcopy(ep_of(ep), id, header, header_length, iov, iovcnt);
}
static ucs_status_t sm_ep_tag_eager_short(uct_ep_h ep, uct_tag_t tag, const void *data,
                                          size_t length) {
    return owner(ep)->tag_eager_short(ep_of(ep), tag, data, length);
}
static ssize_t sm_ep_tag_eager_bcopy(uct_ep_h ep, uct_tag_t tag, uint64_t imm,
                                     uct_pack_callback_t pack_cb, void *arg, unsigned) {
    return owner(ep)->tag_eager_bcopy(ep_of(ep), tag, imm, pack_cb, arg);
}
static ucs_status_t sm_ep_tag_eager_zcopy(uct_ep_h ep, uct_tag_t tag, uint64_t imm,
                                          const uct_iov_t *iov, size_t iovcnt, unsigned,
                                          uct_completion_t *) {
    return owner(ep)->tag_eager_zcopy(ep_of(ep), tag, imm, iov, iovcnt);
}
static ucs_status_ptr_t sm_ep_tag_rndv_zcopy(uct_ep_h ep, uct_tag_t tag, const void *header,
                                             unsigned header_length, const uct_iov_t *iov,
                                             size_t iovcnt, unsigned, uct_completion_t *comp) {
    return owner(ep)->tag_rndv_zcopy(ep_of(ep), tag, header, header_length, iov, iovcnt, comp);
}
static ucs_status_t sm_ep_tag_rndv_cancel(uct_ep_h ep, void *op) {
    return owner(ep)->tag_rndv_cancel(ep_of(ep), op);
}
static ucs_status_t sm_ep_tag_rndv_request(uct_ep_h ep, uct_tag_t tag, const void *header,
                                           unsigned header_length, unsigned) {
    return owner(ep)->tag_rndv_request(ep_of(ep), tag, header, header_length);
}
static ucs_status_t sm_ep_get_zcopy(uct_ep_h ep, const uct_iov_t *iov, size_t iovcnt,
                                    uint64_t remote_addr, uct_rkey_t rkey, uct_completion_t *comp) {
    return owner(ep)->get_zcopy(ep_of(ep), iov, iovcnt, remote_addr, rkey, comp);
}
static ucs_status_t sm_ep_put_zcopy(uct_ep_h ep, const uct_iov_t *iov, size_t iovcnt,
                                    uint64_t remote_addr, uct_rkey_t rkey, uct_completion_t *) {
    return owner(ep)->put_zcopy(ep_of(ep), iov, iovcnt, remote_addr, rkey);
}
static ucs_status_t sm_ep_pending_add(uct_ep_h ep, uct_pending_req_t *req, unsigned) {
    return owner(ep)->pending_add(ep_of(ep), req);
}
static void sm_ep_pending_purge(uct_ep_h ep, uct_pending_purge_callback_t cb, void *arg) {
    owner(ep)->pending_purge(ep_of(ep), cb, arg);
}
static ucs_status_t sm_ep_flush(uct_ep_h ep, unsigned flags, uct_completion_t *comp) {
    return owner(ep)->ep_flush(ep_of(ep), flags, comp);
}
static ucs_status_t sm_ep_fence(uct_ep_h, unsigned) { return UCS_OK; }
static ucs_status_t sm_ep_check(uct_ep_h ep, unsigned, uct_completion_t *) {
    return owner(ep)->ep_check(ep_of(ep));
}

}  // extern "C"

uct_iface_ops_t make_ops() {
    uct_iface_ops_t ops{};
    ops.ep_put_zcopy              = sm_ep_put_zcopy;
    ops.ep_get_zcopy              = sm_ep_get_zcopy;
    ops.ep_am_short               = sm_ep_am_short;
    ops.ep_am_bcopy               = sm_ep_am_bcopy;
    ops.ep_am_zcopy               = sm_ep_am_zcopy;
    ops.ep_tag_eager_short        = sm_ep_tag_eager_short;
    ops.ep_tag_eager_bcopy        = sm_ep_tag_eager_bcopy;
    ops.ep_tag_eager_zcopy        = sm_ep_tag_eager_zcopy;
    ops.ep_tag_rndv_zcopy         = sm_ep_tag_rndv_zcopy;
    ops.ep_tag_rndv_cancel        = sm_ep_tag_rndv_cancel;
    ops.ep_tag_rndv_request       = sm_ep_tag_rndv_request;
    ops.iface_tag_recv_zcopy      = sm_iface_tag_recv_zcopy;
    ops.iface_tag_recv_cancel     = sm_iface_tag_recv_cancel;
    ops.ep_pending_add            = sm_ep_pending_add;
    ops.ep_pending_purge          = sm_ep_pending_purge;
    ops.ep_flush                  = sm_ep_flush;
    ops.ep_fence                  = sm_ep_fence;
    ops.ep_check                  = sm_ep_check;
    ops.ep_create                 = sm_ep_create;
    ops.ep_destroy                = sm_ep_destroy;
    ops.iface_flush               = sm_iface_flush;
    ops.iface_fence               = sm_iface_fence;
    ops.iface_progress_enable     = sm_iface_progress_enable;
    ops.iface_progress_disable    = sm_iface_progress_disable;
    ops.iface_progress            = sm_iface_progress;
    ops.iface_event_fd_get        = sm_iface_event_fd_get;
    ops.iface_event_arm           = sm_iface_event_arm;
    ops.iface_close               = sm_iface_close;
    ops.iface_query               = sm_iface_query;
    ops.iface_get_device_address  = sm_iface_get_device_address;
    ops.iface_get_address         = sm_iface_get_address;
    ops.iface_is_reachable        = sm_iface_is_reachable;
    return ops;
}

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

/* Connected to the iface `iface_addr` names, on the host `device_addr` names. */
bool sm_ep_is_connected(uct_ep_h ep, const uct_device_addr_t *device_addr,
                        const uct_iface_addr_t *iface_addr, const uct_ep_addr_t *) {
    if ((iface_addr == nullptr) || !owner(ep)->is_reachable(device_addr, iface_addr)) {
        return false;
    }
    IfaceAddress remote;
    memcpy(&remote, iface_addr, sizeof(remote));
    return same_iface(ep_of(ep)->peer->address(), remote);
}

void sm_estimate(uct_iface_h, abi::EpOperation op, abi::PerfEstimate *perf) {
    SmIface::estimate(op, perf);
}

const abi::TransportDesc transport = {
    "tm_sm",
    sm_devices,
    SmIface::open,
    "TM shared memory transport",
    "TM_SM_",
    sm_config_table,
    sizeof(SmConfig),
    sm_ep_is_connected,
    sm_estimate,
};

}  // namespace

const uct_iface_ops_t &sm_iface_ops() {
    static const uct_iface_ops_t ops = make_ops();
    return ops;
}

const abi::TransportDesc &sm_transport() { return transport; }

ucs_status_t register_sm_transport() { return abi::register_transport(transport); }

}  // namespace sm
}  // namespace uct_tm
