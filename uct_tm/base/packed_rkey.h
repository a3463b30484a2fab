/*
 * The rkey buffer of MD "tm" (mkey_pack / rkey_unpack): what a peer receives
 * to reach the owner's memory, and therefore hostile until rkey_unpack has
 * checked it.
 */
#ifndef UCT_TM_BASE_PACKED_RKEY_H_
#define UCT_TM_BASE_PACKED_RKEY_H_

#include "rkey.h"
#include "shm_segment.h"

#include <cstdint>

namespace uct_tm {

/* Wire format of an rkey buffer (mkey_pack / rkey_unpack): the header
 * (kRkeyMagic, kRkey* flags, the range), then the owner. */
struct PackedRkey : PackedRkeyHeader {
    int32_t  pid;
    uint32_t reserved;
    ShmId    shm;        /* valid with kRkeyHasShm */
    uint64_t shm_offset; /* of `address` inside the segment */
    uint64_t rndv_token; /* valid with kRkeyRndv: the sender's rendezvous slot */
};
static_assert(sizeof(PackedRkey) == 72, "packed rkey layout");

inline constexpr uint32_t kRkeyMagic  = 0x746d726bu; /* "tmrk" */
inline constexpr uint32_t kRkeyHasShm = 1u << 0;
/* The range is a pending rendezvous send of a tm_sm iface: readers lock its
 * slot so that a concurrent cancel never lets them read released memory. */
inline constexpr uint32_t kRkeyRndv = 1u << 1;

}  // namespace uct_tm

#endif
