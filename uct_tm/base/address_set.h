/*
 * AddressSet: the posted receive buffers of an iface, so posting one twice
 * is refused (UCS_ERR_ALREADY_EXISTS) the way rc_mlx5 refuses it.
 *
 * Open addressing over pointer keys with tombstones; grows only when the set
 * reaches a new maximum size, so steady-state post/match cycles do not
 * allocate.
 */
#ifndef UCT_TM_BASE_ADDRESS_SET_H_
#define UCT_TM_BASE_ADDRESS_SET_H_

#include <cstddef>
#include <cstdint>
#include <memory>
#include <new>

namespace uct_tm {

class AddressSet {
  public:
    /* False if `key` was already present. Throws std::bad_alloc on growth failure. */
    bool insert(uintptr_t key) {
        if ((used_ + 1) * 2 > capacity_) {
            rehash(((size_ + 1) * 4 > capacity_) ? capacity_ * 2 : capacity_);
        }
        size_t   i         = slot(key);
        size_t   tombstone = SIZE_MAX;
        while (slots_[i] != kEmpty) {
            if (slots_[i] == key) {
                return false;
            }
            if ((slots_[i] == kTombstone) && (tombstone == SIZE_MAX)) {
                tombstone = i;
            }
            i = (i + 1) & (capacity_ - 1);
        }
        if (tombstone != SIZE_MAX) {
            i = tombstone;
        } else {
            ++used_;
        }
        slots_[i] = key;
        ++size_;
        return true;
    }

    bool contains(uintptr_t key) const { return find(key) != SIZE_MAX; }

    void erase(uintptr_t key) {
        const size_t i = find(key);
        if (i != SIZE_MAX) {
            slots_[i] = kTombstone;
            --size_;
        }
    }

    size_t size() const { return size_; }

  private:
    /* Keys are user buffer addresses, never these. */
    static constexpr uintptr_t kEmpty     = 0;
    static constexpr uintptr_t kTombstone = 1;

    size_t slot(uintptr_t key) const {
        return static_cast<size_t>((key * 0x9e3779b97f4a7c15ull) >> 20) & (capacity_ - 1);
    }

    size_t find(uintptr_t key) const {
        if (capacity_ == 0) {
            return SIZE_MAX;
        }
        for (size_t i = slot(key); slots_[i] != kEmpty; i = (i + 1) & (capacity_ - 1)) {
            if (slots_[i] == key) {
                return i;
            }
        }
        return SIZE_MAX;
    }

    void rehash(size_t capacity) {
        capacity = (capacity < 16) ? 16 : capacity;
        /* Allocate first: on failure the set is unchanged. */
        std::unique_ptr<uintptr_t[]> old(new uintptr_t[capacity]());
        old.swap(slots_);
        const size_t old_capacity = capacity_;
        capacity_ = capacity;
        used_ = size_ = 0;
        for (size_t i = 0; i < old_capacity; ++i) {
            if (old[i] > kTombstone) {
                insert(old[i]);
            }
        }
    }

    std::unique_ptr<uintptr_t[]> slots_;
    size_t                       capacity_ = 0;
    size_t                       size_     = 0; /* live keys */
    size_t                       used_     = 0; /* live keys + tombstones */
};

}  // namespace uct_tm

#endif
