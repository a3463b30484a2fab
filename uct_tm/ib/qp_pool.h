/*
 * QpPool: the bounded pool of RC queue pairs that tm_dc's endpoints share
 * as initiators, connected on demand (UCX_TM_DC_QP_POOL_SIZE, read under its
 * old name NUM_DCI too: RC queue pairs, not DC initiators), and its policy
 * -- apart from how a queue pair is made or dropped, which the iface does
 * (ConnectOnDemand, rc_on_demand.cc):
 *  - an endpoint with something to send holds one of the pool's queue pairs;
 *  - when all are held, endpoints wait, first come first served (none jumps
 *    the queue: a new request waits behind the waiters even if a queue pair
 *    could be freed for it);
 *  - room is made by evicting the least recently used holder that is idle
 *    (the iface says which are: nothing in flight).
 * Ep needs a `uint64_t last_use`. No allocation but the vectors' growth
 * (callers wrap it: std::bad_alloc).
 */
#ifndef UCT_TM_IB_QP_POOL_H_
#define UCT_TM_IB_QP_POOL_H_

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <vector>

namespace uct_tm {
namespace ib {

template <typename Ep> class QpPool {
  public:
    void   set_capacity(size_t n) { capacity_ = n; }
    size_t capacity() const { return capacity_; }
    size_t held() const { return holders_.size(); }
    bool   has_waiters() const { return !waiters_.empty(); }
    const std::vector<Ep *> &holders() const { return holders_; }

    /* `ep` took a queue pair (or is connecting one). */
    void hold(Ep *ep) { holders_.push_back(ep); }
    /* `ep` no longer holds one (making it failed). */
    void unhold(Ep *ep) {
        holders_.erase(std::remove(holders_.begin(), holders_.end(), ep), holders_.end());
    }
    /* `ep` waits for one, behind the others (a new request waits whenever
     * anyone does). */
    void wait(Ep *ep) { waiters_.push_back(ep); }

    /* Hands queue pairs to the waiters, in order, while room() says there is
     * one; take(ep) makes it (and hold()s it, or not if that failed). take
     * must not call leave() or wait(). */
    template <typename Room, typename Take> void serve(Room &&room, Take &&take) {
        size_t served = 0;
        while ((served < waiters_.size()) && room()) {
            take(waiters_[served++]);
        }
        waiters_.erase(waiters_.begin(), waiters_.begin() + served);
    }

    /* Room for one more holder: below capacity, or the least recently used
     * idle holder evicted (evict(ep) drops its queue pair; it no longer
     * holds one). */
    template <typename Idle, typename Evict>
    bool room(uint64_t now, Idle &&idle, Evict &&evict) {
        if (holders_.size() < capacity_) {
            return true;
        }
        auto lru = holders_.end();
        for (auto it = holders_.begin(); it != holders_.end(); ++it) {
            if (idle(*it, now) && ((lru == holders_.end()) || ((*it)->last_use < (*lru)->last_use))) {
                lru = it;
            }
        }
        if (lru == holders_.end()) {
            return false;
        }
        Ep *const ep = *lru;
        holders_.erase(lru);
        evict(ep);
        return true;
    }

    /* `ep` leaves the pool (destroyed, failed): holds and waits no more. */
    void leave(Ep *ep) {
        unhold(ep);
        waiters_.erase(std::remove(waiters_.begin(), waiters_.end(), ep), waiters_.end());
    }

  private:
    size_t            capacity_ = 0;
    std::vector<Ep *> holders_; /* holding a queue pair (connecting or connected) */
    std::vector<Ep *> waiters_; /* waiting for one, first come first */
};

}  // namespace ib
}  // namespace uct_tm

#endif
