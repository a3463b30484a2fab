#include "rc_ops.h"

#include "ib_device.h"
#include "ib_md.h"
#include "rc_config.h"
#include "rc_iface.h"

#include <cstdio>

namespace uct_tm {
namespace ib {
namespace {

RcIface *iface_of(uct_iface_h iface) { return RcIface::from(iface); }
RcEp    *ep_of(uct_ep_h ep) { return RcIface::ep_of(ep); }
RcIface *owner(uct_ep_h ep) { return ep_of(ep)->iface; }

extern "C" {

/* ---- iface ---- */
static ucs_status_t rc_iface_query(uct_iface_h iface, uct_iface_attr_t *attr) {
    return iface_of(iface)->query(attr);
}
static ucs_status_t rc_iface_get_device_address(uct_iface_h iface, uct_device_addr_t *addr) {
    return iface_of(iface)->get_device_address(addr);
}
static ucs_status_t rc_iface_get_address(uct_iface_h, uct_iface_addr_t *) { return UCS_OK; }
static int rc_iface_is_reachable(const uct_iface_h iface, const uct_device_addr_t *dev_addr,
                                 const uct_iface_addr_t *) {
    return iface_of(iface)->is_reachable(dev_addr);
}
static unsigned rc_iface_progress(uct_iface_h iface) { return iface_of(iface)->progress(); }
static ucs_status_t rc_iface_flush(uct_iface_h iface, unsigned flags, uct_completion_t *comp) {
    return iface_of(iface)->flush(flags, comp);
}
static ucs_status_t rc_iface_fence(uct_iface_h, unsigned) {
    return UCS_OK; /* one RC QP per endpoint executes in order (READs are fenced by the NIC) */
}
static void rc_iface_close(uct_iface_h iface) { delete iface_of(iface); }
static void rc_iface_progress_enable(uct_iface_h iface, unsigned flags) {
    abi::progress_enable(iface, flags);
}
static void rc_iface_progress_disable(uct_iface_h iface, unsigned flags) {
    abi::progress_disable(iface, flags);
}
static ucs_status_t rc_iface_tag_recv_zcopy(uct_iface_h iface, uct_tag_t tag, uct_tag_t mask,
                                            const uct_iov_t *iov, size_t iovcnt,
                                            uct_tag_context_t *ctx) {
    return iface_of(iface)->tag_recv_zcopy(tag, mask, iov, iovcnt, ctx);
}
static ucs_status_t rc_iface_tag_recv_cancel(uct_iface_h iface, uct_tag_context_t *ctx, int force) {
    return iface_of(iface)->tag_recv_cancel(ctx, force);
}
static ucs_status_t rc_iface_event_fd_get(uct_iface_h, int *) { return UCS_ERR_UNSUPPORTED; }
static ucs_status_t rc_iface_event_arm(uct_iface_h, unsigned) { return UCS_ERR_UNSUPPORTED; }

/* ---- endpoint lifetime ---- */
static ucs_status_t rc_ep_create(const uct_ep_params_t *params, uct_ep_h *ep_p) {
    if ((params == nullptr) || (ep_p == nullptr) || !(params->field_mask & UCT_EP_PARAM_FIELD_IFACE) ||
        (params->iface == nullptr)) {
        return UCS_ERR_INVALID_PARAM;
    }
    return iface_of(params->iface)->ep_create(params, ep_p);
}
static void rc_ep_destroy(uct_ep_h ep) { owner(ep)->ep_destroy(ep_of(ep)); }
static ucs_status_t rc_ep_get_address(uct_ep_h ep, uct_ep_addr_t *addr) {
    return (addr == nullptr) ? UCS_ERR_INVALID_PARAM : owner(ep)->ep_get_address(ep_of(ep), addr);
}
static ucs_status_t rc_ep_connect_to_ep(uct_ep_h ep, const uct_device_addr_t *dev_addr,
                                        const uct_ep_addr_t *ep_addr) {
    return owner(ep)->ep_connect_to_ep(ep_of(ep), dev_addr, ep_addr);
}

/* ---- endpoint operations ---- */
static ucs_status_t rc_ep_am_short(uct_ep_h ep, uint8_t id, uint64_t header, const void *payload,
                                   unsigned length) {
    return owner(ep)->am_short(ep_of(ep), id, header, payload, length);
}
static ssize_t rc_ep_am_bcopy(uct_ep_h ep, uint8_t id, uct_pack_callback_t pack_cb, void *arg,
                              unsigned) {
    return owner(ep)->am_bcopy(ep_of(ep), id, pack_cb, arg);
}
static ucs_status_t rc_ep_am_zcopy(uct_ep_h ep, uint8_t id, const void *header,
                                   unsigned header_length, const uct_iov_t *iov, size_t iovcnt,
                                   unsigned, uct_completion_t *comp) {
    return owner(ep)->am_zcopy(ep_of(ep), id, header, header_length, iov, iovcnt, comp);
}
static ucs_status_t rc_ep_tag_eager_short(uct_ep_h ep, uct_tag_t tag, const void *data,
                                          size_t length) {
    return owner(ep)->tag_eager_short(ep_of(ep), tag, data, length);
}
static ssize_t rc_ep_tag_eager_bcopy(uct_ep_h ep, uct_tag_t tag, uint64_t imm,
                                     uct_pack_callback_t pack_cb, void *arg, unsigned) {
    return owner(ep)->tag_eager_bcopy(ep_of(ep), tag, imm, pack_cb, arg);
}
static ucs_status_t rc_ep_tag_eager_zcopy(uct_ep_h ep, uct_tag_t tag, uint64_t imm,
                                          const uct_iov_t *iov, size_t iovcnt, unsigned,
                                          uct_completion_t *comp) {
    return owner(ep)->tag_eager_zcopy(ep_of(ep), tag, imm, iov, iovcnt, comp);
}
static ucs_status_ptr_t rc_ep_tag_rndv_zcopy(uct_ep_h ep, uct_tag_t tag, const void *header,
                                             unsigned header_length, const uct_iov_t *iov,
                                             size_t iovcnt, unsigned, uct_completion_t *comp) {
    return owner(ep)->tag_rndv_zcopy(ep_of(ep), tag, header, header_length, iov, iovcnt, comp);
}
static ucs_status_t rc_ep_tag_rndv_cancel(uct_ep_h ep, void *op) {
    return owner(ep)->tag_rndv_cancel(ep_of(ep), op);
}
static ucs_status_t rc_ep_tag_rndv_request(uct_ep_h ep, uct_tag_t tag, const void *header,
                                           unsigned header_length, unsigned) {
    return owner(ep)->tag_rndv_request(ep_of(ep), tag, header, header_length);
}
static ucs_status_t rc_ep_get_zcopy(uct_ep_h ep, const uct_iov_t *iov, size_t iovcnt,
                                    uint64_t remote_addr, uct_rkey_t rkey, uct_completion_t *comp) {
    return owner(ep)->rdma_zcopy(ep_of(ep), iov, iovcnt, remote_addr, rkey, comp, false);
}
static ucs_status_t rc_ep_put_zcopy(uct_ep_h ep, const uct_iov_t *iov, size_t iovcnt,
                                    uint64_t remote_addr, uct_rkey_t rkey, uct_completion_t *comp) {
    return owner(ep)->rdma_zcopy(ep_of(ep), iov, iovcnt, remote_addr, rkey, comp, true);
}
static ucs_status_t rc_ep_pending_add(uct_ep_h ep, uct_pending_req_t *req, unsigned) {
    return owner(ep)->pending_add(ep_of(ep), req);
}
static void rc_ep_pending_purge(uct_ep_h ep, uct_pending_purge_callback_t cb, void *arg) {
    owner(ep)->pending_purge(ep_of(ep), cb, arg);
}
static ucs_status_t rc_ep_flush(uct_ep_h ep, unsigned flags, uct_completion_t *comp) {
    return owner(ep)->ep_flush(ep_of(ep), flags, comp);
}
static ucs_status_t rc_ep_fence(uct_ep_h, unsigned) { return UCS_OK; }
static ucs_status_t rc_ep_check(uct_ep_h ep, unsigned flags, uct_completion_t *comp) {
    return owner(ep)->ep_check(ep_of(ep), flags, comp);
}

}  // extern "C"

uct_iface_ops_t make_ops() {
    uct_iface_ops_t ops{};
    ops.ep_put_zcopy              = rc_ep_put_zcopy;
    ops.ep_get_zcopy              = rc_ep_get_zcopy;
    ops.ep_am_short               = rc_ep_am_short;
    ops.ep_am_bcopy               = rc_ep_am_bcopy;
    ops.ep_am_zcopy               = rc_ep_am_zcopy;
    ops.ep_tag_eager_short        = rc_ep_tag_eager_short;
    ops.ep_tag_eager_bcopy        = rc_ep_tag_eager_bcopy;
    ops.ep_tag_eager_zcopy        = rc_ep_tag_eager_zcopy;
    ops.ep_tag_rndv_zcopy         = rc_ep_tag_rndv_zcopy;
    ops.ep_tag_rndv_cancel        = rc_ep_tag_rndv_cancel;
    ops.ep_tag_rndv_request       = rc_ep_tag_rndv_request;
    ops.iface_tag_recv_zcopy      = rc_iface_tag_recv_zcopy;
    ops.iface_tag_recv_cancel     = rc_iface_tag_recv_cancel;
    ops.ep_pending_add            = rc_ep_pending_add;
    ops.ep_pending_purge          = rc_ep_pending_purge;
    ops.ep_flush                  = rc_ep_flush;
    ops.ep_fence                  = rc_ep_fence;
    ops.ep_check                  = rc_ep_check;
    ops.ep_create                 = rc_ep_create;
    ops.ep_destroy                = rc_ep_destroy;
    ops.ep_get_address            = rc_ep_get_address;
    ops.ep_connect_to_ep          = rc_ep_connect_to_ep;
    ops.iface_flush               = rc_iface_flush;
    ops.iface_fence               = rc_iface_fence;
    ops.iface_progress_enable     = rc_iface_progress_enable;
    ops.iface_progress_disable    = rc_iface_progress_disable;
    ops.iface_progress            = rc_iface_progress;
    ops.iface_event_fd_get        = rc_iface_event_fd_get;
    ops.iface_event_arm           = rc_iface_event_arm;
    ops.iface_close               = rc_iface_close;
    ops.iface_query               = rc_iface_query;
    ops.iface_get_device_address  = rc_iface_get_device_address;
    ops.iface_get_address         = rc_iface_get_address;
    ops.iface_is_reachable        = rc_iface_is_reachable;
    return ops;
}

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

bool rc_ep_is_connected(uct_ep_h ep, const uct_device_addr_t *device_addr,
                        const uct_iface_addr_t *, const uct_ep_addr_t *ep_addr) {
    return owner(ep)->ep_is_connected(ep_of(ep), device_addr, ep_addr);
}

const abi::TransportDesc transport = {
    "tm_rc",
    rc_devices,
    RcIface::open,
    "TM RC verbs transport",
    "TM_RC_",
    rc_config_table,
    sizeof(RcConfig),
    rc_ep_is_connected,
    nullptr, /* the same figures for every operation */
};

}  // namespace

const uct_iface_ops_t &rc_iface_ops() {
    static const uct_iface_ops_t ops = make_ops();
    return ops;
}

const abi::TransportDesc &rc_transport() { return transport; }

ucs_status_t register_rc_transport() { return abi::register_transport(transport); }

}  // namespace ib
}  // namespace uct_tm
