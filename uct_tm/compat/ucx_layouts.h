/*
 * UCX-internal layouts that an out-of-tree UCT component must mirror, for
 * every supported release, 1.13 to 1.22.
 *
 * libuct casts every uct_iface_h to its private uct_base_iface_t, every uct_md_h
 * to struct uct_md, and walks component and transport descriptors and ops
 * tables it installs no header for (src/uct/base, src/uct/api/v2/uct_v2.h).
 * Each structure is written once, with the release that changed it inline
 * (UCT_TM_UCX_ABI = 100 * major + minor, set by configure from the UCX it
 * builds against), for UCX built the way releases and distributions build it:
 * without statistics (--enable-stats adds a field to the base iface; the seam
 * refuses such a libuct at run time). Types the plugin only passes through are
 * opaque pointers here.
 *
 * The sizes and offsets of one release are pinned in ucx_<major>_<minor>.h,
 * which includes this file; contrib/ucx_layout.sh reads the same facts off a
 * release's own headers to check them. Included only through that header, by
 * uct_tm/base/ucx_abi.cc.
 */
#ifndef UCT_TM_COMPAT_UCX_LAYOUTS_H_
#define UCT_TM_COMPAT_UCX_LAYOUTS_H_

#if !defined(UCT_TM_UCX_ABI) || (UCT_TM_UCX_ABI < 113) || (UCT_TM_UCX_ABI > 122)
#error "UCT_TM_UCX_ABI (set by configure) names no supported UCX release"
#endif

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
struct uct_iface_internal_ops_t;
}  // namespace compat
}  // namespace uct_tm

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
#if UCT_TM_UCX_ABI >= 119 /* unpack parameters (uct_rkey_unpack_params_t) */
    ucs_status_t (*rkey_unpack)(uct_component_t *component, const void *rkey_buffer,
                                const void *params, uct_rkey_t *rkey_p, void **handle_p);
#else
    ucs_status_t (*rkey_unpack)(uct_component_t *component, const void *rkey_buffer,
                                uct_rkey_t *rkey_p, void **handle_p);
#endif
    ucs_status_t (*rkey_ptr)(uct_component_t *component, uct_rkey_t rkey, void *handle,
                             uint64_t raddr, void **laddr_p);
    ucs_status_t (*rkey_release)(uct_component_t *component, uct_rkey_t rkey, void *handle);
#if UCT_TM_UCX_ABI >= 116
    ucs_status_t (*rkey_compare)(uct_component_t *component, uct_rkey_t rkey1, uct_rkey_t rkey2,
                                 const void *params, int *result);
#endif
    ucs_config_global_list_entry_t md_config; /* 1.15 added a flags byte to the entry */
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

/* ---- memory domain -------------------------------------------------------------- */

struct uct_md_mem_dereg_params_t {
    uint64_t          field_mask;
    unsigned          flags;
    uct_mem_h         memh;
    uct_completion_t *comp;
};
enum { UCT_MD_MEM_DEREG_FIELD_MEMH = 1u << 0 };

struct uct_md_mkey_pack_params_t {
    uint64_t field_mask;
    unsigned flags;
};
enum { UCT_MD_MKEY_PACK_FIELD_FLAGS = 1u << 0 };
/* 1.14 added exporting an mkey to another process; 1.15 split the
 * invalidation flag in two, moving it up a bit. */
#if UCT_TM_UCX_ABI >= 115
enum { UCT_MD_MKEY_PACK_FLAG_EXPORT = 1u << 2 };
#elif UCT_TM_UCX_ABI >= 114
enum { UCT_MD_MKEY_PACK_FLAG_EXPORT = 1u << 1 };
#endif

#if UCT_TM_UCX_ABI >= 114
struct uct_md_mem_reg_params_t {
    uint64_t field_mask;
    uint64_t flags;
    int      dmabuf_fd;
    size_t   dmabuf_offset;
#if UCT_TM_UCX_ABI >= 122
    ucs_memory_type_t mem_type;
#endif
};
enum { UCT_MD_MEM_REG_FIELD_FLAGS = 1u << 0 };

/* What the MD query op fills from 1.14 on (uct_md_query() converts it for
 * callers of the v1 API). */
struct uct_md_attr_v2_t {
    uint64_t field_mask;
    uint64_t max_alloc;
    size_t   max_reg;
    uint64_t flags;
    uint64_t reg_mem_types;
#if UCT_TM_UCX_ABI >= 115
    uint64_t reg_nonblock_mem_types;
#endif
    uint64_t cache_mem_types;
#if UCT_TM_UCX_ABI >= 118
    uint64_t gva_mem_types;
#endif
    uint64_t          detect_mem_types;
    uint64_t          alloc_mem_types;
    uint64_t          access_mem_types;
    uint64_t          dmabuf_mem_types;
    ucs_linear_func_t reg_cost;
    char              component_name[UCT_COMPONENT_NAME_MAX];
    size_t            rkey_packed_size;
    ucs_cpu_set_t     local_cpus;
    size_t            exported_mkey_packed_size;
    char              global_id[UCT_MD_GLOBAL_ID_MAX];
#if UCT_TM_UCX_ABI >= 116
    size_t reg_alignment;
#endif
#if UCT_TM_UCX_ABI >= 122
    uint8_t required_mem_flags;
#endif
};
#endif

struct uct_md_ops_t {
    void (*close)(uct_md_h md);
#if UCT_TM_UCX_ABI >= 114
    ucs_status_t (*query)(uct_md_h md, uct_md_attr_v2_t *md_attr);
#else
    ucs_status_t (*query)(uct_md_h md, uct_md_attr_t *md_attr);
#endif
#if UCT_TM_UCX_ABI >= 119 /* the system device to allocate on */
    ucs_status_t (*mem_alloc)(uct_md_h md, size_t *length_p, void **address_p,
                              ucs_memory_type_t mem_type, ucs_sys_device_t sys_dev,
                              unsigned flags, const char *alloc_name, uct_mem_h *memh_p);
#else
    ucs_status_t (*mem_alloc)(uct_md_h md, size_t *length_p, void **address_p,
                              ucs_memory_type_t mem_type, unsigned flags,
                              const char *alloc_name, uct_mem_h *memh_p);
#endif
    ucs_status_t (*mem_free)(uct_md_h md, uct_mem_h memh);
    ucs_status_t (*mem_advise)(uct_md_h md, uct_mem_h memh, void *addr, size_t length,
                               unsigned advice);
#if UCT_TM_UCX_ABI >= 114
    ucs_status_t (*mem_reg)(uct_md_h md, void *address, size_t length,
                            const uct_md_mem_reg_params_t *params, uct_mem_h *memh_p);
#else
    ucs_status_t (*mem_reg)(uct_md_h md, void *address, size_t length, unsigned flags,
                            uct_mem_h *memh_p);
#endif
    ucs_status_t (*mem_dereg)(uct_md_h md, const uct_md_mem_dereg_params_t *params);
    /* 1.22 passes a uct_md_mem_attr_v2_t; the plugin answers UNSUPPORTED either way */
    ucs_status_t (*mem_query)(uct_md_h md, const void *addr, size_t length, void *mem_attr_p);
#if UCT_TM_UCX_ABI >= 116 /* the packed range */
    ucs_status_t (*mkey_pack)(uct_md_h md, uct_mem_h memh, void *address, size_t length,
                              const uct_md_mkey_pack_params_t *params, void *rkey_buffer);
#else
    ucs_status_t (*mkey_pack)(uct_md_h md, uct_mem_h memh,
                              const uct_md_mkey_pack_params_t *params, void *rkey_buffer);
#endif
#if UCT_TM_UCX_ABI >= 114
    ucs_status_t (*mem_attach)(uct_md_h md, const void *mkey_buffer, void *params,
                               uct_mem_h *memh_p);
#endif
#if UCT_TM_UCX_ABI < 116
    int (*is_sockaddr_accessible)(uct_md_h md, const ucs_sock_addr_t *sockaddr,
                                  uct_sockaddr_accessibility_t mode);
#endif
    ucs_status_t (*detect_memory_type)(uct_md_h md, const void *addr, size_t length,
                                       ucs_memory_type_t *mem_type_p);
#if UCT_TM_UCX_ABI >= 121
    ucs_status_t (*mem_elem_pack)(uct_md_h md, uct_mem_h memh, uct_rkey_t rkey, void *mem_elem_p);
#endif
};

/* ---- transports ----------------------------------------------------------------- */

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

/* ---- interfaces ------------------------------------------------------------------ */

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

/* ---- interface operations libuct reaches through the base iface -------------------- */

/* uct_v2.h: the operations an estimate is asked for (the same enumeration in
 * every supported release). */
enum uct_ep_operation_t {
    UCT_EP_OP_AM_SHORT,
    UCT_EP_OP_AM_BCOPY,
    UCT_EP_OP_AM_ZCOPY,
    UCT_EP_OP_PUT_SHORT,
    UCT_EP_OP_PUT_BCOPY,
    UCT_EP_OP_PUT_ZCOPY,
    UCT_EP_OP_GET_SHORT,
    UCT_EP_OP_GET_BCOPY,
    UCT_EP_OP_GET_ZCOPY,
    UCT_EP_OP_EAGER_SHORT,
    UCT_EP_OP_EAGER_BCOPY,
    UCT_EP_OP_EAGER_ZCOPY,
    UCT_EP_OP_RNDV_ZCOPY,
    UCT_EP_OP_ATOMIC_POST,
    UCT_EP_OP_ATOMIC_FETCH,
    UCT_EP_OP_LAST
};

struct uct_perf_attr_t {
    uint64_t            field_mask;
    uct_ep_operation_t  operation;
    ucs_memory_type_t   local_memory_type;
    ucs_memory_type_t   remote_memory_type;
    ucs_sys_device_t    local_sys_device;
    ucs_sys_device_t    remote_sys_device;
    double              send_pre_overhead;
    double              send_post_overhead;
    double              recv_overhead;
    uct_ppn_bandwidth_t bandwidth;
#if UCT_TM_UCX_ABI >= 119
    uct_ppn_bandwidth_t path_bandwidth;
#endif
    ucs_linear_func_t latency;
    size_t            max_inflight_eps;
#if UCT_TM_UCX_ABI >= 117
    uint64_t flags;
#endif
};

/* Field bits of uct_perf_attr_t: 1.19 inserted PATH_BANDWIDTH at bit 9. */
enum : uint64_t {
    UCT_PERF_ATTR_FIELD_OPERATION          = 1u << 0,
    UCT_PERF_ATTR_FIELD_SEND_PRE_OVERHEAD  = 1u << 5,
    UCT_PERF_ATTR_FIELD_SEND_POST_OVERHEAD = 1u << 6,
    UCT_PERF_ATTR_FIELD_RECV_OVERHEAD      = 1u << 7,
    UCT_PERF_ATTR_FIELD_BANDWIDTH          = 1u << 8,
#if UCT_TM_UCX_ABI >= 119
    UCT_PERF_ATTR_FIELD_PATH_BANDWIDTH   = 1u << 9,
    UCT_PERF_ATTR_FIELD_LATENCY          = 1u << 10,
    UCT_PERF_ATTR_FIELD_MAX_INFLIGHT_EPS = 1u << 11,
    UCT_PERF_ATTR_FIELD_FLAGS            = 1u << 12,
#else
    UCT_PERF_ATTR_FIELD_LATENCY          = 1u << 9,
    UCT_PERF_ATTR_FIELD_MAX_INFLIGHT_EPS = 1u << 10,
#if UCT_TM_UCX_ABI >= 117
    UCT_PERF_ATTR_FIELD_FLAGS = 1u << 11,
#endif
#endif
};

#if UCT_TM_UCX_ABI >= 115
struct uct_iface_is_reachable_params_t {
    uint64_t                 field_mask;
    const uct_device_addr_t *device_addr;
    const uct_iface_addr_t  *iface_addr;
    char                    *info_string;
    size_t                   info_string_length;
    int                      scope; /* uct_iface_reachability_scope_t */
#if UCT_TM_UCX_ABI >= 118
    size_t device_addr_length;
    size_t iface_addr_length;
#endif
};
enum {
    UCT_IFACE_IS_REACHABLE_FIELD_DEVICE_ADDR        = 1u << 0,
    UCT_IFACE_IS_REACHABLE_FIELD_IFACE_ADDR         = 1u << 1,
    UCT_IFACE_IS_REACHABLE_FIELD_INFO_STRING        = 1u << 2,
    UCT_IFACE_IS_REACHABLE_FIELD_INFO_STRING_LENGTH = 1u << 3,
    UCT_IFACE_IS_REACHABLE_FIELD_SCOPE              = 1u << 4,
};
enum { UCT_IFACE_REACHABILITY_SCOPE_DEVICE = 0, UCT_IFACE_REACHABILITY_SCOPE_NETWORK = 1 };
#endif

#if UCT_TM_UCX_ABI >= 116
struct uct_ep_is_connected_params_t {
    uint64_t                 field_mask;
    const uct_device_addr_t *device_addr;
    const uct_iface_addr_t  *iface_addr;
    const uct_ep_addr_t     *ep_addr;
};
enum {
    UCT_EP_IS_CONNECTED_FIELD_DEVICE_ADDR = 1u << 0,
    UCT_EP_IS_CONNECTED_FIELD_IFACE_ADDR  = 1u << 1,
    UCT_EP_IS_CONNECTED_FIELD_EP_ADDR     = 1u << 2,
};
#endif

/* uct_iface_query_v2's attributes: 1.20 had one device field; 1.21 dropped the
 * call; 1.22 brought it back with scatter-gather and token fields. */
#if UCT_TM_UCX_ABI == 120
struct uct_iface_attr_v2_t {
    uint64_t field_mask;
    size_t   device_mem_element_size;
};
#elif UCT_TM_UCX_ABI >= 122
struct uct_iface_attr_v2_t {
    uint64_t field_mask;
    size_t   max_put_sgl_zcopy_count;
    struct {
        uint64_t flags;
    } cap;
    size_t      tx_token_length;
    size_t      rx_token_length;
    const void *tx_token;
    void       *rx_token;
};
enum {
    UCT_IFACE_ATTR_FIELD_MAX_PUT_SGL_ZCOPY_COUNT = 1u << 0,
    UCT_IFACE_ATTR_FIELD_CAP_FLAGS               = 1u << 1,
    UCT_IFACE_ATTR_FIELD_TX_TOKEN_LENGTH         = 1u << 2,
    UCT_IFACE_ATTR_FIELD_RX_TOKEN_LENGTH         = 1u << 3,
    UCT_IFACE_ATTR_FIELD_TX_TOKEN                = 1u << 4,
    UCT_IFACE_ATTR_FIELD_RX_TOKEN                = 1u << 5,
};
#endif

/* Per-iface operations libuct and UCP call through uct_base_iface_t::internal_ops.
 * Every slot must be filled: libuct calls them without a NULL check. */
struct uct_iface_internal_ops_t {
#if (UCT_TM_UCX_ABI == 120) || (UCT_TM_UCX_ABI >= 122)
    ucs_status_t (*iface_query_v2)(uct_iface_h iface, uct_iface_attr_v2_t *attr);
#endif
    ucs_status_t (*iface_estimate_perf)(uct_iface_h iface, uct_perf_attr_t *perf_attr);
    void (*iface_vfs_refresh)(uct_iface_h iface);
#if UCT_TM_UCX_ABI == 120
    ucs_status_t (*iface_mem_element_pack)(const uct_iface_h iface, uct_mem_h memh,
                                           uct_rkey_t rkey, void *mem_element);
#endif
    ucs_status_t (*ep_query)(uct_ep_h ep, void *ep_attr);
#if UCT_TM_UCX_ABI >= 121 /* a parameter block instead of flags */
    ucs_status_t (*ep_invalidate)(uct_ep_h ep, const void *params);
#else
    ucs_status_t (*ep_invalidate)(uct_ep_h ep, unsigned flags);
#endif
#if UCT_TM_UCX_ABI >= 114
    ucs_status_t (*ep_connect_to_ep_v2)(uct_ep_h ep, const uct_device_addr_t *device_addr,
                                        const uct_ep_addr_t *ep_addr, const void *params);
#endif
#if UCT_TM_UCX_ABI >= 115
    int (*iface_is_reachable_v2)(const uct_iface_h iface,
                                 const uct_iface_is_reachable_params_t *params);
#endif
#if UCT_TM_UCX_ABI >= 116
    int (*ep_is_connected)(uct_ep_h ep, const uct_ep_is_connected_params_t *params);
#endif
#if UCT_TM_UCX_ABI >= 120
    ucs_status_t (*ep_get_device_ep)(uct_ep_h ep, void **device_ep_p);
#endif
#if UCT_TM_UCX_ABI >= 122
    ucs_status_t (*ep_put_sgl_zcopy)(uct_ep_h ep, void *const *buffers, const size_t *lengths,
                                     uct_mem_h const *memhs, const uint64_t *remote_addrs,
                                     uct_rkey_t const *rkeys, const size_t *counts,
                                     const size_t *strides, size_t count, uct_completion_t *comp);
#endif
};

}  // namespace compat
}  // namespace uct_tm

/* Exported by libuct in every supported release (not declared in installed
 * headers). */
extern "C" {
extern ucs_class_t uct_base_iface_t_class;
ucs_status_t uct_base_iface_t_init(uct_tm::compat::uct_base_iface_t *self, ucs_class_t *cls,
                                   int *init_count, uct_iface_ops_t *ops,
                                   uct_tm::compat::uct_iface_internal_ops_t *internal_ops,
                                   uct_md_h md, uct_worker_h worker,
                                   const uct_iface_params_t *params,
                                   const uct_iface_config_t *config);
void uct_component_register(uct_component_t *component);
void uct_tl_register(uct_component_t *component, uct_tm::compat::uct_tl_t *tl);
ucs_status_t uct_iface_handle_ep_err(uct_iface_h iface, uct_ep_h ep, ucs_status_t status);
void uct_base_iface_progress_enable(uct_iface_h iface, unsigned flags);
void uct_base_iface_progress_disable(uct_iface_h iface, unsigned flags);
/* libucs's allocator: libuct releases resource lists with ucs_free(). */
void *ucs_malloc(size_t size, const char *name);
void ucs_free(void *ptr);
}

#endif
