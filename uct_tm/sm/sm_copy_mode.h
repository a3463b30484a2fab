/*
 * CopyMode: how tm_sm's sender copies a mid-size eager message into the
 * receiver's descriptors -- ordinary stores, or streaming stores that bypass
 * its cache (base/stream_copy.h) -- chosen per message from how fast its
 * ordinary copies have been running.
 *
 * An ordinary copy into descriptor lines the receiver last read must take
 * them back from the receiver's cache first, so its speed tells how fast
 * modified lines cross between the two cores right now: ~25 GB/s on this
 * machine's fast mode, 3-4 GB/s in its slow one (docs/perf.md). One
 * ordinary copy in kSampleEvery is timed (two clock reads); below `slow_bw`
 * kSlowRun times in a row, the sender streams; while streaming, every
 * kProbeEvery-th message goes ordinary and timed to see whether the fast
 * mode is back. A slow probe costs one message's slow copy in kProbeEvery;
 * a single slow copy (a page fault, a preemption) changes nothing.
 */
#ifndef UCT_TM_SM_SM_COPY_MODE_H_
#define UCT_TM_SM_SM_COPY_MODE_H_

#include <cstddef>
#include <cstdint>

namespace uct_tm {
namespace sm {

class CopyMode {
  public:
    enum class Setting : int { kAuto = 0, kCached = 1, kStream = 2 }; /* UCX_TM_SM_COPY */

    static constexpr unsigned kSlowRun     = 2;
    static constexpr unsigned kSampleEvery = 8;  /* while cached: one copy timed in 8 */
    static constexpr unsigned kProbeEvery  = 64; /* while streaming: one cached in 64 */
    static constexpr size_t   kUnknownSize = SIZE_MAX; /* a bcopy before its pack (plan()) */
    static constexpr double   kDefaultSlowBw = 6.0 * (1u << 30); /* UCX_TM_SM_COPY_SLOW_BW "6GBs" */

    /* What to do with the next message. */
    struct Plan {
        bool stream; /* streaming stores (for kUnknownSize: pack aside, then decide by size) */
        bool timed;  /* ordinary stores, timed: report with copied() */
    };

    /* slow_bw: bytes per second (> 0, checked by the iface); min_size:
     * smaller messages always copy ordinarily and are not timed (their time
     * is mostly the fixed cost of a send, not the copy). */
    CopyMode(Setting setting = Setting::kAuto, double slow_bw = kDefaultSlowBw,
             size_t min_size = 4096)
        : setting_(setting), min_size_(min_size), slow_ns_per_kib_(1024.0 * 1e9 / slow_bw) {}

    bool large(size_t size) const { return size >= min_size_; }

    /* A bcopy's size is known only once packed: it is taken to be large when
     * the previous bcopy was (bcopy_packed()), so that streams of small
     * ones neither pack aside nor read the clock. */
    Plan plan(size_t size) {
        if (size == kUnknownSize) {
            size = last_bcopy_large_ ? min_size_ : 0;
        }
        if (!large(size) || (setting_ == Setting::kCached)) {
            return {false, false};
        }
        if (setting_ == Setting::kStream) {
            return {true, false};
        }
        if (streaming_) {
            if (++since_probe_ < kProbeEvery) {
                return {true, false};
            }
            since_probe_ = 0;
            return {false, true};
        }
        return {false, (++since_sample_ % kSampleEvery) == 0};
    }

    /* A timed ordinary copy of `size` bytes took `ns`. */
    void copied(size_t size, uint64_t ns) {
        if (!large(size) || (setting_ != Setting::kAuto)) {
            return;
        }
        const bool slow = static_cast<double>(ns) * 1024.0 >
                          slow_ns_per_kib_ * static_cast<double>(size);
        if (!slow) {
            slow_run_  = 0;
            streaming_ = false;
            return;
        }
        if ((++slow_run_ >= kSlowRun) && !streaming_) {
            streaming_   = true;
            since_probe_ = 0;
            ++switches_;
        }
    }

    void     bcopy_packed(size_t size) { last_bcopy_large_ = large(size); }
    /* Whether the next bcopy may be streamed (plan(kUnknownSize), without
     * its side effects): packed aside then, into our own memory. */
    bool may_stream_bcopy() const {
        return last_bcopy_large_ &&
               ((setting_ == Setting::kStream) || ((setting_ == Setting::kAuto) && streaming_));
    }
    void     count_streamed() { ++streamed_; }
    bool     streaming() const { return streaming_; }
    uint64_t streamed() const { return streamed_; } /* messages copied with streaming stores */
    uint64_t switches() const { return switches_; } /* times auto turned streaming on */

  private:
    Setting  setting_;
    size_t   min_size_;
    double   slow_ns_per_kib_;
    bool     streaming_    = false;
    bool     last_bcopy_large_ = false;
    unsigned slow_run_     = 0;
    unsigned since_probe_  = 0;
    unsigned since_sample_ = 0;
    uint64_t streamed_     = 0;
    uint64_t switches_     = 0;
};

}  // namespace sm
}  // namespace uct_tm

#endif
