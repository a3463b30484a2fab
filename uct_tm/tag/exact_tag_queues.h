/*
 * ExactTagQueues: for each tag with posted exact receives, the two ends of
 * its queue (the first and the last receive, oldest first; the receives link
 * to each other). TagEngine keeps its receives here while all
 * of them are exact -- a streaming MPI or UCP receiver's list -- so posting
 * and matching cost one probe of a small table instead of a pass through the
 * general matcher (masks, sequence merging, unexpected queues).
 *
 * Open addressing with linear probing; erase shifts the rest of the probe run
 * back (no tombstones), so a post/match cycle never degrades the table and
 * memory is allocated only when the table reaches a new maximum size.
 *
 * The queue last found is remembered: a streaming receiver posts and matches
 * one tag over and over, and checking the remembered slot costs two loads
 * where a probe costs a hash and a walk. The slot is checked, not trusted:
 * erase() may move other queues into it, but a slot with a head is always
 * the one live queue of its tag, so "head set and tag equal" is a hit.
 */
#ifndef UCT_TM_TAG_EXACT_TAG_QUEUES_H_
#define UCT_TM_TAG_EXACT_TAG_QUEUES_H_

#include <cstddef>
#include <cstdint>
#include <memory>
#include <new>

#include <ucs/sys/compiler_def.h>

namespace uct_tm {

template <typename Item> class ExactTagQueues {
  public:
    struct Queue {
        uint64_t tag;
        Item    *head; /* null: the slot is empty */
        Item    *tail;
    };

    ExactTagQueues() = default;
    ExactTagQueues(const ExactTagQueues &)            = delete;
    ExactTagQueues &operator=(const ExactTagQueues &) = delete;

    /* The queue of `tag`, or null. */
    Queue *find(uint64_t tag) {
        if ((last_->head != nullptr) && (last_->tag == tag)) {
            return last_;
        }
        if (capacity_ == 0) {
            return nullptr;
        }
        for (size_t i = home(tag);; i = next(i)) {
            Queue &q = slots_[i];
            if (q.head == nullptr) {
                return nullptr;
            }
            if (q.tag == tag) {
                last_ = &q;
                return &q;
            }
        }
    }

    /* The queue of `tag`, created empty (head == null) if absent.
     * Throws std::bad_alloc on growth failure (table unchanged). */
    Queue *find_or_insert(uint64_t tag) {
        if ((last_->head != nullptr) && (last_->tag == tag)) {
            return last_;
        }
        if (ucs_unlikely(size_ >= grow_at_)) {
            grow();
        }
        return probe_or_insert(tag);
    }

    /* As find_or_insert(), but null where the table would have to grow. */
    Queue *find_or_insert_in_room(uint64_t tag) {
        if ((last_->head != nullptr) && (last_->tag == tag)) {
            return last_;
        }
        if (ucs_unlikely(size_ >= grow_at_)) {
            return nullptr;
        }
        return probe_or_insert(tag);
    }

    /* Removes a queue the caller emptied (head == null). */
    void erase(Queue *q) {
        size_t hole = static_cast<size_t>(q - slots_.get());
        for (size_t j = next(hole); slots_[j].head != nullptr; j = next(j)) {
            const size_t h     = home(slots_[j].tag);
            const bool   stays = (hole < j) ? ((hole < h) && (h <= j)) : ((hole < h) || (h <= j));
            if (!stays) {
                slots_[hole] = slots_[j];
                hole         = j;
            }
        }
        slots_[hole].head = nullptr;
        --size_;
    }

    /* Calls fn(const Queue &) for every queue, in table order. */
    template <typename Fn> void for_each(Fn &&fn) const {
        for (size_t i = 0; i < capacity_; ++i) {
            if (slots_[i].head != nullptr) {
                fn(slots_[i]);
            }
        }
    }

    void clear() {
        for (size_t i = 0; i < capacity_; ++i) {
            slots_[i].head = nullptr;
        }
        size_ = 0;
    }

    size_t size() const { return size_; }

  private:
    static constexpr size_t kMinCapacity = 16;

    /* Fibonacci hashing, top bits: MPI tags differ in any bit range. */
    size_t home(uint64_t tag) const {
        return static_cast<size_t>((tag * 0x9e3779b97f4a7c15ull) >> shift_);
    }
    size_t next(size_t i) const { return (i + 1) & (capacity_ - 1); }

    /* The queue of `tag`, inserted empty if absent; the table has room. */
    Queue *probe_or_insert(uint64_t tag) {
        size_t i = home(tag);
        for (; slots_[i].head != nullptr; i = next(i)) {
            if (slots_[i].tag == tag) {
                last_ = &slots_[i];
                return last_;
            }
        }
        ++size_;
        slots_[i].tag = tag;
        last_         = &slots_[i];
        return last_; /* head stays null until the caller links a receive */
    }

    /* Rare: out of line and cold (docs/perf.md, "Code shape of the hot paths"). */
    [[gnu::noinline, gnu::cold]] void grow() {
        rehash((capacity_ == 0) ? kMinCapacity : capacity_ * 2);
    }

    void rehash(size_t capacity) {
        /* Allocate first: on failure the table is unchanged. */
        std::unique_ptr<Queue[]> fresh(new Queue[capacity]);
        for (size_t i = 0; i < capacity; ++i) {
            fresh[i].head = nullptr;
        }
        fresh.swap(slots_);
        const size_t old_capacity = capacity_;
        capacity_                 = capacity;
        grow_at_                  = capacity / 2;
        shift_                    = static_cast<unsigned>(64 - __builtin_ctzll(capacity));
        last_                     = &none_; /* it pointed into the old table */
        for (size_t i = 0; i < old_capacity; ++i) {
            if (fresh[i].head != nullptr) {
                size_t j = home(fresh[i].tag);
                while (slots_[j].head != nullptr) {
                    j = next(j);
                }
                slots_[j] = fresh[i];
            }
        }
    }

    std::unique_ptr<Queue[]> slots_;
    size_t                   capacity_ = 0; /* power of two, or 0 */
    size_t                   size_     = 0;
    size_t                   grow_at_  = 0; /* size that makes the table grow first */
    unsigned                 shift_    = 64;
    Queue                    none_{0, nullptr, nullptr}; /* never a hit */
    Queue                   *last_ = &none_;             /* the queue last found (a hint) */
};

}  // namespace uct_tm

#endif
