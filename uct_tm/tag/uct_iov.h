/*
 * The one rule every transport of uct-tm applies to a uct_iov_t
 * list (tagged and active-message sends, rendezvous, receives, get/put), so
 * that the same bad list gets the same status whatever path it takes:
 *
 *  - UCS_ERR_INVALID_PARAM: a null list with entries; more entries than the
 *    operation's max_iov (its uct_iface_attr cap); an entry without a
 *    buffer but with bytes;
 *  - UCS_ERR_UNSUPPORTED: an entry whose count is not 1 (repeated or strided
 *    layouts: no cap advertises them, UCP never sends them);
 *  - UCS_ERR_EXCEEDS_LIMIT: more bytes in all than the operation's maximum
 *    (its max_zcopy), sums that would wrap included.
 *
 * Entries are checked in order and the first violation decides; the total
 * is judged once every entry is well formed.
 */
#ifndef UCT_TM_TAG_UCT_IOV_H_
#define UCT_TM_TAG_UCT_IOV_H_

#include <uct/api/uct.h>
#include <ucs/sys/compiler_def.h>

#include <cstddef>

namespace uct_tm {

/* What an operation takes: entries and bytes at most. */
struct IovLimits {
    size_t max_iov;
    size_t max_total;
};

/* Checks `iov[0..iovcnt)` against `limits`; on UCS_OK, *total is its bytes. */
[[nodiscard]] inline ucs_status_t check_iov(const uct_iov_t *iov, size_t iovcnt,
                                            const IovLimits &limits, size_t *total) {
    if (ucs_unlikely(((iov == nullptr) && (iovcnt > 0)) || (iovcnt > limits.max_iov))) {
        return UCS_ERR_INVALID_PARAM;
    }
    size_t sum  = 0;
    bool   over = false;
    for (size_t i = 0; i < iovcnt; ++i) {
        const uct_iov_t &e = iov[i];
        if (ucs_unlikely(e.count != 1)) {
            return UCS_ERR_UNSUPPORTED;
        }
        if (ucs_unlikely((e.buffer == nullptr) && (e.length > 0))) {
            return UCS_ERR_INVALID_PARAM;
        }
        over = over || (e.length > limits.max_total - sum);
        sum  = over ? limits.max_total : sum + e.length;
    }
    if (ucs_unlikely(over)) {
        return UCS_ERR_EXCEEDS_LIMIT;
    }
    *total = sum;
    return UCS_OK;
}

/* The fast case every hot path tests first: one well-formed entry with a
 * buffer (what check_iov() accepts when max_iov >= 1 and its length fits). */
[[gnu::always_inline]] inline bool is_one_buffer(const uct_iov_t *iov, size_t iovcnt) {
    return (iovcnt == 1) && (iov != nullptr) && (iov->count == 1) && (iov->buffer != nullptr);
}

}  // namespace uct_tm

#endif
