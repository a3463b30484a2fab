/*
 * SmRendezvous: a tm_sm iface's rendezvous, both ends, and its one-sided
 * copies (they share the CMA copy and the slot lock an unexpected
 * rendezvous's rkey carries).
 *
 * It holds the table of our outgoing rendezvous sends (RndvOp, one per
 * RndvSlot of our segment), the split copies waiting for their sender's
 * pieces, and the rendezvous settings. Pipelined copies (no CMA to the peer)
 * are SmStagingCopies'; this asks it for them and finishes their receives.
 */
#ifndef UCT_TM_SM_SM_RNDV_H_
#define UCT_TM_SM_SM_RNDV_H_

#include "base/token_proof.h"
#include "sm_copy_choice.h"
#include "sm_deferred_gets.h"
#include "sm_layout.h"
#include "sm_link.h"
#include "sm_split_claim.h"

#include "tag/tag_engine.h"

#include <uct/api/uct.h>

#include <sys/types.h>
#include <sys/uio.h>
#include <vector>

namespace uct_tm {
namespace sm {

class SmStagingCopies;
struct SmConfig;

/* A rendezvous send of this iface, waiting for the receiver's FIN. Free
 * (in the free list) or active; finishing it moves its slot to the next
 * generation, so late answers to the old one find nothing. */
struct RndvOp {
    uct_completion_t *comp    = nullptr;
    SmEp             *ep      = nullptr;
    uint64_t          address = 0; /* our buffer (never read back from shared memory) */
    uint64_t          length  = 0;
    uint32_t          gen     = 1;
    bool              active  = false;
};

/* A rendezvous copy shared with the sender: our pieces are done, the
 * sender's are in flight. Either a matched receive (recv set) or a get_zcopy
 * from an unexpected rendezvous send (recv null, ep/comp of the get). */
struct RemoteKey;

struct SplitCopy {
    TagEngine::Recv  *recv;
    RemotePeer       *sender;
    RndvSlot         *slot;
    uint64_t          token;
    uint64_t          proof; /* of token, from the sender's RTS */
    uct_tag_t         tag;
    size_t            length;       /* the sender's full message length */
    uint32_t          sender_pieces;/* pieces the sender claimed (final) */
    ucs_status_t      status;       /* of our own pieces */
    SmEp             *ep   = nullptr;
    uct_completion_t *comp = nullptr;
    uint64_t          deadline = 0; /* for the sender's pieces (SPLIT_TIMEOUT) */
    uint16_t          epoch    = 0; /* of this attempt in the slot (SplitClaim) */
    CopyTimer         timer    = {}; /* for CopyChoice */
};

class SmRendezvous {
  public:
    /* Rendezvous receives by how their data came, and split gets. */
    struct Counters {
        uint64_t direct    = 0; /* copied from MD shared memory */
        uint64_t cma       = 0; /* one CMA read */
        uint64_t split     = 0; /* split CMA copy */
        uint64_t pipelined = 0; /* through staging chunks */
        uint64_t get_split  = 0; /* get_zcopy split with the key's owner */
        uint64_t pipelined_gets = 0; /* get_zcopy through staging chunks */
        uint64_t get_served = 0; /* get_zcopy invitations we wrote pieces of */
        uint64_t pieces        = 0; /* of our split copies (receives and gets) */
        uint64_t pieces_theirs = 0; /* of those, the ones the other side wrote */
    };

    SmRendezvous(SmIfaceLink iface, SmStagingCopies &staging)
        : iface_(iface), staging_(staging) {}
    /* Our rendezvous slots are `slots` [0, count) of our segment. */
    ucs_status_t init(const SmConfig &config, uct_md_h md, RndvSlot *slots, uint32_t count);

    /* ---- sender ---- */
    ucs_status_ptr_t send(SmEp *ep, uct_tag_t tag, const void *header, unsigned header_length,
                          const uct_iov_t *iov, size_t iovcnt, uct_completion_t *comp);
    ucs_status_t     cancel(SmEp *ep, void *op);
    /* Withdraws `ep`'s sends with UCS_ERR_CANCELED (flush with CANCEL). */
    void             cancel_ep(SmEp *ep);
    /* Withdraws `ep`'s sends without completing them and lets its split
     * gets finish unreported: the endpoint goes. */
    void             forget_ep(SmEp *ep);
    /* Sends to `peer` finish with UCS_ERR_CONNECTION_RESET. */
    void             fail_peer(const RemotePeer *peer);
    void             receive_fin(const Message &m);
    /* The sender's half of a split copy: write pieces from the front. */
    void             receive_rtr(const Message &m);
    /* The owner's half of a split get_zcopy of our memory: the same. */
    void receive_get_rtr(const Message &m);
    /* Periodic: finishes sends their receivers refused (UNREACHABLE). */
    void             check() {
        if (active_ > 0) {
            reap_rejected();
        }
    }
    bool             sends_idle() const { return active_ == 0; }

    /* ---- receiver ---- */
    void             receive_rts(const Message &m);
    bool             has_splits() const { return !splits_.empty(); }
    unsigned         progress_splits();
    /* A receive force-cancelled while a split copy may still write into
     * it: waits out the sender's write in flight. */
    void             orphan_receive(const TagEngine::Recv *recv);

    /* ---- one-sided ---- */
    /* A get with a completion issued from a receive's rndv_cb reports from
     * a later progress (DeferredGets). */
    ucs_status_t     zcopy(SmEp *ep, const uct_iov_t *iov, size_t iovcnt, uint64_t remote_addr,
                           uct_rkey_t rkey, uct_completion_t *comp, bool write);
    bool             has_deferred_gets() const { return !deferred_gets_.empty(); }
    unsigned         progress_deferred_gets() { return deferred_gets_.progress(); }

    /* ---- for SmStagingCopies ---- */
    /* Whether `token` is an active send of ours to `puller` that covers
     * [address, address + length). */
    bool serves(uint64_t token, uint64_t proof, const RemotePeer *puller, uint64_t address,
                uint64_t length) const;
    /* A matched receive of the sender's `token` whose copy ended with
     * `status`: gives the sender's slot back with a FIN, or fails with
     * UCS_ERR_CANCELED if the sender withdrew it meanwhile. */
    void finish_receive(RemotePeer *sender, RndvSlot *slot, uint64_t token, uint64_t proof,
                        TagEngine::Recv *recv, uct_tag_t tag, size_t length, ucs_status_t status);

    /* A copy CopyChoice chose (`way`), timed by `timer`, ended
     * with `status`: its time counts for the next choices. */
    void copied(CopyChoice::Way way, size_t bytes, const CopyTimer &timer, ucs_status_t status);
    const CopyChoice &copy_choice() const { return copy_choice_; }

    /* Reads [remote, remote + length) of process `pid` into the iov list
     * `dest` from byte `offset` on (a pipelined get taken over). */
    ucs_status_t read_by_cma(pid_t pid, const struct iovec *dest, size_t ndest, size_t offset,
                             uint64_t remote, size_t length);

    const Counters  &counters() const { return counters_; }

  private:
    /* How long a cancel waits for a receiver copying the send right now. */
    static constexpr uint64_t kCancelWaitNs = 10 * 1000 * 1000;

    void         reap_rejected();
    /* A matched RTS, its slot locked READING, and where its bytes go. */
    struct MatchedRts {
        RndvInfo         info;
        RemotePeer      *sender;
        TagEngine::Recv *recv;
        uct_tag_t        tag;
        RndvSlot        *slot;
        size_t           want  = 0; /* bytes to copy */
        size_t           count = 0; /* of local */
        struct iovec     local[kMaxRecvIov];
    };
    /* Copies the RTS descriptor out of `m`; false (dropped) if malformed. */
    bool read_rts(const Message &m, RndvInfo *info);
    /* An RTS no receive matched: the iface's rndv callback gets an rkey. */
    void announce_unexpected(const Message &m, const RndvInfo &info, const RemotePeer *sender);
    /* Direct, CMA, split or pipelined: the copy of a matched RTS. */
    void copy_matched(MatchedRts &rts);
    void pull_matched(const MatchedRts &rts, const CopyTimer &timer);
    void finish_matched(const MatchedRts &rts, ucs_status_t status);
    /* An RTS from a peer we cannot attach back to: refuse it in its slot. */
    void         reject(const Message &m, uint64_t token);
    /* The active send `token` names, if `m` comes from the process it was
     * sent to and carries the token's proof; else null (dropped as `what`
     * if not stale). */
    RndvOp      *op_from(const Message &m, uint64_t token, const char *what);
    void         cancel_slot(uint32_t index);
    /* Takes send `index` back from its receiver (slot, pushes) and
     * finishes it with `status`. */
    void         withdraw(uint32_t index, ucs_status_t status);
    void         finish_op(uint32_t index, ucs_status_t status);

    /* Copies pieces of `piece` bytes claimed from one end of `slot->claim`
     * in attempt `epoch` until none is left, between our iov list and the
     * peer's (process `pid`);
     * `write` pushes ours into theirs, each piece only while the slot's word
     * is still `reading` (the receiver gave up waiting otherwise). *claimed
     * counts the pieces taken. */
    static ucs_status_t copy_pieces(RndvSlot *slot, bool from_back, pid_t pid, bool write,
                                    const struct iovec *ours, size_t nours,
                                    const struct iovec *theirs, size_t ntheirs, size_t length,
                                    size_t piece, uint32_t reading, uint16_t epoch,
                                    uint32_t *claimed);
    /* Piece size if copying `want` bytes of `peer`'s memory into `count`
     * local iovecs is worth splitting with it (while it helps), else 0. */
    size_t split_piece(size_t want, size_t count, RemotePeer *peer);
    /* Describes our buffers in `split->slot` (locked READING), sends the
     * other side `invite` and copies pieces from the back; fills the split's
     * sender_pieces and status. */
    void start_split(SplitCopy *split, const struct iovec *local, size_t count, uint64_t address,
                     size_t want, size_t piece, const ControlMsg &invite);
    /* The reader's half of a split as it described it in `slot` (its
     * buffers, length, piece size), each field read once and checked;
     * false: dropped as malformed. */
    bool read_invitation(const Message &m, const RndvSlot &slot, const RemotePeer &reader,
                         uint64_t max_length, struct iovec *theirs, uint32_t *iovcnt,
                         uint64_t *length, uint32_t *piece);
    /* Queues the split for progress while the sender's pieces are in flight
     * (true); false if it can finish now (its status may become an error). */
    bool         keep_split(SplitCopy *split);
    ucs_status_t split_get(SmEp *ep, RndvSlot *slot, const RemoteKey &key,
                           const struct iovec *local, size_t count, size_t length, size_t piece,
                           uct_completion_t *comp, const CopyTimer &timer);
    /* Our half of an invitation: pieces from the front of `source` (ours)
     * into `theirs`, claimed in attempt `epoch` while the slot's word is
     * `reading`; false if CMA does not reach the reader (nothing claimed). */
    bool write_pieces(RndvSlot *slot, RemotePeer *reader, uint64_t source,
                      const struct iovec *theirs, uint32_t iovcnt, uint64_t length, uint32_t piece,
                      uint32_t reading, uint16_t epoch);
    struct OneSided;
    /* A get of memory the owner registered, split with it through a slot
     * of ours (kGetRtr). */
    ucs_status_t split_plain_get(const OneSided &op, size_t piece, const CopyTimer &timer);
    /* What both kinds of split get share once their slot is READING. */
    ucs_status_t start_get_split(SplitCopy split, const struct iovec *local, size_t count,
                                 uint64_t address, size_t piece, const ControlMsg &invite);
    bool         release_get_slot(const SplitCopy &split);
    /* What the sender reported in the split's slot (its epoch unchecked). */
    static SplitDone sender_report(const SplitCopy &split);
    static bool  split_done(const SplitCopy &split);
    /* Waits while the sender may still write into the split's buffers: until
     * it reports its pieces, dies, or the split's deadline passes. */
    static void wait_split(const SplitCopy &split);
    /* The status a split ends with when its sender did not report. */
    static ucs_status_t split_abandoned(const SplitCopy &split);
    static ucs_status_t split_status(const SplitCopy &split, ucs_status_t status);
    void         finish_split(SplitCopy split, ucs_status_t status);

    /* A get or put and its local side, once checked. */
    struct OneSided {
        SmEp             *ep;
        RemoteKey        *key;
        uint64_t          remote_addr;
        uct_completion_t *comp;
        bool              write;
        size_t            total = 0;
        size_t            count = 0; /* of local: the non-empty entries */
        struct iovec      local[kMaxSendIov];
    };
    /* Checks the iov list and the key against the endpoint; fills the rest of `op`. */
    static ucs_status_t check_one_sided(const uct_iov_t *iov, size_t iovcnt, OneSided *op);
    /* `takeover`: CMA may finish it (registered memory, not a send). */
    ucs_status_t pull_get(const OneSided &op, const CopyTimer &timer, bool takeover);
    /* Starts timing a copy of `bytes` CopyChoice decides. */
    CopyTimer    start_timer(size_t bytes) const;
    ucs_status_t zcopy_now(SmEp *ep, const uct_iov_t *iov, size_t iovcnt, uint64_t remote_addr,
                           uct_rkey_t rkey, uct_completion_t *comp, bool write);
    ucs_status_t zcopy_deferred(SmEp *ep, const uct_iov_t *iov, size_t iovcnt,
                                uint64_t remote_addr, uct_rkey_t rkey, uct_completion_t *comp,
                                bool write);

    /* True if CMA reaches `peer` (probed once on `address`, a buffer of its). */
    bool         cma_allowed(RemotePeer *peer, uint64_t address);
    ucs_status_t cma_copy(pid_t pid, struct iovec *local, size_t count, uint64_t remote,
                          size_t length, bool write);

    SmIfaceLink      iface_;
    SmStagingCopies &staging_;
    uct_md_h         md_ = nullptr; /* whose registrations a get invitation may read */
    TokenProof       proof_; /* of our sends' tokens */

    /* settings */
    bool   split_enabled_  = true;
    size_t split_min_      = 0;
    size_t shm_direct_max_ = 0;
    uint64_t split_timeout_  = 0; /* ns */
    bool   cma_enabled_    = true;
    bool   cma_warned_     = false;
    CopyChoice copy_choice_;
    uint64_t   last_copy_end_ns_ = 0; /* of the last timed copy, and how long it took */
    uint64_t   last_copy_ns_     = 0;

    /* our sends: ops_[i] owns slots_[i] */
    RndvSlot             *slots_ = nullptr;
    std::vector<RndvOp>   ops_;
    std::vector<uint32_t> free_ops_;
    size_t                active_ = 0;

    std::vector<SplitCopy> splits_; /* copies waiting for their sender's pieces */
    DeferredGets           deferred_gets_;
    Counters               counters_;
};

}  // namespace sm
}  // namespace uct_tm

#endif
