/*
 * tm_rc configuration (UCX_TM_RC_*), parsed by UCX's config parser and
 * listed by `ucx_info -c -f`.
 */
#ifndef UCT_TM_IB_RC_CONFIG_H_
#define UCT_TM_IB_RC_CONFIG_H_

#include "base/ucx_abi.h"
#include "tag/tag_list_config.h"

#include <cstddef>

namespace uct_tm {
namespace ib {

struct RcConfig {
    abi::IfaceConfig super; /* UCX's base iface settings */
    size_t           seg_size;
    unsigned         rx_queue_len;
    unsigned         tx_queue_len;
    unsigned         tx_bufs;
    unsigned         tx_cq_len;
    size_t           max_inline;
    int              gid_index;
    unsigned         path_mtu;
    unsigned         timeout;
    unsigned         retry_count;
    unsigned         rnr_retry;
    double           keepalive_interval; /* seconds */
    int              hw_tm;
    int              tm_model;
    unsigned long    tm_model_seed;
    unsigned         tm_model_tags;
    unsigned         fail_read;    /* testing only */
    unsigned         corrupt_rkey; /* testing only */
    TagListConfig    tag_list;
    unsigned         rndv_ops;
    unsigned         progress_budget;
    int              print_stats;
    /* tm_dc only (dc_config_table) */
    double           conn_timeout; /* seconds */
    double           conn_retry;   /* seconds */
    unsigned         max_passive;
    unsigned         qp_pool_size; /* QP_POOL_SIZE (alias NUM_DCI): initiator RC QPs at once */
    unsigned         dc_provider;  /* DcProviderSetting (dc_provider.h) */
};

extern ucs_config_field_t rc_config_table[];
/* tm_dc (UCX_TM_DC_*): tm_rc's settings and the on-demand connections'. */
extern ucs_config_field_t dc_config_table[];

}  // namespace ib
}  // namespace uct_tm

#endif
