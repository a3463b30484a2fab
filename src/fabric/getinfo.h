/* fi_getinfo for the provider: one fi_info per transport the layer opens. */
#ifndef UCT_TM_FABRIC_GETINFO_H_
#define UCT_TM_FABRIC_GETINFO_H_

#include "provider.h"

#include <string>
#include <vector>

namespace uct_tm {
namespace fabric {

/* The transports a domain can stand for on this host (probed once). */
const std::vector<std::string> &transports();

int getinfo(uint32_t version, const char *node, const char *service, uint64_t flags,
            const fi_info *hints, fi_info **info);

}  // namespace fabric
}  // namespace uct_tm

#endif
