/*
 * The UCT operation table of tm_sm and its registration with component "tm".
 */
#ifndef UCT_TM_SM_SM_OPS_H_
#define UCT_TM_SM_SM_OPS_H_

#include "base/ucx_abi.h"

#include <ucs/type/status.h>
#include <uct/api/uct.h>

namespace uct_tm {
namespace sm {

/* extern "C" trampolines from UCX's ops table into SmIface. */
const uct_iface_ops_t &sm_iface_ops();

/* What the seam knows of tm_sm (ifaces name it when they open). */
const abi::TransportDesc &sm_transport();

/* Adds transport "tm_sm" (device "tm_shm") to the registered component. */
ucs_status_t register_sm_transport();

}  // namespace sm
}  // namespace uct_tm

#endif
