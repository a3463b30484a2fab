#include "transport_iface.h"

#include <cstdio>
#include <cstdlib>
#include <vector>

namespace uct_tm {

namespace {

void check(const char *tool, const char *what, ucs_status_t status) {
    if (status != UCS_OK) {
        fprintf(stderr, "%s: %s: %s\n", tool, what, ucs_status_string(status));
        exit(2);
    }
}

/* The first MD of `component` offering `transport`: *md open, *device set. */
bool find_md(const char *tool, uct_component_h component, const std::string &transport,
             uct_md_h *md, std::string *device) {
    uct_component_attr_t cattr = {};
    cattr.field_mask = UCT_COMPONENT_ATTR_FIELD_MD_RESOURCE_COUNT;
    check(tool, "uct_component_query", uct_component_query(component, &cattr));
    std::vector<uct_md_resource_desc_t> mds(cattr.md_resource_count);
    cattr.field_mask   = UCT_COMPONENT_ATTR_FIELD_MD_RESOURCES;
    cattr.md_resources = mds.data();
    check(tool, "uct_component_query", uct_component_query(component, &cattr));
    for (const auto &mdr : mds) {
        uct_md_config_t *mdc;
        if (uct_md_config_read(component, nullptr, nullptr, &mdc) != UCS_OK) {
            continue;
        }
        const ucs_status_t st = uct_md_open(component, mdr.md_name, mdc, md);
        uct_config_release(mdc);
        if (st != UCS_OK) {
            continue;
        }
        uct_tl_resource_desc_t *tls;
        unsigned                ntls;
        if (uct_md_query_tl_resources(*md, &tls, &ntls) == UCS_OK) {
            for (unsigned t = 0; (t < ntls) && device->empty(); ++t) {
                if (transport == tls[t].tl_name) {
                    *device = tls[t].dev_name;
                }
            }
            uct_release_tl_resource_list(tls);
        }
        if (!device->empty()) {
            return true;
        }
        uct_md_close(*md);
    }
    return false;
}

}  // namespace

void open_transport(const char *tool, const std::string &transport, const TransportCallbacks &cb,
                    TransportIface *t) {
    check(tool, "ucs_async_context_create",
          ucs_async_context_create(UCS_ASYNC_MODE_THREAD_SPINLOCK, &t->async));
    check(tool, "uct_worker_create", uct_worker_create(t->async, UCS_THREAD_MODE_SINGLE, &t->worker));
    uct_component_h *components;
    unsigned         ncomponents;
    check(tool, "uct_query_components", uct_query_components(&components, &ncomponents));
    for (unsigned c = 0; (c < ncomponents) && (t->md == nullptr); ++c) {
        uct_md_h md;
        if (find_md(tool, components[c], transport, &md, &t->device)) {
            t->md        = md;
            t->component = components[c];
        }
    }
    uct_release_component_list(components);
    if (t->md == nullptr) {
        fprintf(stderr, "%s: transport %s not found\n", tool, transport.c_str());
        exit(2);
    }
    check(tool, "uct_md_query", uct_md_query(t->md, &t->md_attr));
    uct_iface_config_t *config;
    check(tool, "uct_md_iface_config_read",
          uct_md_iface_config_read(t->md, transport.c_str(), nullptr, nullptr, &config));
    uct_iface_params_t params = {};
    params.field_mask = UCT_IFACE_PARAM_FIELD_OPEN_MODE | UCT_IFACE_PARAM_FIELD_HW_TM_EAGER_CB |
                        UCT_IFACE_PARAM_FIELD_HW_TM_EAGER_ARG | UCT_IFACE_PARAM_FIELD_HW_TM_RNDV_CB |
                        UCT_IFACE_PARAM_FIELD_HW_TM_RNDV_ARG | UCT_IFACE_PARAM_FIELD_FEATURES |
                        UCT_IFACE_PARAM_FIELD_ERR_HANDLER | UCT_IFACE_PARAM_FIELD_ERR_HANDLER_ARG |
                        UCT_IFACE_PARAM_FIELD_ERR_HANDLER_FLAGS;
    params.open_mode            = UCT_IFACE_OPEN_MODE_DEVICE;
    params.mode.device.tl_name  = transport.c_str();
    params.mode.device.dev_name = t->device.c_str();
    params.eager_cb             = cb.eager_cb;
    params.eager_arg            = cb.arg;
    params.rndv_cb              = cb.rndv_cb;
    params.rndv_arg             = cb.arg;
    params.features = UCT_IFACE_FEATURE_TAG | UCT_IFACE_FEATURE_AM | UCT_IFACE_FEATURE_GET;
    params.err_handler       = cb.err_handler;
    params.err_handler_arg   = cb.err_arg;
    params.err_handler_flags = 0; /* called from progress */
    const ucs_status_t status = uct_iface_open(t->md, t->worker, &params, config, &t->iface);
    uct_config_release(config);
    check(tool, "uct_iface_open", status);
    check(tool, "uct_iface_query", uct_iface_query(t->iface, &t->attr));
    uct_iface_progress_enable(t->iface, UCT_PROGRESS_SEND | UCT_PROGRESS_RECV);
}

void close_transport_iface(TransportIface *t) {
    uct_iface_close(t->iface);
    uct_md_close(t->md);
    t->iface = nullptr;
    t->md    = nullptr;
}

void close_transport_worker(TransportIface *t) {
    uct_worker_destroy(t->worker);
    ucs_async_context_destroy(t->async);
    t->worker = nullptr;
    t->async  = nullptr;
}

}  // namespace uct_tm
