/*
 * DirectRecv: a receive posted to the transport's tag list straight from the
 * caller's request memory (UCT_TM_PROTO_OP_USER_REQUEST, no callback), with no
 * request slot: the memory holds the transport's context and what the
 * completion needs. Most receives of a polling program complete as eager
 * messages into their buffer, and then this is all the state they ever have;
 * one that leaves that path (a rendezvous arrival) moves into a request slot
 * first. The worker keeps the live ones in a list, so that cancel_user() can
 * check a caller's memory before believing it, and worker destruction can
 * take them off the tag list.
 */
#ifndef UCT_TM_PROTO_DIRECT_RECV_H_
#define UCT_TM_PROTO_DIRECT_RECV_H_

#include "request.h"

#include <uct/api/uct.h>

#include <cstddef>
#include <cstdint>
#include <type_traits>

namespace uct_tm {
namespace proto {

class Worker;

struct DirectRecv {
    uct_tag_context_t uct;      /* first: the transport's callbacks get its address */
    Worker           *worker;
    DirectRecv       *prev;     /* the worker's list of live ones */
    DirectRecv       *next;
    char             *rbuf;
    size_t            capacity;
    uint64_t          tag;
    uint64_t          mask;
    bool              consumed; /* tag_consumed_cb ran: the transport matched it */
};
static_assert(std::is_standard_layout<DirectRecv>::value &&
                      std::is_trivially_copyable<DirectRecv>::value,
              "a DirectRecv lives in memory the library does not own");
static_assert(offsetof(DirectRecv, uct) == 0, "the UCT context must sit at offset 0");

/* After the status prefix and the handle word (0 for a DirectRecv). */
inline constexpr size_t kDirectRecvOffset =
        align_up(kUserHandleOffset + sizeof(uint64_t), alignof(DirectRecv));
static_assert(kDirectRecvOffset + sizeof(DirectRecv) <= UCT_TM_PROTO_REQUEST_SIZE,
              "UCT_TM_PROTO_REQUEST_SIZE must hold a DirectRecv");
static_assert(alignof(DirectRecv) <= UCT_TM_PROTO_REQUEST_ALIGN,
              "UCT_TM_PROTO_REQUEST_ALIGN must align a DirectRecv");

inline DirectRecv *direct_recv_in(void *memory) {
    return reinterpret_cast<DirectRecv *>(static_cast<char *>(memory) + kDirectRecvOffset);
}

inline uct_tm_proto_request_status_t *status_of(DirectRecv *d) {
    return reinterpret_cast<uct_tm_proto_request_status_t *>(reinterpret_cast<char *>(d) -
                                                             kDirectRecvOffset);
}

/* The worker's live DirectRecvs (intrusive: no allocation). */
class DirectRecvList {
  public:
    void push(DirectRecv *d) {
        d->prev = nullptr;
        d->next = head_;
        if (head_ != nullptr) {
            head_->prev = d;
        }
        head_ = d;
    }
    void erase(DirectRecv *d) {
        if (d->prev != nullptr) {
            d->prev->next = d->next;
        } else {
            head_ = d->next;
        }
        if (d->next != nullptr) {
            d->next->prev = d->prev;
        }
    }
    /* Whether `d` is one of ours (a walk: for cancel_user() only, where the
     * memory is the caller's word). */
    bool contains(const DirectRecv *d) const {
        for (const DirectRecv *p = head_; p != nullptr; p = p->next) {
            if (p == d) {
                return true;
            }
        }
        return false;
    }
    DirectRecv *front() const { return head_; }

  private:
    DirectRecv *head_ = nullptr;
};

}  // namespace proto
}  // namespace uct_tm

#endif
