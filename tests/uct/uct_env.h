/*
 * Test helpers: open an MD of uct-tm's components and an iface of a
 * transport through UCX's public API, as any UCX client would.
 */
#ifndef UCT_TM_TESTS_UCT_ENV_H_
#define UCT_TM_TESTS_UCT_ENV_H_

#include <ucs/async/async_fwd.h>
#include <uct/api/uct.h>

#include <string>
#include <vector>

namespace uct_tm_test {

/* uct-tm's components, one per MD family: "tm" (the shared-memory MD "tm")
 * and, built with rdma-core, "tm_ib" (the verbs MDs "tm_<device>"). */
inline const char *const kTmComponents[] = {"tm", "tm_ib"};

/* Names of transports of uct-tm's components on any of their MDs, from
 * uct_md_query_tl_resources. */
std::vector<std::string> tm_transports();

/* A worker, an MD of one of uct-tm's components, and helpers to open ifaces
 * on it. */
class UctEnv {
  public:
    /* Opens the MD that offers transport `tl`; the shared-memory MD "tm"
     * when `tl` is empty. component() is the MD's. */
    explicit UctEnv(const std::string &tl = "");
    ~UctEnv();

    uct_component_h component() const { return component_; }
    uct_md_h        md() const { return md_; }
    uct_worker_h    worker() const { return worker_; }

    /* Opens `tl` with `params` (open mode and device are filled in) and the
     * given UCX_TM_* settings; returns the status. */
    ucs_status_t open_iface(const std::string &tl, uct_iface_params_t params, uct_iface_h *iface,
                            const std::vector<std::pair<std::string, std::string>> &settings = {});

    /* Value of the iface setting `name` of `tl` as UCX reads it (the
     * environment included); empty if `tl` has no such setting. */
    std::string iface_setting(const std::string &tl, const std::string &name) const;

  private:
    ucs_async_context_t *async_     = nullptr;
    uct_worker_h         worker_    = nullptr;
    uct_component_h      component_ = nullptr;
    uct_md_h             md_        = nullptr;
};

/* Finds component `name`; null if the plugin did not register it. */
uct_component_h find_tm_component(const char *name = "tm");

}  // namespace uct_tm_test

#endif
