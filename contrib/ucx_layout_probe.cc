/*
 * Reads the layout facts uct-tm mirrors off a UCX release's own internal
 * headers, and prints them as the static assertions of
 * uct_tm/compat/ucx_<major>_<minor>.h. Built and run by contrib/ucx_layout.sh
 * against a configured UCX source tree; never part of uct-tm itself.
 *
 * Every name below is spelled as UCX spells it; the mirror in
 * uct_tm/compat/ucx_layouts.h uses the same names, so the printed block
 * compiles against the mirror and fails if one fact differs.
 */
#include <uct/api/uct.h>
#include <uct/api/v2/uct_v2.h>
#include <uct/api/version.h>
#include <uct/base/uct_component.h>
#include <uct/base/uct_iface.h>
#include <uct/base/uct_md.h>

#include <cstddef>
#include <cstdio>

#define ABI (UCT_VERNO_MAJOR * 100 + UCT_VERNO_MINOR)

static void size(const char *type, size_t value) {
    printf("static_assert(sizeof(%s) == %zu, \"%s\");\n", type, value, type);
}
static void offset(const char *type, const char *field, size_t value) {
    printf("static_assert(offsetof(%s, %s) == %zu, \"%s::%s\");\n", type, field, value, type,
           field);
}
static void value(const char *name, unsigned long long v) {
    printf("static_assert(%s == %llu, \"%s\");\n", name, v, name);
}

#define SIZE(t)     size(#t, sizeof(t))
#define OFFSET(t, f) offset(#t, #f, offsetof(t, f))
#define VALUE(n)    value(#n, static_cast<unsigned long long>(n))

int main() {
    printf("/* UCX %d.%d, read off its headers by contrib/ucx_layout.sh */\n", UCT_VERNO_MAJOR,
           UCT_VERNO_MINOR);
    SIZE(uct_component_t);
    OFFSET(uct_component_t, query_md_resources);
    OFFSET(uct_component_t, md_open);
    OFFSET(uct_component_t, cm_open);
    OFFSET(uct_component_t, rkey_unpack);
    OFFSET(uct_component_t, rkey_ptr);
    OFFSET(uct_component_t, rkey_release);
#if ABI >= 116
    OFFSET(uct_component_t, rkey_compare);
#endif
    OFFSET(uct_component_t, md_config);
    OFFSET(uct_component_t, cm_config);
    OFFSET(uct_component_t, tl_list);
    OFFSET(uct_component_t, list);
    OFFSET(uct_component_t, flags);
    OFFSET(uct_component_t, md_vfs_init);
    SIZE(ucs_config_global_list_entry_t);

    SIZE(struct uct_md);
    OFFSET(struct uct_md, component);
    SIZE(uct_md_ops_t);
    OFFSET(uct_md_ops_t, query);
    OFFSET(uct_md_ops_t, mem_alloc);
    OFFSET(uct_md_ops_t, mem_free);
    OFFSET(uct_md_ops_t, mem_advise);
    OFFSET(uct_md_ops_t, mem_reg);
    OFFSET(uct_md_ops_t, mem_dereg);
    OFFSET(uct_md_ops_t, mem_query);
    OFFSET(uct_md_ops_t, mkey_pack);
#if ABI >= 114
    OFFSET(uct_md_ops_t, mem_attach);
#endif
#if ABI < 116
    OFFSET(uct_md_ops_t, is_sockaddr_accessible);
#endif
    OFFSET(uct_md_ops_t, detect_memory_type);
#if ABI >= 121
    OFFSET(uct_md_ops_t, mem_elem_pack);
#endif
    SIZE(uct_md_mem_dereg_params_t);
    OFFSET(uct_md_mem_dereg_params_t, memh);
    VALUE(UCT_MD_MEM_DEREG_FIELD_MEMH);
    SIZE(uct_md_mkey_pack_params_t);
    OFFSET(uct_md_mkey_pack_params_t, flags);
#if ABI >= 114
    VALUE(UCT_MD_MKEY_PACK_FLAG_EXPORT);
    SIZE(uct_md_mem_reg_params_t);
    OFFSET(uct_md_mem_reg_params_t, flags);
    VALUE(UCT_MD_MEM_REG_FIELD_FLAGS);
    SIZE(uct_md_attr_v2_t);
    OFFSET(uct_md_attr_v2_t, max_alloc);
    OFFSET(uct_md_attr_v2_t, max_reg);
    OFFSET(uct_md_attr_v2_t, flags);
    OFFSET(uct_md_attr_v2_t, reg_mem_types);
    OFFSET(uct_md_attr_v2_t, cache_mem_types);
    OFFSET(uct_md_attr_v2_t, detect_mem_types);
    OFFSET(uct_md_attr_v2_t, alloc_mem_types);
    OFFSET(uct_md_attr_v2_t, access_mem_types);
    OFFSET(uct_md_attr_v2_t, dmabuf_mem_types);
    OFFSET(uct_md_attr_v2_t, reg_cost);
    OFFSET(uct_md_attr_v2_t, component_name);
    OFFSET(uct_md_attr_v2_t, rkey_packed_size);
    OFFSET(uct_md_attr_v2_t, local_cpus);
    OFFSET(uct_md_attr_v2_t, exported_mkey_packed_size);
    OFFSET(uct_md_attr_v2_t, global_id);
#endif
#if ABI >= 116
    OFFSET(uct_md_attr_v2_t, reg_alignment);
#endif

    SIZE(uct_tl_device_resource_t);
    OFFSET(uct_tl_device_resource_t, type);
    OFFSET(uct_tl_device_resource_t, sys_device);
    SIZE(uct_tl_t);
    OFFSET(uct_tl_t, query_devices);
    OFFSET(uct_tl_t, iface_open);
    OFFSET(uct_tl_t, config);
    OFFSET(uct_tl_t, list);
    SIZE(uct_iface_config_t);
    OFFSET(uct_iface_config_t, failure);
    OFFSET(uct_iface_config_t, max_num_eps);

    SIZE(uct_base_iface_t);
    OFFSET(uct_base_iface_t, internal_ops);
    OFFSET(uct_base_iface_t, md);
    OFFSET(uct_base_iface_t, worker);
    OFFSET(uct_base_iface_t, am);
    OFFSET(uct_base_iface_t, am_tracer);
    OFFSET(uct_base_iface_t, err_handler);
    OFFSET(uct_base_iface_t, err_handler_flags);
    OFFSET(uct_base_iface_t, prog);
    OFFSET(uct_base_iface_t, progress_flags);
    OFFSET(uct_base_iface_t, config.num_alloc_methods);
    OFFSET(uct_base_iface_t, config.failure_level);
    OFFSET(uct_base_iface_t, config.max_num_eps);
    SIZE(uct_am_handler_t);

    SIZE(uct_iface_internal_ops_t);
#if (ABI == 120) || (ABI >= 122)
    OFFSET(uct_iface_internal_ops_t, iface_query_v2);
#endif
    OFFSET(uct_iface_internal_ops_t, iface_estimate_perf);
    OFFSET(uct_iface_internal_ops_t, iface_vfs_refresh);
#if ABI == 120
    OFFSET(uct_iface_internal_ops_t, iface_mem_element_pack);
#endif
    OFFSET(uct_iface_internal_ops_t, ep_query);
    OFFSET(uct_iface_internal_ops_t, ep_invalidate);
#if ABI >= 114
    OFFSET(uct_iface_internal_ops_t, ep_connect_to_ep_v2);
#endif
#if ABI >= 115
    OFFSET(uct_iface_internal_ops_t, iface_is_reachable_v2);
#endif
#if ABI >= 116
    OFFSET(uct_iface_internal_ops_t, ep_is_connected);
#endif
#if ABI >= 120
    OFFSET(uct_iface_internal_ops_t, ep_get_device_ep);
#endif
#if ABI >= 122
    OFFSET(uct_iface_internal_ops_t, ep_put_sgl_zcopy);
#endif

    SIZE(uct_perf_attr_t);
    OFFSET(uct_perf_attr_t, operation);
    OFFSET(uct_perf_attr_t, send_pre_overhead);
    OFFSET(uct_perf_attr_t, send_post_overhead);
    OFFSET(uct_perf_attr_t, recv_overhead);
    OFFSET(uct_perf_attr_t, bandwidth);
#if ABI >= 119
    OFFSET(uct_perf_attr_t, path_bandwidth);
    VALUE(UCT_PERF_ATTR_FIELD_PATH_BANDWIDTH);
#endif
    OFFSET(uct_perf_attr_t, latency);
    OFFSET(uct_perf_attr_t, max_inflight_eps);
#if ABI >= 117
    OFFSET(uct_perf_attr_t, flags);
    VALUE(UCT_PERF_ATTR_FIELD_FLAGS);
#endif
    VALUE(UCT_PERF_ATTR_FIELD_OPERATION);
    VALUE(UCT_PERF_ATTR_FIELD_SEND_PRE_OVERHEAD);
    VALUE(UCT_PERF_ATTR_FIELD_SEND_POST_OVERHEAD);
    VALUE(UCT_PERF_ATTR_FIELD_RECV_OVERHEAD);
    VALUE(UCT_PERF_ATTR_FIELD_BANDWIDTH);
    VALUE(UCT_PERF_ATTR_FIELD_LATENCY);
    VALUE(UCT_PERF_ATTR_FIELD_MAX_INFLIGHT_EPS);
    VALUE(UCT_EP_OP_EAGER_SHORT);
    VALUE(UCT_EP_OP_RNDV_ZCOPY);
    VALUE(UCT_EP_OP_LAST);

#if ABI >= 115
    SIZE(uct_iface_is_reachable_params_t);
    OFFSET(uct_iface_is_reachable_params_t, device_addr);
    OFFSET(uct_iface_is_reachable_params_t, iface_addr);
    OFFSET(uct_iface_is_reachable_params_t, info_string);
    OFFSET(uct_iface_is_reachable_params_t, info_string_length);
    OFFSET(uct_iface_is_reachable_params_t, scope);
    VALUE(UCT_IFACE_IS_REACHABLE_FIELD_DEVICE_ADDR);
    VALUE(UCT_IFACE_IS_REACHABLE_FIELD_IFACE_ADDR);
    VALUE(UCT_IFACE_IS_REACHABLE_FIELD_INFO_STRING);
    VALUE(UCT_IFACE_IS_REACHABLE_FIELD_INFO_STRING_LENGTH);
    VALUE(UCT_IFACE_IS_REACHABLE_FIELD_SCOPE);
    VALUE(UCT_IFACE_REACHABILITY_SCOPE_DEVICE);
    VALUE(UCT_IFACE_REACHABILITY_SCOPE_NETWORK);
#endif
#if ABI >= 116
    SIZE(uct_ep_is_connected_params_t);
    OFFSET(uct_ep_is_connected_params_t, device_addr);
    OFFSET(uct_ep_is_connected_params_t, iface_addr);
    OFFSET(uct_ep_is_connected_params_t, ep_addr);
    VALUE(UCT_EP_IS_CONNECTED_FIELD_DEVICE_ADDR);
    VALUE(UCT_EP_IS_CONNECTED_FIELD_IFACE_ADDR);
    VALUE(UCT_EP_IS_CONNECTED_FIELD_EP_ADDR);
#endif
#if ABI == 120
    SIZE(uct_iface_attr_v2_t);
    OFFSET(uct_iface_attr_v2_t, device_mem_element_size);
#elif ABI >= 122
    SIZE(uct_iface_attr_v2_t);
    OFFSET(uct_iface_attr_v2_t, max_put_sgl_zcopy_count);
    OFFSET(uct_iface_attr_v2_t, cap.flags);
    OFFSET(uct_iface_attr_v2_t, tx_token_length);
    OFFSET(uct_iface_attr_v2_t, rx_token_length);
    OFFSET(uct_iface_attr_v2_t, tx_token);
    OFFSET(uct_iface_attr_v2_t, rx_token);
    VALUE(UCT_IFACE_ATTR_FIELD_MAX_PUT_SGL_ZCOPY_COUNT);
    VALUE(UCT_IFACE_ATTR_FIELD_CAP_FLAGS);
    VALUE(UCT_IFACE_ATTR_FIELD_TX_TOKEN_LENGTH);
    VALUE(UCT_IFACE_ATTR_FIELD_RX_TOKEN_LENGTH);
    VALUE(UCT_IFACE_ATTR_FIELD_TX_TOKEN);
    VALUE(UCT_IFACE_ATTR_FIELD_RX_TOKEN);
#endif
    return 0;
}
