/*
 * The operations an endpoint has in flight: slots reused LIFO, so posting
 * and completing allocate nothing once the pool has grown to the depth the
 * application keeps (a std::list node per operation cost a malloc and a
 * free on every message). Posting order, which fi_cancel's "earliest
 * operation with this context" needs, is a sequence number.
 */
#ifndef UCT_TM_FABRIC_OP_POOL_H_
#define UCT_TM_FABRIC_OP_POOL_H_

#include "provider.h"

#include "match/slot_pool.h"

#include <cstdint>

namespace uct_tm {
namespace fabric {

class Endpoint;

/* An operation the layer has not completed yet. */
struct Op {
    Endpoint              *ep      = nullptr;
    void                  *context = nullptr;
    uint64_t               flags  = 0; /* the completion's: FI_SEND / FI_RECV, FI_TAGGED / FI_MSG */
    void                  *buf    = nullptr; /* receives: the (first) buffer */
    size_t                 len    = 0;       /* the operation's length (a vector's sum) */
    uct_tm_proto_request_t req    = 0;
    uint64_t               seq    = 0; /* posting order */
    uint32_t               slot   = 0;
    uint32_t               next   = match::kNoIndex; /* the free list, while free */
    bool                   live   = false;
    bool                   report = false; /* write a completion on success */
    bool                   multi  = false; /* FI_MULTI_RECV: a completion per message */

    uint32_t &free_link() { return next; }
};

class OpPool {
  public:
    /* A live op, every field set; null if the pool could not grow. */
    Op *take(Endpoint *ep, void *context, uint64_t flags, void *buf, size_t len,
             bool report) noexcept {
        const auto s = slots_.try_allocate_slot();
        if (s.entry == nullptr) {
            return nullptr;
        }
        Op &op        = *s.entry; /* each field stored once: no temporary copied in */
        op.ep         = ep;
        op.context    = context;
        op.flags      = flags;
        op.buf        = buf;
        op.len        = len;
        op.req        = 0;
        op.seq        = next_seq_++;
        op.slot       = s.index;
        op.live       = true;
        op.report     = report;
        op.multi      = false;
        return &op;
    }

    void release(Op &op) {
        op.live = false;
        slots_.release(op.slot, op);
    }

    /* The earliest-posted live op `pred` accepts, or null. */
    template <typename Pred> Op *earliest(Pred &&pred) {
        Op *found = nullptr;
        for (uint32_t i = 0; i < slots_.issued(); ++i) {
            Op &op = slots_[i];
            if (op.live && pred(op) && ((found == nullptr) || (op.seq < found->seq))) {
                found = &op;
            }
        }
        return found;
    }

  private:
    match::SlotPool<Op, 6> slots_;
    uint64_t               next_seq_ = 0;
};

}  // namespace fabric
}  // namespace uct_tm

#endif
