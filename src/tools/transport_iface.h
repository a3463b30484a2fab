/* One UCT transport opened for a tool (tm_perftest, tm_soak): an async
 * context and UCT worker, the first MD of any component that offers the
 * transport, and one iface on its first device, with the tag API's
 * unexpected-message callbacks and an error handler called from progress. */
#ifndef UCT_TM_TOOLS_TRANSPORT_IFACE_H_
#define UCT_TM_TOOLS_TRANSPORT_IFACE_H_

#include <ucs/async/async_fwd.h>
#include <uct/api/uct.h>

#include <string>

namespace uct_tm {

/* What the iface calls back: unexpected tagged messages (eager fragments,
 * rendezvous requests) and a failed peer. */
struct TransportCallbacks {
    uct_tag_unexp_eager_cb_t eager_cb    = nullptr;
    uct_tag_unexp_rndv_cb_t  rndv_cb     = nullptr;
    void                    *arg         = nullptr; /* for both */
    uct_error_handler_t      err_handler = nullptr;
    void                    *err_arg     = nullptr;
};

struct TransportIface {
    ucs_async_context_t *async     = nullptr;
    uct_worker_h         worker    = nullptr;
    uct_component_h      component = nullptr;
    uct_md_h             md        = nullptr;
    uct_md_attr_t        md_attr{};
    std::string          device;
    uct_iface_h          iface     = nullptr;
    uct_iface_attr_t     attr{};
};

/* Opens `transport` into *t, progress enabled. A failed step is fatal: "<tool>:
 * <step>: <status>" (or "transport ... not found") and exit status 2. */
void open_transport(const char *tool, const std::string &transport, const TransportCallbacks &cb,
                    TransportIface *t);

/* Closes the iface and its MD (the worker stays). */
void close_transport_iface(TransportIface *t);

/* Destroys the UCT worker and the async context (after close_transport_iface). */
void close_transport_worker(TransportIface *t);

}  // namespace uct_tm

#endif
