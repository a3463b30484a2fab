/*
 * tm_sm configuration (UCX_TM_SM_*), parsed by UCX's config parser and
 * listed by `ucx_info -c -f`.
 */
#ifndef UCT_TM_SM_SM_CONFIG_H_
#define UCT_TM_SM_SM_CONFIG_H_

#include "base/ucx_abi.h"
#include "tag/tag_list_config.h"

#include <ucs/config/types.h>

#include <cstddef>

namespace uct_tm {
namespace sm {

struct SmConfig {
    abi::IfaceConfig super; /* UCX's base iface settings (UCX_TM_SM_ALLOC, ...) */
    unsigned         fifo_size;
    size_t           fifo_elem_size;
    size_t           seg_size;
    unsigned         spare_descs;
    size_t           eager_max;
    size_t           bcopy_max;    /* UCS_MEMUNITS_AUTO: by UCX release */
    int              bcopy_in_place; /* through pack windows (sm_pack_windows.h) */
    size_t           recv_min;     /* UCS_MEMUNITS_AUTO: SEG_SIZE + 1 */
    int              copy;         /* CopyMode::Setting */
    double           copy_slow_bw; /* bytes per second */
    TagListConfig    tag_list;
    unsigned         rndv_slots;
    int              rndv_split;
    size_t           rndv_split_min;
    double           split_timeout;
    size_t           shm_direct_max;
    int              cma;
    int              rndv_copy; /* CopyChoice::Setting */
    unsigned         staging_chunks;
    size_t           staging_chunk_size;
    unsigned         max_peers;
    double           peer_check_interval;
    double           stall_timeout;
    double           stopped_timeout;
    double           close_timeout;
    int              numa_bind;
    int              named_segments;
    unsigned         progress_budget;
    int              print_stats;
};

extern ucs_config_field_t sm_config_table[];
extern const char        *sm_copy_names[]; /* for UCS_CONFIG_TYPE_ENUM, CopyMode::Setting order */
extern const char        *sm_rndv_copy_names[]; /* CopyChoice::Setting order */

}  // namespace sm
}  // namespace uct_tm

#endif
