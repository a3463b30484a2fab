/*
 * Worker: the ifaces, endpoints, requests, receive queues and unexpected
 * messages of one protocol-layer instance, and its progress. The protocols
 * live in their own files: send.cc (eager, fragments, rendezvous, sync,
 * inject), recv.cc (posting, arrival matching, probe, truncation), cancel.cc,
 * offload.cc (the transport's tag list), control.cc (replies, credits).
 */
#ifndef UCT_TM_PROTO_WORKER_H_
#define UCT_TM_PROTO_WORKER_H_

#include "config.h"
#include "direct_recv.h"
#include "endpoint.h"
#include "partials.h"
#include "request.h"
#include "unexpected.h"
#include "wire.h"

#include "match/tag_matcher.h"

#include <ucs/async/async_fwd.h>
#include <uct/api/uct.h>
#include <ucs/debug/log_def.h>

#include <cstring>
#include <deque>
#include <exception>
#include <memory>
#include <string>
#include <unordered_map>
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

struct Iface {
    Worker          *worker    = nullptr;
    std::string      tl;
    std::string      dev;
    uct_component_h  component = nullptr;
    uct_md_h         md        = nullptr;
    uct_iface_h      iface     = nullptr;
    uct_iface_attr_t attr      = {};
    std::vector<char> dev_addr;
    std::vector<char> iface_addr;
    size_t           max_bcopy = 0; /* AM payload per message, headers included */
    /* Data messages use the transport's tag API (eager bcopy, rndv request):
     * matched by its tag list, or unexpected through eager_cb / rndv_cb. */
    bool             tag_send  = false;
    size_t           tag_eager_max = 0; /* larger messages go by rendezvous */
    /* eager messages up to this size go as tag_eager_zcopy (the MD needs no
     * memh): it carries imm, which tag_eager_short cannot, and may span
     * several transport fragments */
    size_t           tag_zcopy_max = 0;
    /* shorter than tag_inline_limit: one zcopy the transport sends inline
     * (0: zcopy unusable, none); from there up to tag_bcopy_max (one
     * descriptor) tag_eager_bcopy costs the transport less than the zcopy's
     * general gather: tm_sm 1 KiB */
    size_t           tag_inline_limit = 0;
    size_t           tag_bcopy_max    = 0;
    /* an eager message of `len` goes as tag_eager_zcopy, else tag_eager_bcopy */
    bool eager_by_zcopy(size_t len) const {
        return (len < tag_inline_limit) || ((len <= tag_zcopy_max) && (len > tag_bcopy_max));
    }
    bool             offload   = false; /* receives go to its tag list */
    /* rendezvous data is read by the receiver (get_zcopy, MD-registered) */
    bool             rndv_get  = false;
    size_t           rkey_size = 0;
};

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

/* The callbacks of a DirectRecv's context (offload.cc). */
uct_tag_context_t direct_context();

/* Adds the unexpected-tagged-message callbacks to an iface's parameters. */
void set_tag_callbacks(uct_iface_params_t *params, Iface *iface);
/* The callbacks of an offloaded receive's context (offload.cc), copied into
 * a request slot the first time it is offloaded. */
uct_tag_context_t offload_context();

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
    void         stats(uct_tm_proto_stats_t *out) const;

    ucs_status_t ep_create(const void *address, size_t length, Endpoint **ep_p);
    void         ep_destroy(Endpoint *ep);

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
    ucs_status_t probe(uint64_t tag, uint64_t mask, Endpoint *source, unsigned flags,
                       uct_tm_proto_info_t *info, uint64_t *msg);
    ucs_status_t recv_claimed(uint64_t msg, void *buffer, size_t length,
                              const uct_tm_proto_op_params_t *params, uint64_t *req);
    ucs_status_t discard_claimed(uint64_t msg);
    ucs_status_t test(uint64_t req, uct_tm_proto_info_t *info);
    ucs_status_t release(uint64_t req);
    ucs_status_t cancel(uint64_t req);
    ucs_status_t cancel_user(void *request);

    bool owns(const Endpoint *ep) const;

  private:
    friend struct Handlers;
    friend struct TagHandlers;
    friend struct DirectHandlers;
    friend struct GetHandlers;

    /* --- worker.cc: ifaces, addresses, progress --- */
    ucs_status_t open_iface(const std::string &tl, const std::string &dev);
    void         mark_busy(Endpoint *ep);
    unsigned     progress_queues();
    unsigned     deliver_completions();
    /* progress() found queued sends or completions: n plus their count */
    [[gnu::noinline]] unsigned progress_rest(unsigned n);
    void         complete(Request &r, ucs_status_t status);

    /* --- send.cc --- */
    /* static: six arguments, all in registers, so the C entry tail-calls it */
    static ucs_status_t send_eager_now(Endpoint *ep, const void *buffer, size_t length,
                                       uint64_t tag, const uct_tm_proto_op_params_t *params,
                                       uint64_t *req);
    ucs_status_t send_general(Endpoint *ep, const void *buffer, size_t length, uint64_t tag,
                              const uct_tm_proto_op_params_t *params, uint64_t *req);
    [[gnu::noinline]] ucs_status_t eager_now_refused(ucs_status_t status);
    ucs_status_t wait_eager_zcopy();
    [[gnu::noinline]] ucs_status_t send_eager_now_other(Endpoint *ep, const void *buffer,
                                                        size_t length, uint64_t tag,
                                                        const uct_tm_proto_op_params_t *params,
                                                        uint64_t *req);
    ssize_t      send_single(Endpoint *ep, uint64_t tag, uint32_t imm, const void *data,
                             size_t len);
    ucs_status_t start_send(Request &r);      /* UCS_OK: fully handed over; NO_RESOURCE: queue */
    MsgHeader    message_header(const Request &r, Kind kind) const;
    ucs_status_t send_eager(Request &r);
    ucs_status_t send_rts(Request &r);
    ucs_status_t push_data(Request &r);
    const char  *send_data(const Request &r) const {
        return r.bounce.empty() ? r.sbuf : r.bounce.data();
    }
    ssize_t      am_short(Endpoint *ep, uint64_t tag, uint32_t imm, const void *data, size_t len);
    ssize_t      tag_eager(Endpoint *ep, uint64_t tag, uint32_t imm, const void *data, size_t len);
    ssize_t      tag_eager_zcopy(Endpoint *ep, uint64_t tag, uint64_t imm, const void *data,
                                 size_t len);
    ssize_t      am_send(Endpoint *ep, const void *hdr, size_t hdr_len, const void *data,
                         size_t len);

    /* --- control.cc --- */
    void         send_ctrl(Endpoint *ep, const CtrlHeader &hdr);
    void         send_ctrl_to(uint32_t source, const CtrlHeader &hdr);
    /* Inline (every eager arrival): counts the bytes, sends a kCredit only
     * once a quarter of the window is owed. */
    void         return_credit(Endpoint *ep, uint64_t bytes);
    void         flush_credit(Endpoint *ep);
    void         handle_ctrl(const CtrlHeader &hdr);
    /* Inline: the last peer is cached (one sender at a time is the common
     * case); find_endpoint() searches the map. */
    Endpoint    *endpoint_of(uint32_t source) const;
    Endpoint    *find_endpoint(uint32_t source) const;
    /* Inline (every arrival): whether a message claiming `source` may have
     * come over `iface`, and our endpoint to that source (*ep; null when we
     * hold none, and then the source is not bound). */
    bool         bound(uint32_t source, const Iface *iface, Endpoint **ep) const;
    /* The account a message from `ep` (null: a source we hold no endpoint to) counts against. */
    Account     &account_of(Endpoint *ep) { return (ep != nullptr) ? ep->held : unbound_; }
    /* Logs (rate-limited: a misbehaving peer must not flood the log) and counts a dropped message. */
    [[gnu::cold]] void refuse(uint32_t source, const char *why);
    /* Counts a dropped peer message; true when it is to be logged (the 1st,
     * 2nd, 4th, 8th... drop): TM_PROTO_DROPPED below. */
    [[gnu::cold]] bool count_drop() {
        ++refused_;
        return (refused_ & (refused_ - 1)) == 0;
    }

    /* --- recv.cc --- */
    ucs_status_t handle_am(const void *data, size_t length, const Iface *iface);
    ucs_status_t handle_am_short(const void *data, size_t length, const Iface *iface);
    /* Reads a Header and hands it with the payload after it to `handler`. */
    template <typename Header>
    bool         dispatch(const char *p, size_t length,
                          void (Worker::*handler)(const Header &, const char *, size_t));
    /* A message (eager, first fragment, rendezvous request) that arrived over `iface`. */
    void         handle_message(const MsgHeader &hdr, const char *payload, size_t len,
                                const Iface *iface);
    /* Whether the source an AM header claims (at kSourceOffset) is bound to `iface`. */
    bool         bound_source(const char *header, const Iface *iface);
    /* Whether an unexpected eager message of `length` bytes fits in `acct`
     * (the credit granted to its source) and in the worker's bound. */
    bool         fits(const Account &acct, uint64_t length, uint32_t source);
    /* Releases what an unexpected message's buffered bytes were charged. */
    void         release_charge(Unexpected &u);
    /* Forgets a fragmented message's entry and what it was charged. */
    void         erase_partial(uint32_t source, uint32_t msg_id);
    void         track_fragments(const MsgHeader &h, size_t first_len, uint64_t req, uint32_t unex,
                                 Account &acct);
    void         handle_fragment(const FragHeader &hdr, const char *payload, size_t len);
    void         handle_data(const DataHeader &hdr, const char *payload, size_t len);
    Request     *match_arrival(uint64_t tag, uint32_t source); /* inline in recv.cc */
    Request     *match_tier2(uint64_t tag, uint32_t source);
    bool         take_unexpected(uint64_t tag, uint64_t mask, bool has_source, uint32_t source,
                                 uint32_t *idx, bool remove);
    void         deliver_unexpected(Request &r, uint32_t idx);
    /* inline (below): the steps of every arrival that matched a receive */
    void         accept_message(Request &r, const MsgHeader &hdr);
    void         place(Request &r, size_t offset, const char *data, size_t len);
    void         finish_recv(Request &r);
    void         publish_now(Request &r); /* inline */
    void         start_rndv_recv(Request &r, uint32_t source, uint64_t sreq, const char *get,
                                 size_t get_len);
    bool         start_get(Request &r, uint32_t source, uint64_t sreq, const char *get,
                           size_t get_len);
    ucs_status_t issue_get(Request &r, GetContext &c, Endpoint *ep, size_t offset, size_t length,
                           uint64_t address);
    bool         ask_put(Request &r, Endpoint *ep, size_t front);
    void         part_done(Request &r, ucs_status_t status);
    void         handle_put_request(const PutHeader &h, const char *rkey, size_t rkey_len);
    void         put_done(Request &r, ucs_status_t status);
    size_t       pack_rts(Request &r, char *out);
    void         message_consumed(uint32_t source, uint64_t length, bool sync,
                                  uint64_t sreq); /* inline */
    void         send_ack(uint32_t source, uint64_t sreq);
    void         trim_arrival();
    void         drop_unexpected(uint32_t idx);
    void         fill_info(uct_tm_proto_info_t *info, const Unexpected &u) const;
    void         unexpected_bytes(int64_t delta);
    ucs_status_t recv_offloaded(void *buffer, size_t length, uint64_t tag, uint64_t mask,
                                const uct_tm_proto_op_params_t *params, uint64_t *req);
    /* A receive in the caller's memory without callback goes to the tag list
     * as a DirectRecv; software holds it if the tag list cannot take it. Out
     * of line: the C entry then saves no register for the other paths. */
    [[gnu::noinline]] ucs_status_t recv_direct(void *buffer, size_t length, uint64_t tag, uint64_t mask,
                             const uct_tm_proto_op_params_t *params, uint64_t *req);
    /* the transport refused recv_direct()'s post: undone, and held in software */
    [[gnu::noinline]] ucs_status_t direct_refused();
    ucs_status_t recv_general(void *buffer, size_t length, uint64_t tag, uint64_t mask,
                              Endpoint *source, const uct_tm_proto_op_params_t *params,
                              uint64_t *req);
    ucs_status_t post_recv(Request &r);
    /* inline */
    template <bool kOffloaded = false>
    Request     *new_recv(void *buffer, size_t length, const uct_tm_proto_op_params_t *params,
                          uint64_t *handle);

    /* --- offload.cc --- */
    bool         try_offload(Request &r); /* inline */
    ucs_status_t cancel_offloaded(Request &r);
    /* Takes a receive off the transport's tag list without a callback. */
    void         forget_offloaded(Request &r);
    void         offload_consumed(Request &r);
    void         offload_completed(Request &r, uint64_t stag, uint64_t imm, size_t length,
                                   ucs_status_t status);
    void         offload_rndv(Request &r, uint64_t stag, const void *header, unsigned length);
    ucs_status_t tag_unexpected_eager(const void *data, size_t length, unsigned flags,
                                      uint64_t stag, uint64_t imm, void **context,
                                      const Iface *iface);
    ucs_status_t tag_unexpected_rndv(uint64_t stag, const void *header, unsigned length,
                                     const Iface *iface);
    Request     *offloaded_request(uct_tag_context_t *ctx);
    void         direct_completed(DirectRecv *d, uint64_t stag, uint64_t imm, size_t length,
                                  ucs_status_t status);
    void         direct_rndv(DirectRecv *d, uint64_t stag, const void *header, unsigned length);
    ucs_status_t cancel_direct(void *request);
    void         cancel_directs_at_exit();
    bool         offload_completed_quietly(uct_tag_context_t *ctx, uint64_t stag, uint64_t imm,
                                           size_t length, ucs_status_t status);

    /* --- cancel.cc --- */
    ucs_status_t cancel_send(Request &r);
    ucs_status_t cancel_recv(Request &r);
    void         cancel_rts(uint32_t source, uint64_t sreq);

    Config                          config_;
    uint64_t                        window_ = 0; /* eager bytes buffered per peer: cap / peers */
    /* what the sources we hold no endpoint to hold here, together (one window) */
    Account                         unbound_;
    uint64_t                        refused_ = 0; /* messages dropped by the checks of refuse() */
    ucs_async_context_t            *async_  = nullptr;
    uct_worker_h                    uworker_ = nullptr;
    std::vector<std::unique_ptr<Iface>> ifaces_;
    Iface                          *offload_iface_ = nullptr; /* receives go to its tag list */
    uct_tag_context_t               offload_ctx_   = {};      /* offload_context() */
    DirectRecvList                  direct_;                  /* DirectRecvs in the tag list */
    /* the tag list takes buffers of recv_min_ to recv_min_ + recv_span_ bytes
     * (one unsigned compare; SIZE_MAX and 0 until set: no real buffer) */
    size_t                          recv_min_  = SIZE_MAX;
    size_t                          recv_span_ = 0;
    const uct_tag_context_t         direct_ctx_ = direct_context();
    std::vector<std::unique_ptr<Endpoint>> eps_;
    std::unordered_map<uint32_t, Endpoint *> by_peer_;
    mutable uint32_t                last_peer_    = 0; /* endpoint_of() cache */
    mutable Endpoint               *last_peer_ep_ = nullptr;
    std::vector<Endpoint *>         busy_;
    RequestPool                     reqs_;
    UnexpectedPool                  unex_;
    match::TagMatcher               matcher_;       /* tier 1 receives and unexpected messages */
    std::deque<uint64_t>            tier2_;         /* source-filtered receives and the ones after */
    size_t                          tier2_live_ = 0;
    std::deque<uint64_t>            arrival_;       /* unexpected handles in arrival order */
    Partials                        partial_;       /* fragments still to come */
    /* unexpected tagged messages arriving in several fragments, gathered
     * until the last one (which carries imm: the source); reused */
    struct TagGather {
        std::vector<char> data;
        bool              dropped = false;
    };
    std::vector<std::unique_ptr<TagGather>> gathers_;
    std::vector<TagGather *>                free_gathers_;
    /* the context of a fragmented tagged message beyond the bound on open
     * gathers (one per sender: each sends one message at a time): dropped */
    TagGather                               refused_gather_;
    /* gathers between their first and last fragment: the message is
     * unexpected already (the transport decided at its first fragment), so
     * no receive may go to the tag list, where a later message could take it */
    uint32_t                                gathers_open_ = 0;
    std::vector<uint64_t>           completed_;     /* callbacks to deliver */
    std::vector<uint64_t>           delivering_;
    uint64_t                        next_seq_ = 0;
    uct_tm_proto_stats_t            stats_ = {};
    /* tag_eager_zcopy()'s iov and completion, set up once: an eager send is
     * complete before the next one starts, so one of each is enough */
    uct_iov_t                       eager_iov_  = {nullptr, 0, UCT_MEM_HANDLE_NULL, 0, 1};
    uct_iov_t                       recv_iov_   = {nullptr, 0, UCT_MEM_HANDLE_NULL, 0, 1};
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
    /* recv_direct()'s arguments while its post runs (the rest are in
     * recv_iov_ and the DirectRecv) */
    struct DirectPost {
        const uct_tm_proto_op_params_t *params = nullptr;
        uint64_t                       *req    = nullptr;
    };
    DirectPost                      direct_post_;
};

inline Endpoint *Worker::endpoint_of(uint32_t source) const {
    if ((source == last_peer_) && (last_peer_ep_ != nullptr)) {
        return last_peer_ep_;
    }
    return find_endpoint(source);
}

/* A source we hold an endpoint to is bound to that endpoint's iface: the
 * peer sends over the same one (ep_create() picks it the same way on both
 * sides). UCT's callbacks do not say which peer sent a message, so that is
 * all a receiver can check; docs/proto.md "Hostile peers". */
inline bool Worker::bound(uint32_t source, const Iface *iface, Endpoint **ep) const {
    *ep = endpoint_of(source);
    return (*ep == nullptr) || ((*ep)->iface == iface);
}

/* `ep`: our endpoint to the sender (callers have looked it up already). */
inline void Worker::return_credit(Endpoint *ep, uint64_t bytes) {
    if (ep == nullptr) {
        return;
    }
    ep->owed += bytes;
    if (ep->owed >= window_ / 4) {
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

/* Inline into recv() (the 8 B receive path). Posts to the tag list of
 * offload_iface_; a refused post leaves the receive to software. */
inline bool Worker::try_offload(Request &r) {
    if ((r.capacity - recv_min_) > recv_span_) {
        return false; /* a size the tag list does not take */
    }
    if (r.octx.request != &r) {
        /* once per pool slot (slots never move); priv belongs to the transport */
        r.octx.uct     = offload_ctx_;
        r.octx.worker  = this;
        r.octx.request = &r;
    }
    r.octx.req = r.self;
    recv_iov_.buffer = r.rbuf; /* the transport reads it during the call only */
    recv_iov_.length = r.capacity;
    const ucs_status_t status = uct_iface_tag_recv_zcopy(offload_iface_->iface, r.tag, r.mask,
                                                         &recv_iov_, (r.capacity != 0) ? 1 : 0,
                                                         &r.octx.uct);
    if (status != UCS_OK) {
        return false; /* list full, busy or refused: software keeps it */
    }
    r.rstate = RecvState::kOffloaded;
    r.tier   = 0;
    ++stats_.offloaded_recvs;
    return true;
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
    try {
        r = kOffloaded ? &reqs_.allocate_offloaded(handle)
                       : &reqs_.allocate(ReqKind::kRecv, handle);
    } catch (const std::bad_alloc &) {
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
    }
    return r;
}

[[gnu::always_inline]] inline ucs_status_t Worker::recv(void *buffer, size_t length, uint64_t tag,
                                                        uint64_t mask, Endpoint *source,
                                                        const uct_tm_proto_op_params_t *params,
                                                        uint64_t *req) {
    if ((offload_iface_ != nullptr) && (source == nullptr) &&
        ((buffer != nullptr) || (length == 0)) &&
        (matcher_.unexpected_count() == 0) && (matcher_.posted_count() == 0) &&
        (tier2_live_ == 0) && (gathers_open_ == 0)) {
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
    const unsigned n = uct_worker_progress(uworker_);
    if (ucs_likely(busy_.empty() && completed_.empty())) {
        return n;
    }
    return progress_rest(n); /* a tail call: an idle poll saves no register for it */
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
    if (r.done) {
        return;
    }
    if (r.memh != nullptr) {
        /* a send: the receiver is done reading (ACK), or never will (cancel) */
        uct_md_mem_dereg(r.memh_md, r.memh);
        r.memh = nullptr;
    }
    r.done        = true;
    r.info.status = status;
    if ((r.cb != nullptr) || (r.user != nullptr)) {
        /* without either, test() is how the caller learns; a request in the
         * caller's memory is published (and let go) at delivery */
        completed_.push_back(r.self);
    }
}

inline void Worker::accept_message(Request &r, const MsgHeader &h) {
    r.rstate        = RecvState::kArriving;
    r.info.tag      = h.tag;
    r.info.length   = h.length;
    r.info.imm      = h.imm;
    r.info.source   = h.source;
    r.info.ep       = reinterpret_cast<uct_tm_proto_ep_h>(endpoint_of(h.source));
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
        memcpy(r.rbuf + offset, data, n);
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
    if ((r.user != nullptr) && (r.cb == nullptr) && r.done && !completed_.empty() &&
        (completed_.back() == r.self)) {
        completed_.pop_back();
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
    return_credit(endpoint_of(source), length);
}

}  // namespace proto
}  // namespace uct_tm

struct uct_tm_proto_worker : uct_tm::proto::Worker {
    using Worker::Worker;
};

#endif
