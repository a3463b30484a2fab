/*
 * tm_rc's UCT operation table and its registration with component "tm".
 */
#ifndef UCT_TM_IB_RC_OPS_H_
#define UCT_TM_IB_RC_OPS_H_

#include "base/ucx_abi.h"

#include <uct/api/uct.h>

namespace uct_tm {
namespace ib {

const uct_iface_ops_t &rc_iface_ops();

/* What the seam knows of tm_rc (ifaces name it when they open). */
const abi::TransportDesc &rc_transport();

/* Adds transport "tm_rc" (one device "tm_<dev>:<port>" per active port) to
 * the registered component. */
ucs_status_t register_rc_transport();

}  // namespace ib
}  // namespace uct_tm

#endif
