/*
 * Vectored operations' checks and copies (uct_tm_proto_sendv, _recvv,
 * _recv_claimedv; docs/proto.md "Vectors").
 */
#ifndef UCT_TM_PROTO_IOV_H_
#define UCT_TM_PROTO_IOV_H_

#include "api/uct_tm_proto.h"

#include <algorithm>
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

/* A vectored send's elements, which send_general() takes in place of a
 * buffer (iov.cc). */
struct SendVector {
    const uct_tm_proto_iov_t *iov;
    size_t                    iovcnt;
};

/* Calls fn(element byte pointer, n) for each piece of message bytes
 * [offset, offset + len) of the elements, in order (the caller keeps
 * offset + len within their total). */
template <typename Fn>
void for_each_piece(const std::vector<uct_tm_proto_iov_t> &iov, size_t offset, size_t len,
                    Fn &&fn) {
    for (const uct_tm_proto_iov_t &e : iov) {
        if (len == 0) {
            return;
        }
        if (offset >= e.length) {
            offset -= e.length;
            continue;
        }
        const size_t n = std::min(len, e.length - offset);
        fn(static_cast<char *>(e.buffer) + offset, n);
        len    -= n;
        offset  = 0;
    }
}

/* Copies `len` bytes from `data` to message offset `offset` of the
 * elements (the caller keeps offset + len within their total). */
void iov_scatter(const std::vector<uct_tm_proto_iov_t> &iov, size_t offset, const char *data,
                 size_t len);

/* Copies message bytes [offset, offset + len) of the elements to `dest`
 * (the caller keeps offset + len within their total). */
void iov_gather_range(const std::vector<uct_tm_proto_iov_t> &iov, size_t offset, char *dest,
                      size_t len);

/* The elements with length != 0. */
inline size_t iov_nonempty(const std::vector<uct_tm_proto_iov_t> &iov) {
    size_t n = 0;
    for (const uct_tm_proto_iov_t &e : iov) {
        n += (e.length != 0) ? 1 : 0;
    }
    return n;
}

/* Copies the elements' bytes, in order, to `dest`. */
void iov_gather(const uct_tm_proto_iov_t *iov, size_t iovcnt, char *dest);

}  // namespace proto
}  // namespace uct_tm

#endif
