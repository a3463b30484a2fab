/*
 * Transport "tm_sm" of component "tm": its device and its registration.
 */
#ifndef UCT_TM_SM_SM_TRANSPORT_H_
#define UCT_TM_SM_SM_TRANSPORT_H_

#include <ucs/type/status.h>

namespace uct_tm {
namespace sm {

/* Adds transport "tm_sm" (device "tm_shm") to component "tm", registered
 * before (sm_md.h). */
ucs_status_t register_sm_transport();

}  // namespace sm
}  // namespace uct_tm

#endif
