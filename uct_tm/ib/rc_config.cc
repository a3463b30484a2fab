#include "rc_config.h"

#include "dc_provider.h"

#include <ucs/config/parser.h>

#include <cstddef>

namespace uct_tm {
namespace ib {

ucs_config_field_t rc_config_table[] = {
    {"", "", nullptr, offsetof(RcConfig, super), UCS_CONFIG_TYPE_TABLE(uct_iface_config_table)},

    {"SEG_SIZE", "8k",
     "Size of one receive buffer of the shared receive queue: the largest message sent in\n"
     "one piece (eager short/bcopy/zcopy, active messages), header included.",
     offsetof(RcConfig, seg_size), UCS_CONFIG_TYPE_MEMUNITS},

    {"RX_QUEUE_LEN", "1024",
     "Receive buffers posted to the interface's shared receive queue.",
     offsetof(RcConfig, rx_queue_len), UCS_CONFIG_TYPE_UINT},

    {"TX_QUEUE_LEN", "256",
     "Send work requests outstanding on one endpoint's queue pair; the next send gets\n"
     "UCS_ERR_NO_RESOURCE.",
     offsetof(RcConfig, tx_queue_len), UCS_CONFIG_TYPE_UINT},

    {"TX_BUFS", "512",
     "Registered send buffers of an interface (bcopy and copied short messages).",
     offsetof(RcConfig, tx_bufs), UCS_CONFIG_TYPE_UINT},

    {"TX_CQ_LEN", "4096",
     "Send completions outstanding on one interface (all its endpoints).",
     offsetof(RcConfig, tx_cq_len), UCS_CONFIG_TYPE_UINT},

    {"MAX_INLINE", "64",
     "Largest send the NIC copies from the work request itself (IBV_SEND_INLINE); the device\n"
     "may grant less.",
     offsetof(RcConfig, max_inline), UCS_CONFIG_TYPE_MEMUNITS},

    {"GID_INDEX", "-1",
     "GID table index on RoCE ports; -1 picks the first RoCE v2 entry with an IPv4 address,\n"
     "else the first RoCE v2 entry.",
     offsetof(RcConfig, gid_index), UCS_CONFIG_TYPE_INT},

    {"PATH_MTU", "0",
     "Path MTU in bytes (256..4096); 0 uses the smaller of both ports' active MTUs.",
     offsetof(RcConfig, path_mtu), UCS_CONFIG_TYPE_UINT},

    {"TIMEOUT", "18",
     "Queue pair local ACK timeout exponent: 4.096 us * 2^TIMEOUT (18: about 1 s). With\n"
     "RETRY_COUNT it bounds how long a dead peer goes unnoticed.",
     offsetof(RcConfig, timeout), UCS_CONFIG_TYPE_UINT},

    {"RETRY_COUNT", "6",
     "Transport retries before a send fails (0..7). Not 7 by default: Soft-RoCE takes 7 as\n"
     "retry forever, and a dead peer would then never fail the endpoint.",
     offsetof(RcConfig, retry_count), UCS_CONFIG_TYPE_UINT},

    {"KEEPALIVE_INTERVAL", "1s",
     "While rendezvous sends wait for their FIN on an endpoint with nothing else in flight,\n"
     "a probe (a header-only SEND the peer drops) is posted on its QP after this long without\n"
     "a FIN, so that a peer that died (its QP gone) fails the endpoint after\n"
     "TIMEOUT/RETRY_COUNT instead of leaving the sends waiting forever. Checked at most every\n"
     "100 ms.",
     offsetof(RcConfig, keepalive_interval), UCS_CONFIG_TYPE_TIME},

    {"RNR_RETRY", "7",
     "Retries when the peer has no receive buffer posted (0..7, 7: forever).",
     offsetof(RcConfig, rnr_retry), UCS_CONFIG_TYPE_UINT},

    {"HW_TM", "y",
     "Match tags on the NIC (a tag-matching SRQ) when the device reports tag matching.\n"
     "With n, or on devices without it, tags are matched in software over a plain SRQ.",
     offsetof(RcConfig, hw_tm), UCS_CONFIG_TYPE_BOOL},

    {"TM_MODEL", "n",
     "Match tags with the device model of a NIC's tag-matching engine (uct_tm/ib/tm_model.h)\n"
     "instead of the software matcher: every message received from the plain SRQ is handed\n"
     "to the model, which places matched data into posted receives (rendezvous by a real\n"
     "RDMA READ) and reports the completions a TM NIC would. For testing the hardware tag\n"
     "list path on devices without tag matching (docs/tm_rc.md).",
     offsetof(RcConfig, tm_model), UCS_CONFIG_TYPE_BOOL},

    {"TM_MODEL_SEED", "0",
     "With TM_MODEL: 0 runs the model's events in a fixed order from each progress call;\n"
     "any other value picks them in a random order from this seed (list-op completions\n"
     "deferred, a few events per progress call), so engine races happen inside the transport.",
     offsetof(RcConfig, tm_model_seed), UCS_CONFIG_TYPE_ULONG},

    {"TM_MODEL_TAGS", "1024",
     "With TM_MODEL: the modelled device's tag list size (tm_caps.max_num_tags).",
     offsetof(RcConfig, tm_model_tags), UCS_CONFIG_TYPE_UINT},

    {"FAIL_READ", "0",
     "Testing only (fault injection). The n-th rendezvous RDMA READ of the iface (1 = the\n"
     "first) fails as a remote access error would, without reaching the wire, with software\n"
     "matching and with TM_MODEL: the receive completes with an error and the connection to\n"
     "the sender fails. 0: none.",
     offsetof(RcConfig, fail_read), UCS_CONFIG_TYPE_UINT},

    {"CORRUPT_RKEY", "0",
     "Testing only (fault injection). The n-th tag_rndv_zcopy of the iface (1 = the first)\n"
     "advertises a corrupted rkey, so the device itself rejects the receiver's READ (a real\n"
     "remote access error: both QPs go to the error state). 0: none.",
     offsetof(RcConfig, corrupt_rkey), UCS_CONFIG_TYPE_UINT},

    {"", "", nullptr, offsetof(RcConfig, tag_list), UCS_CONFIG_TYPE_TABLE(tag_list_config_table)},

    {"RNDV_OPS", "1024",
     "Rendezvous operations (tag_rndv_zcopy sends and matched rendezvous receives) outstanding\n"
     "at once per interface.",
     offsetof(RcConfig, rndv_ops), UCS_CONFIG_TYPE_UINT},

    {"PROGRESS_BUDGET", "32", "Completions handled per completion queue and progress call.",
     offsetof(RcConfig, progress_budget), UCS_CONFIG_TYPE_UINT},

    {"PRINT_STATS", "n",
     "Print each interface's counters to stderr when it closes (receives posted and matched,\n"
     "unexpected messages, rendezvous reads, send completions with errors).",
     offsetof(RcConfig, print_stats), UCS_CONFIG_TYPE_BOOL},

    {}};

ucs_config_field_t dc_config_table[] = {
    {"", "", nullptr, 0, UCS_CONFIG_TYPE_TABLE(rc_config_table)},

    {"CONN_TIMEOUT", "10s",
     "An endpoint whose connection request the target iface has not answered in this long\n"
     "fails with UCS_ERR_ENDPOINT_TIMEOUT. Also how often the queue pairs made for peers'\n"
     "requests are probed when idle (those of a peer that died then go).",
     offsetof(RcConfig, conn_timeout), UCS_CONFIG_TYPE_TIME},

    {"CONN_RETRY", "100ms",
     "The connection request of an endpoint is sent again after this long without an answer\n"
     "(datagrams may be lost).",
     offsetof(RcConfig, conn_retry), UCS_CONFIG_TYPE_TIME},

    {"MAX_PASSIVE", "4096",
     "Queue pairs an iface makes for peers' connection requests; requests beyond are refused\n"
     "(the requester times out).",
     offsetof(RcConfig, max_passive), UCS_CONFIG_TYPE_UINT},

    /* An alias (no default) that users' settings may name; before
     * QP_POOL_SIZE, which wins if both are set (the environment is applied
     * in table order). */
    {"NUM_DCI", nullptr, "", offsetof(RcConfig, qp_pool_size), UCS_CONFIG_TYPE_UINT},

    {"QP_POOL_SIZE", "8",
     "RC queue pairs an iface keeps connected to targets at once (its initiators). An endpoint\n"
     "holds one while it sends; beyond this many, the least recently used idle connection is\n"
     "closed for the next endpoint that sends, and endpoints wait (pending) while every one\n"
     "of them has operations in flight.",
     offsetof(RcConfig, qp_pool_size), UCS_CONFIG_TYPE_UINT},

    {"PROVIDER", "auto",
     "Which implementation runs tm_dc's endpoints on the device:\n"
     " auto     mlx5 DC where the device is an mlx5 device that supports DC, else\n"
     "          on-demand RC (the reason mlx5 DC was not selected is logged at diag level\n"
     "          and printed with PRINT_STATS).\n"
     " mlx5     mlx5 DC (a DCT and DCIs through mlx5dv); opening the iface fails with\n"
     "          UCS_ERR_UNSUPPORTED, and the reason, where it is not usable.\n"
     " ondemand RC queue pairs connected on demand by a UD handshake, on any device.\n"
     "An iface only connects to ifaces of the same provider.",
     offsetof(RcConfig, dc_provider), UCS_CONFIG_TYPE_ENUM(dc_provider_names)},

    {}};

}  // namespace ib
}  // namespace uct_tm
