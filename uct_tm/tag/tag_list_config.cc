#include "tag_list_config.h"

#include <ucs/debug/log_def.h>

#include <cstddef>

namespace uct_tm {

ucs_config_field_t tag_list_config_table[] = {
    {"TAG_LIST_SIZE", "1024",
     "Receives that may be posted with uct_iface_tag_recv_zcopy at once; the next one gets\n"
     "UCS_ERR_EXCEEDS_LIMIT and UCP keeps it in its software queue. UCX's RC tag list\n"
     "defaults to the same; raise it for deep queues of posted receives.",
     offsetof(TagListConfig, list_size), UCS_CONFIG_TYPE_UINT},

    {"RECV_MAX_IOV", "8", "Largest iovcnt of uct_iface_tag_recv_zcopy (1..8).",
     offsetof(TagListConfig, recv_max_iov), UCS_CONFIG_TYPE_UINT},

    {nullptr, nullptr, nullptr, 0, UCS_CONFIG_TYPE_TABLE(nullptr)}};

ucs_status_t TagListConfig::check(const char *tl) const {
    if ((list_size < 1) || (recv_max_iov < 1) || (recv_max_iov > kMaxRecvIov)) {
        ucs_error("%s: TAG_LIST_SIZE %u (>= 1) or RECV_MAX_IOV %u (1..%zu) out of range", tl,
                  list_size, recv_max_iov, kMaxRecvIov);
        return UCS_ERR_INVALID_PARAM;
    }
    return UCS_OK;
}

}  // namespace uct_tm
