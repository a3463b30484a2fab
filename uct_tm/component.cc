/*
 * libuct_tm_component.so: component "tm", its MDs and transports. Loaded by
 * libuct_tm.so.0 (plugin.cc) once it has checked that the process runs the
 * UCX release this build mirrors; its ELF constructor registers everything
 * with libuct. Linked -z nodelete: libuct cannot forget a component.
 */

#include "base/tm_md.h"

#if UCT_TM_HAVE_VERBS
#include "ib/rc_transport.h"
#endif

#include "sm/sm_transport.h"

#include <ucs/debug/log_def.h>

namespace uct_tm {
namespace {

__attribute__((constructor)) void register_everything() {
    ucs_status_t status = register_tm_component();
    if (status != UCS_OK) {
        ucs_error("uct-tm: registering component \"tm\" with libuct failed: %s",
                  ucs_status_string(status));
        return;
    }
    status = sm::register_sm_transport();
    if (status != UCS_OK) {
        ucs_error("uct-tm: registering transport tm_sm failed: %s", ucs_status_string(status));
    }
#if UCT_TM_HAVE_VERBS
    status = ib::register_rc_transport();
    if (status != UCS_OK) {
        ucs_error("uct-tm: registering transport tm_rc failed: %s", ucs_status_string(status));
    }
#endif
}

}  // namespace
}  // namespace uct_tm
