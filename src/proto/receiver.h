/*
 * Receiver: the receive side of a worker, its own object (as libfabric's
 * shared receive context, prov/util/src/util_srx.c, is the receive queue of
 * its owner). It holds the receive queues -- TagList (tier 0, the
 * transport's tag list), PostedRecvs (tiers 1 to 3), UnexpectedQueue (what
 * arrived first, probes' claims), TagGathers and Partials (messages whose
 * fragments are still to come) -- and runs what happens in them: posting,
 * matching across the tiers, unexpected messages, multi-receives, buffered
 * receives, probe, claim and discard. recv.cc holds its logic.
 *
 * The worker calls it through the public functions below; it calls the
 * other parts through its owner (Owner, owner.h: a concrete type, no
 * virtual call) for what is the protocol's, not the queues': a matched
 * receive completed (Completions), a rendezvous started (Rendezvous),
 * credit returned and acks sent (ControlChannel), drops refused and
 * counted, buffered messages reported at progress.
 */
#ifndef UCT_TM_PROTO_RECEIVER_H_
#define UCT_TM_PROTO_RECEIVER_H_

#include "common/alloc_status.h"
#include "direct_recv.h"
#include "endpoint.h"
#include "partials.h"
#include "posted_recvs.h"
#include "request.h"
#include "tag_gathers.h"
#include "tag_list.h"
#include "unexpected.h"
#include "wire.h"

#include "match/tag_matcher.h"

#include <ucs/sys/compiler_def.h>
#include <uct/api/uct.h>

#include <cstdint>

namespace uct_tm {
namespace proto {

class Owner;
struct Iface;

class Receiver {
  public:
    Receiver(Owner &owner, RequestPool &reqs) : w_(owner), reqs_(reqs) {}
    Receiver(const Receiver &)            = delete;
    Receiver &operator=(const Receiver &) = delete;

    /* --- the worker's calls: the API's receive operations --- */
    /* Inline: while receives go straight to the transport's tag list
     * (software_idle(), no source filter), one goes there at once;
     * recv_general() takes everything else. */
    ucs_status_t recv(void *buffer, size_t length, uint64_t tag, uint64_t mask, Endpoint *source,
                      const uct_tm_proto_op_params_t *params, uint64_t *req);
    /* With `buffer`: PEEK copies what is here of the message's data. */
    ucs_status_t probe(uint64_t tag, uint64_t mask, Endpoint *source, unsigned flags, void *buffer,
                       size_t length, size_t *copied, uct_tm_proto_info_t *info, uint64_t *msg);
    ucs_status_t recv_claimed(uint64_t msg, void *buffer, size_t length,
                              const uct_tm_proto_op_params_t *params, uint64_t *req);
    ucs_status_t discard_claimed(uint64_t msg);
    /* recvv() (iov.cc): the checks of everything but the buffer, a request
     * for the elements, and its end: `r` takes an earlier unexpected message
     * or is posted (UCS_INPROGRESS and *req, or an error, r freed) */
    bool recv_args_valid(Endpoint *source, const uct_tm_proto_op_params_t *params,
                         const uint64_t *req) const;
    template <bool kOffloaded = false>
    Request     *new_recv(void *buffer, size_t length, const uct_tm_proto_op_params_t *params,
                          uint64_t *handle);
    ucs_status_t match_or_post(Request &r, uint64_t handle, uint64_t tag, uint64_t mask,
                               Endpoint *source, uint64_t *req);
    void         deliver_unexpected(Request &r, uint32_t idx);
    /* iov.cc: the vectored receives */
    ucs_status_t recvv(const uct_tm_proto_iov_t *iov, size_t iovcnt, uint64_t tag, uint64_t mask,
                       Endpoint *source, const uct_tm_proto_op_params_t *params, uint64_t *req);
    ucs_status_t recv_claimedv(uint64_t msg, const uct_tm_proto_iov_t *iov, size_t iovcnt,
                               const uct_tm_proto_op_params_t *params, uint64_t *req);

    /* --- the worker's calls: arrivals and progress --- */
    /* A message (eager, first fragment, rendezvous request) that arrived
     * over `iface`: matched across the tiers, or unexpected. */
    void handle_message(const MsgHeader &hdr, const char *payload, size_t len, const Iface *iface);
    /* Forgets a fragmented message's entry and what it was charged. */
    void erase_partial(uint32_t source, uint32_t msg_id);
    /* Buffered receives: progress reports a held message (hold_buffered). */
    void report_buffered(uint64_t msg);
    /* Multi-receives: Completions::deliver() found child `c` complete; a
     * multi-receive released (or canceled) with every child delivered
     * completes. */
    void child_done(Request &c);
    void multi_maybe_done(Request &m);
    /* Nothing unexpected, no receive held in software, no tagged message
     * arriving in fragments: a new receive may go straight to the tag list.
     * Asks the matcher itself, not through the queues' references to it:
     * two loads fewer on the 8 B receive path. */
    bool software_idle() const {
        return (matcher_.unexpected_count() == 0) && (matcher_.posted_count() == 0) &&
               posted_.directed_empty() && !gathers_.open();
    }

    /* The queues, for the arrival paths, cancellation and endpoint teardown. */
    TagList         &tag_list() { return tag_list_; }
    PostedRecvs     &posted() { return posted_; }
    UnexpectedQueue &unexpected() { return unexpected_; }
    TagGathers      &gathers() { return gathers_; }
    Partials        &partials() { return partial_; }

  private:
    void message_matched(Request &r, const MsgHeader &h, const char *payload, size_t len,
                         Endpoint *ep, Account &acct);
    void message_unexpected(const MsgHeader &h, const char *payload, size_t len, Account &acct);
    bool buffer_unexpected(const MsgHeader &h, const char *payload, size_t len, Account &acct,
                           uint32_t *idx);
    bool enqueue_unexpected(uint32_t idx);
    /* Whether an unexpected eager message of `length` bytes fits in `acct`
     * (the credit granted to its source) and in the worker's bound. */
    bool fits(const Account &acct, uint64_t length, uint32_t source);
    /* Releases what an unexpected message's buffered bytes were charged. */
    void release_charge(Unexpected &u);
    void track_fragments(const MsgHeader &h, size_t first_len, uint64_t req, uint32_t unex,
                         Account &acct);
    void drop_unexpected(uint32_t idx);
    void fill_info(uct_tm_proto_info_t *info, const Unexpected &u) const;
    void unexpected_bytes(int64_t delta);
    void hold_buffered(uint32_t idx);
    /* fi_msg: untagged receives, multi-receives and their children */
    Request *match_untagged(const MsgHeader &h);
    template <bool kUntagged>
    ucs_status_t recv_contiguous(void *buffer, size_t length, uint64_t tag, uint64_t mask,
                                 Endpoint *source, const uct_tm_proto_op_params_t *params,
                                 uint64_t *req);
    ucs_status_t recv_untagged(void *buffer, size_t length, Endpoint *source,
                               const uct_tm_proto_op_params_t *params, uint64_t *req);
    ucs_status_t post_untagged(Request &r, uint64_t handle, const Endpoint *source, uint64_t *req);
    /* A receive directed at a failed endpoint waits for nothing: it is refused
     * with the failure (docs/proto.md "Peer failure"). */
    static bool source_failed(const Endpoint *source) {
        return (source != nullptr) && (source->failure != UCS_OK);
    }
    Request     *new_child(Request &m);
    void         lend(Request &m, Request &c, uint64_t length);
    ucs_status_t recv_offloaded(void *buffer, size_t length, uint64_t tag, uint64_t mask,
                                const uct_tm_proto_op_params_t *params, uint64_t *req);
    /* A receive in the caller's memory without callback goes to the tag list
     * as a DirectRecv; software holds it if the tag list cannot take it. Out
     * of line (docs/perf.md, "Code shape of the hot paths"). */
    [[gnu::noinline]] ucs_status_t recv_direct(void *buffer, size_t length, uint64_t tag,
                                               uint64_t                        mask,
                                               const uct_tm_proto_op_params_t *params,
                                               uint64_t                       *req);
    /* the transport refused recv_direct()'s post: undone, and held in software */
    [[gnu::noinline]] ucs_status_t direct_refused();
    ucs_status_t recv_general(void *buffer, size_t length, uint64_t tag, uint64_t mask,
                              Endpoint *source, const uct_tm_proto_op_params_t *params,
                              uint64_t *req);
    ucs_status_t post_recv(Request &r);
    /* iov.cc */
    template <typename Contiguous, typename Valid, typename Take>
    ucs_status_t recv_vector(const uct_tm_proto_iov_t *iov, size_t iovcnt,
                             const uct_tm_proto_op_params_t *params, uint64_t *req,
                             Contiguous &&contiguous, Valid &&valid, Take &&take);
    Request     *new_iov_recv(const uct_tm_proto_iov_t *iov, size_t iovcnt, size_t total,
                              const uct_tm_proto_op_params_t *params, uint64_t *handle);
    /* recv_general()'s end, inline (its instructions as before the split);
     * match_or_post() is recvv()'s */
    ucs_status_t match_or_post_inline(Request &r, uint64_t handle, uint64_t tag, uint64_t mask,
                                      Endpoint *source, uint64_t *req);

    Owner            &w_; /* the owner */
    RequestPool      &reqs_;
    match::TagMatcher matcher_; /* tier 1 receives and unexpected messages */
    PostedRecvs       posted_{matcher_, reqs_};
    UnexpectedQueue   unexpected_{matcher_};
    TagList           tag_list_;
    TagGathers        gathers_;
    Partials          partial_; /* fragments still to come */
    /* recv_direct()'s arguments while its post runs (the rest are in the
     * DirectRecv) */
    struct DirectPost {
        const uct_tm_proto_op_params_t *params = nullptr;
        uint64_t                       *req    = nullptr;
    };
    DirectPost direct_post_;
};

/* A receive request for `buffer`; null when out of memory. kOffloaded: for
 * recv_offloaded(), whose request stays on the offloaded eager path or is
 * marked cold_dirty when it leaves it (RequestPool::allocate_offloaded). */
template <bool kOffloaded>
[[gnu::always_inline]] inline Request *Receiver::new_recv(void *buffer, size_t length,
                                                          const uct_tm_proto_op_params_t *params,
                                                          uint64_t                       *handle) {
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

[[gnu::always_inline]] inline ucs_status_t Receiver::recv(void *buffer, size_t length, uint64_t tag,
                                                          uint64_t mask, Endpoint *source,
                                                          const uct_tm_proto_op_params_t *params,
                                                          uint64_t                       *req) {
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

}  // namespace proto
}  // namespace uct_tm

#endif
