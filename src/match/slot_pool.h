/*
 * SlotPool: chunked storage of fixed-size entries addressed by a 32-bit index.
 *
 * Indexes stay valid while the pool grows (chunks never move), freed slots are
 * reused LIFO so a steady-state workload touches the same hot entries and never
 * allocates. The entry type provides the free-list link (`free_link()`, usually a
 * field that is idle while the slot is free).
 */
#ifndef UCT_TM_MATCH_SLOT_POOL_H_
#define UCT_TM_MATCH_SLOT_POOL_H_

#include <cstddef>
#include <cstdint>
#include <memory>
#include <vector>

namespace uct_tm {
namespace match {

inline constexpr uint32_t kNoIndex = UINT32_MAX;

template <typename Entry, unsigned kChunkShift = 7> class SlotPool {
  public:
    static constexpr uint32_t kChunkSize = 1u << kChunkShift;

    Entry &operator[](uint32_t index) {
        return chunks_[index >> kChunkShift][index & (kChunkSize - 1)];
    }
    const Entry &operator[](uint32_t index) const {
        return chunks_[index >> kChunkShift][index & (kChunkSize - 1)];
    }

    /* Number of slots ever handed out: valid indexes are [0, issued()). */
    uint32_t issued() const { return issued_; }
    size_t   live() const { return live_; }
    size_t   memory_bytes() const {
        return chunks_.size() * kChunkSize * sizeof(Entry) +
               chunks_.capacity() * sizeof(chunks_[0]);
    }

    /* A slot taken by allocate_slot(): its index and its entry. */
    struct Slot {
        uint32_t index;
        Entry   *entry;
    };

    /* Takes a slot; the entry keeps its generation. Throws std::bad_alloc
     * (pool unchanged) when a new chunk cannot be allocated. Returns the
     * entry too, so a caller on a hot path does not look its chunk up again. */
    Slot allocate_slot() {
        Slot slot;
        if (free_head_ != kNoIndex) {
            slot.index = free_head_;
            slot.entry = &(*this)[slot.index];
            free_head_ = slot.entry->free_link();
        } else {
            if ((issued_ & (kChunkSize - 1)) == 0) {
                grow();
            }
            slot.index = issued_++;
            slot.entry = &chunks_.back()[slot.index & (kChunkSize - 1)];
        }
        ++live_;
        return slot;
    }
    uint32_t allocate() { return allocate_slot().index; }
    /* allocate_slot() that does not throw: entry is null (the pool
     * unchanged) when a new chunk could not be allocated. */
    Slot try_allocate_slot() noexcept {
        if (free_head_ == kNoIndex) {
            return allocate_fresh_nothrow();
        }
        Slot slot{free_head_, &(*this)[free_head_]};
        free_head_ = slot.entry->free_link();
        ++live_;
        return slot;
    }

    /* Returns a slot to the free list; `entry` is (*this)[index], which the
     * caller usually holds already. */
    void release(uint32_t index, Entry &entry) {
        entry.free_link() = free_head_;
        free_head_        = index;
        --live_;
    }
    void release(uint32_t index) { release(index, (*this)[index]); }

  private:
    [[gnu::noinline]] void grow() { /* cold: keeps callers small */
        if (issued_ == kNoIndex) {
            throw std::bad_alloc();
        }
        chunks_.reserve(chunks_.size() + 1);
        chunks_.push_back(std::make_unique<Entry[]>(kChunkSize));
    }

    [[gnu::noinline]] Slot allocate_fresh_nothrow() noexcept {
        try {
            return allocate_slot();
        } catch (const std::bad_alloc &) {
            return Slot{kNoIndex, nullptr};
        }
    }

    std::vector<std::unique_ptr<Entry[]>> chunks_;
    uint32_t                              issued_    = 0;
    uint32_t                              free_head_ = kNoIndex;
    size_t                                live_      = 0;
};

}  // namespace match
}  // namespace uct_tm

#endif
