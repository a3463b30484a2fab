/*
 * tm_dc's on-demand provider: an endpoint made from an iface address gets
 * its own RC queue pair, bound to one the target makes for it, by a
 * handshake over the ifaces' UD connection channels (UdChannel):
 *
 *   initiator                              target
 *   ep_create: QP in INIT, kConnRequest -> accept_connection: a passive
 *   (again every CONN_RETRY until            endpoint, its QP bound to the
 *    answered, failed after CONN_TIMEOUT)    initiator's (RTR, RTS)
 *   complete_connection: QP bound      <- kConnReply (again for a repeat)
 *   sends flow (pending ones first)
 *   ep_destroy: kDisconnect            -> the passive endpoint goes
 *
 * The target's QP is bound before it answers, so nothing the initiator
 * sends after the reply can reach an unbound QP. Every QP of the iface
 * receives into its one SRQ, so its tag list -- software, the device model,
 * or the NIC's -- sees every peer. A passive endpoint is never the user's:
 * it carries the initiator's rendezvous reads and FINs back, and fails
 * silently (the initiator's own endpoint reports a dead peer).
 */
#include "rc_iface.h"

#include "base/clock.h"
#include "common/alloc_status.h"

#include <ucs/debug/log_def.h>

#include <algorithm>
#include <cstring>

namespace uct_tm {
namespace ib {

namespace {

uint64_t ns_of(double seconds) { return static_cast<uint64_t>(seconds * 1e9); }

/* A queue pair number fits in 24 bits. */
bool valid_qpn(uint32_t qpn) { return (qpn != 0) && (qpn < (1u << 24)); }

}  // namespace

ucs_status_t RcIface::get_address(uct_iface_addr_t *addr) const {
    if (on_demand_) {
        const IfaceAddress a = {conn_.qp_num(), 0, uid_};
        memcpy(addr, &a, sizeof(a));
    }
    return UCS_OK;
}

ucs_status_t RcIface::ep_create_connect(const uct_ep_params_t *params, uct_ep_h *ep_p) {
    const uint64_t need = UCT_EP_PARAM_FIELD_DEV_ADDR | UCT_EP_PARAM_FIELD_IFACE_ADDR;
    if (((params->field_mask & need) != need) || (params->dev_addr == nullptr) ||
        (params->iface_addr == nullptr)) {
        return UCS_ERR_INVALID_PARAM; /* CONNECT_TO_IFACE only */
    }
    if (!is_reachable(params->dev_addr, params->iface_addr)) {
        return UCS_ERR_UNREACHABLE;
    }
    DeviceAddress remote;
    IfaceAddress  ia;
    memcpy(&remote, params->dev_addr, sizeof(remote));
    memcpy(&ia, params->iface_addr, sizeof(ia));
    if (!valid_qpn(ia.ud_qpn)) {
        return UCS_ERR_INVALID_PARAM;
    }
    RcEp              *ep     = nullptr;
    const ucs_status_t status = new_ep(&ep);
    if (status != UCS_OK) {
        return status;
    }
    ep->remote_dev  = remote;
    ep->peer_uid    = ia.uid;
    ep->peer_ud_qpn = ia.ud_qpn;
    ep->conn_id     = next_conn_id_++;
    if (alloc_status([&] { connecting_.push_back(ep); }) != UCS_OK) {
        free_ep(ep);
        return UCS_ERR_NO_MEMORY;
    }
    const uint64_t now   = monotonic_ns();
    ep->conn_deadline_ns = now + ns_of(config_.conn_timeout);
    ep->conn_retry_ns    = now + ns_of(config_.conn_retry);
    /* lost or refused for now (no send slot): CONN_RETRY asks again */
    (void)send_conn_message(ConnKind::kConnRequest, ep, remote);
    *ep_p = &ep->super;
    return UCS_OK;
}

ucs_status_t RcIface::send_conn_message(ConnKind kind, const RcEp *ep, const DeviceAddress &to) {
    ConnMessage m = {};
    m.kind      = kind;
    m.version   = kConnVersion;
    m.rc_qpn    = ep->qp->qp_num;
    m.seg_size  = static_cast<uint32_t>(seg_size_);
    m.reply_qpn = conn_.qp_num();
    m.uid       = ep->passive ? ep->peer_uid : uid_; /* the initiator's */
    m.conn_id   = ep->conn_id;
    m.dev       = dev_addr_;
    return conn_.send(to, ep->peer_ud_qpn, &m, sizeof(m));
}

unsigned RcIface::progress_connections() {
    unsigned n = conn_.poll([this](const char *data, size_t length) { handle_conn_message(data, length); });
    if (!connecting_.empty()) {
        const uint64_t            now = monotonic_ns();
        const std::vector<RcEp *> waiting = connecting_; /* fail_ep may call the user */
        for (RcEp *ep : waiting) {
            if (now >= ep->conn_deadline_ns) {
                connecting_.erase(std::find(connecting_.begin(), connecting_.end(), ep));
                ucs_diag("tm_dc: no answer to the connection request of QP 0x%x in %.1f s",
                         ep->qp->qp_num, config_.conn_timeout);
                fail_ep(ep, UCS_ERR_ENDPOINT_TIMEOUT);
            } else if (now >= ep->conn_retry_ns) {
                ep->conn_retry_ns = now + ns_of(config_.conn_retry);
                (void)send_conn_message(ConnKind::kConnRequest, ep, ep->remote_dev);
            }
        }
    }
    if (ucs_unlikely(reap_passive_)) {
        reap_passive_ = false;
        const std::vector<RcEp *> all = eps_;
        for (RcEp *ep : all) {
            if (ep->passive && ep->failed) {
                if (ep->outstanding == 0) {
                    ep_destroy(ep);
                    ++n;
                } else {
                    reap_passive_ = true; /* when its sends are back */
                }
            }
        }
    }
    return n;
}

void RcIface::handle_conn_message(const void *data, size_t length) {
    ConnMessage m;
    if (length < sizeof(m)) {
        ++counters_.dropped;
        return;
    }
    memcpy(&m, data, sizeof(m));
    if ((m.version != kConnVersion) || !valid_qpn(m.rc_qpn) || !valid_qpn(m.reply_qpn) ||
        (m.seg_size < kMinSegSize) || (m.dev.roce != dev_addr_.roce)) {
        ucs_diag("tm_dc: dropped a malformed connection message (kind %u, version %u)",
                 static_cast<unsigned>(m.kind), m.version);
        ++counters_.dropped;
        return;
    }
    switch (m.kind) {
    case ConnKind::kConnRequest:
        accept_connection(m);
        break;
    case ConnKind::kConnReply:
        complete_connection(m);
        break;
    case ConnKind::kDisconnect:
        if (RcEp *ep = passive_ep(m.uid, m.conn_id); (ep != nullptr) && (ep->remote_qp_num == m.rc_qpn)) {
            /* its operations end with it (ep_destroy flushes the QP) */
            ep_destroy(ep);
        }
        break;
    default:
        ++counters_.dropped;
        break;
    }
}

RcEp *RcIface::passive_ep(uint64_t uid, uint64_t conn_id) const {
    for (RcEp *ep : eps_) {
        if (ep->passive && (ep->peer_uid == uid) && (ep->conn_id == conn_id)) {
            return ep;
        }
    }
    return nullptr;
}

void RcIface::accept_connection(const ConnMessage &req) {
    if (RcEp *ep = passive_ep(req.uid, req.conn_id)) {
        if ((ep->remote_qp_num == req.rc_qpn) && !ep->failed) {
            /* our reply was lost: the same answer again */
            (void)send_conn_message(ConnKind::kConnReply, ep, req.dev);
        }
        return;
    }
    const size_t passive = static_cast<size_t>(
            std::count_if(eps_.begin(), eps_.end(), [](const RcEp *e) { return e->passive; }));
    if (passive >= config_.max_passive) {
        ucs_diag("tm_dc: %zu peers connected to this iface already (MAX_PASSIVE): request refused",
                 passive);
        ++counters_.dropped;
        return;
    }
    RcEp *ep = nullptr;
    if (new_ep(&ep) != UCS_OK) {
        return; /* logged; the initiator asks again */
    }
    ep->passive     = true;
    ep->notified    = true; /* no user to tell */
    ep->peer_uid    = req.uid;
    ep->conn_id     = req.conn_id;
    ep->peer_ud_qpn = req.reply_qpn;
    if (connect_qp(ep, req.dev, EpAddress{req.rc_qpn, req.seg_size}) != UCS_OK) {
        free_ep(ep);
        return;
    }
    (void)send_conn_message(ConnKind::kConnReply, ep, req.dev);
}

void RcIface::complete_connection(const ConnMessage &rep) {
    if (rep.uid != uid_) {
        ++counters_.dropped; /* for another iface, or an earlier incarnation of ours */
        return;
    }
    const auto it = std::find_if(connecting_.begin(), connecting_.end(),
                                 [&](const RcEp *ep) { return ep->conn_id == rep.conn_id; });
    if (it == connecting_.end()) {
        return; /* a repeated reply: connected already */
    }
    RcEp *ep = *it;
    if ((rep.dev.lid != ep->remote_dev.lid) ||
        (memcmp(rep.dev.gid, ep->remote_dev.gid, sizeof(rep.dev.gid)) != 0)) {
        ++counters_.dropped; /* not from the port the endpoint was made to */
        return;
    }
    connecting_.erase(it);
    const ucs_status_t status = connect_qp(ep, ep->remote_dev, EpAddress{rep.rc_qpn, rep.seg_size});
    if (status != UCS_OK) {
        fail_ep(ep, status);
    }
}

void RcIface::disconnect(RcEp *ep) {
    /* also while connecting: the target may have made its end already */
    (void)send_conn_message(ConnKind::kDisconnect, ep, ep->remote_dev);
}

}  // namespace ib
}  // namespace uct_tm
