#include "mem_maps.h"

#include <unistd.h>

#include <atomic>

namespace uct_tm {
namespace proto {

MemMaps::MemMaps() {
    /* per-worker generations, as RequestPool's: another worker's handle
     * names nothing here */
    static std::atomic<uint32_t> maps{0};
    const uint32_t n = maps.fetch_add(1, std::memory_order_relaxed);
    gen_base_ = (n * 0x9e3779b9u) ^ (static_cast<uint32_t>(getpid()) * 0xc2b2ae35u);
}

ucs_status_t MemMaps::map(const std::vector<std::unique_ptr<Iface>> &ifaces, void *address,
                          size_t length, uint64_t *handle, uint64_t *registrations) {
    const uintptr_t begin = reinterpret_cast<uintptr_t>(address);
    if ((address == nullptr) || (length == 0) || (handle == nullptr) ||
        (begin + length < begin)) { /* wraps around the address space */
        return UCS_ERR_INVALID_PARAM;
    }
    if (free_.empty()) {
        if (slots_.size() >= UINT32_MAX - 1) {
            return UCS_ERR_EXCEEDS_LIMIT;
        }
        Region r;
        r.gen = gen_base_;
        slots_.push_back(std::move(r));
        free_.reserve(slots_.size()); /* unmap() gives slots back without allocating */
        free_.push_back(static_cast<uint32_t>(slots_.size() - 1));
    }
    Region &r = slots_[free_.back()];
    r.begin   = begin;
    r.end     = begin + length;
    r.regs.clear();
    r.regs.reserve(ifaces.size()); /* no throw between a registration and its record */
    for (const auto &i : ifaces) {
        /* only where a rendezvous reads or writes through the MD (rndv_get:
         * the MD registers); elsewhere nothing is registered, at no cost */
        if (!i->rndv_get) {
            continue;
        }
        uct_mem_h          memh;
        const ucs_status_t status =
                uct_md_mem_reg(i->md, address, length, UCT_MD_MEM_ACCESS_RMA, &memh);
        if (status != UCS_OK) {
            deregister(r);
            return status;
        }
        ++*registrations;
        r.regs.emplace_back(i.get(), memh);
    }
    r.live  = true;
    r.users = 0;
    const uint32_t index = free_.back();
    free_.pop_back();
    *handle = (uint64_t{r.gen} << 32) | (index + 1);
    return UCS_OK;
}

MemMaps::Region *MemMaps::find(uint64_t handle) {
    const uint32_t index = static_cast<uint32_t>(handle);
    if ((index == 0) || (index > slots_.size())) {
        return nullptr;
    }
    Region &r = slots_[index - 1];
    return (r.live && (r.gen == static_cast<uint32_t>(handle >> 32))) ? &r : nullptr;
}

ucs_status_t MemMaps::unmap(uint64_t handle) {
    Region *r = find(handle);
    if (r == nullptr) {
        return UCS_ERR_INVALID_PARAM;
    }
    if (r->users != 0) {
        return UCS_ERR_BUSY;
    }
    deregister(*r);
    r->live = false;
    ++r->gen; /* the old handle is stale from now on */
    free_.push_back(static_cast<uint32_t>(handle) - 1); /* reserved by map(): no throw */
    return UCS_OK;
}

bool MemMaps::covers(uint64_t handle, const void *address, size_t length) const {
    const Region   *r     = find(handle);
    const uintptr_t begin = reinterpret_cast<uintptr_t>(address);
    return (r != nullptr) && (begin >= r->begin) && (begin <= r->end) &&
           (length <= r->end - begin);
}

uct_mem_h MemMaps::memh(uint64_t handle, const Iface *iface) const {
    for (const auto &reg : slots_[static_cast<uint32_t>(handle) - 1].regs) {
        if (reg.first == iface) {
            return reg.second;
        }
    }
    return nullptr;
}

void MemMaps::deregister(Region &r) {
    for (const auto &reg : r.regs) {
        uct_md_mem_dereg(reg.first->md, reg.second);
    }
    r.regs.clear();
}

void MemMaps::clear() {
    for (Region &r : slots_) {
        if (r.live) {
            deregister(r);
            r.live = false;
        }
    }
}

}  // namespace proto
}  // namespace uct_tm
