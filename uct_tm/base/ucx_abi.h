/*
 * The seam between uct-tm and UCX's private structures.
 *
 * Everything that depends on a layout UCX does not install a header for goes
 * through this interface; ucx_abi.cc is the only file that includes the
 * versioned mirror (uct_tm/compat/ucx_<major>_<minor>.h, the release configure
 * found). Here are only storage sizes (checked against the mirror by static
 * assertions there) and plain descriptors in uct-tm's own terms, the same for
 * every supported UCX release.
 */
#ifndef UCT_TM_BASE_UCX_ABI_H_
#define UCT_TM_BASE_UCX_ABI_H_

#include <uct/api/uct.h>
#include <ucs/config/parser.h>

#include <cstddef>
#include <cstdint>

/* libuct's base iface configuration table (exported, not declared by UCX's
 * installed headers); transports embed it at offset 0 of their config. */
extern "C" ucs_config_field_t uct_iface_config_table[];

namespace uct_tm {
namespace abi {

/* The same in every supported release (uct_tm/compat/ucx_layouts.h). */
inline constexpr size_t kBaseIfaceSize   = 1280;
inline constexpr size_t kIfaceConfigSize = 32;

/* The UCX release this build mirrors (100 * major + minor). */
inline constexpr unsigned kUcxRelease = UCT_TM_UCX_ABI;

/* Room for UCX's uct_base_iface_t; every iface object starts with one. */
struct alignas(16) BaseIface {
    unsigned char bytes[kBaseIfaceSize];
};

/* Room for UCX's uct_iface_config_t; every transport config starts with one
 * (filled by the embedded uct_iface_config_table). */
struct alignas(8) IfaceConfig {
    unsigned char bytes[kIfaceConfigSize];
};

/* ---- memory domains ------------------------------------------------------ */

struct MdHeader;

/* What an MD offers, in uct-tm's terms; the seam writes it into the release's
 * attribute structure (uct_md_attr_t, or uct_md_attr_v2_t from 1.14 on). */
struct MdAttr {
    uint64_t          max_alloc        = 0;
    size_t            max_reg          = 0;
    uint64_t          flags            = 0; /* UCT_MD_FLAG_* */
    uint64_t          reg_mem_types    = 0; /* bits of ucs_memory_type_t */
    /* Memory types whose registrations UCP may keep in its registration
     * cache (from 1.14; UCP 1.16 on asserts that every MD it registers a
     * datatype iterator on is one of them). */
    uint64_t          cache_mem_types  = 0;
    uint64_t          alloc_mem_types  = 0;
    uint64_t          access_mem_types = 0;
    ucs_linear_func_t reg_cost         = {0, 0};
    size_t            rkey_packed_size = 0;
    size_t            reg_alignment    = 1; /* registrations need no alignment */
};

/* What an MD does, in uct-tm's terms; ucx_abi.cc adapts UCX's md ops to it. */
struct MdCallbacks {
    void (*close)(MdHeader *md);
    ucs_status_t (*query)(MdHeader *md, MdAttr *attr);
    ucs_status_t (*mem_alloc)(MdHeader *md, size_t *length, void **address, unsigned flags,
                              const char *name, uct_mem_h *memh);
    ucs_status_t (*mem_free)(MdHeader *md, uct_mem_h memh);
    ucs_status_t (*mem_reg)(MdHeader *md, void *address, size_t length, unsigned flags,
                            uct_mem_h *memh);
    ucs_status_t (*mem_dereg)(MdHeader *md, uct_mem_h memh);
    ucs_status_t (*mkey_pack)(MdHeader *md, uct_mem_h memh, void *rkey_buffer);
};

/* First bytes of every uct-tm MD: UCX's struct uct_md {ops, component},
 * then our callbacks. */
struct MdHeader {
    const void        *ucx_ops;
    void              *ucx_component;
    const MdCallbacks *callbacks;
};

struct ComponentDesc;

/* Makes `md` a valid uct_md_h of `component`, which must be registered
 * (libuct opens an MD only through its registered component, and checks that
 * the MD names it). */
void init_md_header(MdHeader *md, const ComponentDesc &component, const MdCallbacks *callbacks);

inline uct_md_h to_uct(MdHeader *md) { return reinterpret_cast<uct_md_h>(md); }
inline MdHeader *from_uct(uct_md_h md) { return reinterpret_cast<MdHeader *>(md); }

/* ---- components ---------------------------------------------------------------- */

/* One UCX component: a family of MDs with its own rkey format, as UCX has
 * one component per MD family. uct-tm's MDs have no settings: the seam gives
 * libuct the (empty) configuration table it needs. */
struct ComponentDesc {
    const char *name; /* at most UCT_COMPONENT_NAME_MAX - 1 characters */
    /* Names of the component's MDs, at most `max`. */
    unsigned (*md_names)(char (*names)[UCT_MD_NAME_MAX], unsigned max);
    ucs_status_t (*md_open)(const char *md_name, const uct_md_config_t *config, uct_md_h *md);
    /* The rkeys of the component's MDs (a peer's buffer: checked before use). */
    ucs_status_t (*rkey_unpack)(const void *rkey_buffer, uct_rkey_t *rkey, void **handle);
    ucs_status_t (*rkey_ptr)(uct_rkey_t rkey, void *handle, uint64_t raddr, void **laddr);
    ucs_status_t (*rkey_release)(uct_rkey_t rkey, void *handle);
    const char *md_config_name;
    const char *md_config_prefix;
};

/* Registers a component with libuct (once per process each; `desc` must
 * outlive the process). Refuses, with UCS_ERR_UNSUPPORTED and an error
 * logged, a libuct whose layouts are not the ones this build mirrors (for
 * instance a UCX built with statistics). */
ucs_status_t register_component(const ComponentDesc &desc);

/* What each component library's ELF constructor does: registers
 * `component`, then its transport(s) with `add_transport` (`transport` names
 * them in the error logged if that fails). False if the component could not
 * be registered. */
bool register_family(const ComponentDesc &component, ucs_status_t (*add_transport)(),
                     const char          *transport);

/* ---- transports -------------------------------------------------------------- */

/* The operations UCX asks performance estimates for (uct_ep_operation_t, the
 * same in every supported release; ucx_abi.cc checks the values). */
enum class EpOperation : int {
    kAmShort,
    kAmBcopy,
    kAmZcopy,
    kPutShort,
    kPutBcopy,
    kPutZcopy,
    kGetShort,
    kGetBcopy,
    kGetZcopy,
    kEagerShort,
    kEagerBcopy,
    kEagerZcopy,
    kRndvZcopy,
    kAtomicPost,
    kAtomicFetch,
    kAny, /* no operation named */
};

/* A transport's cost of one operation, in the terms UCP's protocol selection
 * (v2 engine) compares: seconds, bytes per second. */
struct PerfEstimate {
    double              send_pre_overhead;
    double              send_post_overhead;
    double              recv_overhead;
    uct_ppn_bandwidth_t bandwidth;
    ucs_linear_func_t   latency;
};

/* One device a transport offers on an MD. */
struct DeviceDesc {
    char              name[UCT_DEVICE_NAME_MAX];
    uct_device_type_t type;
    ucs_sys_device_t  sys_device;
};

inline constexpr unsigned kMaxDevices = 32;

struct TransportDesc {
    const char *name; /* at most UCT_TL_NAME_MAX - 1 characters */
    /* The transport's devices on `md` (none on an MD of another kind), at
     * most kMaxDevices, closest to the calling thread first. */
    unsigned (*devices)(uct_md_h md, DeviceDesc *out);
    ucs_status_t (*iface_open)(uct_md_h md, uct_worker_h worker, const uct_iface_params_t *params,
                               const uct_iface_config_t *config, uct_iface_h *iface);
    const char         *config_name;
    const char         *config_prefix;
    ucs_config_field_t *config_table;
    size_t              config_size;
    /* Whether `ep` is connected to the peer these addresses name (UCP 1.16+
     * asks before it reuses an endpoint); any of them may be null. */
    bool (*ep_is_connected)(uct_ep_h ep, const uct_device_addr_t *device_addr,
                            const uct_iface_addr_t *iface_addr, const uct_ep_addr_t *ep_addr);
    /* Adjusts `perf`, filled from the iface's attributes (the same for every
     * operation: send and receive overhead, latency, bandwidth), to what `op`
     * costs on this transport. Null: the same figures for every operation. */
    void (*estimate)(uct_iface_h iface, EpOperation op, PerfEstimate *perf);
};

/* Adds a transport to `component`, registered before: libuct lists its
 * devices on the MDs of that component only. `desc` must outlive the process. */
ucs_status_t register_transport(const ComponentDesc &component, const TransportDesc &desc);

/* ---- ifaces ------------------------------------------------------------------- */

/* Initializes UCX's part of an iface of a registered transport through
 * libuct's own constructor (AM stubs, error handler, allocation methods,
 * progress bookkeeping) and the seam's internal operations (performance
 * estimates from iface_query, reachability, connection checks). */
ucs_status_t init_base_iface(BaseIface *base, const TransportDesc &transport,
                             const uct_iface_ops_t &ops, uct_md_h md, uct_worker_h worker,
                             const uct_iface_params_t *params, const uct_iface_config_t *config);
void cleanup_base_iface(BaseIface *base);

/* Calls the active-message handler registered for `id` (< UCT_AM_ID_MAX). */
ucs_status_t invoke_am(BaseIface *base, uint8_t id, void *data, unsigned length, unsigned flags);

/* One entry of an iface's handler table, as libuct keeps it (the layout is
 * checked against the compat header). */
struct AmHandler {
    uct_am_callback_t cb;
    void             *arg;
    uint32_t          flags;
};
/* The iface's UCT_AM_ID_MAX handlers, which uct_iface_set_am_handler()
 * updates in place: a transport may keep the pointer for the iface's life
 * and call a handler without a call into this seam. */
const AmHandler *am_handlers(BaseIface *base);

/* Reports an endpoint failure to the iface's error handler (or logs it). */
ucs_status_t handle_ep_error(BaseIface *base, uct_ep_h ep, ucs_status_t status);

/* libuct's progress registration for ifaces, usable as ops. */
void progress_enable(uct_iface_h iface, unsigned flags);
void progress_disable(uct_iface_h iface, unsigned flags);

inline uct_iface_h to_uct(BaseIface *base) { return reinterpret_cast<uct_iface_h>(base); }

}  // namespace abi
}  // namespace uct_tm

#endif
