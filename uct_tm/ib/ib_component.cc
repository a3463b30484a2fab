/*
 * libuct_tm_ib.so: uct-tm's verbs component "tm_ib" (one MD "tm_<device>"
 * per verbs device, transports tm_rc and tm_dc), the only library of the
 * plugin that links rdma-core (libibverbs, libmlx5), as UCX keeps its own
 * verbs transports in libuct_ib. Loaded by libuct_tm.so.0 (plugin.cc) after
 * the core component (libuct_tm_component.so) when it is installed next to
 * it; where rdma-core is missing its dlopen fails and tm_sm goes on alone.
 * Its ELF constructor registers the component with libuct. Linked -z
 * nodelete: libuct cannot forget a component.
 */

#include "ib/ib_md.h"
#include "ib/rc_transport.h"

namespace uct_tm {
namespace {

/* A libuct of other layouts refuses the component: register_family logs
 * why. */
__attribute__((constructor)) void register_tm_ib() {
    abi::register_family(ib::md_component(), ib::register_rc_transport, "tm_rc");
}

}  // namespace
}  // namespace uct_tm
