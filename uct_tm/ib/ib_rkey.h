/*
 * The rkeys of the verbs MDs (ib_md.h): the rkey header {kRkeyMagic, range}
 * and the verbs rkey. The unpacked key keeps the range so that one-sided
 * copies outside it fail locally instead of breaking the connection.
 */
#ifndef UCT_TM_IB_IB_RKEY_H_
#define UCT_TM_IB_IB_RKEY_H_

#include "base/rkey.h"

#include <uct/api/uct.h>

#include <cstdint>

namespace uct_tm {
namespace ib {

inline constexpr uint32_t kRkeyMagic = 0x746d6962u; /* "tmib" */

/* Wire format of an rkey buffer (mkey_pack / rkey_unpack; the header's flags
 * are 0). */
struct PackedRkey : PackedRkeyHeader {
    uint32_t rkey;
    uint32_t reserved;
};
static_assert(sizeof(PackedRkey) == 32, "packed verbs rkey layout");

/* The packed rkey of [address, address + length) under verbs rkey `rkey`. */
inline PackedRkey pack_rkey(uint32_t rkey, uint64_t address, uint64_t length) {
    PackedRkey packed{};
    packed.magic   = kRkeyMagic;
    packed.address = address;
    packed.length  = length;
    packed.rkey    = rkey;
    return packed;
}

/* An unpacked verbs rkey (uct_rkey_t points to it). */
struct RemoteKey : RemoteRange {
    uint32_t rkey = 0;
};

inline const RemoteKey *remote_key(uct_rkey_t rkey) {
    return reinterpret_cast<const RemoteKey *>(rkey);
}

}  // namespace ib
}  // namespace uct_tm

#endif
