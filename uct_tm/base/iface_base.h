/*
 * IfaceBase: the UCT-facing shell every transport of uct-tm shares.
 *
 * A transport writes its iface class `Iface` (deriving from
 * IfaceBase<Iface, Ep>) and its endpoint `Ep` (uct_ep_t first, then
 * `Iface *iface`), and the methods below; this template turns them into
 * UCX's uct_iface_ops_t (one trampoline per operation, resolved at compile
 * time: no virtual call, the transport's inline methods inline into them),
 * opens ifaces (argument checks, open mode, the MD, parameters and features
 * decoded once), joins UCX's base iface through the ABI seam and leaves it.
 *
 * What Iface provides:
 *   using Config;                  its configuration (abi::IfaceConfig first)
 *   explicit Iface(const Config &);
 *   static const abi::TransportDesc &transport();
 *   ucs_status_t init(uct_md_h, uct_worker_h, const uct_iface_params_t *, const Config &);
 *   query, get_device_address, get_address, is_reachable, progress, flush,
 *   tag_recv_zcopy, tag_recv_cancel, release_desc, ep_create, ep_destroy,
 *   ep_is_connected, am_short/bcopy/zcopy, tag_eager_short/bcopy/zcopy,
 *   tag_rndv_zcopy/cancel/request, get_zcopy, put_zcopy, pending_add,
 *   pending_purge, ep_flush, ep_check (UCT's arguments, the endpoint as Ep *);
 * and if it connects endpoint to endpoint, ep_get_address and
 * ep_connect_to_ep; if its operations differ in cost, a static
 * estimate(abi::EpOperation, abi::PerfEstimate *).
 *
 * The trampolines are C++ functions stored in UCX's C ops table: GCC and
 * Clang give functions of either language linkage one type and one calling
 * convention.
 */
#ifndef UCT_TM_BASE_IFACE_BASE_H_
#define UCT_TM_BASE_IFACE_BASE_H_

#include "ucx_abi.h"

#include <uct/api/uct.h>
#include <ucs/debug/log_def.h>

#include <cstring>
#include <new>
#include <type_traits>
#include <utility>

namespace uct_tm {

/* What every transport reads off uct_iface_params_t, decoded once. */
struct IfaceParams {
    size_t                   rx_headroom = 0;
    /* Tag offload: on when asked for with both unexpected-message callbacks
     * (as UCX's rc_mlx5 requires), and when no features were given at all
     * (capability listings such as ucx_info -d show it; unexpected tagged
     * messages to such an iface are dropped with an error). */
    bool                     tag_enabled = false;
    uct_tag_unexp_eager_cb_t eager_cb    = nullptr;
    void                    *eager_arg   = nullptr;
    uct_tag_unexp_rndv_cb_t  rndv_cb     = nullptr;
    void                    *rndv_arg    = nullptr;
};

/* Checks and decodes the parameters of an iface of transport `tl`. */
ucs_status_t decode_iface_params(const char *tl, const uct_iface_params_t *params,
                                 IfaceParams *out);

namespace iface_detail {
template <typename T, typename = void> struct has_connect_to_ep : std::false_type {};
template <typename T>
struct has_connect_to_ep<T, std::void_t<decltype(&T::ep_connect_to_ep)>> : std::true_type {};
template <typename T, typename = void> struct has_estimate : std::false_type {};
template <typename T>
struct has_estimate<T, std::void_t<decltype(&T::estimate)>> : std::true_type {};
}  // namespace iface_detail

template <typename Iface, typename Ep> class IfaceBase {
  public:
    abi::BaseIface base; /* UCX's uct_base_iface_t: first, libuct reads the iface as one */

    static Iface *from(uct_iface_h iface) {
        return static_cast<Iface *>(reinterpret_cast<IfaceBase *>(iface));
    }
    static Ep *ep_of(uct_ep_h ep) { return reinterpret_cast<Ep *>(ep); }
    uct_iface_h to_uct() { return abi::to_uct(&base); }

    /* tl_iface_open of the transport. */
    static ucs_status_t open(uct_md_h md, uct_worker_h worker, const uct_iface_params_t *params,
                             const uct_iface_config_t *config, uct_iface_h *iface_p) {
        return open_as<&Iface::transport>(md, worker, params, config, iface_p);
    }

    /* tl_iface_open of another transport the same class serves (its
     * descriptor from Desc(), e.g. tm_dc's from RcIface). With Mode, the
     * iface is made as Iface(config, std::in_place_type<Mode>): a type that
     * tells the transports one class serves apart (RcIface's connection mode). */
    template <const abi::TransportDesc &(*Desc)(), typename... Mode>
    static ucs_status_t open_as(uct_md_h md, uct_worker_h worker, const uct_iface_params_t *params,
                                const uct_iface_config_t *config, uct_iface_h *iface_p) {
        const abi::TransportDesc &desc = Desc();
        const char               *tl   = desc.name;
        if ((params == nullptr) || (config == nullptr) || (iface_p == nullptr)) {
            return UCS_ERR_INVALID_PARAM;
        }
        IfaceParams  decoded;
        ucs_status_t status = decode_iface_params(tl, params, &decoded);
        if (status != UCS_OK) {
            return status;
        }
        abi::DeviceDesc devices[abi::kMaxDevices];
        if ((md == nullptr) || (desc.devices(md, devices) == 0)) {
            ucs_error("%s: the MD has no device of this transport", tl);
            return UCS_ERR_NO_DEVICE;
        }
        const auto &tl_config = *reinterpret_cast<const typename Iface::Config *>(config);
        Iface      *iface     = new (std::nothrow) Iface(tl_config, std::in_place_type<Mode>...);
        if (iface == nullptr) {
            return UCS_ERR_NO_MEMORY;
        }
        /* libuct reads the iface as its base iface: it must sit at offset 0. */
        if (static_cast<void *>(&iface->base) != static_cast<void *>(iface)) {
            ucs_error("%s: base iface is not at offset 0 (compiler layout)", tl);
            delete iface;
            return UCS_ERR_UNSUPPORTED;
        }
        IfaceBase &shell = *iface;
        shell.params_    = decoded;
        shell.desc_      = &desc;
        status = abi::init_base_iface(&shell.base, desc, ops(), md, worker, params, config);
        if (status == UCS_OK) {
            shell.base_initialized_ = true;
            status                  = iface->init(md, worker, params, tl_config);
        }
        if (status != UCS_OK) {
            delete iface;
            return status;
        }
        *iface_p = shell.to_uct();
        return UCS_OK;
    }

    /* The descriptor of the transport for registration and open(). */
    static constexpr abi::TransportDesc describe(const char *name,
                                                 unsigned (*devices)(uct_md_h, abi::DeviceDesc *),
                                                 const char *description, const char *prefix,
                                                 ucs_config_field_t *table) {
        return describe_as<&Iface::transport>(name, devices, description, prefix, table);
    }
    template <const abi::TransportDesc &(*Desc)(), typename... Mode>
    static constexpr abi::TransportDesc
    describe_as(const char *name, unsigned (*devices)(uct_md_h, abi::DeviceDesc *),
                const char *description, const char *prefix, ucs_config_field_t *table) {
        return abi::TransportDesc{
            name,         devices, open_as<Desc, Mode...>,         description,
            prefix,       table,   sizeof(typename Iface::Config), ep_is_connected,
            estimate_op()};
    }

    /* The transport's uct_iface_ops_t. */
    static const uct_iface_ops_t &ops() {
        static const uct_iface_ops_t table = make_ops();
        return table;
    }

  protected:
    IfaceBase() {
        desc_owner_.desc.cb = release_desc_cb;
        desc_owner_.iface   = this;
        recv_desc_ptr_      = &desc_owner_.desc;
    }
    ~IfaceBase() {
        if (base_initialized_) {
            /* Leave the worker's progress queue before the iface goes away. */
            abi::progress_disable(to_uct(), UCT_PROGRESS_SEND | UCT_PROGRESS_RECV);
            abi::cleanup_base_iface(&base);
        }
    }
    IfaceBase(const IfaceBase &)            = delete;
    IfaceBase &operator=(const IfaceBase &) = delete;

    const IfaceParams &params() const { return params_; }
    /* The transport this iface was opened as. */
    const abi::TransportDesc &opened_as() const { return *desc_; }
    bool               tag_enabled() const { return params_.tag_enabled; }
    bool               base_initialized() const { return base_initialized_; }

    /* A descriptor handed up with UCT_CB_PARAM_FLAG_DESC: the pointer in
     * front of its headroom leads uct_iface_release_desc() back here. */
    void stamp_desc(char *headroom_start) const {
        memcpy(headroom_start - sizeof(uct_recv_desc_t *), &recv_desc_ptr_,
               sizeof(recv_desc_ptr_));
    }

  private:
    struct DescOwner {
        uct_recv_desc_t desc;
        IfaceBase      *iface;
    };

    static void release_desc_cb(uct_recv_desc_t *self, void *desc) {
        static_cast<Iface *>(reinterpret_cast<DescOwner *>(self)->iface)->release_desc(desc);
    }
    static Iface *owner(uct_ep_h ep) { return ep_of(ep)->iface; }

    /* ---- trampolines ---- */
    static ucs_status_t iface_query(uct_iface_h iface, uct_iface_attr_t *attr) {
        return (attr == nullptr) ? UCS_ERR_INVALID_PARAM : from(iface)->query(attr);
    }
    static ucs_status_t iface_get_device_address(uct_iface_h iface, uct_device_addr_t *addr) {
        return (addr == nullptr) ? UCS_ERR_INVALID_PARAM : from(iface)->get_device_address(addr);
    }
    static ucs_status_t iface_get_address(uct_iface_h iface, uct_iface_addr_t *addr) {
        return from(iface)->get_address(addr);
    }
    static int iface_is_reachable(const uct_iface_h iface, const uct_device_addr_t *dev_addr,
                                  const uct_iface_addr_t *iface_addr) {
        return from(iface)->is_reachable(dev_addr, iface_addr);
    }
    static unsigned iface_progress(uct_iface_h iface) { return from(iface)->progress(); }
    static ucs_status_t iface_flush(uct_iface_h iface, unsigned flags, uct_completion_t *comp) {
        return from(iface)->flush(flags, comp);
    }
    /* Every transport here runs an endpoint's operations in order. */
    static ucs_status_t iface_fence(uct_iface_h, unsigned) { return UCS_OK; }
    static void         iface_close(uct_iface_h iface) { delete from(iface); }
    static void         iface_progress_enable(uct_iface_h iface, unsigned flags) {
        abi::progress_enable(iface, flags);
    }
    static void iface_progress_disable(uct_iface_h iface, unsigned flags) {
        abi::progress_disable(iface, flags);
    }
    static ucs_status_t iface_tag_recv_zcopy(uct_iface_h iface, uct_tag_t tag, uct_tag_t mask,
                                             const uct_iov_t *iov, size_t iovcnt,
                                             uct_tag_context_t *ctx) {
        return from(iface)->tag_recv_zcopy(tag, mask, iov, iovcnt, ctx);
    }
    static ucs_status_t iface_tag_recv_cancel(uct_iface_h iface, uct_tag_context_t *ctx,
                                              int force) {
        return from(iface)->tag_recv_cancel(ctx, force);
    }
    static ucs_status_t iface_event_fd_get(uct_iface_h, int *) { return UCS_ERR_UNSUPPORTED; }
    static ucs_status_t iface_event_arm(uct_iface_h, unsigned) { return UCS_ERR_UNSUPPORTED; }

    static ucs_status_t ep_create(const uct_ep_params_t *params, uct_ep_h *ep_p) {
        if ((params == nullptr) || (ep_p == nullptr) ||
            !(params->field_mask & UCT_EP_PARAM_FIELD_IFACE) || (params->iface == nullptr)) {
            return UCS_ERR_INVALID_PARAM;
        }
        return from(params->iface)->ep_create(params, ep_p);
    }
    static void ep_destroy(uct_ep_h ep) { owner(ep)->ep_destroy(ep_of(ep)); }
    static ucs_status_t ep_get_address(uct_ep_h ep, uct_ep_addr_t *addr) {
        return (addr == nullptr) ? UCS_ERR_INVALID_PARAM
                                 : owner(ep)->ep_get_address(ep_of(ep), addr);
    }
    static ucs_status_t ep_connect_to_ep(uct_ep_h ep, const uct_device_addr_t *dev_addr,
                                         const uct_ep_addr_t *ep_addr) {
        return owner(ep)->ep_connect_to_ep(ep_of(ep), dev_addr, ep_addr);
    }
    static bool ep_is_connected(uct_ep_h ep, const uct_device_addr_t *device_addr,
                                const uct_iface_addr_t *iface_addr, const uct_ep_addr_t *ep_addr) {
        return owner(ep)->ep_is_connected(ep_of(ep), device_addr, iface_addr, ep_addr);
    }
    static ucs_status_t ep_am_short(uct_ep_h ep, uint8_t id, uint64_t header,
                                    const void *payload, unsigned length) {
        return owner(ep)->am_short(ep_of(ep), id, header, payload, length);
    }
    static ssize_t ep_am_bcopy(uct_ep_h ep, uint8_t id, uct_pack_callback_t pack_cb, void *arg,
                               unsigned) {
        return owner(ep)->am_bcopy(ep_of(ep), id, pack_cb, arg);
    }
    static ucs_status_t ep_am_zcopy(uct_ep_h ep, uint8_t id, const void *header,
                                    unsigned header_length, const uct_iov_t *iov, size_t iovcnt,
                                    unsigned, uct_completion_t *comp) {
        return owner(ep)->am_zcopy(ep_of(ep), id, header, header_length, iov, iovcnt, comp);
    }
    static ucs_status_t ep_tag_eager_short(uct_ep_h ep, uct_tag_t tag, const void *data,
                                           size_t length) {
        return owner(ep)->tag_eager_short(ep_of(ep), tag, data, length);
    }
    static ssize_t ep_tag_eager_bcopy(uct_ep_h ep, uct_tag_t tag, uint64_t imm,
                                      uct_pack_callback_t pack_cb, void *arg, unsigned) {
        return owner(ep)->tag_eager_bcopy(ep_of(ep), tag, imm, pack_cb, arg);
    }
    static ucs_status_t ep_tag_eager_zcopy(uct_ep_h ep, uct_tag_t tag, uint64_t imm,
                                           const uct_iov_t *iov, size_t iovcnt, unsigned,
                                           uct_completion_t *comp) {
        return owner(ep)->tag_eager_zcopy(ep_of(ep), tag, imm, iov, iovcnt, comp);
    }
    static ucs_status_ptr_t ep_tag_rndv_zcopy(uct_ep_h ep, uct_tag_t tag, const void *header,
                                              unsigned header_length, const uct_iov_t *iov,
                                              size_t iovcnt, unsigned, uct_completion_t *comp) {
        return owner(ep)->tag_rndv_zcopy(ep_of(ep), tag, header, header_length, iov, iovcnt,
                                         comp);
    }
    static ucs_status_t ep_tag_rndv_cancel(uct_ep_h ep, void *op) {
        return owner(ep)->tag_rndv_cancel(ep_of(ep), op);
    }
    static ucs_status_t ep_tag_rndv_request(uct_ep_h ep, uct_tag_t tag, const void *header,
                                            unsigned header_length, unsigned) {
        return owner(ep)->tag_rndv_request(ep_of(ep), tag, header, header_length);
    }
    static ucs_status_t ep_get_zcopy(uct_ep_h ep, const uct_iov_t *iov, size_t iovcnt,
                                     uint64_t remote_addr, uct_rkey_t rkey,
                                     uct_completion_t *comp) {
        return owner(ep)->get_zcopy(ep_of(ep), iov, iovcnt, remote_addr, rkey, comp);
    }
    static ucs_status_t ep_put_zcopy(uct_ep_h ep, const uct_iov_t *iov, size_t iovcnt,
                                     uint64_t remote_addr, uct_rkey_t rkey,
                                     uct_completion_t *comp) {
        return owner(ep)->put_zcopy(ep_of(ep), iov, iovcnt, remote_addr, rkey, comp);
    }
    static ucs_status_t ep_pending_add(uct_ep_h ep, uct_pending_req_t *req, unsigned) {
        return (req == nullptr) ? UCS_ERR_INVALID_PARAM : owner(ep)->pending_add(ep_of(ep), req);
    }
    static void ep_pending_purge(uct_ep_h ep, uct_pending_purge_callback_t cb, void *arg) {
        owner(ep)->pending_purge(ep_of(ep), cb, arg);
    }
    static ucs_status_t ep_flush(uct_ep_h ep, unsigned flags, uct_completion_t *comp) {
        return owner(ep)->ep_flush(ep_of(ep), flags, comp);
    }
    static ucs_status_t ep_fence(uct_ep_h, unsigned) { return UCS_OK; }
    static ucs_status_t ep_check(uct_ep_h ep, unsigned flags, uct_completion_t *comp) {
        return owner(ep)->ep_check(ep_of(ep), flags, comp);
    }

    static void estimate(uct_iface_h, abi::EpOperation op, abi::PerfEstimate *perf) {
        Iface::estimate(op, perf);
    }
    static constexpr auto estimate_op() {
        using Fn = void (*)(uct_iface_h, abi::EpOperation, abi::PerfEstimate *);
        if constexpr (iface_detail::has_estimate<Iface>::value) {
            return static_cast<Fn>(estimate);
        } else {
            return static_cast<Fn>(nullptr); /* the same figures for every operation */
        }
    }

    static uct_iface_ops_t make_ops() {
        uct_iface_ops_t o{};
        o.ep_put_zcopy             = ep_put_zcopy;
        o.ep_get_zcopy             = ep_get_zcopy;
        o.ep_am_short              = ep_am_short;
        o.ep_am_bcopy              = ep_am_bcopy;
        o.ep_am_zcopy              = ep_am_zcopy;
        o.ep_tag_eager_short       = ep_tag_eager_short;
        o.ep_tag_eager_bcopy       = ep_tag_eager_bcopy;
        o.ep_tag_eager_zcopy       = ep_tag_eager_zcopy;
        o.ep_tag_rndv_zcopy        = ep_tag_rndv_zcopy;
        o.ep_tag_rndv_cancel       = ep_tag_rndv_cancel;
        o.ep_tag_rndv_request      = ep_tag_rndv_request;
        o.iface_tag_recv_zcopy     = iface_tag_recv_zcopy;
        o.iface_tag_recv_cancel    = iface_tag_recv_cancel;
        o.ep_pending_add           = ep_pending_add;
        o.ep_pending_purge         = ep_pending_purge;
        o.ep_flush                 = ep_flush;
        o.ep_fence                 = ep_fence;
        o.ep_check                 = ep_check;
        o.ep_create                = ep_create;
        o.ep_destroy               = ep_destroy;
        if constexpr (iface_detail::has_connect_to_ep<Iface>::value) {
            o.ep_get_address   = ep_get_address;
            o.ep_connect_to_ep = ep_connect_to_ep;
        }
        o.iface_flush              = iface_flush;
        o.iface_fence              = iface_fence;
        o.iface_progress_enable    = iface_progress_enable;
        o.iface_progress_disable   = iface_progress_disable;
        o.iface_progress           = iface_progress;
        o.iface_event_fd_get       = iface_event_fd_get;
        o.iface_event_arm          = iface_event_arm;
        o.iface_close              = iface_close;
        o.iface_query              = iface_query;
        o.iface_get_device_address = iface_get_device_address;
        o.iface_get_address        = iface_get_address;
        o.iface_is_reachable       = iface_is_reachable;
        return o;
    }

    IfaceParams      params_;
    const abi::TransportDesc *desc_ = nullptr;
    bool             base_initialized_ = false;
    DescOwner        desc_owner_{};
    uct_recv_desc_t *recv_desc_ptr_    = nullptr;
};

}  // namespace uct_tm

#endif
