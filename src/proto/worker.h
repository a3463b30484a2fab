/*
 * Worker: one protocol-layer instance. It wires its parts to the transport
 * -- ifaces, endpoints (Peers), requests (RequestPool), memory maps,
 * progress and config -- and each part runs its own logic (they and what
 * they share are the Owner's, owner.h): the receive side (Receiver,
 * receiver.h; recv.cc), the send side (Sender, sender.h; send.cc),
 * rendezvous transfers (Rendezvous, rendezvous.h; rndv_get.cc), control
 * messages and credit (ControlChannel, control.h; control.cc) and
 * Completions. The worker keeps the API, what UCT's callbacks deliver
 * (am_arrivals.cc, tag_arrivals.cc), cancellation (cancel.cc) and progress
 * (worker.cc).
 */
#ifndef UCT_TM_PROTO_WORKER_H_
#define UCT_TM_PROTO_WORKER_H_

#include "common/alloc_status.h"
#include "iov.h"
#include "config.h"
#include "delivery.h"
#include "direct_recv.h"
#include "endpoint.h"
#include "iface.h"
#include "owner.h"
#include "request.h"
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

/* A peer's kHello: the worker address it sent over `iface`, for an
 * endpoint to reply over (reply_endpoints.cc). */
struct Hello {
    uint32_t          source;
    const Iface      *iface;
    std::vector<char> address;
};

class Worker : public Owner {
  public:
    explicit Worker(const Config &config);
    ~Worker();

    ucs_status_t open();
    unsigned     progress();
    /* The full form, or the compact one (compact_address.h). */
    ucs_status_t address(void *buffer, size_t *length, bool compact = false) const;
    size_t       min_multi_recv() const { return config().min_multi_recv; }
    void         set_min_multi_recv(size_t bytes) { set_config_min_multi_recv(bytes); }
    void         stats(uct_tm_proto_stats_t *out) const;

    ucs_status_t ep_create(const void *address, size_t length, Endpoint **ep_p);
    void         ep_destroy(Endpoint *ep);
    /* This endpoint's address for its peer's ep_connect() (docs/proto.md
     * "Wireup"); *length as worker address(). */
    ucs_status_t ep_address(const Endpoint *ep, void *buffer, size_t *length) const;
    /* Connects `ep` to its peer's endpoint, whose ep_address() is given
     * (checked whole first: it comes from the peer). */
    ucs_status_t ep_connect(Endpoint *ep, const void *address, size_t length);
    bool         owns(const Endpoint *ep) const { return peers_.owns(ep); }

    /* The operations are the parts': send, sendv (Sender); recv, recvv,
     * probe, claim, discard (Receiver). Inline: the C entry points' hot
     * paths. `ep` is valid (api.cc). */
    ucs_status_t send(Endpoint *ep, const void *buffer, size_t length, uint64_t tag,
                      const uct_tm_proto_op_params_t *params, uint64_t *req);
    ucs_status_t recv(void *buffer, size_t length, uint64_t tag, uint64_t mask, Endpoint *source,
                      const uct_tm_proto_op_params_t *params, uint64_t *req);
    ucs_status_t probe(uint64_t tag, uint64_t mask, Endpoint *source, unsigned flags, void *buffer,
                       size_t length, size_t *copied, uct_tm_proto_info_t *info, uint64_t *msg) {
        return rx_.probe(tag, mask, source, flags, buffer, length, copied, info, msg);
    }
    ucs_status_t recv_claimed(uint64_t msg, void *buffer, size_t length,
                              const uct_tm_proto_op_params_t *params, uint64_t *req) {
        return rx_.recv_claimed(msg, buffer, length, params, req);
    }
    ucs_status_t discard_claimed(uint64_t msg) { return rx_.discard_claimed(msg); }
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

    /* uct_tm_proto_mem_map / unmap (MemMaps) */
    ucs_status_t mem_map(const uct_tm_proto_mem_map_params_t *params, uint64_t *memh);
    ucs_status_t mem_unmap(uint64_t memh) { return maps_.unmap(memh); }

    /* The transport reported the peer of `uep` failed (the iface error
     * handler): the endpoint fails, and so does every send on it that no
     * transport operation still refers to (those fail when it completes them). */
    void ep_failed(uct_ep_h uep, ucs_status_t status);

    /* --- Arrivals: UCT's callbacks call these (inside uct_worker_progress),
     * exceptions caught (guarded()) except on the *_quietly paths. --- */
    /* am_arrivals.cc: an active message of ours over `iface` */
    void am_arrived(const void *data, size_t length, const Iface *iface);
    void am_short_arrived(const void *data, size_t length, const Iface *iface, bool untagged);
    /* tag_arrivals.cc: a tagged message (one fragment) or rendezvous request
     * no offloaded receive took */
    void tagged_eager_arrived(const void *data, size_t length, unsigned flags, uint64_t stag,
                              uint64_t imm, void **context, const Iface *iface);
    void tagged_rndv_arrived(uint64_t stag, const void *header, unsigned length,
                             const Iface *iface);
    /* tag_arrivals.cc: a receive in the tag list called back, through a
     * request slot's OffloadContext or a DirectRecv. tag_completed_quietly()
     * is the common eager completion, where nothing throws or logs (false:
     * nothing done, and tag_completed() takes it). */
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

  private:
    /* --- worker.cc: ifaces, endpoints, progress --- */
    ucs_status_t open_iface(const std::string &tl, const std::string &dev);
    void         set_rndv_get(Iface &i, const uct_md_attr_t &md_attr);
    /* ep_create(); `implicit`: for the replies to the worker that sent this
     * address in its kHello over that iface (then nothing else is accepted) */
    ucs_status_t create_endpoint(const void *address, size_t length, Endpoint **ep_p,
                                 const Hello *implicit);
    ucs_status_t new_endpoint(Iface *i, const PeerIface &remote, const AddressHeader &h,
                              Endpoint **ep_p, bool implicit);
    /* progress() found queued work, or it is time for the keepalive */
    [[gnu::noinline]] unsigned progress_rest(unsigned n);
    unsigned                   progress_queues();
    unsigned                   progress_later();
    void                       keepalive(); /* uct_ep_check on every endpoint, once per interval */
    /* Completes with `status` every send on `ep` and drops its queued
     * control messages; `keep_writes`: not one whose write into the peer
     * the transport still holds (kPutting: it completes with that write). */
    void         end_sends(Endpoint *ep, ucs_status_t status, bool keep_writes);
    /* Completes with the peer's `status` every receive waiting for data from it. */
    void                 end_arrivals(const Endpoint *ep, ucs_status_t status);
    /* Completes with `status` every receive directed at `ep`'s peer that no
     * message took yet, unless another connected endpoint to it still works. */
    void                 end_directed(const Endpoint *ep, ucs_status_t status);
    bool                 send_queued_now(Endpoint *ep);
    void         send_batch_before_close(Endpoint *ep);
    static constexpr int kCloseFlushTries = 100000;

    /* --- am_arrivals.cc --- */
    template <typename Header>
    bool dispatch(const char *p, size_t length,
                  void (Worker::*handler)(const Header &, const char *, size_t));
    bool bound_source(const char *header, const Iface *iface);
    void handle_batch(const char *p, size_t length, const Iface *iface);
    void handle_fragment(const FragHeader &hdr, const char *payload, size_t len);
    void handle_data(const DataHeader &hdr, const char *payload, size_t len);

    /* --- reply_endpoints.cc --- */
    void send_hello(Endpoint *ep);
    /* One try: UCS_ERR_NO_RESOURCE leaves it due (progress tries again). */
    ucs_status_t hello_now(Endpoint *ep);
    void         handle_hello(const char *p, size_t length, const Iface *iface);
    void         accept_hellos();
    /* ep_create() to worker `id` over `chosen`: our implicit endpoint to it,
     * now the application's, if it is over `chosen` (else it is destroyed). */
    Endpoint          *adopt(uint32_t id, const Iface *chosen);
    std::vector<char>  hello_address_; /* our compact (else full) address, once built */
    std::vector<Hello> hellos_;        /* received, endpoints not yet created */

    /* --- tag_arrivals.cc --- */
    /* The request an offloaded context names if it still holds that receive, else null. */
    Request *offloaded_request(OffloadContext *o);
    void     offload_completed(Request &r, uint64_t stag, uint64_t imm, size_t length,
                               ucs_status_t status);
    void     offload_rndv(Request &r, uint64_t stag, const void *header, unsigned length);
    void     move_direct_to_slot(DirectRecv *d, uint64_t stag, const void *header, unsigned length);

    /* --- cancel.cc --- */
    ucs_status_t cancel_send(Request &r);
    ucs_status_t cancel_recv(Request &r);
    /* Takes posted receive `r` out of its queue and completes it with `status`. */
    void withdraw_recv(Request &r, ucs_status_t status);

    unsigned poll_secondary();
    using Clock = std::chrono::steady_clock;
    static constexpr std::chrono::microseconds kSecondaryIdle{50};
    static constexpr std::chrono::microseconds kSecondaryLinger{1000};
    bool                                       has_secondary_   = false; /* more than one iface */
    bool                                       secondary_busy_  = true;
    uint32_t                                   secondary_calls_ = 0;
    Clock::time_point                          secondary_next_{};
    Clock::time_point                          secondary_quiet_{};

    /* the keepalive: progress() looks at the clock every kKeepaliveEvery calls */
    static constexpr uint32_t             kKeepaliveEvery = 4096;
    uint32_t                              progress_calls_ = 0;
    std::chrono::steady_clock::time_point keepalive_next_{};
    ucs_async_context_t                  *async_ = nullptr;
    std::vector<Later>                    later_work_; /* progress_later()'s batch */
};


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
    unsigned n = uct_worker_progress(uworker_);
    /* an idle second transport only every 16th call, asked inline */
    if (ucs_unlikely(has_secondary_) && (secondary_busy_ || ((++secondary_calls_ & 15) == 0))) {
        n += poll_secondary();
    }
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

/* Inline (worker.h: it compares an endpoint's worker with the owner). */
inline bool Receiver::recv_args_valid(Endpoint *source, const uct_tm_proto_op_params_t *params,
                                      const uint64_t *req) const {
    return op_params_valid(params, UCT_TM_PROTO_OP_UNTAGGED | UCT_TM_PROTO_RECV_MULTI, req) &&
           ((source == nullptr) ||
            ((source->magic == Endpoint::kMagic) && (source->worker == &w_)));
}

}  // namespace proto
}  // namespace uct_tm

struct uct_tm_proto_worker : uct_tm::proto::Worker {
    using Worker::Worker;
};

#endif
