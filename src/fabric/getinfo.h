/* fi_getinfo for the provider: one fi_info per transport the layer opens. */
#ifndef UCT_TM_FABRIC_GETINFO_H_
#define UCT_TM_FABRIC_GETINFO_H_

#include "provider.h"

#include <string>
#include <vector>

namespace uct_tm {
namespace fabric {

/* Whether the domain `tl` (a transport, or "tm_sm,<remote>") opens on this
 * host with a name that fits (probed once). */
bool offered(const std::string &tl);

int getinfo(uint32_t version, const char *node, const char *service, uint64_t flags,
            const fi_info *hints, fi_info **info);

}  // namespace fabric
}  // namespace uct_tm

#endif
