/*
 * DeferredGets: get_zcopy operations whose copy is done but whose completion
 * is reported from the iface's next progress.
 *
 * UCP posts a large receive to the tag list with its buffer registered,
 * answers a software rendezvous request matching it with a GET issued from
 * the receive's rndv_cb, and deregisters the buffer only after rndv_cb
 * returns. The GET's completion checks that the registration is gone (UCP
 * 1.13 asserts), so it must not run before rndv_cb has returned — with an
 * RDMA READ it never does. A copy finished inside the callback is therefore
 * reported later: the caller gets UCS_INPROGRESS, the completion runs from
 * the iface's next progress (its slow part, so the polling loop checks
 * nothing more), and the endpoint does not flush until it has run. So is one
 * the user started outside progress: UCP completes a receive whose get
 * finished inside ucp_tag_msg_recv_nbx through a path that passes the
 * callback a user_data it was not given.
 */
#ifndef UCT_TM_SM_SM_DEFERRED_GETS_H_
#define UCT_TM_SM_SM_DEFERRED_GETS_H_

#include "common/alloc_status.h"

#include <uct/api/uct.h>

#include <algorithm>
#include <vector>

namespace uct_tm {
namespace sm {

struct SmEp;

class DeferredGets {
  public:
    /* Room for one more, before the copy starts: add() then cannot fail. */
    ucs_status_t make_room() {
        if (pending_.size() < pending_.capacity()) {
            return UCS_OK;
        }
        return alloc_status([this] {
            pending_.reserve(std::max<size_t>(4, 2 * pending_.capacity()));
            delivering_.reserve(pending_.capacity());
        });
    }
    /* A get of `ep` finished its copy; `comp` is called from progress(). */
    void add(SmEp *ep, uct_completion_t *comp);
    bool empty() const { return pending_.empty(); }
    /* Calls the completions added before this call; returns how many. */
    unsigned progress();
    /* `ep` goes: its gets finish unreported (their completions belong to an
     * endpoint the user gave up). */
    void forget_ep(const SmEp *ep);

  private:
    struct Get {
        SmEp             *ep;
        uct_completion_t *comp;
    };
    std::vector<Get> pending_;
    std::vector<Get> delivering_; /* progress() swaps: completions may add more */
};

}  // namespace sm
}  // namespace uct_tm

#endif
