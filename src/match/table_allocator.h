/*
 * Storage for the matcher's large flat arrays (hash-table groups, entry pools).
 *
 * Arrays below 64 KiB come from `operator new` (64-byte aligned: a table group
 * is one cache line). From 64 KiB up they are anonymous mappings, which grow
 * with mremap() (no copy: the pages move), and from 2 MiB up they are advised
 * as transparent huge pages (when the kernel offers them in "madvise" mode).
 * Every function reports failure by returning nullptr and leaves the old
 * array untouched.
 */
#ifndef UCT_TM_MATCH_TABLE_ALLOCATOR_H_
#define UCT_TM_MATCH_TABLE_ALLOCATOR_H_

#include <sys/mman.h>

#include <cstddef>
#include <cstring>
#include <new>

namespace uct_tm {
namespace match {
namespace detail {

inline constexpr size_t kHugePage  = size_t{2} << 20;
inline constexpr size_t kPage      = size_t{4} << 10;
/* From this size up, arrays are mappings that grow without copying. */
inline constexpr size_t kMapMin    = size_t{64} << 10;
inline constexpr size_t kLineAlign = 64;

/* Bytes actually reserved for a request of `bytes`: mappings are whole pages. */
inline size_t array_bytes(size_t bytes) {
    return (bytes < kMapMin) ? bytes : (bytes + kPage - 1) & ~(kPage - 1);
}

inline void advise(void *p, size_t real_bytes) {
    if (real_bytes >= kHugePage) {
        (void)madvise(p, real_bytes, MADV_HUGEPAGE); /* advice only: fine if refused */
    }
}

/* A zero-filled array of array_bytes(bytes) bytes, or nullptr. */
inline void *array_alloc(size_t bytes) {
    const size_t real = array_bytes(bytes);
    if (real >= kMapMin) {
        void *p = mmap(nullptr, real, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
        if (p == MAP_FAILED) {
            return nullptr;
        }
        advise(p, real);
        return p; /* anonymous mappings are zero-filled */
    }
    void *p = ::operator new(real, std::align_val_t(kLineAlign), std::nothrow);
    if (p != nullptr) {
        std::memset(p, 0, real);
    }
    return p;
}

inline void array_free(void *p, size_t bytes) noexcept {
    if (p == nullptr) {
        return;
    }
    const size_t real = array_bytes(bytes);
    if (real >= kMapMin) {
        (void)munmap(p, real);
    } else {
        ::operator delete(p, std::align_val_t(kLineAlign));
    }
}

/* Grows an array from old_bytes to new_bytes (> old_bytes), keeping its
 * contents; the new tail is zero-filled. Returns the (possibly moved) array,
 * or nullptr with the old one untouched. */
inline void *array_grow(void *p, size_t old_bytes, size_t new_bytes) {
    const size_t old_real = array_bytes(old_bytes);
    const size_t new_real = array_bytes(new_bytes);
    if ((p != nullptr) && (old_real >= kMapMin)) {
        void *q = mremap(p, old_real, new_real, MREMAP_MAYMOVE);
        if (q == MAP_FAILED) {
            return nullptr;
        }
        advise(q, new_real);
        return q;
    }
    void *q = array_alloc(new_bytes);
    if (q == nullptr) {
        return nullptr;
    }
    if (p != nullptr) {
        std::memcpy(q, p, old_bytes);
        array_free(p, old_bytes);
    }
    return q;
}

}  // namespace detail
}  // namespace match
}  // namespace uct_tm

#endif
