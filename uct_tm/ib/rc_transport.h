/*
 * Transport "tm_rc" of component "tm_ib": its devices and its registration.
 */
#ifndef UCT_TM_IB_RC_TRANSPORT_H_
#define UCT_TM_IB_RC_TRANSPORT_H_

#include <ucs/type/status.h>

namespace uct_tm {
namespace ib {

/* Adds transport "tm_rc" (one device "tm_<dev>:<port>" per active port) to
 * component "tm_ib", registered before (ib_md.h). */
ucs_status_t register_rc_transport();

}  // namespace ib
}  // namespace uct_tm

#endif
