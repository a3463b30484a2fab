#include "registration_cache.h"

#include <ucm/api/ucm.h>
extern "C" { /* UCX 1.13's rcache.h declares no C linkage */
#include <ucs/memory/rcache.h>
}

#include <sys/mman.h>

#include <climits>
#include <type_traits>
#include <utility>

namespace uct_tm {
namespace proto {

struct RegistrationCache::Region {
    ucs_rcache_region_t super; /* first: the rcache allocates region_struct_size */
    uct_mem_h           memh;
    RegistrationCache  *cache;
};

namespace {

/* UCX >= 1.15's params lost alignment / max_alignment (alignment went to
 * ucs_rcache_get): set them only where they exist */
template <typename P, typename = void> struct HasAlignment : std::false_type {};
template <typename P>
struct HasAlignment<P, std::void_t<decltype(std::declval<P &>().max_alignment)>>
    : std::true_type {};

template <typename P> void set_alignment(P &p) {
    if constexpr (HasAlignment<P>::value) {
        p.alignment     = UCS_RCACHE_MIN_ALIGNMENT;
        p.max_alignment = UCS_RCACHE_MIN_ALIGNMENT;
    }
}

/* ucs_rcache_get with (UCX >= 1.15) or without the alignment argument;
 * called through `get` so that the branch not taken is never compiled */
template <typename Get>
ucs_status_t rcache_get(Get get, ucs_rcache_t *rcache, void *address, size_t length, void *arg,
                        ucs_rcache_region_t **region) {
    if constexpr (std::is_invocable_v<Get, ucs_rcache_t *, void *, size_t, size_t, int, void *,
                                      ucs_rcache_region_t **>) {
        return get(rcache, address, length, UCS_RCACHE_MIN_ALIGNMENT, PROT_READ | PROT_WRITE,
                   arg, region);
    } else {
        return get(rcache, address, length, PROT_READ | PROT_WRITE, arg, region);
    }
}

}  // namespace

struct RegistrationCacheOps {
    static ucs_status_t mem_reg(void *context, ucs_rcache_t *, void *, ucs_rcache_region_t *rr,
                                uint16_t) {
        auto *cache = static_cast<RegistrationCache *>(context);
        auto *r     = reinterpret_cast<RegistrationCache::Region *>(rr);
        r->cache    = cache;
        const ucs_status_t status =
                uct_md_mem_reg(cache->md_, reinterpret_cast<void *>(rr->super.start),
                               rr->super.end - rr->super.start, UCT_MD_MEM_ACCESS_RMA, &r->memh);
        if (status == UCS_OK) {
            ++*cache->registrations_;
        }
        return status;
    }
    static void mem_dereg(void *context, ucs_rcache_t *, ucs_rcache_region_t *rr) {
        auto *r = reinterpret_cast<RegistrationCache::Region *>(rr);
        uct_md_mem_dereg(static_cast<RegistrationCache *>(context)->md_, r->memh);
    }
    static void dump_region(void *, ucs_rcache_t *, ucs_rcache_region_t *, char *buf,
                            size_t max) {
        if (max != 0) {
            buf[0] = '\0';
        }
    }
};

RegistrationCache::RegistrationCache(uct_md_h md, uint64_t *registrations, uint64_t *hits)
    : md_(md), registrations_(registrations), hits_(hits) {
    static const ucs_rcache_ops_t ops = [] {
        ucs_rcache_ops_t o = {};
        o.mem_reg     = RegistrationCacheOps::mem_reg;
        o.mem_dereg   = RegistrationCacheOps::mem_dereg;
        o.dump_region = RegistrationCacheOps::dump_region;
        return o;
    }();
    ucs_rcache_params_t p = {};
    p.region_struct_size  = sizeof(Region);
    set_alignment(p);
    p.ucm_events          = UCM_EVENT_VM_UNMAPPED; /* freed memory leaves the cache */
    p.ucm_event_priority  = 1000;
    p.ops                 = &ops;
    p.context             = this;
    p.flags               = 0;
    p.max_regions         = ULONG_MAX;
    p.max_size            = SIZE_MAX;
    p.max_unreleased      = SIZE_MAX;
    status_ = ucs_rcache_create(&p, "tm_proto", nullptr, &rcache_);
    if (status_ != UCS_OK) {
        rcache_ = nullptr;
    }
}

RegistrationCache::~RegistrationCache() {
    if (rcache_ != nullptr) {
        ucs_rcache_destroy(rcache_);
    }
}

RegistrationCache::Region *RegistrationCache::get(void *address, size_t length,
                                                  uct_mem_h *memh) {
    const uint64_t       before = *registrations_;
    ucs_rcache_region_t *rr;
    if (rcache_get(ucs_rcache_get, rcache_, address, length, this, &rr) != UCS_OK) {
        return nullptr;
    }
    *hits_ += (*registrations_ == before) ? 1 : 0;
    auto *r = reinterpret_cast<Region *>(rr);
    *memh   = r->memh;
    return r;
}

void RegistrationCache::put(Region *region) {
    ucs_rcache_region_put(region->cache->rcache_, &region->super);
}

}  // namespace proto
}  // namespace uct_tm
