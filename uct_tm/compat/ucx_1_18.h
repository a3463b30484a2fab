/*
 * UCX 1.18 (1.18.0, 1.18.1): the layout facts uct-tm's mirror
 * (ucx_layouts.h) must match for this release.
 *
 * Since 1.17: the MD attributes gain gva_mem_types, reachability parameters gain the addresses'
 * lengths.
 *
 * The block between the markers is contrib/ucx_layout.sh's output for this
 * release's source tree (`contrib/ucx_layout.sh --check TREE` compares them).
 * Included only by uct_tm/base/ucx_abi.cc, when configure found UCX 1.18.
 */
#ifndef UCT_TM_COMPAT_UCX_1_18_H_
#define UCT_TM_COMPAT_UCX_1_18_H_

#include "ucx_layouts.h"

static_assert(UCT_TM_UCX_ABI == 118, "ucx_1_18.h is for UCX 1.18");

namespace uct_tm {
namespace compat {

/* ---- layout facts: begin ---- */
/* UCX 1.18, read off its headers by contrib/ucx_layout.sh */
static_assert(sizeof(uct_component_t) == 232, "uct_component_t");
static_assert(offsetof(uct_component_t, query_md_resources) == 16, "uct_component_t::query_md_resources");
static_assert(offsetof(uct_component_t, md_open) == 24, "uct_component_t::md_open");
static_assert(offsetof(uct_component_t, cm_open) == 32, "uct_component_t::cm_open");
static_assert(offsetof(uct_component_t, rkey_unpack) == 40, "uct_component_t::rkey_unpack");
static_assert(offsetof(uct_component_t, rkey_ptr) == 48, "uct_component_t::rkey_ptr");
static_assert(offsetof(uct_component_t, rkey_release) == 56, "uct_component_t::rkey_release");
static_assert(offsetof(uct_component_t, rkey_compare) == 64, "uct_component_t::rkey_compare");
static_assert(offsetof(uct_component_t, md_config) == 72, "uct_component_t::md_config");
static_assert(offsetof(uct_component_t, cm_config) == 128, "uct_component_t::cm_config");
static_assert(offsetof(uct_component_t, tl_list) == 184, "uct_component_t::tl_list");
static_assert(offsetof(uct_component_t, list) == 200, "uct_component_t::list");
static_assert(offsetof(uct_component_t, flags) == 216, "uct_component_t::flags");
static_assert(offsetof(uct_component_t, md_vfs_init) == 224, "uct_component_t::md_vfs_init");
static_assert(sizeof(ucs_config_global_list_entry_t) == 56, "ucs_config_global_list_entry_t");
static_assert(sizeof(struct uct_md) == 16, "struct uct_md");
static_assert(offsetof(struct uct_md, component) == 8, "struct uct_md::component");
static_assert(sizeof(uct_md_ops_t) == 88, "uct_md_ops_t");
static_assert(offsetof(uct_md_ops_t, query) == 8, "uct_md_ops_t::query");
static_assert(offsetof(uct_md_ops_t, mem_alloc) == 16, "uct_md_ops_t::mem_alloc");
static_assert(offsetof(uct_md_ops_t, mem_free) == 24, "uct_md_ops_t::mem_free");
static_assert(offsetof(uct_md_ops_t, mem_advise) == 32, "uct_md_ops_t::mem_advise");
static_assert(offsetof(uct_md_ops_t, mem_reg) == 40, "uct_md_ops_t::mem_reg");
static_assert(offsetof(uct_md_ops_t, mem_dereg) == 48, "uct_md_ops_t::mem_dereg");
static_assert(offsetof(uct_md_ops_t, mem_query) == 56, "uct_md_ops_t::mem_query");
static_assert(offsetof(uct_md_ops_t, mkey_pack) == 64, "uct_md_ops_t::mkey_pack");
static_assert(offsetof(uct_md_ops_t, mem_attach) == 72, "uct_md_ops_t::mem_attach");
static_assert(offsetof(uct_md_ops_t, detect_memory_type) == 80, "uct_md_ops_t::detect_memory_type");
static_assert(sizeof(uct_md_mem_dereg_params_t) == 32, "uct_md_mem_dereg_params_t");
static_assert(offsetof(uct_md_mem_dereg_params_t, memh) == 16, "uct_md_mem_dereg_params_t::memh");
static_assert(UCT_MD_MEM_DEREG_FIELD_MEMH == 1, "UCT_MD_MEM_DEREG_FIELD_MEMH");
static_assert(sizeof(uct_md_mkey_pack_params_t) == 16, "uct_md_mkey_pack_params_t");
static_assert(offsetof(uct_md_mkey_pack_params_t, flags) == 8, "uct_md_mkey_pack_params_t::flags");
static_assert(UCT_MD_MKEY_PACK_FLAG_EXPORT == 4, "UCT_MD_MKEY_PACK_FLAG_EXPORT");
static_assert(sizeof(uct_md_mem_reg_params_t) == 32, "uct_md_mem_reg_params_t");
static_assert(offsetof(uct_md_mem_reg_params_t, flags) == 8, "uct_md_mem_reg_params_t::flags");
static_assert(UCT_MD_MEM_REG_FIELD_FLAGS == 1, "UCT_MD_MEM_REG_FIELD_FLAGS");
static_assert(sizeof(uct_md_attr_v2_t) == 536, "uct_md_attr_v2_t");
static_assert(offsetof(uct_md_attr_v2_t, max_alloc) == 8, "uct_md_attr_v2_t::max_alloc");
static_assert(offsetof(uct_md_attr_v2_t, max_reg) == 16, "uct_md_attr_v2_t::max_reg");
static_assert(offsetof(uct_md_attr_v2_t, flags) == 24, "uct_md_attr_v2_t::flags");
static_assert(offsetof(uct_md_attr_v2_t, reg_mem_types) == 32, "uct_md_attr_v2_t::reg_mem_types");
static_assert(offsetof(uct_md_attr_v2_t, cache_mem_types) == 48, "uct_md_attr_v2_t::cache_mem_types");
static_assert(offsetof(uct_md_attr_v2_t, detect_mem_types) == 64, "uct_md_attr_v2_t::detect_mem_types");
static_assert(offsetof(uct_md_attr_v2_t, alloc_mem_types) == 72, "uct_md_attr_v2_t::alloc_mem_types");
static_assert(offsetof(uct_md_attr_v2_t, access_mem_types) == 80, "uct_md_attr_v2_t::access_mem_types");
static_assert(offsetof(uct_md_attr_v2_t, dmabuf_mem_types) == 88, "uct_md_attr_v2_t::dmabuf_mem_types");
static_assert(offsetof(uct_md_attr_v2_t, reg_cost) == 96, "uct_md_attr_v2_t::reg_cost");
static_assert(offsetof(uct_md_attr_v2_t, component_name) == 112, "uct_md_attr_v2_t::component_name");
static_assert(offsetof(uct_md_attr_v2_t, rkey_packed_size) == 128, "uct_md_attr_v2_t::rkey_packed_size");
static_assert(offsetof(uct_md_attr_v2_t, local_cpus) == 136, "uct_md_attr_v2_t::local_cpus");
static_assert(offsetof(uct_md_attr_v2_t, exported_mkey_packed_size) == 264, "uct_md_attr_v2_t::exported_mkey_packed_size");
static_assert(offsetof(uct_md_attr_v2_t, global_id) == 272, "uct_md_attr_v2_t::global_id");
static_assert(offsetof(uct_md_attr_v2_t, reg_alignment) == 528, "uct_md_attr_v2_t::reg_alignment");
static_assert(sizeof(uct_tl_device_resource_t) == 40, "uct_tl_device_resource_t");
static_assert(offsetof(uct_tl_device_resource_t, type) == 32, "uct_tl_device_resource_t::type");
static_assert(offsetof(uct_tl_device_resource_t, sys_device) == 36, "uct_tl_device_resource_t::sys_device");
static_assert(sizeof(uct_tl_t) == 104, "uct_tl_t");
static_assert(offsetof(uct_tl_t, query_devices) == 16, "uct_tl_t::query_devices");
static_assert(offsetof(uct_tl_t, iface_open) == 24, "uct_tl_t::iface_open");
static_assert(offsetof(uct_tl_t, config) == 32, "uct_tl_t::config");
static_assert(offsetof(uct_tl_t, list) == 88, "uct_tl_t::list");
static_assert(sizeof(uct_iface_config_t) == 32, "uct_iface_config_t");
static_assert(offsetof(uct_iface_config_t, failure) == 16, "uct_iface_config_t::failure");
static_assert(offsetof(uct_iface_config_t, max_num_eps) == 24, "uct_iface_config_t::max_num_eps");
static_assert(sizeof(uct_base_iface_t) == 1280, "uct_base_iface_t");
static_assert(offsetof(uct_base_iface_t, internal_ops) == 400, "uct_base_iface_t::internal_ops");
static_assert(offsetof(uct_base_iface_t, md) == 408, "uct_base_iface_t::md");
static_assert(offsetof(uct_base_iface_t, worker) == 416, "uct_base_iface_t::worker");
static_assert(offsetof(uct_base_iface_t, am) == 424, "uct_base_iface_t::am");
static_assert(offsetof(uct_base_iface_t, am_tracer) == 1192, "uct_base_iface_t::am_tracer");
static_assert(offsetof(uct_base_iface_t, err_handler) == 1208, "uct_base_iface_t::err_handler");
static_assert(offsetof(uct_base_iface_t, err_handler_flags) == 1224, "uct_base_iface_t::err_handler_flags");
static_assert(offsetof(uct_base_iface_t, prog) == 1228, "uct_base_iface_t::prog");
static_assert(offsetof(uct_base_iface_t, progress_flags) == 1236, "uct_base_iface_t::progress_flags");
static_assert(offsetof(uct_base_iface_t, config.num_alloc_methods) == 1240, "uct_base_iface_t::config.num_alloc_methods");
static_assert(offsetof(uct_base_iface_t, config.failure_level) == 1264, "uct_base_iface_t::config.failure_level");
static_assert(offsetof(uct_base_iface_t, config.max_num_eps) == 1272, "uct_base_iface_t::config.max_num_eps");
static_assert(sizeof(uct_am_handler_t) == 24, "uct_am_handler_t");
static_assert(sizeof(uct_iface_internal_ops_t) == 56, "uct_iface_internal_ops_t");
static_assert(offsetof(uct_iface_internal_ops_t, iface_estimate_perf) == 0, "uct_iface_internal_ops_t::iface_estimate_perf");
static_assert(offsetof(uct_iface_internal_ops_t, iface_vfs_refresh) == 8, "uct_iface_internal_ops_t::iface_vfs_refresh");
static_assert(offsetof(uct_iface_internal_ops_t, ep_query) == 16, "uct_iface_internal_ops_t::ep_query");
static_assert(offsetof(uct_iface_internal_ops_t, ep_invalidate) == 24, "uct_iface_internal_ops_t::ep_invalidate");
static_assert(offsetof(uct_iface_internal_ops_t, ep_connect_to_ep_v2) == 32, "uct_iface_internal_ops_t::ep_connect_to_ep_v2");
static_assert(offsetof(uct_iface_internal_ops_t, iface_is_reachable_v2) == 40, "uct_iface_internal_ops_t::iface_is_reachable_v2");
static_assert(offsetof(uct_iface_internal_ops_t, ep_is_connected) == 48, "uct_iface_internal_ops_t::ep_is_connected");
static_assert(sizeof(uct_perf_attr_t) == 96, "uct_perf_attr_t");
static_assert(offsetof(uct_perf_attr_t, operation) == 8, "uct_perf_attr_t::operation");
static_assert(offsetof(uct_perf_attr_t, send_pre_overhead) == 24, "uct_perf_attr_t::send_pre_overhead");
static_assert(offsetof(uct_perf_attr_t, send_post_overhead) == 32, "uct_perf_attr_t::send_post_overhead");
static_assert(offsetof(uct_perf_attr_t, recv_overhead) == 40, "uct_perf_attr_t::recv_overhead");
static_assert(offsetof(uct_perf_attr_t, bandwidth) == 48, "uct_perf_attr_t::bandwidth");
static_assert(offsetof(uct_perf_attr_t, latency) == 64, "uct_perf_attr_t::latency");
static_assert(offsetof(uct_perf_attr_t, max_inflight_eps) == 80, "uct_perf_attr_t::max_inflight_eps");
static_assert(offsetof(uct_perf_attr_t, flags) == 88, "uct_perf_attr_t::flags");
static_assert(UCT_PERF_ATTR_FIELD_FLAGS == 2048, "UCT_PERF_ATTR_FIELD_FLAGS");
static_assert(UCT_PERF_ATTR_FIELD_OPERATION == 1, "UCT_PERF_ATTR_FIELD_OPERATION");
static_assert(UCT_PERF_ATTR_FIELD_SEND_PRE_OVERHEAD == 32, "UCT_PERF_ATTR_FIELD_SEND_PRE_OVERHEAD");
static_assert(UCT_PERF_ATTR_FIELD_SEND_POST_OVERHEAD == 64, "UCT_PERF_ATTR_FIELD_SEND_POST_OVERHEAD");
static_assert(UCT_PERF_ATTR_FIELD_RECV_OVERHEAD == 128, "UCT_PERF_ATTR_FIELD_RECV_OVERHEAD");
static_assert(UCT_PERF_ATTR_FIELD_BANDWIDTH == 256, "UCT_PERF_ATTR_FIELD_BANDWIDTH");
static_assert(UCT_PERF_ATTR_FIELD_LATENCY == 512, "UCT_PERF_ATTR_FIELD_LATENCY");
static_assert(UCT_PERF_ATTR_FIELD_MAX_INFLIGHT_EPS == 1024, "UCT_PERF_ATTR_FIELD_MAX_INFLIGHT_EPS");
static_assert(UCT_EP_OP_EAGER_SHORT == 9, "UCT_EP_OP_EAGER_SHORT");
static_assert(UCT_EP_OP_RNDV_ZCOPY == 12, "UCT_EP_OP_RNDV_ZCOPY");
static_assert(UCT_EP_OP_LAST == 15, "UCT_EP_OP_LAST");
static_assert(sizeof(uct_iface_is_reachable_params_t) == 64, "uct_iface_is_reachable_params_t");
static_assert(offsetof(uct_iface_is_reachable_params_t, device_addr) == 8, "uct_iface_is_reachable_params_t::device_addr");
static_assert(offsetof(uct_iface_is_reachable_params_t, iface_addr) == 16, "uct_iface_is_reachable_params_t::iface_addr");
static_assert(offsetof(uct_iface_is_reachable_params_t, info_string) == 24, "uct_iface_is_reachable_params_t::info_string");
static_assert(offsetof(uct_iface_is_reachable_params_t, info_string_length) == 32, "uct_iface_is_reachable_params_t::info_string_length");
static_assert(offsetof(uct_iface_is_reachable_params_t, scope) == 40, "uct_iface_is_reachable_params_t::scope");
static_assert(UCT_IFACE_IS_REACHABLE_FIELD_DEVICE_ADDR == 1, "UCT_IFACE_IS_REACHABLE_FIELD_DEVICE_ADDR");
static_assert(UCT_IFACE_IS_REACHABLE_FIELD_IFACE_ADDR == 2, "UCT_IFACE_IS_REACHABLE_FIELD_IFACE_ADDR");
static_assert(UCT_IFACE_IS_REACHABLE_FIELD_INFO_STRING == 4, "UCT_IFACE_IS_REACHABLE_FIELD_INFO_STRING");
static_assert(UCT_IFACE_IS_REACHABLE_FIELD_INFO_STRING_LENGTH == 8, "UCT_IFACE_IS_REACHABLE_FIELD_INFO_STRING_LENGTH");
static_assert(UCT_IFACE_IS_REACHABLE_FIELD_SCOPE == 16, "UCT_IFACE_IS_REACHABLE_FIELD_SCOPE");
static_assert(UCT_IFACE_REACHABILITY_SCOPE_DEVICE == 0, "UCT_IFACE_REACHABILITY_SCOPE_DEVICE");
static_assert(UCT_IFACE_REACHABILITY_SCOPE_NETWORK == 1, "UCT_IFACE_REACHABILITY_SCOPE_NETWORK");
static_assert(sizeof(uct_ep_is_connected_params_t) == 32, "uct_ep_is_connected_params_t");
static_assert(offsetof(uct_ep_is_connected_params_t, device_addr) == 8, "uct_ep_is_connected_params_t::device_addr");
static_assert(offsetof(uct_ep_is_connected_params_t, iface_addr) == 16, "uct_ep_is_connected_params_t::iface_addr");
static_assert(offsetof(uct_ep_is_connected_params_t, ep_addr) == 24, "uct_ep_is_connected_params_t::ep_addr");
static_assert(UCT_EP_IS_CONNECTED_FIELD_DEVICE_ADDR == 1, "UCT_EP_IS_CONNECTED_FIELD_DEVICE_ADDR");
static_assert(UCT_EP_IS_CONNECTED_FIELD_IFACE_ADDR == 2, "UCT_EP_IS_CONNECTED_FIELD_IFACE_ADDR");
static_assert(UCT_EP_IS_CONNECTED_FIELD_EP_ADDR == 4, "UCT_EP_IS_CONNECTED_FIELD_EP_ADDR");
/* ---- layout facts: end ---- */

}  // namespace compat
}  // namespace uct_tm

#endif
