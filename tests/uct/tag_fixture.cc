#include "tag_fixture.h"

#include <algorithm>
#include <cctype>
#include <cinttypes>
#include <cstring>
#include <sstream>

namespace uct_tm_test {

Node::Node(UctEnv &env, const std::string &tl, const Settings &settings, size_t rx_headroom)
    : unexp(rx_headroom) {
    uct_md_attr_t md_attr;
    if (uct_md_query(env.md(), &md_attr) == UCS_OK) {
        unexp.set_rkey_size(md_attr.rkey_packed_size);
    }
    uct_iface_params_t params = {};
    params.field_mask = UCT_IFACE_PARAM_FIELD_FEATURES | UCT_IFACE_PARAM_FIELD_HW_TM_EAGER_CB |
                        UCT_IFACE_PARAM_FIELD_HW_TM_EAGER_ARG | UCT_IFACE_PARAM_FIELD_HW_TM_RNDV_CB |
                        UCT_IFACE_PARAM_FIELD_HW_TM_RNDV_ARG | UCT_IFACE_PARAM_FIELD_RX_HEADROOM |
                        UCT_IFACE_PARAM_FIELD_ERR_HANDLER | UCT_IFACE_PARAM_FIELD_ERR_HANDLER_ARG |
                        UCT_IFACE_PARAM_FIELD_ERR_HANDLER_FLAGS;
    params.features = UCT_IFACE_FEATURE_TAG | UCT_IFACE_FEATURE_AM | UCT_IFACE_FEATURE_GET |
                      UCT_IFACE_FEATURE_PUT;
    params.eager_cb          = Unexpected::eager_cb;
    params.eager_arg         = &unexp;
    params.rndv_cb           = Unexpected::rndv_cb;
    params.rndv_arg          = &unexp;
    params.rx_headroom       = rx_headroom;
    params.err_handler       = ErrorLog::handler;
    params.err_handler_arg   = &errors;
    params.err_handler_flags = UCT_CB_FLAG_ASYNC;
    status = env.open_iface(tl, params, &iface, settings);
    if (status != UCS_OK) {
        iface = nullptr;
        return;
    }
    status = uct_iface_query(iface, &attr);
    caps   = Caps::of(attr);
}

Node::~Node() {
    release_held_descs();
    if (iface != nullptr) {
        uct_iface_close(iface);
    }
}

void Node::release_held_descs() { unexp.release_held(); }

std::string Node::address() const {
    std::string dev(attr.device_addr_len, '\0'), ifa(attr.iface_addr_len, '\0');
    uct_iface_get_device_address(iface, reinterpret_cast<uct_device_addr_t *>(&dev[0]));
    uct_iface_get_address(iface, reinterpret_cast<uct_iface_addr_t *>(&ifa[0]));
    return dev + ifa;
}

ucs_status_t Node::connect(const std::string &remote, uct_ep_h *ep) const {
    if (remote.size() != attr.device_addr_len + attr.iface_addr_len) {
        return UCS_ERR_INVALID_PARAM;
    }
    uct_ep_params_t p = {};
    p.field_mask = UCT_EP_PARAM_FIELD_IFACE | UCT_EP_PARAM_FIELD_DEV_ADDR |
                   UCT_EP_PARAM_FIELD_IFACE_ADDR;
    p.iface      = iface;
    p.dev_addr   = reinterpret_cast<const uct_device_addr_t *>(remote.data());
    p.iface_addr = reinterpret_cast<const uct_iface_addr_t *>(remote.data() + attr.device_addr_len);
    return uct_ep_create(&p, ep);
}

namespace {

ucs_status_t log_am(void *arg, void *data, size_t length, unsigned) {
    static_cast<std::vector<std::string> *>(arg)->emplace_back(static_cast<const char *>(data),
                                                                length);
    return UCS_OK;
}

}  // namespace

ucs_status_t Node::set_am_log(uint8_t id, std::vector<std::string> *log) {
    return uct_iface_set_am_handler(iface, id, log_am, log, 0 /* synchronous */);
}

std::string transport_param_name(const ::testing::TestParamInfo<std::string> &info) {
    std::string name = info.param;
    for (char &c : name) {
        if (!isalnum(static_cast<unsigned char>(c))) {
            c = '_';
        }
    }
    return name;
}

void TagTest::SetUp() {
    test_seed();
    shm_before_ = shm_leftovers();
    reopen({});
}

void TagTest::TearDown() {
    close();
    const auto after = shm_leftovers();
    for (const std::string &name : after) {
        if (std::find(shm_before_.begin(), shm_before_.end(), name) == shm_before_.end()) {
            ADD_FAILURE() << "left in /dev/shm: " << name;
        }
    }
}

void TagTest::close() {
    if (ep_ != nullptr) {
        uct_ep_destroy(ep_);
        ep_ = nullptr;
    }
    tx_.reset();
    rx_.reset();
    env_.reset();
}

void TagTest::reopen(const Settings &rx_settings, const Settings &tx_settings,
                     size_t rx_headroom) {
    close();
    env_.reset(new UctEnv());
    rx_.reset(new Node(*env_, GetParam(), rx_settings, rx_headroom));
    if (rx_->status == UCS_ERR_NO_ELEM) {
        GTEST_SKIP() << GetParam() << " has no such setting";
    }
    ASSERT_EQ(rx_->status, UCS_OK) << "receiver iface of " << GetParam();
    tx_.reset(new Node(*env_, GetParam(), tx_settings, rx_headroom));
    ASSERT_EQ(tx_->status, UCS_OK) << "sender iface of " << GetParam();
    ASSERT_EQ(tx_->connect(rx_->address(), &ep_), UCS_OK);
}

unsigned TagTest::progress() { return uct_worker_progress(env_->worker()); }

void TagTest::drain(int times) {
    for (int i = 0; i < times; ++i) {
        progress();
    }
}

bool TagTest::wait(const std::function<bool()> &done, double seconds) {
    return wait_for(done, [this] { progress(); }, seconds);
}

ucs_status_t TagTest::post(RecvCtx &r, uct_tag_t tag, uct_tag_t mask, RecvBuffers &b) {
    return uct_iface_tag_recv_zcopy(rx_->iface, tag, mask, b.iov.data(), b.iov.size(), &r.ctx);
}

ucs_status_t TagTest::send(Send &s) {
    ucs_status_t status = UCS_ERR_NO_RESOURCE;
    wait([&] {
        status = s.post(ep_);
        return status != UCS_ERR_NO_RESOURCE;
    });
    return status;
}

bool TagTest::finish(Send &s) {
    return wait([&] { return !s.comp_pending || (s.comp->calls > 0); });
}

std::string TagTest::check_delivery(const RecvCtx &r, const RecvBuffers &b, const Send &s,
                                    ucs_status_t expect) const {
    std::ostringstream err;
    if (r.sequence() != "consumed,completed") {
        err << " callbacks [" << r.sequence() << "] instead of [consumed,completed];";
    }
    if (r.status != expect) {
        err << " status " << ucs_status_string(r.status) << " instead of "
            << ucs_status_string(expect) << ";";
    }
    if (r.stag != s.tag) {
        err << " stag 0x" << std::hex << r.stag << " instead of 0x" << s.tag << std::dec << ";";
    }
    if (r.imm != s.imm) {
        err << " imm " << r.imm << " instead of " << s.imm << ";";
    }
    if (r.length != s.payload.size()) {
        err << " length " << r.length << " instead of " << s.payload.size() << ";";
    }
    if (r.inline_data) {
        err << " completed_cb got inline_data for a zero-copy receive;";
    }
    const std::string data = b.check(s.seed, s.payload.size());
    if (!data.empty()) {
        err << " " << data << ";";
    }
    return err.str();
}

}  // namespace uct_tm_test
