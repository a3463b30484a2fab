/*
 * UCX 1.13 internal layouts that an out-of-tree UCT component must mirror.
 *
 * libuct casts every uct_iface_h to its private uct_base_iface_t, every uct_md_h
 * to struct uct_md, and walks component and transport descriptors it does not
 * install headers for. These declarations repeat those layouts for the 1.13
 * ABI (Debian 12's libucx0 1.13.1: no statistics, so no stats fields). Sizes
 * and offsets were read off the shipped binaries (uct_base_iface_t_class.size,
 * the disassembly of uct_base_iface_t_init, uct_tcp_component's contents) and
 * are pinned by the static assertions at the end; tests/uct/test_ucx_abi.cc
 * checks them again at run time against libuct.
 *
 * Included only by uct_tm/base/ucx_abi.cc. Another UCX ABI range gets its own
 * header next to this one, selected by configure (UCT_TM_UCX_ABI).
 */
#ifndef UCT_TM_COMPAT_UCX_1_13_H_
#define UCT_TM_COMPAT_UCX_1_13_H_

#include <uct/api/uct.h>
#include <ucs/config/parser.h>
#include <ucs/datastruct/list.h>
#include <ucs/sys/topo/base/topo.h>
#include <ucs/type/class.h>

#include <cstddef>

/* ---- UCX's incomplete public types, completed ----------------------------------- */

typedef struct uct_component uct_component_t;

namespace uct_tm {
namespace compat {
struct uct_md_ops_t;
}
}

struct uct_md {
    uct_tm::compat::uct_md_ops_t *ops;
    uct_component_t              *component;
};

struct uct_component {
    char name[UCT_COMPONENT_NAME_MAX];
    ucs_status_t (*query_md_resources)(uct_component_t *component,
                                       uct_md_resource_desc_t **resources_p,
                                       unsigned *num_resources_p);
    ucs_status_t (*md_open)(uct_component_t *component, const char *md_name,
                            const uct_md_config_t *config, uct_md_h *md_p);
    ucs_status_t (*cm_open)(uct_component_t *component, uct_worker_h worker,
                            const uct_cm_config_t *config, uct_cm_h *cm_p);
    ucs_status_t (*rkey_unpack)(uct_component_t *component, const void *rkey_buffer,
                                uct_rkey_t *rkey_p, void **handle_p);
    ucs_status_t (*rkey_ptr)(uct_component_t *component, uct_rkey_t rkey, void *handle,
                             uint64_t raddr, void **laddr_p);
    ucs_status_t (*rkey_release)(uct_component_t *component, uct_rkey_t rkey, void *handle);
    ucs_config_global_list_entry_t md_config;
    ucs_config_global_list_entry_t cm_config;
    ucs_list_link_t                tl_list;
    ucs_list_link_t                list;
    uint64_t                       flags;
    void (*md_vfs_init)(uct_md_h md);
};

struct uct_iface_config {
    struct {
        uct_alloc_method_t *methods;
        unsigned            count;
    } alloc_methods;
    int    failure;
    size_t max_num_eps;
};

namespace uct_tm {
namespace compat {

/* ---- memory domain ---------------------------------------------------- */

/* uct_v2.h (not installed): parameters of the v2-style md ops. */
struct uct_md_mem_dereg_params_t {
    uint64_t          field_mask;
    unsigned          flags;
    uct_mem_h         memh;
    uct_completion_t *comp;
};
/* Bit 0: libuct 1.13.1's uct_md_mem_dereg() passes field_mask 1 with memh
 * alone (seen in its code; tests/uct checks dereg through libuct). */
enum { UCT_MD_MEM_DEREG_FIELD_MEMH = 1u << 0 };

struct uct_md_mkey_pack_params_t {
    uint64_t field_mask;
    unsigned flags;
};

struct uct_md_ops_t {
    void (*close)(uct_md_h md);
    ucs_status_t (*query)(uct_md_h md, uct_md_attr_t *md_attr);
    ucs_status_t (*mem_alloc)(uct_md_h md, size_t *length_p, void **address_p,
                              ucs_memory_type_t mem_type, unsigned flags,
                              const char *alloc_name, uct_mem_h *memh_p);
    ucs_status_t (*mem_free)(uct_md_h md, uct_mem_h memh);
    ucs_status_t (*mem_advise)(uct_md_h md, uct_mem_h memh, void *addr, size_t length,
                               unsigned advice);
    ucs_status_t (*mem_reg)(uct_md_h md, void *address, size_t length, unsigned flags,
                            uct_mem_h *memh_p);
    ucs_status_t (*mem_dereg)(uct_md_h md, const uct_md_mem_dereg_params_t *params);
    ucs_status_t (*mem_query)(uct_md_h md, const void *addr, size_t length,
                              uct_md_mem_attr_t *mem_attr_p);
    ucs_status_t (*mkey_pack)(uct_md_h md, uct_mem_h memh,
                              const uct_md_mkey_pack_params_t *params, void *rkey_buffer);
    int (*is_sockaddr_accessible)(uct_md_h md, const ucs_sock_addr_t *sockaddr,
                                  uct_sockaddr_accessibility_t mode);
    ucs_status_t (*detect_memory_type)(uct_md_h md, const void *addr, size_t length,
                                       ucs_memory_type_t *mem_type_p);
};


/* ---- component and transports ---------------------------------------- */


struct uct_tl_device_resource_t {
    char              name[UCT_DEVICE_NAME_MAX];
    uct_device_type_t type;
    ucs_sys_device_t  sys_device;
};

struct uct_tl_t {
    char name[UCT_TL_NAME_MAX];
    ucs_status_t (*query_devices)(uct_md_h md, uct_tl_device_resource_t **tl_devices_p,
                                  unsigned *num_tl_devices_p);
    ucs_status_t (*iface_open)(uct_md_h md, uct_worker_h worker,
                               const uct_iface_params_t *params,
                               const uct_iface_config_t *config, uct_iface_h *iface_p);
    ucs_config_global_list_entry_t config;
    ucs_list_link_t                list;
};

/* ---- interfaces ---------------------------------------------------------- */

struct uct_iface_internal_ops_t {
    ucs_status_t (*iface_estimate_perf)(uct_iface_h iface, void *perf_attr);
    void (*iface_vfs_refresh)(uct_iface_h iface);
    ucs_status_t (*ep_query)(uct_ep_h ep, void *ep_attr);
    ucs_status_t (*ep_invalidate)(uct_ep_h ep, unsigned flags);
};

struct uct_am_handler_t {
    uct_am_callback_t cb;
    void             *arg;
    uint32_t          flags;
};

struct uct_worker_progress_t {
    uint32_t id;
    uint32_t refcount;
};

struct uct_base_iface_t {
    uct_iface_t               super;
    uct_iface_internal_ops_t *internal_ops;
    uct_md_h                  md;
    uct_worker_h              worker;
    uct_am_handler_t          am[UCT_AM_ID_MAX];
    uct_am_tracer_t           am_tracer;
    void                     *am_tracer_arg;
    uct_error_handler_t       err_handler;
    void                     *err_handler_arg;
    uint32_t                  err_handler_flags;
    uct_worker_progress_t     prog;
    unsigned                  progress_flags;
    struct {
        unsigned           num_alloc_methods;
        uct_alloc_method_t alloc_methods[UCT_ALLOC_METHOD_LAST];
        ucs_log_level_t    failure_level;
        size_t             max_num_eps;
    } config;
};


/* ---- the layout facts, as read off libuct 1.13.1 ---------------------------- */

static_assert(sizeof(uct_iface_ops_t) == 50 * sizeof(void *), "uct_iface_ops_t: 50 slots");
static_assert(sizeof(uct_md_ops_t) == 11 * sizeof(void *), "uct_md_ops_t: 11 slots");
static_assert(sizeof(uct_component) == 208, "uct_component_t size");
static_assert(offsetof(uct_component, md_config) == 64, "uct_component_t::md_config");
static_assert(offsetof(uct_component, cm_config) == 112, "uct_component_t::cm_config");
static_assert(offsetof(uct_component, tl_list) == 160, "uct_component_t::tl_list");
static_assert(offsetof(uct_component, flags) == 192, "uct_component_t::flags");
static_assert(offsetof(uct_component, md_vfs_init) == 200, "uct_component_t::md_vfs_init");
static_assert(sizeof(uct_tl_device_resource_t) == 40, "uct_tl_device_resource_t size");
static_assert(sizeof(uct_base_iface_t) == 1280, "uct_base_iface_t size (uct_base_iface_t_class.size)");
static_assert(offsetof(uct_base_iface_t, internal_ops) == 0x190, "uct_base_iface_t::internal_ops");
static_assert(offsetof(uct_base_iface_t, md) == 0x198, "uct_base_iface_t::md");
static_assert(offsetof(uct_base_iface_t, worker) == 0x1a0, "uct_base_iface_t::worker");
static_assert(offsetof(uct_base_iface_t, am) == 0x1a8, "uct_base_iface_t::am");
static_assert(sizeof(uct_am_handler_t) == 0x18, "uct_am_handler_t size");
static_assert(offsetof(uct_base_iface_t, am_tracer) == 0x4a8, "uct_base_iface_t::am_tracer");
static_assert(offsetof(uct_base_iface_t, err_handler) == 0x4b8, "uct_base_iface_t::err_handler");
static_assert(offsetof(uct_base_iface_t, err_handler_flags) == 0x4c8, "uct_base_iface_t::err_handler_flags");
static_assert(offsetof(uct_base_iface_t, prog) == 0x4cc, "uct_base_iface_t::prog");
static_assert(offsetof(uct_base_iface_t, config.num_alloc_methods) == 0x4d8,
              "uct_base_iface_t::config.num_alloc_methods");
static_assert(sizeof(uct_iface_config) == 32, "uct_iface_config size");

}  // namespace compat
}  // namespace uct_tm

/* Exported by libuct 1.13 (not declared in installed headers). */
extern "C" {
extern ucs_class_t                            uct_base_iface_t_class;
extern uct_tm::compat::uct_iface_internal_ops_t uct_base_iface_internal_ops;
ucs_status_t uct_base_iface_t_init(uct_tm::compat::uct_base_iface_t *self, ucs_class_t *cls,
                                   int *init_count, uct_iface_ops_t *ops,
                                   uct_tm::compat::uct_iface_internal_ops_t *internal_ops,
                                   uct_md_h md, uct_worker_h worker,
                                   const uct_iface_params_t *params,
                                   const uct_iface_config_t *config);
void uct_component_register(uct_component_t *component); /* void in 1.13 */
void uct_tl_register(uct_component_t *component, uct_tm::compat::uct_tl_t *tl);
ucs_status_t uct_md_query_single_md_resource(uct_component_t *component,
                                             uct_md_resource_desc_t **resources_p,
                                             unsigned *num_resources_p);
ucs_status_t uct_single_device_resource(uct_md_h md, const char *dev_name,
                                        uct_device_type_t dev_type, ucs_sys_device_t sys_device,
                                        uct_tm::compat::uct_tl_device_resource_t **tl_devices_p,
                                        unsigned *num_tl_devices_p);
ucs_status_t uct_iface_handle_ep_err(uct_iface_h iface, uct_ep_h ep, ucs_status_t status);
void uct_base_iface_progress_enable(uct_iface_h iface, unsigned flags);
void uct_base_iface_progress_disable(uct_iface_h iface, unsigned flags);
void ucs_empty_function(void);
/* libucs's allocator: libuct releases resource lists with ucs_free(). */
void *ucs_malloc(size_t size, const char *name);
void ucs_free(void *ptr);
ucs_status_t ucs_empty_function_return_unsupported(void);
}

#endif
