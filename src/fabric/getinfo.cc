/*
 * fi_getinfo: a domain per transport the layer can open here, each an
 * FI_EP_RDM endpoint type with tagged and untagged messages, filtered by
 * the application's hints.
 */
#include "getinfo.h"
#include "serial.h"

#include <ucs/debug/log_def.h>

#include <array>
#include <cstdlib>
#include <mutex>
#include <cstring>
#include <strings.h>

namespace uct_tm {
namespace fabric {

namespace {

/* Transports that connect an endpoint to a peer's iface: an RDM endpoint
 * reaches a peer from its address alone. tm_rc needs endpoint-to-endpoint
 * wireup, which an AV insert cannot do (docs/libfabric.md). "tm_sm,tm_dc" and
 * "tm_sm,tcp" are one domain over both: tm_sm to the processes of this host,
 * the other to the rest (what MPI libraries ask for: FI_LOCAL_COMM and
 * FI_REMOTE_COMM). */
struct Candidate {
    const char *tl;
    bool        remote; /* reaches other hosts */
};
const Candidate kCandidates[] = {{"tm_sm", false}, {"tm_sm,tm_dc", true}, {"tm_sm,tcp", true},
                                 {"posix", false}, {"tm_dc", true},       {"tcp", true}};

bool reaches_remote(const std::string &tl) {
    for (const Candidate &c : kCandidates) {
        if (tl == c.tl) {
            return c.remote;
        }
    }
    return false;
}

/* The combined domain listed: FI_TM_REMOTE's choice if it opens, else the
 * first that opens (empty if none). */
const std::string &combined_domain() {
    static const std::string chosen = [] {
        char *remote = nullptr;
        if ((fi_param_get_str(&provider(), "remote", &remote) != FI_SUCCESS) ||
            (remote == nullptr) || (*remote == '\0')) {
            remote = nullptr; /* unset or empty: the first that opens */
        }
        for (const Candidate &c : kCandidates) {
            const std::string tl = c.tl;
            if ((tl.rfind("tm_sm,", 0) == 0) && ((remote == nullptr) || (tl.substr(6) == remote)) &&
                offered(tl)) {
                return tl;
            }
        }
        if (remote != nullptr) {
            ucs_warn("tm fabric: FI_TM_REMOTE=%s: no domain tm_sm,%s opens here", remote, remote);
        }
        return std::string();
    }();
    return chosen;
}

/* Listed unless hints name another: tm_sm, and the first of the combined
 * domains that opens here (tm_dc where the NIC has it, else tcp). The rest
 * only when named: they are the same reach by other means, not other
 * devices, and MPI libraries spread their ranks over a provider's entries
 * as over NICs (ranks over tm_dc and over tcp could not reach each other). */
bool listed(const fi_info *hints, const std::string &tl) {
    if (hints && hints->domain_attr && hints->domain_attr->name) {
        return true; /* matches() compares the name */
    }
    if (tl == "tm_sm") {
        return true;
    }
    return tl == combined_domain();
}

bool opens(const char *tl) {
    uct_tm_proto_worker_params_t params{};
    params.field_mask            = UCT_TM_PROTO_WORKER_FIELD_TRANSPORTS;
    params.transports            = tl;
    uct_tm_proto_worker_h worker = nullptr;
    if (uct_tm_proto_worker_create(&params, &worker) != UCS_OK) {
        return false;
    }
    uint8_t            name[sizeof(Name::address)];
    size_t             length = sizeof(name);
    const ucs_status_t status = uct_tm_proto_worker_address_compact(worker, name, &length);
    uct_tm_proto_worker_destroy(worker);
    if (status != UCS_OK) {
        ucs_warn("tm fabric: %s not offered: its worker address takes %zu bytes, a name holds %zu",
                 tl, length, sizeof(name));
    }
    return status == UCS_OK;
}

uint64_t caps_of(const std::string &tl) {
    return reaches_remote(tl) ? kCaps : (kCaps & ~FI_REMOTE_COMM);
}

bool subset(uint64_t asked, uint64_t offered) { return (asked & ~offered) == 0; }

bool tx_matches(const fi_tx_attr *a, uint64_t caps) {
    return (a == nullptr) || (subset(a->caps, caps) && subset(a->op_flags, kTxOpFlags) &&
                              subset(a->msg_order, kMsgOrder) && (a->comp_order == FI_ORDER_NONE) &&
                              (a->inject_size <= kInjectSize) && (a->size <= kQueueSize) &&
                              (a->iov_limit <= kIovLimit) && (a->rma_iov_limit == 0));
}

bool rx_matches(const fi_rx_attr *a, uint64_t caps) {
    return (a == nullptr) || (subset(a->caps, caps) && subset(a->op_flags, kRxOpFlags) &&
                              subset(a->msg_order, kMsgOrder) && (a->comp_order == FI_ORDER_NONE) &&
                              (a->total_buffered_recv == 0) && (a->size <= kQueueSize) &&
                              (a->iov_limit <= kIovLimit));
}

bool ep_matches(const fi_ep_attr *a) {
    return (a == nullptr) ||
           (((a->type == FI_EP_UNSPEC) || (a->type == FI_EP_RDM)) &&
            (a->protocol == FI_PROTO_UNSPEC) && (a->max_msg_size <= kMaxMsgSize) &&
            (a->msg_prefix_size == 0) && (a->tx_ctx_cnt <= 1) && (a->rx_ctx_cnt <= 1) &&
            (a->auth_key_size == 0));
}

bool domain_matches(const fi_domain_attr *a, const std::string &tl, uint64_t caps) {
    if (a == nullptr) {
        return true;
    }
    const bool threading = threading_known(a->threading);
    const bool progress  = ((a->control_progress == FI_PROGRESS_UNSPEC) ||
                           (a->control_progress == FI_PROGRESS_MANUAL)) &&
                          ((a->data_progress == FI_PROGRESS_UNSPEC) ||
                           (a->data_progress == FI_PROGRESS_MANUAL));
    const bool av = (a->av_type == FI_AV_UNSPEC) || (a->av_type == FI_AV_TABLE) ||
                    (a->av_type == FI_AV_MAP);
    return ((a->name == nullptr) || (tl == a->name)) && threading && progress && av &&
           (a->cq_data_size <= sizeof(uint64_t)) && subset(a->caps, caps) &&
           (a->auth_key_size == 0);
}

bool matches(const fi_info *hints, const std::string &tl) {
    if (hints == nullptr) {
        return true;
    }
    const uint64_t caps   = caps_of(tl);
    const bool     format = (hints->addr_format == FI_FORMAT_UNSPEC) ||
                        (hints->addr_format == kAddrFormat);
    const bool fabric = (hints->fabric_attr == nullptr) || (hints->fabric_attr->name == nullptr) ||
                        (strcasecmp(hints->fabric_attr->name, kFabricName) == 0);
    return subset(hints->caps, caps) && format && fabric && ep_matches(hints->ep_attr) &&
           domain_matches(hints->domain_attr, tl, caps) && tx_matches(hints->tx_attr, caps) &&
           rx_matches(hints->rx_attr, caps);
}

void fill_tx_rx(fi_info *info, const fi_info *hints) {
    const uint64_t caps = info->caps;
    /* domain caps (FI_LOCAL_COMM, FI_REMOTE_COMM) belong to info and domain only */
    info->tx_attr->caps        = caps & (FI_MSG | FI_TAGGED | FI_SEND);
    info->tx_attr->op_flags    = (hints && hints->tx_attr) ? hints->tx_attr->op_flags : 0;
    info->tx_attr->msg_order   = kMsgOrder;
    info->tx_attr->comp_order  = FI_ORDER_NONE;
    info->tx_attr->inject_size = kInjectSize;
    info->tx_attr->size        = kQueueSize;
    info->tx_attr->iov_limit   = kIovLimit;
    info->rx_attr->caps      = caps & (FI_MSG | FI_TAGGED | FI_RECV | FI_DIRECTED_RECV | FI_SOURCE |
                                  FI_MULTI_RECV);
    info->rx_attr->op_flags  = (hints && hints->rx_attr) ? hints->rx_attr->op_flags : 0;
    info->rx_attr->msg_order = kMsgOrder;
    info->rx_attr->comp_order = FI_ORDER_NONE;
    info->rx_attr->size       = kQueueSize;
    info->rx_attr->iov_limit  = kIovLimit;
}

void fill_ep_domain(fi_info *info, const fi_info *hints, const std::string &tl) {
    fi_ep_attr *ep       = info->ep_attr;
    ep->type             = FI_EP_RDM;
    ep->protocol         = FI_PROTO_UNSPEC;
    ep->protocol_version = 1;
    ep->max_msg_size     = kMaxMsgSize;
    ep->mem_tag_format   = 0xaaaaaaaaaaaaaaaaull; /* FI_TAG_GENERIC: all 64 bits */
    ep->tx_ctx_cnt       = 1;
    ep->rx_ctx_cnt       = 1;
    fi_domain_attr *d    = info->domain_attr;
    d->name              = strdup(tl.c_str());
    /* the level asked for; unasked, the one that lets the application most */
    d->threading         = ((hints != nullptr) && (hints->domain_attr != nullptr) &&
                    (hints->domain_attr->threading != FI_THREAD_UNSPEC))
                               ? hints->domain_attr->threading
                               : FI_THREAD_SAFE;
    d->control_progress  = FI_PROGRESS_MANUAL;
    d->data_progress     = FI_PROGRESS_MANUAL;
    d->resource_mgmt     = FI_RM_DISABLED;
    d->av_type       = (hints && hints->domain_attr) ? hints->domain_attr->av_type : FI_AV_UNSPEC;
    d->mr_mode       = 0; /* no FI_MR_LOCAL: the layer registers what a rendezvous needs */
    d->mr_key_size   = sizeof(uint64_t);
    d->cq_data_size  = sizeof(uint64_t);
    d->cq_cnt        = 1024;
    d->cntr_cnt          = 1024;
    d->ep_cnt        = 256;
    d->tx_ctx_cnt    = 256;
    d->rx_ctx_cnt    = 256;
    d->max_ep_tx_ctx = 1;
    d->max_ep_rx_ctx = 1;
    d->mr_iov_limit  = 1;
    d->mr_cnt        = 65536;
    d->caps          = info->caps & (FI_LOCAL_COMM | FI_REMOTE_COMM);
}

/* The source address: a name with no worker address (length 0), "any".
 * A worker's address exists only once fi_endpoint opens it; fi_endpoint
 * ignores src_addr and fi_av_insert refuses this name. */
void *any_name() {
    auto *name = static_cast<Name *>(calloc(1, sizeof(Name)));
    if (name != nullptr) {
        name->magic = kNameMagic;
    }
    return name;
}

fi_info *make_info(const fi_info *hints, const std::string &tl) {
    fi_info *info = fi_allocinfo();
    if (info == nullptr) {
        return nullptr;
    }
    const uint64_t offered = caps_of(tl);
    info->caps = (hints && hints->caps) ? (hints->caps | (offered & ~kPrimaryCaps)) : offered;
    info->mode = 0;
    info->addr_format = kAddrFormat;
    fill_tx_rx(info, hints);
    fill_ep_domain(info, hints, tl);
    info->fabric_attr->name         = strdup(kFabricName);
    info->fabric_attr->prov_version = kProviderVersion;
    if (hints && (hints->addr_format == kAddrFormat) && (hints->dest_addr != nullptr) &&
        (hints->dest_addrlen == kAddrLen)) {
        info->dest_addr = malloc(kAddrLen);
        if (info->dest_addr != nullptr) {
            memcpy(info->dest_addr, hints->dest_addr, kAddrLen);
            info->dest_addrlen = kAddrLen;
        }
    }
    info->src_addr    = any_name();
    info->src_addrlen = (info->src_addr != nullptr) ? kAddrLen : 0;
    if ((info->domain_attr->name == nullptr) || (info->fabric_attr->name == nullptr) ||
        (info->src_addr == nullptr)) {
        fi_freeinfo(info);
        return nullptr;
    }
    return info;
}

}  // namespace

/* Each candidate is tried once, when first asked for: a worker over tm_dc
 * takes long to open under emulation, and hints usually name one domain. */
bool offered(const std::string &tl) {
    constexpr size_t                          kCount = sizeof(kCandidates) / sizeof(kCandidates[0]);
    static std::array<std::once_flag, kCount> once;
    static std::array<bool, kCount>           opened;
    for (size_t i = 0; i < kCount; ++i) {
        if (tl == kCandidates[i].tl) {
            std::call_once(once[i], [i] { opened[i] = opens(kCandidates[i].tl); });
            return opened[i];
        }
    }
    return false;
}

/* node and service name no address this provider could resolve (names
 * travel out of band), so they are not used. */
int getinfo(uint32_t version, const char *, const char *, uint64_t, const fi_info *hints,
            fi_info **info) {
    if (info == nullptr) {
        return -FI_EINVAL;
    }
    *info = nullptr;
    if (FI_VERSION_LT(version, kMinApiVersion)) {
        return -FI_ENODATA;
    }
    fi_info *tail = nullptr;
    for (const Candidate &c : kCandidates) {
        const std::string tl = c.tl;
        if (!matches(hints, tl) || !listed(hints, tl) || !offered(tl)) {
            continue;
        }
        fi_info *one = make_info(hints, tl);
        if (one == nullptr) {
            fi_freeinfo(*info);
            *info = nullptr;
            return -FI_ENOMEM;
        }
        (tail ? tail->next : *info) = one;
        tail                        = one;
    }
    return (*info != nullptr) ? 0 : -FI_ENODATA;
}

}  // namespace fabric
}  // namespace uct_tm
