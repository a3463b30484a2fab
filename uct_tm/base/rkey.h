/*
 * The rkey vocabulary shared by uct-tm's MD families. Every packed rkey
 * starts with a PackedRkeyHeader (the family's magic and flags, the range the
 * key names) and each family appends what its transports need; every
 * unpacked rkey is a RemoteRange. UCX hands a buffer to the rkey_unpack of
 * the component whose MD packed it, so the magic routes nothing: it refuses a
 * buffer of another family, or garbage, from a peer.
 */
#ifndef UCT_TM_BASE_RKEY_H_
#define UCT_TM_BASE_RKEY_H_

#include "range.h"

#include <uct/api/uct.h>

#include <cstdint>
#include <cstring>
#include <new>
#include <type_traits>

namespace uct_tm {

struct PackedRkeyHeader {
    uint32_t magic; /* the MD family's */
    uint32_t flags; /* the MD family's */
    uint64_t address;
    uint64_t length;
};
static_assert(sizeof(PackedRkeyHeader) == 24, "packed rkey header layout");

/* The registered range an unpacked rkey names. */
struct RemoteRange {
    uint64_t address = 0;
    uint64_t length  = 0;

    /* True iff [addr, addr + len) lies inside the range. */
    bool covers(uint64_t addr, uint64_t len) const { return range_inside(addr, len, address, length); }
};

/* Reads a family's packed rkey (a `Packed` starting with the header) out of
 * `buffer`, a peer's bytes: true iff it carries `magic` and a range that does
 * not wrap the address space, what every family checks before it trusts the
 * rest. */
template <typename Packed>
bool read_packed_rkey(const void *buffer, uint32_t magic, Packed *packed) {
    static_assert(std::is_base_of<PackedRkeyHeader, Packed>::value &&
                      std::is_trivially_copyable<Packed>::value,
                  "a packed rkey is the header and the family's plain fields");
    memcpy(packed, buffer, sizeof(*packed));
    return (packed->magic == magic) && range_within(packed->address, packed->length, UINT64_MAX);
}

/* A new unpacked key of a family (a `Key` deriving from RemoteRange) for the
 * range of `packed`, handed to UCX as `*rkey` with no handle; the family fills
 * in the rest. Null if out of memory. */
template <typename Key>
Key *new_remote_key(const PackedRkeyHeader &packed, uct_rkey_t *rkey, void **handle) {
    auto *key = new (std::nothrow) Key;
    if (key != nullptr) {
        key->address = packed.address;
        key->length  = packed.length;
        *rkey        = reinterpret_cast<uct_rkey_t>(key);
        if (handle != nullptr) {
            *handle = nullptr;
        }
    }
    return key;
}

}  // namespace uct_tm

#endif
