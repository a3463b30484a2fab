/*
 * TmModel: a software model of a NIC's tag-matching engine (the TM SRQ of
 * rdma-core, as implemented by ConnectX and its mlx5 provider), behind the
 * tag list seam (tm_list.h). It exists because no machine here has such a
 * NIC: the driver above it is tested against every race the real engine can
 * produce, one at a time and in seeded random orders.
 *
 * Rules (sources in docs/tm_hw_list.md):
 *  1. List operations execute asynchronously, in posting order, one per
 *     step_command(). ADD returns its handle at post time; the list is full
 *     (UCS_ERR_EXCEEDS_LIMIT) while max_num_tags handles are held. A handle
 *     is held until software has polled every completion it expects for it
 *     (signaled ADD/DEL, and the consume or the successful DEL), as the mlx5
 *     provider accounts it. At most max_ops operations are outstanding; an
 *     operation retires when a later-or-same signaled completion is polled.
 *  2. The engine counts the unexpected tagged messages it delivered (hw
 *     count); operations with kTmOpSyncCount report software's count. The
 *     engine matches only while the two agree; otherwise every tagged
 *     message is unexpected. List-op completions carry SYNC_REQ when the
 *     counts disagree after the op; unexpected completions carry it once
 *     the difference exceeds Config::sync_req_diff.
 *  3. A tagged arrival, while in sync, takes the earliest-added listed entry
 *     whose (tag & mask) matches. Eager: a message that fits one MTU
 *     completes with MATCH|DATA_VALID; a longer one reports MATCH at once and
 *     DATA_VALID when its transfer step runs (the sender's next message waits
 *     for it: RC delivers in order). A payload larger than the buffer
 *     completes with kLengthError (truncated data).
 *  4. Rendezvous: MATCH at once, then a transfer step performs the RDMA READ
 *     from the modelled remote memory, completes DATA_VALID and sends FIN to
 *     the sender. A buffer smaller than the RVH length completes at once with
 *     kRndvIncomplete, MATCH|DATA_VALID and TMH+RVH+header scattered into the
 *     tagged buffer; software finishes it (and sends FIN).
 *  5. DEL removes a listed entry (success) or fails with kTmErr when the
 *     entry was consumed before the DEL executed.
 *  6. Unexpected tagged messages, NO_TAG and FIN messages land whole in the
 *     next untagged buffer (FIFO); with none posted the arrival waits (RNR).
 *     NO_TAG and FIN are not counted as unexpected.
 *  7. (docs: rule 10) Messages of different connections are processed in any order, except
 *     that a connection made after a message arrived cannot deliver ahead of
 *     it: a NIC processes a message before it acknowledges it, and the new
 *     connection's messages may have been sent because of that
 *     acknowledgement (tm_dc closes an idle connection once every send on it
 *     was acknowledged and connects again: its order must hold).
 *
 * Scheduling: nothing happens until a step function runs. Tests choose the
 * order (step_command / step_arrival / step_transfer), run everything in a
 * fixed order (run_until_idle), or pick uniformly among the enabled events
 * with a seeded generator (step_random).
 *
 * Misuse that the real provider would turn into corruption (a handle
 * released twice, DEL of a free handle) is refused or counted in
 * violations(); tests assert it stays 0.
 */
#ifndef UCT_TM_IB_TM_MODEL_H_
#define UCT_TM_IB_TM_MODEL_H_

#include "tag/tm_list.h"

#include <cstddef>
#include <cstdint>
#include <deque>
#include <map>
#include <random>
#include <vector>

namespace uct_tm {
namespace ib {

struct TmModelConfig {
    TmCaps   caps{64, 130, 1, 64};
    uint32_t mtu           = 4096; /* eager messages (TMH included) above it are multi-packet */
    uint32_t sync_req_diff = 8;    /* unexpected completions ask for SYNC beyond this gap */
    /* List-op completions wait for step_op_completion(): they may then
     * reach the CQ after receive completions generated later (the
     * engine's command and receive paths are not ordered in the CQ). */
    bool defer_op_completions = false;
};

class TmModel {
  public:
    using Config = TmModelConfig;

    /* The rest of the fabric, as seen by the engine. */
    struct Fabric {
        /* RDMA READ of the sender's memory; false: remote access error. */
        bool (*read)(void *arg, uint32_t src_qp, uint64_t va, uint32_t rkey, void *dst,
                     size_t len) = nullptr;
        /* A message the engine sends itself (FIN) to connection `dst_qp`. */
        void (*send)(void *arg, uint32_t dst_qp, const void *msg, size_t len) = nullptr;
        void *arg = nullptr;
    };

    explicit TmModel(const Config &config = Config());
    TmModel(const TmModel &)            = delete;
    TmModel &operator=(const TmModel &) = delete;

    /* ---- the seam ---- */
    const TmCaps &caps() const { return config_.caps; }
    ucs_status_t  post_op(TmOp &op);
    ucs_status_t  post_recv(uint64_t wr_id, const TmSge &sge);
    unsigned      poll(TmCompletion *out, unsigned max);

    /* ---- the wire ---- */
    void set_fabric(const Fabric &fabric) { fabric_ = fabric; }
    /* A message from connection src_qp (TMH [+ RVH] + payload, or NO_TAG). */
    void deliver(uint32_t src_qp, const void *msg, size_t len, bool with_imm = false,
                 uint32_t imm = 0);
    /* Connection src_qp was connected just now: its messages do not overtake
     * any delivered before (rule 7). */
    void connected_now(uint32_t src_qp) { barriers_[src_qp] = msg_seq_; }

    /* ---- the scheduler ---- */
    bool   step_command();                /* the oldest posted list operation */
    bool   step_arrival();                /* the oldest message that can proceed */
    bool   step_arrival(uint32_t src_qp); /* the next message from src_qp */
    bool   step_transfer(size_t index = 0); /* an in-flight data transfer */
    bool   step_op_completion();          /* the oldest deferred list-op completion */
    size_t run_until_idle(size_t max_steps = 1000000);
    bool   step_random(std::mt19937_64 &rng);
    bool   idle() const;

    size_t pending_commands() const { return commands_.size(); }
    size_t pending_arrivals() const;
    size_t pending_transfers() const { return transfers_.size(); }
    size_t pending_completions() const { return cq_.size(); }
    size_t deferred_op_completions() const { return op_cqes_.size(); }
    size_t untagged_buffers() const { return untagged_.size(); }

    /* ---- state, for tests ---- */
    uint32_t hw_unexpected() const { return hw_count_; }
    uint32_t sw_unexpected() const { return sw_count_; }
    bool     in_sync() const { return hw_count_ == sw_count_; }
    size_t   listed() const { return list_.size(); }
    size_t   held_handles() const { return held_; }
    size_t   outstanding_ops() const { return static_cast<size_t>(op_posted_ - op_retired_); }
    /* Per-sender entries held (queued messages, a multi-packet eager in
     * flight, a connection barrier): 0 once everything delivered is done. */
    size_t   tracked_senders() const { return arrivals_.size() + blocked_.size() + barriers_.size(); }

    struct Counters {
        uint64_t matches         = 0;
        uint64_t unexpected      = 0;
        uint64_t no_tag          = 0;
        uint64_t rndv_reads      = 0;
        uint64_t rndv_incomplete = 0;
        uint64_t fins_sent       = 0;
        uint64_t del_failed      = 0;
        uint64_t rnr_waits       = 0;
    };
    const Counters &counters() const { return counters_; }
    uint64_t        violations() const { return violations_; }

    /* Fault injection: the next rendezvous read fails (remote access error). */
    void fail_next_read() { fail_next_read_ = true; }
    struct FailedRead {
        uint32_t src_qp;
        uint32_t rkey;
        uint64_t va;
        void    *buffer; /* the tagged buffer it was for */
    };
    const std::vector<FailedRead> &failed_reads() const { return failed_reads_; }

  private:
    enum class EntryState : uint8_t { kFree, kPosted, kListed, kConsumed, kGone };

    struct Entry {
        EntryState state = EntryState::kFree;
        int32_t    refs  = 0; /* completions software still has to poll */
        bool       del_posted = false;
        uint64_t   recv_wr_id = 0;
        uint64_t   tag = 0, mask = 0;
        TmSge      sge;
    };

    struct Command {
        TmOp     op;
        uint64_t seq;
    };

    struct Message {
        std::vector<uint8_t> bytes;
        bool                 with_imm;
        uint32_t             imm;
        uint64_t             seq;
    };

    struct Transfer {
        uint32_t             entry;
        uint32_t             src_qp;
        bool                 rndv;
        std::vector<uint8_t> message; /* eager: TMH + payload; rndv: TMH + RVH + header */
        bool                 with_imm;
        uint32_t             imm;
    };

    struct Cqe {
        TmCompletion c;
        int64_t      entry       = -1; /* handle this completion releases refs of */
        int32_t      release     = 0;  /* refs released when polled */
        int64_t      op_seq      = -1; /* signaled op: retires ops up to it */
    };

    bool     arrival_ready(uint32_t src_qp) const;
    int64_t  find_match(uint64_t tag) const;
    bool     process_arrival(uint32_t src_qp);
    /* process_arrival()'s steps: the oldest message from `src_qp` off its
     * queue; a matched rendezvous request (its read queued, or its headers
     * placed for software to finish it when the buffer is too small). */
    Message  pop_arrival(uint32_t src_qp);
    void     match_rndv(uint32_t entry, uint32_t src_qp, const Message &msg, TmCompletion c);
    void     deliver_untagged(uint32_t src_qp, const Message &msg, TmCqeOpcode opcode,
                              bool count);
    void     complete_entry(uint32_t entry, TmCompletion c);
    void     report_match(uint32_t entry, const TmCompletion &c);
    void     place_eager(uint32_t entry, const std::vector<uint8_t> &message, bool with_imm,
                         uint32_t imm, TmCompletion *c);
    void     unlist(uint32_t entry);
    void     release_refs(int64_t entry, int32_t n);
    uint32_t allocate_handle();

    Config                                 config_;
    Fabric                                 fabric_;
    std::vector<Entry>                     entries_;
    std::deque<uint32_t>                   free_handles_;
    size_t                                 held_ = 0;
    std::vector<uint32_t>                  list_; /* listed entries, in ADD execution order */
    std::deque<Command>                    commands_;
    std::map<uint32_t, std::deque<Message>> arrivals_;
    std::map<uint32_t, bool>               blocked_; /* sender with a multi-packet eager in flight */
    std::map<uint32_t, uint64_t>           barriers_; /* rule 7: msg_seq_ when src_qp connected */
    std::deque<std::pair<uint64_t, TmSge>> untagged_;
    std::vector<Transfer>                  transfers_;
    std::deque<Cqe>                        cq_;
    std::deque<Cqe>                        op_cqes_; /* deferred list-op completions */
    uint64_t                               op_posted_  = 0;
    uint64_t                               op_retired_ = 0;
    uint64_t                               msg_seq_    = 0;
    uint32_t                               hw_count_   = 0;
    uint32_t                               sw_count_   = 0;
    bool                                   fail_next_read_ = false;
    std::vector<FailedRead>                failed_reads_;
    Counters                               counters_;
    uint64_t                               violations_ = 0;
};

static_assert(is_tm_list<TmModel>::value, "TmModel implements the tag list seam");

}  // namespace ib
}  // namespace uct_tm

#endif
