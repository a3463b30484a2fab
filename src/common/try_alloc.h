/*
 * The one way uct-tm turns allocation failure into a status: what may
 * allocate (a container's push_back or reserve, new) runs inside
 * try_alloc(), which gives UCS_OK, or UCS_ERR_NO_MEMORY if it threw
 * std::bad_alloc. No exception crosses into UCX's C callers.
 */
#ifndef UCT_TM_COMMON_TRY_ALLOC_H_
#define UCT_TM_COMMON_TRY_ALLOC_H_

#include <ucs/type/status.h>

#include <new>
#include <utility>

namespace uct_tm {

template <typename Allocate>
[[nodiscard]] inline ucs_status_t try_alloc(Allocate &&allocate) noexcept {
    try {
        std::forward<Allocate>(allocate)();
        return UCS_OK;
    } catch (const std::bad_alloc &) {
        return UCS_ERR_NO_MEMORY;
    }
}

}  // namespace uct_tm

#endif
