/*
 * Iface: one UCT iface a worker opened, with what the protocols read off its
 * attributes once (eager limits, tag-API paths, rendezvous by get).
 */
#ifndef UCT_TM_PROTO_IFACE_H_
#define UCT_TM_PROTO_IFACE_H_

#include "registration_cache.h"

#include <uct/api/uct.h>

#include <cstddef>
#include <memory>
#include <string>
#include <vector>

namespace uct_tm {
namespace proto {

class Worker;

struct Iface {
    Worker          *worker    = nullptr;
    std::string      tl;
    std::string      dev;
    uct_component_h  component = nullptr;
    uct_md_h         md        = nullptr;
    uct_iface_h      iface     = nullptr;
    uct_iface_attr_t attr      = {};
    std::vector<char> dev_addr;
    std::vector<char> iface_addr;
    /* endpoints connect to the peer's endpoint (UCT_IFACE_FLAG_CONNECT_TO_EP
     * without CONNECT_TO_IFACE: tm_rc): uct_tm_proto_ep_connect() completes them */
    bool             to_ep     = false;
    size_t           max_bcopy = 0; /* AM payload per message, headers included */
    /* Data messages use the transport's tag API (eager bcopy, rndv request):
     * matched by its tag list, or unexpected through eager_cb / rndv_cb. */
    bool             tag_send  = false;
    size_t           tag_eager_max = 0; /* larger messages go by rendezvous */
    /* eager messages up to this size go as tag_eager_zcopy (the MD needs no
     * memh): it carries imm, which tag_eager_short cannot, and may span
     * several transport fragments */
    size_t           tag_zcopy_max = 0;
    /* shorter than tag_inline_limit: one zcopy the transport sends inline
     * (0: zcopy unusable, none); from there up to tag_bcopy_max (one
     * descriptor) tag_eager_bcopy costs the transport less than the zcopy's
     * general gather: tm_sm 1 KiB */
    size_t           tag_inline_limit = 0;
    size_t           tag_bcopy_max    = 0;
    /* an eager message of `len` goes as tag_eager_zcopy, else tag_eager_bcopy */
    bool eager_by_zcopy(size_t len) const {
        return (len < tag_inline_limit) || ((len <= tag_zcopy_max) && (len > tag_bcopy_max));
    }
    /* an eager message of `total` bytes in `nonempty` elements goes as one
     * tag_eager_zcopy with their list */
    bool tag_eager_zcopy_list(size_t total, size_t nonempty) const {
        return eager_by_zcopy(total) && (nonempty <= attr.cap.tag.eager.max_iov);
    }
    /* whether one tag API call gathers it: that, or one bcopy descriptor */
    bool tag_eager_gathers(size_t total, size_t nonempty) const {
        return tag_eager_zcopy_list(total, nonempty) || (total <= attr.cap.tag.eager.max_bcopy);
    }
    bool             offload   = false; /* receives go to its tag list */
    /* rendezvous data is read by the receiver (get_zcopy, MD-registered) */
    bool             rndv_get  = false;
    size_t           rkey_size = 0;
    /* the longest rendezvous request (RTS) a peer over this transport sends:
     * MsgHeader, with get also RndvGet and the packed rkey */
    size_t           rts_max   = 0;
    /* registrations of rendezvous buffers without a mapped region (null:
     * UCX_TM_PROTO_RCACHE=n, or no rndv_get) */
    std::unique_ptr<RegistrationCache> rcache;
};

}  // namespace proto
}  // namespace uct_tm

#endif
