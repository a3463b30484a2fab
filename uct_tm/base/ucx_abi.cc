/*
 * The only translation unit that sees UCX's private layouts: adapts uct-tm's
 * descriptors to libuct's component, MD, transport and base-iface structures.
 */
#include "ucx_abi.h"

#if UCT_TM_UCX_ABI == 113
#include "../compat/ucx_1_13.h"
#endif

#include <ucs/debug/log_def.h>

#include <array>
#include <cstring>
#include <new>
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

/* ---- md ops: UCX signatures -> MdCallbacks ----------------------------------- */

extern "C" {

static void md_close(uct_md_h md) { header_of(md)->callbacks->close(header_of(md)); }

static ucs_status_t md_query(uct_md_h md, uct_md_attr_t *attr) {
    return header_of(md)->callbacks->query(header_of(md), attr);
}

static ucs_status_t md_mem_alloc(uct_md_h md, size_t *length, void **address,
                                 ucs_memory_type_t mem_type, unsigned flags, const char *name,
                                 uct_mem_h *memh) {
    if (mem_type != UCS_MEMORY_TYPE_HOST) {
        return UCS_ERR_UNSUPPORTED;
    }
    return header_of(md)->callbacks->mem_alloc(header_of(md), length, address, flags, name, memh);
}

static ucs_status_t md_mem_free(uct_md_h md, uct_mem_h memh) {
    return header_of(md)->callbacks->mem_free(header_of(md), memh);
}

static ucs_status_t md_mem_reg(uct_md_h md, void *address, size_t length, unsigned flags,
                               uct_mem_h *memh) {
    return header_of(md)->callbacks->mem_reg(header_of(md), address, length, flags, memh);
}

static ucs_status_t md_mem_dereg(uct_md_h md, const uct_md_mem_dereg_params_t *params) {
    if ((params == nullptr) || !(params->field_mask & UCT_MD_MEM_DEREG_FIELD_MEMH)) {
        return UCS_ERR_INVALID_PARAM;
    }
    return header_of(md)->callbacks->mem_dereg(header_of(md), params->memh);
}

static ucs_status_t md_mkey_pack(uct_md_h md, uct_mem_h memh, const uct_md_mkey_pack_params_t *,
                                 void *rkey_buffer) {
    return header_of(md)->callbacks->mkey_pack(header_of(md), memh, rkey_buffer);
}

static ucs_status_t md_detect_memory_type(uct_md_h, const void *, size_t, ucs_memory_type_t *) {
    return UCS_ERR_UNSUPPORTED;
}

static ucs_status_t md_mem_query(uct_md_h, const void *, size_t, uct_md_mem_attr_t *) {
    return UCS_ERR_UNSUPPORTED;
}

static ucs_status_t md_mem_advise(uct_md_h, uct_mem_h, void *, size_t, unsigned) {
    return UCS_ERR_UNSUPPORTED;
}

static int md_is_sockaddr_accessible(uct_md_h, const ucs_sock_addr_t *,
                                     uct_sockaddr_accessibility_t) {
    return 0;
}

static void md_vfs_init(uct_md_h) {}

}  // extern "C"

uct_md_ops_t md_ops = {
    md_close,     md_query,    md_mem_alloc,              md_mem_free,
    md_mem_advise, md_mem_reg, md_mem_dereg,              md_mem_query,
    md_mkey_pack, md_is_sockaddr_accessible, md_detect_memory_type,
};

/* ---- the component ----------------------------------------------------------- */

constexpr unsigned kMaxMds = 16;

const ComponentDesc *component_desc = nullptr;
uct_component        component;
bool                 component_registered = false;

extern "C" {

static ucs_status_t component_query_md_resources(uct_component_t *,
                                                 uct_md_resource_desc_t **resources,
                                                 unsigned *count) {
    char           names[kMaxMds][UCT_MD_NAME_MAX];
    const unsigned n = component_desc->md_names(names, kMaxMds);
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

static ucs_status_t component_md_open(uct_component_t *, const char *md_name,
                                      const uct_md_config_t *config, uct_md_h *md) {
    return component_desc->md_open(md_name, config, md);
}

static ucs_status_t component_cm_open(uct_component_t *, uct_worker_h, const uct_cm_config_t *,
                                      uct_cm_h *) {
    return UCS_ERR_UNSUPPORTED;
}

static ucs_status_t component_rkey_unpack(uct_component_t *, const void *rkey_buffer,
                                          uct_rkey_t *rkey, void **handle) {
    return component_desc->rkey_unpack(rkey_buffer, rkey, handle);
}

static ucs_status_t component_rkey_ptr(uct_component_t *, uct_rkey_t rkey, void *handle,
                                       uint64_t raddr, void **laddr) {
    return component_desc->rkey_ptr(rkey, handle, raddr, laddr);
}

static ucs_status_t component_rkey_release(uct_component_t *, uct_rkey_t rkey, void *handle) {
    return component_desc->rkey_release(rkey, handle);
}

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

template <int... I>
constexpr auto make_query_table(std::integer_sequence<int, I...>) {
    using Fn = ucs_status_t (*)(uct_md_h, uct_tl_device_resource_t **, unsigned *);
    return std::array<Fn, sizeof...(I)>{&query_devices<I>...};
}
constexpr auto query_table = make_query_table(std::make_integer_sequence<int, kMaxTransports>());

}  // namespace

void init_md_header(MdHeader *md, const MdCallbacks *callbacks) {
    md->ucx_ops       = &md_ops;
    md->ucx_component = &component;
    md->callbacks     = callbacks;
}

ucs_status_t register_component(const ComponentDesc &desc) {
    if (component_registered) {
        return UCS_ERR_ALREADY_EXISTS;
    }
    if (strlen(desc.name) >= UCT_COMPONENT_NAME_MAX) {
        return UCS_ERR_INVALID_PARAM;
    }
    component_desc = &desc;
    memset(&component, 0, sizeof(component));
    strcpy(component.name, desc.name);
    component.query_md_resources = component_query_md_resources;
    component.md_open            = component_md_open;
    component.cm_open            = component_cm_open;
    component.rkey_unpack        = component_rkey_unpack;
    component.rkey_ptr           = component_rkey_ptr;
    component.rkey_release       = component_rkey_release;
    component.md_config.name     = desc.md_config_name;
    component.md_config.prefix   = desc.md_config_prefix;
    component.md_config.table    = desc.md_config_table;
    component.md_config.size     = desc.md_config_size;
    component.cm_config          = UCS_CONFIG_EMPTY_GLOBAL_LIST_ENTRY;
    ucs_list_head_init(&component.tl_list);
    component.flags       = 0;
    component.md_vfs_init = md_vfs_init;
    uct_component_register(&component);
    component_registered = true;
    return UCS_OK;
}

ucs_status_t register_transport(const TransportDesc &desc) {
    if (!component_registered) {
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
    tl.query_devices  = query_table[i];
    tl.iface_open     = desc.iface_open;
    tl.config.name    = desc.config_name;
    tl.config.prefix  = desc.config_prefix;
    tl.config.table   = desc.config_table;
    tl.config.size    = desc.config_size;
    uct_tl_register(&component, &tl);
    return UCS_OK;
}

ucs_status_t init_base_iface(BaseIface *base, const uct_iface_ops_t &ops, uct_md_h md,
                             uct_worker_h worker, const uct_iface_params_t *params,
                             const uct_iface_config_t *config) {
    memset(base, 0, sizeof(*base));
    int init_count = 1;
    /* libuct copies the ops table into the iface; the argument is not modified. */
    const ucs_status_t status =
        uct_base_iface_t_init(base_of(base), &uct_base_iface_t_class, &init_count,
                              const_cast<uct_iface_ops_t *>(&ops), &uct_base_iface_internal_ops,
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
