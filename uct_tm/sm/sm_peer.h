/*
 * RemotePeer: this iface's attachment to another tm_sm iface — the mapping of
 * its segment, our slot in its peer table, the writer side of its FIFO, and
 * whether its process is still alive. Endpoints to that iface and replies to
 * messages from it (rendezvous FIN) share one attachment.
 */
#ifndef UCT_TM_SM_SM_PEER_H_
#define UCT_TM_SM_SM_PEER_H_

#include "sm_fifo.h"
#include "sm_layout.h"
#include "sm_pack_windows.h"
#include "sm_split_help.h"

#include "base/process_watch.h"

#include <ucs/type/status.h>

#include <algorithm>
#include <cstdint>
#include <vector>

namespace uct_tm {
namespace sm {

/* What identifies an iface: its segment and its serial within its process. */
struct IfaceAddress {
    ShmId    segment;
    uint32_t iface_serial;
    uint32_t reserved;
};
static_assert(sizeof(IfaceAddress) == 32, "iface address wire format");

/* Same host, same PID namespace: what CMA and /proc/<pid>/fd need. */
struct DeviceAddress {
    uint64_t host_id;
};

inline bool same_iface(const IfaceAddress &a, const IfaceAddress &b) {
    return (a.segment.pid == b.segment.pid) && (a.segment.fd == b.segment.fd) &&
           (a.segment.serial == b.segment.serial) && (a.iface_serial == b.iface_serial);
}

/* A control message: header fields and a small inline payload. */
struct ControlMsg {
    Kind        kind;
    uint32_t    aux;
    uint64_t    imm;
    uint64_t    proof  = 0; /* of imm, for answers (sm_layout.h) */
    uint32_t    length = 0;
    PullRequest payload{};
};

struct SmEp;

class RemotePeer {
  public:
    /* Maps the peer's segment and claims a slot in its peer table announcing
     * `self`. Errors: UCS_ERR_UNREACHABLE (not ours to map, other host, not a
     * tm_sm segment), UCS_ERR_EXCEEDS_LIMIT (its peer table is full). */
    static ucs_status_t attach(const IfaceAddress &remote, const IfaceAddress &self,
                               RemotePeer **out);
    /* Without attaching: marks rendezvous send `index`/`gen` of iface
     * `sender` as refused (POSTED -> REJECTED) when no FIN can reach it
     * (its peer table is full); the sender finds it on its next check. */
    static bool reject_rendezvous(const IfaceAddress &sender, uint32_t index, uint32_t gen);
    ~RemotePeer();
    RemotePeer(const RemotePeer &)            = delete;
    RemotePeer &operator=(const RemotePeer &) = delete;

    /* Checks whether the peer process is still there and its iface open;
     * once false, stays false. */
    bool check_alive();

    const IfaceAddress &address() const { return address_; }
    FifoWriter         &fifo() { return fifo_; }
    uint16_t            slot() const { return slot_; }
    int32_t             pid() const { return address_.segment.pid; }
    bool                dead() const { return dead_; }
    /* Its process has exited (by the pidfd taken at attach: a reused pid
     * does not fool it). */
    bool                process_exited() const { return process_.exited(); }
    /* The peer stopped answering (dropped after STOPPED_TIMEOUT). */
    void                declare_dead() { dead_ = true; }
    /* Its failure was reported to the endpoints' error handler. */
    bool                reported() const { return reported_; }
    void                set_reported() { reported_ = true; }
    const Geometry     &geometry() const { return geometry_; }
    /* What one of its FIFO elements carries inline. */
    uint32_t inline_capacity() const { return fifo_.inline_capacity(); }
    /* Most descriptor fragments one message may take in its FIFO: half of
     * it, as for our own eager limit, so a claim always finds room. */
    uint32_t max_fragments() const { return std::max<uint32_t>(1, geometry_.fifo_elems / 2); }

    /* Whether process_vm_readv/writev reaches this peer: unknown until the
     * first try (the kernel may forbid it: ptrace scope, non-dumpable). */
    enum class Cma : uint8_t { kUnknown, kAllowed, kDenied };
    Cma  cma() const { return cma_; }
    void set_cma(Cma state) { cma_ = state; }

    /* The peer's staging chunks (pipelined copies into its memory). */
    char         *staging_chunk(uint32_t i) const {
        return static_cast<char *>(segment_.address()) + geometry_.staging_offset +
               size_t{i} * geometry_.staging_chunk_size;
    }
    StagingState *staging_state(uint32_t i) const {
        return reinterpret_cast<StagingState *>(static_cast<char *>(segment_.address()) +
                                                geometry_.staging_states_offset) + i;
    }

    /* Local address of `length` bytes at `offset` in the peer's MD-allocated
     * segment `id` (mapped on first use), or null. */
    void *map_shm(const ShmId &id, uint64_t offset, uint64_t length);

    /* The peer's rendezvous slot `index`, or null when out of range. */
    RndvSlot *rndv_slot(uint32_t index) const {
        return (index < geometry_.rndv_slots) ? &rndv_slots_[index] : nullptr;
    }

    void touch_descriptors() { descriptor_touch_.before_fragments(segment_, geometry_); }

    /* Windows to pack bcopies at its descriptors; not onto a named segment,
     * which another process may cut short under them (TruncationGuard
     * watches our one mapping of it). */
    void enable_pack_windows(const ShmSegment &spill) {
        if (!shm_is_named(segment_.id())) {
            pack_windows_.init(static_cast<char *>(segment_.address()), geometry_, spill);
        }
    }
    /* Where to pack a bcopy into descriptor `d`, or null (PackWindows). */
    char *pack_window(uint32_t d) { return pack_windows_.payload(d); }

    /* Bookkeeping owned by the iface. */
    uint32_t                refs = 0;      /* endpoints + peer-table entries using it */
    std::vector<ControlMsg> outbox;        /* FINs waiting for FIFO room */
    uint64_t                last_control = 0; /* FIFO sequence of our last control message + 1 */
    std::vector<SmEp *>     eps;           /* endpoints to this peer */
    bool                    geometry_warned = false; /* said a message cannot fit its geometry */
    SplitHelp               split_help; /* whether it writes pieces of our split copies */
    uint64_t                pushed_ns = 0; /* when it last filled a chunk of a takeover pull */

  private:
    RemotePeer() = default;

    IfaceAddress   address_{};
    ShmSegment     segment_;
    DescriptorTouch descriptor_touch_;
    PackWindows     pack_windows_;
    SegmentHeader *header_     = nullptr;
    Geometry       geometry_{};
    FifoWriter     fifo_;
    RndvSlot      *rndv_slots_ = nullptr;
    uint16_t       slot_       = 0;
    uint32_t       slot_word_  = 0; /* our claimed slot's state word */
    ProcessWatch   process_;
    bool           dead_       = false;
    bool           reported_   = false;
    Cma            cma_        = Cma::kUnknown;
    /* Mappings of the peer's MD-allocated buffers, most recent last. */
    std::vector<ShmSegment> shm_maps_;
};

}  // namespace sm
}  // namespace uct_tm

#endif
