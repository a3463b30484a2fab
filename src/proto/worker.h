/*
 * Worker: one protocol-layer instance -- its ifaces, endpoints and requests,
 * and the protocols that move messages between them. What it holds has its
 * own type: Peers (endpoints by peer id), RequestPool, the receive queues
 * (TagList: tier 0, the transport's tag list; PostedRecvs: tiers 1 and 2;
 * UnexpectedQueue: what arrived first, probes' claims), TagGathers, Partials
 * (fragments still to come) and Completions. The protocols live in their own
 * files: send.cc (eager, fragments, rendezvous, sync, inject), recv.cc
 * (posting, matching, unexpected messages, probe, truncation), am_arrivals.cc
 * and tag_arrivals.cc (what UCT's callbacks deliver), rndv_get.cc, cancel.cc,
 * control.cc (replies, credits).
 */
#ifndef UCT_TM_PROTO_WORKER_H_
#define UCT_TM_PROTO_WORKER_H_

#include "common/alloc_status.h"
#include "iov.h"
#include "completions.h"
#include "config.h"
#include "direct_recv.h"
#include "endpoint.h"
#include "iface.h"
#include "mem_maps.h"
#include "partials.h"
#include "peers.h"
#include "posted_recvs.h"
#include "request.h"
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

/* Logs a dropped peer message, rate-limited (Worker::count_drop()); in a
 * Worker member only. */
#define TM_PROTO_DROPPED(_fmt, ...) \
    do { \
        if (count_drop()) { \
            ucs_error("tm_proto: " _fmt " [%llu dropped so far]", ##__VA_ARGS__, \
                      static_cast<unsigned long long>(refused_)); \
        } \
    } while (0)

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
  public:
    explicit Worker(const Config &config);
    ~Worker();
    Worker(const Worker &)            = delete;
    Worker &operator=(const Worker &) = delete;

    ucs_status_t open();
    unsigned     progress();
    ucs_status_t address(void *buffer, size_t *length) const;
    uint32_t     id() const { return config_.id; }
    size_t       min_multi_recv() const { return config_.min_multi_recv; }
    void         set_min_multi_recv(size_t bytes) { config_.min_multi_recv = bytes; }
    void         stats(uct_tm_proto_stats_t *out) const;

    ucs_status_t ep_create(const void *address, size_t length, Endpoint **ep_p);
    void         ep_destroy(Endpoint *ep);
    /* This endpoint's address for its peer's ep_connect() (docs/proto.md
     * "Wireup"); *length as worker address(). */
    ucs_status_t ep_address(const Endpoint *ep, void *buffer, size_t *length) const;
    /* Connects `ep` to its peer's endpoint, whose ep_address() is given
     * (checked whole first: it comes from the peer). */
    ucs_status_t ep_connect(Endpoint *ep, const void *address, size_t length);

    /* Inline: a message the endpoint's eager_now_limit admits leaves at
     * once (send_eager_now); send_general() takes everything else. `ep` is
     * valid (api.cc). */
    ucs_status_t send(Endpoint *ep, const void *buffer, size_t length, uint64_t tag,
                      const uct_tm_proto_op_params_t *params, uint64_t *req);
    /* Inline: while receives go straight to the transport's tag list (nothing
     * unexpected or held in software, no source filter), one goes there at
     * once; recv_general() takes everything else. */
    ucs_status_t recv(void *buffer, size_t length, uint64_t tag, uint64_t mask, Endpoint *source,
                      const uct_tm_proto_op_params_t *params, uint64_t *req);
    /* With `buffer`: PEEK copies what is here of the message's data (probe_copy). */
    ucs_status_t probe(uint64_t tag, uint64_t mask, Endpoint *source, unsigned flags,
                       void *buffer, size_t length, size_t *copied, uct_tm_proto_info_t *info,
                       uint64_t *msg);
    ucs_status_t recv_claimed(uint64_t msg, void *buffer, size_t length,
                              const uct_tm_proto_op_params_t *params, uint64_t *req);
    ucs_status_t discard_claimed(uint64_t msg);
    /* iov.cc: the vectored operations (`ep` valid, as for send) */
    ucs_status_t sendv(Endpoint *ep, const uct_tm_proto_iov_t *iov, size_t iovcnt, uint64_t tag,
                       const uct_tm_proto_op_params_t *params, uint64_t *req);
    ucs_status_t recvv(const uct_tm_proto_iov_t *iov, size_t iovcnt, uint64_t tag, uint64_t mask,
                       Endpoint *source, const uct_tm_proto_op_params_t *params, uint64_t *req);
    ucs_status_t recv_claimedv(uint64_t msg, const uct_tm_proto_iov_t *iov, size_t iovcnt,
                               const uct_tm_proto_op_params_t *params, uint64_t *req);
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
    void transfer_done(GetContext *g, ucs_status_t status);

  private:
    /* --- worker.cc: ifaces, addresses, progress --- */
    ucs_status_t open_iface(const std::string &tl, const std::string &dev);
    void         set_rndv_get(Iface &i, const uct_md_attr_t &md_attr);
    ucs_status_t new_endpoint(Iface *i, const PeerIface &remote, const AddressHeader &h,
                              Endpoint **ep_p);
    void         mark_busy(Endpoint *ep);
    unsigned     progress_queues();
    unsigned     deliver_completions();
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
    void         complete(Request &r, ucs_status_t status);
    /* Nothing unexpected, no receive held in software, no tagged message
     * arriving in fragments: a new receive may go straight to the tag list.
     * Asks the matcher itself, not through the queues' references to it:
     * two loads fewer on the 8 B receive path. */
    bool         software_idle() const {
        return (matcher_.unexpected_count() == 0) && (matcher_.posted_count() == 0) &&
               posted_.tier2_empty() && !gathers_.open();
    }

    /* --- send.cc --- */
    /* static: the C entry forwards to it directly (docs/perf.md,
     * "Code shape of the hot paths") */
    static ucs_status_t send_eager_now(Endpoint *ep, const void *buffer, size_t length,
                                       uint64_t tag, const uct_tm_proto_op_params_t *params,
                                       uint64_t *req);
    /* `vector`: a vectored send's elements (buffer null, length their total) */
    ucs_status_t send_general(Endpoint *ep, const void *buffer, size_t length, uint64_t tag,
                              const uct_tm_proto_op_params_t *params, uint64_t *req,
                              const SendVector *vector = nullptr);
    /* What send_general() decides about one message before any path runs:
     * eager or rendezvous, and the paths it may take. */
    struct SendPlan {
        const void                     *buffer;
        size_t                          length;
        const SendVector               *vector;
        const uct_tm_proto_op_params_t *params;
        unsigned                        flags; /* params->flags, or 0 */
        uint64_t                        tag;   /* 0 for an untagged message */
        uint64_t                        rdata; /* remote data, or 0 */
        uint8_t                         wire_flags;
        /* sync completes later than delivery and transmission: it needs neither */
        bool deliver;
        bool transmit;
        bool tag_send;  /* through the transport's tag API */
        bool rndv;      /* else eager, its credit taken */
        bool batchable; /* MORE: may join the endpoint's batch */
        /* eager, not vectored, and done once handed over: one transport
         * call may send it if nothing is before it */
        bool one_call;

        bool sync() const { return flags & UCT_TM_PROTO_SEND_SYNC; }
        bool quiet() const { return flags & UCT_TM_PROTO_OP_NO_COMPLETION; }
        bool fence() const { return flags & UCT_TM_PROTO_SEND_FENCE; }
        bool has_data() const { return flags & UCT_TM_PROTO_SEND_REMOTE_DATA; }
        bool untagged() const { return flags & UCT_TM_PROTO_OP_UNTAGGED; }
    };
    bool     send_args_valid(const Endpoint *ep, const void *buffer, size_t length,
                             const uct_tm_proto_op_params_t *params, const uint64_t *req,
                             const SendVector *vector) const;
    SendPlan plan_send(Endpoint *ep, const void *buffer, size_t length, uint64_t tag,
                       const uct_tm_proto_op_params_t *params, const SendVector *vector);
    bool     needs_rndv(Endpoint *ep, size_t length, bool tag_send, bool sync, uint64_t rdata);
    /* The paths of send_general(): UCS_OK sent, UCS_ERR_NO_RESOURCE left for
     * the next path, else the send's failure. */
    ucs_status_t send_batched(Endpoint *ep, const SendPlan &p);
    bool         goes_at_once(Endpoint *ep, const SendPlan &p, bool batch_pending);
    ucs_status_t send_at_once(Endpoint *ep, const SendPlan &p);
    /* The last path: a request, started or queued (UCS_INPROGRESS). */
    ucs_status_t                   send_request(Endpoint *ep, const SendPlan &p, bool batch_pending,
                                                CreditHold &credit, uint64_t *req);
    Request                       *new_send(Endpoint *ep, const SendPlan &p, uint64_t *handle);
    ucs_status_t                   queue_send(Request &r, const SendPlan &p);
    [[gnu::noinline]] ucs_status_t eager_now_refused(ucs_status_t status);
    ucs_status_t wait_eager_zcopy();
    [[gnu::noinline]] ucs_status_t send_eager_now_other(Endpoint *ep, const void *buffer,
                                                        size_t length, uint64_t tag,
                                                        const uct_tm_proto_op_params_t *params,
                                                        uint64_t *req);
    /* A single eager message's header (AM path). */
    /* Whether send `r` goes through its transport's tag API (untagged
     * messages never do). */
    static bool  on_tag_path(const Request &r) {
        return r.ep->tag_path && !(r.wire_flags & kFlagUntagged);
    }
    MsgHeader    eager_header(uint64_t tag, bool has_data, uint64_t rdata, size_t length) const {
        MsgHeader h = {};
        h.kind      = Kind::kEager;
        h.flags     = has_data ? kFlagData : 0;
        h.source    = config_.id;
        h.tag       = tag;
        h.data      = rdata;
        h.length    = length;
        return h;
    }
    template <bool kUntagged>
    ssize_t      am_eager(Endpoint *ep, uint64_t tag, bool has_data, uint64_t rdata,
                          const void *buffer, size_t length);
    /* iov.cc: send_single() gathering straight from `nonempty` nonempty
     * elements (remote data narrow over a tag list: sendv() checks) */
    ssize_t      send_single_iov(Endpoint *ep, uint64_t tag, bool has_data, uint64_t rdata,
                                 const uct_tm_proto_iov_t *iov, size_t iovcnt, size_t nonempty,
                                 size_t total);
    /* iov.cc: a vectored send that did not go at once: in place or staged */
    ucs_status_t         sendv_general(Endpoint *ep, const uct_tm_proto_iov_t *iov, size_t iovcnt,
                                       const IovShape &shape, uint64_t tag,
                                       const uct_tm_proto_op_params_t *params, uint64_t *req);
    ucs_status_t         send_staged(Endpoint *ep, const uct_tm_proto_iov_t *iov, size_t iovcnt,
                                     size_t total, uint64_t tag, uct_tm_proto_op_params_t *staged,
                                     uint64_t *req);
    ssize_t      send_single(Endpoint *ep, uint64_t tag, bool has_data, uint64_t rdata,
                             const void *data, size_t len);
    ucs_status_t start_send(Request &r);      /* UCS_OK: fully handed over; NO_RESOURCE: queue */
    void         handed_over(Request &r);
    bool         batch_add(Endpoint *ep, uint64_t tag, uint8_t wire_flags, uint64_t rdata,
                           const void *data, size_t len, const SendVector *vector);
    ucs_status_t flush_batch(Endpoint *ep);
    void         handle_batch(const char *p, size_t length, const Iface *iface);
    void         send_batch_before_close(Endpoint *ep);
    static constexpr int kCloseFlushTries = 100000;
    void         push_ahead(Request &r);
    unsigned     progress_later();
    bool         flush_done(Request &r);
    void         hold_buffered(uint32_t idx);
    void         report_buffered(uint64_t msg);
    bool         fence_holds(const Request &r);
    bool         sends_outstanding(Endpoint *ep);
    static constexpr size_t kStartedPrune = 64;
    void         left_queue(Request &r);
    MsgHeader    message_header(const Request &r, Kind kind) const;
    ucs_status_t send_eager(Request &r);
    ucs_status_t send_rts(Request &r);
    ucs_status_t push_data(Request &r);
    const char  *send_data(const Request &r) const {
        return r.bounce.empty() ? r.sbuf : r.bounce.data();
    }
    ssize_t      am_short(Endpoint *ep, uint64_t tag, uint32_t word, uint32_t rdata,
                          const void *data, size_t len, uint8_t am_id = kAmShortId);
    ssize_t      tag_eager(Endpoint *ep, uint64_t tag, uint64_t imm, const void *data, size_t len);
    /* A tagged eager message's imm: our source word, then narrow remote data. */
    uint64_t     eager_imm(bool has_data, uint64_t rdata) const {
        return (uint64_t{source_word(config_.id, has_data)} << 32) | static_cast<uint32_t>(rdata);
    }
    ssize_t      tag_eager_zcopy(Endpoint *ep, uint64_t tag, uint64_t imm, const void *data,
                                 size_t len);
    ssize_t      am_send(Endpoint *ep, const void *hdr, size_t hdr_len, const void *data,
                         size_t len);
    /* am_send() of send bytes [offset, offset + len) of `r`: from its buffer,
     * its bounce copy or its elements */
    ssize_t      am_send_part(const Request &r, const void *hdr, size_t hdr_len, size_t offset,
                              size_t len);

    /* --- control.cc --- */
    void         send_ctrl(Endpoint *ep, const CtrlHeader &hdr);
    void         send_ctrl_to(uint32_t source, const CtrlHeader &hdr);
    /* Sends the replies parked for `ep`'s peer (ep_create, ep_connect). */
    void unpark_ctrl(Endpoint *ep);
    /* Inline (every eager arrival): counts the bytes, sends a kCredit only
     * once a quarter of the window is owed. */
    void         return_credit(Endpoint *ep, uint64_t bytes);
    /* Whether returning `bytes` more to `ep` stays below the flush mark
     * (the common arrival's test: then nothing is sent). */
    bool         credit_stays_owed(const Endpoint *ep, uint64_t bytes) const {
        return ep->owed + bytes < window_ / 4;
    }
    void         flush_credit(Endpoint *ep);
    void         handle_ctrl(const CtrlHeader &hdr);
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

    /* --- recv.cc --- */
    /* A message (eager, first fragment, rendezvous request) that arrived over `iface`. */
    void         handle_message(const MsgHeader &hdr, const char *payload, size_t len,
                                const Iface *iface);
    void         message_matched(Request &r, const MsgHeader &h, const char *payload, size_t len,
                                 Endpoint *ep, Account &acct);
    void message_unexpected(const MsgHeader &h, const char *payload, size_t len, Account &acct);
    bool buffer_unexpected(const MsgHeader &h, const char *payload, size_t len, Account &acct,
                           uint32_t *idx);
    bool enqueue_unexpected(uint32_t idx);
    /* Whether an unexpected eager message of `length` bytes fits in `acct`
     * (the credit granted to its source) and in the worker's bound. */
    bool         fits(const Account &acct, uint64_t length, uint32_t source);
    /* Releases what an unexpected message's buffered bytes were charged. */
    void         release_charge(Unexpected &u);
    /* Forgets a fragmented message's entry and what it was charged. */
    void         erase_partial(uint32_t source, uint32_t msg_id);
    void         track_fragments(const MsgHeader &h, size_t first_len, uint64_t req, uint32_t unex,
                                 Account &acct);
    void         deliver_unexpected(Request &r, uint32_t idx);
    /* fi_msg (recv.cc): untagged receives, multi-receives and their children */
    Request     *match_untagged(const MsgHeader &h);
    template <bool kUntagged>
    ucs_status_t recv_contiguous(void *buffer, size_t length, uint64_t tag, uint64_t mask,
                                 Endpoint *source, const uct_tm_proto_op_params_t *params,
                                 uint64_t *req);
    ucs_status_t recv_untagged(void *buffer, size_t length, Endpoint *source,
                               const uct_tm_proto_op_params_t *params, uint64_t *req);
    ucs_status_t post_untagged(Request &r, uint64_t handle, uint64_t *req);
    Request     *new_child(Request &m);
    void         lend(Request &m, Request &c, uint64_t length);
    void         multi_maybe_done(Request &m);
    void         child_done(Request &c);
    /* inline (below): the steps of every arrival that matched a receive */
    void         accept_message(Request &r, const MsgHeader &hdr);
    void         place(Request &r, size_t offset, const char *data, size_t len);
    void         finish_recv(Request &r);
    void         publish_now(Request &r); /* inline */
    void         start_rndv_recv(Request &r, uint32_t source, uint64_t sreq, const char *get,
                                 size_t get_len, bool put_offer);
    void         message_consumed(uint32_t source, uint64_t length, bool sync,
                                  uint64_t sreq); /* inline */
    void         send_ack(uint32_t source, uint64_t sreq);
    void         drop_unexpected(uint32_t idx);
    void         fill_info(uct_tm_proto_info_t *info, const Unexpected &u) const;
    void         unexpected_bytes(int64_t delta);
    ucs_status_t recv_offloaded(void *buffer, size_t length, uint64_t tag, uint64_t mask,
                                const uct_tm_proto_op_params_t *params, uint64_t *req);
    /* A receive in the caller's memory without callback goes to the tag list
     * as a DirectRecv; software holds it if the tag list cannot take it. Out
     * of line (docs/perf.md, "Code shape of the hot paths"). */
    [[gnu::noinline]] ucs_status_t recv_direct(void *buffer, size_t length, uint64_t tag, uint64_t mask,
                             const uct_tm_proto_op_params_t *params, uint64_t *req);
    /* the transport refused recv_direct()'s post: undone, and held in software */
    [[gnu::noinline]] ucs_status_t direct_refused();
    ucs_status_t recv_general(void *buffer, size_t length, uint64_t tag, uint64_t mask,
                              Endpoint *source, const uct_tm_proto_op_params_t *params,
                              uint64_t *req);
    ucs_status_t post_recv(Request &r);
    /* recv_general()'s and recvv()'s end: `r` takes an earlier unexpected
     * message or is posted; UCS_INPROGRESS and *req, or an error (r freed).
     * The inline one is recv_general()'s (its instructions as before the
     * split), the other recvv()'s. */
    ucs_status_t match_or_post_inline(Request &r, uint64_t handle, uint64_t tag, uint64_t mask,
                                      Endpoint *source, uint64_t *req);
    ucs_status_t match_or_post(Request &r, uint64_t handle, uint64_t tag, uint64_t mask,
                               Endpoint *source, uint64_t *req);
    /* The checks recv_general() makes of everything but the buffer. */
    bool         recv_args_valid(Endpoint *source, const uct_tm_proto_op_params_t *params,
                                 const uint64_t *req) const {
        return op_params_valid(params, UCT_TM_PROTO_OP_UNTAGGED | UCT_TM_PROTO_RECV_MULTI, req) &&
               ((source == nullptr) ||
                ((source->magic == Endpoint::kMagic) && (source->worker == this)));
    }
    template <typename Contiguous, typename Valid, typename Take>
    ucs_status_t recv_vector(const uct_tm_proto_iov_t *iov, size_t iovcnt,
                             const uct_tm_proto_op_params_t *params, uint64_t *req,
                             Contiguous &&contiguous, Valid &&valid, Take &&take);
    Request     *new_iov_recv(const uct_tm_proto_iov_t *iov, size_t iovcnt, size_t total,
                              const uct_tm_proto_op_params_t *params, uint64_t *handle);
    /* inline */
    template <bool kOffloaded = false>
    Request     *new_recv(void *buffer, size_t length, const uct_tm_proto_op_params_t *params,
                          uint64_t *handle);

    /* --- rndv_get.cc --- */
    bool         start_get(Request &r, uint32_t source, uint64_t sreq, const char *get,
                           size_t get_len);
    bool         start_put(Request &r, uint32_t source, uint64_t sreq);
    ucs_status_t transfer(Request &r, GetContext &c, Endpoint *ep, bool put, size_t offset,
                          size_t length, uint64_t address, uct_mem_h memh);
    bool         ask_put(Request &r, Endpoint *ep, size_t front);
    /* The registration of r's mapped region on `iface` (taken: use()d),
     * or null: no region, unmapped since, or none there. */
    uct_mem_h    mapped_memh(const Request &r, const Iface *iface);
    /* Lets go of a send's memh (non-null): its own, the cache's or the region's */
    void         drop_memh(Request &r);
    /* Lets go of a receive's rmemh: the region's, the cache's, or deregistered */
    void         drop_rmemh(Request &r, const Iface *iface);
    /* UCT_TM_PROTO_OP_MEMH: whether params->memh holds [buffer, +length) */
    bool         region_valid(const uct_tm_proto_op_params_t *params, const void *buffer,
                              size_t length) const {
        return (params == nullptr) || !(params->flags & UCT_TM_PROTO_OP_MEMH) ||
               maps_.covers(params->memh, buffer, length);
    }
    void         part_done(Request &r, ucs_status_t status);
    void         handle_put_request(const PutHeader &h, const char *rkey, size_t rkey_len);
    void         put_done(Request &r, ucs_status_t status);
    size_t       pack_rts(Request &r, char *out);

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
    void         cancel_rts(uint32_t source, uint64_t sreq);

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
    /* Replies to workers we have no endpoint to yet: their message came
     * before our ep_create (the application exchanges names out of band and
     * may progress before it creates ours). Sent once it exists; beyond
     * kParkedMax (a bound against forged sources) dropped. */
    struct Parked {
        uint32_t   peer;
        CtrlHeader hdr;
    };
    static constexpr size_t         kParkedMax = 256;
    std::vector<Parked>             parked_;
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
    match::TagMatcher               matcher_;       /* tier 1 receives and unexpected messages */
    PostedRecvs                     posted_{matcher_, reqs_};
    UnexpectedQueue                 unexpected_{matcher_};
    TagList                         tag_list_;
    TagGathers                      gathers_;
    Partials                        partial_;       /* fragments still to come */
    Completions                     completions_;
    MemMaps                         maps_;
    uct_tm_proto_stats_t            stats_ = {};
    /* tag_eager_zcopy()'s iov and completion, set up once: an eager send is
     * complete before the next one starts, so one of each is enough */
    uct_iov_t                       eager_iov_  = {nullptr, 0, UCT_MEM_HANDLE_NULL, 0, 1};
    uct_completion_t                eager_comp_ = {[](uct_completion_t *) {}, 1, UCS_OK};
    /* send_eager_now()'s arguments while its transport call runs (the rest
     * are eager_iov_'s buffer and length) */
    struct EagerNow {
        Endpoint                       *ep     = nullptr;
        uint64_t                        tag    = 0;
        const uct_tm_proto_op_params_t *params = nullptr;
        uint64_t                       *req    = nullptr;
    };
    EagerNow                        eager_now_;
    /* recv_direct()'s arguments while its post runs (the rest are in the
     * DirectRecv) */
    struct DirectPost {
        const uct_tm_proto_op_params_t *params = nullptr;
        uint64_t                       *req    = nullptr;
    };
    DirectPost                      direct_post_;
    /* sendv()'s gathered message (capacity kept up to kStageKeep bytes) */
    std::vector<char>               stage_;
    static constexpr size_t         kStageKeep = 64 << 10;
};

/* A source we hold an endpoint to is bound to that endpoint's iface: the
 * peer sends over the same one (ep_create() picks it the same way on both
 * sides). UCT's callbacks do not say which peer sent a message, so that is
 * all a receiver can check; docs/proto.md "Hostile peers". */
inline bool Worker::bound(uint32_t source, const Iface *iface, Endpoint **ep) const {
    *ep = peers_.of(source);
    return (*ep == nullptr) || ((*ep)->iface == iface);
}

/* `ep`: our endpoint to the sender (callers have looked it up already). */
inline void Worker::return_credit(Endpoint *ep, uint64_t bytes) {
    if (ep == nullptr) {
        return;
    }
    ep->owed += bytes;
    if (!credit_stays_owed(ep, 0)) {
        flush_credit(ep);
    }
}

/* Inline into uct_tm_proto_send(): the endpoint's limit (set once when it is
 * created) already says whether the message is eager and goes in one
 * transport call; what is left per message is the credit compare and an
 * empty queue. */
[[gnu::always_inline]] inline ucs_status_t Worker::send(Endpoint *ep, const void *buffer,
                                                        size_t length, uint64_t tag,
                                                        const uct_tm_proto_op_params_t *params,
                                                        uint64_t *req) {
    /* a message that leaves at once makes no request, with USER_REQUEST too */
    if ((length < ep->eager_now_limit) && (length <= ep->credits) &&
        ((buffer != nullptr) || (length == 0)) && ep->sends.empty() &&
        (((params == nullptr) || (params->flags == 0))
                 ? (req != nullptr)
                 : ((params->flags == UCT_TM_PROTO_OP_USER_REQUEST) &&
                    user_memory_valid(params)))) { /* req may be NULL then */
        return send_eager_now(ep, buffer, length, tag, params, req);
    }
    return send_general(ep, buffer, length, tag, params, req);
}

/* A receive request for `buffer`; null when out of memory. kOffloaded: for
 * recv_offloaded(), whose request stays on the offloaded eager path or is
 * marked cold_dirty when it leaves it (RequestPool::allocate_offloaded). */
template <bool kOffloaded>
[[gnu::always_inline]] inline Request *Worker::new_recv(void *buffer, size_t length,
                                                       const uct_tm_proto_op_params_t *params,
                                                       uint64_t *handle) {
    Request *r;
    if (ucs_unlikely((params != nullptr) && (params->flags & UCT_TM_PROTO_OP_USER_REQUEST) &&
                     !user_memory_valid(params))) {
        return nullptr; /* recv_general() says why */
    }
    if (alloc_status([&]() __attribute__((always_inline)) {
            r = kOffloaded ? &reqs_.allocate_offloaded(handle)
                           : &reqs_.allocate(ReqKind::kRecv, handle);
        }) != UCS_OK) {
        return nullptr;
    }
    r->rbuf     = static_cast<char *>(buffer);
    r->capacity = length;
    if (params != nullptr) {
        r->cb  = params->cb;
        r->arg = params->arg;
        if (params->flags & UCT_TM_PROTO_OP_USER_REQUEST) {
            RequestPool::adopt(*r, params->request);
        }
        if (params->flags & UCT_TM_PROTO_OP_MEMH) {
            r->region = params->memh; /* never offloaded (recv() sends it general) */
        }
        if (!kOffloaded && (params->flags & UCT_TM_PROTO_OP_UNTAGGED)) {
            r->untagged = true;
            if (params->flags & UCT_TM_PROTO_RECV_MULTI) {
                r->multi        = true;
                r->children     = 0;
                r->used         = 0;
                r->multi_status = UCS_OK;
            }
        }
    }
    return r;
}

[[gnu::always_inline]] inline ucs_status_t Worker::recv(void *buffer, size_t length, uint64_t tag,
                                                        uint64_t mask, Endpoint *source,
                                                        const uct_tm_proto_op_params_t *params,
                                                        uint64_t *req) {
    if (tag_list_.enabled() && (source == nullptr) && ((buffer != nullptr) || (length == 0)) &&
        software_idle()) {
        if ((params != nullptr) && (params->flags == UCT_TM_PROTO_OP_USER_REQUEST) &&
            (params->cb == nullptr) && user_memory_valid(params)) {
            return recv_direct(buffer, length, tag, mask, params, req);
        }
        if ((req != nullptr) &&
            ((params == nullptr) ||
             ((params->flags & ~unsigned(UCT_TM_PROTO_OP_USER_REQUEST)) == 0))) {
            return recv_offloaded(buffer, length, tag, mask, params, req);
        }
    }
    return recv_general(buffer, length, tag, mask, source, params, req);
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

/* Inline: every arrival path ends here. */
inline void Worker::complete(Request &r, ucs_status_t status) {
    ucs_assertv(r.kind != ReqKind::kFree, "completing free request slot %#llx",
                static_cast<unsigned long long>(r.self));
    if (r.done) {
        return;
    }
    if (r.memh != nullptr) {
        /* a send: the receiver is done reading (ACK), or never will (cancel) */
        drop_memh(r);
    }
    r.done        = true;
    r.info.status = status;
    if ((r.cb != nullptr) || (r.user != nullptr)) { /* a NO_COMPLETION send has a cb */
        /* without either, test() is how the caller learns; a request in the
         * caller's memory is published (and let go) at delivery */
        completions_.push(r.self);
    }
}

inline void Worker::drop_memh(Request &r) {
    if (r.memh_md != nullptr) {
        uct_md_mem_dereg(r.memh_md, r.memh);
    } else if (r.cached != nullptr) {
        RegistrationCache::put(r.cached);
        r.cached = nullptr;
    } else {
        maps_.unuse(r.region); /* the mapped region's registration */
    }
    r.memh    = nullptr;
    r.memh_md = nullptr;
}

/* The info flags of a message's wire flags: the two bits side by side. */
static_assert((kFlagData == 4) && (kFlagUntagged == 8) && (UCT_TM_PROTO_INFO_REMOTE_DATA == 1) &&
                      (UCT_TM_PROTO_INFO_UNTAGGED == 2),
              "info_flags() shifts one pair of bits onto the other");
inline unsigned info_flags(uint8_t wire_flags) { return (wire_flags >> 2) & 3u; }

/* `r` is matched (kArriving): it takes the message's description. */
inline void Worker::accept_message(Request &r, const MsgHeader &h) {
    ucs_assertv(r.rstate == RecvState::kArriving, "receive %#llx accepts a message in state %d",
                static_cast<unsigned long long>(r.self), static_cast<int>(r.rstate));
    r.info.tag      = h.tag; /* 0 for untagged messages: the arrival paths see to it */
    r.info.length   = h.length;
    r.info.data     = h.data;
    r.info.flags    = info_flags(h.flags);
    r.info.source   = h.source;
    r.info.ep       = reinterpret_cast<uct_tm_proto_ep_h>(peers_.of(h.source));
    r.expect        = std::min<uint64_t>(h.length, r.capacity);
    r.received      = 0;
    r.offset        = 0;
}

/* Copies message bytes [offset, offset + len) into the receive; whatever
 * falls past its buffer is dropped. */
inline void Worker::place(Request &r, size_t offset, const char *data, size_t len) {
    if (offset >= r.capacity) {
        return;
    }
    const size_t n = std::min(len, r.capacity - offset);
    if (n != 0) { /* data (an empty message's) may be null then */
        if (ucs_likely(r.rbuf != nullptr)) {
            memcpy(r.rbuf + offset, data, n);
        } else {
            iov_scatter(r.elements, offset, data, n); /* a vectored receive (uct_tm_proto_recvv) */
        }
    }
    r.received += n;
}

inline void Worker::finish_recv(Request &r) {
    complete(r, (r.info.length > r.capacity) ? UCS_ERR_MESSAGE_TRUNCATED : UCS_OK);
}

/* A request in the caller's memory without callback that has just completed
 * (its completion the last one queued) is published at once, not at the next
 * progress: nothing touches it afterwards. */
inline void Worker::publish_now(Request &r) {
    if ((r.user != nullptr) && (r.cb == nullptr) && r.done && completions_.take_last(r.self)) {
        reqs_.retire(r, true);
    }
}

/* An eager message left the unexpected buffer or went straight to a
 * receive: its credit goes back, and a sync sender learns it matched. */
inline void Worker::message_consumed(uint32_t source, uint64_t length, bool sync,
                                     uint64_t sreq) {
    if (sync) {
        send_ack(source, sreq);
    }
    return_credit(peers_.of(source), length);
}

}  // namespace proto
}  // namespace uct_tm

struct uct_tm_proto_worker : uct_tm::proto::Worker {
    using Worker::Worker;
};

#endif
