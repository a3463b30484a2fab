/*
 * Completions: the requests whose completion the caller learns at the next
 * progress -- their callback runs, and a request in the caller's memory is
 * published there and let go. Callbacks run only inside progress, never
 * inside the call that completed the request (docs/proto.md "Contract").
 * A request with neither is not queued: request_test() is how its caller
 * learns.
 */
#ifndef UCT_TM_PROTO_COMPLETIONS_H_
#define UCT_TM_PROTO_COMPLETIONS_H_

#include "request.h"

#include <cstdint>
#include <vector>

namespace uct_tm {
namespace proto {

class Completions {
  public:
    bool empty() const { return queued_.empty(); }

    void push(uint64_t handle) { queued_.push_back(handle); }

    /* Takes back the completion just queued if it is `handle`'s: its
     * request completed inside the call that made it. */
    bool take_last(uint64_t handle) {
        if (queued_.empty() || (queued_.back() != handle)) {
            return false;
        }
        queued_.pop_back();
        return true;
    }

    /* Runs the queued callbacks and publishes the queued requests in the
     * caller's memory (after their callback); how many. Completions queued
     * by a callback wait for the next call. A multi-receive's child goes to
     * `child_done` (which reports it through its parent and releases it). */
    template <typename ChildDone> unsigned deliver(RequestPool &reqs, ChildDone &&child_done) {
        delivering_.swap(queued_);
        unsigned n = 0;
        for (uint64_t h : delivering_) {
            Request *r = reqs.lookup(h);
            if (r == nullptr) {
                ++n;
                continue;
            }
            const bool user = r->user != nullptr;
            if (r->parent != 0) {
                child_done(*r);
                ++n;
                continue;
            }
            if (r->quiet) {
                /* NO_COMPLETION: nobody holds it; the callback hears of failures only */
                const uct_tm_proto_info_t info = r->info;
                const uct_tm_proto_cb_t   cb   = r->cb;
                void *const               arg  = r->arg;
                reqs.release(h);
                if ((cb != nullptr) && (info.status != UCS_OK)) {
                    cb(arg, 0, &info);
                }
                ++n;
                continue;
            }
            if (r->cb != nullptr) {
                const uct_tm_proto_info_t info = r->info;
                r->cb(r->arg, handed_out(*r), &info);
            }
            if (user && ((r = reqs.lookup(h)) != nullptr)) {
                reqs.retire(*r, true); /* published after its callback */
            }
            ++n;
        }
        delivering_.clear();
        return n;
    }

  private:
    std::vector<uint64_t> queued_;
    std::vector<uint64_t> delivering_;
};

}  // namespace proto
}  // namespace uct_tm

#endif
