/*
 * The rkeys of MD "tm" (sm_md.h): what a peer receives to reach the owner's
 * memory, and therefore hostile until rkey_unpack has checked it. A packed
 * rkey names the owning process and range, and for allocated memory the
 * segment and the range's offset in it.
 */
#ifndef UCT_TM_SM_SM_RKEY_H_
#define UCT_TM_SM_SM_RKEY_H_

#include "base/rkey.h"
#include "base/shm_segment.h"

#include <ucs/type/status.h>
#include <uct/api/uct.h>

#include <cstdint>
#include <sys/types.h>

namespace uct_tm {
namespace sm {

inline constexpr uint32_t kRkeyMagic  = 0x746d726bu; /* "tmrk" */
inline constexpr uint32_t kRkeyHasShm = 1u << 0;
/* The range is a pending rendezvous send of a tm_sm iface: readers lock its
 * slot so that a concurrent cancel never lets them read released memory. */
inline constexpr uint32_t kRkeyRndv = 1u << 1;

/* Wire format of an rkey buffer (mkey_pack / rkey_unpack): the header
 * (kRkeyMagic, kRkey* flags, the range), then the owner. */
struct PackedRkey : PackedRkeyHeader {
    int32_t  pid;
    uint32_t reserved;
    ShmId    shm;        /* valid with kRkeyHasShm */
    uint64_t shm_offset; /* of `address` inside the segment */
    uint64_t rndv_token; /* valid with kRkeyRndv: the sender's rendezvous slot */
    uint64_t rndv_proof; /* valid with kRkeyRndv: the proof of rndv_token */
};
static_assert(sizeof(PackedRkey) == 80, "packed rkey layout");

/* An unpacked rkey: what a peer needs to reach the owner's memory. */
struct RemoteKey : RemoteRange {
    pid_t      pid     = 0;
    bool       has_shm = false;
    ShmId      shm;
    uint64_t   shm_offset = 0;
    bool       has_rndv   = false;
    uint64_t   rndv_token = 0;
    uint64_t   rndv_proof = 0;
    ShmSegment mapping; /* the pages of the range, attached on first use */
};

inline RemoteKey *remote_key(uct_rkey_t rkey) { return reinterpret_cast<RemoteKey *>(rkey); }

/* Local address of remote `raddr` for an rkey of MD-allocated shared memory,
 * mapping the owner's segment on first use (uct_rkey_ptr). UCS_ERR_UNREACHABLE
 * for ordinary memory, which only CMA reaches. */
ucs_status_t remote_key_address(RemoteKey *key, uint64_t raddr, void **laddr);

}  // namespace sm
}  // namespace uct_tm

#endif
