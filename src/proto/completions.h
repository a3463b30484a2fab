/*
 * Completions: where requests complete. complete() marks one done and
 * queues it when the caller learns of it at the next progress -- its
 * callback runs, and a request in the caller's memory is published there
 * and let go. Callbacks run only inside progress, never inside the call
 * that completed the request (docs/proto.md "Contract"). A request with
 * neither is not queued: request_test() is how its caller learns.
 */
#ifndef UCT_TM_PROTO_COMPLETIONS_H_
#define UCT_TM_PROTO_COMPLETIONS_H_

#include "mem_maps.h"
#include "registration_cache.h"
#include "request.h"

#include "common/ucs_assert.h"
#include <uct/api/uct.h>

#include <cstdint>
#include <vector>

namespace uct_tm {
namespace proto {

class Completions {
  public:
    Completions(RequestPool &reqs, MemMaps &maps) : reqs_(reqs), maps_(maps) {}
    Completions(const Completions &)            = delete;
    Completions &operator=(const Completions &) = delete;

    bool empty() const { return queued_.empty(); }

    /* Inline: every arrival path ends here. */
    void complete(Request &r, ucs_status_t status);
    /* A receive whose data are all in: truncated if the message was longer. */
    void finish_recv(Request &r) {
        complete(r, (r.info.length > r.capacity) ? UCS_ERR_MESSAGE_TRUNCATED : UCS_OK);
    }
    /* A request in the caller's memory without callback that has just
     * completed (its completion the last one queued) is published at once,
     * not at the next progress: nothing touches it afterwards. */
    void publish_now(Request &r) {
        if ((r.user != nullptr) && (r.cb == nullptr) && r.done && take_last(r.self)) {
            reqs_.retire(r, true);
        }
    }
    /* Lets go of a send's memh (non-null): its own, the cache's or the region's. */
    void drop_memh(Request &r);

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
    template <typename ChildDone> unsigned deliver(ChildDone &&child_done) {
        RequestPool &reqs = reqs_;
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
    RequestPool          &reqs_;
    MemMaps              &maps_;
    std::vector<uint64_t> queued_;
    std::vector<uint64_t> delivering_;
};

inline void Completions::complete(Request &r, ucs_status_t status) {
    ucs_assertv(r.kind != ReqKind::kFree, "completing free request slot %#llx",
                static_cast<unsigned long long>(r.self));
    if (r.done) {
        return;
    }
    if (r.memh != nullptr) {
        /* a send: the receiver is done reading (ACK), or never will (cancel) */
        drop_memh(r);
    }
    r.done        = true;
    r.info.status = status;
    if ((r.cb != nullptr) || (r.user != nullptr)) { /* a NO_COMPLETION send has a cb */
        /* without either, test() is how the caller learns; a request in the
         * caller's memory is published (and let go) at delivery */
        queued_.push_back(r.self);
    }
}

inline void Completions::drop_memh(Request &r) {
    if (r.memh_md != nullptr) {
        uct_md_mem_dereg(r.memh_md, r.memh);
    } else if (r.cached != nullptr) {
        RegistrationCache::put(r.cached);
        r.cached = nullptr;
    } else {
        maps_.unuse(r.region); /* the mapped region's registration */
    }
    r.memh    = nullptr;
    r.memh_md = nullptr;
}

}  // namespace proto
}  // namespace uct_tm

#endif
