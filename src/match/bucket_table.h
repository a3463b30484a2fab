/*
 * BucketTable: hash table mapping a 64-bit key to the index of the first entry
 * of that key's FIFO list.
 *
 * Layout in the style of SwissTable: slots come in aligned groups of 16, each
 * with 16 control bytes (empty, deleted, or 7 bits of the key's hash) and 16
 * 32-bit heads. A lookup compares a whole group's control bytes at once
 * (SSE2) and reads an entry only for a 7-bit match, so probing has no
 * data-dependent loop over slots and deleting never shifts anything: the
 * branch predictor sees the same path whatever the keys. The key itself is
 * not stored (it is derived from the head entry): 5 bytes a slot, at most
 * 7/8 full, so 6-12 bytes per distinct key.
 *
 * Locality: the group is chosen by a hash of the key without its 3 lowest
 * "free" bits (the lowest bits the mask lets through), and those bits go into
 * the control byte. So 8 consecutive keys (a message sequence, a run of
 * ranks) share one group: deep queues of such tags cost one cache miss per 8
 * operations, while keys differing anywhere else spread evenly.
 */
#ifndef UCT_TM_MATCH_BUCKET_TABLE_H_
#define UCT_TM_MATCH_BUCKET_TABLE_H_

#include "slot_pool.h"
#include "table_allocator.h"

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <vector>

#if defined(__SSE2__)
#include <emmintrin.h>
#endif

namespace uct_tm {
namespace match {

class BucketTable {
  public:
    /* Reference to a key's head index inside the table; valid until the
     * next insert, erase or growth. */
    using Ref = uint32_t *;

    BucketTable() { reset(); }

    /* Declares which bits keys can have (the class mask), so the locality
     * bits are the lowest of those. Only while the table is empty. */
    void set_key_mask(uint64_t mask) {
        shift_ = (mask == 0) ? 0 : static_cast<uint8_t>(__builtin_ctzll(mask));
    }

    size_t size() const { return size_; }
    size_t memory_bytes() const {
        return ctrl_.capacity() * sizeof(int8_t) + heads_.capacity() * sizeof(uint32_t);
    }

    /* 64-bit hash: bits [0, 7) become the control byte (3 locality bits +
     * 4 hash bits), bits [32, 64) pick the home group. */
    uint64_t hash(uint64_t key) const {
        const uint64_t local = (key >> shift_) & 7;
        uint64_t       rest  = key ^ (local << shift_);
        rest ^= rest >> 32;
        rest *= 0x9e3779b97f4a7c15ULL;
        return (rest & ~uint64_t{0x7f}) | ((rest >> 25) & 0x78) | local;
    }

    /* Starts loading a key's home group, so several independent lookups
     * overlap their cache misses. */
    void prefetch(uint64_t h) const {
        const size_t g = home_group(h);
        __builtin_prefetch(&ctrl_[g * kGroup]);
        __builtin_prefetch(&heads_[g * kGroup]);
    }

    /* Head of `key`, or nullptr. `key_of(head)` gives a head's key. */
    template <typename KeyOf> Ref find(uint64_t key, const KeyOf &key_of) {
        return find(key, hash(key), key_of);
    }

    template <typename KeyOf> Ref find(uint64_t key, uint64_t h, const KeyOf &key_of) {
        const int8_t h2 = control_of(h);
        for (size_t g = home_group(h);; g = (g + 1) & group_mask_) {
            const int8_t *ctrl = &ctrl_[g * kGroup];
            for (uint32_t m = match_byte(ctrl, h2); m != 0; m &= m - 1) {
                const size_t i = g * kGroup + __builtin_ctz(m);
                if (key_of(heads_[i]) == key) {
                    return &heads_[i];
                }
            }
            if (match_byte(ctrl, kEmpty) != 0) {
                return nullptr;
            }
        }
    }

    /* Head of `key`; if absent, inserts (key -> head) in the same probe and
     * sets *inserted. reserve_one() must have been called. */
    template <typename KeyOf>
    Ref find_or_insert(uint64_t key, const KeyOf &key_of, uint32_t head, bool *inserted) {
        const uint64_t h     = hash(key);
        const int8_t   h2    = control_of(h);
        size_t         avail = SIZE_MAX;
        for (size_t g = home_group(h);; g = (g + 1) & group_mask_) {
            const int8_t *ctrl = &ctrl_[g * kGroup];
            for (uint32_t m = match_byte(ctrl, h2); m != 0; m &= m - 1) {
                const size_t i = g * kGroup + __builtin_ctz(m);
                if (key_of(heads_[i]) == key) {
                    *inserted = false;
                    return &heads_[i];
                }
            }
            const uint32_t free = match_free(ctrl);
            if ((avail == SIZE_MAX) && (free != 0)) {
                avail = g * kGroup + __builtin_ctz(free);
            }
            if (match_byte(ctrl, kEmpty) != 0) {
                break;
            }
        }
        deleted_ -= (ctrl_[avail] == kDeleted);
        set_control(avail, h2);
        heads_[avail] = head;
        ++size_;
        *inserted = true;
        return &heads_[avail];
    }

    /* Makes room for one more key; may throw std::bad_alloc (table unchanged).
     * Call before mutating anything else, so an insert cannot fail midway. */
    template <typename KeyOf> void reserve_one(const KeyOf &key_of) {
        if (__builtin_expect((size_ + deleted_ + 1) * 8 > capacity() * 7, 0)) {
            /* Mostly tombstones: clean them in place (no allocation, so a
             * steady workload never allocates); otherwise double. */
            if ((size_ + 1) * 16 <= capacity() * 7) {
                drop_deleted(key_of);
            } else {
                rehash(capacity() * 2, key_of);
            }
        }
    }

    /* Removes the key whose head `ref` points at. A group that still has an
     * empty slot never ended a probe for another key, so the slot can become
     * empty again; in a full group it becomes a tombstone. */
    void erase(Ref ref) {
        const size_t i = static_cast<size_t>(ref - heads_.data());
        if (match_byte(&ctrl_[i & ~(kGroup - 1)], kEmpty) != 0) {
            set_control(i, kEmpty);
        } else {
            set_control(i, kDeleted);
            ++deleted_;
        }
        --size_;
    }

    /* Forgets every key; keeps the capacity. */
    void clear() {
        std::fill(ctrl_.begin(), ctrl_.end(), kEmpty);
        size_    = 0;
        deleted_ = 0;
    }

    /* Forgets every key and returns to the minimum capacity. */
    void reset() {
        std::vector<int8_t, TableAllocator<int8_t>>(kGroup, kEmpty).swap(ctrl_);
        std::vector<uint32_t, TableAllocator<uint32_t>>(kGroup, kNoIndex).swap(heads_);
        group_mask_ = 0;
        size_       = 0;
        deleted_    = 0;
    }

  private:
    static constexpr size_t kGroup   = 16;
    static constexpr int8_t kEmpty   = -128;
    static constexpr int8_t kDeleted = -2;

    size_t capacity() const { return (group_mask_ + 1) * kGroup; }
    size_t home_group(uint64_t h) const { return (h >> 32) & group_mask_; }
    static int8_t control_of(uint64_t h) { return static_cast<int8_t>(h & 0x7f); }

#if defined(__SSE2__)
    /* Writes one control byte as a whole-group store: the next lookup loads
     * the group with one 16-byte load, which a 1-byte store could not
     * forward to (a pipeline stall on every operation of a hot group). */
    void set_control(size_t i, int8_t value) {
        alignas(16) static constexpr int8_t kLane[2 * kGroup] = {
                0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0,
                -1, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0};
        __m128i *const group = reinterpret_cast<__m128i *>(&ctrl_[i & ~(kGroup - 1)]);
        const __m128i  lane  = _mm_loadu_si128(
                reinterpret_cast<const __m128i *>(&kLane[kGroup - (i & (kGroup - 1))]));
        const __m128i old = _mm_loadu_si128(group);
        _mm_storeu_si128(group, _mm_or_si128(_mm_andnot_si128(lane, old),
                                             _mm_and_si128(lane, _mm_set1_epi8(value))));
    }
    static uint32_t match_byte(const int8_t *ctrl, int8_t value) {
        const __m128i group = _mm_loadu_si128(reinterpret_cast<const __m128i *>(ctrl));
        return static_cast<uint32_t>(_mm_movemask_epi8(_mm_cmpeq_epi8(group, _mm_set1_epi8(value))));
    }
    /* Empty or deleted: the only control values with the sign bit set. */
    static uint32_t match_free(const int8_t *ctrl) {
        const __m128i group = _mm_loadu_si128(reinterpret_cast<const __m128i *>(ctrl));
        return static_cast<uint32_t>(_mm_movemask_epi8(group));
    }
#else
    void set_control(size_t i, int8_t value) { ctrl_[i] = value; }
    static uint32_t match_byte(const int8_t *ctrl, int8_t value) {
        uint32_t m = 0;
        for (size_t i = 0; i < kGroup; ++i) {
            m |= static_cast<uint32_t>(ctrl[i] == value) << i;
        }
        return m;
    }
    static uint32_t match_free(const int8_t *ctrl) {
        uint32_t m = 0;
        for (size_t i = 0; i < kGroup; ++i) {
            m |= static_cast<uint32_t>(ctrl[i] < 0) << i;
        }
        return m;
    }
#endif

    /* Removes every tombstone without reallocating: full slots are marked
     * "to place" (as deleted) and each is moved to the first free slot of its
     * probe sequence, swapping with a not-yet-placed element when needed. */
    template <typename KeyOf> [[gnu::noinline]] void drop_deleted(const KeyOf &key_of) {
        int8_t *const ctrl = ctrl_.data();
        for (size_t i = 0; i < capacity(); ++i) {
            ctrl[i] = (ctrl[i] < 0) ? kEmpty : kDeleted;
        }
        for (size_t i = 0; i < capacity(); ++i) {
            while (ctrl[i] == kDeleted) {
                const uint64_t h    = hash(key_of(heads_[i]));
                const size_t   home = home_group(h);
                size_t         g    = home;
                uint32_t       free;
                while ((free = match_free(&ctrl[g * kGroup])) == 0) {
                    g = (g + 1) & group_mask_;
                }
                const size_t j = g * kGroup + __builtin_ctz(free);
                /* Already in the first group of its probe with room: stay. */
                if ((((i / kGroup) - home) & group_mask_) == ((g - home) & group_mask_)) {
                    ctrl[i] = control_of(h);
                    break;
                }
                if (ctrl[j] == kEmpty) {
                    ctrl[j]   = control_of(h);
                    heads_[j] = heads_[i];
                    ctrl[i]   = kEmpty;
                    break;
                }
                /* j holds an element not placed yet: swap, then place it. */
                ctrl[j] = control_of(h);
                std::swap(heads_[i], heads_[j]);
            }
        }
        deleted_ = 0;
    }

    template <typename KeyOf> void rehash(size_t capacity, const KeyOf &key_of) {
        std::vector<int8_t, TableAllocator<int8_t>>   ctrl(capacity, kEmpty);
        std::vector<uint32_t, TableAllocator<uint32_t>> heads(capacity, kNoIndex);
        const size_t          group_mask = capacity / kGroup - 1;
        for (size_t i = 0; i < ctrl_.size(); ++i) {
            if (ctrl_[i] < 0) {
                continue;
            }
            const uint64_t h = hash(key_of(heads_[i]));
            for (size_t g = (h >> 32) & group_mask;; g = (g + 1) & group_mask) {
                const uint32_t free = match_free(&ctrl[g * kGroup]);
                if (free != 0) {
                    const size_t j = g * kGroup + __builtin_ctz(free);
                    ctrl[j]        = control_of(h);
                    heads[j]       = heads_[i];
                    break;
                }
            }
        }
        ctrl_.swap(ctrl);
        heads_.swap(heads);
        group_mask_ = group_mask;
        deleted_    = 0;
    }

    std::vector<int8_t, TableAllocator<int8_t>>   ctrl_;
    std::vector<uint32_t, TableAllocator<uint32_t>> heads_;
    size_t                group_mask_ = 0;
    size_t                size_       = 0;
    size_t                deleted_    = 0;
    uint8_t               shift_      = 0;
};

}  // namespace match
}  // namespace uct_tm

#endif
