#include "config.h"
#include "wire.h"

#include <ucs/config/parser.h>
#include <ucs/debug/log_def.h>
#include <uct/api/version.h>

#include <cstddef>

namespace uct_tm {
namespace proto {
namespace {

/* What UCX's parser fills (its types: char* strings, unsigned, size_t, int). */
struct EnvConfig {
    char    *transports;
    size_t   rndv_thresh;
    size_t   unexpected_cap;
    unsigned max_peers;
    int      offload;
    double   keepalive;
    int      rcache;
    size_t   min_multi_recv;
};

ucs_config_field_t env_table[] = {
    {"TRANSPORTS", "tm_sm", "Comma-separated tl[:device] list of the ifaces a worker opens.",
     offsetof(EnvConfig, transports), UCS_CONFIG_TYPE_STRING},
    {"RNDV_THRESH", "128k", "Messages of at least this size are sent by rendezvous.",
     offsetof(EnvConfig, rndv_thresh), UCS_CONFIG_TYPE_MEMUNITS},
    /* 256m / 256 peers: 1 MiB of credit per sender, 16 of tm_sm's largest eager
     * message (64 KiB); with 4 (64m) a streaming sender ran out of credit before
     * its returns came back and sent 88% of 64 KiB messages by rendezvous */
    {"UNEXPECTED_CAP", "256m",
     "Eager bytes a worker buffers for unmatched messages, shared by MAX_PEERS senders; "
     "a sender out of its share uses rendezvous.",
     offsetof(EnvConfig, unexpected_cap), UCS_CONFIG_TYPE_MEMUNITS},
    {"MAX_PEERS", "256", "Senders sharing UNEXPECTED_CAP.", offsetof(EnvConfig, max_peers),
     UCS_CONFIG_TYPE_UINT},
    {"OFFLOAD", "y", "Post receives to the transport's tag list when it has one.",
     offsetof(EnvConfig, offload), UCS_CONFIG_TYPE_BOOL},
    {"KEEPALIVE_INTERVAL", "1s",
     "Every this long, each endpoint whose transport can check its peer (uct_ep_check) is\n"
     "checked, so that a peer that died or cannot be reached fails the endpoint -- and the\n"
     "sends waiting on it -- even when nothing is in flight to it; 0 turns it off.",
     offsetof(EnvConfig, keepalive), UCS_CONFIG_TYPE_TIME},
    {"RCACHE", "y",
     "Keep the registrations of rendezvous buffers that carry no mapped region in a\n"
     "registration cache (UCX's rcache), so that a buffer is registered once, not per\n"
     "operation; n: register and deregister per operation.",
     offsetof(EnvConfig, rcache), UCS_CONFIG_TYPE_BOOL},
    {"MIN_MULTI_RECV", "64",
     "A multi-receive buffer (FI_MULTI_RECV) is released once fewer bytes than this are\n"
     "left in it (FI_OPT_MIN_MULTI_RECV); at least 1.",
     offsetof(EnvConfig, min_multi_recv), UCS_CONFIG_TYPE_MEMUNITS},
    {}};

/* UCX 1.15 changed the parser's entry point: it takes the table's global-list
 * entry (name, prefix, table, size) instead of the table and prefix. */
ucs_status_t fill_env_config(EnvConfig *env) {
#if (UCT_VERNO_MAJOR * 100 + UCT_VERNO_MINOR) >= 115
    static ucs_config_global_list_entry_t entry = {};
    entry.name   = "TM protocol layer";
    entry.prefix = "TM_PROTO_";
    entry.table  = env_table;
    entry.size   = sizeof(EnvConfig);
    return ucs_config_parser_fill_opts(env, &entry, "UCX_", 0);
#else
    return ucs_config_parser_fill_opts(env, env_table, "UCX_", "TM_PROTO_", 0);
#endif
}

}  // namespace

ucs_status_t read_config(const uct_tm_proto_worker_params_t *params, Config *config) {
    EnvConfig env = {};
    ucs_status_t status = fill_env_config(&env);
    if (status != UCS_OK) {
        return status;
    }
    config->transports     = env.transports;
    config->rndv_thresh    = env.rndv_thresh;
    config->unexpected_cap = env.unexpected_cap;
    config->max_peers      = env.max_peers;
    config->offload        = env.offload != 0;
    config->keepalive_s    = env.keepalive;
    config->rcache         = env.rcache != 0;
    config->min_multi_recv = env.min_multi_recv;
    ucs_config_parser_release_opts(&env, env_table);

    if (params != nullptr) {
        const uint64_t f = params->field_mask;
        if (f & UCT_TM_PROTO_WORKER_FIELD_TRANSPORTS) {
            if (params->transports == nullptr) {
                return UCS_ERR_INVALID_PARAM;
            }
            config->transports = params->transports;
        }
        if (f & UCT_TM_PROTO_WORKER_FIELD_ID) {
            if ((params->id == 0) || (params->id > kMaxWorkerId)) {
                return UCS_ERR_INVALID_PARAM;
            }
            config->id = params->id;
        }
        if (f & UCT_TM_PROTO_WORKER_FIELD_RNDV_THRESH) {
            config->rndv_thresh = params->rndv_thresh;
        }
        if (f & UCT_TM_PROTO_WORKER_FIELD_UNEXPECTED_CAP) {
            config->unexpected_cap = params->unexpected_cap;
        }
        if (f & UCT_TM_PROTO_WORKER_FIELD_MAX_PEERS) {
            config->max_peers = params->max_peers;
        }
        if (f & UCT_TM_PROTO_WORKER_FIELD_OFFLOAD) {
            config->offload = params->offload != 0;
        }
        if (f & UCT_TM_PROTO_WORKER_FIELD_ERR_HANDLER) {
            config->err_handler     = params->err_handler;
            config->err_handler_arg = params->err_handler_arg;
        }
        if (f & UCT_TM_PROTO_WORKER_FIELD_BUFFERED) {
            if (params->buffered_cb == nullptr) {
                return UCS_ERR_INVALID_PARAM;
            }
            config->buffered_cb  = params->buffered_cb;
            config->buffered_arg = params->buffered_arg;
        }
        if (f & UCT_TM_PROTO_WORKER_FIELD_MIN_MULTI_RECV) {
            config->min_multi_recv = params->min_multi_recv;
        }
    }
    if ((config->max_peers == 0) || config->transports.empty() || (config->min_multi_recv == 0) ||
        (config->unexpected_cap / config->max_peers > UINT32_MAX)) {
        ucs_error("tm_proto: invalid configuration (MAX_PEERS %u, UNEXPECTED_CAP %zu, "
                  "MIN_MULTI_RECV %zu, TRANSPORTS '%s')", config->max_peers,
                  config->unexpected_cap, config->min_multi_recv, config->transports.c_str());
        return UCS_ERR_INVALID_PARAM;
    }
    return UCS_OK;
}

}  // namespace proto
}  // namespace uct_tm
