#include "uct_env.h"

#include <algorithm>
#include <cctype>
#include <cstring>
#include <functional>
#include <stdexcept>

namespace uct_tm_test {

uct_component_h find_tm_component(const char *name) {
    uct_component_h *components;
    unsigned         count;
    if (uct_query_components(&components, &count) != UCS_OK) {
        return nullptr;
    }
    uct_component_h found = nullptr;
    for (unsigned i = 0; i < count; ++i) {
        uct_component_attr_t attr = {};
        attr.field_mask           = UCT_COMPONENT_ATTR_FIELD_NAME;
        if ((uct_component_query(components[i], &attr) == UCS_OK) &&
            (strcmp(attr.name, name) == 0)) {
            found = components[i];
        }
    }
    uct_release_component_list(components);
    return found;
}

namespace {

/* Opens MD `name` of `component`; null on failure. */
uct_md_h open_md(uct_component_h component, const char *name) {
    uct_md_config_t *config;
    if (uct_md_config_read(component, nullptr, nullptr, &config) != UCS_OK) {
        return nullptr;
    }
    uct_md_h           md     = nullptr;
    const ucs_status_t status = uct_md_open(component, name, config, &md);
    uct_config_release(config);
    return (status == UCS_OK) ? md : nullptr;
}

/* MD names of `component`. */
std::vector<std::string> md_names(uct_component_h component) {
    std::vector<std::string> names;
    uct_component_attr_t     attr = {};
    attr.field_mask               = UCT_COMPONENT_ATTR_FIELD_MD_RESOURCE_COUNT;
    if (uct_component_query(component, &attr) != UCS_OK) {
        return names;
    }
    std::vector<uct_md_resource_desc_t> resources(attr.md_resource_count);
    attr.field_mask   = UCT_COMPONENT_ATTR_FIELD_MD_RESOURCES;
    attr.md_resources = resources.data();
    if (uct_component_query(component, &attr) == UCS_OK) {
        for (const auto &r : resources) {
            names.emplace_back(r.md_name);
        }
    }
    return names;
}

/* Transports `md` offers. */
std::vector<std::string> md_transports(uct_md_h md) {
    std::vector<std::string> names;
    uct_tl_resource_desc_t  *resources;
    unsigned                 count;
    if (uct_md_query_tl_resources(md, &resources, &count) == UCS_OK) {
        for (unsigned i = 0; i < count; ++i) {
            names.emplace_back(resources[i].tl_name);
        }
        uct_release_tl_resource_list(resources);
    }
    return names;
}

/* Opens the MDs of uct-tm's components one by one until `keep` wants one:
 * that one is returned open, with its component in *component; the others
 * are closed again. Null if `keep` wanted none. */
uct_md_h find_md(const std::function<bool(uct_md_h)> &keep, uct_component_h *component) {
    for (const char *name : kTmComponents) {
        *component = find_tm_component(name);
        for (const std::string &md_name :
             (*component == nullptr) ? std::vector<std::string>() : md_names(*component)) {
            uct_md_h md = open_md(*component, md_name.c_str());
            if (md == nullptr) {
                continue;
            }
            if (keep(md)) {
                return md;
            }
            uct_md_close(md);
        }
    }
    return nullptr;
}

}  // namespace

UctEnv::UctEnv(const std::string &tl) {
    component_ = find_tm_component();
    if (component_ == nullptr) {
        throw std::runtime_error("component \"tm\" is not registered");
    }
    if (ucs_async_context_create(UCS_ASYNC_MODE_THREAD_SPINLOCK, &async_) != UCS_OK) {
        throw std::runtime_error("ucs_async_context_create failed");
    }
    if (uct_worker_create(async_, UCS_THREAD_MODE_SINGLE, &worker_) != UCS_OK) {
        throw std::runtime_error("uct_worker_create failed");
    }
    md_ = tl.empty() ? open_md(component_, "tm") : find_md([&](uct_md_h md) {
        const auto tls = md_transports(md);
        return std::find(tls.begin(), tls.end(), tl) != tls.end();
    }, &component_);
    if (md_ == nullptr) {
        uct_worker_destroy(worker_);
        ucs_async_context_destroy(async_);
        throw std::runtime_error("no MD of uct-tm offers " + (tl.empty() ? "\"tm\"" : tl));
    }
}

UctEnv::~UctEnv() {
    uct_md_close(md_);
    uct_worker_destroy(worker_);
    ucs_async_context_destroy(async_);
}

namespace {

/* "tm_sm" -> "TM_SM_": the prefix of the transport's UCX_TM_SM_* settings. */
std::string setting_prefix(const std::string &tl) {
    std::string prefix;
    for (char c : tl) {
        prefix += static_cast<char>(toupper(static_cast<unsigned char>(c)));
    }
    return prefix + "_";
}

/* Up to 1.16 uct_config_modify() takes a setting's own name ("FIFO_SIZE"),
 * from 1.17 the name with the transport's prefix ("TM_SM_FIFO_SIZE"). */
ucs_status_t modify_setting(uct_iface_config_t *config, const std::string &tl,
                            const std::string &name, const std::string &value) {
    ucs_status_t status = uct_config_modify(config, name.c_str(), value.c_str());
    if (status == UCS_ERR_NO_ELEM) {
        status = uct_config_modify(config, (setting_prefix(tl) + name).c_str(), value.c_str());
    }
    return status;
}

}  // namespace

ucs_status_t UctEnv::open_iface(const std::string &tl, uct_iface_params_t params,
                                uct_iface_h *iface,
                                const std::vector<std::pair<std::string, std::string>> &settings) {
    uct_iface_config_t *config;
    ucs_status_t status = uct_md_iface_config_read(md_, tl.c_str(), nullptr, nullptr, &config);
    if (status != UCS_OK) {
        return status;
    }
    for (const auto &kv : settings) {
        status = modify_setting(config, tl, kv.first, kv.second);
        if (status != UCS_OK) {
            uct_config_release(config);
            return status;
        }
    }
    uct_tl_resource_desc_t *resources;
    unsigned                count;
    status = uct_md_query_tl_resources(md_, &resources, &count);
    std::string device;
    for (unsigned i = 0; (status == UCS_OK) && (i < count); ++i) {
        if (tl == resources[i].tl_name) {
            device = resources[i].dev_name;
        }
    }
    if (status == UCS_OK) {
        uct_release_tl_resource_list(resources);
    }
    params.field_mask |= UCT_IFACE_PARAM_FIELD_OPEN_MODE;
    params.open_mode                   = UCT_IFACE_OPEN_MODE_DEVICE;
    params.mode.device.tl_name         = tl.c_str();
    params.mode.device.dev_name        = device.c_str();
    status = uct_iface_open(md_, worker_, &params, config, iface);
    uct_config_release(config);
    if (status == UCS_OK) {
        /* uct_worker_progress() only drives ifaces that asked for it. */
        uct_iface_progress_enable(*iface, UCT_PROGRESS_SEND | UCT_PROGRESS_RECV);
    }
    return status;
}

std::string UctEnv::iface_setting(const std::string &tl, const std::string &name) const {
    uct_iface_config_t *config;
    if (uct_md_iface_config_read(md_, tl.c_str(), nullptr, nullptr, &config) != UCS_OK) {
        return "";
    }
    char value[256] = "";
    if ((uct_config_get(config, name.c_str(), value, sizeof(value)) != UCS_OK) &&
        (uct_config_get(config, (setting_prefix(tl) + name).c_str(), value, sizeof(value)) != UCS_OK)) {
        value[0] = '\0';
    }
    uct_config_release(config);
    return value;
}

std::vector<std::string> tm_transports() {
    std::vector<std::string> names;
    uct_component_h          component;
    find_md([&](uct_md_h md) {
        for (const std::string &tl : md_transports(md)) {
            if (std::find(names.begin(), names.end(), tl) == names.end()) {
                names.push_back(tl);
            }
        }
        return false;
    }, &component);
    return names;
}

}  // namespace uct_tm_test
