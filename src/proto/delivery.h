/*
 * Delivery: a matched message into its receive -- the receive takes the
 * message's description (accept_message), then its bytes (place), from
 * whichever path they arrive on: eager, fragments, unexpected buffer,
 * rendezvous push.
 */
#ifndef UCT_TM_PROTO_DELIVERY_H_
#define UCT_TM_PROTO_DELIVERY_H_

#include "endpoint.h"
#include "iov.h"
#include "request.h"
#include "wire.h"

#include "common/ucs_assert.h"
#include <ucs/sys/compiler_def.h>

#include <algorithm>
#include <cstring>

namespace uct_tm {
namespace proto {

/* The info flags of a message's wire flags: the two bits side by side. */
static_assert((kFlagData == 4) && (kFlagUntagged == 8) && (UCT_TM_PROTO_INFO_REMOTE_DATA == 1) &&
                  (UCT_TM_PROTO_INFO_UNTAGGED == 2),
              "info_flags() shifts one pair of bits onto the other");
inline unsigned info_flags(uint8_t wire_flags) { return (wire_flags >> 2) & 3u; }

/* `r` is matched (kArriving): it takes the message's description; `from`
 * is our endpoint to its source, or null. */
inline void accept_message(Request &r, const MsgHeader &h, Endpoint *from) {
    ucs_assertv(r.rstate == RecvState::kArriving, "receive %#llx accepts a message in state %d",
                static_cast<unsigned long long>(r.self), static_cast<int>(r.rstate));
    r.info.tag    = h.tag; /* 0 for untagged messages: the arrival paths see to it */
    r.info.length = h.length;
    r.info.data   = h.data;
    r.info.flags  = info_flags(h.flags);
    r.info.source = h.source;
    r.info.ep     = user_handle(from);
    r.expect      = std::min<uint64_t>(h.length, r.capacity);
    r.received    = 0;
    r.offset      = 0;
}

/* Copies message bytes [offset, offset + len) into the receive; whatever
 * falls past its buffer is dropped. */
inline void place(Request &r, size_t offset, const char *data, size_t len) {
    if (offset >= r.capacity) {
        return;
    }
    const size_t n = std::min(len, r.capacity - offset);
    if (n != 0) { /* data (an empty message's) may be null then */
        if (ucs_likely(r.rbuf != nullptr)) {
            memcpy(r.rbuf + offset, data, n);
        } else {
            iov_scatter(r.elements, offset, data, n); /* a vectored receive (uct_tm_proto_recvv) */
        }
    }
    r.received += n;
}

}  // namespace proto
}  // namespace uct_tm

#endif
