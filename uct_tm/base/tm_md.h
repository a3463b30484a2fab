/*
 * The shared-memory MD "tm", the only MD of component "tm", on which tm_sm
 * runs.
 *
 * Registration records a host address range (shared-memory transports read
 * peer memory with CMA, so nothing needs pinning); allocation hands out
 * shared memory that peers can map directly (rkey_ptr): blocks of shared
 * arenas, or a segment of its own for a large one (shm_arena.h). A packed
 * rkey names the owning process and range, and for allocated memory the
 * segment and the range's offset in it.
 */
#ifndef UCT_TM_BASE_TM_MD_H_
#define UCT_TM_BASE_TM_MD_H_

#include "packed_rkey.h"
#include "shm_arena.h"
#include "shm_segment.h"
#include "ucx_abi.h"

#include <uct/api/uct.h>

#include <cstdint>
#include <sys/types.h>

namespace uct_tm {

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

/* An unpacked rkey: what a peer needs to reach the owner's memory. */
struct RemoteKey : RemoteRange {
    pid_t      pid     = 0;
    bool       has_shm = false;
    ShmId      shm;
    uint64_t   shm_offset = 0;
    bool       has_rndv   = false;
    uint64_t   rndv_token = 0;
    ShmSegment mapping; /* the pages of the range, attached on first use */
};

inline RemoteKey *remote_key(uct_rkey_t rkey) { return reinterpret_cast<RemoteKey *>(rkey); }

/* Local address of remote `raddr` for an rkey of MD-allocated shared memory,
 * mapping the owner's segment on first use (uct_rkey_ptr). UCS_ERR_UNREACHABLE
 * for ordinary memory, which only CMA reaches. */
ucs_status_t remote_key_address(RemoteKey *key, uint64_t raddr, void **laddr);

/* Component "tm" (MD "tm"), for the plugin to register. */
const abi::ComponentDesc &md_component();

}  // namespace uct_tm

#endif
