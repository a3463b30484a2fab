/*
 * Worker: one protocol-layer instance. It wires its parts to the transport
 * -- ifaces, endpoints (Peers), requests (RequestPool), memory maps,
 * progress and config -- and each part runs its own logic: the receive side
 * (Receiver, receiver.h: the receive queues and what runs in them; recv.cc),
 * the send side (Sender, sender.h: the send plan, its paths and the send
 * requests' protocol; send.cc), rendezvous transfers (Rendezvous,
 * rendezvous.h; rndv_get.cc), control messages and credit
 * (ControlChannel, control.h; control.cc), Completions. The worker keeps
 * what UCT's callbacks deliver (am_arrivals.cc, tag_arrivals.cc),
 * cancellation (cancel.cc) and progress (worker.cc).
 */
#ifndef UCT_TM_PROTO_WORKER_H_
#define UCT_TM_PROTO_WORKER_H_

#include "common/alloc_status.h"
#include "iov.h"
#include "completions.h"
#include "config.h"
#include "control.h"
#include "delivery.h"
#include "direct_recv.h"
#include "endpoint.h"
#include "iface.h"
#include "mem_maps.h"
#include "partials.h"
#include "peers.h"
#include "receiver.h"
#include "rendezvous.h"
#include "request.h"
#include "sender.h"
#include "tag_gathers.h"
#include "tag_list.h"
#include "unexpected.h"
#include "wire.h"

#include "match/tag_matcher.h"

#include <ucs/async/async_fwd.h>
#include <uct/api/uct.h>
#include <ucs/debug/log_def.h>

#include <chrono>
#include <cstring>
#include <exception>
#include <memory>
#include <string>
#include <vector>

/* Logs a dropped peer message, rate-limited (Worker::count_drop()): in a
 * Worker member TM_PROTO_DROPPED, in one of its parts' (which hold the
 * worker as w_) TM_PROTO_DROPPED_BY(w_, ...). */
#define TM_PROTO_DROPPED_BY(_worker, _fmt, ...)                                                    \
    do {                                                                                           \
        if ((_worker).count_drop()) {                                                              \
            ucs_error("tm_proto: " _fmt " [%llu dropped so far]", ##__VA_ARGS__,                   \
                      static_cast<unsigned long long>((_worker).refused_));                        \
        }                                                                                          \
    } while (0)
#define TM_PROTO_DROPPED(_fmt, ...) TM_PROTO_DROPPED_BY(*this, _fmt, ##__VA_ARGS__)

namespace uct_tm {
namespace proto {

/* Runs a UCT callback's body; no exception may cross UCT's C frames (one is
 * logged and the event dropped). Callers mark the lambda always_inline: the
 * body then costs no extra frame per arrival. */
template <typename Fn> [[gnu::always_inline]] inline void guarded(const char *what, Fn &&fn) {
    try {
        fn();
    } catch (const std::exception &e) {
        ucs_error("tm_proto: dropped %s: %s", what, e.what());
    }
}

/* Largest eager payload sent as one am_short (packed on the stack). */
inline constexpr size_t kShortMax = 256;

/* Sets the AM handlers of an iface (am_arrivals.cc). */
ucs_status_t set_am_handlers(Iface *iface);
/* Adds the unexpected-tagged-message callbacks to an iface's parameters
 * (tag_arrivals.cc). */
void set_tag_callbacks(uct_iface_params_t *params, Iface *iface);

/* One iface entry of a peer's worker address (worker.cc). */
struct PeerIface;

class Worker {
    friend class Receiver; /* their calls back: see receiver.h, sender.h */
    friend class Sender;
    friend class Rendezvous;
    friend class ControlChannel;

  public:
    explicit Worker(const Config &config);
    ~Worker();
    Worker(const Worker &)            = delete;
    Worker &operator=(const Worker &) = delete;

    ucs_status_t open();
    unsigned     progress();
    ucs_status_t address(void *buffer, size_t *length) const;
    uint32_t     id() const { return config_.id; }
    void         stats(uct_tm_proto_stats_t *out) const;

    ucs_status_t ep_create(const void *address, size_t length, Endpoint **ep_p);
    void         ep_destroy(Endpoint *ep);
    /* This endpoint's address for its peer's ep_connect() (docs/proto.md
     * "Wireup"); *length as worker address(). */
    ucs_status_t ep_address(const Endpoint *ep, void *buffer, size_t *length) const;
    /* Connects `ep` to its peer's endpoint, whose ep_address() is given
     * (checked whole first: it comes from the peer). */
    ucs_status_t ep_connect(Endpoint *ep, const void *address, size_t length);

    /* Inline: the send side's (Sender::send()) */
    ucs_status_t send(Endpoint *ep, const void *buffer, size_t length, uint64_t tag,
                      const uct_tm_proto_op_params_t *params, uint64_t *req);
    /* Inline: the receive side's (Receiver::recv()) */
    ucs_status_t recv(void *buffer, size_t length, uint64_t tag, uint64_t mask, Endpoint *source,
                      const uct_tm_proto_op_params_t *params, uint64_t *req);
    /* probe, claim, discard: the receive side's (Receiver) */
    ucs_status_t probe(uint64_t tag, uint64_t mask, Endpoint *source, unsigned flags, void *buffer,
                       size_t length, size_t *copied, uct_tm_proto_info_t *info, uint64_t *msg) {
        return rx_.probe(tag, mask, source, flags, buffer, length, copied, info, msg);
    }
    ucs_status_t recv_claimed(uint64_t msg, void *buffer, size_t length,
                              const uct_tm_proto_op_params_t *params, uint64_t *req) {
        return rx_.recv_claimed(msg, buffer, length, params, req);
    }
    ucs_status_t discard_claimed(uint64_t msg) { return rx_.discard_claimed(msg); }
    /* iov.cc: the vectored operations (`ep` valid, as for send) */
    ucs_status_t sendv(Endpoint *ep, const uct_tm_proto_iov_t *iov, size_t iovcnt, uint64_t tag,
                       const uct_tm_proto_op_params_t *params, uint64_t *req) {
        return tx_.sendv(ep, iov, iovcnt, tag, params, req);
    }
    ucs_status_t recvv(const uct_tm_proto_iov_t *iov, size_t iovcnt, uint64_t tag, uint64_t mask,
                       Endpoint *source, const uct_tm_proto_op_params_t *params, uint64_t *req) {
        return rx_.recvv(iov, iovcnt, tag, mask, source, params, req);
    }
    ucs_status_t recv_claimedv(uint64_t msg, const uct_tm_proto_iov_t *iov, size_t iovcnt,
                               const uct_tm_proto_op_params_t *params, uint64_t *req) {
        return rx_.recv_claimedv(msg, iov, iovcnt, params, req);
    }
    ucs_status_t test(uint64_t req, uct_tm_proto_info_t *info);
    ucs_status_t release(uint64_t req);
    ucs_status_t cancel(uint64_t req);
    ucs_status_t cancel_user(void *request);

    bool owns(const Endpoint *ep) const { return peers_.owns(ep); }

    /* uct_tm_proto_mem_map / unmap (MemMaps) */
    ucs_status_t mem_map(const uct_tm_proto_mem_map_params_t *params, uint64_t *memh);
    ucs_status_t mem_unmap(uint64_t memh) { return maps_.unmap(memh); }

    /* The transport reported the peer of `uep` failed (the iface error
     * handler, worker.cc): the endpoint fails, and so does every send on it
     * that no transport operation still refers to (those fail when the
     * transport completes them). */
    void ep_failed(uct_ep_h uep, ucs_status_t status);

    /* --- Arrivals: what UCT's callbacks hand the worker. Only those
     * callbacks call these (inside uct_worker_progress); each unpacks its
     * context and passes it on, exceptions caught (guarded()) except on the
     * *_quietly paths, which cannot throw. --- */

    /* am_arrivals.cc: an active message of ours over `iface` */
    void am_arrived(const void *data, size_t length, const Iface *iface);
    void am_short_arrived(const void *data, size_t length, const Iface *iface, bool untagged);

    /* tag_arrivals.cc: a tagged message no offloaded receive took (one
     * fragment of it), and a rendezvous request likewise */
    void tagged_eager_arrived(const void *data, size_t length, unsigned flags, uint64_t stag,
                              uint64_t imm, void **context, const Iface *iface);
    void tagged_rndv_arrived(uint64_t stag, const void *header, unsigned length,
                             const Iface *iface);
    /* tag_arrivals.cc: a receive in the tag list called back, through its
     * context: a request slot's (OffloadContext) or a DirectRecv. The
     * common eager completion, where nothing can throw or log, is
     * tag_completed_quietly() (inline there; false: nothing done, and
     * tag_completed() takes it). */
    void tag_consumed(OffloadContext *o);
    void tag_consumed(DirectRecv *d) { d->consumed = true; }
    bool tag_completed_quietly(OffloadContext *o, uint64_t stag, uint64_t imm, size_t length,
                               ucs_status_t status);
    bool tag_completed_quietly(DirectRecv *d, uint64_t stag, uint64_t imm, size_t length,
                               ucs_status_t status);
    void tag_completed(OffloadContext *o, uint64_t stag, uint64_t imm, size_t length,
                       ucs_status_t status);
    void tag_completed(DirectRecv *d, uint64_t stag, uint64_t imm, size_t length,
                       ucs_status_t status);
    void tag_rndv(OffloadContext *o, uint64_t stag, const void *header, unsigned length,
                  ucs_status_t status);
    void tag_rndv(DirectRecv *d, uint64_t stag, const void *header, unsigned length,
                  ucs_status_t status);

    /* rndv_get.cc: a rendezvous read or write of ours ended */
    void transfer_done(GetContext *g, ucs_status_t status) { rndv_.transfer_done(g, status); }

  private:
    /* --- worker.cc: ifaces, addresses, progress --- */
    ucs_status_t open_iface(const std::string &tl, const std::string &dev);
    void         set_rndv_get(Iface &i, const uct_md_attr_t &md_attr);
    ucs_status_t new_endpoint(Iface *i, const PeerIface &remote, const AddressHeader &h,
                              Endpoint **ep_p);
    void         mark_busy(Endpoint *ep);
    unsigned     progress_queues();
    /* progress() found queued sends or completions, or it is time to look at
     * the keepalive: n plus what it did */
    [[gnu::noinline]] unsigned progress_rest(unsigned n);
    /* Checks every endpoint with uct_ep_check once per keepalive interval. */
    void         keepalive();
    /* Completes with `status` every send on `ep` (queued, waiting for the
     * receiver's ack, CTS or read, pushing data) and drops its queued control
     * messages; `keep_writes`: not one whose write into the peer the transport
     * still holds (kPutting: it completes with that write). */
    void         end_sends(Endpoint *ep, ucs_status_t status, bool keep_writes);
    /* Completes with the peer's `status` every receive waiting for data from
     * it: later fragments, or rendezvous data it was to write or push. */
    void         end_arrivals(const Endpoint *ep, ucs_status_t status);
    /* The failure of our endpoint to worker `source`, or UCS_OK. */
    ucs_status_t peer_failure(uint32_t source) const;

    /* --- worker.cc: what the send side (Sender, sender.h) leaves to the
     * worker: the endpoints with queued work, and the work itself at
     * progress; am_arrivals.cc: a batch of MORE messages arrived --- */
    unsigned             progress_later();
    void         send_batch_before_close(Endpoint *ep);
    static constexpr int kCloseFlushTries = 100000;
    void                 handle_batch(const char *p, size_t length, const Iface *iface);

    /* Inline (every arrival): whether a message claiming `source` may have
     * come over `iface`, and our endpoint to that source (*ep; null when we
     * hold none, and then the source is not bound). */
    bool         bound(uint32_t source, const Iface *iface, Endpoint **ep) const;
    /* The account a message from `ep` (null: a source we hold no endpoint to) counts against. */
    Account     &account_of(Endpoint *ep) { return (ep != nullptr) ? ep->held : unbound_; }
    /* Logs (rate-limited: a misbehaving peer must not flood the log) and counts a dropped message. */
    [[gnu::cold]] void refuse(uint32_t source, const char *why);
    /* Counts a dropped peer message; true when it is to be logged (the 1st,
     * 2nd, 4th, 8th... drop): TM_PROTO_DROPPED above. */
    [[gnu::cold]] bool count_drop() {
        ++refused_;
        return (refused_ & (refused_ - 1)) == 0;
    }

    /* --- am_arrivals.cc --- */
    /* Reads a Header and hands it with the payload after it to `handler`. */
    template <typename Header>
    bool         dispatch(const char *p, size_t length,
                          void (Worker::*handler)(const Header &, const char *, size_t));
    /* Whether the source an AM header claims (at kSourceOffset) is bound to `iface`. */
    bool         bound_source(const char *header, const Iface *iface);
    void         handle_fragment(const FragHeader &hdr, const char *payload, size_t len);
    void         handle_data(const DataHeader &hdr, const char *payload, size_t len);

    /* UCT_TM_PROTO_OP_MEMH: whether params->memh holds [buffer, +length) */
    bool region_valid(const uct_tm_proto_op_params_t *params, const void *buffer,
                      size_t length) const {
        return (params == nullptr) || !(params->flags & UCT_TM_PROTO_OP_MEMH) ||
               maps_.covers(params->memh, buffer, length);
    }

    /* --- tag_arrivals.cc --- */
    /* The request an offloaded context names if it still holds that
     * receive, else null (logged). */
    Request     *offloaded_request(OffloadContext *o);
    void         offload_completed(Request &r, uint64_t stag, uint64_t imm, size_t length,
                                   ucs_status_t status);
    void         offload_rndv(Request &r, uint64_t stag, const void *header, unsigned length);
    void         move_direct_to_slot(DirectRecv *d, uint64_t stag, const void *header,
                                     unsigned length);

    /* --- cancel.cc --- */
    ucs_status_t cancel_send(Request &r);
    ucs_status_t cancel_recv(Request &r);

    Config                          config_;
    uint64_t                        window_ = 0; /* eager bytes buffered per peer: cap / peers */
    /* what the sources we hold no endpoint to hold here, together (one window) */
    Account                         unbound_;
    uint64_t                        refused_ = 0; /* messages dropped by the checks of refuse() */
    /* the keepalive: progress() looks at the clock every kKeepaliveEvery calls */
    static constexpr uint32_t       kKeepaliveEvery = 4096;
    uint32_t                        progress_calls_ = 0;
    std::chrono::steady_clock::time_point keepalive_next_{};
    ucs_async_context_t            *async_  = nullptr;
    uct_worker_h                    uworker_ = nullptr;
    std::vector<std::unique_ptr<Iface>> ifaces_;
    Peers                           peers_;
    std::vector<Endpoint *>         busy_;          /* endpoints with queued sends or replies */
    /* work for progress(): TRANSMIT_COMPLETE sends awaiting a flush, held
     * messages to report (buffered receives) */
    struct Later {
        enum class Kind : uint8_t { kFlush, kBuffered } kind;
        uint64_t handle; /* a send request, or a claimed message */
    };
    std::vector<Later>              later_;
    std::vector<Later>              later_work_;
    RequestPool                     reqs_;
    Receiver                        rx_{*this, reqs_}; /* the receive side */
    Sender                          tx_{*this};        /* the send side */
    Rendezvous                      rndv_{*this};      /* rendezvous transfers */
    ControlChannel                  control_{*this, window_};
    Completions                     completions_{reqs_, maps_};
    MemMaps                         maps_;
    uct_tm_proto_stats_t            stats_ = {};
};

/* A source we hold an endpoint to is bound to that endpoint's iface: the
 * peer sends over the same one (ep_create() picks it the same way on both
 * sides). UCT's callbacks do not say which peer sent a message, so that is
 * all a receiver can check; docs/proto.md "Hostile peers". */
inline bool Worker::bound(uint32_t source, const Iface *iface, Endpoint **ep) const {
    *ep = peers_.of(source);
    return (*ep == nullptr) || ((*ep)->iface == iface);
}

[[gnu::always_inline]] inline ucs_status_t Worker::send(Endpoint *ep, const void *buffer,
                                                        size_t length, uint64_t tag,
                                                        const uct_tm_proto_op_params_t *params,
                                                        uint64_t *req) {
    return tx_.send(ep, buffer, length, tag, params, req);
}

[[gnu::always_inline]] inline ucs_status_t Worker::recv(void *buffer, size_t length, uint64_t tag,
                                                        uint64_t mask, Endpoint *source,
                                                        const uct_tm_proto_op_params_t *params,
                                                        uint64_t *req) {
    return rx_.recv(buffer, length, tag, mask, source, params, req);
}

/* Inline into the C entry point: a caller polls it in its wait loop. */
[[gnu::always_inline]] inline unsigned Worker::progress() {
    const unsigned n    = uct_worker_progress(uworker_);
    const bool     tick = (++progress_calls_ % kKeepaliveEvery) == 0; /* busy or not */
    if (ucs_likely(busy_.empty() && completions_.empty() && later_.empty() && !tick)) {
        return n;
    }
    return progress_rest(n); /* out of line: an idle poll stays cheap */
}

/* Inline into the C entry points: a caller polls test() in its wait loop. */
inline ucs_status_t Worker::test(uint64_t req, uct_tm_proto_info_t *info) {
    Request *r = reqs_.lookup(req);
    if (r == nullptr) {
        return UCS_ERR_INVALID_PARAM;
    }
    if (!r->done) {
        return UCS_INPROGRESS;
    }
    if (info != nullptr) {
        *info = r->info;
    }
    return r->info.status;
}

inline ucs_status_t Worker::release(uint64_t req) {
    uint32_t index;
    Request *r = reqs_.lookup(req, &index);
    if ((r == nullptr) || (r->user != nullptr)) {
        return UCS_ERR_INVALID_PARAM; /* the caller's memory is never released */
    }
    if (!r->done) {
        return UCS_ERR_BUSY;
    }
    reqs_.release(index, *r);
    return UCS_OK;
}

/* Inline: the send side's headers carry it. */
inline uint32_t Sender::w_id() const { return w_.config_.id; }

/* An eager message left the unexpected buffer or went straight to a
 * receive: its credit goes back, and a sync sender learns it matched. */
inline void ControlChannel::message_consumed(uint32_t source, uint64_t length, bool sync,
                                             uint64_t sreq) {
    if (sync) {
        send_ack(source, sreq);
    }
    return_credit(w_.peers_.of(source), length);
}

}  // namespace proto
}  // namespace uct_tm

struct uct_tm_proto_worker : uct_tm::proto::Worker {
    using Worker::Worker;
};

#endif
