/* libfabric's iovec arrays as the layer's vectors, checked once. */
#ifndef UCT_TM_FABRIC_IOV_H_
#define UCT_TM_FABRIC_IOV_H_

#include "provider.h"

#include <array>
#include <sys/uio.h>

namespace uct_tm {
namespace fabric {

struct Vector {
    std::array<uct_tm_proto_iov_t, kIovLimit> iov; /* [0, count) set: not zeroed per call */
    size_t                                    count = 0;
    size_t                                    total = 0;

    /* -FI_EINVAL, nothing kept: too many elements, a NULL array with
     * elements, a NULL buffer with a length, or a total that overflows. */
    ssize_t assign(const iovec *v, size_t n) {
        if ((n > kIovLimit) || ((v == nullptr) && (n > 0))) {
            return -FI_EINVAL;
        }
        size_t sum = 0;
        for (size_t i = 0; i < n; ++i) {
            if (((v[i].iov_base == nullptr) && (v[i].iov_len > 0)) || (sum + v[i].iov_len < sum)) {
                return -FI_EINVAL;
            }
            sum += v[i].iov_len;
            iov[i] = {v[i].iov_base, v[i].iov_len};
        }
        count = n;
        total = sum;
        return 0;
    }
};

}  // namespace fabric
}  // namespace uct_tm

#endif
