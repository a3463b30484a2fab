/*
 * The shared-memory MD "tm", the only MD of component "tm", on which tm_sm
 * runs.
 *
 * Registration records a host address range (shared-memory transports read
 * peer memory with CMA, so nothing needs pinning); allocation hands out
 * shared memory that peers can map directly (rkey_ptr): blocks of shared
 * arenas, or a segment of its own for a large one (shm_arena.h). Its rkeys
 * are in sm_rkey.h.
 */
#ifndef UCT_TM_SM_SM_MD_H_
#define UCT_TM_SM_SM_MD_H_

#include "sm_rkey.h"

#include "base/shm_arena.h"
#include "base/ucx_abi.h"

#include <uct/api/uct.h>

#include <cstdint>

namespace uct_tm {
namespace sm {

/* A registered or allocated range (pooled by the MD: see mem_registry.h). */
struct MemHandle {
    uint32_t   magic   = 0; /* kMemHandleMagic while registered or allocated */
    void      *address = nullptr;
    size_t     length  = 0;
    ShmBlock   shm; /* valid when allocated by the MD: `address` is shm.offset() in shm.id() */
    MemHandle *next_free = nullptr;

    static constexpr uint32_t kMemHandleMagic = 0x6d656d68u; /* "memh" */
};

/* The MD handle behind a uct_mem_h of MD "tm", or null if it is not one. */
inline const MemHandle *mem_handle(uct_mem_h memh) {
    const auto *h = static_cast<const MemHandle *>(memh);
    return ((h != nullptr) && (memh != UCT_MEM_HANDLE_NULL) && (h->magic == MemHandle::kMemHandleMagic))
               ? h : nullptr;
}

/* True if `md` is the shared-memory MD "tm". */
bool is_shm_md(uct_md_h md);

/* True if [address, address + length) lies inside memory registered or
 * allocated with `md` (an MD "tm") and not yet released: what a peer may ask
 * this process to copy out for it when it cannot read it with CMA itself. */
bool md_range_registered(uct_md_h md, uint64_t address, size_t length);

/* Component "tm" (MD "tm"), for the plugin to register. */
const abi::ComponentDesc &md_component();

}  // namespace sm
}  // namespace uct_tm

#endif
