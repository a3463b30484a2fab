/*
 * Finishing a UCT operation: records `status` in the user's completion (the
 * first error wins, as uct_completion_update_status defines) and calls it
 * when its count drops to zero. A null completion is allowed (the caller did
 * not ask to be told).
 */
#ifndef UCT_TM_BASE_COMPLETION_H_
#define UCT_TM_BASE_COMPLETION_H_

#include <uct/api/uct.h>

namespace uct_tm {

inline void complete(uct_completion_t *comp, ucs_status_t status) {
    if (comp == nullptr) {
        return;
    }
    uct_completion_update_status(comp, status);
    if (--comp->count == 0) {
        comp->func(comp);
    }
}

}  // namespace uct_tm

#endif
