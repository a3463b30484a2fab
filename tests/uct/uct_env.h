/*
 * Test helpers: open the "tm" component's MD and an iface of a transport
 * through UCX's public API, as any UCX client would.
 */
#ifndef UCT_TM_TESTS_UCT_ENV_H_
#define UCT_TM_TESTS_UCT_ENV_H_

#include <ucs/async/async_fwd.h>
#include <uct/api/uct.h>

#include <string>
#include <vector>

namespace uct_tm_test {

/* Names of transports of component "tm" on any of its MDs (the shared-memory
 * MD "tm", the verbs MDs "tm_<device>"), from uct_md_query_tl_resources. */
std::vector<std::string> tm_transports();

/* A worker, an MD of component "tm", and helpers to open ifaces on it. */
class UctEnv {
  public:
    /* Opens the MD that offers transport `tl`; the shared-memory MD "tm"
     * when `tl` is empty. */
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

/* Finds component "tm"; null if the plugin did not register. */
uct_component_h find_tm_component();

}  // namespace uct_tm_test

#endif
