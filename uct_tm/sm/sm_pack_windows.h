/*
 * Pack windows: where a bcopy is packed when its length is known only once
 * packed and may exceed the receiver's descriptor (BCOPY_MAX above SEG_SIZE,
 * the default before UCX 1.16).
 *
 * A window is a run of virtual memory built for one of a peer's descriptors:
 * the pages whose end is that descriptor's payload end (the peer's segment,
 * mapped a second time), then this process's spill area (mapped once more for
 * each window). Packed at the payload, a message that fits is already where
 * the receiver reads it, one copy as for any bcopy; a longer one has its
 * first SEG_SIZE bytes in place and the rest in the spill, copied on into the
 * following descriptors. Without a window a bcopy is packed aside into the
 * sender's own buffer and copied in whole: one more copy of the message.
 *
 * Windows are made on a descriptor's first bcopy and kept with the peer's
 * attachment: two mappings each, at most kMaxPackWindows per process (the
 * kernel's vm.max_map_count is 65530 by default), then packing aside.
 */
#ifndef UCT_TM_SM_SM_PACK_WINDOWS_H_
#define UCT_TM_SM_SM_PACK_WINDOWS_H_

#include "sm_layout.h"

#include "base/shm_segment.h"

#include <ucs/type/status.h>

#include <cstddef>
#include <cstdint>
#include <vector>

namespace uct_tm {
namespace sm {

inline constexpr uint32_t kMaxPackWindows = 8192;

/* A geometry whose descriptor payloads each end on a page boundary: what
 * windows need (make_geometry lays one out so on request). */
bool payloads_end_on_pages(const Geometry &g);

/* One peer's windows, one per descriptor, made on first use. */
class PackWindows {
  public:
    PackWindows() = default;
    ~PackWindows();
    PackWindows(const PackWindows &)            = delete;
    PackWindows &operator=(const PackWindows &) = delete;

    /* Windows onto the descriptors of a peer's segment mapped at `segment`
     * (its whole segment, from offset 0), backed by `spill`: this process's
     * memory behind every window, a shared mapping (mremap maps those again
     * elsewhere, not private ones). Does nothing (payload() stays null)
     * unless payloads_end_on_pages(g). */
    void init(char *segment, const Geometry &g, const ShmSegment &spill);

    /* The pack target of descriptor `d`: its payload, with room for the
     * spill's size behind it; null when there is no window (not enabled,
     * out of range, the process's budget spent, or mapping failed). */
    char *payload(uint32_t d) {
        if (ucs_unlikely(d >= windows_.size())) {
            return nullptr;
        }
        char *w = windows_[d];
        return ucs_likely(made(w)) ? (w + payload_offset_) : make(d);
    }

  private:
    static inline char *const kFailed = reinterpret_cast<char *>(1);
    static bool               made(const char *w) { return (w != nullptr) && (w != kFailed); }

    char *make(uint32_t d);

    char               *descs_          = nullptr; /* the peer's descriptors, in our mapping */
    size_t              desc_stride_    = 0;
    const ShmSegment   *spill_          = nullptr;
    size_t              desc_pages_     = 0; /* the pages ending at a payload's end */
    size_t              window_size_    = 0; /* desc_pages_ + the spill's */
    size_t              payload_offset_ = 0; /* of the payload in its window */
    std::vector<char *> windows_;            /* by descriptor: null (not yet), kFailed, a window */
};

}  // namespace sm
}  // namespace uct_tm

#endif
