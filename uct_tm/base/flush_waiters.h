/*
 * Flushes in progress (uct_ep_flush / uct_iface_flush that returned
 * UCS_INPROGRESS): each waits until the transport says its endpoint (or the
 * whole iface, for a null endpoint) has nothing outstanding, then its
 * completion is called with UCS_OK.
 */
#ifndef UCT_TM_BASE_FLUSH_WAITERS_H_
#define UCT_TM_BASE_FLUSH_WAITERS_H_

#include "completion.h"
#include "common/alloc_status.h"

#include <algorithm>
#include <cstddef>
#include <new>
#include <vector>

namespace uct_tm {

template <typename Ep> class FlushWaiters {
  public:
    bool empty() const { return waiters_.empty(); }

    /* The flush is not done yet: UCS_INPROGRESS, and `comp` (if any) is
     * called once it is. */
    ucs_status_t wait(Ep *ep, uct_completion_t *comp) {
        if ((comp != nullptr) &&
            (alloc_status([&] { waiters_.push_back(Waiter{ep, comp}); }) != UCS_OK)) {
            return UCS_ERR_NO_MEMORY;
        }
        return UCS_INPROGRESS;
    }

    /* An endpoint being destroyed: its flushes are never reported. */
    void forget(Ep *ep) {
        waiters_.erase(std::remove_if(waiters_.begin(), waiters_.end(),
                                      [ep](const Waiter &w) { return w.ep == ep; }),
                       waiters_.end());
    }

    /* Completes every flush for which `done(ep)` holds. */
    template <typename Done> void complete_done(const Done &done) {
        for (size_t i = 0; i < waiters_.size();) {
            const Waiter w = waiters_[i];
            if (!done(w.ep)) {
                ++i;
                continue;
            }
            waiters_.erase(waiters_.begin() + static_cast<ptrdiff_t>(i));
            complete(w.comp, UCS_OK);
            i = 0; /* the callback may have changed the list */
        }
    }

  private:
    struct Waiter {
        Ep               *ep; /* null: iface flush */
        uct_completion_t *comp;
    };
    std::vector<Waiter> waiters_;
};

}  // namespace uct_tm

#endif
