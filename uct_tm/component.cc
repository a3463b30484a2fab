/*
 * libuct_tm_component.so: uct-tm's core UCX component "tm" (the shared-memory
 * MD "tm", transport tm_sm). Loaded by libuct_tm.so.0 (plugin.cc) once it has
 * checked that the process runs the UCX release this build mirrors; its ELF
 * constructor registers the component with libuct. Linked -z nodelete:
 * libuct cannot forget a component. No rdma-core: the verbs component
 * "tm_ib" is libuct_tm_ib.so (ib/ib_component.cc), loaded after this one.
 *
 * One component per MD family, as UCX has; each unpacks only its own rkeys.
 */

#include "sm/sm_md.h"
#include "sm/sm_transport.h"

namespace uct_tm {
namespace {

/* A libuct of other layouts refuses the component: register_family logs
 * why. */
__attribute__((constructor)) void register_tm() {
    abi::register_family(sm::md_component(), sm::register_sm_transport, "tm_sm");
}

}  // namespace
}  // namespace uct_tm
