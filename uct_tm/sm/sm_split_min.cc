#include "sm_split_min.h"

#include "base/clock.h"
#include "base/self_pid.h"

#include <sys/mman.h>
#include <sys/uio.h>

#include <ucs/debug/log_def.h>

#include <algorithm>
#include <cstring>

namespace uct_tm {
namespace sm {

namespace {

constexpr size_t   kSmallRead = 4096;
constexpr size_t   kLargeRead = 64u << 10;
constexpr unsigned kRuns      = 8; /* the fastest of these: a busy host only adds */

/* Two page-aligned buffers of kLargeRead, touched, unmapped on scope exit. */
class ScratchPair {
  public:
    ScratchPair() {
        void *p = mmap(nullptr, 2 * kLargeRead, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS,
                       -1, 0);
        if (p != MAP_FAILED) {
            base_ = static_cast<char *>(p);
            std::memset(base_, 1, 2 * kLargeRead);
        }
    }
    ~ScratchPair() {
        if (base_ != nullptr) {
            munmap(base_, 2 * kLargeRead);
        }
    }
    ScratchPair(const ScratchPair &)            = delete;
    ScratchPair &operator=(const ScratchPair &) = delete;

    bool  ok() const { return base_ != nullptr; }
    char *from() const { return base_; }
    char *to() const { return base_ + kLargeRead; }

  private:
    char *base_ = nullptr;
};

/* The fastest of kRuns reads of `length` bytes; 0 if a read fails. */
uint64_t fastest_read_ns(const ScratchPair &scratch, size_t length) {
    uint64_t best = UINT64_MAX;
    for (unsigned i = 0; i < kRuns; ++i) {
        const struct iovec local  = {scratch.to(), length};
        const struct iovec remote = {scratch.from(), length};
        const uint64_t     start  = monotonic_ns();
        if (process_vm_readv(self_pid(), &local, 1, &remote, 1, 0) !=
            static_cast<ssize_t>(length)) {
            return 0;
        }
        best = std::min(best, monotonic_ns() - start);
    }
    return best;
}

}  // namespace

size_t SplitMin::choose(const CmaCost &cost) {
    size_t size = kLowest;
    while ((size < kHighest) &&
           (static_cast<double>(size / 2) * cost.ns_per_byte < kMargin * cost.call_ns)) {
        size *= 2;
    }
    return size;
}

bool SplitMin::measure(CmaCost *cost) {
    const ScratchPair scratch;
    if (!scratch.ok()) {
        return false;
    }
    const uint64_t small = fastest_read_ns(scratch, kSmallRead);
    const uint64_t large = fastest_read_ns(scratch, kLargeRead);
    if ((small == 0) || (large == 0)) {
        return false;
    }
    /* A page costs about what a call does, so the 4 KiB read stands for the
     * call and the rest of the 64 KiB read for the bytes. */
    cost->call_ns     = static_cast<double>(small);
    cost->ns_per_byte = static_cast<double>((large > small) ? large - small : 0) /
                        static_cast<double>(kLargeRead - kSmallRead);
    return true;
}

size_t SplitMin::for_this_host() {
    static const size_t chosen = [] {
        CmaCost cost;
        if (!measure(&cost)) {
            ucs_debug("tm_sm: cannot time CMA here (%m): RNDV_SPLIT_MIN %zu", kFallback);
            return kFallback;
        }
        const size_t size = choose(cost);
        ucs_debug("tm_sm: CMA call %.0f ns, %.3f ns/B: RNDV_SPLIT_MIN %zu", cost.call_ns,
                  cost.ns_per_byte, size);
        return size;
    }();
    return chosen;
}

}  // namespace sm
}  // namespace uct_tm
