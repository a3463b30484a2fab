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

#include <ucs/type/status.h>

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

/* A control message that could not be sent yet (peer FIFO full). */
struct ControlMsg {
    Kind     kind;
    uint32_t aux;
    uint64_t imm;
};

class SmEp;

class RemotePeer {
  public:
    /* Maps the peer's segment and claims a slot in its peer table announcing
     * `self`. Errors: UCS_ERR_UNREACHABLE (not ours to map, other host, not a
     * tm_sm segment), UCS_ERR_EXCEEDS_LIMIT (its peer table is full). */
    static ucs_status_t attach(const IfaceAddress &remote, const IfaceAddress &self,
                               RemotePeer **out);
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
    /* Its failure was reported to the endpoints' error handler. */
    bool                reported() const { return reported_; }
    void                set_reported() { reported_ = true; }
    const Geometry     &geometry() const { return geometry_; }

    /* The peer's rendezvous slot `index`, or null when out of range. */
    RndvSlot *rndv_slot(uint32_t index) const {
        return (index < geometry_.rndv_slots) ? &rndv_slots_[index] : nullptr;
    }

    /* Bookkeeping owned by the iface. */
    uint32_t                refs = 0;      /* endpoints + peer-table entries using it */
    std::vector<ControlMsg> outbox;        /* FINs waiting for FIFO room */
    std::vector<SmEp *>     eps;           /* endpoints to this peer */

  private:
    RemotePeer() = default;

    IfaceAddress   address_{};
    ShmSegment     segment_;
    SegmentHeader *header_     = nullptr;
    Geometry       geometry_{};
    FifoWriter     fifo_;
    RndvSlot      *rndv_slots_ = nullptr;
    uint16_t       slot_       = 0;
    uint32_t       slot_word_  = 0; /* our claimed slot's state word */
    int            pidfd_      = -1;
    bool           dead_       = false;
    bool           reported_   = false;
};

}  // namespace sm
}  // namespace uct_tm

#endif
