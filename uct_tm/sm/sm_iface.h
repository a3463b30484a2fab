/*
 * tm_sm: the shared-memory UCT transport of component "tm".
 *
 * Each iface owns one segment (sm_layout.h) holding its receive FIFO. An
 * endpoint maps the destination iface's segment (RemotePeer) and writes
 * elements into its FIFO; the destination's progress reads them:
 *  - AM and tagged eager data travel inline in the element or in the
 *    receive descriptor attached to it; tagged messages are matched against
 *    posted receives by the TagEngine (software matcher) and copied once into
 *    the posted buffer, or handed to the unexpected callbacks;
 *  - tag_rndv_zcopy sends a descriptor of the sender's buffer; a matched
 *    receiver reads it with one CMA copy (process_vm_readv) and answers with a
 *    FIN that completes the sender's operation;
 *  - get/put zcopy use CMA, or the mapping of MD-allocated shared memory.
 */
#ifndef UCT_TM_SM_SM_IFACE_H_
#define UCT_TM_SM_SM_IFACE_H_

#include "sm_config.h"
#include "sm_copy_mode.h"
#include "sm_desc_ring.h"
#include "sm_fifo.h"
#include "sm_layout.h"
#include "sm_link.h"
#include "sm_peer.h"
#include "sm_rndv.h"
#include "sm_staging.h"

#include "base/flush_waiters.h"
#include "base/iface_base.h"
#include "base/pending_queue.h"
#include "tag/tag_engine.h"
#include "base/ucx_abi.h"

#include "base/clock.h"
#include <uct/api/uct.h>

#include <cstdio>
#include <memory>
#include <sys/types.h>
#include <sys/uio.h>
#include <vector>

namespace uct_tm {
namespace sm {

class SmIface;

/* A message in descriptor fragments of the receiver's SEG_SIZE. */
struct Fragments {
    Kind      kind;
    uint8_t   am_id;
    uct_tag_t tag;
    uint64_t  imm;
    size_t    total;
    size_t    nfrags; /* 0: drop every claimed element */
};

/* A bcopy packed before the receiver's FIFO had room for all its fragments. */
struct Backlog {
    std::vector<char> data;
    Fragments         frags{};
    bool              active = false;
};

/* An endpoint: a connection to one remote iface. */
struct SmEp {
    uct_ep_t    super;  /* UCX's view: {iface}; must stay first */
    SmIface    *iface   = nullptr;
    RemotePeer *peer    = nullptr;
    /* Pending requests, linked through their priv area. */
    PendingQueue       pending;
    bool               in_pending_list = false;
    bool               failed   = false; /* peer died: every operation fails */
    bool               notified = false; /* error handler already called */
    uint32_t           rndv_outstanding = 0;
    uint32_t           gets_outstanding = 0; /* pipelined get_zcopy */
    /* The receiver's geometry may be smaller than ours (other UCX_TM_SM_*
     * settings): what fits one of its FIFO elements, and whether a bcopy
     * of our max_bcopy can overflow its descriptors (pack elsewhere first). */
    uint32_t           inline_cap   = 0;
    bool               bcopy_bounce = false;
    Backlog            backlog; /* sent before anything else on the endpoint */
};

/* A message being received fragment by fragment: tagged eager, or an active
 * message (always held: it goes up in one piece). */
struct Assembly {
    bool             active   = false;
    uint16_t         peer     = 0;
    TagEngine::Recv *recv     = nullptr; /* expected: the receive it fills */
    uct_tag_t        tag      = 0;
    size_t           offset   = 0;
    /* unexpected, and its sender was still writing it: its bytes are held in
     * SmIface::held_ and go up once whole (lost: out of memory or too long,
     * dropped). Set with each new assembly, read only while it is active. */
    bool             held     = false;
    bool             lost     = false;
    bool             am       = false; /* an active message with id am_id */
    uint8_t          am_id    = 0;
};

/* What the iface remembers of a peer-table entry. */
struct PeerView {
    uint32_t    word = 0; /* the slot state this view was built from */
    RemotePeer *peer = nullptr;
};

/* The largest tag_rndv_zcopy, as UCX's RC and DC report the port's max_msg_sz
 * (1 GiB): a finite size callers can allocate and register. Larger messages
 * take UCP's software rendezvous through get_zcopy, which has no bound. */
inline constexpr size_t kRndvMaxZcopy = size_t{1} << 30;

/* A FIFO element as read by the owner: every field copied once. */
struct Message {
    Kind        kind;
    uint8_t     flags;
    uint16_t    peer;
    uint32_t    length;
    uint32_t    aux;
    uint64_t    tag;
    uint64_t    imm;
    bool        desc;
    void       *payload;
    ElemHeader *elem;
};

class SmIface : public IfaceBase<SmIface, SmEp> {
  public:
    /* ---- what IfaceBase opens, tells UCX about and calls ---- */
    using Config = SmConfig;
    static const abi::TransportDesc &transport();
    explicit SmIface(const SmConfig &config);
    ucs_status_t init(uct_md_h md, uct_worker_h worker, const uct_iface_params_t *params,
                      const SmConfig &config);

    ~SmIface();
    SmIface(const SmIface &)            = delete;
    SmIface &operator=(const SmIface &) = delete;

    /* ---- iface operations ---- */
    ucs_status_t query(uct_iface_attr_t *attr) const;
    /* What `op` costs here, from the figures query() reports (UCP's protocol
     * selection compares them per operation). */
    static void  estimate(abi::EpOperation op, abi::PerfEstimate *perf);
    ucs_status_t get_device_address(uct_device_addr_t *addr) const;
    ucs_status_t get_address(uct_iface_addr_t *addr) const;
    int          is_reachable(const uct_device_addr_t *dev_addr,
                              const uct_iface_addr_t *iface_addr) const;
    /* Connected to the iface `iface_addr` names, on the host `dev_addr` names. */
    bool         ep_is_connected(const SmEp *ep, const uct_device_addr_t *dev_addr,
                                 const uct_iface_addr_t *iface_addr,
                                 const uct_ep_addr_t *ep_addr) const;
    /* UCP calls every iface's progress in its poll loop: with nothing
     * arrived and nothing waiting, return after a few loads. */
    unsigned progress() {
        ElemHeader *e = fifo_.poll();
        if (ucs_likely(e == nullptr) && ucs_likely(!maybe_background_)) {
            return ucs_likely(--slow_countdown_ != 0) ? 0 : slow_progress();
        }
        return progress_work(e);
    }
    ucs_status_t flush(unsigned flags, uct_completion_t *comp);
    ucs_status_t tag_recv_zcopy(uct_tag_t tag, uct_tag_t mask, const uct_iov_t *iov,
                                size_t iovcnt, uct_tag_context_t *ctx) {
        /* Inline into the ops entry: a streaming receiver posts once per message. */
        if (ucs_unlikely(!tag_enabled())) {
            return UCS_ERR_UNSUPPORTED;
        }
        /* An unexpected message held until whole arrived before this
         * receive: it goes up through eager_cb, which the layer above may
         * match to this very receive -- but in our list the receive would
         * take a later message of the tag first. Refused (the layer above
         * keeps it) while that can happen. */
        if (ucs_unlikely(assembly_.active && assembly_.held) &&
            (((tag ^ assembly_.tag) & mask) == 0)) {
            return UCS_ERR_NO_RESOURCE;
        }
        return tags_.post(tag, mask, iov, iovcnt, ctx);
    }
    ucs_status_t tag_recv_cancel(uct_tag_context_t *ctx, int force);

    /* ---- endpoint lifetime ---- */
    ucs_status_t ep_create(const uct_ep_params_t *params, uct_ep_h *ep_p);
    void         ep_destroy(SmEp *ep);

    /* ---- endpoint operations ---- */
    ucs_status_t am_short(SmEp *ep, uint8_t id, uint64_t header, const void *payload,
                          unsigned length);
    ssize_t      am_bcopy(SmEp *ep, uint8_t id, uct_pack_callback_t pack_cb, void *arg);
    ucs_status_t am_zcopy(SmEp *ep, uint8_t id, const void *header, unsigned header_length,
                          const uct_iov_t *iov, size_t iovcnt, uct_completion_t *comp);
    ucs_status_t tag_eager_short(SmEp *ep, uct_tag_t tag, const void *data, size_t length);
    ssize_t      tag_eager_bcopy(SmEp *ep, uct_tag_t tag, uint64_t imm,
                                 uct_pack_callback_t pack_cb, void *arg);
    ucs_status_t tag_eager_zcopy(SmEp *ep, uct_tag_t tag, uint64_t imm, const uct_iov_t *iov,
                                 size_t iovcnt, uct_completion_t *comp);
    ucs_status_ptr_t tag_rndv_zcopy(SmEp *ep, uct_tag_t tag, const void *header,
                                    unsigned header_length, const uct_iov_t *iov, size_t iovcnt,
                                    uct_completion_t *comp) {
        const MayQueueWork mark{this};
        return rndv_.send(ep, tag, header, header_length, iov, iovcnt, comp);
    }
    ucs_status_t tag_rndv_cancel(SmEp *ep, void *op) {
        const MayQueueWork mark{this};
        return rndv_.cancel(ep, op);
    }
    ucs_status_t tag_rndv_request(SmEp *ep, uct_tag_t tag, const void *header,
                                  unsigned header_length);
    ucs_status_t get_zcopy(SmEp *ep, const uct_iov_t *iov, size_t iovcnt, uint64_t remote_addr,
                           uct_rkey_t rkey, uct_completion_t *comp) {
        const MayQueueWork mark{this};
        return rndv_.zcopy(ep, iov, iovcnt, remote_addr, rkey, comp, false);
    }
    ucs_status_t put_zcopy(SmEp *ep, const uct_iov_t *iov, size_t iovcnt, uint64_t remote_addr,
                           uct_rkey_t rkey, uct_completion_t *) {
        const MayQueueWork mark{this};
        return rndv_.zcopy(ep, iov, iovcnt, remote_addr, rkey, nullptr, true);
    }
    ucs_status_t pending_add(SmEp *ep, uct_pending_req_t *req);
    void         pending_purge(SmEp *ep, uct_pending_purge_callback_t cb, void *arg);
    ucs_status_t ep_flush(SmEp *ep, unsigned flags, uct_completion_t *comp);
    ucs_status_t ep_check(SmEp *ep, unsigned flags, uct_completion_t *comp);

    /* uct_iface_release_desc() of a descriptor kept by a callback. */
    void release_desc(void *desc);

    const TagEngine &tags() const { return tags_; }

    /* What crossed this iface (PRINT_STATS; rendezvous: SmRendezvous::Counters). */
    struct Counters {
        uint64_t received        = 0; /* FIFO elements handled */
        uint64_t unexpected      = 0; /* tagged messages handed to eager_cb / rndv_cb */
        uint64_t backlogged      = 0; /* bcopy sends that waited for FIFO room (Backlog) */
        uint64_t packed_in_place = 0; /* bcopies beyond one descriptor's reach: in a window */
        uint64_t packed_aside    = 0; /* ... or into bounce_ */
    };
    void print_counters(FILE *stream) const;

  private:
    friend class SmIfaceLink;

    /* Progress calls between checks of the clock (peer liveness, stalls). */
    static constexpr uint32_t kSlowProgressPeriod = 256;

    IfaceAddress self_address() const;
    uint32_t     geometry_seg_max() const { return geometry_.seg_size; }
    bool         choose_bcopy_max(size_t configured);
    /* BCOPY_MAX auto is EAGER_MAX before UCX 1.16 (v1 caps its rendezvous
     * threshold at max_bcopy), SEG_SIZE from 1.16. */
    static constexpr bool kBcopyBeyondSegByDefault = abi::kUcxRelease < 116;
    ucs_status_t apply_config(const SmConfig &config);
    ucs_status_t create_segment(uct_md_h md, const SmConfig &config);

    /* ---- sending (sm_send.cc) ---- */
    inline ucs_status_t tx_ready(SmEp *ep);
    template <typename Fill>
    ucs_status_t send_inline(SmEp *ep, Kind kind, uint32_t length, const Fill &fill);
    template <typename Fill>
    ssize_t send_bcopy(SmEp *ep, Kind kind, uct_pack_callback_t pack_cb, void *arg,
                       const Fill &fill);
    /* A bcopy that may not fit the receiver's descriptors (BCOPY_MAX above
     * its SEG_SIZE): packed through a window at its first element's
     * descriptor (sm_pack_windows.h) or else into bounce_; sent in
     * fragments when longer than the descriptor. */
    [[gnu::noinline]] ssize_t send_bcopy_bounced(SmEp *ep, Kind kind, uint8_t am_id,
                                                 uct_tag_t tag, uint64_t imm,
                                                 uct_pack_callback_t pack_cb, void *arg);
    void         publish_drop(SmEp *ep, uint64_t seq);
    ssize_t                   backlog_bcopy(SmEp *ep, const Fragments &f, const char *packed);
    [[gnu::noinline]] bool send_backlog(SmEp *ep);
    void         drop_backlog(SmEp *ep);
    /* A short send larger than the receiver's FIFO element: through its
     * descriptors instead. */
    [[gnu::noinline]] ucs_status_t send_short_by_desc(SmEp *ep, Kind kind, uint8_t am_id,
                                                      uct_tag_t tag, const void *prefix,
                                                      size_t prefix_length, const void *data,
                                                      size_t length);
    /* Logs, once per peer, that a message does not fit its geometry. */
    ucs_status_t refuse_for_geometry(SmEp *ep, size_t total, const char *why);
    /* One message of `total` bytes: `prefix` then the iov list; inline, in
     * one descriptor, or in up to `max_fragments` descriptor fragments. */
    /* tag_eager_zcopy() beyond one inline element, out of line, so the
     * inline case costs what tag_eager_short does (docs/perf.md, "Code shape of the hot paths"). */
    [[gnu::noinline]] ucs_status_t tag_eager_zcopy_gather(SmEp *ep, uct_tag_t tag, uint64_t imm,
                                                          const uct_iov_t *iov, size_t iovcnt);
    ucs_status_t send_gather(SmEp *ep, Kind kind, uint8_t am_id, uct_tag_t tag, uint64_t imm,
                             const void *prefix, size_t prefix_length, const uct_iov_t *iov,
                             size_t iovcnt, size_t total, size_t max_fragments);
    /* Writes `f` into the `claimed` elements from `seq` (those beyond its
     * fragments become drops) with gather_at(dst, offset, length, stream),
     * stream as copy_mode_ chooses for the message, and publishes them. */
    template <typename Gather>
    ucs_status_t publish_fragments(SmEp *ep, uint64_t seq, size_t claimed, const Fragments &f,
                                   const Gather &gather_at);
    ucs_status_t send_control_now(RemotePeer *peer, const ControlMsg &msg);
    void         send_control(RemotePeer *peer, const ControlMsg &msg);
    unsigned     dispatch_pending();
    bool         flush_done(const SmEp *ep) const;
    void         complete_flushes();

    /* ---- receiving (sm_iface.cc) ---- */
    void dispatch(ElemHeader *e);
    [[gnu::noinline]] void dispatch_general(ElemHeader *e);
    [[gnu::noinline]] void receive_unexpected_inline(ElemHeader *e, uct_tag_t tag, uint64_t imm,
                                                     uint32_t length);
    void drop(const Message &m, const char *why);
    template <typename Invoke> void deliver(const Message &m, const Invoke &invoke);
    /* Gives the head element the least recently used spare descriptor and
     * queues the one it carried (DescRing: why). */
    void rotate_desc(ElemHeader *e);
    void receive_am(const Message &m);
    void receive_am_fragment(const Message &m, uint8_t id);
    void touch_descriptors() { descriptor_touch_.before_fragments(segment_, geometry_); }
    void receive_eager(const Message &m);
    /* The first fragment of a message no posted receive matched: eager_cb. */
    void receive_unexpected_eager(const Message &m);
    void receive_held_fragment(const Message &m);
    bool hold_first(const Message &m);
    template <typename Invoke> void deliver_held(const Invoke &invoke);
    bool release_held(const char *payload);
    void receive_rndv_request(const Message &m);
    /* The rndv callback for a rendezvous (request: no rkey) no receive
     * matched; false if there is none. */
    bool unexpected_rndv(uct_tag_t tag, const void *header, unsigned header_length,
                         uint64_t address, size_t length, const PackedRkey *rkey);
    void abort_assembly(ucs_status_t status);

    /* ---- peers (sm_iface.cc) ---- */
    RemotePeer  *peer_of(uint16_t slot);
    /* Why peer_of(slot) found nobody: UCS_ERR_CONNECTION_RESET if the
     * sender left (its entry is free, or its process exited), else
     * UCS_ERR_UNREACHABLE (alive, but we cannot attach to it). */
    ucs_status_t unattached_peer_status(uint16_t slot) const;
    /* The iface announced in slot `slot` of our peer table; false if free. */
    bool         peer_address(uint16_t slot, IfaceAddress *out) const;
    ucs_status_t find_or_attach(const IfaceAddress &remote, RemotePeer **peer);
    void         put_peer(RemotePeer *peer);
    void         fail_peer(RemotePeer *peer);
    void         check_peers();
    void         take_published();
    /* Handles the element poll() returned and frees it. */
    [[gnu::always_inline]] void consume(ElemHeader *e) {
        dispatch(e);
        fifo_.release();
        ++counters_.received;
    }
    void         recover_stall(uint64_t now);
    /* Frees entry `slot` (state `word`) of our peer table, taken by a
     * process that died or was dropped, and our attachment back to it. */
    void         free_peer_slot(uint32_t slot, uint32_t word, uint64_t now);
    void         sweep_peer_table(uint64_t now);
    /* Releases our view of peer-table entry `slot` and its reference. */
    void         drop_view(uint32_t slot);
    static constexpr uint32_t kSweepPerCheck = 16;
    /* Our attachments to process `pid` fail from the next progress. */
    void         declare_failed(int32_t pid);
    bool         has_deferred_work() const {
        return has_outbox_ || !pending_eps_.empty() || !flush_waiters_.empty() ||
               !backlogged_.empty();
    }
    /* Set whenever work for background_progress() may have been queued: at
     * the end of every operation that can queue some (MayQueueWork: cancel,
     * pending, flush, rendezvous, get/put, endpoint destruction), of every
     * message but the ones dispatch() takes inline, of slow_progress(), and
     * where a control message waits in an outbox (send_control); cleared
     * only by background_progress() once has_background_work() is false.
     * So the poll loop checks one flag where has_background_work() reads
     * seven containers, and eager sends, which queue nothing, leave it. */
    bool         maybe_background_ = true;
    DescriptorTouch descriptor_touch_;
    struct MayQueueWork {
        SmIface *iface;
        ~MayQueueWork() { iface->maybe_background_ = true; }
    };
    /* Held by the progress paths that run callbacks (the inline poll that
     * finds nothing runs none). */
    uint32_t progress_depth_ = 0;
    struct InProgress {
        explicit InProgress(SmIface *i) : iface(i) { ++iface->progress_depth_; }
        ~InProgress() { --iface->progress_depth_; }
        InProgress(const InProgress &)            = delete;
        InProgress &operator=(const InProgress &) = delete;
        SmIface *iface;
    };
    [[gnu::noinline]] unsigned background_progress();
    /* Sends what waits in the peers' outboxes; the number sent. */
    unsigned     send_outboxes();
    /* At close: the outboxes' FINs to live peers, for CLOSE_TIMEOUT at most. */
    void         drain_outboxes();
    bool         has_background_work() const {
        return tags_.has_cancelled() || rndv_.has_splits() || staging_.busy() || has_deferred_work();
    }
    /* Handles arrivals from `e` on (null: none) and the waiting work. */
    unsigned     progress_work(ElemHeader *e);
    unsigned     slow_progress();

    /* A receive force-cancelled while its rendezvous data is still coming:
     * a pipelined copy stops writing into its buffer, a split copy waits out
     * the sender's write in flight. Nothing writes into it afterwards. */
    void orphan_receive(const TagEngine::Recv *recv) {
        staging_.orphan_receive(recv);
        rndv_.orphan_receive(recv);
    }

    char *desc_payload(uint32_t d) const {
        return descs_ + size_t{d} * geometry_.desc_stride + geometry_.desc_payload;
    }

    /* settings */
    Geometry   geometry_{};
    uint32_t   inline_cap_     = 0;
    size_t     eager_max_      = 0;
    size_t     bcopy_max_      = 0; /* am.max_bcopy and tag.eager.max_bcopy */
    size_t     recv_min_       = 0; /* tag.recv.min_recv (RECV_MIN) */
    CopyMode   copy_mode_;
    unsigned   budget_         = 32;
    uint32_t   iface_serial_   = 0;
    uint64_t check_interval_ = 0;
    uint64_t stall_timeout_  = 0;
    uint64_t stopped_timeout_ = 0;
    uint64_t close_timeout_   = 0;

    /* own segment */
    ShmSegment            segment_;
    bool                  segment_lost_ = false; /* truncated by another process */
    SegmentHeader        *header_     = nullptr;
    FifoReader            fifo_;
    char                 *descs_      = nullptr;
    PeerSlot             *peer_slots_ = nullptr;
    RndvSlot             *rndv_slots_ = nullptr;
    const abi::AmHandler *am_handlers_ = nullptr; /* UCX's table in `base` (dispatch) */
    std::vector<uint32_t> elem_desc_;   /* descriptor attached to each element (our truth) */
    DescRing              spare_descs_; /* neither attached nor held by the layer above */
    std::vector<char>     bounce_;      /* BCOPY_MAX: a bcopy packed aside, to go in fragments
                                           or with streamed copies (CopyMode) */
    bool                  bcopy_in_place_ = false; /* BCOPY_IN_PLACE, BCOPY_MAX above SEG_SIZE */
    ShmSegment            spill_;                  /* behind every peer's pack windows */
    bool                  last_bcopy_spilled_ = false; /* it went beyond its first descriptor */

    /* tag matching */
    TagEngine                tags_;
    Assembly                 assembly_;
    /* A message held until whole (Assembly), behind a descriptor's front;
     * those the layer above keeps (lent) until released, and empty ones. */
    std::vector<char>              held_;
    std::vector<std::vector<char>> lent_held_;
    std::vector<std::vector<char>> spare_held_;

    /* peers */
    std::vector<PeerView>                    peer_views_; /* by slot of our peer table */
    std::vector<std::unique_ptr<RemotePeer>> peers_;
    size_t                                   num_eps_ = 0;

    /* rendezvous and one-sided copies (sm_rndv.cc), pipelined copies (sm_staging.cc) */
    SmRendezvous    rndv_;
    SmStagingCopies staging_;

    /* deferred work */
    PendingEndpoints<SmEp>   pending_eps_;
    FlushWaiters<SmEp>     flush_waiters_;
    bool                     dispatching_    = false;
    bool                     has_outbox_     = false;
    std::vector<SmEp *>      backlogged_;   /* endpoints whose Backlog is active */
    uint64_t               next_check_     = 0;
    uint64_t               stall_since_    = 0;
    /* Elements below this sequence may have been claimed by a process found
     * dead (the tail read after its death was seen); 0 once the head passed
     * it. Kept after the dead process's peer slot is freed: it may hold more
     * claims than the first one skipped. */
    uint64_t               dead_until_     = 0;
    uint64_t               dead_seen_at_   = 0; /* when dead_until_ was last raised */
    uint64_t               stall_began_    = 0; /* when the element at stall_head_ first stalled */
    uint64_t               stall_head_     = 0;
    uint32_t               sweep_cursor_   = 0; /* next peer-table entry sweep_peer_table() looks at */
    uint32_t                 slow_countdown_ = kSlowProgressPeriod;
    uint64_t                 dropped_        = 0;
    Counters                 counters_;
    bool                     print_stats_    = false;
};

/* ---- SmIfaceLink: what the iface's parts call ---- */

inline void SmIfaceLink::send_control(RemotePeer *peer, const ControlMsg &msg) {
    iface_->send_control(peer, msg);
}
inline RemotePeer *SmIfaceLink::peer_of(uint16_t slot) { return iface_->peer_of(slot); }
inline ucs_status_t SmIfaceLink::unattached_peer_status(uint16_t slot) const {
    return iface_->unattached_peer_status(slot);
}
inline bool SmIfaceLink::peer_address(uint16_t slot, IfaceAddress *out) const {
    return iface_->peer_address(slot, out);
}
inline void SmIfaceLink::put_peer(RemotePeer *peer) { iface_->put_peer(peer); }
inline void SmIfaceLink::drop(const Message &m, const char *why) { iface_->drop(m, why); }
inline TagEngine &SmIfaceLink::tags() { return iface_->tags_; }
inline bool SmIfaceLink::tag_enabled() const { return iface_->tag_enabled(); }
inline void SmIfaceLink::slow_progress_next() { iface_->slow_countdown_ = 1; }
inline bool SmIfaceLink::in_progress() const { return iface_->progress_depth_ != 0; }
inline const Geometry &SmIfaceLink::geometry() const { return iface_->geometry_; }
inline bool SmIfaceLink::unexpected_rndv(uct_tag_t tag, const void *header, unsigned header_length,
                                         uint64_t address, size_t length, const PackedRkey *rkey) {
    return iface_->unexpected_rndv(tag, header, header_length, address, length, rkey);
}
/* Inline in every send: the 8 B path pays two loads and branches for it. */
[[gnu::always_inline]] inline ucs_status_t SmIface::tx_ready(SmEp *ep) {
    if (ucs_unlikely(ep->failed || ep->peer->dead())) {
        return UCS_ERR_CONNECTION_RESET;
    }
    if (ucs_unlikely(ep->backlog.active)) {
        send_backlog(ep); /* nothing live across the call: no register saves on the fast path */
        return UCS_ERR_NO_RESOURCE;
    }
    /* Keep order behind requests already waiting for room. */
    if (ucs_unlikely(!ep->pending.empty() && !dispatching_)) {
        return UCS_ERR_NO_RESOURCE;
    }
    return UCS_OK;
}

inline ucs_status_t SmIfaceLink::tx_ready(SmEp *ep) const { return iface_->tx_ready(ep); }
inline ucs_status_t SmIfaceLink::send_rts(SmEp *ep, uct_tag_t tag, const void *info,
                                          size_t info_length, const void *header,
                                          unsigned header_length) {
    const uct_iov_t hdr = {const_cast<void *>(header), header_length, nullptr, 0, 1};
    return iface_->send_gather(ep, Kind::kTagRndv, 0, tag, 0, info, info_length, &hdr, 1,
                               info_length + header_length, 1);
}

}  // namespace sm
}  // namespace uct_tm

#endif
