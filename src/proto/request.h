/*
 * Requests: one slot per send or receive in progress, addressed by a checked
 * 64-bit handle (generation << 32 | index + 1) so that a stale or forged
 * handle -- from the user or from a peer's reply -- is rejected, never
 * dereferenced. Slots are reused LIFO: steady state does not allocate. A
 * request "in the caller's memory" is a slot too: the memory holds its
 * public status, written at completion, and the slot's handle.
 */
#ifndef UCT_TM_PROTO_REQUEST_H_
#define UCT_TM_PROTO_REQUEST_H_

#include "api/uct_tm_proto.h"
#include "common/ucs_assert.h"
#include "registration_cache.h"

#include "match/slot_pool.h"
#include "match/tag_matcher.h"

#include <ucs/sys/compiler_def.h>
#include <uct/api/uct.h>

#include <atomic>
#include <cstdint>
#include <type_traits>
#include <memory>
#include <unistd.h>
#include <vector>

namespace uct_tm {
namespace proto {

class Endpoint;

enum class ReqKind : uint8_t { kFree, kSend, kRecv };

/* Where a send is. */
enum class SendState : uint8_t {
    kQueued,      /* waiting in its endpoint's queue (NO_RESOURCE or behind others) */
    kEagerSent,   /* sync eager message out, waiting for kAck */
    kRtsSent,     /* rendezvous request out, waiting for kCts / kCancelAck */
    kPushing,     /* kCts came: pushing kData fragments */
    kPutting,     /* kPutReq came: writing the front into the receiver's buffer */
};

/* Where a receive is. */
enum class RecvState : uint8_t {
    kPosted,      /* in a software queue (tier 1 or 2) */
    kOffloaded,   /* in the transport's tag list (tier 0) */
    kArriving,    /* matched; fragments or rendezvous data still coming */
};

/* The moves a send makes: out as a sync eager message or a rendezvous
 * request (a send that leaves for good completes in kQueued); after a
 * rendezvous request, the receiver asks for the data to be pushed (CTS, or
 * a write request the sender cannot serve) or written. */
constexpr bool send_move_allowed(SendState from, SendState to) {
    return ((from == SendState::kQueued) &&
            ((to == SendState::kEagerSent) || (to == SendState::kRtsSent))) ||
           ((from == SendState::kRtsSent) &&
            ((to == SendState::kPushing) || (to == SendState::kPutting))) ||
           ((from == SendState::kPutting) && (to == SendState::kPushing)); /* refused midway */
}

/* The moves a receive makes: to the transport's tag list, or matched in
 * software; from the tag list, matched there (or taken off it). */
constexpr bool recv_move_allowed(RecvState from, RecvState to) {
    return ((from == RecvState::kPosted) &&
            ((to == RecvState::kOffloaded) || (to == RecvState::kArriving))) ||
           ((from == RecvState::kOffloaded) && (to == RecvState::kArriving));
}

class Worker;
class Owner;

/* What a transport's tag list holds for one of our receives: UCT's context
 * first (the callbacks get its address), then the way back to the request. */
struct Request;
struct OffloadContext {
    uct_tag_context_t uct = {};
    Worker           *worker  = nullptr;
    Request          *request = nullptr; /* the request it is part of (pool slots never move) */
    uint64_t          req     = 0;       /* that request's handle when posted */
};
static_assert(std::is_standard_layout<OffloadContext>::value,
              "the UCT context must sit at offset 0");

/* A rendezvous get in flight: UCT's completion first, then the way back. */
struct GetContext {
    uct_completion_t  comp   = {};
    Owner            *owner         = nullptr;
    uint64_t          req    = 0;
    uint64_t          sreq   = 0;
    uint32_t          source = 0;
    uct_component_h   component = nullptr;
    uct_rkey_bundle_t rkey   = {};
    bool              rkey_unpacked = false; /* rkey is to be released */
    /* a write's call was refused (NO_RESOURCE) after others had started:
     * once they are done the data go by push instead (Rendezvous::transfer_done) */
    bool              refused = false;
};
static_assert(std::is_standard_layout<GetContext>::value,
              "the UCT completion must sit at offset 0");

struct Request {
    uint32_t gen        = 1;
    uint32_t free_link_ = 0;
    uint32_t &free_link() { return free_link_; }

    uint64_t self      = 0; /* this request's handle */
    ReqKind  kind      = ReqKind::kFree;
    bool     done      = false; /* completed: info.status is final */
    bool     cancel    = false; /* cancel asked */
    uct_tm_proto_cb_t cb  = nullptr;
    void             *arg = nullptr;
    uct_tm_proto_info_t info = {};
    /* the caller's memory (UCT_TM_PROTO_OP_USER_REQUEST): published there at
     * completion, then the slot is freed */
    uct_tm_proto_request_status_t *user = nullptr;

    /* send */
    Endpoint   *ep        = nullptr;
    const char *sbuf      = nullptr; /* null with length: the elements in `elements` (iov.cc) */
    size_t      length    = 0;
    uint64_t    tag       = 0;
    uint64_t    data      = 0;     /* remote data, with kFlagData in wire_flags */
    uint32_t    msg_id    = 0;
    uint8_t     wire_flags = 0;
    bool        rndv      = false;
    bool        started   = false; /* the first wire message went out */
    SendState   sstate    = SendState::kQueued;
    size_t      offset    = 0;     /* bytes sent so far (fragments, rendezvous data) */
    size_t      limit     = 0;     /* rendezvous: bytes the receiver asked for */
    uint64_t    rreq      = 0;     /* rendezvous: receiver's request */
    bool        await_ack = false; /* the receiver also reads our buffer: done on its kAck */
    /* completion level and ordering (uct_tm_proto_op_flags): */
    bool        fence     = false; /* starts once every earlier send on the endpoint completed */
    bool        transmit  = false; /* completes once a flush of the endpoint says it left */
    bool        deliver   = false; /* completes on the receiver's kAck to our kDeliverReq */
    bool        quiet     = false; /* NO_COMPLETION: nobody holds it; released when done */
    uint8_t     parts     = 0;     /* receive: rendezvous transfers still running */
    bool        ack_after = false; /* receive: the sender waits for kAck (we read its memory) */
    bool        peer_part = false; /* receive: one of the parts is the sender's to deliver (kData, kPutDone) */
    ucs_status_t xfer_status = UCS_OK; /* receive: first failed rendezvous transfer */
    std::vector<char> bounce;      /* INJECT data that could not leave at once */

    /* receive */
    char       *rbuf      = nullptr; /* null with capacity: the elements in `elements` (iov.cc) */
    size_t      capacity  = 0;
    uint64_t    mask      = 0;
    uint32_t    src_filter = 0;    /* 0: any source */
    bool        has_source = false;
    RecvState   rstate    = RecvState::kPosted;
    uint8_t     tier      = 1;
    uint64_t    seq       = 0;
    match::RecvHandle mh;
    size_t      received  = 0;     /* bytes placed */
    size_t      expect    = 0;     /* bytes that will be placed in total */
    OffloadContext octx;            /* while in a transport's tag list (set when posted there) */
    GetContext     gctx;            /* while reading rendezvous data (set when the read starts) */
    uct_mem_h      memh   = nullptr; /* send: registered for the receiver's get */
    uct_md_h       memh_md = nullptr;
    uct_mem_h      rmemh   = nullptr; /* receive: registered for the sender's write */
    /* UCT_TM_PROTO_OP_MEMH: the caller's mapped region. A rendezvous that
     * finds it still mapped takes its registration (MemMaps::use()): memh
     * with memh_md null, or rmemh with rmemh_mapped */
    uint64_t       region  = 0;
    bool           rmemh_mapped = false; /* rmemh is the region's (use()d) */
    /* memh (send) or rmemh (receive) is this cache entry's, held until put() */
    RegistrationCache::Region *cached = nullptr;

    /* receive: untagged (UCT_TM_PROTO_OP_UNTAGGED), in PostedRecvs' tier 3 */
    bool           untagged = false;
    /* A multi-receive (UCT_TM_PROTO_RECV_MULTI) lends each message it takes
     * a child receive over the next `used` bytes; it stays posted (kPosted)
     * until fewer than min_multi_recv bytes are left, then (kArriving)
     * completes with multi_status once its children are delivered. */
    bool           multi    = false;
    /* the next three are meaningful with multi only, which sets them */
    uint32_t       children = 0;       /* multi: children not yet delivered */
    size_t         used     = 0;       /* multi: bytes lent to children */
    ucs_status_t   multi_status = UCS_OK;
    uint64_t       parent   = 0;       /* a child: its multi-receive's handle */

    /* Set while the slot may hold non-default values outside the hot fields:
     * every use but an offloaded eager receive (the 8 B path) sets it. */
    bool cold_dirty = false;

    /* A vectored operation's elements (uct_tm_proto_sendv, _recvv), read
     * only while sbuf is null with length (send) or rbuf null with capacity
     * (receive), which only sendv() and new_iov_recv() set, after assigning
     * them: no reset clears them (nothing more per general request), and
     * they keep their capacity. Last: the other fields keep their offsets. */
    std::vector<uct_tm_proto_iov_t> elements;

    /* a send whose data are its elements (uct_tm_proto_sendv, not staged) */
    bool vectored_send() const { return (sbuf == nullptr) && (length != 0); }

    /* Every state change goes through these: debug builds check the move
     * (send_move_allowed, recv_move_allowed), release builds only store. */
    void set_state(SendState to) {
        ucs_assertv((kind == ReqKind::kSend) && !done && send_move_allowed(sstate, to),
                    "send request %#llx (kind %d, done %d): state %d -> %d",
                    static_cast<unsigned long long>(self), static_cast<int>(kind), done,
                    static_cast<int>(sstate), static_cast<int>(to));
        sstate = to;
    }
    void set_state(RecvState to) {
        ucs_assertv((kind == ReqKind::kRecv) && recv_move_allowed(rstate, to),
                    "receive request %#llx (kind %d, done %d): state %d -> %d",
                    static_cast<unsigned long long>(self), static_cast<int>(kind), done,
                    static_cast<int>(rstate), static_cast<int>(to));
        rstate = to;
    }

    /* Back to a fresh request, field by field: the contexts are written when
     * used, and the bounce buffer keeps its capacity (no allocation on reuse).
     * An offloaded eager receive (RequestPool::allocate_offloaded) writes
     * the hot fields and the ones reset_posted() covers, other paths any. */
    void reset_hot() {
        kind = ReqKind::kFree;
        done = cancel = false;
        cb   = nullptr;
        arg  = nullptr;
        user = nullptr;
        info = uct_tm_proto_info_t{};
        rstate = RecvState::kPosted;
        tier   = 1;
    }
    void reset_posted() {
        rbuf     = nullptr;
        capacity = 0;
        tag = mask = 0;
        seq      = 0;
    }
    void reset_cold() {
        ep   = nullptr;
        sbuf = nullptr;
        length = 0;
        data   = 0;
        msg_id = 0;
        wire_flags = 0;
        rndv = started = false;
        sstate = SendState::kQueued;
        offset = limit = 0;
        rreq   = 0;
        await_ack = false;
        fence = transmit = deliver = quiet = false;
        parts     = 0;
        ack_after = false;
        peer_part = false;
        xfer_status = UCS_OK;
        rmemh     = nullptr;
        bounce.clear();
        src_filter = 0;
        has_source = false;
        mh         = match::RecvHandle();
        received = expect = 0;
        memh    = nullptr;
        memh_md = nullptr;
        region  = 0;
        rmemh_mapped = false;
        cached  = nullptr;
        untagged = multi = false; /* children, used, multi_status: set with multi */
        parent   = 0;
        cold_dirty = false;
    }
};

/* n rounded up to a multiple of `align` (a layout offset in the caller's memory). */
constexpr size_t align_up(size_t n, size_t align) { return (n + align - 1) / align * align; }

/* Where the caller's memory keeps its request's handle: after the public
 * status prefix (cancel_user() finds the request by it). */
inline constexpr size_t kUserHandleOffset =
        align_up(sizeof(uct_tm_proto_request_status_t), alignof(uint64_t));
static_assert(kUserHandleOffset + sizeof(uint64_t) <= UCT_TM_PROTO_REQUEST_SIZE,
              "UCT_TM_PROTO_REQUEST_SIZE must hold the status and a handle");
static_assert(alignof(uint64_t) <= UCT_TM_PROTO_REQUEST_ALIGN,
              "UCT_TM_PROTO_REQUEST_ALIGN must align a handle");

inline uint64_t *user_handle_in(void *memory) {
    return reinterpret_cast<uint64_t *>(static_cast<char *>(memory) + kUserHandleOffset);
}

/* Writes a final status and its description to the caller's memory, the
 * status last: the caller may reuse the memory once it reads final. */
inline void publish(uct_tm_proto_request_status_t *pub, const uct_tm_proto_info_t &info) {
    pub->info   = info;
    pub->status = info.status;
}

/* The same for a request that failed before describing any message. */
inline void publish_failure(uct_tm_proto_request_status_t *pub, ucs_status_t status) {
    uct_tm_proto_info_t info = {};
    info.status              = status;
    publish(pub, info);
}

/* params asks for a request in the caller's memory and gives usable memory. */
inline bool user_memory_valid(const uct_tm_proto_op_params_t *params) {
    return (params->request != nullptr) &&
           ((reinterpret_cast<uintptr_t>(params->request) % UCT_TM_PROTO_REQUEST_ALIGN) == 0);
}

/* An operation's params and handle pointer: flags among `allowed` and
 * USER_REQUEST, usable memory with the latter, and a handle pointer unless
 * the request is in the caller's memory or makes no completion. */
inline bool op_params_valid(const uct_tm_proto_op_params_t *params, unsigned allowed,
                            const uint64_t *req) {
    if (params == nullptr) {
        return req != nullptr;
    }
    if ((params->flags & ~(allowed | UCT_TM_PROTO_OP_USER_REQUEST | UCT_TM_PROTO_OP_MEMH)) != 0) {
        return false;
    }
    /* a send without completion hands out nothing either */
    return (params->flags & UCT_TM_PROTO_OP_USER_REQUEST)
                   ? user_memory_valid(params)
                   : ((req != nullptr) || (params->flags & UCT_TM_PROTO_OP_NO_COMPLETION));
}

/* The handle an operation hands out: none for a request in the caller's memory. */
inline uint64_t handed_out(const Request &r) { return (r.user != nullptr) ? 0 : r.self; }

class RequestPool {
  public:
    /* Each pool starts its slots' generations at its own value, so that a
     * handle from another worker (same index, both slots fresh) does not
     * name a request here: distinct for the pools of one process, mixed
     * with the process id for the rest (a collision then takes a 32-bit
     * coincidence, as a forged handle does). */
    RequestPool() {
        static std::atomic<uint32_t> pools{0};
        const uint32_t n = pools.fetch_add(1, std::memory_order_relaxed);
        gen_base_ = (n * 0x9e3779b9u) ^ (static_cast<uint32_t>(getpid()) * 0x85ebca6bu);
        gen_base_ = (gen_base_ == 0) ? 1 : gen_base_;
    }

    /* A free slot, reset; throws std::bad_alloc. Any path may write any
     * field of it, so its next user resets them all. */
    [[gnu::always_inline]] Request &allocate(ReqKind kind, uint64_t *handle) {
        Request &r = take(kind, handle);
        r.reset_posted();
        r.cold_dirty = true;
        return r;
    }

    /* A free slot for an offloaded eager receive, which sets buffer,
     * capacity, tag, mask and sequence itself and then writes only hot
     * fields: the cold ones are reset only if the slot's previous user wrote
     * them. A receive that leaves this path (a rendezvous arrival) sets
     * cold_dirty. */
    Request &allocate_offloaded(uint64_t *handle) { return take(ReqKind::kRecv, handle); }

    /* Ties a request just allocated to the caller's memory
     * (UCT_TM_PROTO_REQUEST_ALIGN checked by the caller): its status word
     * reads UCS_INPROGRESS and the memory keeps the handle. */
    static void adopt(Request &r, void *memory) {
        auto *pub            = static_cast<uct_tm_proto_request_status_t *>(memory);
        pub->status          = UCS_INPROGRESS;
        *user_handle_in(pub) = r.self;
        r.user               = pub;
    }

    /* Ends a request in the caller's memory: its slot is freed and -- if
     * `publish` -- its info and status written to the memory, the status
     * last (the caller may reuse the memory once it reads final). */
    void retire(Request &r, bool publish) {
        ucs_assertv(r.user != nullptr, "request %#llx is not in the caller's memory",
                    static_cast<unsigned long long>(r.self));
        uct_tm_proto_request_status_t *pub  = r.user;
        const uct_tm_proto_info_t      info = r.info;
        release(r.self);
        if (publish) {
            proto::publish(pub, info);
        }
    }

    /* The live request whose handle the caller's memory holds, if it is
     * tied to that very memory; else null. */
    Request *lookup_user(void *memory) {
        Request *r = lookup(*user_handle_in(memory));
        return ((r != nullptr) && (r->user == memory)) ? r : nullptr;
    }

    /* Calls f(Request &) for every live request tied to the caller's memory. */
    template <typename F> void for_each_user(F &&f) {
        for_each_live([&f](Request &r) {
            if (r.user != nullptr) {
                f(r);
            }
        });
    }
    /* Calls f(Request &) for every live request. */
    template <typename F> void for_each_live(F &&f) {
        for (uint32_t i = 0; i < pool_.issued(); ++i) {
            Request &r = pool_[i];
            if (r.kind != ReqKind::kFree) {
                f(r);
            }
        }
    }

    /* The live request with this handle, or null; *index is its slot. */
    Request *lookup(uint64_t handle, uint32_t *index) {
        const uint64_t low = handle & 0xffffffffu;
        if (ucs_unlikely((low - 1) >= pool_.issued())) {
            return nullptr; /* 0 wraps to the largest value */
        }
        *index     = static_cast<uint32_t>(low - 1);
        Request &r = pool_[*index];
        if (ucs_unlikely((r.kind == ReqKind::kFree) ||
                         (r.gen != static_cast<uint32_t>(handle >> 32)))) {
            return nullptr;
        }
        return &r;
    }

    /* Frees a live request found by lookup(): the generation moves on, so
     * its handle is stale from now on (0 is skipped when it wraps). */
    void release(uint32_t index, Request &r) {
        ucs_assertv(r.kind != ReqKind::kFree, "request slot %u released twice", index);
        r.kind = ReqKind::kFree;
        r.gen  = (r.gen + 1 == 0) ? 1 : r.gen + 1;
        pool_.release(index, r);
    }

    /* The live request with this handle, or null. */
    Request *lookup(uint64_t handle) {
        uint32_t index;
        return lookup(handle, &index);
    }

    /* Drops a request the operation that made it did not hand out (a
     * refused post, an error, a send done at once); the caller's memory, if
     * any, is left as it is (unspecified after an error). */
    void release(uint64_t handle) {
        const uint32_t idx = static_cast<uint32_t>((handle & 0xffffffffu) - 1);
        release(idx, pool_[idx]);
    }

    size_t live() const { return pool_.live(); }
    uint32_t issued() const { return pool_.issued(); }
    Request &at(uint32_t idx) { return pool_[idx]; }
    static uint64_t handle_of(const Request &r, uint32_t idx) {
        return (uint64_t{r.gen} << 32) | (uint64_t{idx} + 1);
    }

  private:
    /* Inlined: the offloaded 8 B receive takes a slot per message (the cold
     * reset stays out of line, or take() outgrows the inliner's budget). */
    [[gnu::always_inline]] Request &take(ReqKind kind, uint64_t *handle) {
        const auto     slot = pool_.allocate_slot();
        Request       &r    = *slot.entry;
        if (ucs_unlikely(r.self == 0)) {
            r.gen = gen_base_; /* a slot's first request */
        }
        if (r.cold_dirty) {
            r.reset_cold();
        }
        r.reset_hot();
        r.kind  = kind;
        r.self  = (uint64_t{r.gen} << 32) | (uint64_t{slot.index} + 1);
        *handle = r.self;
        return r;
    }

    match::SlotPool<Request> pool_;
    uint32_t                 gen_base_ = 1;
};

}  // namespace proto
}  // namespace uct_tm

#endif
