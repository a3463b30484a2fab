/*
 * RawIface: a bare UCT iface (UCX's posix transport unless told otherwise)
 * and an endpoint to one iface of a protocol worker, opened without the
 * layer, for sending the layer's wire messages by hand -- malformed ones, or
 * one a peer never finishes.
 */
#ifndef UCT_TM_TEST_RAW_IFACE_H_
#define UCT_TM_TEST_RAW_IFACE_H_

#include "api/uct_tm_proto.h"
#include "wire.h"

#include <ucs/async/async_fwd.h>
#include <uct/api/uct.h>

#include <cstdint>
#include <vector>

namespace uct_tm_test {

/* A bare iface of transport `tl` (component and MD `md`, device `dev`) and an
 * endpoint to the first iface of a worker address. */
struct RawIface {
    ucs_async_context_t *async  = nullptr;
    uct_worker_h         worker = nullptr;
    uct_component_h      comp   = nullptr;
    uct_md_h             md     = nullptr;
    uct_iface_h          iface  = nullptr;
    uct_ep_h             ep     = nullptr;

    /* Opens the iface and an endpoint to the worker address's `tl` iface. */
    ucs_status_t open(const std::vector<char> &addr, const char *md_name = "posix",
                      const char *tl = "posix", const char *dev_name = "memory");
    /* The same, to worker `w`'s address. */
    ucs_status_t open(uct_tm_proto_worker_h w, const char *md_name = "posix",
                      const char *tl = "posix", const char *dev_name = "memory");
    /* Sends `msg` with AM id `id`, progressing `w` while the transport is busy. */
    void send(uint8_t id, const std::vector<char> &msg, uct_tm_proto_worker_h w);
    ~RawIface() {
        if (ep != nullptr) uct_ep_destroy(ep);
        if (iface != nullptr) uct_iface_close(iface);
        if (md != nullptr) uct_md_close(md);
        if (worker != nullptr) uct_worker_destroy(worker);
        if (async != nullptr) ucs_async_context_destroy(async);
    }
};

/* How many unexpected messages tagged `tag` worker `w` holds, discarding them. */
size_t discard_unexpected(uct_tm_proto_worker_h w, uint64_t tag);
/* Progresses `w` alone `times` times (what a raw peer sent is then handled). */
void progress(uct_tm_proto_worker_h w, int times = 1000);

/* A kEager (or kFirst, `length` > payload) message claiming worker `source`. */
std::vector<char> eager_message(uint32_t source, uint64_t tag, size_t payload,
                                uct_tm::proto::Kind kind = uct_tm::proto::Kind::kEager,
                                uint64_t length = 0, uint32_t msg_id = 0);

}  // namespace uct_tm_test

#endif
