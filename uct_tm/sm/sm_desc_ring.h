/*
 * DescRing: the receive descriptors no FIFO element carries and the layer
 * above does not hold, oldest first.
 *
 * Why a queue and not a stack: a sender writes a message larger than an
 * element into the descriptor the element names. A descriptor the receiver
 * read a moment ago still sits in the receiver's cache, and writing it makes
 * every line cross from that core to the sender's -- the slow path of
 * docs/perf.md ("The mid-size slow mode"). So while messages queue, the
 * receiver gives an element whose descriptor it just read the least recently
 * used spare one instead, and a descriptor is written again only after all
 * the others were (SPARE_DESCS sets how many there are), whatever the FIFO's
 * length. With nothing queued the element keeps its descriptor: a sender
 * waiting for each answer finds it in its cache, a rested one in neither.
 *
 * Fixed capacity (every descriptor of the segment), allocated once; push and
 * pop allocate nothing.
 */
#ifndef UCT_TM_SM_SM_DESC_RING_H_
#define UCT_TM_SM_SM_DESC_RING_H_

#include <cstdint>
#include <vector>

namespace uct_tm::sm {

/* Only a descriptor that carried this much is rotated: a message that
 * wrote fewer lines is faster written again warm (osu_bw 1-2 KiB, UCX
 * 1.13.1: 1.05-1.13x against rotating every one; docs/tm_sm.md). */
constexpr uint32_t kRotateMinBytes = 4096;

class DescRing {
  public:
    /* Room for `capacity` descriptors, empty. Throws std::bad_alloc. */
    void reset(uint32_t capacity) {
        slots_.assign(capacity, 0);
        head_  = 0;
        count_ = 0;
    }

    bool     empty() const { return count_ == 0; }
    uint32_t size() const { return count_; }

    /* Appends `d` as the most recently used; false when full (a descriptor
     * given back twice: there are no more than `capacity`). */
    bool push(uint32_t d) {
        const uint32_t capacity = static_cast<uint32_t>(slots_.size());
        if (count_ == capacity) {
            return false;
        }
        uint32_t at = head_ + count_;
        if (at >= capacity) {
            at -= capacity;
        }
        slots_[at] = d;
        ++count_;
        return true;
    }

    /* The least recently used descriptor; the ring must not be empty. */
    uint32_t pop() {
        const uint32_t d = slots_[head_];
        if (++head_ == slots_.size()) {
            head_ = 0;
        }
        --count_;
        return d;
    }

  private:
    std::vector<uint32_t> slots_;
    uint32_t              head_  = 0;
    uint32_t              count_ = 0;
};

}  // namespace uct_tm::sm

#endif
