/*
 * Ring: a FIFO in one power-of-two array that doubles when full. Pushing
 * and popping allocate nothing once it has held the deepest backlog seen
 * (a std::deque allocates a node every few entries as it moves along).
 */
#ifndef UCT_TM_FABRIC_RING_H_
#define UCT_TM_FABRIC_RING_H_

#include <cstddef>
#include <cstdint>
#include <memory>
#include <utility>

namespace uct_tm {
namespace fabric {

template <typename T> class Ring {
  public:
    bool   empty() const { return head_ == tail_; }
    size_t size() const { return static_cast<size_t>(tail_ - head_); }
    size_t capacity() const { return capacity_; }
    T     &front() { return slots_[head_ & mask_]; }
    void   pop_front() { ++head_; }

    /* Throws std::bad_alloc (the ring unchanged) if it must grow and cannot. */
    void push_back(const T &value) { emplace_back() = value; }
    /* Room for `n` elements in all (throws std::bad_alloc, unchanged). */
    void reserve(size_t n) {
        while (capacity_ < n) {
            grow();
        }
    }
    /* A new last element for the caller to fill: it holds whatever the
     * slot held before (a popped element, or a value-initialized one). */
    T &emplace_back() {
        if (size() == capacity_) {
            grow();
        }
        return emplace_back_in_room();
    }
    /* emplace_back() where the caller knows there is room (size() <
     * capacity(): reserve() made it): no check, no allocation. */
    T &emplace_back_in_room() { return slots_[tail_++ & mask_]; }

  private:
    static constexpr size_t kFirstCapacity = 64;

    [[gnu::noinline]] void grow() { /* cold: keeps emplace_back() small */
        const size_t capacity = (capacity_ == 0) ? kFirstCapacity : (2 * capacity_);
        auto         slots    = std::make_unique<T[]>(capacity);
        const size_t n        = size();
        for (size_t i = 0; i < n; ++i) {
            slots[i] = std::move(slots_[(head_ + i) & mask_]);
        }
        head_     = 0;
        tail_     = n;
        slots_    = std::move(slots);
        capacity_ = capacity;
        mask_     = capacity - 1;
    }

    std::unique_ptr<T[]> slots_;
    size_t               capacity_ = 0;
    size_t               mask_     = 0;
    uint64_t             head_     = 0; /* the counts ever popped and pushed */
    uint64_t             tail_     = 0;
};

}  // namespace fabric
}  // namespace uct_tm

#endif
