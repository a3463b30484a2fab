/* Owner (owner.h): the calls back the parts share. */
#include "owner.h"

namespace uct_tm {
namespace proto {

Owner::Owner(const Config &config)
    : config_(config), window_(config.unexpected_cap / config.max_peers) {}

void Owner::mark_busy(Endpoint *ep) {
    if (!ep->busy) {
        ep->busy = true;
        busy_.push_back(ep);
    }
}

ucs_status_t Owner::peer_failure(uint32_t source) const {
    const Endpoint *ep = peers_.of(source);
    return (ep != nullptr) ? ep->failure : UCS_OK;
}

void Owner::refuse(uint32_t source, const char *why) {
    TM_PROTO_DROPPED("dropped a message claiming worker %u: %s", source, why);
}

unsigned Owner::progress_transports() {
    unsigned n = uct_worker_progress(uworker_);
    for (size_t k = 1; k < ifaces_.size(); ++k) {
        n += uct_iface_progress(ifaces_[k]->iface);
    }
    return n;
}

}  // namespace proto
}  // namespace uct_tm
