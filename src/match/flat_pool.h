/*
 * FlatPool: one flat array of fixed-size entries addressed by a 32-bit index.
 *
 * Entries are reached with a single base pointer (no chunk directory on the
 * hot path). Growth keeps every index valid: small arrays double (copy), from
 * 32 KiB up the pool grows by an eighth (a mapping moved by mremap(), no copy),
 * so a deep queue wastes at most ~1/8 of the pool. Freed slots are reused LIFO: a
 * steady-state workload touches the same hot entries and never allocates. The
 * entry type is trivially copyable, zero-initialised means "never used", and it
 * provides the free-list link (`free_link()`, a field idle while the slot is free).
 * Unlike SlotPool, entries move when the pool grows: hold indexes, not pointers.
 */
#ifndef UCT_TM_MATCH_FLAT_POOL_H_
#define UCT_TM_MATCH_FLAT_POOL_H_

#include "slot_pool.h" /* kNoIndex */
#include "table_allocator.h"

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <type_traits>
#include <utility>

namespace uct_tm {
namespace match {

namespace detail {

template <typename Entry> class FlatPool {
    static_assert(std::is_trivially_copyable<Entry>::value, "entries are moved as bytes");

  public:
    static constexpr uint32_t kMinCapacity = 64;

    FlatPool() = default;
    ~FlatPool() { array_free(data_, bytes_of(capacity_)); }
    FlatPool(FlatPool &&o) noexcept { swap(o); }
    FlatPool &operator=(FlatPool &&o) noexcept {
        FlatPool tmp(std::move(o));
        swap(tmp);
        return *this;
    }
    FlatPool(const FlatPool &)            = delete;
    FlatPool &operator=(const FlatPool &) = delete;

    Entry       *data() { return data_; }
    Entry       &operator[](uint32_t index) { return data_[index]; }
    const Entry &operator[](uint32_t index) const { return data_[index]; }

    /* Slots ever handed out: valid indexes are [0, issued()). */
    uint32_t issued() const { return issued_; }
    size_t   live() const { return live_; }
    /* Slots that can be taken without growing. */
    size_t   capacity() const { return capacity_; }
    size_t   memory_bytes() const { return array_bytes(bytes_of(capacity_)); }

    /* Takes a slot; live() < capacity() is required. The entry keeps the
     * contents it was released with (its generation). */
    uint32_t take() {
        uint32_t index = free_head_;
        if (__builtin_expect(index != kNoIndex, 1)) {
            free_head_ = data_[index].free_link();
        } else {
            index = issued_++;
        }
        ++live_;
        return index;
    }

    /* Returns a slot to the free list. */
    void release(uint32_t index) {
        data_[index].free_link() = free_head_;
        free_head_               = index;
        --live_;
    }

    /* Makes sure take() has a slot. False (pool unchanged) when memory or
     * the 32-bit index space runs out. */
    bool reserve_one() { return (live_ < capacity_) || grow(); }

    /* Makes room for at least one more slot; see reserve_one(). */
    bool grow() {
        if (capacity_ >= kMaxCapacity) {
            return false;
        }
        /* Double while small (a copy); from a mapping up, grow by an eighth
         * (mremap, no copy), so a deep pool is at most 1/8 larger than needed. */
        size_t cap = (capacity_ == 0) ? kMinCapacity : capacity_ * 2;
        if (bytes_of(capacity_) >= kMapMin / 2) {
            cap = capacity_ + capacity_ / 8;
        }
        cap = std::min<size_t>(array_bytes(bytes_of(cap)) / sizeof(Entry), kMaxCapacity);
        void *p = array_grow(data_, bytes_of(capacity_), bytes_of(cap));
        if (p == nullptr) {
            return false;
        }
        data_     = static_cast<Entry *>(p);
        capacity_ = cap;
        return true;
    }

  private:
    /* kNoIndex is the free-list terminator, so the last index is never issued. */
    static constexpr size_t kMaxCapacity = kNoIndex;

    static size_t bytes_of(size_t n) { return n * sizeof(Entry); }

    void swap(FlatPool &o) noexcept {
        std::swap(data_, o.data_);
        std::swap(capacity_, o.capacity_);
        std::swap(issued_, o.issued_);
        std::swap(free_head_, o.free_head_);
        std::swap(live_, o.live_);
    }

    Entry   *data_      = nullptr;
    size_t   capacity_  = 0;
    uint32_t issued_    = 0;
    uint32_t free_head_ = kNoIndex;
    size_t   live_      = 0;
};

}  // namespace detail
}  // namespace match
}  // namespace uct_tm

#endif
