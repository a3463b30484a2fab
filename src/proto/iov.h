/*
 * Vectored operations' checks and copies (uct_tm_proto_sendv, _recvv,
 * _recv_claimedv; docs/proto.md "Vectors").
 */
#ifndef UCT_TM_PROTO_IOV_H_
#define UCT_TM_PROTO_IOV_H_

#include "api/uct_tm_proto.h"

#include <cstddef>
#include <vector>

namespace uct_tm {
namespace proto {

/* What iov_check() found in a valid vector. */
struct IovShape {
    size_t total     = 0;       /* the elements' bytes together */
    size_t nonempty  = 0;       /* elements with length != 0 */
    void  *single    = nullptr; /* nonempty <= 1: that element's buffer (or null) */
};

/* Whether (iov, iovcnt) is a vector the API accepts (uct_tm_proto.h,
 * uct_tm_proto_sendv); its shape in *shape. The sum is checked for overflow
 * element by element: lengths come from the caller. */
bool iov_check(const uct_tm_proto_iov_t *iov, size_t iovcnt, IovShape *shape);

/* Copies `len` bytes from `data` to message offset `offset` of the
 * elements (the caller keeps offset + len within their total). */
void iov_scatter(const std::vector<uct_tm_proto_iov_t> &iov, size_t offset, const char *data,
                 size_t len);

/* Copies the elements' bytes, in order, to `dest`. */
void iov_gather(const uct_tm_proto_iov_t *iov, size_t iovcnt, char *dest);

}  // namespace proto
}  // namespace uct_tm

#endif
