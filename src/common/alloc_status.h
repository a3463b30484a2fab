/*
 * The one way uct-tm turns running out of memory into a status.
 * It allocates with the standard library, which throws std::bad_alloc, behind
 * a C API and under UCT's C callbacks, which no exception may cross.
 */
#ifndef UCT_TM_COMMON_ALLOC_STATUS_H_
#define UCT_TM_COMMON_ALLOC_STATUS_H_

#include <ucs/type/status.h>

#include <new>
#include <type_traits>

namespace uct_tm {

/* Runs fn(): its status (UCS_OK for a void fn), or UCS_ERR_NO_MEMORY if an
 * allocation in it failed. Inline and free when nothing throws. */
template <typename Fn> [[gnu::always_inline]] inline ucs_status_t alloc_status(Fn &&fn) {
    try {
        if constexpr (std::is_void_v<decltype(fn())>) {
            fn();
            return UCS_OK;
        } else {
            return fn();
        }
    } catch (const std::bad_alloc &) {
        return UCS_ERR_NO_MEMORY;
    }
}

}  // namespace uct_tm

#endif
