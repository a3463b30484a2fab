/*
 * RegistrationCache: one MD's registrations of buffers that come without a
 * mapped region, kept in UCX's rcache (libucs) so that a buffer sent or
 * received by rendezvous again is registered once, not per operation.
 * UCX's memory events (UCM_EVENT_VM_UNMAPPED) drop what the caller unmaps,
 * so memory freed and mapped again at the same address is registered anew.
 * The rcache API differs across UCX 1.13 .. 1.22 (ucs_rcache_get's alignment
 * argument, the params' alignment fields): only registration_cache.cc knows.
 */
#ifndef UCT_TM_PROTO_REGISTRATION_CACHE_H_
#define UCT_TM_PROTO_REGISTRATION_CACHE_H_

#include <uct/api/uct.h>

#include <cstdint>

struct ucs_rcache;

namespace uct_tm {
namespace proto {

class RegistrationCache {
  public:
    struct Region; /* an rcache region with its memh */

    /* *registrations / *hits: the worker's counters, advanced by get() */
    RegistrationCache(uct_md_h md, uint64_t *registrations, uint64_t *hits);
    ~RegistrationCache();
    RegistrationCache(const RegistrationCache &)            = delete;
    RegistrationCache &operator=(const RegistrationCache &) = delete;

    /* UCS_OK, or why the cache could not be made (then do not use it) */
    ucs_status_t status() const { return status_; }
    /* A registration covering [address, address + length) (held until
     * put()), or null: it could not be registered. */
    Region      *get(void *address, size_t length, uct_mem_h *memh);
    static void  put(Region *region);

  private:
    friend struct RegistrationCacheOps;
    uct_md_h     md_;
    uint64_t    *registrations_;
    uint64_t    *hits_;
    ucs_rcache  *rcache_ = nullptr;
    ucs_status_t status_;
};

}  // namespace proto
}  // namespace uct_tm

#endif
