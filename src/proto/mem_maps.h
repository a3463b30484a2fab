/*
 * MemMaps: the memory regions a worker's caller registered with
 * uct_tm_proto_mem_map() (libfabric's fi_mr_reg, UCP's ucp_mem_map). A region
 * is registered once on the MD of every iface that reads or writes peer
 * memory by rendezvous; operations that carry its handle (UCT_TM_PROTO_OP_MEMH)
 * use those registrations instead of registering their buffer each time.
 * Handles are checked (slot index and generation, as request handles): a
 * stale, foreign or forged handle names no region.
 */
#ifndef UCT_TM_PROTO_MEM_MAPS_H_
#define UCT_TM_PROTO_MEM_MAPS_H_

#include "iface.h"

#include <uct/api/uct.h>

#include <cstdint>
#include <memory>
#include <utility>
#include <vector>

namespace uct_tm {
namespace proto {

class MemMaps {
  public:
    MemMaps();
    ~MemMaps() { clear(); }
    MemMaps(const MemMaps &)            = delete;
    MemMaps &operator=(const MemMaps &) = delete;

    /* Registers [address, address + length) on each iface of `ifaces` that
     * registers memory for rendezvous; *registrations counts the MD calls. */
    ucs_status_t map(const std::vector<std::unique_ptr<Iface>> &ifaces, void *address,
                     size_t length, uint64_t *handle, uint64_t *registrations);
    /* UCS_ERR_BUSY while an operation uses the region. */
    ucs_status_t unmap(uint64_t handle);
    bool         mapped(uint64_t handle) const { return find(handle) != nullptr; }
    /* Whether `handle` names a region holding [address, address + length). */
    bool         covers(uint64_t handle, const void *address, size_t length) const;
    /* The region's registration on `iface` (null: none there); `handle` is mapped(). */
    uct_mem_h    memh(uint64_t handle, const Iface *iface) const;
    /* An operation starts / stops using the region (unmap waits for none). */
    void         use(uint64_t handle) { ++slot(handle).users; }
    void         unuse(uint64_t handle) { --slot(handle).users; }
    /* Deregisters every region (the worker closes its MDs next). */
    void         clear();

  private:
    struct Region {
        uint32_t  gen   = 0;
        bool      live  = false;
        uint32_t  users = 0;
        uintptr_t begin = 0;
        uintptr_t end   = 0;
        std::vector<std::pair<const Iface *, uct_mem_h>> regs;
    };
    Region       *find(uint64_t handle);
    const Region *find(uint64_t handle) const {
        return const_cast<MemMaps *>(this)->find(handle);
    }
    Region       &slot(uint64_t handle) { return slots_[static_cast<uint32_t>(handle) - 1]; }
    static void   deregister(Region &r);

    std::vector<Region>   slots_;
    std::vector<uint32_t> free_;
    uint32_t              gen_base_;
};

}  // namespace proto
}  // namespace uct_tm

#endif
