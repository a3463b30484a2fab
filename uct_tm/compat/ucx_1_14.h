/*
 * UCX 1.14 (1.14.0, 1.14.1): the layout facts uct-tm's mirror
 * (ucx_layouts.h) must match for this release.
 *
 * Since 1.13: the MD query fills uct_md_attr_v2_t, registration takes a parameter block, MDs
 * gain mem_attach (exported keys), ifaces gain ep_connect_to_ep_v2.
 *
 * The block between the markers is contrib/ucx_layout.sh's output for this
 * release's source tree (`contrib/ucx_layout.sh --check TREE` compares them).
 * Included only by uct_tm/base/ucx_abi.cc, when configure found UCX 1.14.
 */
#ifndef UCT_TM_COMPAT_UCX_1_14_H_
#define UCT_TM_COMPAT_UCX_1_14_H_

#include "ucx_layouts.h"

static_assert(UCT_TM_UCX_ABI == 114, "ucx_1_14.h is for UCX 1.14");

namespace uct_tm {
namespace compat {

/* ---- layout facts: begin ---- */
/* UCX 1.14, read off its headers by contrib/ucx_layout.sh */
static_assert(sizeof(uct_component_t) == 208, "uct_component_t");
static_assert(offsetof(uct_component_t, query_md_resources) == 16, "uct_component_t::query_md_resources");
static_assert(offsetof(uct_component_t, md_open) == 24, "uct_component_t::md_open");
static_assert(offsetof(uct_component_t, cm_open) == 32, "uct_component_t::cm_open");
static_assert(offsetof(uct_component_t, rkey_unpack) == 40, "uct_component_t::rkey_unpack");
static_assert(offsetof(uct_component_t, rkey_ptr) == 48, "uct_component_t::rkey_ptr");
static_assert(offsetof(uct_component_t, rkey_release) == 56, "uct_component_t::rkey_release");
static_assert(offsetof(uct_component_t, md_config) == 64, "uct_component_t::md_config");
static_assert(offsetof(uct_component_t, cm_config) == 112, "uct_component_t::cm_config");
static_assert(offsetof(uct_component_t, tl_list) == 160, "uct_component_t::tl_list");
static_assert(offsetof(uct_component_t, list) == 176, "uct_component_t::list");
static_assert(offsetof(uct_component_t, flags) == 192, "uct_component_t::flags");
static_assert(offsetof(uct_component_t, md_vfs_init) == 200, "uct_component_t::md_vfs_init");
static_assert(sizeof(ucs_config_global_list_entry_t) == 48, "ucs_config_global_list_entry_t");
static_assert(sizeof(struct uct_md) == 16, "struct uct_md");
static_assert(offsetof(struct uct_md, component) == 8, "struct uct_md::component");
static_assert(sizeof(uct_md_ops_t) == 96, "uct_md_ops_t");
static_assert(offsetof(uct_md_ops_t, query) == 8, "uct_md_ops_t::query");
static_assert(offsetof(uct_md_ops_t, mem_alloc) == 16, "uct_md_ops_t::mem_alloc");
static_assert(offsetof(uct_md_ops_t, mem_free) == 24, "uct_md_ops_t::mem_free");
static_assert(offsetof(uct_md_ops_t, mem_advise) == 32, "uct_md_ops_t::mem_advise");
static_assert(offsetof(uct_md_ops_t, mem_reg) == 40, "uct_md_ops_t::mem_reg");
static_assert(offsetof(uct_md_ops_t, mem_dereg) == 48, "uct_md_ops_t::mem_dereg");
static_assert(offsetof(uct_md_ops_t, mem_query) == 56, "uct_md_ops_t::mem_query");
static_assert(offsetof(uct_md_ops_t, mkey_pack) == 64, "uct_md_ops_t::mkey_pack");
static_assert(offsetof(uct_md_ops_t, mem_attach) == 72, "uct_md_ops_t::mem_attach");
static_assert(offsetof(uct_md_ops_t, is_sockaddr_accessible) == 80, "uct_md_ops_t::is_sockaddr_accessible");
static_assert(offsetof(uct_md_ops_t, detect_memory_type) == 88, "uct_md_ops_t::detect_memory_type");
static_assert(sizeof(uct_md_mem_dereg_params_t) == 32, "uct_md_mem_dereg_params_t");
static_assert(offsetof(uct_md_mem_dereg_params_t, memh) == 16, "uct_md_mem_dereg_params_t::memh");
static_assert(UCT_MD_MEM_DEREG_FIELD_MEMH == 1, "UCT_MD_MEM_DEREG_FIELD_MEMH");
static_assert(sizeof(uct_md_mkey_pack_params_t) == 16, "uct_md_mkey_pack_params_t");
static_assert(offsetof(uct_md_mkey_pack_params_t, flags) == 8, "uct_md_mkey_pack_params_t::flags");
static_assert(UCT_MD_MKEY_PACK_FLAG_EXPORT == 2, "UCT_MD_MKEY_PACK_FLAG_EXPORT");
static_assert(sizeof(uct_md_mem_reg_params_t) == 32, "uct_md_mem_reg_params_t");
static_assert(offsetof(uct_md_mem_reg_params_t, flags) == 8, "uct_md_mem_reg_params_t::flags");
static_assert(UCT_MD_MEM_REG_FIELD_FLAGS == 1, "UCT_MD_MEM_REG_FIELD_FLAGS");
static_assert(sizeof(uct_md_attr_v2_t) == 512, "uct_md_attr_v2_t");
static_assert(offsetof(uct_md_attr_v2_t, max_alloc) == 8, "uct_md_attr_v2_t::max_alloc");
static_assert(offsetof(uct_md_attr_v2_t, max_reg) == 16, "uct_md_attr_v2_t::max_reg");
static_assert(offsetof(uct_md_attr_v2_t, flags) == 24, "uct_md_attr_v2_t::flags");
static_assert(offsetof(uct_md_attr_v2_t, reg_mem_types) == 32, "uct_md_attr_v2_t::reg_mem_types");
static_assert(offsetof(uct_md_attr_v2_t, cache_mem_types) == 40, "uct_md_attr_v2_t::cache_mem_types");
static_assert(offsetof(uct_md_attr_v2_t, detect_mem_types) == 48, "uct_md_attr_v2_t::detect_mem_types");
static_assert(offsetof(uct_md_attr_v2_t, alloc_mem_types) == 56, "uct_md_attr_v2_t::alloc_mem_types");
static_assert(offsetof(uct_md_attr_v2_t, access_mem_types) == 64, "uct_md_attr_v2_t::access_mem_types");
static_assert(offsetof(uct_md_attr_v2_t, dmabuf_mem_types) == 72, "uct_md_attr_v2_t::dmabuf_mem_types");
static_assert(offsetof(uct_md_attr_v2_t, reg_cost) == 80, "uct_md_attr_v2_t::reg_cost");
static_assert(offsetof(uct_md_attr_v2_t, component_name) == 96, "uct_md_attr_v2_t::component_name");
static_assert(offsetof(uct_md_attr_v2_t, rkey_packed_size) == 112, "uct_md_attr_v2_t::rkey_packed_size");
static_assert(offsetof(uct_md_attr_v2_t, local_cpus) == 120, "uct_md_attr_v2_t::local_cpus");
static_assert(offsetof(uct_md_attr_v2_t, exported_mkey_packed_size) == 248, "uct_md_attr_v2_t::exported_mkey_packed_size");
static_assert(offsetof(uct_md_attr_v2_t, global_id) == 256, "uct_md_attr_v2_t::global_id");
static_assert(sizeof(uct_tl_device_resource_t) == 40, "uct_tl_device_resource_t");
static_assert(offsetof(uct_tl_device_resource_t, type) == 32, "uct_tl_device_resource_t::type");
static_assert(offsetof(uct_tl_device_resource_t, sys_device) == 36, "uct_tl_device_resource_t::sys_device");
static_assert(sizeof(uct_tl_t) == 96, "uct_tl_t");
static_assert(offsetof(uct_tl_t, query_devices) == 16, "uct_tl_t::query_devices");
static_assert(offsetof(uct_tl_t, iface_open) == 24, "uct_tl_t::iface_open");
static_assert(offsetof(uct_tl_t, config) == 32, "uct_tl_t::config");
static_assert(offsetof(uct_tl_t, list) == 80, "uct_tl_t::list");
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
static_assert(sizeof(uct_iface_internal_ops_t) == 40, "uct_iface_internal_ops_t");
static_assert(offsetof(uct_iface_internal_ops_t, iface_estimate_perf) == 0, "uct_iface_internal_ops_t::iface_estimate_perf");
static_assert(offsetof(uct_iface_internal_ops_t, iface_vfs_refresh) == 8, "uct_iface_internal_ops_t::iface_vfs_refresh");
static_assert(offsetof(uct_iface_internal_ops_t, ep_query) == 16, "uct_iface_internal_ops_t::ep_query");
static_assert(offsetof(uct_iface_internal_ops_t, ep_invalidate) == 24, "uct_iface_internal_ops_t::ep_invalidate");
static_assert(offsetof(uct_iface_internal_ops_t, ep_connect_to_ep_v2) == 32, "uct_iface_internal_ops_t::ep_connect_to_ep_v2");
static_assert(sizeof(uct_perf_attr_t) == 88, "uct_perf_attr_t");
static_assert(offsetof(uct_perf_attr_t, operation) == 8, "uct_perf_attr_t::operation");
static_assert(offsetof(uct_perf_attr_t, send_pre_overhead) == 24, "uct_perf_attr_t::send_pre_overhead");
static_assert(offsetof(uct_perf_attr_t, send_post_overhead) == 32, "uct_perf_attr_t::send_post_overhead");
static_assert(offsetof(uct_perf_attr_t, recv_overhead) == 40, "uct_perf_attr_t::recv_overhead");
static_assert(offsetof(uct_perf_attr_t, bandwidth) == 48, "uct_perf_attr_t::bandwidth");
static_assert(offsetof(uct_perf_attr_t, latency) == 64, "uct_perf_attr_t::latency");
static_assert(offsetof(uct_perf_attr_t, max_inflight_eps) == 80, "uct_perf_attr_t::max_inflight_eps");
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
/* ---- layout facts: end ---- */

}  // namespace compat
}  // namespace uct_tm

#endif
