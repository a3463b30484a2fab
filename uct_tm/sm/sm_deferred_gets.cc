/*
 * DeferredGets: see sm_deferred_gets.h.
 */
#include "sm_deferred_gets.h"

#include "sm_iface.h"

#include "base/completion.h"
#include "common/ucs_assert.h"

namespace uct_tm {
namespace sm {

void DeferredGets::add(SmEp *ep, uct_completion_t *comp) {
    ucs_assert(pending_.size() < pending_.capacity()); /* make_room() first */
    pending_.push_back({ep, comp});
    ++ep->gets_outstanding;
}

unsigned DeferredGets::progress() {
    delivering_.swap(pending_);
    for (size_t i = 0; i < delivering_.size(); ++i) {
        const Get get = delivering_[i]; /* a completion may destroy a later one's endpoint */
        if (get.ep != nullptr) {
            --get.ep->gets_outstanding;
        }
        complete(get.comp, UCS_OK);
    }
    const auto count = static_cast<unsigned>(delivering_.size());
    delivering_.clear();
    return count;
}

void DeferredGets::forget_ep(const SmEp *ep) {
    for (std::vector<Get> *list : {&pending_, &delivering_}) {
        for (Get &get : *list) {
            if (get.ep == ep) {
                get.ep   = nullptr;
                get.comp = nullptr;
            }
        }
    }
}

}  // namespace sm
}  // namespace uct_tm
