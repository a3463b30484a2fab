/*
 * AddressSet: the posted receive buffers of an iface, so posting one twice
 * is refused (UCS_ERR_ALREADY_EXISTS) the way rc_mlx5 refuses it.
 *
 * Open addressing with linear probing over pointer keys. Erase shifts the
 * following entries of the probe run back instead of leaving tombstones, so
 * a post/match cycle never degrades the table or rehashes it: memory is
 * allocated only when the set reaches a new maximum size.
 *
 * insert() tells where the key went and erase() takes that position as a
 * hint: the owner of a key (a posted receive) removes it without hashing it
 * again unless a later erase shifted it (then it is looked up).
 */
#ifndef UCT_TM_TAG_ADDRESS_SET_H_
#define UCT_TM_TAG_ADDRESS_SET_H_

#include <cstddef>
#include <cstdint>
#include <memory>
#include <new>

#include <ucs/sys/compiler_def.h>

namespace uct_tm {

class AddressSet {
  public:
    /* False if `key` was already present. `key` must not be 0 (the empty
     * marker). *where: the position it went to (a hint for erase()).
     * Throws std::bad_alloc on growth failure (set unchanged). */
    bool insert(uintptr_t key, size_t *where) {
        if (ucs_unlikely(!has_room())) {
            grow();
        }
        return insert_in_room(key, where);
    }
    bool insert(uintptr_t key) {
        size_t where;
        return insert(key, &where);
    }

    /* True if insert_in_room() may be called: one more key fits without
     * growing the table. */
    bool has_room() const { return size_ < grow_at_; }
    bool insert_in_room(uintptr_t key, size_t *where) {
        size_t i = home(key);
        while (slots_[i] != kEmpty) {
            if (slots_[i] == key) {
                return false;
            }
            i = next(i);
        }
        slots_[i] = key;
        ++size_;
        *where = i;
        return true;
    }

    bool contains(uintptr_t key) const { return find(key) != kNotFound; }

    /* Removes `key` if present; `hint` is where insert() put it. */
    void erase(uintptr_t key, size_t hint) {
        const size_t hole = ((hint < capacity_) && (slots_[hint] == key)) ? hint : find(key);
        if (hole != kNotFound) {
            erase_at(hole);
        }
    }
    void erase(uintptr_t key) { erase(key, kNotFound); }

    size_t size() const { return size_; }
    size_t capacity() const { return capacity_; }

  private:
    static constexpr uintptr_t kEmpty       = 0;
    static constexpr size_t    kNotFound    = SIZE_MAX;
    static constexpr size_t    kMinCapacity = 16;
    /* At most a quarter full: runs stay short, and an erase walks its run to
     * shift it back (posted buffers are few, so the table stays small). */
    static constexpr size_t    kLoadDivisor = 4;

    void erase_at(size_t hole) {
        /* Backward shift: move up every later entry of the run whose home
         * slot does not lie cyclically in (hole, j]. */
        for (size_t j = next(hole); slots_[j] != kEmpty; j = next(j)) {
            const size_t h = home(slots_[j]);
            const bool   stays = (hole < j) ? ((hole < h) && (h <= j)) : ((hole < h) || (h <= j));
            if (!stays) {
                slots_[hole] = slots_[j];
                hole         = j;
            }
        }
        slots_[hole] = kEmpty;
        --size_;
    }

    /* Fibonacci hashing: buffer addresses differ mostly in middle bits. */
    size_t home(uintptr_t key) const {
        return static_cast<size_t>((key * 0x9e3779b97f4a7c15ull) >> 20) & (capacity_ - 1);
    }
    size_t next(size_t i) const { return (i + 1) & (capacity_ - 1); }

    size_t find(uintptr_t key) const {
        if (capacity_ == 0) {
            return kNotFound;
        }
        for (size_t i = home(key); slots_[i] != kEmpty; i = next(i)) {
            if (slots_[i] == key) {
                return i;
            }
        }
        return kNotFound;
    }

    /* Rare: out of line and cold (docs/perf.md, "Code shape of the hot paths"). */
    [[gnu::noinline, gnu::cold]] void grow() {
        rehash((capacity_ == 0) ? kMinCapacity : capacity_ * 2);
    }

    void rehash(size_t capacity) {
        /* Allocate first: on failure the set is unchanged. */
        std::unique_ptr<uintptr_t[]> old(new uintptr_t[capacity]());
        old.swap(slots_);
        const size_t old_capacity = capacity_;
        capacity_                 = capacity;
        grow_at_                  = capacity / kLoadDivisor;
        size_                     = 0;
        for (size_t i = 0; i < old_capacity; ++i) {
            if (old[i] != kEmpty) {
                insert(old[i]);
            }
        }
    }

    std::unique_ptr<uintptr_t[]> slots_;
    size_t                       capacity_ = 0; /* power of two, or 0 */
    size_t                       size_     = 0;
    size_t                       grow_at_  = 0; /* size that makes the set grow first */
};

}  // namespace uct_tm

#endif
