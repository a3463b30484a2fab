/*
 * The only translation unit that sees UCX's private layouts: adapts uct-tm's
 * descriptors to libuct's component, MD, transport and base-iface structures
 * of the release configure found (UCT_TM_UCX_ABI). Where a release changed an
 * operation's signature, the adapter for each form is here, next to the other.
 */
#include "ucx_abi.h"

#if UCT_TM_UCX_ABI == 113
#include "../compat/ucx_1_13.h"
#elif UCT_TM_UCX_ABI == 114
#include "../compat/ucx_1_14.h"
#elif UCT_TM_UCX_ABI == 115
#include "../compat/ucx_1_15.h"
#elif UCT_TM_UCX_ABI == 116
#include "../compat/ucx_1_16.h"
#elif UCT_TM_UCX_ABI == 117
#include "../compat/ucx_1_17.h"
#elif UCT_TM_UCX_ABI == 118
#include "../compat/ucx_1_18.h"
#elif UCT_TM_UCX_ABI == 119
#include "../compat/ucx_1_19.h"
#elif UCT_TM_UCX_ABI == 120
#include "../compat/ucx_1_20.h"
#elif UCT_TM_UCX_ABI == 121
#include "../compat/ucx_1_21.h"
#elif UCT_TM_UCX_ABI == 122
#include "../compat/ucx_1_22.h"
#else
#error "no compat header for this UCX release (configure sets UCT_TM_UCX_ABI)"
#endif

#include <ucs/debug/log_def.h>

#include <alloca.h>
#include <array>
#include <cstdarg>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <new>
#include <type_traits>
#include <unistd.h>
#include <utility>

namespace uct_tm {
namespace abi {

using namespace compat;

static_assert(sizeof(BaseIface) == sizeof(uct_base_iface_t), "BaseIface storage");
static_assert(alignof(BaseIface) >= alignof(uct_base_iface_t), "BaseIface alignment");
static_assert(sizeof(IfaceConfig) == sizeof(uct_iface_config), "IfaceConfig storage");
static_assert(offsetof(MdHeader, ucx_ops) == offsetof(uct_md, ops), "MdHeader::ucx_ops");
static_assert(offsetof(MdHeader, ucx_component) == offsetof(uct_md, component),
              "MdHeader::ucx_component");

namespace {

uct_base_iface_t *base_of(BaseIface *base) { return reinterpret_cast<uct_base_iface_t *>(base); }
MdHeader *header_of(uct_md_h md) { return reinterpret_cast<MdHeader *>(md); }

/* The name of the component `md` belongs to (MD attributes carry it). */
const char *component_name(uct_md_h md) {
    return static_cast<const uct_component *>(header_of(md)->ucx_component)->name;
}

/* ---- md ops: UCX signatures -> MdCallbacks ----------------------------------- */

void local_cpus(ucs_cpu_set_t *cpus) {
    UCS_CPU_ZERO(cpus);
    const long ncpus = sysconf(_SC_NPROCESSORS_CONF);
    for (long cpu = 0; (cpu < ncpus) && (cpu < UCS_CPU_SETSIZE); ++cpu) {
        UCS_CPU_SET(cpu, cpus);
    }
}

extern "C" {

static void md_close(uct_md_h md) { header_of(md)->callbacks->close(header_of(md)); }

#if UCT_TM_UCX_ABI >= 114
static ucs_status_t md_query(uct_md_h md, uct_md_attr_v2_t *out) {
    MdAttr             attr;
    const ucs_status_t status = header_of(md)->callbacks->query(header_of(md), &attr);
    if (status != UCS_OK) {
        return status;
    }
    /* Every field is written, whatever field_mask asks: libuct's own MDs do
     * the same, and uct_md_query() converts from a zeroed copy. */
    const uint64_t field_mask = out->field_mask;
    memset(out, 0, sizeof(*out));
    out->field_mask       = field_mask;
    out->max_alloc        = attr.max_alloc;
    out->max_reg          = attr.max_reg;
    out->flags            = attr.flags;
    out->reg_mem_types    = attr.reg_mem_types;
    out->cache_mem_types  = attr.cache_mem_types;
    out->alloc_mem_types  = attr.alloc_mem_types;
    out->access_mem_types = attr.access_mem_types;
    out->reg_cost         = attr.reg_cost;
    out->rkey_packed_size = attr.rkey_packed_size;
    snprintf(out->component_name, sizeof(out->component_name), "%s", component_name(md));
    local_cpus(&out->local_cpus);
#if UCT_TM_UCX_ABI >= 116
    out->reg_alignment = attr.reg_alignment;
#endif
    return UCS_OK;
}
#else
static ucs_status_t md_query(uct_md_h md, uct_md_attr_t *out) {
    MdAttr             attr;
    const ucs_status_t status = header_of(md)->callbacks->query(header_of(md), &attr);
    if (status != UCS_OK) {
        return status;
    }
    memset(out, 0, sizeof(*out));
    out->cap.max_alloc        = attr.max_alloc;
    out->cap.max_reg          = attr.max_reg;
    out->cap.flags            = attr.flags;
    out->cap.reg_mem_types    = attr.reg_mem_types;
    out->cap.alloc_mem_types  = attr.alloc_mem_types;
    out->cap.access_mem_types = attr.access_mem_types;
    out->reg_cost             = attr.reg_cost;
    out->rkey_packed_size     = attr.rkey_packed_size;
    snprintf(out->component_name, sizeof(out->component_name), "%s", component_name(md));
    local_cpus(&out->local_cpus);
    return UCS_OK;
}
#endif

static ucs_status_t mem_alloc(uct_md_h md, size_t *length, void **address,
                              ucs_memory_type_t mem_type, unsigned flags, const char *name,
                              uct_mem_h *memh) {
    if (mem_type != UCS_MEMORY_TYPE_HOST) {
        return UCS_ERR_UNSUPPORTED;
    }
    return header_of(md)->callbacks->mem_alloc(header_of(md), length, address, flags, name, memh);
}

#if UCT_TM_UCX_ABI >= 119
/* Host memory has no system device to allocate on: the argument is not used. */
static ucs_status_t md_mem_alloc(uct_md_h md, size_t *length, void **address,
                                 ucs_memory_type_t mem_type, ucs_sys_device_t, unsigned flags,
                                 const char *name, uct_mem_h *memh) {
    return mem_alloc(md, length, address, mem_type, flags, name, memh);
}
#else
static ucs_status_t md_mem_alloc(uct_md_h md, size_t *length, void **address,
                                 ucs_memory_type_t mem_type, unsigned flags, const char *name,
                                 uct_mem_h *memh) {
    return mem_alloc(md, length, address, mem_type, flags, name, memh);
}
#endif

static ucs_status_t md_mem_free(uct_md_h md, uct_mem_h memh) {
    return header_of(md)->callbacks->mem_free(header_of(md), memh);
}

#if UCT_TM_UCX_ABI >= 114
static ucs_status_t md_mem_reg(uct_md_h md, void *address, size_t length,
                               const uct_md_mem_reg_params_t *params, uct_mem_h *memh) {
    const unsigned flags = ((params != nullptr) && (params->field_mask & UCT_MD_MEM_REG_FIELD_FLAGS))
                               ? static_cast<unsigned>(params->flags) : 0;
    return header_of(md)->callbacks->mem_reg(header_of(md), address, length, flags, memh);
}
#else
static ucs_status_t md_mem_reg(uct_md_h md, void *address, size_t length, unsigned flags,
                               uct_mem_h *memh) {
    return header_of(md)->callbacks->mem_reg(header_of(md), address, length, flags, memh);
}
#endif

static ucs_status_t md_mem_dereg(uct_md_h md, const uct_md_mem_dereg_params_t *params) {
    if ((params == nullptr) || !(params->field_mask & UCT_MD_MEM_DEREG_FIELD_MEMH)) {
        return UCS_ERR_INVALID_PARAM;
    }
    return header_of(md)->callbacks->mem_dereg(header_of(md), params->memh);
}

static ucs_status_t mkey_pack(uct_md_h md, uct_mem_h memh, const uct_md_mkey_pack_params_t *params,
                              void *rkey_buffer) {
#if UCT_TM_UCX_ABI >= 114
    /* Exporting a key for another process to register is not offered (the
     * MD reports no exported key size). */
    if ((params != nullptr) && (params->field_mask & UCT_MD_MKEY_PACK_FIELD_FLAGS) &&
        (params->flags & UCT_MD_MKEY_PACK_FLAG_EXPORT)) {
        return UCS_ERR_UNSUPPORTED;
    }
#else
    (void)params;
#endif
    return header_of(md)->callbacks->mkey_pack(header_of(md), memh, rkey_buffer);
}

#if UCT_TM_UCX_ABI >= 116
/* The key covers the whole registration, which contains [address, length). */
static ucs_status_t md_mkey_pack(uct_md_h md, uct_mem_h memh, void *, size_t,
                                 const uct_md_mkey_pack_params_t *params, void *rkey_buffer) {
    return mkey_pack(md, memh, params, rkey_buffer);
}
#else
static ucs_status_t md_mkey_pack(uct_md_h md, uct_mem_h memh,
                                 const uct_md_mkey_pack_params_t *params, void *rkey_buffer) {
    return mkey_pack(md, memh, params, rkey_buffer);
}
#endif

static ucs_status_t md_unsupported_mem_query(uct_md_h, const void *, size_t, void *) {
    return UCS_ERR_UNSUPPORTED;
}

static ucs_status_t md_unsupported_mem_advise(uct_md_h, uct_mem_h, void *, size_t, unsigned) {
    return UCS_ERR_UNSUPPORTED;
}

static ucs_status_t md_unsupported_detect_memory_type(uct_md_h, const void *, size_t,
                                                      ucs_memory_type_t *) {
    return UCS_ERR_UNSUPPORTED;
}

#if UCT_TM_UCX_ABI >= 114
static ucs_status_t md_unsupported_mem_attach(uct_md_h, const void *, void *, uct_mem_h *) {
    return UCS_ERR_UNSUPPORTED;
}
#endif

#if UCT_TM_UCX_ABI < 116
static int md_is_sockaddr_accessible(uct_md_h, const ucs_sock_addr_t *,
                                     uct_sockaddr_accessibility_t) {
    return 0;
}
#endif

#if UCT_TM_UCX_ABI >= 121
static ucs_status_t md_unsupported_mem_elem_pack(uct_md_h, uct_mem_h, uct_rkey_t, void *) {
    return UCS_ERR_UNSUPPORTED;
}
#endif

static void md_vfs_init(uct_md_h) {}

}  // extern "C"

constexpr uct_md_ops_t make_md_ops() {
    uct_md_ops_t ops{};
    ops.close              = md_close;
    ops.query              = md_query;
    ops.mem_alloc          = md_mem_alloc;
    ops.mem_free           = md_mem_free;
    ops.mem_advise         = md_unsupported_mem_advise;
    ops.mem_reg            = md_mem_reg;
    ops.mem_dereg          = md_mem_dereg;
    ops.mem_query          = md_unsupported_mem_query;
    ops.mkey_pack          = md_mkey_pack;
    ops.detect_memory_type = md_unsupported_detect_memory_type;
#if UCT_TM_UCX_ABI >= 114
    ops.mem_attach = md_unsupported_mem_attach;
#endif
#if UCT_TM_UCX_ABI < 116
    ops.is_sockaddr_accessible = md_is_sockaddr_accessible;
#endif
#if UCT_TM_UCX_ABI >= 121
    ops.mem_elem_pack = md_unsupported_mem_elem_pack;
#endif
    return ops;
}

/* Constant-initialized, like every table below: the components register
 * from an ELF constructor, before other translation units' dynamic
 * initializers are guaranteed to have run. */
constexpr uct_md_ops_t md_ops = make_md_ops();

/* ---- components --------------------------------------------------------------- */

constexpr unsigned kMaxMds        = 16;
constexpr int      kMaxComponents = 4;

/* libuct passes its component back to every component operation: the slot
 * is found from it, so one set of operations serves every component. */
struct ComponentSlot {
    uct_component        component; /* first: libuct's pointer is the slot's */
    const ComponentDesc *desc;
};
static_assert(std::is_standard_layout<ComponentSlot>::value &&
                  (offsetof(ComponentSlot, component) == 0),
              "ComponentSlot::component");

ComponentSlot components[kMaxComponents];
int           num_components = 0;

const ComponentDesc &desc_of(uct_component_t *component) {
    return *reinterpret_cast<ComponentSlot *>(component)->desc;
}

/* The registered slot of `desc`, or null. */
ComponentSlot *slot_of(const ComponentDesc &desc) {
    for (int i = 0; i < num_components; ++i) {
        if (components[i].desc == &desc) {
            return &components[i];
        }
    }
    return nullptr;
}

/* uct-tm's MDs have no settings, but libuct reads a table for each. */
ucs_config_field_t no_md_settings[] = {{}};

extern "C" {

static ucs_status_t component_query_md_resources(uct_component_t *component,
                                                 uct_md_resource_desc_t **resources,
                                                 unsigned *count) {
    char           names[kMaxMds][UCT_MD_NAME_MAX];
    const unsigned n = desc_of(component).md_names(names, kMaxMds);
    /* libuct releases the list with ucs_free() */
    auto *list = static_cast<uct_md_resource_desc_t *>(
        ucs_malloc(sizeof(uct_md_resource_desc_t) * (n ? n : 1), "tm md resources"));
    if (list == nullptr) {
        return UCS_ERR_NO_MEMORY;
    }
    for (unsigned i = 0; i < n; ++i) {
        memcpy(list[i].md_name, names[i], UCT_MD_NAME_MAX);
    }
    *resources = list;
    *count     = n;
    return UCS_OK;
}

static ucs_status_t component_md_open(uct_component_t *component, const char *md_name,
                                      const uct_md_config_t *config, uct_md_h *md) {
    return desc_of(component).md_open(md_name, config, md);
}

static ucs_status_t component_cm_open(uct_component_t *, uct_worker_h, const uct_cm_config_t *,
                                      uct_cm_h *) {
    return UCS_ERR_UNSUPPORTED;
}

#if UCT_TM_UCX_ABI >= 119
/* The unpack parameters name a system device to access the memory from:
 * host memory is reached the same way from everywhere. */
static ucs_status_t component_rkey_unpack(uct_component_t *component, const void *rkey_buffer,
                                          const void *, uct_rkey_t *rkey, void **handle) {
    return desc_of(component).rkey_unpack(rkey_buffer, rkey, handle);
}
#else
static ucs_status_t component_rkey_unpack(uct_component_t *component, const void *rkey_buffer,
                                          uct_rkey_t *rkey, void **handle) {
    return desc_of(component).rkey_unpack(rkey_buffer, rkey, handle);
}
#endif

static ucs_status_t component_rkey_ptr(uct_component_t *component, uct_rkey_t rkey, void *handle,
                                       uint64_t raddr, void **laddr) {
    return desc_of(component).rkey_ptr(rkey, handle, raddr, laddr);
}

static ucs_status_t component_rkey_release(uct_component_t *component, uct_rkey_t rkey,
                                           void *handle) {
    return desc_of(component).rkey_release(rkey, handle);
}

#if UCT_TM_UCX_ABI >= 116
/* Two unpacked keys are the same key exactly when they are the same object. */
static ucs_status_t component_rkey_compare(uct_component_t *, uct_rkey_t rkey1, uct_rkey_t rkey2,
                                           const void *, int *result) {
    if (result == nullptr) {
        return UCS_ERR_INVALID_PARAM;
    }
    *result = (rkey1 > rkey2) - (rkey1 < rkey2);
    return UCS_OK;
}
#endif

}  // extern "C"

/* ---- transports ---------------------------------------------------------------- */

constexpr int kMaxTransports = 8;
uct_tl_t             tls[kMaxTransports];
const TransportDesc *tl_descs[kMaxTransports];
int                  num_tls = 0;

static_assert(sizeof(DeviceDesc) == sizeof(uct_tl_device_resource_t), "DeviceDesc layout");
static_assert(offsetof(DeviceDesc, type) == offsetof(uct_tl_device_resource_t, type),
              "DeviceDesc::type");
static_assert(offsetof(DeviceDesc, sys_device) == offsetof(uct_tl_device_resource_t, sys_device),
              "DeviceDesc::sys_device");

/* libuct's query_devices has no per-transport argument: one trampoline each. */
template <int I>
ucs_status_t query_devices(uct_md_h md, uct_tl_device_resource_t **devices, unsigned *count) {
    DeviceDesc     found[kMaxDevices];
    const unsigned n = tl_descs[I]->devices(md, found);
    /* libuct releases the list with ucs_free() */
    auto *list = static_cast<uct_tl_device_resource_t *>(
        ucs_malloc(sizeof(uct_tl_device_resource_t) * (n ? n : 1), "tm devices"));
    if (list == nullptr) {
        return UCS_ERR_NO_MEMORY;
    }
    memcpy(list, found, sizeof(DeviceDesc) * n);
    *devices = list;
    *count   = n;
    return UCS_OK;
}

/* ---- internal iface operations ---------------------------------------------------- */

extern "C" {

static void iface_vfs_refresh(uct_iface_h) {}

static ucs_status_t ep_unsupported_query(uct_ep_h, void *) { return UCS_ERR_UNSUPPORTED; }

#if UCT_TM_UCX_ABI >= 121
static ucs_status_t ep_unsupported_invalidate(uct_ep_h, const void *) { return UCS_ERR_UNSUPPORTED; }
#else
static ucs_status_t ep_unsupported_invalidate(uct_ep_h, unsigned) { return UCS_ERR_UNSUPPORTED; }
#endif

#if UCT_TM_UCX_ABI >= 114
/* The parameters carry only the addresses' lengths, which every transport
 * of uct-tm knows: the v1 operation does the work. */
static ucs_status_t ep_connect_to_ep_v2(uct_ep_h ep, const uct_device_addr_t *device_addr,
                                        const uct_ep_addr_t *ep_addr, const void *) {
    return ep->iface->ops.ep_connect_to_ep(ep, device_addr, ep_addr);
}
#endif

#if UCT_TM_UCX_ABI >= 115
void reachability_info(const uct_iface_is_reachable_params_t *params, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));

void reachability_info(const uct_iface_is_reachable_params_t *params, const char *fmt, ...) {
    if (!(params->field_mask & UCT_IFACE_IS_REACHABLE_FIELD_INFO_STRING) ||
        (params->info_string == nullptr)) {
        return;
    }
    const size_t length = (params->field_mask & UCT_IFACE_IS_REACHABLE_FIELD_INFO_STRING_LENGTH)
                              ? params->info_string_length : 0;
    if (length == 0) {
        return;
    }
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(params->info_string, length, fmt, ap);
    va_end(ap);
}

/* True if `device_addr` is the iface's own device address. */
bool same_device(uct_iface_h iface, const uct_device_addr_t *device_addr) {
    uct_iface_attr_t attr;
    if (iface->ops.iface_query(iface, &attr) != UCS_OK) {
        return false;
    }
    auto *own = static_cast<uct_device_addr_t *>(alloca(attr.device_addr_len + 1));
    return (iface->ops.iface_get_device_address(iface, own) == UCS_OK) &&
           (memcmp(own, device_addr, attr.device_addr_len) == 0);
}

/* The v1 check of the transport, then the scope: a peer on the network is
 * reachable if the transport says so; "same device" also needs the same
 * device address. */
static int iface_is_reachable_v2(const uct_iface_h iface,
                                 const uct_iface_is_reachable_params_t *params) {
    if ((params == nullptr) || !(params->field_mask & UCT_IFACE_IS_REACHABLE_FIELD_DEVICE_ADDR) ||
        (params->device_addr == nullptr)) {
        return 0;
    }
    if ((params->field_mask & UCT_IFACE_IS_REACHABLE_FIELD_INFO_STRING) &&
        (params->info_string != nullptr) &&
        (params->field_mask & UCT_IFACE_IS_REACHABLE_FIELD_INFO_STRING_LENGTH) &&
        (params->info_string_length > 0)) {
        params->info_string[0] = '\0';
    }
    const uct_iface_addr_t *iface_addr =
        (params->field_mask & UCT_IFACE_IS_REACHABLE_FIELD_IFACE_ADDR) ? params->iface_addr : nullptr;
    if (!iface->ops.iface_is_reachable(iface, params->device_addr, iface_addr)) {
        reachability_info(params, "tm: peer on another host, or not accessible to this user");
        return 0;
    }
    const int scope = (params->field_mask & UCT_IFACE_IS_REACHABLE_FIELD_SCOPE)
                          ? params->scope : UCT_IFACE_REACHABILITY_SCOPE_NETWORK;
    if ((scope == UCT_IFACE_REACHABILITY_SCOPE_DEVICE) && !same_device(iface, params->device_addr)) {
        reachability_info(params, "tm: device address is different");
        return 0;
    }
    return 1;
}
#endif

#if UCT_TM_UCX_ABI >= 120
static ucs_status_t ep_unsupported_get_device_ep(uct_ep_h, void **) { return UCS_ERR_UNSUPPORTED; }
#endif

#if UCT_TM_UCX_ABI == 120
static ucs_status_t iface_unsupported_mem_element_pack(const uct_iface_h, uct_mem_h, uct_rkey_t,
                                                       void *) {
    return UCS_ERR_UNSUPPORTED;
}

static ucs_status_t iface_query_v2(uct_iface_h, uct_iface_attr_v2_t *attr) {
    if (attr == nullptr) {
        return UCS_ERR_INVALID_PARAM;
    }
    attr->device_mem_element_size = 0; /* no device-side memory elements */
    return UCS_OK;
}
#elif UCT_TM_UCX_ABI >= 122
/* No scatter-gather put, no tokens: every capability of the v2 query is off. */
static ucs_status_t iface_query_v2(uct_iface_h, uct_iface_attr_v2_t *attr) {
    if (attr == nullptr) {
        return UCS_ERR_INVALID_PARAM;
    }
    const uint64_t mask = attr->field_mask;
    if (mask & UCT_IFACE_ATTR_FIELD_MAX_PUT_SGL_ZCOPY_COUNT) {
        attr->max_put_sgl_zcopy_count = 0;
    }
    if (mask & UCT_IFACE_ATTR_FIELD_CAP_FLAGS) {
        attr->cap.flags = 0;
    }
    if (mask & UCT_IFACE_ATTR_FIELD_TX_TOKEN_LENGTH) {
        attr->tx_token_length = 0;
    }
    if (mask & UCT_IFACE_ATTR_FIELD_RX_TOKEN_LENGTH) {
        attr->rx_token_length = 0;
    }
    if (mask & UCT_IFACE_ATTR_FIELD_TX_TOKEN) {
        attr->tx_token = nullptr;
    }
    if (mask & UCT_IFACE_ATTR_FIELD_RX_TOKEN) {
        attr->rx_token = nullptr;
    }
    return UCS_OK;
}

static ucs_status_t ep_unsupported_put_sgl_zcopy(uct_ep_h, void *const *, const size_t *,
                                                 uct_mem_h const *, const uint64_t *,
                                                 uct_rkey_t const *, const size_t *,
                                                 const size_t *, size_t, uct_completion_t *) {
    return UCS_ERR_UNSUPPORTED;
}
#endif

}  // extern "C"

static_assert(static_cast<int>(EpOperation::kEagerShort) == UCT_EP_OP_EAGER_SHORT, "EpOperation");
static_assert(static_cast<int>(EpOperation::kRndvZcopy) == UCT_EP_OP_RNDV_ZCOPY, "EpOperation");
static_assert(static_cast<int>(EpOperation::kAny) == UCT_EP_OP_LAST, "EpOperation");

/* The figures of the iface's own attributes, adjusted per operation by the
 * transport (UCP's v2 engine picks a protocol by comparing them); libuct's
 * base implementation answers the unadjusted ones, and from 1.16 on libuct
 * no longer exports a table of its defaults. */
template <int I>
ucs_status_t iface_estimate_perf(uct_iface_h iface, uct_perf_attr_t *perf) {
    if (perf == nullptr) {
        return UCS_ERR_INVALID_PARAM;
    }
    uct_iface_attr_t   attr;
    const ucs_status_t status = iface->ops.iface_query(iface, &attr);
    if (status != UCS_OK) {
        return status;
    }
    const uint64_t mask = perf->field_mask;
    PerfEstimate   est  = {attr.overhead, 0, attr.overhead, attr.bandwidth, attr.latency};
    const int      op   = (mask & UCT_PERF_ATTR_FIELD_OPERATION) ? static_cast<int>(perf->operation)
                                                                       : UCT_EP_OP_LAST;
    if (tl_descs[I]->estimate != nullptr) {
        tl_descs[I]->estimate(iface,
                              ((op >= 0) && (op < UCT_EP_OP_LAST)) ? static_cast<EpOperation>(op)
                                                                   : EpOperation::kAny,
                              &est);
    }
    if (mask & UCT_PERF_ATTR_FIELD_SEND_PRE_OVERHEAD) {
        perf->send_pre_overhead = est.send_pre_overhead;
    }
    if (mask & UCT_PERF_ATTR_FIELD_SEND_POST_OVERHEAD) {
        perf->send_post_overhead = est.send_post_overhead;
    }
    if (mask & UCT_PERF_ATTR_FIELD_RECV_OVERHEAD) {
        perf->recv_overhead = est.recv_overhead;
    }
    if (mask & UCT_PERF_ATTR_FIELD_BANDWIDTH) {
        perf->bandwidth = est.bandwidth;
    }
#if UCT_TM_UCX_ABI >= 119
    if (mask & UCT_PERF_ATTR_FIELD_PATH_BANDWIDTH) {
        perf->path_bandwidth = est.bandwidth;
    }
#endif
    if (mask & UCT_PERF_ATTR_FIELD_LATENCY) {
        perf->latency = est.latency;
    }
    if (mask & UCT_PERF_ATTR_FIELD_MAX_INFLIGHT_EPS) {
        perf->max_inflight_eps = SIZE_MAX;
    }
#if UCT_TM_UCX_ABI >= 117
    if (mask & UCT_PERF_ATTR_FIELD_FLAGS) {
        perf->flags = 0;
    }
#endif
    return UCS_OK;
}

#if UCT_TM_UCX_ABI >= 116
/* ep_is_connected has no per-transport argument either: one trampoline each. */
template <int I>
int ep_is_connected(uct_ep_h ep, const uct_ep_is_connected_params_t *params) {
    if ((ep == nullptr) || (params == nullptr) || (tl_descs[I]->ep_is_connected == nullptr)) {
        return 0;
    }
    const uint64_t mask = params->field_mask;
    return tl_descs[I]->ep_is_connected(
        ep, (mask & UCT_EP_IS_CONNECTED_FIELD_DEVICE_ADDR) ? params->device_addr : nullptr,
        (mask & UCT_EP_IS_CONNECTED_FIELD_IFACE_ADDR) ? params->iface_addr : nullptr,
        (mask & UCT_EP_IS_CONNECTED_FIELD_EP_ADDR) ? params->ep_addr : nullptr);
}
#endif

template <int I>
constexpr uct_iface_internal_ops_t make_internal_ops() {
    uct_iface_internal_ops_t ops{};
    ops.iface_estimate_perf = iface_estimate_perf<I>;
    ops.iface_vfs_refresh   = iface_vfs_refresh;
    ops.ep_query            = ep_unsupported_query;
    ops.ep_invalidate       = ep_unsupported_invalidate;
#if UCT_TM_UCX_ABI >= 114
    ops.ep_connect_to_ep_v2 = ep_connect_to_ep_v2;
#endif
#if UCT_TM_UCX_ABI >= 115
    ops.iface_is_reachable_v2 = iface_is_reachable_v2;
#endif
#if UCT_TM_UCX_ABI >= 116
    ops.ep_is_connected = ep_is_connected<I>;
#endif
#if UCT_TM_UCX_ABI >= 120
    ops.ep_get_device_ep = ep_unsupported_get_device_ep;
#endif
#if UCT_TM_UCX_ABI == 120
    ops.iface_query_v2         = iface_query_v2;
    ops.iface_mem_element_pack = iface_unsupported_mem_element_pack;
#elif UCT_TM_UCX_ABI >= 122
    ops.iface_query_v2   = iface_query_v2;
    ops.ep_put_sgl_zcopy = ep_unsupported_put_sgl_zcopy;
#endif
    return ops;
}

/* One table per transport slot: query_devices and the internal operations. */
struct TransportSlot {
    ucs_status_t (*query_devices)(uct_md_h, uct_tl_device_resource_t **, unsigned *);
    uct_iface_internal_ops_t internal_ops;
};

template <int... I>
constexpr auto make_slots(std::integer_sequence<int, I...>) {
    return std::array<TransportSlot, sizeof...(I)>{
        TransportSlot{&query_devices<I>, make_internal_ops<I>()}...};
}
constexpr auto slots = make_slots(std::make_integer_sequence<int, kMaxTransports>());

}  // namespace

void init_md_header(MdHeader *md, const ComponentDesc &component, const MdCallbacks *callbacks) {
    ComponentSlot *slot = slot_of(component);
    md->ucx_ops         = &md_ops; /* libuct only reads it */
    md->ucx_component   = (slot != nullptr) ? &slot->component : nullptr;
    md->callbacks       = callbacks;
}

ucs_status_t register_component(const ComponentDesc &desc) {
    if (slot_of(desc) != nullptr) {
        return UCS_ERR_ALREADY_EXISTS;
    }
    if ((num_components == kMaxComponents) || (strlen(desc.name) >= UCT_COMPONENT_NAME_MAX)) {
        return UCS_ERR_EXCEEDS_LIMIT;
    }
    /* The one layout fact libuct publishes about itself: a UCX built with
     * statistics or debug data has a larger base iface than the mirror, and
     * every iface would overlap libuct's fields. */
    if (uct_base_iface_t_class.size != sizeof(uct_base_iface_t)) {
        ucs_error("uct-tm: this libuct's base interface is %zu bytes, uct-tm mirrors UCX %u.%u's "
                  "%zu (a UCX configured with --enable-stats or --enable-debug-data?): "
                  "component \"%s\" is not registered",
                  static_cast<size_t>(uct_base_iface_t_class.size), kUcxRelease / 100, kUcxRelease % 100,
                  sizeof(uct_base_iface_t), desc.name);
        return UCS_ERR_UNSUPPORTED;
    }
    ComponentSlot &slot      = components[num_components++];
    uct_component &component = slot.component;
    slot.desc                = &desc;
    memset(&component, 0, sizeof(component));
    strcpy(component.name, desc.name);
    component.query_md_resources = component_query_md_resources;
    component.md_open            = component_md_open;
    component.cm_open            = component_cm_open;
    component.rkey_unpack        = component_rkey_unpack;
    component.rkey_ptr           = component_rkey_ptr;
    component.rkey_release       = component_rkey_release;
#if UCT_TM_UCX_ABI >= 116
    component.rkey_compare = component_rkey_compare;
#endif
    component.md_config.name   = desc.md_config_name;
    component.md_config.prefix = desc.md_config_prefix;
    component.md_config.table  = no_md_settings;
    component.md_config.size   = 1; /* libuct allocates it; nothing is read from it */
    /* No connection manager: an empty entry (no table), as libuct's own
     * UCS_CONFIG_EMPTY_GLOBAL_LIST_ENTRY, without its missing initializers. */
    component.cm_config.name   = "";
    component.cm_config.prefix = "";
    ucs_list_head_init(&component.tl_list);
    component.flags       = 0;
    component.md_vfs_init = md_vfs_init;
    uct_component_register(&component);
    return UCS_OK;
}

bool register_family(const ComponentDesc &component, ucs_status_t (*add_transport)(),
                     const char          *transport) {
    ucs_status_t status = register_component(component);
    if (status != UCS_OK) {
        ucs_error("uct-tm: registering component \"%s\" with libuct failed: %s", component.name,
                  ucs_status_string(status));
        return false;
    }
    status = add_transport();
    if (status != UCS_OK) {
        ucs_error("uct-tm: registering transport %s failed: %s", transport,
                  ucs_status_string(status));
    }
    return true;
}

ucs_status_t register_transport(const ComponentDesc &component, const TransportDesc &desc) {
    ComponentSlot *slot = slot_of(component);
    if (slot == nullptr) {
        return UCS_ERR_NO_ELEM;
    }
    if ((num_tls == kMaxTransports) || (strlen(desc.name) >= UCT_TL_NAME_MAX)) {
        return UCS_ERR_EXCEEDS_LIMIT;
    }
    const int i  = num_tls++;
    tl_descs[i]  = &desc;
    uct_tl_t &tl = tls[i];
    memset(&tl, 0, sizeof(tl));
    strcpy(tl.name, desc.name);
    tl.query_devices = slots[i].query_devices;
    tl.iface_open    = desc.iface_open;
    tl.config.name   = desc.config_name;
    tl.config.prefix = desc.config_prefix;
    tl.config.table  = desc.config_table;
    tl.config.size   = desc.config_size;
    uct_tl_register(&slot->component, &tl);
    return UCS_OK;
}

ucs_status_t init_base_iface(BaseIface *base, const TransportDesc &transport,
                             const uct_iface_ops_t &ops, uct_md_h md, uct_worker_h worker,
                             const uct_iface_params_t *params, const uct_iface_config_t *config) {
    int slot = 0;
    while ((slot < num_tls) && (tl_descs[slot] != &transport)) {
        ++slot;
    }
    if (slot == num_tls) {
        return UCS_ERR_NO_ELEM; /* not a registered transport */
    }
    memset(base, 0, sizeof(*base));
    int init_count = 1;
    /* libuct copies the ops table into the iface; the argument is not modified. */
    const ucs_status_t status =
        uct_base_iface_t_init(base_of(base), &uct_base_iface_t_class, &init_count,
                              const_cast<uct_iface_ops_t *>(&ops),
                              const_cast<uct_iface_internal_ops_t *>(&slots[slot].internal_ops),
                              md, worker, params, config);
    if (status != UCS_OK) {
        ucs_class_call_cleanup_chain(&uct_base_iface_t_class, base, init_count);
    }
    return status;
}

void cleanup_base_iface(BaseIface *base) {
    ucs_class_call_cleanup_chain(&uct_base_iface_t_class, base, -1);
}

ucs_status_t invoke_am(BaseIface *base, uint8_t id, void *data, unsigned length, unsigned flags) {
    const uct_am_handler_t &handler = base_of(base)->am[id & (UCT_AM_ID_MAX - 1)];
    return handler.cb(handler.arg, data, length, flags);
}

static_assert((sizeof(AmHandler) == sizeof(uct_am_handler_t)) &&
                  (offsetof(AmHandler, cb) == offsetof(uct_am_handler_t, cb)) &&
                  (offsetof(AmHandler, arg) == offsetof(uct_am_handler_t, arg)) &&
                  (offsetof(AmHandler, flags) == offsetof(uct_am_handler_t, flags)),
              "AmHandler mirrors uct_am_handler_t");

const AmHandler *am_handlers(BaseIface *base) {
    return reinterpret_cast<const AmHandler *>(base_of(base)->am);
}

ucs_status_t handle_ep_error(BaseIface *base, uct_ep_h ep, ucs_status_t status) {
    return uct_iface_handle_ep_err(to_uct(base), ep, status);
}

void progress_enable(uct_iface_h iface, unsigned flags) {
    uct_base_iface_progress_enable(iface, flags);
}

void progress_disable(uct_iface_h iface, unsigned flags) {
    uct_base_iface_progress_disable(iface, flags);
}

}  // namespace abi
}  // namespace uct_tm
