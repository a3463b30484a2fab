/*
 * The receive FIFO of a tm_sm iface: many senders, one reader, lock-free.
 *
 * Sequence numbers start at fifo_elems (N). Senders claim consecutive
 * sequences with a CAS on the shared tail (refusing when the ring is full,
 * judged from a cached copy of the reader's head), write their elements, then
 * publish each one by a release store of its state, `seq | kStateReady`. The
 * reader consumes in sequence order and never writes an element back: it only
 * advances and publishes its head, so an element's cache line travels from
 * sender to reader and nowhere else (a reader write would make the next sender
 * pull it back).
 *
 * Dead senders: if a sender dies between claiming and publishing, the reader
 * would wait forever on that element. Once it knows a peer died it may mark a
 * long-stalled element skipped (every element the dead process claimed:
 * SmIface::recover_stall keeps the range): it first bumps the header's `skips` counter,
 * then CASes the element's state from the previous lap's value
 * `(seq - N) | kStateReady` to `seq | kStateReady | kStateSkipped`. A sender
 * that was merely slow must then not publish over the skip: it compares
 * `skips` with the value it read when it claimed, and if it moved it publishes
 * by a CAS from the previous lap's value instead, which fails on a skipped
 * element (the send reports NO_RESOURCE). Skips are rare, so `skips` stays in
 * every sender's cache and a send costs one locked instruction (the claim),
 * not two: the publish CAS waited for the element's line to arrive from the
 * reader, which a store lets the sender overlap with its next message
 * (docs/tm_sm.md, docs/perf.md). What a store cannot exclude: a sender stopped
 * for STALL_TIMEOUT exactly between reading `skips` and its store.
 */
#ifndef UCT_TM_SM_SM_FIFO_H_
#define UCT_TM_SM_SM_FIFO_H_

#include "sm_layout.h"

#include <ucs/sys/compiler_def.h>

namespace uct_tm {
namespace sm {

/* A sender's view of a peer's FIFO (geometry already validated). */
class FifoWriter {
  public:
    void init(SegmentHeader *header, const Geometry &g) {
        char *base    = reinterpret_cast<char *>(header);
        tail_         = &header->tail;
        head_         = &header->head;
        skips_        = &header->skips;
        head_cache_   = head_->load(std::memory_order_acquire);
        elems_        = base + g.fifo_offset;
        descs_        = base + g.descs_offset;
        mask_         = g.fifo_elems - 1;
        elem_size_    = g.elem_size;
        num_descs_    = g.num_descs;
        desc_stride_  = g.desc_stride;
        desc_payload_ = g.desc_payload;
    }

    /* Claims `count` consecutive elements; false when the ring has no room. */
    bool claim(uint32_t count, uint64_t *seq) {
        skips_seen_   = skips_->load(std::memory_order_acquire);
        uint64_t tail = tail_->load(std::memory_order_relaxed);
        do {
            if (ucs_unlikely(tail + count - head_cache_ > mask_ + 1)) {
                head_cache_ = head_->load(std::memory_order_acquire);
                if (tail + count - head_cache_ > mask_ + 1) {
                    return false;
                }
            }
        } while (!tail_->compare_exchange_weak(tail, tail + count, std::memory_order_acquire,
                                               std::memory_order_relaxed));
        *seq = tail;
        return true;
    }

    /* Claims `count` more elements right behind a claim that ended at `end`
     * (its last sequence + 1), so that they continue it; false if another
     * sender claimed there first or the ring has no room. */
    bool extend(uint64_t end, uint32_t count) {
        if (end + count - head_cache_ > mask_ + 1) {
            head_cache_ = head_->load(std::memory_order_acquire);
            if (end + count - head_cache_ > mask_ + 1) {
                return false;
            }
        }
        return tail_->compare_exchange_strong(end, end + count, std::memory_order_acquire,
                                              std::memory_order_relaxed);
    }

    /* True once the reader has taken every element below `end`. */
    bool taken(uint64_t end) const { return head_->load(std::memory_order_acquire) >= end; }

    /* True if `count` elements could be claimed now. */
    bool has_room(uint32_t count) {
        const uint64_t tail = tail_->load(std::memory_order_relaxed);
        if (tail + count - head_cache_ <= mask_ + 1) {
            return true;
        }
        head_cache_ = head_->load(std::memory_order_acquire);
        return tail + count - head_cache_ <= mask_ + 1;
    }

    ElemHeader *elem(uint64_t seq) const {
        return reinterpret_cast<ElemHeader *>(elems_ + (seq & mask_) * size_t{elem_size_});
    }

    /* Payload area of the descriptor the owner attached to `e`; null if the
     * owner's index is out of range (a corrupt segment). */
    char *desc_payload(const ElemHeader *e) const { return desc_payload_of(e->desc); }
    char *desc_payload_of(uint32_t d) const {
        if (ucs_unlikely(d >= num_descs_)) {
            return nullptr;
        }
        return descs_ + size_t{d} * desc_stride_ + desc_payload_;
    }

    /* Makes a written element visible; false if the owner skipped it. */
    bool publish(ElemHeader *e, uint64_t seq) const {
        if (ucs_likely(skips_->load(std::memory_order_acquire) == skips_seen_)) {
            e->state.store(seq | kStateReady, std::memory_order_release);
            return true;
        }
        const uint64_t prev     = (seq - (mask_ + 1)) | kStateReady;
        uint64_t       expected = prev;
        if (ucs_likely(e->state.compare_exchange_strong(expected, seq | kStateReady,
                                                        std::memory_order_release,
                                                        std::memory_order_relaxed))) {
            return true;
        }
        /* The previous lap's element was itself skipped: still ours to take. */
        return (expected == (prev | kStateSkipped)) &&
               e->state.compare_exchange_strong(expected, seq | kStateReady,
                                                std::memory_order_release,
                                                std::memory_order_relaxed);
    }

    uint32_t inline_capacity() const { return elem_size_ - sizeof(ElemHeader); }

  private:
    std::atomic<uint64_t> *tail_       = nullptr;
    std::atomic<uint64_t> *head_       = nullptr;
    std::atomic<uint64_t> *skips_      = nullptr;
    uint64_t               head_cache_ = 0;
    uint64_t               skips_seen_ = 0; /* `skips` at the last claim */
    char                  *elems_      = nullptr;
    char                  *descs_      = nullptr;
    uint32_t               mask_       = 0;
    uint32_t               elem_size_  = 0;
    uint32_t               num_descs_  = 0;
    uint32_t               desc_stride_  = 0;
    uint32_t               desc_payload_ = 0;
};

/* The owner's view of its own FIFO. */
class FifoReader {
  public:
    void init(SegmentHeader *header, const Geometry &g) {
        header_    = header;
        elems_     = reinterpret_cast<char *>(header) + g.fifo_offset;
        mask_      = g.fifo_elems - 1;
        elem_size_ = g.elem_size;
        head_      = mask_ + 1;
        /* Lap 0 "was" published: element i waits for sequence N + i. */
        for (uint64_t i = 0; i <= mask_; ++i) {
            elem(i)->state.store(i | kStateReady, std::memory_order_relaxed);
        }
        header->tail.store(head_, std::memory_order_relaxed);
        header->skips.store(0, std::memory_order_relaxed);
        header->head.store(head_, std::memory_order_release);
        head_elem_ = elem(head_);
    }

    /* The next element if it is published (possibly as skipped), else null.
     * The head element is kept as a pointer: every progress call polls. */
    ElemHeader *poll() const {
        const uint64_t state = head_elem_->state.load(std::memory_order_acquire);
        return ((state & ~kStateSkipped) == (head_ | kStateReady)) ? head_elem_ : nullptr;
    }

    /* Whether the element after the head one is published too: messages are
     * queued behind the one being read. Reads the line poll() reads next. */
    bool backlog() const {
        const uint64_t next  = head_ + 1;
        const uint64_t state = elem(next)->state.load(std::memory_order_relaxed);
        return (state & ~kStateSkipped) == (next | kStateReady);
    }

    static bool skipped(const ElemHeader *e) {
        return e->state.load(std::memory_order_relaxed) & kStateSkipped;
    }

    /* Frees the element poll() returned (for the sender of the next lap). */
    void release() {
        ++head_;
        header_->head.store(head_, std::memory_order_release);
        head_elem_ = elem(head_);
    }

    /* A sender claimed the next element but has not published it. */
    bool stalled() const {
        return (header_->tail.load(std::memory_order_relaxed) > head_) && (poll() == nullptr);
    }

    /* Gives up on the stalled next element (its sender died). */
    bool skip_stalled() {
        const uint64_t prev     = (head_ - (mask_ + 1)) | kStateReady;
        uint64_t       expected = elem(head_)->state.load(std::memory_order_acquire);
        if ((expected & ~kStateSkipped) != prev) {
            return false; /* published meanwhile */
        }
        /* First: a sender that reads `skips` after this publishes by CAS. */
        header_->skips.fetch_add(1, std::memory_order_seq_cst);
        return elem(head_)->state.compare_exchange_strong(
            expected, head_ | kStateReady | kStateSkipped, std::memory_order_acq_rel);
    }

    uint64_t head() const { return head_; }
    /* The next sequence senders claim: every claim so far is below it. */
    uint64_t tail() const { return header_->tail.load(std::memory_order_acquire); }
    uint32_t inline_capacity() const { return elem_size_ - sizeof(ElemHeader); }
    /* The ring position of the head element (the one poll() returned). */
    uint32_t head_index() const { return static_cast<uint32_t>(head_ & mask_); }
    /* The ring is under 4 GiB (make_geometry: at most 2^20 elements of at
     * most 4 KiB), so a 32-bit division: a 64-bit one costs up to 45 cycles. */
    uint32_t index(const ElemHeader *e) const {
        const uintptr_t offset = reinterpret_cast<uintptr_t>(e) - reinterpret_cast<uintptr_t>(elems_);
        return static_cast<uint32_t>(offset) / elem_size_;
    }
    ElemHeader *elem(uint64_t seq) const {
        return reinterpret_cast<ElemHeader *>(elems_ + (seq & mask_) * size_t{elem_size_});
    }

  private:
    SegmentHeader *header_    = nullptr;
    char          *elems_     = nullptr;
    ElemHeader    *head_elem_ = nullptr; /* elem(head_) */
    uint64_t       head_      = 0;
    uint64_t       mask_      = 0;
    uint32_t       elem_size_ = 0;
};

inline void *inline_payload(ElemHeader *e) { return e + 1; }

}  // namespace sm
}  // namespace uct_tm

#endif
