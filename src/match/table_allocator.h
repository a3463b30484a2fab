/*
 * TableAllocator: std::allocator for the large flat arrays of the matcher's
 * hash tables. Arrays of 2 MiB and more are 2 MiB aligned and advised as
 * transparent huge pages (when the kernel offers them in "madvise" mode):
 * deep queues then take one TLB entry per 2 MiB instead of 512, which at
 * 1 Mi receives removes a page walk from most lookups.
 */
#ifndef UCT_TM_MATCH_TABLE_ALLOCATOR_H_
#define UCT_TM_MATCH_TABLE_ALLOCATOR_H_

#include <sys/mman.h>

#include <cstddef>
#include <cstdlib>
#include <new>

namespace uct_tm {
namespace match {

template <typename T> struct TableAllocator {
    using value_type = T;
    static constexpr size_t kHugePage = size_t{2} << 20;

    TableAllocator() = default;
    template <typename U> TableAllocator(const TableAllocator<U> &) noexcept {}

    T *allocate(size_t n) {
        const size_t bytes = n * sizeof(T);
        if (bytes < kHugePage) {
            return static_cast<T *>(::operator new(bytes));
        }
        const size_t rounded = (bytes + kHugePage - 1) & ~(kHugePage - 1);
        void        *p       = std::aligned_alloc(kHugePage, rounded);
        if (p == nullptr) {
            throw std::bad_alloc();
        }
        (void)madvise(p, rounded, MADV_HUGEPAGE); /* advice only: fine if refused */
        return static_cast<T *>(p);
    }

    void deallocate(T *p, size_t n) noexcept {
        if (n * sizeof(T) < kHugePage) {
            ::operator delete(p);
        } else {
            std::free(p);
        }
    }

    template <typename U> bool operator==(const TableAllocator<U> &) const noexcept { return true; }
    template <typename U> bool operator!=(const TableAllocator<U> &) const noexcept { return false; }
};

}  // namespace match
}  // namespace uct_tm

#endif
