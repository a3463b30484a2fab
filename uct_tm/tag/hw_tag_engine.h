/*
 * HwTagEngine: UCT tag-offload semantics over a hardware tag list (the seam
 * of tm_list.h: the verbs TM SRQ, or the device model).
 *
 * The contract is TagEngine's (tag_engine.h), kept on hardware:
 *  - tag_consumed_cb first, then exactly one of completed_cb / rndv_cb;
 *  - an arriving message takes the earliest-posted matching receive. The
 *    engine matches what it holds; whatever it reports unexpected (it did
 *    not hold a match yet, or its unexpected count was out of sync) is
 *    matched here against the receives still posted (a shadow of the list,
 *    in posting order, in the software matcher). A receive claimed that way
 *    is DELeted from the list before the count that re-enables hardware
 *    matching is reported, so the hardware can never also match it;
 *  - cancel(force=0): DEL, then completed_cb(UCS_ERR_CANCELED) on its
 *    completion, or the normal completion if the tag was consumed first (the
 *    DEL then fails with TM_ERR); cancel(force=1): no callback, the context is
 *    free at once (the hardware may still write the buffer until the DEL
 *    executes, as with rc_mlx5);
 *  - UCS_ERR_EXCEEDS_LIMIT when the list is full: the receive is not posted
 *    and stays with the layer above (UCP keeps it in its software queue, so
 *    posting order is kept there), UCS_ERR_ALREADY_EXISTS for a buffer
 *    already posted, and an iov list as every transport judges it (uct_iov.h:
 *    at most one entry);
 *  - a message longer than the buffer completes with
 *    UCS_ERR_MESSAGE_TRUNCATED; a rendezvous the hardware could not finish
 *    (RNDV_INCOMPLETE) is finished in software through the transport.
 *
 * The transport supplies callbacks for what leaves the tag list:
 * unexpected eager / rendezvous messages (to the iface callbacks), NO_TAG
 * messages (active messages), FIN of its own rendezvous sends, and software
 * rendezvous reads into posted receives. Every callback runs from
 * progress() (or sw_rndv_done()); callbacks may re-enter post() / cancel().
 */
#ifndef UCT_TM_TAG_HW_TAG_ENGINE_H_
#define UCT_TM_TAG_HW_TAG_ENGINE_H_

#include "tm_list.h"

#include "address_set.h"
#include "context_handle.h"
#include "eager_delivery.h"
#include "uct_iov.h"
#include "common/ucs_assert.h"
#include "match/tag_matcher.h"

#include <uct/api/uct.h>

#include <cstddef>
#include <cstdint>
#include <vector>

namespace uct_tm {

struct HwTagEngineConfig {
    uint32_t list_size      = 1024; /* receives offloaded at once (capped by the device) */
    uint32_t rx_buffers     = 128;  /* untagged buffers for unexpected / NO_TAG messages */
    uint32_t rx_buffer_size = 8192; /* the largest eager or rndv request message, headers included */
    uint32_t poll_budget    = 64;   /* completions one progress() call handles at most */
    size_t   max_length     = SIZE_MAX; /* bytes per receive (capped by an sge's 32 bits) */
    /* Bytes left free before each untagged buffer, for the transport: UCT's
     * rx_headroom and descriptor pointer in front of a message delivered in
     * place with UCT_CB_PARAM_FLAG_DESC. */
    uint32_t rx_headroom = 0;
};

/* A rendezvous software must finish into a posted receive: read
 * min(remote_length, length) bytes, send FIN (TMH opcode FIN + the RVH) to
 * src_qp, then call HwTagEngine::sw_rndv_done(token, status). length 0: the
 * receive was cancelled with force; only the FIN is due. */
struct SwRndv {
    uint64_t token;
    uint32_t src_qp;
    uint64_t tag;
    uint32_t app_ctx;
    uint64_t remote_va;
    uint32_t rkey;
    uint32_t remote_length;
    void    *buffer;
    size_t   length;
};

struct HwTagTransport {
    void *arg = nullptr;
    /* Unexpected eager message (TMH stripped). UCS_OK: the buffer goes back to
     * the list; UCS_INPROGRESS: kept, returned later with release_rx(data). */
    ucs_status_t (*unexpected_eager)(void *arg, uint32_t src_qp, uint64_t stag, uint64_t imm,
                                     void *data, size_t length) = nullptr;
    /* Unexpected rendezvous: hardware (remote_va/rkey/length of the data) or a
     * software rendezvous request (remote_va = 0, length = 0). The header stays
     * valid during the call only. */
    void (*unexpected_rndv)(void *arg, uint32_t src_qp, uint64_t stag, const void *header,
                            unsigned header_length, uint64_t remote_va, uint32_t rkey,
                            size_t length) = nullptr;
    /* A NO_TAG message, whole (its TMH opcode byte first). Same return as
     * unexpected_eager. */
    ucs_status_t (*no_tag)(void *arg, uint32_t src_qp, void *data, size_t length) = nullptr;
    /* FIN of a rendezvous this side sent (app_ctx as sent). */
    void (*fin)(void *arg, uint32_t src_qp, uint32_t app_ctx) = nullptr;
    /* A rendezvous the engine matched failed its READ (an error CQE; the
     * receive completed with UCS_ERR_IO_ERROR). The sender, which waits for
     * a FIN, is `src_qp`; app_ctx names its operation. May be null. */
    void (*rndv_failed)(void *arg, uint32_t src_qp, uint32_t app_ctx) = nullptr;
    /* Starts a software rendezvous (see SwRndv). */
    void (*sw_rndv)(void *arg, const SwRndv &op) = nullptr;
    /* A receive with a software rendezvous running (token) was cancelled with
     * force: stop writing into its buffer; sw_rndv_done() is still due. */
    void (*orphan)(void *arg, uint64_t token) = nullptr;
    /* Local key of a receive buffer (verbs: the memh's MR); may be null. */
    uint32_t (*lkey)(void *arg, uct_mem_h memh, void *buffer) = nullptr;
};

template <typename List> class HwTagEngine {
    static_assert(is_tm_list<List>::value, "List implements the tag list seam (tm_list.h)");

  public:
    HwTagEngine(List &list, const HwTagEngineConfig &config, const HwTagTransport &transport);
    ~HwTagEngine();
    HwTagEngine(const HwTagEngine &)            = delete;
    HwTagEngine &operator=(const HwTagEngine &) = delete;

    /* Posts the untagged buffers; call once before progress(). rx_lkey: the
     * registration of rx_memory() (0 for the model). */
    ucs_status_t start(uint32_t rx_lkey = 0);
    void        *rx_memory() { return rx_pool_.data(); }
    size_t       rx_memory_size() const { return rx_pool_.size(); }
    /* True if `data` lies in an untagged buffer (release_rx() takes it). */
    bool         owns_rx(const void *data) const {
        const uint8_t *p = static_cast<const uint8_t *>(data);
        return (p >= rx_pool_.data()) && (p < rx_pool_.data() + rx_pool_.size());
    }

    /* uct_iface_tag_recv_zcopy / uct_iface_tag_recv_cancel. */
    ucs_status_t post(uct_tag_t tag, uct_tag_t mask, const uct_iov_t *iov, size_t iovcnt,
                      uct_tag_context_t *ctx);
    ucs_status_t cancel(uct_tag_context_t *ctx, int force);

    /* Polls the list's completions and dispatches them; posts SYNC when the
     * engine asked for it or software handled unexpected messages since the
     * count was last reported. Returns the completions handled. */
    unsigned progress();

    /* A software rendezvous (SwRndv) finished. */
    void sw_rndv_done(uint64_t token, ucs_status_t status);

    /* An untagged buffer kept by a callback (UCS_INPROGRESS) is free again. */
    void release_rx(void *data);

    struct Counters {
        uint64_t posts         = 0; /* receives offloaded */
        uint64_t refused       = 0; /* posts refused: list full / buffer posted / no op slot */
        uint64_t hw_matches    = 0; /* consumed by the engine */
        uint64_t sw_claims     = 0; /* unexpected messages that took a posted receive here */
        uint64_t unexpected    = 0; /* handed to the transport's unexpected callbacks */
        uint64_t cancels       = 0;
        uint64_t syncs         = 0; /* SYNC operations posted */
        uint64_t sw_rndv       = 0; /* rendezvous finished in software (RNDV_INCOMPLETE or claimed) */
        uint64_t rx_dropped    = 0; /* untagged messages dropped (too long, malformed) */
        uint64_t sync_requests = 0; /* completions that carried SYNC_REQ */
        uint64_t anomalies     = 0; /* completions that contradict the list's state */
    };
    const Counters &counters() const { return counters_; }
    uint32_t        list_size() const { return list_size_; }
    size_t          posted() const { return posted_; }
    uint32_t        unexpected_count() const { return sw_count_; }

  private:
    enum State : uint8_t {
        kFree,       /* not in use */
        kPosted,     /* in the shadow and (ADD executed or not) in the list */
        kConsumed,   /* the engine matched it; data pending */
        kCancelling, /* cancel(force=0): DEL posted */
        kOrphan,     /* cancel(force=1): nothing more reaches the user */
        kClaimed,    /* an unexpected message took it here; DEL posted */
        kDone,       /* the user has its completion; list completions may remain */
    };

    struct Slot {
        uct_tag_context_t *ctx      = nullptr;
        uint64_t           tag      = 0;
        uint64_t           stag     = 0; /* sender's tag once consumed */
        void              *buffer   = nullptr;
        size_t             capacity = 0;
        uint32_t           handle   = 0;
        uint32_t           gen      = 1;
        match::RecvHandle  shadow;
        State              state        = kFree;
        uint8_t            pending      = 0;     /* list completions still due */
        bool               holds_buffer = false; /* its address is in buffers_ */
        bool               sw_rndv      = false; /* a software rendezvous is running */
        uint32_t           remote_len   = 0;
        bool               truncated    = false; /* rendezvous into a buffer below its headers */
    };

    /* The receive's life: kFree -> kPosted -> (kConsumed | kClaimed |
     * kCancelling) -> kDone -> kFree; a forced cancel makes it kOrphan
     * (then kDone or kFree). Checked in debug builds. */
    static bool allowed(State from, State to) {
        switch (to) {
        case kPosted:     return from == kFree;
        case kConsumed:   return (from == kPosted) || (from == kCancelling);
        case kCancelling: return from == kPosted;
        case kClaimed:    return from == kPosted;
        case kOrphan:     return (from == kPosted) || (from == kConsumed) ||
                                 (from == kCancelling) || (from == kClaimed);
        case kDone:       return (from != kFree) && (from != kDone) && (from != kPosted);
        case kFree:       return (from == kDone) || (from == kOrphan);
        }
        return false;
    }
    static void set_state(Slot &s, State to) {
        ucs_assertv(allowed(s.state, to), "tm hw list: receive state %d -> %d", s.state, to);
        s.state = to;
    }
    static uint64_t slot_id(uint32_t index, uint32_t gen) {
        return (static_cast<uint64_t>(gen) << 32) | index;
    }
    Slot *slot_of(uint64_t id);
    Slot *lookup(uct_tag_context_t *ctx);
    /* The checks of a post before the list is touched: room, `ctx` not
     * posted, buffer `key` (> 1) not posted (then recorded). */
    ucs_status_t reserve(uct_tag_context_t *ctx, uintptr_t key);
    ucs_status_t post_del(Slot &s);
    void         give_back_buffer(Slot &s);
    void         maybe_free(Slot &s);
    void         deliver(Slot &s, uint64_t stag, uint64_t imm, size_t length, ucs_status_t status);
    void         start_sw_rndv(Slot &s, uint32_t src_qp, const TmHeader &tmh, const RndvHeader &rvh);

    /* A message the list reported unexpected, claimed by a receive posted
     * before it in software order (EagerDelivery's engine interface). */
    friend struct EagerDelivery;
    using Recv = Slot;
    Slot  *match(uint64_t stag);
    bool   wanted(const Slot *s) const { return s->state == kClaimed; }
    size_t scatter(Slot *s, size_t offset, const void *data, size_t length) const;
    void   complete(Slot *s, uint64_t stag, uint64_t imm, size_t length, ucs_status_t status,
                    bool known_wanted);
    void         on_list_op(const TmCompletion &c);
    void         on_tagged(const TmCompletion &c);
    bool         on_unexpected(const TmCompletion &c, uint8_t *data);
    bool         on_no_tag(const TmCompletion &c, uint8_t *data);
    void         repost_rx(uint32_t index);
    uint8_t     *rx_buffer(uint32_t index) {
        return rx_pool_.data() + static_cast<size_t>(index) * rx_stride_ + config_.rx_headroom;
    }
    uint8_t      count_flags() { return kTmOpSignaled | kTmOpSyncCount; }

    List                &list_;
    HwTagEngineConfig    config_;
    HwTagTransport       transport_;
    uint32_t             list_size_;
    std::vector<Slot>    slots_;
    std::vector<uint32_t> free_slots_;
    match::TagMatcher    shadow_;
    AddressSet           buffers_;
    std::vector<uint8_t> rx_pool_;
    uint32_t             rx_lkey_         = 0;
    size_t               rx_stride_       = 0; /* rx_headroom + rx_buffer_size */
    size_t               posted_          = 0;
    uint32_t             sw_count_        = 0; /* unexpected messages handled */
    uint32_t             reported_count_  = 0; /* last count sent to the engine */
    bool                 sync_in_flight_  = false;
    Counters             counters_;
};

}  // namespace uct_tm

#endif
