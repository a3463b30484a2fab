/*
 * uct_tm_proto: a thin tagged-messaging protocol layer over UCT ifaces.
 *
 * A worker opens one or more UCT ifaces (component "tm" transports such as
 * tm_sm, or UCX's own posix and tcp), endpoints connect it to peer workers,
 * and tagged sends and receives run over them: eager or rendezvous picked per
 * message, tag matching offloaded to the transport when it has a tag list and
 * done in software otherwise, with MPI ordering either way. The contract, wire
 * format and configuration are in docs/proto.md.
 *
 * Threading: a worker and everything created from it is used by one thread at
 * a time. Callbacks run only inside uct_tm_proto_worker_progress().
 *
 * Requests: an operation that does not finish at once returns UCS_INPROGRESS
 * and a request handle. The request completes exactly once (its callback runs,
 * if one was given, and uct_tm_proto_request_test() stops returning
 * UCS_INPROGRESS); the caller then releases it with
 * uct_tm_proto_request_release() (a request released after request_test()
 * saw it complete but before progress ran its callback gets no callback).
 * Handles are checked: a stale or foreign
 * handle returns UCS_ERR_INVALID_PARAM, never undefined behaviour.
 */
#ifndef UCT_TM_PROTO_H_
#define UCT_TM_PROTO_H_

#include <ucs/type/status.h>

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef uint64_t                     uct_tm_proto_tag_t;
typedef struct uct_tm_proto_worker  *uct_tm_proto_worker_h;
typedef struct uct_tm_proto_ep      *uct_tm_proto_ep_h;
/* An operation in progress (0: none). */
typedef uint64_t                     uct_tm_proto_request_t;
/* An unexpected message held by a PEEK|CLAIM probe (0: none). */
typedef uint64_t                     uct_tm_proto_msg_t;
/* A memory region mapped by uct_tm_proto_mem_map() (0: none). */
typedef uint64_t                     uct_tm_proto_mem_h;

enum uct_tm_proto_info_flags {
    /* info.data is the sender's remote data (it sent UCT_TM_PROTO_SEND_REMOTE_DATA) */
    UCT_TM_PROTO_INFO_REMOTE_DATA = 1u << 0,
    /* the message is untagged (UCT_TM_PROTO_OP_UNTAGGED; info.tag is 0) */
    UCT_TM_PROTO_INFO_UNTAGGED    = 1u << 1,
    /* a multi-receive's last completion (FI_MULTI_RECV): the buffer is the
     * caller's again; info.length is the bytes its messages took */
    UCT_TM_PROTO_INFO_MULTI_RECV  = 1u << 2
};

/* What a completion (or a probe) reports. */
typedef struct uct_tm_proto_info {
    ucs_status_t       status; /* UCS_OK, UCS_ERR_MESSAGE_TRUNCATED, UCS_ERR_CANCELED, ... */
    uct_tm_proto_tag_t tag;    /* receives and probes: the sender's tag */
    size_t             length; /* receives and probes: the sender's full length */
    uint64_t           data;   /* remote data (FI_REMOTE_CQ_DATA), with UCT_TM_PROTO_INFO_REMOTE_DATA */
    uint32_t           source; /* the sending worker's id */
    unsigned           flags;  /* uct_tm_proto_info_flags */
    uct_tm_proto_ep_h  ep;     /* this worker's endpoint to the sender, or NULL */
    /* multi-receives (UCT_TM_PROTO_RECV_MULTI): where this message's bytes
     * start in the receive's buffer (the buffer itself in the last
     * completion); NULL otherwise. Appended last. */
    void              *buffer;
} uct_tm_proto_info_t;

typedef void (*uct_tm_proto_cb_t)(void *arg, uct_tm_proto_request_t req,
                                  const uct_tm_proto_info_t *info);

/* ---- worker ---------------------------------------------------------------- */

enum uct_tm_proto_worker_field {
    UCT_TM_PROTO_WORKER_FIELD_TRANSPORTS     = 1u << 0,
    UCT_TM_PROTO_WORKER_FIELD_ID             = 1u << 1,
    UCT_TM_PROTO_WORKER_FIELD_RNDV_THRESH    = 1u << 2,
    UCT_TM_PROTO_WORKER_FIELD_UNEXPECTED_CAP = 1u << 3,
    UCT_TM_PROTO_WORKER_FIELD_MAX_PEERS      = 1u << 4,
    UCT_TM_PROTO_WORKER_FIELD_OFFLOAD        = 1u << 5,
    UCT_TM_PROTO_WORKER_FIELD_ERR_HANDLER    = 1u << 6, /* err_handler and err_handler_arg */
    UCT_TM_PROTO_WORKER_FIELD_BUFFERED       = 1u << 7, /* buffered_cb and buffered_arg */
    UCT_TM_PROTO_WORKER_FIELD_MIN_MULTI_RECV = 1u << 8  /* min_multi_recv */
};

/* Buffered receives (FI_BUFFERED_RECV): with UCT_TM_PROTO_WORKER_FIELD_BUFFERED,
 * a message that no posted receive matched is not kept for later receives:
 * it is handed to this callback, once, inside uct_tm_proto_worker_progress(),
 * when it has arrived whole -- `data` its bytes in the layer's buffer
 * (`data_length` == info->length; NULL if 0), or NULL and 0 for a rendezvous
 * request (over a tag list sync messages are rendezvous requests too),
 * whose data waits at the sender. `msg` is a claimed message: take it with
 * uct_tm_proto_recv_claimed() (now or later, from anywhere) or drop it with
 * uct_tm_proto_discard_claimed(); `data` stays valid until then. Held
 * messages count against their sender's eager credit until taken. */
typedef void (*uct_tm_proto_buffered_cb_t)(void *arg, uint64_t msg,
                                           const uct_tm_proto_info_t *info, const void *data,
                                           size_t data_length);

/* Called once, inside uct_tm_proto_worker_progress(), when the transport reports that the peer of
 * `ep` failed (docs/proto.md, "Peer failure"): the sends waiting on it have failed with `status`,
 * later sends on it return `status`. Destroy the endpoint after progress returns, not here. */
typedef void (*uct_tm_proto_ep_err_cb_t)(void *arg, uct_tm_proto_ep_h ep, ucs_status_t status);

/* Parameters override the UCX_TM_PROTO_* environment (docs/proto.md). */
typedef struct uct_tm_proto_worker_params {
    uint64_t    field_mask;     /* uct_tm_proto_worker_field bits of the fields set */
    /* Comma-separated "tl[:device]" list, e.g. "tm_sm", "posix", "tcp:lo". */
    const char *transports;
    uint32_t    id;             /* this worker's id as peers see it (1 .. 2^31 - 1) */
    size_t      rndv_thresh;    /* messages of at least this many bytes use rendezvous */
    size_t      unexpected_cap; /* bytes of eager data buffered for unmatched messages */
    unsigned    max_peers;      /* peers sharing unexpected_cap (each gets cap / max_peers) */
    int         offload;        /* post receives to the transport's tag list when it has one */
    uct_tm_proto_ep_err_cb_t err_handler; /* a peer failed (null: none) */
    void                    *err_handler_arg;
    uct_tm_proto_buffered_cb_t buffered_cb; /* unmatched messages (not null) */
    void                      *buffered_arg;
    /* FI_OPT_MIN_MULTI_RECV: a multi-receive is released once fewer bytes
     * than this are left in its buffer (at least 1) */
    size_t                     min_multi_recv;
} uct_tm_proto_worker_params_t;

ucs_status_t uct_tm_proto_worker_create(const uct_tm_proto_worker_params_t *params,
                                        uct_tm_proto_worker_h *worker_p);
/* Outstanding requests are dropped without callbacks (those in the caller's
 * memory complete with UCS_ERR_CANCELED); endpoints are destroyed. */
void         uct_tm_proto_worker_destroy(uct_tm_proto_worker_h worker);
/* Drives every iface and delivers completions; returns the events handled. */
unsigned     uct_tm_proto_worker_progress(uct_tm_proto_worker_h worker);
/* The address peers pass to uct_tm_proto_ep_create(). *length in: room at
 * buffer, out: bytes needed (UCS_ERR_BUFFER_TOO_SMALL if it did not fit). */
ucs_status_t uct_tm_proto_worker_address(uct_tm_proto_worker_h worker, void *buffer,
                                         size_t *length);
/* The same address in a compact form, which uct_tm_proto_ep_create() takes
 * too: for names of bounded size (libfabric's FI_NAME_MAX, 64 bytes; tm_sm's
 * is 30-40 bytes here). UCS_ERR_UNSUPPORTED if a transport's address does
 * not fit the form (over 255 bytes). */
ucs_status_t uct_tm_proto_worker_address_compact(uct_tm_proto_worker_h worker, void *buffer,
                                                 size_t *length);
uint32_t     uct_tm_proto_worker_id(uct_tm_proto_worker_h worker);
/* FI_OPT_MIN_MULTI_RECV after creation (fi_setopt comes after fi_endpoint):
 * from the next message a multi-receive takes on, posted ones included, it
 * is released once fewer than `bytes` (at least 1; 0: UCS_ERR_INVALID_PARAM,
 * nothing changed) are left. */
ucs_status_t uct_tm_proto_worker_set_min_multi_recv(uct_tm_proto_worker_h worker, size_t bytes);
/* The current value (FIELD_MIN_MULTI_RECV, the environment, or the setter);
 * 0 for a null worker. */
size_t uct_tm_proto_worker_min_multi_recv(uct_tm_proto_worker_h worker);

/* Worker counters (diagnostics and tests). */
typedef struct uct_tm_proto_stats {
    uint64_t eager_sends;       /* messages sent eagerly (any fragmenting) */
    uint64_t rndv_sends;        /* messages sent by rendezvous */
    uint64_t rndv_gets;         /* rendezvous messages received by reading the sender's memory */
    uint64_t offloaded_recvs;   /* receives posted to a transport's tag list */
    uint64_t software_recvs;    /* receives queued in software */
    uint64_t expected;          /* arrivals that matched a posted receive */
    uint64_t unexpected;        /* arrivals queued as unexpected */
    uint64_t backpressure;      /* sends pushed to rendezvous for lack of eager credit */
    size_t   unexpected_bytes;  /* eager bytes buffered now */
    size_t   unexpected_peak;   /* their maximum so far */
    size_t   requests;          /* requests live now: in progress or not yet released */
    uint64_t batched_sends;     /* MORE messages sent in batches */
    /* memory registrations the layer made (uct_md_mem_reg calls: mem_map,
     * and per rendezvous for buffers without a mapped region) */
    uint64_t registrations;
    uint64_t rcache_hits;       /* rendezvous buffers the registration cache already held */
    /* rendezvous messages received by having the sender write them (a
     * vectored send, which offers no read, into one receive buffer) */
    uint64_t rndv_puts;
} uct_tm_proto_stats_t;
void uct_tm_proto_worker_stats(uct_tm_proto_worker_h worker, uct_tm_proto_stats_t *stats);

/* ---- endpoints ------------------------------------------------------------- */

/* Connects to the worker whose address is given. Replies (rendezvous, sync
 * acknowledgements, credits) travel back over the peer's endpoint to this
 * worker: two workers that talk create endpoints to each other.
 * UCS_OK: the endpoint is ready. UCS_INPROGRESS: *ep_p is created over a
 * transport that connects endpoint to endpoint (tm_rc); pass its
 * uct_tm_proto_ep_address() to the peer, which gives it to
 * uct_tm_proto_ep_connect() on its endpoint to this worker, and connect this
 * one to the peer's likewise (docs/proto.md "Wireup"); sends return
 * UCS_ERR_NOT_CONNECTED until then. Any other status: no endpoint. */
ucs_status_t uct_tm_proto_ep_create(uct_tm_proto_worker_h worker, const void *address,
                                    size_t length, uct_tm_proto_ep_h *ep_p);
/* The address the peer's endpoint to this worker connects to (any
 * endpoint: over a connect-to-iface transport it carries no transport
 * address, and connecting to it only checks it). *length as
 * uct_tm_proto_worker_address(). */
ucs_status_t uct_tm_proto_ep_address(uct_tm_proto_ep_h ep, void *buffer, size_t *length);
/* Connects `ep` to the peer endpoint whose uct_tm_proto_ep_address() is
 * given; the address must come from the endpoint of ep's peer to ep's
 * worker, over the same transport (else UCS_ERR_INVALID_PARAM, nothing done).
 * UCS_OK also when `ep` is connected to that endpoint already;
 * UCS_ERR_ALREADY_EXISTS when it is connected to another one. Both sides
 * connect before either sends: a message to an endpoint whose peer has not
 * connected yet waits for the transport's retries (tm_rc: UCX_TM_RC_TIMEOUT,
 * UCX_TM_RC_RETRY_COUNT), and fails the connection after them. */
ucs_status_t uct_tm_proto_ep_connect(uct_tm_proto_ep_h ep, const void *address, size_t length);
/* Requests still using the endpoint are completed with UCS_ERR_CANCELED. */
void         uct_tm_proto_ep_destroy(uct_tm_proto_ep_h ep);

/* ---- operations -------------------------------------------------------------- */

enum uct_tm_proto_op_flags {
    /* send: the buffer may be reused as soon as the call returns */
    UCT_TM_PROTO_SEND_INJECT = 1u << 0,
    /* send: complete only once the message matched a receive or was discarded
     * (FI_MATCH_COMPLETE) */
    UCT_TM_PROTO_SEND_SYNC   = 1u << 1,
    /* send, recv, recv_claimed: build the request in the caller's memory
     * `request` (see "Requests in the caller's memory" below) */
    UCT_TM_PROTO_OP_USER_REQUEST = 1u << 2,
    /* send: deliver op_params.data with the message (FI_REMOTE_CQ_DATA); the
     * receiver's info has UCT_TM_PROTO_INFO_REMOTE_DATA and the 64 bits */
    UCT_TM_PROTO_SEND_REMOTE_DATA = 1u << 3,
    /* send: complete once the transport reports the message left for the
     * peer (a flush of the endpoint: FI_TRANSMIT_COMPLETE) */
    UCT_TM_PROTO_SEND_TRANSMIT_COMPLETE = 1u << 4,
    /* send: complete once the receiver has the message -- placed in a
     * receive or buffered as unexpected, or, for a rendezvous, its data
     * transferred (FI_DELIVERY_COMPLETE). SYNC implies it. */
    UCT_TM_PROTO_SEND_DELIVERY_COMPLETE = 1u << 5,
    /* send: start only once every earlier send on the endpoint completed
     * (FI_FENCE) */
    UCT_TM_PROTO_SEND_FENCE = 1u << 6,
    /* send: no completion unless it fails (selective completion, FI_COMPLETION
     * not set): UCS_OK once accepted, no request; the library releases it; the
     * callback, if any, runs only with an error (req 0). Not with
     * USER_REQUEST. The buffer is the library's until the send completes:
     * combine with INJECT, or learn it from a later FENCE send's completion. */
    UCT_TM_PROTO_OP_NO_COMPLETION = 1u << 7,
    /* send: more sends to this endpoint follow (FI_MORE): a small eager
     * message may wait, copied, to leave with the next ones in one transport
     * message -- until a send without MORE, the batch is full, or the next
     * progress. It completes at once (UCS_OK). A hint: tagged sends over a
     * transport's tag list, and other protocols, go as without it
     * (untagged sends never use a tag list: they batch on every transport). */
    UCT_TM_PROTO_SEND_MORE = 1u << 8,
    /* send, recv, recv_claimed: the buffer lies in the region params->memh
     * (uct_tm_proto_mem_map): a rendezvous uses its registration instead of
     * registering the buffer (libfabric's `desc`). The vector calls accept
     * and ignore it (they stage or have the data pushed). */
    UCT_TM_PROTO_OP_MEMH         = 1u << 9,
    /* send, sendv, recv, recvv (fi_msg: fi_send, fi_recv): an untagged
     * message; `tag` and `mask` are ignored. Untagged receives take only
     * untagged messages, tagged receives only tagged ones; untagged receives
     * take them in the order the receives were posted (a `source` filter
     * applies, FI_DIRECTED_RECV), never through a transport's tag list.
     * Probes see tagged messages only; buffered receives (FIELD_BUFFERED)
     * report both kinds, untagged ones with UCT_TM_PROTO_INFO_UNTAGGED; the
     * statistics count both kinds. */
    UCT_TM_PROTO_OP_UNTAGGED     = 1u << 10,
    /* recv with UNTAGGED (FI_MULTI_RECV): the buffer takes message after
     * message, each at the first byte the earlier ones left free, until
     * fewer than the worker's min_multi_recv bytes are left (a buffer
     * shorter than that from the start takes one message). Space is taken
     * in matching order; the callback (required; not with USER_REQUEST, not
     * with recvv) runs once per message as each completes -- a rendezvous
     * may complete after an eager message placed behind it -- with req the
     * receive's, info->buffer where the message's bytes start, info->length
     * the sender's length (UCS_ERR_MESSAGE_TRUNCATED: the rest of the
     * buffer was shorter); and once more after the last of them, with
     * UCT_TM_PROTO_INFO_UNTAGGED | UCT_TM_PROTO_INFO_MULTI_RECV: status
     * UCS_OK (or UCS_ERR_CANCELED after a cancel), info->buffer the buffer,
     * info->length the bytes taken. Then the request is complete. */
    UCT_TM_PROTO_RECV_MULTI      = 1u << 11
};

typedef struct uct_tm_proto_op_params {
    unsigned          flags; /* uct_tm_proto_op_flags */
    uint64_t          data;  /* send with UCT_TM_PROTO_SEND_REMOTE_DATA: the remote data */
    uct_tm_proto_cb_t cb;    /* optional completion callback */
    void             *arg;   /* its first argument */
    /* With UCT_TM_PROTO_OP_USER_REQUEST only (appended last: callers that
     * never set the flag need not set it): UCT_TM_PROTO_REQUEST_SIZE bytes
     * aligned to UCT_TM_PROTO_REQUEST_ALIGN. */
    void             *request;
    /* With UCT_TM_PROTO_OP_MEMH only (appended): the mapped region holding
     * [buffer, buffer + length); not mapped, or not holding it:
     * UCS_ERR_INVALID_PARAM. */
    uct_tm_proto_mem_h memh;
} uct_tm_proto_op_params_t;

/*
 * Requests in the caller's memory (as UCP's UCP_OP_ATTR_FIELD_REQUEST).
 *
 * With UCT_TM_PROTO_OP_USER_REQUEST an operation that returns UCS_INPROGRESS
 * is tied to params->request: no handle is made (*req, which may then be
 * NULL, is set to 0), nothing is released; a receive without callback that
 * the transport's tag list takes keeps its whole state there (docs/proto.md
 * "Requests in the caller's memory"). The memory starts with
 * uct_tm_proto_request_status_t; its status word reads UCS_INPROGRESS until
 * the request completed, then the final status, with info filled. It changes
 * only inside calls into the worker: uct_tm_proto_worker_progress() (after the
 * callback, if one was given, which gets req = 0), a send that had to progress
 * the transport to go out (a request without callback may complete there), or
 * uct_tm_proto_worker_destroy(); once it left
 * UCS_INPROGRESS the library no longer touches the memory and the caller may
 * reuse it. After a send that returned UCS_OK, or any error, the library
 * holds nothing there (the contents are unspecified: do not test them). A NULL or misaligned `request` with the flag: UCS_ERR_INVALID_PARAM.
 * Destroying the worker or the endpoint a request uses completes it with
 * UCS_ERR_CANCELED (the endpoint's at the next progress, the worker's at once).
 */
#define UCT_TM_PROTO_REQUEST_SIZE  512
#define UCT_TM_PROTO_REQUEST_ALIGN 8

typedef struct uct_tm_proto_request_status {
    volatile ucs_status_t status; /* UCS_INPROGRESS, then the final status */
    uct_tm_proto_info_t   info;   /* valid once status is final */
} uct_tm_proto_request_status_t;

/* UCS_INPROGRESS, or the final status with *info filled (info may be NULL). */
static inline ucs_status_t uct_tm_proto_request_user_test(const void *request,
                                                          uct_tm_proto_info_t *info) {
    const uct_tm_proto_request_status_t *r = (const uct_tm_proto_request_status_t *)request;
    const ucs_status_t status = r->status;
    if ((status != UCS_INPROGRESS) && (info != NULL)) {
        *info = r->info;
    }
    return status;
}

/* Sends `length` bytes tagged `tag`. UCS_OK: done, the buffer is free and no
 * request was made; UCS_INPROGRESS: *req completes later (the buffer is in
 * use until then, unless INJECT); an error: nothing was sent. params may be
 * NULL. */
ucs_status_t uct_tm_proto_send(uct_tm_proto_ep_h ep, const void *buffer, size_t length,
                               uct_tm_proto_tag_t tag, const uct_tm_proto_op_params_t *params,
                               uct_tm_proto_request_t *req);

/* Posts a receive for a message whose tag matches (tag, mask) -- (msg_tag &
 * mask) == (tag & mask) -- and, if `source` is not NULL, sent by that
 * endpoint's peer. Always returns UCS_INPROGRESS and a request (or an error).
 * The earliest-posted matching receive takes each message. A longer message
 * fills the buffer and completes with UCS_ERR_MESSAGE_TRUNCATED and the
 * sender's length. A receive from `source` completes with its failure when
 * the endpoint fails (the error handler's status); posted at an endpoint
 * that failed, it returns that status, nothing posted, unless a message
 * that arrived before matches. */
ucs_status_t uct_tm_proto_recv(uct_tm_proto_worker_h worker, void *buffer, size_t length,
                               uct_tm_proto_tag_t tag, uct_tm_proto_tag_t mask,
                               uct_tm_proto_ep_h source, const uct_tm_proto_op_params_t *params,
                               uct_tm_proto_request_t *req);

/* ---- vectors (fi_tagged tsendv / trecvv) ---------------------------------- */

/* One element of a message's data, as libfabric's struct iovec: `length`
 * bytes at `buffer` (which may be NULL when length is 0). A message is the
 * elements' bytes in order. */
typedef struct uct_tm_proto_iov {
    void  *buffer;
    size_t length;
} uct_tm_proto_iov_t;

/* The most elements one vectored operation takes. */
#define UCT_TM_PROTO_IOV_MAX 64

/* uct_tm_proto_send() of the elements' bytes, gathered. iovcnt 0 sends an
 * empty message (iov may then be NULL). UCS_ERR_INVALID_PARAM, nothing sent:
 * iov NULL with iovcnt > 0, iovcnt > UCT_TM_PROTO_IOV_MAX, an element with a
 * NULL buffer and a nonzero length, or a total length that overflows size_t.
 * The elements array may be reused when the call returns; the buffers are
 * in use as uct_tm_proto_send()'s buffer is (docs/proto.md "Vectors"). */
ucs_status_t uct_tm_proto_sendv(uct_tm_proto_ep_h ep, const uct_tm_proto_iov_t *iov,
                                size_t iovcnt, uct_tm_proto_tag_t tag,
                                const uct_tm_proto_op_params_t *params,
                                uct_tm_proto_request_t *req);

/* uct_tm_proto_recv() into the elements in order (the same checks as
 * uct_tm_proto_sendv()). A longer message fills the elements and completes
 * with UCS_ERR_MESSAGE_TRUNCATED and the sender's length; nothing is written
 * past any element. The elements array may be reused when the call returns;
 * the buffers are in use until the request completes. */
ucs_status_t uct_tm_proto_recvv(uct_tm_proto_worker_h worker, const uct_tm_proto_iov_t *iov,
                                size_t iovcnt, uct_tm_proto_tag_t tag, uct_tm_proto_tag_t mask,
                                uct_tm_proto_ep_h source, const uct_tm_proto_op_params_t *params,
                                uct_tm_proto_request_t *req);

enum uct_tm_proto_probe_flags {
    UCT_TM_PROTO_PROBE_PEEK    = 1u << 0, /* report the earliest matching unexpected message */
    UCT_TM_PROTO_PROBE_CLAIM   = 1u << 1, /* with PEEK: hold it for uct_tm_proto_recv_claimed() */
    UCT_TM_PROTO_PROBE_DISCARD = 1u << 2  /* with PEEK: drop it (the sender completes normally) */
};

/* fi_tagged(3) FI_PEEK / FI_CLAIM / FI_DISCARD on the unexpected messages.
 * UCS_OK: *info describes the message (and *msg holds it, with CLAIM);
 * UCS_ERR_NO_ELEM: no matching message has arrived. */
ucs_status_t uct_tm_proto_probe(uct_tm_proto_worker_h worker, uct_tm_proto_tag_t tag,
                                uct_tm_proto_tag_t mask, uct_tm_proto_ep_h source, unsigned flags,
                                uct_tm_proto_info_t *info, uct_tm_proto_msg_t *msg);
/* As uct_tm_proto_probe, and with PEEK also copies the found message's data
 * into `buffer`: its first min(length, info->length) bytes, as far as they
 * are here. *copied (if not NULL) is the number of bytes copied: all of
 * them for an eager message that arrived whole, fewer for one whose
 * fragments are still arriving, 0 for a rendezvous request (its data waits
 * at the sender until a receive takes it). With DISCARD the data is copied
 * before the message is dropped. `buffer` may be NULL when `length` is 0. */
ucs_status_t uct_tm_proto_probe_copy(uct_tm_proto_worker_h worker, uct_tm_proto_tag_t tag,
                                     uct_tm_proto_tag_t mask, uct_tm_proto_ep_h source,
                                     unsigned flags, void *buffer, size_t length, size_t *copied,
                                     uct_tm_proto_info_t *info, uct_tm_proto_msg_t *msg);
/* Receives a claimed message (as uct_tm_proto_recv, without matching). */
ucs_status_t uct_tm_proto_recv_claimed(uct_tm_proto_worker_h worker, uct_tm_proto_msg_t msg,
                                       void *buffer, size_t length,
                                       const uct_tm_proto_op_params_t *params,
                                       uct_tm_proto_request_t *req);
/* uct_tm_proto_recv_claimed() into the elements, as uct_tm_proto_recvv(). */
ucs_status_t uct_tm_proto_recv_claimedv(uct_tm_proto_worker_h worker, uct_tm_proto_msg_t msg,
                                        const uct_tm_proto_iov_t *iov, size_t iovcnt,
                                        const uct_tm_proto_op_params_t *params,
                                        uct_tm_proto_request_t *req);
/* Drops a claimed message (FI_CLAIM | FI_DISCARD). */
ucs_status_t uct_tm_proto_discard_claimed(uct_tm_proto_worker_h worker, uct_tm_proto_msg_t msg);

/* UCS_INPROGRESS, or the final status with *info filled (info may be NULL). */
ucs_status_t uct_tm_proto_request_test(uct_tm_proto_worker_h worker, uct_tm_proto_request_t req,
                                       uct_tm_proto_info_t *info);
/* Frees a completed request. UCS_ERR_BUSY: it has not completed yet. */
ucs_status_t uct_tm_proto_request_release(uct_tm_proto_worker_h worker,
                                          uct_tm_proto_request_t req);
/* Cancels a receive that has not matched yet, or a rendezvous send the
 * receiver has not started to fetch. UCS_OK: the request will complete, with
 * UCS_ERR_CANCELED if the cancel won or normally if it lost. UCS_ERR_BUSY:
 * the operation cannot be cancelled any more (eager data already sent);
 * UCS_ERR_NO_ELEM: it already completed. */
ucs_status_t uct_tm_proto_request_cancel(uct_tm_proto_worker_h worker,
                                         uct_tm_proto_request_t req);
/* The same for a request in the caller's memory (UCT_TM_PROTO_OP_USER_REQUEST);
 * UCS_ERR_NO_ELEM once its status is final, UCS_ERR_INVALID_PARAM if the
 * memory holds no request of this worker. */
ucs_status_t uct_tm_proto_request_cancel_user(uct_tm_proto_worker_h worker, void *request);

/* ---- registered memory --------------------------------------------------------- */

enum uct_tm_proto_mem_map_field {
    UCT_TM_PROTO_MEM_MAP_FIELD_ADDRESS = 1u << 0,
    UCT_TM_PROTO_MEM_MAP_FIELD_LENGTH  = 1u << 1
};

typedef struct uct_tm_proto_mem_map_params {
    uint64_t field_mask; /* uct_tm_proto_mem_map_field bits; both are required */
    void    *address;
    size_t   length;
} uct_tm_proto_mem_map_params_t;

/* Registers [address, address + length) on the memory domain of every
 * transport of the worker whose rendezvous reads or writes peer memory
 * (fi_mr_reg, ucp_mem_map); transports that need no registration cost
 * nothing. Operations on buffers inside it pass *memh with
 * UCT_TM_PROTO_OP_MEMH. A NULL address, zero length, a range that wraps,
 * a missing field: UCS_ERR_INVALID_PARAM. */
ucs_status_t uct_tm_proto_mem_map(uct_tm_proto_worker_h worker,
                                  const uct_tm_proto_mem_map_params_t *params,
                                  uct_tm_proto_mem_h *memh);
/* UCS_ERR_BUSY while an operation that carried the handle has not
 * completed (nothing is done: unmap again later); UCS_ERR_INVALID_PARAM for a
 * handle this worker does not hold mapped. The worker's destruction unmaps
 * what is left. */
ucs_status_t uct_tm_proto_mem_unmap(uct_tm_proto_worker_h worker, uct_tm_proto_mem_h memh);

#ifdef __cplusplus
}
#endif

#endif
