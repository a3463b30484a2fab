#include "sm_pack_windows.h"

#include "common/alloc_status.h"

#include <ucs/debug/log_def.h>

#include <atomic>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <unistd.h>

namespace uct_tm {
namespace sm {
namespace {

std::atomic<uint32_t> windows_live{0}; /* every iface's, against kMaxPackWindows */

size_t page_bytes() {
    static const size_t page = static_cast<size_t>(sysconf(_SC_PAGESIZE));
    return page;
}

/* Maps the pages of shared mapping `from` once more at `to` (which it
 * replaces): mremap with an old size of 0 does exactly that. By system call:
 * UCX's memory hooks (UCM) replace mremap() with a version that drops the
 * new address (UCX 1.13). */
bool map_again(char *from, size_t length, char *to) {
    const long at = syscall(SYS_mremap, from, 0ul, length, MREMAP_MAYMOVE | MREMAP_FIXED, to);
    return at == reinterpret_cast<long>(to);
}

}  // namespace

bool payloads_end_on_pages(const Geometry &g) {
    const size_t page = page_bytes();
    return (g.descs_offset % page == 0) && (g.desc_stride % page == 0) &&
           (uint64_t{g.desc_payload} + g.seg_size == g.desc_stride);
}

PackWindows::~PackWindows() {
    for (char *w : windows_) {
        if (made(w)) {
            munmap(w, window_size_);
            windows_live.fetch_sub(1, std::memory_order_relaxed);
        }
    }
}

void PackWindows::init(char *segment, const Geometry &g, const ShmSegment &spill) {
    if (!spill.valid() || !payloads_end_on_pages(g)) {
        return;
    }
    if (alloc_status([&] { windows_.assign(g.num_descs, nullptr); }) != UCS_OK) {
        return; /* no windows: bcopies are packed aside */
    }
    descs_          = segment + g.descs_offset;
    desc_stride_    = g.desc_stride;
    spill_          = &spill;
    desc_pages_     = align_up(g.seg_size, page_bytes());
    window_size_    = desc_pages_ + spill.size();
    payload_offset_ = desc_pages_ - g.seg_size;
}

/* Reserves the window's range, then maps the descriptor's pages and the
 * spill over it; a failure leaves the descriptor without a window. */
char *PackWindows::make(uint32_t d) {
    if ((windows_[d] == kFailed) ||
        (windows_live.fetch_add(1, std::memory_order_relaxed) >= kMaxPackWindows)) {
        if (windows_[d] != kFailed) {
            windows_live.fetch_sub(1, std::memory_order_relaxed);
            windows_[d] = kFailed;
            ucs_debug("tm_sm: %u bcopy windows in this process: descriptor %u packs aside",
                      kMaxPackWindows, d);
        }
        return nullptr;
    }
    const size_t length = window_size_;
    void *range  = mmap(nullptr, length, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1,
                        0);
    char *window = static_cast<char *>(range);
    char        *end    = descs_ + (uint64_t{d} + 1) * desc_stride_; /* of its payload */
    if ((range == MAP_FAILED) || !map_again(end - desc_pages_, desc_pages_, window) ||
        !map_again(static_cast<char *>(spill_->address()), spill_->size(), window + desc_pages_)) {
        ucs_debug("tm_sm: no bcopy window for descriptor %u: %m", d);
        if (range != MAP_FAILED) {
            munmap(range, length);
        }
        windows_live.fetch_sub(1, std::memory_order_relaxed);
        windows_[d] = kFailed;
        return nullptr;
    }
    /* The descriptor's page-table entries now, not a fault per page in the
     * first pack (the spill's fill as packs reach them). */
    madvise(window, desc_pages_, MADV_POPULATE_WRITE);
    windows_[d] = window;
    return window + payload_offset_;
}

}  // namespace sm
}  // namespace uct_tm
