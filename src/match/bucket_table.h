/*
 * BucketTable: open-addressing hash table mapping a 64-bit key to the index of
 * the first entry of that key's FIFO list.
 *
 * A slot is 8 bytes: the head index and a 32-bit fingerprint of the key. The
 * key itself is not stored (it is derivable from the head entry), which keeps
 * the table at <= 16 bytes per distinct key; the entry is dereferenced only
 * when the fingerprint matches. Linear probing, load factor <= 1/2,
 * backward-shift deletion (no tombstones, so lookups never degrade over time).
 *
 * The home slot is the fingerprint's low bits. The fingerprint keeps a key's
 * 3 low bits as they are and mixes all the others, so 8 consecutive tags (a
 * message sequence, a run of ranks) share one 64-byte line of slots: deep
 * queues of such tags cost one cache miss per 8 operations instead of one per
 * operation, while tags differing anywhere else still spread evenly.
 */
#ifndef UCT_TM_MATCH_BUCKET_TABLE_H_
#define UCT_TM_MATCH_BUCKET_TABLE_H_

#include "slot_pool.h"

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <vector>

namespace uct_tm {
namespace match {

class BucketTable {
  public:
    struct Slot {
        uint32_t head = kNoIndex;
        uint32_t fp   = 0;
    };

    BucketTable() { reset(); }

    size_t size() const { return size_; }
    size_t memory_bytes() const { return lines_.capacity() * sizeof(Line); }

    /* Slot holding `key`, or nullptr. `key_of(head)` gives a head's key. */
    template <typename KeyOf> Slot *find(uint64_t key, const KeyOf &key_of) {
        const uint32_t fp    = fingerprint(key);
        Slot *const    slots = lines_[0].slot;
        for (uint32_t pos = fp & mask_;; pos = (pos + 1) & mask_) {
            Slot &slot = slots[pos];
            if (slot.head == kNoIndex) {
                return nullptr;
            }
            if ((slot.fp == fp) && (key_of(slot.head) == key)) {
                return &slot;
            }
        }
    }

    /* Slot holding `key`; if absent, inserts (key -> head) in the same probe
     * and sets *inserted. reserve_one() must have been called. */
    template <typename KeyOf>
    Slot *find_or_insert(uint64_t key, const KeyOf &key_of, uint32_t head, bool *inserted) {
        const uint32_t fp    = fingerprint(key);
        Slot *const    slots = lines_[0].slot;
        for (uint32_t pos = fp & mask_;; pos = (pos + 1) & mask_) {
            Slot &slot = slots[pos];
            if (slot.head == kNoIndex) {
                slot      = Slot{head, fp};
                *inserted = true;
                ++size_;
                return &slot;
            }
            if ((slot.fp == fp) && (key_of(slot.head) == key)) {
                *inserted = false;
                return &slot;
            }
        }
    }

    /* Makes room for one more key; may throw std::bad_alloc (table unchanged).
     * Call before mutating anything else, so an insert cannot fail midway. */
    void reserve_one() {
        if (__builtin_expect((size_ + 1) * 2 > capacity(), 0)) {
            grow();
        }
    }

    /* Removes a slot returned by find(). */
    void erase(Slot *slot) {
        Slot *const slots = lines_[0].slot;
        uint32_t    hole  = static_cast<uint32_t>(slot - slots);
        for (uint32_t pos = (hole + 1) & mask_;; pos = (pos + 1) & mask_) {
            const Slot &next = slots[pos];
            if (next.head == kNoIndex) {
                break;
            }
            /* Move `next` back into the hole unless its home lies cyclically
             * in (hole, pos]: then it is already as close as it can get. */
            const uint32_t home = next.fp & mask_;
            if (((pos - home) & mask_) >= ((pos - hole) & mask_)) {
                slots[hole] = next;
                hole         = pos;
            }
        }
        slots[hole] = Slot{};
        --size_;
    }

    /* Forgets every key; keeps the capacity. */
    void clear() {
        std::fill(lines_.begin(), lines_.end(), Line{});
        size_ = 0;
    }

    /* Forgets every key and returns to the minimum capacity. */
    void reset() {
        std::vector<Line>(kMinCapacity / kLineSlots).swap(lines_);
        mask_  = kMinCapacity - 1;
        size_  = 0;
    }

    /* Low 3 bits: the key's own (locality, see above). Upper 29 bits: the
     * high half of a multiplicative hash of the remaining bits, folded first
     * so that every key bit reaches them (tags that differ only in a high
     * field, such as a source rank, still spread). */
    static uint32_t fingerprint(uint64_t key) {
        uint64_t rest = key >> 3;
        rest ^= rest >> 32;
        rest *= 0x9e3779b97f4a7c15ULL;
        return (static_cast<uint32_t>(rest >> 32) << 3) | static_cast<uint32_t>(key & 7);
    }

  private:
    static constexpr size_t kLineSlots   = 8;
    static constexpr size_t kMinCapacity = 16;

    struct alignas(64) Line {
        Slot slot[kLineSlots];
    };
    static_assert(sizeof(Line) == kLineSlots * sizeof(Slot), "slot lines must be contiguous");

    size_t capacity() const { return size_t{mask_} + 1; }

    [[gnu::noinline]] void grow() { rehash(capacity() * 2); }

    void rehash(size_t capacity) {
        std::vector<Line> bigger(capacity / kLineSlots);
        Slot *const       to   = bigger[0].slot;
        const uint32_t    mask = static_cast<uint32_t>(capacity - 1);
        const Slot *const from = lines_[0].slot;
        for (size_t i = 0; i <= mask_; ++i) {
            const Slot &slot = from[i];
            if (slot.head == kNoIndex) {
                continue;
            }
            uint32_t pos = slot.fp & mask;
            while (to[pos].head != kNoIndex) {
                pos = (pos + 1) & mask;
            }
            to[pos] = slot;
        }
        lines_.swap(bigger);
        mask_  = mask;
    }

    std::vector<Line> lines_; /* the slots, as one 64-byte aligned array */
    uint32_t          mask_ = 0;
    size_t            size_ = 0;
};

}  // namespace match
}  // namespace uct_tm

#endif
