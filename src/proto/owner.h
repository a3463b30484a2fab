/*
 * Owner: what a worker's parts share and the few calls they make back, as a
 * libfabric object reaches its owner (util_srx its domain) through a narrow
 * set of operations rather than the owner's insides. The parts -- Receiver,
 * Sender, Rendezvous, ControlChannel, Completions -- live here and hold an
 * Owner &, a concrete type: a call across them is direct, never virtual
 * (the send and receive paths run through them). Worker builds on it: the
 * ifaces, the API, UCT's callbacks and progress.
 */
#ifndef UCT_TM_PROTO_OWNER_H_
#define UCT_TM_PROTO_OWNER_H_

#include "completions.h"
#include "config.h"
#include "control.h"
#include "endpoint.h"
#include "iface.h"
#include "mem_maps.h"
#include "peers.h"
#include "receiver.h"
#include "rendezvous.h"
#include "request.h"
#include "sender.h"

#include <uct/api/uct.h>
#include <ucs/debug/log_def.h>

#include <memory>
#include <vector>

/* Logs a dropped peer message, rate-limited (Owner::count_drop()): in the
 * worker TM_PROTO_DROPPED, in a part (holding its owner as w_)
 * TM_PROTO_DROPPED_BY(w_, ...). */
#define TM_PROTO_DROPPED_BY(_owner, _fmt, ...)                                                     \
    do {                                                                                           \
        if ((_owner).count_drop()) {                                                               \
            ucs_error("tm_proto: " _fmt " [%llu dropped so far]", ##__VA_ARGS__,                   \
                      static_cast<unsigned long long>((_owner).refused()));                        \
        }                                                                                          \
    } while (0)
#define TM_PROTO_DROPPED(_fmt, ...) TM_PROTO_DROPPED_BY(*this, _fmt, ##__VA_ARGS__)

namespace uct_tm {
namespace proto {

/* Work for progress: a TRANSMIT_COMPLETE send awaiting a flush, a held
 * message to report (buffered receives). */
struct Later {
    enum class Kind : uint8_t { kFlush, kBuffered, kHello } kind;
    uint64_t handle; /* a send request, or a claimed message (kHello: none) */
};

class Owner {
  public:
    explicit Owner(const Config &config);
    Owner(const Owner &)            = delete;
    Owner &operator=(const Owner &) = delete;

    /* the parts, for one another */
    Receiver       &rx() { return rx_; }
    Sender         &tx() { return tx_; }
    Rendezvous     &rndv() { return rndv_; }
    ControlChannel &control() { return control_; }
    Completions    &completions() { return completions_; }

    /* what they share */
    const Config                              &config() const { return config_; }
    uint32_t                                   id() const { return config_.id; }
    /* FI_OPT_MIN_MULTI_RECV after creation (uct_tm_proto_worker_set_min_multi_recv) */
    void set_config_min_multi_recv(size_t bytes) { config_.min_multi_recv = bytes; }
    uint64_t                                   window() const { return window_; }
    RequestPool                               &reqs() { return reqs_; }
    const Peers                               &peers() const { return peers_; }
    MemMaps                                   &maps() { return maps_; }
    uct_tm_proto_stats_t                      &stats() { return stats_; }
    uct_worker_h                               uworker() const { return uworker_; }
    /* Every iface, idle or not: for waits on a completion or on room. */
    unsigned                                   progress_transports();
    const std::vector<std::unique_ptr<Iface>> &ifaces() const { return ifaces_; }

    /* the calls back */
    void mark_busy(Endpoint *ep); /* queued sends or replies: progress carries them on */
    /* throws when out of memory: callers wrap it in alloc_status() */
    void later(Later::Kind kind, uint64_t handle) { later_.push_back({kind, handle}); }
    /* The failure of our endpoint to worker `source`, or UCS_OK. */
    ucs_status_t peer_failure(uint32_t source) const;
    /* Inline (every arrival): whether a message claiming `source` may have
     * come over `iface`, and our endpoint to that source (*ep; null when we
     * hold none, and then the source is not bound). */
    bool bound(uint32_t source, const Iface *iface, Endpoint **ep) const;
    /* The account a message from `ep` (null: a source we hold no endpoint to) counts against. */
    Account &account_of(Endpoint *ep) { return (ep != nullptr) ? ep->held : unbound_; }
    /* UCT_TM_PROTO_OP_MEMH: whether params->memh holds [buffer, +length) */
    bool region_valid(const uct_tm_proto_op_params_t *params, const void *buffer,
                      size_t length) const {
        return (params == nullptr) || !(params->flags & UCT_TM_PROTO_OP_MEMH) ||
               maps_.covers(params->memh, buffer, length);
    }
    /* Logs (rate-limited: a misbehaving peer must not flood the log) and counts a dropped message. */
    [[gnu::cold]] void refuse(uint32_t source, const char *why);
    /* Counts a dropped peer message; true when it is to be logged (the 1st,
     * 2nd, 4th, 8th... drop): TM_PROTO_DROPPED above. */
    [[gnu::cold]] bool count_drop() {
        ++refused_;
        return (refused_ & (refused_ - 1)) == 0;
    }
    uint64_t refused() const { return refused_; }

  protected:
    /* first: the receive path then reaches it at the owner's address (no
     * offset to add on every uct_tm_proto_recv) */
    Receiver rx_{*this, reqs_};
    Config   config_;
    uint64_t window_ = 0; /* eager bytes buffered per peer: cap / peers */
    /* what the sources we hold no endpoint to hold here, together (one window) */
    Account      unbound_;
    uint64_t     refused_ = 0; /* messages dropped by the checks of refuse() */
    uct_worker_h uworker_ = nullptr;
    std::vector<std::unique_ptr<Iface>> ifaces_;
    Peers                               peers_;
    std::vector<Endpoint *>             busy_; /* endpoints with queued sends or replies */
    std::vector<Later>                  later_;
    RequestPool                         reqs_;
    Sender                              tx_{*this};
    Rendezvous                          rndv_{*this};
    ControlChannel                      control_{*this, window_};
    Completions                         completions_{reqs_, maps_};
    MemMaps                             maps_;
    uct_tm_proto_stats_t                stats_ = {};
};

/* A source we hold an endpoint to is bound to that endpoint's iface: the
 * peer sends over the same one (ep_create() picks it the same way on both
 * sides). UCT's callbacks do not say which peer sent a message, so that is
 * all a receiver can check; docs/proto.md "Hostile peers". */
inline bool Owner::bound(uint32_t source, const Iface *iface, Endpoint **ep) const {
    *ep = peers_.of(source);
    return (*ep == nullptr) || ((*ep)->iface == iface);
}

/* Inline: the send side's headers carry it. */
inline uint32_t Sender::w_id() const { return w_.id(); }

/* An eager message left the unexpected buffer or went straight to a
 * receive: its credit goes back, and a sync sender learns it matched. */
inline void ControlChannel::message_consumed(uint32_t source, uint64_t length, bool sync,
                                             uint64_t sreq) {
    if (sync) {
        send_ack(source, sreq);
    }
    return_credit(source, w_.peers().of(source), length);
}

}  // namespace proto
}  // namespace uct_tm

#endif
