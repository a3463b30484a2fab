/*
 * Worker configuration: UCX_TM_PROTO_* variables read with UCX's config
 * parser, then overridden by the fields set in uct_tm_proto_worker_params_t.
 */
#ifndef UCT_TM_PROTO_CONFIG_H_
#define UCT_TM_PROTO_CONFIG_H_

#include "api/uct_tm_proto.h"

#include <cstddef>
#include <string>

namespace uct_tm {
namespace proto {

struct Config {
    std::string transports     = "tm_sm";
    uint32_t    id             = 0; /* 0: pick one */
    size_t      rndv_thresh    = 128 << 10;
    size_t      unexpected_cap = 64 << 20;
    unsigned    max_peers      = 256;
    bool        offload        = true;
    double      keepalive_s    = 1; /* 0: no keepalive */
    bool        rcache         = true; /* cache registrations of unmapped buffers */
    size_t      min_multi_recv = 64;   /* a multi-receive with less room left is released */
    uct_tm_proto_ep_err_cb_t err_handler     = nullptr;
    void                    *err_handler_arg = nullptr;
    uct_tm_proto_buffered_cb_t buffered_cb   = nullptr; /* buffered receives when set */
    void                      *buffered_arg  = nullptr;
};

/* Environment first, then params. Returns UCS_ERR_INVALID_PARAM for values
 * out of range. */
ucs_status_t read_config(const uct_tm_proto_worker_params_t *params, Config *config);

}  // namespace proto
}  // namespace uct_tm

#endif
