/*
 * Range checks on offsets and lengths that a peer, a key or a user supplies,
 * written once without the unsigned overflow of "offset + length <= size"
 * (which a crafted offset near 2^64 passes).
 */
#ifndef UCT_TM_BASE_RANGE_H_
#define UCT_TM_BASE_RANGE_H_

#include <cstdint>

namespace uct_tm {

/* True iff [offset, offset + length) lies inside [0, size). */
inline constexpr bool range_within(uint64_t offset, uint64_t length, uint64_t size) {
    return (offset <= size) && (length <= size - offset);
}

/* True iff [start, start + length) lies inside [base, base + size). */
inline constexpr bool range_inside(uint64_t start, uint64_t length, uint64_t base, uint64_t size) {
    return (start >= base) && range_within(start - base, length, size);
}

/* *sum = a + b; false (and *sum untouched) if that wraps. */
inline bool add_within(uint64_t a, uint64_t b, uint64_t *sum) {
    uint64_t s;
    if (__builtin_add_overflow(a, b, &s)) {
        return false;
    }
    *sum = s;
    return true;
}

static_assert(range_within(0, 0, 0) && range_within(4096, 0, 4096) && !range_within(4097, 0, 4096),
              "range_within: empty ranges");
static_assert(!range_within(~uint64_t{0} - 4095, 4096, 8192), "range_within: no wrap");
static_assert(!range_inside(0, 1, 1, ~uint64_t{0}), "range_inside: below the base");

}  // namespace uct_tm

#endif
