/*
 * RNDV_SPLIT_MIN=auto: the smallest rendezvous copy worth splitting between
 * sender and receiver on this host, from what one cross-memory-attach call
 * costs here.
 *
 * A split copy pays a system call per piece and an RTR round trip; it wins
 * when half the copy takes clearly longer than a call. Of the 2-vCPU VMs
 * of docs/perf.md, host F (1.0 us a call, 4 KiB) copies 64-128 KiB faster
 * split, host E (2.2 us) slower, winning only from 256 KiB: kMargin lies
 * between the two.
 */
#ifndef UCT_TM_SM_SM_SPLIT_MIN_H_
#define UCT_TM_SM_SM_SPLIT_MIN_H_

#include <cstddef>

namespace uct_tm {
namespace sm {

/* One process_vm_readv: a fixed part per call, a part per byte. */
struct CmaCost {
    double call_ns     = 0;
    double ns_per_byte = 0;
};

class SplitMin {
  public:
    static constexpr size_t kLowest   = 64u << 10; /* two 32 KiB pieces (split_piece) */
    static constexpr size_t kHighest  = 1u << 20;
    static constexpr size_t kFallback = 256u << 10; /* CMA not measurable here */
    static constexpr double kMargin   = 1.5;        /* half the copy >= kMargin calls */

    /* The smallest power of two from kLowest whose half copies in at least
     * kMargin calls' time; kHighest at most. */
    static size_t choose(const CmaCost &cost);

    /* Times reads of our own memory: false where the kernel refuses CMA. */
    static bool measure(CmaCost *cost);

    /* choose(measure()), once per process (kFallback if measure() fails). */
    static size_t for_this_host();
};

}  // namespace sm
}  // namespace uct_tm

#endif  // UCT_TM_SM_SM_SPLIT_MIN_H_
