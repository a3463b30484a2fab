/*
 * libuct_tm_component.so: uct-tm's UCX components and their transports.
 * Loaded by libuct_tm.so.0 (plugin.cc) once it has checked that the process
 * runs the UCX release this build mirrors; its ELF constructor registers
 * everything with libuct. Linked -z nodelete: libuct cannot forget a
 * component.
 *
 * One component per MD family, as UCX has: "tm" (the shared-memory MD "tm",
 * transport tm_sm) and, with rdma-core, "tm_ib" (the verbs MDs, transport
 * tm_rc). Each unpacks only its own rkeys.
 */

#if UCT_TM_HAVE_VERBS
#include "ib/ib_md.h"
#include "ib/rc_transport.h"
#endif

#include "sm/sm_md.h"
#include "sm/sm_transport.h"

#include <ucs/debug/log_def.h>

namespace uct_tm {
namespace {

/* Registers `component`, then its transport with `add_transport`. False if
 * the component could not be registered. */
bool register_family(const abi::ComponentDesc &component, ucs_status_t (*add_transport)(),
                     const char *transport) {
    ucs_status_t status = abi::register_component(component);
    if (status != UCS_OK) {
        ucs_error("uct-tm: registering component \"%s\" with libuct failed: %s", component.name,
                  ucs_status_string(status));
        return false;
    }
    status = add_transport();
    if (status != UCS_OK) {
        ucs_error("uct-tm: registering transport %s failed: %s", transport,
                  ucs_status_string(status));
    }
    return true;
}

__attribute__((constructor)) void register_everything() {
    /* A libuct of other layouts refuses every component: one error is enough. */
    if (!register_family(sm::md_component(), sm::register_sm_transport, "tm_sm")) {
        return;
    }
#if UCT_TM_HAVE_VERBS
    register_family(ib::md_component(), ib::register_rc_transport, "tm_rc");
#endif
}

}  // namespace
}  // namespace uct_tm
