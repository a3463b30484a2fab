#include "iface_base.h"

namespace uct_tm {

ucs_status_t decode_iface_params(const char *tl, const uct_iface_params_t *params,
                                 IfaceParams *out) {
    const uint64_t fields = params->field_mask;
    if (!(fields & UCT_IFACE_PARAM_FIELD_OPEN_MODE) ||
        !(params->open_mode & UCT_IFACE_OPEN_MODE_DEVICE)) {
        ucs_error("%s: only UCT_IFACE_OPEN_MODE_DEVICE is supported", tl);
        return UCS_ERR_UNSUPPORTED;
    }
    IfaceParams p;
    p.rx_headroom = (fields & UCT_IFACE_PARAM_FIELD_RX_HEADROOM) ? params->rx_headroom : 0;
    if (fields & UCT_IFACE_PARAM_FIELD_HW_TM_EAGER_CB) {
        p.eager_cb = params->eager_cb;
    }
    if (fields & UCT_IFACE_PARAM_FIELD_HW_TM_EAGER_ARG) {
        p.eager_arg = params->eager_arg;
    }
    if (fields & UCT_IFACE_PARAM_FIELD_HW_TM_RNDV_CB) {
        p.rndv_cb = params->rndv_cb;
    }
    if (fields & UCT_IFACE_PARAM_FIELD_HW_TM_RNDV_ARG) {
        p.rndv_arg = params->rndv_arg;
    }
    const bool have_cbs = (p.eager_cb != nullptr) && (p.rndv_cb != nullptr);
    p.tag_enabled       = (fields & UCT_IFACE_PARAM_FIELD_FEATURES)
                              ? ((params->features & UCT_IFACE_FEATURE_TAG) && have_cbs)
                              : true;
    *out = p;
    return UCS_OK;
}

}  // namespace uct_tm
