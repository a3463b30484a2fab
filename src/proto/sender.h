/*
 * Sender: the send side of a worker, its own object. It takes a message
 * from the API: the common eager one leaves at once (send_eager_now); any
 * other is checked, planned once (SendPlan: eager or rendezvous, and the
 * paths it may take) and tried on one path after another -- the endpoint's
 * batch, one transport call, a request -- its eager credit held by a
 * CreditHold until a path commits it. Its logic is in send.cc.
 *
 * It owns the send requests' protocol too: eager (one message or
 * fragments), rendezvous (RTS, then the data a receiver asks for), sync,
 * delivery and transmission completion, the endpoint's batch of MORE
 * messages, and the transport calls that carry them. The worker calls the
 * public functions below (the API, and progress, replies and rendezvous
 * carrying a request on); the Sender reaches the other parts through its
 * owner (Owner, owner.h: a concrete type, no virtual call) to complete
 * requests, send control messages, pack a rendezvous offer and queue an
 * endpoint for progress.
 */
#ifndef UCT_TM_PROTO_SENDER_H_
#define UCT_TM_PROTO_SENDER_H_

#include "endpoint.h"
#include "iov.h"
#include "request.h"
#include "wire.h"

#include <ucs/sys/compiler_def.h>
#include <uct/api/uct.h>

#include <cstddef>
#include <cstdint>
#include <vector>

namespace uct_tm {
namespace proto {

class Owner;

class Sender {
  public:
    explicit Sender(Owner &owner) : w_(owner) {}
    Sender(const Sender &)            = delete;
    Sender &operator=(const Sender &) = delete;

    /* Inline: a message the endpoint's eager_now_limit admits leaves at
     * once (send_eager_now); send_general() takes everything else. `ep` is
     * valid (api.cc). */
    ucs_status_t send(Endpoint *ep, const void *buffer, size_t length, uint64_t tag,
                      const uct_tm_proto_op_params_t *params, uint64_t *req);
    /* send()'s other messages: send_general() of `ep`'s worker. Static: the C
     * entry then computes no `this` on the way to send_eager_now()
     * (docs/perf.md, "Code shape of the hot paths"). */
    [[gnu::noinline]] static ucs_status_t send_other(Endpoint *ep, const void *buffer,
                                                     size_t length, uint64_t tag,
                                                     const uct_tm_proto_op_params_t *params,
                                                     uint64_t                       *req);
    /* `vector`: a vectored send's elements (buffer null, length their total) */
    ucs_status_t send_general(Endpoint *ep, const void *buffer, size_t length, uint64_t tag,
                              const uct_tm_proto_op_params_t *params, uint64_t *req,
                              const SendVector *vector = nullptr);
    /* iov.cc: a vectored send */
    ucs_status_t sendv(Endpoint *ep, const uct_tm_proto_iov_t *iov, size_t iovcnt, uint64_t tag,
                       const uct_tm_proto_op_params_t *params, uint64_t *req);

    /* --- the worker's calls: the send requests it carries on (progress,
     * replies, rendezvous) and the transport's active messages --- */
    ucs_status_t start_send(Request &r); /* UCS_OK: fully handed over; NO_RESOURCE: queue */
    /* The endpoint's batch of MORE messages out, if any. */
    ucs_status_t flush_batch(Endpoint *ep);
    /* A fenced send that has not started waits for every send started before it. */
    bool fence_holds(const Request &r);
    void left_queue(Request &r);
    /* Pushes the rendezvous data a receiver asked for, ahead of the queued sends. */
    void push_ahead(Request &r);
    /* TRANSMIT_COMPLETE: false while the endpoint still has anything outstanding. */
    bool        flush_done(Request &r);
    const char *send_data(const Request &r) const {
        return r.bounce.empty() ? r.sbuf : r.bounce.data();
    }
    ssize_t am_send(Endpoint *ep, const void *hdr, size_t hdr_len, const void *data, size_t len);

  private:
    ucs_status_t wait_eager_zcopy();
    /* Whether send `r` goes through its transport's tag API (untagged
     * messages never do). */
    static bool on_tag_path(const Request &r) {
        return r.ep->tag_path && !(r.wire_flags & kFlagUntagged);
    }
    MsgHeader eager_header(uint64_t tag, bool has_data, uint64_t rdata, size_t length) const {
        MsgHeader h = {};
        h.kind      = Kind::kEager;
        h.flags     = has_data ? kFlagData : 0;
        h.source    = w_id();
        h.tag       = tag;
        h.data      = rdata;
        h.length    = length;
        return h;
    }
    template <bool kUntagged>
    ssize_t am_eager(Endpoint *ep, uint64_t tag, bool has_data, uint64_t rdata, const void *buffer,
                     size_t length);
    /* iov.cc: send_single() gathering straight from `nonempty` nonempty
     * elements (remote data narrow over a tag list: sendv() checks) */
    ssize_t send_single_iov(Endpoint *ep, uint64_t tag, bool has_data, uint64_t rdata,
                            const uct_tm_proto_iov_t *iov, size_t iovcnt, size_t nonempty,
                            size_t total);
    ssize_t send_single(Endpoint *ep, uint64_t tag, bool has_data, uint64_t rdata, const void *data,
                        size_t len);
    void    handed_over(Request &r);
    bool batch_add(Endpoint *ep, uint64_t tag, uint8_t wire_flags, uint64_t rdata, const void *data,
                   size_t len, const SendVector *vector);
    bool sends_outstanding(Endpoint *ep);
    static constexpr size_t kStartedPrune = 64;
    MsgHeader               message_header(const Request &r, Kind kind) const;
    ucs_status_t            send_eager(Request &r);
    ucs_status_t            send_rts(Request &r);
    ucs_status_t            push_data(Request &r);
    ssize_t am_short(Endpoint *ep, uint64_t tag, uint32_t word, uint32_t rdata, const void *data,
                     size_t len, uint8_t am_id = kAmShortId);
    ssize_t tag_eager(Endpoint *ep, uint64_t tag, uint64_t imm, const void *data, size_t len);
    /* A tagged eager message's imm: our source word, then narrow remote data. */
    uint64_t eager_imm(bool has_data, uint64_t rdata) const {
        return (uint64_t{source_word(w_id(), has_data)} << 32) | static_cast<uint32_t>(rdata);
    }
    ssize_t tag_eager_zcopy(Endpoint *ep, uint64_t tag, uint64_t imm, const void *data, size_t len);
    /* am_send() of send bytes [offset, offset + len) of `r`: from its buffer,
     * its bounce copy or its elements */
    ssize_t  am_send_part(const Request &r, const void *hdr, size_t hdr_len, size_t offset,
                          size_t len);
    uint32_t w_id() const; /* our worker id (inline, owner.h) */

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

    /* NO_COMPLETION too: a message that leaves at once has nothing to report */
    static constexpr unsigned kEagerNowDataFlags = UCT_TM_PROTO_SEND_INJECT |
                                                   UCT_TM_PROTO_SEND_REMOTE_DATA |
                                                   UCT_TM_PROTO_OP_NO_COMPLETION;

    /* static: the C entry forwards to it directly (docs/perf.md,
     * "Code shape of the hot paths") */
    static ucs_status_t            send_eager_now(Endpoint *ep, const void *buffer, size_t length,
                                                  uint64_t tag, const uct_tm_proto_op_params_t *params,
                                                  uint64_t *req);
    /* The same for a send whose flags are INJECT and REMOTE_DATA (narrow
     * data) at most: fi_tinjectdata's every message. */
    [[gnu::noinline]] static ucs_status_t
    send_eager_now_data(Endpoint *ep, const void *buffer, size_t length, uint64_t tag,
                        const uct_tm_proto_op_params_t *params, uint64_t *req);
    template <bool kData>
    static ucs_status_t eager_now(Endpoint *ep, const void *buffer, size_t length, uint64_t tag,
                                  uint64_t rdata, const uct_tm_proto_op_params_t *params,
                                  uint64_t *req);
    [[gnu::noinline]] ucs_status_t eager_now_refused(ucs_status_t status);
    [[gnu::noinline]] ucs_status_t send_eager_now_other(Endpoint *ep, const void *buffer,
                                                        size_t length, uint64_t tag, bool has_data,
                                                        uint64_t                        rdata,
                                                        const uct_tm_proto_op_params_t *params,
                                                        uint64_t                       *req);
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
    ucs_status_t send_request(Endpoint *ep, const SendPlan &p, bool batch_pending,
                              CreditHold &credit, uint64_t *req);
    Request     *new_send(Endpoint *ep, const SendPlan &p, uint64_t *handle);
    ucs_status_t queue_send(Request &r, const SendPlan &p);
    /* iov.cc: a vectored send that did not go at once: in place or staged */
    ucs_status_t sendv_general(Endpoint *ep, const uct_tm_proto_iov_t *iov, size_t iovcnt,
                               const IovShape &shape, uint64_t tag,
                               const uct_tm_proto_op_params_t *params, uint64_t *req);
    ucs_status_t send_staged(Endpoint *ep, const uct_tm_proto_iov_t *iov, size_t iovcnt,
                             size_t total, uint64_t tag, uct_tm_proto_op_params_t *staged,
                             uint64_t *req);

    Owner &w_; /* the owner */
    /* send_eager_now()'s arguments while its transport call runs (the rest
     * are eager_iov_'s buffer and length) */
    struct EagerNow {
        Endpoint                       *ep     = nullptr;
        uint64_t                        tag    = 0;
        const uct_tm_proto_op_params_t *params = nullptr;
        uint64_t                       *req    = nullptr;
    };
    EagerNow eager_now_;
    /* tag_eager_zcopy()'s iov and completion, set up once: an eager send is
     * complete before the next one starts, so one of each is enough */
    uct_iov_t        eager_iov_  = {nullptr, 0, UCT_MEM_HANDLE_NULL, 0, 1};
    uct_completion_t eager_comp_ = {[](uct_completion_t *) {}, 1, UCS_OK};
    /* sendv()'s gathered message (capacity kept up to kStageKeep bytes) */
    std::vector<char>       stage_;
    static constexpr size_t kStageKeep = 64 << 10;
};

/* Inline into uct_tm_proto_send(): the endpoint's limit (set once when it is
 * created) already says whether the message is eager and goes in one
 * transport call; what is left per message is the credit compare and an
 * empty queue. */
[[gnu::always_inline]] inline ucs_status_t Sender::send(Endpoint *ep, const void *buffer,
                                                        size_t length, uint64_t tag,
                                                        const uct_tm_proto_op_params_t *params,
                                                        uint64_t                       *req) {
    /* a message that leaves at once makes no request, with USER_REQUEST too */
    if ((length < ep->eager_now_limit) && (length <= ep->credits) &&
        ((buffer != nullptr) || (length == 0)) && ep->sends.empty()) {
        if ((params == nullptr) || (params->flags == 0)) {
            if (req != nullptr) {
                return send_eager_now(ep, buffer, length, tag, params, req);
            }
        } else if (params->flags == UCT_TM_PROTO_OP_USER_REQUEST) {
            if (user_memory_valid(params)) { /* req may be NULL then */
                return send_eager_now(ep, buffer, length, tag, params, req);
            }
        } else if (((params->flags & ~kEagerNowDataFlags) == 0) &&
                   ((req != nullptr) || (params->flags & UCT_TM_PROTO_OP_NO_COMPLETION)) &&
                   (!(params->flags & UCT_TM_PROTO_SEND_REMOTE_DATA) ||
                    data_is_narrow(params->data))) {
            return send_eager_now_data(ep, buffer, length, tag, params, req);
        }
    }
    return send_other(ep, buffer, length, tag, params, req);
}

}  // namespace proto
}  // namespace uct_tm

#endif
