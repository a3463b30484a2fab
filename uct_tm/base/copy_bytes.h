/*
 * copy_bytes: memcpy for lengths known only at run time that are usually
 * tiny (eager short payloads, 8-byte tags and headers). Up to 16 bytes it
 * copies with two possibly overlapping loads and stores instead of calling
 * libc's memcpy, whose call and size dispatch cost more than the copy itself
 * on the per-message paths of tm_sm.
 */
#ifndef UCT_TM_BASE_COPY_BYTES_H_
#define UCT_TM_BASE_COPY_BYTES_H_

#include <cstddef>
#include <cstdint>
#include <cstring>

namespace uct_tm {

inline void copy_bytes(void *dst, const void *src, size_t n) {
    char       *d = static_cast<char *>(dst);
    const char *s = static_cast<const char *>(src);
    if (n >= 8) {
        if (n > 16) {
            memcpy(d, s, n);
            return;
        }
        uint64_t head, tail;
        memcpy(&head, s, 8);
        memcpy(&tail, s + n - 8, 8);
        memcpy(d, &head, 8);
        memcpy(d + n - 8, &tail, 8);
    } else if (n >= 4) {
        uint32_t head, tail;
        memcpy(&head, s, 4);
        memcpy(&tail, s + n - 4, 4);
        memcpy(d, &head, 4);
        memcpy(d + n - 4, &tail, 4);
    } else {
        for (size_t i = 0; i < n; ++i) {
            d[i] = s[i];
        }
    }
}

}  // namespace uct_tm

#endif
