/*
 * Pending requests (uct_ep_pending_add): each endpoint's FIFO of requests
 * waiting for send resources, and the iface's list of endpoints that have
 * some. Requests are linked through their own priv area, as UCT allows, so
 * queueing never allocates; the endpoint list grows only to a new maximum.
 */
#ifndef UCT_TM_BASE_PENDING_QUEUE_H_
#define UCT_TM_BASE_PENDING_QUEUE_H_

#include "common/alloc_status.h"

#include <uct/api/uct.h>

#include <algorithm>
#include <cstddef>
#include <new>
#include <vector>

namespace uct_tm {

class PendingQueue {
  public:
    bool empty() const { return head_ == nullptr; }

    void push_back(uct_pending_req_t *req) {
        next(req) = nullptr;
        if (tail_ != nullptr) {
            next(tail_) = req;
        } else {
            head_ = req;
        }
        tail_ = req;
    }

    /* A request that could not finish goes back where it was. */
    void push_front(uct_pending_req_t *req) {
        next(req) = head_;
        head_     = req;
        if (tail_ == nullptr) {
            tail_ = req;
        }
    }

    uct_pending_req_t *pop_front() {
        uct_pending_req_t *req = head_;
        head_                  = next(req);
        if (head_ == nullptr) {
            tail_ = nullptr;
        }
        return req;
    }

    /* uct_ep_pending_purge: hands every request to `cb` (if any), oldest first. */
    void purge(uct_pending_purge_callback_t cb, void *arg) {
        while (!empty()) {
            uct_pending_req_t *req = pop_front();
            if (cb != nullptr) {
                cb(req, arg);
            }
        }
    }

  private:
    static_assert(sizeof(uct_pending_req_t::priv) >= sizeof(uct_pending_req_t *),
                  "the link lives in the request's private area");
    static uct_pending_req_t *&next(uct_pending_req_t *req) {
        return *reinterpret_cast<uct_pending_req_t **>(req->priv);
    }

    uct_pending_req_t *head_ = nullptr;
    uct_pending_req_t *tail_ = nullptr;
};

/* The endpoints of an iface with pending requests. `Ep` has members
 * `PendingQueue pending` and `bool in_pending_list`. */
template <typename Ep> class PendingEndpoints {
  public:
    bool empty() const { return eps_.empty(); }
    void reserve(size_t n) { eps_.reserve(n); }

    /* Queues `req` on `ep` (the caller decided it must wait). */
    ucs_status_t add(Ep *ep, uct_pending_req_t *req) {
        if (!ep->in_pending_list) {
            if (alloc_status([&] { eps_.push_back(ep); }) != UCS_OK) {
                return UCS_ERR_NO_MEMORY;
            }
            ep->in_pending_list = true;
        }
        ep->pending.push_back(req);
        return UCS_OK;
    }

    /* An endpoint being destroyed. */
    void remove(Ep *ep) {
        eps_.erase(std::remove(eps_.begin(), eps_.end(), ep), eps_.end());
        ep->in_pending_list = false;
    }

    /* Runs each endpoint's requests in order while `can_send(ep)`; a request
     * that does not return UCS_OK goes back in front and the endpoint waits.
     * `dispatching` is set around each request so the iface can tell that a
     * send comes from a pending request (and may overtake the queue). Requests
     * may add or remove endpoints: the list is indexed, not iterated. Returns
     * the requests done. */
    template <typename CanSend>
    unsigned dispatch(const CanSend &can_send, bool &dispatching) {
        unsigned count = 0;
        for (size_t i = 0; i < eps_.size();) {
            Ep *ep = eps_[i];
            while (!ep->pending.empty() && can_send(ep)) {
                uct_pending_req_t *req    = ep->pending.pop_front();
                dispatching               = true;
                const ucs_status_t status = req->func(req);
                dispatching               = false;
                if (status != UCS_OK) {
                    ep->pending.push_front(req);
                    break;
                }
                ++count;
            }
            if ((i < eps_.size()) && (eps_[i] == ep) && ep->pending.empty()) {
                ep->in_pending_list = false;
                eps_.erase(eps_.begin() + static_cast<ptrdiff_t>(i));
            } else {
                ++i;
            }
        }
        return count;
    }

  private:
    std::vector<Ep *> eps_;
};

}  // namespace uct_tm

#endif
