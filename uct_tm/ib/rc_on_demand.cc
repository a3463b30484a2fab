/*
 * ConnectOnDemand, tm_dc's connection mode (the on-demand provider): an
 * endpoint made from an iface address gets
 * an RC queue pair from the iface's pool when it first sends, bound to one
 * the target makes for it, by a handshake over the ifaces' UD connection
 * channels (UdChannel):
 *
 *   initiator                              target
 *   first send: QP in INIT, kConnRequest -> accept_connection: a passive
 *   (again every CONN_RETRY until            endpoint, its QP bound to the
 *    answered, failed after CONN_TIMEOUT)    initiator's (RTR, RTS)
 *   complete_connection: QP bound      <- kConnReply (again for a repeat)
 *   sends flow (pending ones first)
 *   ep_destroy or eviction: kDisconnect -> the passive endpoint goes
 *   (again until acknowledged)         <- kDisconnectAck
 *
 * The pool (QpPool, sized by QP_POOL_SIZE) bounds the QPs an iface holds as
 * initiator, as a DC iface's DCIs would: an endpoint that sends while every QP of the pool is
 * taken gets the least recently used idle one's -- that connection is
 * closed (nothing of it is in flight: every send acknowledged, no
 * rendezvous waiting for its FIN, so the target has all of it) -- or, when
 * none is idle, waits (NO_RESOURCE, pending) until one is. The evicted
 * endpoint connects again when it next sends; what it sends then follows
 * what the closed connection delivered.
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
#include <random>

#include <unistd.h>

namespace uct_tm {
namespace ib {

namespace {

/* Closes not confirmed yet that an iface keeps asking about. */
constexpr size_t kMaxDisconnects = 4096;

/* Closed connections a target remembers (a late request copy of one makes nothing). */
constexpr size_t kClosedMemory = 256;

/* A queue pair number fits in 24 bits. */
bool valid_qpn(uint32_t qpn) { return (qpn != 0) && (qpn < (1u << 24)); }

}  // namespace

ConnectOnDemand::ConnectOnDemand(RcIface &iface) : iface_(iface), config_(iface.config_) {}

ucs_status_t ConnectOnDemand::init() {
    if ((config_.conn_retry <= 0) || !(config_.conn_timeout > 0)) {
        ucs_error("tm_dc: CONN_RETRY and CONN_TIMEOUT must be positive");
        return UCS_ERR_INVALID_PARAM;
    }
    if (config_.qp_pool_size == 0) {
        ucs_error("tm_dc: QP_POOL_SIZE (NUM_DCI) must be at least 1");
        return UCS_ERR_INVALID_PARAM;
    }
    pool_.set_capacity(config_.qp_pool_size);
    const ucs_status_t provider_status = select_dc_provider();
    if (provider_status != UCS_OK) {
        return provider_status;
    }
    /* tells this iface's incarnations apart: a reply to an earlier one is not ours */
    std::random_device rd;
    uid_ = (uint64_t{rd()} << 32) ^ rd() ^ (monotonic_ns() << 16) ^ static_cast<uint64_t>(getpid());
    /* connection ids from a random start: a reply is not guessed from the count */
    next_conn_id_ = (uint64_t{rd()} << 32) | rd();
    return conn_.open(iface_.md_->pd, iface_.port_, iface_.gid_index_, 64);
}

ucs_status_t ConnectOnDemand::select_dc_provider() {
    const auto    setting = static_cast<DcProviderSetting>(config_.dc_provider);
    const IbMd   &md      = *iface_.md_;
    Mlx5DcSupport mlx5;
    if (setting != DcProviderSetting::kOnDemand) {
        DcProbePort port;
        port.num       = iface_.port_;
        port.roce      = iface_.roce_;
        port.gid_index = iface_.gid_index_;
        port.mtu       = static_cast<enum ibv_mtu>(iface_.dev_addr_.mtu);
        mlx5           = probe_mlx5_dc(md.ctx, md.device, md.pd, iface_.rx_cq_, iface_.srq_, port);
    }
    dc_choice_ = choose_dc_provider(setting, mlx5, md.device);
    if (dc_choice_.status != UCS_OK) {
        ucs_error("%s", dc_choice_.note.c_str());
        return dc_choice_.status;
    }
    if (dc_choice_.provider == DcProvider::kMlx5) {
        /* The probe reports mlx5 DC unusable while there is no DC data
         * path (dc_provider.cc): never chosen in this build. */
        ucs_error("tm_dc: mlx5 DC chosen on %s, which this build cannot run", md.device.c_str());
        return UCS_ERR_UNSUPPORTED;
    }
    if (setting == DcProviderSetting::kAuto) {
        ucs_diag("tm_dc: mlx5 DC not selected on %s: %s; on-demand RC", md.device.c_str(),
                 mlx5.reason.c_str());
    }
    return UCS_OK;
}

void ConnectOnDemand::query(uct_iface_attr_t *attr) const {
    attr->cap.flags |= UCT_IFACE_FLAG_CONNECT_TO_IFACE;
    attr->iface_addr_len = sizeof(IfaceAddress);
    attr->ep_addr_len    = 0;
}

ucs_status_t ConnectOnDemand::get_address(uct_iface_addr_t *addr) const {
    IfaceAddress a = {};
    a.ud_qpn       = conn_.qp_num();
    a.provider     = static_cast<uint8_t>(DcProvider::kOnDemand);
    a.uid          = uid_;
    memcpy(addr, &a, sizeof(a));
    return UCS_OK;
}

bool ConnectOnDemand::reachable(const uct_iface_addr_t *iface_addr) const {
    if (iface_addr == nullptr) {
        return false;
    }
    IfaceAddress ia;
    memcpy(&ia, iface_addr, sizeof(ia));
    /* another provider's iface is not (ep_create says so) */
    return ia.provider == static_cast<uint8_t>(dc_choice_.provider);
}

bool ConnectOnDemand::ep_is_connected(const RcEp *ep, const uct_device_addr_t *dev_addr,
                                      const uct_iface_addr_t *iface_addr,
                                      const uct_ep_addr_t *) const {
    if ((dev_addr == nullptr) || (iface_addr == nullptr)) {
        return false;
    }
    DeviceAddress remote;
    IfaceAddress  ia;
    memcpy(&remote, dev_addr, sizeof(remote));
    memcpy(&ia, iface_addr, sizeof(ia));
    return !ep->passive && (ia.uid == ep->peer_uid) && (remote.lid == ep->remote_dev.lid) &&
           (memcmp(remote.gid, ep->remote_dev.gid, sizeof(remote.gid)) == 0);
}

bool ConnectOnDemand::check_unconnected(RcEp *ep) {
    if (ep->passive || ep->failed) {
        return false;
    }
    ping(ep); /* no connection to probe: ask the target iface itself */
    return true;
}

void ConnectOnDemand::ep_destroying(RcEp *ep) {
    if (!ep->passive && (ep->qp != nullptr)) {
        disconnect(ep);
    }
}

void ConnectOnDemand::ep_failed(RcEp *ep) {
    if (ep->passive) {
        reap_passive_ = true; /* nobody else will destroy it */
    } else {
        /* its QP is no use to it any more: the pool's slot goes to others
         * (the QP itself when the user destroys the endpoint) */
        leave_pool(ep);
    }
}

void ConnectOnDemand::ep_freed(RcEp *ep) {
    if (ep->passive) {
        forget_passive(ep);
    } else {
        leave_pool(ep);
    }
    connecting_.erase(std::remove(connecting_.begin(), connecting_.end(), ep), connecting_.end());
}

void ConnectOnDemand::print_stats(FILE *stream) const {
    const char *tl  = iface_.opened_as().name;
    const char *dev = iface_.md_ ? iface_.md_->device.c_str() : "?";
    fprintf(stream, "%s %s:%u: provider %s: %s\n", tl, dev, iface_.port_,
            dc_provider_name(dc_choice_.provider), dc_choice_.note.c_str());
    fprintf(stream,
            "%s %s:%u: connects %lu accepts %lu evictions %lu max_qps %lu passive_open %zu "
            "(QP_POOL_SIZE %u)\n",
            tl, dev, iface_.port_, (unsigned long)iface_.counters_.connects,
            (unsigned long)iface_.counters_.accepts, (unsigned long)iface_.counters_.evictions,
            (unsigned long)iface_.counters_.max_qps, passive_count_,
            static_cast<unsigned>(pool_.capacity()));
}

ucs_status_t ConnectOnDemand::ep_create(const uct_ep_params_t *params, uct_ep_h *ep_p) {
    const uint64_t need = UCT_EP_PARAM_FIELD_DEV_ADDR | UCT_EP_PARAM_FIELD_IFACE_ADDR;
    if (((params->field_mask & need) != need) || (params->dev_addr == nullptr) ||
        (params->iface_addr == nullptr)) {
        return UCS_ERR_INVALID_PARAM; /* CONNECT_TO_IFACE only */
    }
    IfaceAddress ia;
    memcpy(&ia, params->iface_addr, sizeof(ia));
    const ucs_status_t provider_status = check_provider(ia);
    if (provider_status != UCS_OK) {
        return provider_status;
    }
    if (!iface_.is_reachable(params->dev_addr, params->iface_addr)) {
        return UCS_ERR_UNREACHABLE;
    }
    DeviceAddress remote;
    memcpy(&remote, params->dev_addr, sizeof(remote));
    if (!valid_qpn(ia.ud_qpn)) {
        return UCS_ERR_INVALID_PARAM;
    }
    RcEp              *ep     = nullptr;
    const ucs_status_t status = iface_.new_ep(&ep, false); /* its QP when it first sends */
    if (status != UCS_OK) {
        return status;
    }
    ep->remote_dev  = remote;
    ep->peer_uid    = ia.uid;
    ep->peer_ud_qpn = ia.ud_qpn;
    *ep_p = &ep->super;
    return UCS_OK;
}

ucs_status_t ConnectOnDemand::check_provider(const IfaceAddress &ia) const {
    if (ia.provider == static_cast<uint8_t>(DcProvider::kOnDemand)) {
        return UCS_OK;
    }
    if (ia.provider == static_cast<uint8_t>(DcProvider::kMlx5)) {
        ucs_error("tm_dc: the iface address is one of an mlx5 DC iface; this iface (%s) runs the "
                  "on-demand RC provider, which reaches on-demand ifaces only "
                  "(UCX_TM_DC_PROVIDER must match on both sides)",
                  iface_.md_->device.c_str());
        return UCS_ERR_UNREACHABLE;
    }
    ucs_error("tm_dc: the iface address names an unknown provider (%u)", unsigned{ia.provider});
    return UCS_ERR_INVALID_PARAM;
}

void ConnectOnDemand::request_qp(RcEp *ep) {
    if (ep->qp_waiting || ep->failed) {
        return;
    }
    if (!pool_.has_waiters() && qp_room(monotonic_ns())) {
        start_connect(ep);
        return;
    }
    if (alloc_status([&] { pool_.wait(ep); }) == UCS_OK) {
        ep->qp_waiting = true;
    }
}

void ConnectOnDemand::leave_pool(RcEp *ep) {
    const auto drop = [ep](std::vector<RcEp *> &v) { v.erase(std::remove(v.begin(), v.end(), ep), v.end()); };
    pool_.leave(ep);
    drop(connect_failures_);
    drop(pinging_);
    ep->qp_waiting = false;
    ep->ping_seq   = 0;
}

void ConnectOnDemand::start_connect(RcEp *ep) {
    ucs_status_t status = iface_.create_qp(ep);
    if ((status == UCS_OK) && (alloc_status([&] {
                                   pool_.hold(ep);
                                   connecting_.push_back(ep);
                               }) != UCS_OK)) {
        pool_.unhold(ep);
        connecting_.erase(std::remove(connecting_.begin(), connecting_.end(), ep), connecting_.end());
        iface_.destroy_qp(ep);
        status = UCS_ERR_NO_MEMORY;
    }
    if (status != UCS_OK) {
        /* the error handler is called from progress, not inside the send */
        ep->failed = true;
        if (alloc_status([&] { connect_failures_.push_back(ep); }) != UCS_OK) {
            ep->notified = true; /* cannot even queue the report: the sends fail */
        }
        return;
    }
    ep->conn_id          = next_conn_id_++;
    const uint64_t now   = monotonic_ns();
    ep->conn_deadline_ns = deadline_after(now, seconds_to_ns(config_.conn_timeout));
    ep->conn_retry_ns    = deadline_after(now, seconds_to_ns(config_.conn_retry));
    ep->probe_due_ns     = 0;
    ++iface_.counters_.connects;
    /* lost or refused for now (no send slot): CONN_RETRY asks again */
    (void)send_conn_message(ConnKind::kConnRequest, ep, ep->remote_dev);
}

bool ConnectOnDemand::evictable(const RcEp *ep, uint64_t now) const {
    /* Nothing of the connection in flight: every send acknowledged (so the
     * target holds it), no rendezvous waiting for its FIN or read. A fresh
     * connection is kept until it was used or CONN_RETRY passed, so that
     * two endpoints cannot take a QP from each other forever. */
    return ep->connected && !ep->failed && (ep->outstanding == 0) && (ep->rndv_sends == 0) &&
           ep->pending.empty() &&
           ((ep->last_use != ep->connect_use) ||
            (now >= ep->connected_ns + seconds_to_ns(config_.conn_retry)));
}

bool ConnectOnDemand::qp_room(uint64_t now) {
    return pool_.room(
        now, [this](const RcEp *ep, uint64_t t) { return evictable(ep, t); },
        [this](RcEp *lru) {
            disconnect(lru);
            iface_.destroy_qp(lru);
            ++iface_.counters_.evictions;
        });
}

void ConnectOnDemand::serve_qp_waiters(uint64_t now) {
    pool_.serve([this, now] { return qp_room(now); },
                [this](RcEp *ep) {
                    ep->qp_waiting = false;
                    start_connect(ep);
                });
}

ucs_status_t ConnectOnDemand::send_conn_message(ConnKind kind, const RcEp *ep,
                                                const DeviceAddress &to) {
    return send_conn_message(kind, ep->qp->qp_num, ep->passive ? ep->peer_uid : uid_, ep->conn_id,
                             to, ep->peer_ud_qpn);
}

ucs_status_t ConnectOnDemand::send_conn_message(ConnKind kind, uint32_t rc_qpn, uint64_t uid,
                                                uint64_t conn_id, const DeviceAddress &to,
                                                uint32_t to_qpn) {
    ConnMessage m = {};
    m.kind      = kind;
    m.version   = kConnVersion;
    m.rc_qpn    = rc_qpn;
    m.seg_size    = static_cast<uint32_t>(iface_.seg_size_);
    m.reply_qpn = conn_.qp_num();
    m.uid       = uid; /* the initiator's */
    m.conn_id   = conn_id;
    m.dev         = iface_.dev_addr_;
    return conn_.send(to, to_qpn, &m, sizeof(m));
}

unsigned ConnectOnDemand::progress() {
    unsigned n = conn_.poll([this](const char *data, size_t length) { handle_conn_message(data, length); });
    if (ucs_unlikely(!connect_failures_.empty())) {
        while (!connect_failures_.empty()) { /* fail_ep calls the user, who may destroy others */
            RcEp *ep = connect_failures_.back();
            connect_failures_.pop_back();
            iface_.fail_ep(ep, UCS_ERR_NO_RESOURCE);
        }
    }
    const bool probe = (passive_count_ > 0) && ((++progress_count_ & 1023) == 0);
    if (!probe && !pool_.has_waiters() && disconnects_.empty() && pinging_.empty() &&
        connecting_.empty()) {
        return n + reap_failed_passive();
    }
    const uint64_t now = monotonic_ns(); /* once: the clock is no free call */
    if (pool_.has_waiters()) {
        serve_qp_waiters(now);
    }
    if (!disconnects_.empty()) {
        retry_disconnects(now);
    }
    if (!pinging_.empty()) {
        progress_pings(now);
    }
    if (probe) {
        probe_passive(now);
    }
    if (!connecting_.empty()) {
        const std::vector<RcEp *> waiting = connecting_; /* fail_ep may call the user */
        for (RcEp *ep : waiting) {
            const auto it = std::find(connecting_.begin(), connecting_.end(), ep);
            if (it == connecting_.end()) {
                continue; /* destroyed by an error handler meanwhile */
            }
            if (now >= ep->conn_deadline_ns) {
                connecting_.erase(it);
                ucs_diag("tm_dc: no answer to the connection request of QP 0x%x in %.1f s",
                         ep->qp->qp_num, config_.conn_timeout);
                iface_.fail_ep(ep, UCS_ERR_ENDPOINT_TIMEOUT);
            } else if (now >= ep->conn_retry_ns) {
                ep->conn_retry_ns = deadline_after(now, seconds_to_ns(config_.conn_retry));
                (void)send_conn_message(ConnKind::kConnRequest, ep, ep->remote_dev);
            }
        }
    }
    return n + reap_failed_passive();
}

unsigned ConnectOnDemand::reap_failed_passive() {
    if (ucs_likely(!reap_passive_)) {
        return 0;
    }
    reap_passive_    = false;
    unsigned reaped  = 0;
    const std::vector<RcEp *> all     = iface_.eps_; /* ep_destroy edits eps_ */
    for (RcEp *ep : all) {
        if (ep->passive && ep->failed) {
            if (ep->outstanding == 0) {
                iface_.ep_destroy(ep);
                ++reaped;
            } else {
                reap_passive_ = true; /* when its sends are back */
            }
        }
    }
    return reaped;
}

void ConnectOnDemand::handle_conn_message(const void *data, size_t length) {
    ConnMessage m;
    if (length < sizeof(m)) {
        ++iface_.counters_.dropped;
        return;
    }
    memcpy(&m, data, sizeof(m));
    if ((m.version != kConnVersion) || !valid_qpn(m.rc_qpn) || !valid_qpn(m.reply_qpn) ||
        (m.seg_size < kMinSegSize) || (m.dev.roce != iface_.dev_addr_.roce)) {
        ucs_diag("tm_dc: dropped a malformed connection message (kind %u, version %u)",
                 static_cast<unsigned>(m.kind), m.version);
        ++iface_.counters_.dropped;
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
            iface_.ep_destroy(ep);
        } else if (ep == nullptr) {
            remember_closed(ConnKey{m.uid, m.conn_id}); /* its request may still come */
        }
        /* whether or not it was still here: the initiator stops asking */
        (void)send_conn_message(ConnKind::kDisconnectAck, m.rc_qpn, m.uid, m.conn_id, m.dev,
                                m.reply_qpn);
        break;
    case ConnKind::kPing:
        if (m.conn_id == uid_) { /* for this iface, not an earlier one at the same QP */
            (void)send_conn_message(ConnKind::kPong, m.rc_qpn, m.uid, m.conn_id, m.dev, m.reply_qpn);
        }
        break;
    case ConnKind::kPong:
        if (m.uid == uid_) {
            const auto it = std::find_if(pinging_.begin(), pinging_.end(), [&](const RcEp *ep) {
                return (ep->ping_seq == m.rc_qpn) && (ep->peer_uid == m.conn_id);
            });
            if (it != pinging_.end()) {
                (*it)->ping_seq = 0;
                pinging_.erase(it);
            }
        }
        break;
    case ConnKind::kDisconnectAck:
        if (m.uid == uid_) {
            const auto it = std::find_if(disconnects_.begin(), disconnects_.end(), [&](const Disconnect &d) {
                return (d.conn_id == m.conn_id) && (d.rc_qpn == m.rc_qpn);
            });
            if (it != disconnects_.end()) {
                disconnects_.erase(it);
            }
        }
        break;
    default: ++iface_.counters_.dropped; break;
    }
}

RcEp *ConnectOnDemand::passive_ep(uint64_t uid, uint64_t conn_id) const {
    const auto it = passive_eps_.find(ConnKey{uid, conn_id});
    return (it != passive_eps_.end()) ? it->second : nullptr;
}

void ConnectOnDemand::ping(RcEp *ep) {
    if (ep->ping_seq != 0) {
        return; /* one at a time */
    }
    if (alloc_status([&] { pinging_.push_back(ep); }) != UCS_OK) {
        return; /* the next check asks again */
    }
    ep->ping_seq = next_ping_seq_;
    next_ping_seq_ = (next_ping_seq_ % ((1u << 24) - 1)) + 1; /* 1 .. 2^24 - 1: a valid field */
    const uint64_t now   = monotonic_ns();
    ep->ping_retry_ns    = deadline_after(now, seconds_to_ns(config_.conn_retry));
    ep->ping_deadline_ns = deadline_after(now, seconds_to_ns(config_.conn_timeout));
    (void)send_conn_message(ConnKind::kPing, ep->ping_seq, uid_, ep->peer_uid, ep->remote_dev,
                            ep->peer_ud_qpn);
}

void ConnectOnDemand::progress_pings(uint64_t now) {
    const std::vector<RcEp *> waiting = pinging_; /* fail_ep calls the user */
    for (RcEp *ep : waiting) {
        const auto it = std::find(pinging_.begin(), pinging_.end(), ep);
        if (it == pinging_.end()) {
            continue; /* destroyed by an error handler meanwhile */
        }
        if (now >= ep->ping_deadline_ns) {
            pinging_.erase(it);
            ep->ping_seq = 0;
            ucs_diag("tm_dc: the iface an endpoint was made to did not answer for %.1f s",
                     config_.conn_timeout);
            iface_.fail_ep(ep, UCS_ERR_ENDPOINT_TIMEOUT);
        } else if (now >= ep->ping_retry_ns) {
            ep->ping_retry_ns = deadline_after(now, seconds_to_ns(config_.conn_retry));
            (void)send_conn_message(ConnKind::kPing, ep->ping_seq, uid_, ep->peer_uid,
                                    ep->remote_dev, ep->peer_ud_qpn);
        }
    }
}

void ConnectOnDemand::probe_passive(uint64_t now) {
    /* An initiator that died sends no disconnect: its peer's passive queue
     * pairs would stay until the iface closes. A probe on each idle one every
     * CONN_TIMEOUT fails (retries exceeded) where the other end is gone, and
     * the failed passive endpoint is reaped. */
    if (now < next_passive_probe_ns_) {
        return;
    }
    next_passive_probe_ns_ = deadline_after(now, seconds_to_ns(config_.conn_timeout));
    for (const auto &entry : passive_eps_) {
        RcEp *ep = entry.second;
        if (ep->connected && !ep->failed && (ep->outstanding == 0)) {
            (void)iface_.post_probe(ep); /* NO_RESOURCE: the next round */
        }
    }
}

void ConnectOnDemand::forget_passive(const RcEp *ep) {
    const ConnKey key = {ep->peer_uid, ep->conn_id};
    if (passive_eps_.erase(key) == 0) {
        return; /* never listed (failed to set up) */
    }
    --passive_count_;
    remember_closed(key);
}

void ConnectOnDemand::remember_closed(const ConnKey &key) {
    if (closed_.size() < kClosedMemory) {
        (void)alloc_status([&] { closed_.push_back(key); });
    } else {
        closed_[closed_next_++ % closed_.size()] = key;
    }
}

void ConnectOnDemand::accept_connection(const ConnMessage &req) {
    if (RcEp *ep = passive_ep(req.uid, req.conn_id)) {
        if ((ep->remote_qp_num == req.rc_qpn) && !ep->failed) {
            /* our reply was lost: the same answer again */
            (void)send_conn_message(ConnKind::kConnReply, ep, req.dev);
        }
        return;
    }
    if (std::find(closed_.begin(), closed_.end(), ConnKey{req.uid, req.conn_id}) != closed_.end()) {
        return; /* a late copy of a request whose connection is closed already */
    }
    if (passive_count_ >= config_.max_passive) {
        ucs_diag("tm_dc: %zu peers connected to this iface already (MAX_PASSIVE): request refused",
                 passive_count_);
        ++iface_.counters_.dropped;
        return;
    }
    RcEp *ep = nullptr;
    if (iface_.new_ep(&ep) != UCS_OK) {
        return; /* logged; the initiator asks again */
    }
    ep->passive     = true;
    ep->notified    = true; /* no user to tell */
    ep->peer_uid    = req.uid;
    ep->conn_id     = req.conn_id;
    ep->peer_ud_qpn = req.reply_qpn;
    if (alloc_status([&] { passive_eps_[ConnKey{req.uid, req.conn_id}] = ep; }) == UCS_OK) {
        ++passive_count_;
    }
    if ((passive_ep(req.uid, req.conn_id) != ep) ||
        (iface_.connect_qp(ep, req.dev, EpAddress{req.rc_qpn, req.seg_size}) != UCS_OK)) {
        iface_.free_ep(ep);
        return;
    }
    ++iface_.counters_.accepts;
    if (iface_.hw_.model()) {
        /* Whatever this initiator sent on a connection it closed was
         * acknowledged, so it is in the receive CQ already: into the model
         * before the new QP is marked, so that nothing on it overtakes that
         * (the model's rule 10; a NIC processes before it acknowledges). */
        while (iface_.poll_rx() == std::min<unsigned>(iface_.budget_, 16)) {
        }
        iface_.hw_.model_connected(ep->qp->qp_num);
    }
    (void)send_conn_message(ConnKind::kConnReply, ep, req.dev);
}

void ConnectOnDemand::complete_connection(const ConnMessage &rep) {
    if (rep.uid != uid_) {
        ++iface_.counters_.dropped; /* for another iface, or an earlier incarnation of ours */
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
        ++iface_.counters_.dropped; /* not from the port the endpoint was made to */
        return;
    }
    connecting_.erase(it);
    const ucs_status_t status = iface_.connect_qp(ep, ep->remote_dev,
                                                  EpAddress{rep.rc_qpn, rep.seg_size});
    if (status != UCS_OK) {
        iface_.fail_ep(ep, status);
        return;
    }
    ep->connected_ns = monotonic_ns();
    ep->connect_use  = ep->last_use;
}

void ConnectOnDemand::disconnect(RcEp *ep) {
    /* also while connecting: the target may have made its end already */
    const uint64_t now = monotonic_ns();
    Disconnect     d   = {ep->remote_dev,
                          ep->peer_ud_qpn,
                          ep->qp->qp_num,
                          ep->conn_id,
                          deadline_after(now, seconds_to_ns(config_.conn_retry)),
                          deadline_after(now, seconds_to_ns(config_.conn_timeout))};
    (void)send_conn_message(ConnKind::kDisconnect, d.rc_qpn, uid_, d.conn_id, d.to, d.to_qpn);
    if (disconnects_.size() >= kMaxDisconnects) {
        disconnects_.erase(disconnects_.begin()); /* the oldest goes unconfirmed */
    }
    (void)alloc_status([&] { disconnects_.push_back(d); }); /* unconfirmed if not */
}

void ConnectOnDemand::retry_disconnects(uint64_t now) {
    size_t kept = 0;
    for (Disconnect &d : disconnects_) {
        if (now >= d.deadline_ns) {
            ucs_diag("tm_dc: the target never confirmed closing connection %#lx (QP 0x%x)",
                     static_cast<unsigned long>(d.conn_id), d.rc_qpn);
            continue;
        }
        if (now >= d.retry_ns) {
            d.retry_ns = deadline_after(now, seconds_to_ns(config_.conn_retry));
            (void)send_conn_message(ConnKind::kDisconnect, d.rc_qpn, uid_, d.conn_id, d.to, d.to_qpn);
        }
        disconnects_[kept++] = d;
    }
    disconnects_.resize(kept);
}

}  // namespace ib
}  // namespace uct_tm
