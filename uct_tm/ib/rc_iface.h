/*
 * tm_rc: UCT's tag API over verbs RC queue pairs, matched in software.
 *
 * An iface owns a completion queue for sends, one for receives, and a plain
 * shared receive queue (SRQ) of SEG_SIZE buffers that every endpoint's QP
 * receives into. Endpoints are connected QP to QP (UCT_IFACE_FLAG_CONNECT_TO_EP:
 * ep_get_address / ep_connect_to_ep). Tagged eager messages land in an SRQ
 * buffer and are matched by the TagEngine, then copied into the posted receive
 * or handed to the unexpected callback; rendezvous messages carry the sender's
 * buffer (ibv_rvh), which a matched receiver reads with RDMA READ before it
 * sends a FIN. get/put zcopy are RDMA READ/WRITE.
 *
 * Hardware tag matching: the receive side has a second mode, HwTagEngine over
 * a hardware tag list (tm_list.h, RcHwTags in rc_hw_tm.h). With UCX_TM_RC_TM_MODEL=y the
 * list is the device model (TmModel): the verbs data path stays (plain SRQ),
 * every message polled from it is handed to the model as if it had arrived at
 * a TM NIC, and the model's scheduler is stepped from progress. On a device
 * that reports tag matching (UCX_TM_RC_HW_TM=y) it is TmVerbsList, a TM SRQ
 * that the QPs attach to (hardware-untested); software matching over a plain
 * SRQ when the device or provider refuses it.
 *
 * How endpoints get their queue pair connected is the iface's connection
 * mode, a type chosen where the transport is registered (rc_transport.cc):
 * ConnectAtOnce for tm_rc (a QP per endpoint, bound by ep_connect_to_ep),
 * ConnectOnDemand for tm_dc (endpoints made from an iface address, RC QPs of
 * a pool connected over a UD handshake when first needed, rc_on_demand.cc).
 */
#ifndef UCT_TM_IB_RC_IFACE_H_
#define UCT_TM_IB_RC_IFACE_H_

#include "dc_provider.h"
#include "ib_md.h"
#include "qp_pool.h"
#include "rc_config.h"
#include "rc_hw_tm.h"
#include "rc_link.h"
#include "rc_rndv.h"
#include "rc_wire.h"
#include "ud_channel.h"

#include "base/flush_waiters.h"
#include "base/iface_base.h"
#include "base/pending_queue.h"
#include "tag/tag_engine.h"
#include "base/ucx_abi.h"

#include <infiniband/verbs.h>
#include <uct/api/uct.h>

#include <cstdio>
#include <memory>
#include <new>
#include <unordered_map>
#include <utility>
#include <vector>

namespace uct_tm {
namespace ib {

class RcIface;
struct PortInfo;

/* An endpoint: one RC queue pair. */
/* The least SEG_SIZE: a header and a rendezvous descriptor fit. */
inline constexpr size_t kMinSegSize = 256;

/* Bytes one receive, rendezvous, RDMA READ or WRITE takes at most (a
 * verbs sge and message stay below 2^31). */
inline constexpr size_t kMaxZcopy = size_t{1} << 30;

struct RcEp {
    uct_ep_t       super; /* UCX's view: {iface}; must stay first */
    RcIface       *iface = nullptr;
    struct ibv_qp *qp    = nullptr;
    uint32_t       sq_avail    = 0; /* send work requests we may still post */
    uint32_t       outstanding = 0; /* posted, not completed */
    bool           connected   = false;
    bool           failed      = false; /* QP in error: every operation fails */
    bool           notified    = false; /* error handler called */
    bool           qp_in_error = false; /* moved to IBV_QPS_ERR by us */
    bool           in_pending_list = false;
    uint32_t       path_mtu    = 0; /* bytes, once connected */
    uint32_t       remote_qp_num = 0; /* once connected: the peer's QP and port */
    uint32_t       max_send      = 0; /* once connected: min(our SEG_SIZE, the peer's) */
    bool           size_warned   = false; /* refused a message the peer cannot receive */
    DeviceAddress  remote_dev    = {};
    uint32_t       rndv_sends  = 0; /* rendezvous sends on it waiting for a FIN */
    uint64_t       probe_due_ns = 0; /* keepalive: 0 = not armed (see check_rndv_qps) */
    PendingQueue   pending;
    /* tm_dc (on demand): the connection this QP is one end of */
    bool           passive      = false; /* the target's end: made for a peer's request, not a user's */
    uint64_t       conn_id      = 0;     /* the initiator's name for it */
    uint64_t       peer_uid     = 0;     /* initiator: the target iface; passive: the initiator's */
    uint32_t       peer_ud_qpn  = 0;     /* where connection datagrams to the peer go */
    uint64_t       conn_retry_ns = 0;    /* initiator, connecting: when to ask again */
    uint64_t       conn_deadline_ns = 0; /* initiator, connecting: when to give up */
    uint64_t       last_use      = 0;    /* initiator: the iface's send count at its last send */
    uint64_t       connect_use   = 0;    /* initiator: last_use when it connected */
    uint64_t       connected_ns  = 0;    /* initiator: when it connected */
    bool           qp_waiting       = false; /* initiator: waits for a queue pair of the pool */
    uint32_t       ping_seq      = 0;     /* initiator, no connection: uct_ep_check's ping, 0 = none */
    uint64_t       ping_retry_ns = 0;
    uint64_t       ping_deadline_ns = 0;
};

/* What a signalled send work request was for; wr_id is its index. */
struct TxOp {
    enum class Type : uint8_t { kFree, kSend, kZcopy, kRndvRead, kGet, kPut };
    Type              type    = Type::kFree;
    RcEp             *ep      = nullptr;
    uct_completion_t *comp    = nullptr;
    int32_t           tx_buf  = -1; /* send buffer to release */
    uint32_t          rndv    = 0;  /* kRndvRead: index into rndv_recvs_ */
    struct ibv_mr    *temp_mr = nullptr; /* registered for this operation only */
    uint32_t          next_free = 0;
};

/* ---- connection modes ---- */

/* What differs between an iface whose endpoints are connected at once, QP to
 * QP (tm_rc), and one whose endpoints connect on demand (tm_dc): RcIface
 * calls it where endpoints are made, addressed, used, checked, fail and go.
 * One is made with the iface (RcIface's constructor) and lives as long. */
class RcConnect {
  public:
    virtual ~RcConnect() = default;
    /* Once the iface's verbs resources exist. */
    virtual ucs_status_t init() = 0;
    /* Its part of uct_iface_attr_t: the CONNECT_TO_* flag, address lengths. */
    virtual void         query(uct_iface_attr_t *attr) const       = 0;
    virtual ucs_status_t get_address(uct_iface_addr_t *addr) const = 0;
    /* Whether the iface address (may be null) is one this mode reaches. */
    virtual bool         reachable(const uct_iface_addr_t *iface_addr) const      = 0;
    virtual ucs_status_t ep_create(const uct_ep_params_t *params, uct_ep_h *ep_p) = 0;
    virtual ucs_status_t ep_get_address(RcEp *ep, uct_ep_addr_t *addr) const      = 0;
    virtual ucs_status_t ep_connect_to_ep(RcEp *ep, const uct_device_addr_t *dev_addr,
                                          const uct_ep_addr_t *ep_addr)           = 0;
    virtual bool         ep_is_connected(const RcEp *ep, const uct_device_addr_t *dev_addr,
                                         const uct_iface_addr_t *iface_addr,
                                         const uct_ep_addr_t    *ep_addr) const      = 0;
    /* A send found `ep` with no queue pair. */
    virtual void request_qp(RcEp *ep) = 0;
    /* uct_ep_check of `ep`, which has no queue pair: true if handled here. */
    virtual bool check_unconnected(RcEp *ep) = 0;
    /* `ep` is being destroyed (before its sends are cancelled), has
     * failed, is freed (before its QP goes). */
    virtual void     ep_destroying(RcEp *ep) = 0;
    virtual void     ep_failed(RcEp *ep)     = 0;
    virtual void     ep_freed(RcEp *ep)      = 0;
    virtual unsigned progress()              = 0;
    /* PRINT_STATS lines of its own, when the iface closes. */
    virtual void print_stats(FILE *stream) const = 0;
};

/* tm_rc: every endpoint has its QP from uct_ep_create and is bound to the
 * peer's by uct_ep_connect_to_ep (UCT_IFACE_FLAG_CONNECT_TO_EP; rc_ep.cc). */
class ConnectAtOnce final : public RcConnect {
  public:
    explicit ConnectAtOnce(RcIface &iface) : iface_(iface) {}
    ucs_status_t init() override { return UCS_OK; }
    void         query(uct_iface_attr_t *attr) const override;
    ucs_status_t get_address(uct_iface_addr_t *) const override { return UCS_OK; }
    bool         reachable(const uct_iface_addr_t *) const override { return true; }
    ucs_status_t ep_create(const uct_ep_params_t *params, uct_ep_h *ep_p) override;
    ucs_status_t ep_get_address(RcEp *ep, uct_ep_addr_t *addr) const override;
    ucs_status_t ep_connect_to_ep(RcEp *ep, const uct_device_addr_t *dev_addr,
                                  const uct_ep_addr_t *ep_addr) override;
    bool         ep_is_connected(const RcEp *ep, const uct_device_addr_t *dev_addr,
                                 const uct_iface_addr_t *iface_addr,
                                 const uct_ep_addr_t    *ep_addr) const override;
    void         request_qp(RcEp *) override {}
    bool         check_unconnected(RcEp *) override { return false; }
    void         ep_destroying(RcEp *) override {}
    void         ep_failed(RcEp *) override {}
    void         ep_freed(RcEp *) override {}
    unsigned     progress() override { return 0; }
    void         print_stats(FILE *) const override {}

  private:
    RcIface &iface_;
};

/* tm_dc: endpoints made from an iface address (UCT_IFACE_FLAG_CONNECT_TO_IFACE)
 * take an RC queue pair from the iface's pool when they first send, bound
 * to one the target makes for them by a handshake over UD; the target's
 * ends are passive endpoints (rc_on_demand.cc, docs/tm_dc.md). */
class ConnectOnDemand final : public RcConnect {
  public:
    explicit ConnectOnDemand(RcIface &iface);
    /* The pool, the provider, the iface's ids and its connection channel. */
    ucs_status_t init() override;
    void         query(uct_iface_attr_t *attr) const override;
    ucs_status_t get_address(uct_iface_addr_t *addr) const override;
    bool         reachable(const uct_iface_addr_t *iface_addr) const override;
    /* An endpoint to the iface `iface_addr` names, connecting: sends wait
     * (NO_RESOURCE, pending) until the target's reply binds its QP. */
    ucs_status_t ep_create(const uct_ep_params_t *params, uct_ep_h *ep_p) override;
    ucs_status_t ep_get_address(RcEp *, uct_ep_addr_t *) const override {
        return UCS_ERR_UNSUPPORTED; /* CONNECT_TO_IFACE: no endpoint address */
    }
    ucs_status_t ep_connect_to_ep(RcEp *, const uct_device_addr_t *,
                                  const uct_ep_addr_t *) override {
        return UCS_ERR_UNSUPPORTED; /* CONNECT_TO_IFACE */
    }
    bool ep_is_connected(const RcEp *ep, const uct_device_addr_t *dev_addr,
                         const uct_iface_addr_t *iface_addr,
                         const uct_ep_addr_t    *ep_addr) const override;
    /* The pool (QP_POOL_SIZE): `ep` gets a QP now -- a free one or the least
     * recently used idle connection's -- or waits for one. */
    void request_qp(RcEp *ep) override;
    /* No connection to probe: a ping over UD to the target iface. */
    bool     check_unconnected(RcEp *ep) override;
    void     ep_destroying(RcEp *ep) override;
    void     ep_failed(RcEp *ep) override;
    void     ep_freed(RcEp *ep) override;
    unsigned progress() override;
    void     print_stats(FILE *stream) const override;

  private:
    struct ConnKey;
    /* UCS_OK if `ia` was written by an iface of this iface's provider;
     * else logs why not. */
    ucs_status_t check_provider(const IfaceAddress &ia) const;
    /* UCX_TM_DC_PROVIDER against what the device offers (dc_provider.h). */
    ucs_status_t select_dc_provider();
    /* Destroys failed passive endpoints whose sends are back; how many. */
    unsigned reap_failed_passive();
    /* `ep` (an initiator) leaves the pool, its waiters and its pending pings. */
    void         leave_pool(RcEp *ep);
    void         handle_conn_message(const void *data, size_t length);
    void         accept_connection(const ConnMessage &req);
    void         complete_connection(const ConnMessage &rep);
    ucs_status_t send_conn_message(ConnKind kind, const RcEp *ep, const DeviceAddress &to);
    ucs_status_t send_conn_message(ConnKind kind, uint32_t rc_qpn, uint64_t uid, uint64_t conn_id,
                                   const DeviceAddress &to, uint32_t to_qpn);
    /* A user's endpoint going or evicted: the target drops its end (told
     * until it acknowledges, or CONN_TIMEOUT). */
    void  disconnect(RcEp *ep);
    RcEp *passive_ep(uint64_t uid, uint64_t conn_id) const;
    /* A passive endpoint going: unlisted, its connection remembered as closed. */
    void forget_passive(const RcEp *ep);
    void remember_closed(const ConnKey &key);
    /* Makes `ep`'s QP and asks the target for its end. */
    void start_connect(RcEp *ep);
    /* Room in the pool (QpPool::room): a free QP, or the least recently
     * used connection with nothing in flight closed; false if every one is busy. */
    bool qp_room(uint64_t now);
    bool evictable(const RcEp *ep, uint64_t now) const;
    void serve_qp_waiters(uint64_t now);
    void retry_disconnects(uint64_t now);
    /* uct_ep_check of an endpoint with no connection: a ping over UD, the
     * endpoint failed (UCS_ERR_ENDPOINT_TIMEOUT) if no pong in CONN_TIMEOUT. */
    void ping(RcEp *ep);
    void progress_pings(uint64_t now);
    /* Probes idle passive endpoints every CONN_TIMEOUT (a dead initiator's fail). */
    void probe_passive(uint64_t now);

    RcIface            &iface_;
    const RcConfig     &config_;
    DcChoice            dc_choice_; /* the provider and why */
    UdChannel           conn_;      /* the connection channel */
    uint64_t            uid_          = 0;
    uint64_t            next_conn_id_ = 1;
    std::vector<RcEp *> connecting_;           /* initiators waiting for their reply */
    bool                reap_passive_ = false; /* a passive endpoint failed: destroy it when idle */
    size_t              passive_count_         = 0;
    uint64_t            progress_count_        = 0; /* the clock is read every 1024 calls */
    uint64_t            next_passive_probe_ns_ = 0;
    QpPool<RcEp>        pool_; /* initiators holding a QP of the pool, and waiting for one */
    std::vector<RcEp *> connect_failures_; /* no QP could be made: failed from progress */
    std::vector<RcEp *> pinging_;          /* endpoints waiting for a pong */
    uint32_t            next_ping_seq_ = 1;
    struct Disconnect { /* a kDisconnect not acknowledged yet */
        DeviceAddress to;
        uint32_t      to_qpn;
        uint32_t      rc_qpn;
        uint64_t      conn_id;
        uint64_t      retry_ns;
        uint64_t      deadline_ns;
    };
    std::vector<Disconnect> disconnects_;
    struct ConnKey {
        uint64_t uid;
        uint64_t conn_id;
        bool operator==(const ConnKey &o) const { return (uid == o.uid) && (conn_id == o.conn_id); }
    };
    struct ConnKeyHash {
        size_t operator()(const ConnKey &k) const {
            return std::hash<uint64_t>()(k.uid * 0x9e3779b97f4a7c15ull ^ k.conn_id);
        }
    };
    /* passive endpoints by the initiator's (uid, conn_id) */
    std::unordered_map<ConnKey, RcEp *, ConnKeyHash> passive_eps_;
    /* connections closed lately: a late copy of their request makes no QP */
    std::vector<ConnKey> closed_;
    size_t               closed_next_ = 0;
};

class RcIface : public IfaceBase<RcIface, RcEp> {
  public:
    /* ---- what IfaceBase opens, tells UCX about and calls ---- */
    using Config = RcConfig;
    static const abi::TransportDesc &transport();
    /* tm_dc: this iface with on-demand connections (rc_on_demand.cc). */
    static const abi::TransportDesc &dc_transport();
    /* An iface whose endpoints connect as `Connect` (ConnectAtOnce,
     * ConnectOnDemand) says: what each transport is registered with. */
    template <typename Connect>
    RcIface(const RcConfig &config, std::in_place_type_t<Connect>) : RcIface(config) {
        connect_.reset(new (std::nothrow) Connect(*this));
    }
    ucs_status_t init(uct_md_h md, uct_worker_h worker, const uct_iface_params_t *params,
                      const RcConfig &config);

    ~RcIface();
    RcIface(const RcIface &)            = delete;
    RcIface &operator=(const RcIface &) = delete;

    /* ---- iface operations ---- */
    ucs_status_t query(uct_iface_attr_t *attr) const;
    ucs_status_t get_device_address(uct_device_addr_t *addr) const;
    /* tm_rc: no iface address (endpoints connect QP to QP); tm_dc: its
     * connection channel (IfaceAddress). */
    ucs_status_t get_address(uct_iface_addr_t *addr) const;
    int          is_reachable(const uct_device_addr_t *dev_addr,
                              const uct_iface_addr_t *iface_addr) const;
    unsigned     progress();
    ucs_status_t flush(unsigned flags, uct_completion_t *comp);
    ucs_status_t tag_recv_zcopy(uct_tag_t tag, uct_tag_t mask, const uct_iov_t *iov,
                                size_t iovcnt, uct_tag_context_t *ctx);
    ucs_status_t tag_recv_cancel(uct_tag_context_t *ctx, int force);
    void         release_desc(void *desc);

    /* ---- endpoints (rc_ep.cc; sends: rc_send.cc) ---- */
    ucs_status_t ep_create(const uct_ep_params_t *params, uct_ep_h *ep_p);
    void         ep_destroy(RcEp *ep);
    ucs_status_t ep_get_address(RcEp *ep, uct_ep_addr_t *addr) const;
    ucs_status_t ep_connect_to_ep(RcEp *ep, const uct_device_addr_t *dev_addr,
                                  const uct_ep_addr_t *ep_addr);
    /* Connected to the QP `ep_addr` names on the port `dev_addr` names. */
    bool         ep_is_connected(const RcEp *ep, const uct_device_addr_t *dev_addr,
                                 const uct_iface_addr_t *iface_addr,
                                 const uct_ep_addr_t *ep_addr) const;

    ucs_status_t am_short(RcEp *ep, uint8_t id, uint64_t header, const void *payload,
                          unsigned length);
    ssize_t      am_bcopy(RcEp *ep, uint8_t id, uct_pack_callback_t pack_cb, void *arg);
    ucs_status_t am_zcopy(RcEp *ep, uint8_t id, const void *header, unsigned header_length,
                          const uct_iov_t *iov, size_t iovcnt, uct_completion_t *comp);
    ucs_status_t tag_eager_short(RcEp *ep, uct_tag_t tag, const void *data, size_t length);
    ssize_t      tag_eager_bcopy(RcEp *ep, uct_tag_t tag, uint64_t imm,
                                 uct_pack_callback_t pack_cb, void *arg);
    ucs_status_t tag_eager_zcopy(RcEp *ep, uct_tag_t tag, uint64_t imm, const uct_iov_t *iov,
                                 size_t iovcnt, uct_completion_t *comp);
    ucs_status_ptr_t tag_rndv_zcopy(RcEp *ep, uct_tag_t tag, const void *header,
                                    unsigned header_length, const uct_iov_t *iov, size_t iovcnt,
                                    uct_completion_t *comp) {
        return rndv_.send(ep, tag, header, header_length, iov, iovcnt, comp);
    }
    ucs_status_t tag_rndv_cancel(RcEp *, void *op) { return rndv_.cancel(op); }
    ucs_status_t tag_rndv_request(RcEp *ep, uct_tag_t tag, const void *header,
                                  unsigned header_length);
    ucs_status_t get_zcopy(RcEp *ep, const uct_iov_t *iov, size_t iovcnt, uint64_t remote_addr,
                           uct_rkey_t rkey, uct_completion_t *comp) {
        return rdma_zcopy(ep, iov, iovcnt, remote_addr, rkey, comp, false);
    }
    ucs_status_t put_zcopy(RcEp *ep, const uct_iov_t *iov, size_t iovcnt, uint64_t remote_addr,
                           uct_rkey_t rkey, uct_completion_t *comp) {
        return rdma_zcopy(ep, iov, iovcnt, remote_addr, rkey, comp, true);
    }
    ucs_status_t rdma_zcopy(RcEp *ep, const uct_iov_t *iov, size_t iovcnt, uint64_t remote_addr,
                            uct_rkey_t rkey, uct_completion_t *comp, bool write);
    ucs_status_t pending_add(RcEp *ep, uct_pending_req_t *req);
    void         pending_purge(RcEp *ep, uct_pending_purge_callback_t cb, void *arg);
    ucs_status_t ep_flush(RcEp *ep, unsigned flags, uct_completion_t *comp);
    /* uct_ep_check: a probe on the QP unless something is in flight already;
     * a dead peer is reported through the iface's error handler. */
    ucs_status_t ep_check(RcEp *ep, unsigned flags, uct_completion_t *comp);
    /* A header-only SEND on `ep`'s QP that the peer drops: succeeds while the
     * peer's QP lives, fails with retries exceeded when it is gone. */
    ucs_status_t post_probe(RcEp *ep);

    using Counters = RcCounters;

  private:
    friend class RcIfaceLink;
    friend class ConnectAtOnce;
    friend class ConnectOnDemand;

    explicit RcIface(const RcConfig &config);

    /* ---- init()'s steps ---- */
    /* The port the device name "tm_<dev>:<port>" names, active on md_'s device. */
    ucs_status_t find_port(const uct_iface_params_t *iface_params, const PortInfo **port_p);
    /* The config checked; the segment, queue and CQ sizes from it, within the
     * device's limits. */
    ucs_status_t check_config() const;
    void         size_queues(const PortInfo &port);
    /* The receive bookkeeping and the free lists of send buffers and ops. */
    ucs_status_t alloc_tx_state();
    ucs_status_t init_verbs(const RcConfig &config);
    /* ---- init_verbs()'s steps ---- */
    /* The hardware tag list (a TM SRQ) if the device and config allow it. */
    ucs_status_t init_tag_list(const RcConfig &config);
    /* The send and receive CQs and the SRQ (the TM SRQ's if there is one). */
    ucs_status_t create_queues();
    /* The receive and send buffer pools, registered. */
    ucs_status_t alloc_buffers(const RcConfig &config);
    /* The GID (RoCE) and the port's MTU and LID: the device address. */
    ucs_status_t query_address(const RcConfig &config);

    /* ---- endpoints: queue pairs (rc_ep.cc) ---- */
    /* A new endpoint with its QP in INIT (none if !with_qp), listed in eps_. */
    ucs_status_t new_ep(RcEp **ep_p, bool with_qp = true);
    /* `ep`'s QP, in INIT, on this iface's CQs and SRQ. */
    ucs_status_t create_qp(RcEp *ep);
    /* One work request on `ep`'s queue pair: the one place that posts
     * sends (ibv_post_send); 0 or an errno. */
    int          post_wr(RcEp *ep, struct ibv_send_wr *wr);
    void         destroy_qp(RcEp *ep);
    /* Binds `ep`'s QP to the peer's QP `rep` on the port `remote` (RTR, RTS). */
    ucs_status_t connect_qp(RcEp *ep, const DeviceAddress &remote, const EpAddress &rep);

    /* ---- hardware tag list (RcHwTags, rc_hw_tm.cc) ---- */
    /* What HwTagEngine gets of this iface's receive buffers. */
    HwTagEngineConfig hw_engine_config() const;
    /* Tags are matched by a hardware tag list (the model or a TM SRQ). */
    bool         hw_mode() const { return hw_.active(); }
    /* f(engine) on whichever HwTagEngine this iface runs (hw_mode() only). */
    template <typename F> decltype(auto) with_hw_tags(F &&f) { return hw_.with(f); }
    template <typename F> decltype(auto) with_hw_tags(F &&f) const { return hw_.with(f); }
    /* Largest tag_rndv_zcopy header: what a TM NIC takes with TMH and RVH
     * (the model's max_rndv_hdr), else one receive buffer. */
    size_t       max_rndv_hdr() const;

    /* ---- sending (rc_send.cc; endpoint failure, pending, flush: rc_ep.cc) ---- */
    /* UCS_OK: a send on `ep` may be posted now. An endpoint with no queue
     * pair asks the connection mode for one (NO_RESOURCE until connected). */
    ucs_status_t tx_ready(RcEp *ep, bool needs_buf);
    /* Posts one signalled work request on `ep`; `op` describes it. */
    ucs_status_t post_send(RcEp *ep, struct ibv_send_wr *wr, const TxOp &op);
    /* Sends `header`, then `prefix`, then the iov list (copied when it has no memh, or
     * when `copy` is set) as one message. */
    /* Logs, once per endpoint, a send larger than the peer receives. */
    ucs_status_t refuse_oversized(RcEp *ep, size_t total);
    ssize_t      send_bcopy(RcEp *ep, const WireHeader &hdr, uint32_t imm_low,
                            uct_pack_callback_t pack_cb, void *arg);
    ucs_status_t send_message(RcEp *ep, const WireHeader &header, uint32_t imm_low,
                              const void *prefix, size_t prefix_length,
                              const uct_iov_t *iov, size_t iovcnt, uct_completion_t *comp);
    /* send_message() of a message the peer waits for (FIN, cancel, failure
     * notice): it may take the slot the layer above would have used next. */
    ucs_status_t send_urgent(RcEp *ep, const WireHeader &header);
    char        *tx_buf(int32_t index) const { return tx_pool_ + size_t(index) * seg_size_; }
    uint32_t     alloc_tx_op();
    void         free_tx_op(uint32_t index);
    void         fail_ep(RcEp *ep, ucs_status_t status);
    /* Destroys `ep`'s QP and the endpoint (no send of it is outstanding). */
    void         free_ep(RcEp *ep);
    /* A failed endpoint's QP goes to the error state once its sends are
     * back (one posted last, e.g. a kRndvFailed notice, still goes out). */
    void         error_qp_when_idle(RcEp *ep);
    unsigned     dispatch_pending();
    bool         flush_done(const RcEp *ep) const;
    void         complete_flushes();

    /* ---- receiving (rc_iface.cc) ---- */
    unsigned     poll_rx();
    unsigned     poll_tx();
    void         handle_tx_batch(const struct ibv_wc *wcs, int n);
    void         handle_tx(const struct ibv_wc &wc);
    void         handle_rx(const struct ibv_wc &wc);
    /* The SRQ buffer of a receive completion that carries a message; false:
     * nothing to deliver (a buffer of ours is reposted). */
    bool         rx_completed(const struct ibv_wc &wc, uint32_t *buf);
    bool         receive_eager(char *data, size_t length, uct_tag_t tag, uint64_t imm);
    /* the eager callback in place (DESC); true if the layer above kept the buffer. */
    bool         unexpected_eager(char *data, size_t length, uct_tag_t tag, uint64_t imm);
    bool         receive_am(uint8_t id, char *data, size_t length);
    void         receive_rndv_request(uct_tag_t tag, char *data, size_t length);
    /* The rndv callback for a rendezvous no receive matched (rkey null: a
     * software rendezvous request); dropped without one. */
    void         unexpected_rndv(uct_tag_t tag, const void *header, unsigned header_length,
                                 uint64_t va, size_t length, const PackedRkey *rkey);
    /* A receive force-cancelled while an RDMA READ writes into it. */
    void         wait_reads(const TagEngine::Recv *recv) { rndv_.wait_reads(recv); }
    template <typename Invoke> bool deliver(char *data, const Invoke &invoke);
    void         post_rx(uint32_t count);
    void         repost(uint32_t buf);
    char        *rx_buf(uint32_t index) const { return rx_pool_ + size_t(index) * rx_stride_; }
    RcEp        *ep_by_qp(uint32_t qp_num) const;

    /* settings */
    size_t   seg_size_      = 0; /* receive buffer = largest message */
    size_t   rx_offset_     = 0; /* where a message lands in its receive buffer */
    size_t   rx_stride_     = 0;
    uint32_t rx_queue_len_  = 0;
    uint32_t tx_queue_len_  = 0;
    uint32_t tx_cq_len_     = 0;
    uint32_t max_inline_    = 0;
    unsigned budget_        = 32;
    const RcConfig config_;

    /* verbs */
    IbMd              *md_     = nullptr;
    uint8_t            port_   = 1;
    DeviceAddress      dev_addr_{};
    int                gid_index_ = 0;
    bool               roce_   = false;
    struct ibv_cq     *tx_cq_  = nullptr;
    struct ibv_cq     *rx_cq_  = nullptr;
    struct ibv_srq    *srq_    = nullptr;
    char              *rx_pool_ = nullptr;
    struct ibv_mr     *rx_mr_   = nullptr;
    char              *tx_pool_ = nullptr;
    struct ibv_mr     *tx_mr_   = nullptr;
    bool               hw_tm_capable_ = false; /* the device reports tag matching */

    /* receive buffers */
    std::vector<uint8_t>  rx_held_;   /* 1: kept by the layer above (DESC) */
    std::vector<uint32_t> rx_repost_; /* to post at the end of progress */
    uint32_t              rx_posted_ = 0;

    /* send resources */
    std::vector<int32_t>  free_tx_bufs_;
    std::vector<TxOp>     tx_ops_;
    uint32_t              free_tx_op_   = 0; /* head of the free list, tx_ops_.size(): none */
    uint32_t              tx_ops_used_  = 0;

    /* tag matching */
    TagEngine                tags_;

    /* endpoints and deferred work */
    std::vector<RcEp *>      eps_;
    PendingEndpoints<RcEp>   pending_eps_;
    FlushWaiters<RcEp>     flush_waiters_;
    bool                     dispatching_ = false;
    Counters                 counters_;
    bool                     print_stats_ = false;

    /* rendezvous (rc_rndv.cc); the hardware tag list, if any (rc_hw_tm.cc),
     * which uses the rendezvous and goes first */
    RcRendezvous rndv_;
    RcHwTags     hw_;

    uint64_t use_clock_ = 0; /* sends posted: the LRU order of on-demand connections */
    /* endpoints by QP number (arrivals name their QP) */
    std::unordered_map<uint32_t, RcEp *> qp_eps_;

    /* how endpoints get connected: last, so that it goes first */
    std::unique_ptr<RcConnect> connect_;
};

/* ---- RcIfaceLink: what the iface's parts call ---- */

inline ucs_status_t RcIfaceLink::send(RcEp *ep, const WireHeader &header, const void *prefix,
                                      size_t prefix_length, const uct_iov_t *iov, size_t iovcnt) {
    return iface_->send_message(ep, header, 0, prefix, prefix_length, iov, iovcnt, nullptr);
}
inline ucs_status_t RcIfaceLink::send_urgent(RcEp *ep, const WireHeader &header) {
    return iface_->send_urgent(ep, header);
}
inline ucs_status_t RcIfaceLink::tx_ready(RcEp *ep, bool needs_buf) const {
    return iface_->tx_ready(ep, needs_buf);
}
inline bool RcIfaceLink::tx_room(const RcEp *ep) const {
    return (ep->sq_avail > 0) && (iface_->tx_ops_used_ < iface_->tx_ops_.size());
}
inline ucs_status_t RcIfaceLink::post_send(RcEp *ep, struct ibv_send_wr *wr, const TxOp &op) {
    return iface_->post_send(ep, wr, op);
}
inline int RcIfaceLink::post_wr(RcEp *ep, struct ibv_send_wr *wr) { return iface_->post_wr(ep, wr); }
inline ucs_status_t RcIfaceLink::post_probe(RcEp *ep) { return iface_->post_probe(ep); }
inline unsigned RcIfaceLink::poll_tx() { return iface_->poll_tx(); }
inline struct ibv_cq *RcIfaceLink::tx_cq() const { return iface_->tx_cq_; }
inline struct ibv_pd *RcIfaceLink::pd() const { return iface_->md_->pd; }
inline void RcIfaceLink::fail_ep(RcEp *ep, ucs_status_t status) { iface_->fail_ep(ep, status); }
inline RcEp *RcIfaceLink::ep_by_qp(uint32_t qp_num) const { return iface_->ep_by_qp(qp_num); }
inline const std::vector<RcEp *> &RcIfaceLink::eps() const { return iface_->eps_; }
inline bool RcIfaceLink::rx_completed(const struct ibv_wc &wc, uint32_t *buf) {
    return iface_->rx_completed(wc, buf);
}
inline char *RcIfaceLink::rx_message(uint32_t buf) const {
    return iface_->rx_buf(buf) + iface_->rx_offset_;
}
inline void RcIfaceLink::repost(uint32_t buf) { iface_->repost(buf); }
inline TagEngine &RcIfaceLink::tags() { return iface_->tags_; }
inline bool RcIfaceLink::tag_enabled() const { return iface_->tag_enabled(); }
inline size_t RcIfaceLink::max_rndv_hdr() const { return iface_->max_rndv_hdr(); }
inline bool RcIfaceLink::unexpected_eager(char *data, size_t length, uct_tag_t tag, uint64_t imm) {
    return iface_->unexpected_eager(data, length, tag, imm);
}
inline void RcIfaceLink::unexpected_rndv(uct_tag_t tag, const void *header, unsigned header_length,
                                         uint64_t va, size_t length, const PackedRkey *rkey) {
    iface_->unexpected_rndv(tag, header, header_length, va, length, rkey);
}
inline bool RcIfaceLink::receive_am(uint8_t id, char *data, size_t length) {
    return iface_->receive_am(id, data, length);
}
inline RcCounters &RcIfaceLink::counters() { return iface_->counters_; }

}  // namespace ib
}  // namespace uct_tm

#endif
