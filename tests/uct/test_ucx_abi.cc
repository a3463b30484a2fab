/*
 * The plugin's view of UCX's private layouts, checked against libuct's own
 * behaviour: if a mirrored offset were wrong, these calls (all implemented
 * inside libuct, reading or writing our structures) would misbehave.
 */
#include "uct_env.h"

#include <gtest/gtest.h>
#include <ucs/type/class.h>

#include <algorithm>
#include <cstring>

extern "C" ucs_class_t uct_base_iface_t_class;
/* Exported by libuct 1.13; its parameter struct lives in the uninstalled uct_v2.h. */
extern "C" ucs_status_t uct_iface_estimate_perf(uct_iface_h iface, void *perf_attr);

namespace uct_tm_test {
namespace {

TEST(UcxAbi, BaseIfaceSizeMatchesLibuct) {
    /* uct_tm/base/ucx_abi.h reserves this many bytes for UCX's base iface. */
    EXPECT_EQ(uct_base_iface_t_class.size, 1280u);
}

TEST(UcxAbi, ComponentIsListed) {
    uct_component_h component = find_tm_component();
    ASSERT_NE(component, nullptr);
    uct_component_attr_t attr = {};
    attr.field_mask           = UCT_COMPONENT_ATTR_FIELD_NAME | UCT_COMPONENT_ATTR_FIELD_MD_RESOURCE_COUNT;
    ASSERT_EQ(uct_component_query(component, &attr), UCS_OK);
    EXPECT_STREQ(attr.name, "tm");
    EXPECT_EQ(attr.md_resource_count, 1u);
}

TEST(UcxAbi, TransportsAreListed) {
    const auto names = tm_transports();
    EXPECT_NE(std::find(names.begin(), names.end(), "tm_sm"), names.end());
}

TEST(UcxAbi, MdQueryThroughLibuct) {
    UctEnv        env;
    uct_md_attr_t attr;
    ASSERT_EQ(uct_md_query(env.md(), &attr), UCS_OK);
    EXPECT_STREQ(attr.component_name, "tm");
    EXPECT_TRUE(attr.cap.flags & UCT_MD_FLAG_REG);
    EXPECT_GT(attr.rkey_packed_size, 0u);
}

struct AmCounter {
    int      calls = 0;
    uint64_t header = 0;
};

ucs_status_t count_am(void *arg, void *data, size_t length, unsigned) {
    auto *counter = static_cast<AmCounter *>(arg);
    ++counter->calls;
    if (length >= sizeof(uint64_t)) {
        memcpy(&counter->header, data, sizeof(uint64_t));
    }
    return UCS_OK;
}

TEST(UcxAbi, SetAmHandlerReachesOurIface) {
    UctEnv             env;
    uct_iface_params_t params = {};
    uct_iface_h        iface;
    ASSERT_EQ(env.open_iface("tm_sm", params, &iface), UCS_OK);

    /* uct_iface_set_am_handler writes am[id] of the base iface inside libuct. */
    AmCounter counter;
    const uint8_t id = UCT_AM_ID_MAX - 1;
    ASSERT_EQ(uct_iface_set_am_handler(iface, id, count_am, &counter, 0), UCS_OK);

    uct_iface_attr_t attr;
    ASSERT_EQ(uct_iface_query(iface, &attr), UCS_OK);
    std::vector<char> addr(attr.iface_addr_len), dev(attr.device_addr_len);
    ASSERT_EQ(uct_iface_get_address(iface, reinterpret_cast<uct_iface_addr_t *>(addr.data())), UCS_OK);
    ASSERT_EQ(uct_iface_get_device_address(iface, reinterpret_cast<uct_device_addr_t *>(dev.data())), UCS_OK);
    uct_ep_params_t ep_params = {};
    ep_params.field_mask = UCT_EP_PARAM_FIELD_IFACE | UCT_EP_PARAM_FIELD_IFACE_ADDR |
                           UCT_EP_PARAM_FIELD_DEV_ADDR;
    ep_params.iface      = iface;
    ep_params.iface_addr = reinterpret_cast<uct_iface_addr_t *>(addr.data());
    ep_params.dev_addr   = reinterpret_cast<uct_device_addr_t *>(dev.data());
    uct_ep_h ep;
    ASSERT_EQ(uct_ep_create(&ep_params, &ep), UCS_OK);
    ASSERT_EQ(uct_ep_am_short(ep, id, 0x1122334455667788ull, nullptr, 0), UCS_OK);
    for (int i = 0; (i < 1000) && (counter.calls == 0); ++i) {
        uct_worker_progress(env.worker());
    }
    EXPECT_EQ(counter.calls, 1);
    EXPECT_EQ(counter.header, 0x1122334455667788ull);
    uct_ep_destroy(ep);
    uct_iface_close(iface);
}

TEST(UcxAbi, EstimatePerfGoesThroughInternalOps) {
    UctEnv             env;
    uct_iface_params_t params = {};
    uct_iface_h        iface;
    ASSERT_EQ(env.open_iface("tm_sm", params, &iface), UCS_OK);
    uct_iface_attr_t attr;
    ASSERT_EQ(uct_iface_query(iface, &attr), UCS_OK);
    /* libuct 1.13 dispatches uct_iface_estimate_perf through the base iface's
     * internal_ops pointer to uct_base_iface_estimate_perf, which answers
     * from iface_query: the figures must be ours. */
    struct {
        uint64_t field_mask;
        int      operation;
        int      local_memory_type, remote_memory_type;
        uint8_t  local_sys_device, remote_sys_device;
        double   send_pre_overhead, send_post_overhead, recv_overhead;
        struct { double dedicated, shared; } bandwidth;
        struct { double c, m; } latency;
        size_t   max_inflight_eps;
    } perf = {};
    perf.field_mask = (1u << 4) | (1u << 5) | (1u << 6) | (1u << 8) | (1u << 9);
    ASSERT_EQ(uct_iface_estimate_perf(iface, &perf), UCS_OK);
    EXPECT_DOUBLE_EQ(perf.latency.c, attr.latency.c);
    EXPECT_DOUBLE_EQ(perf.bandwidth.shared, attr.bandwidth.shared);
    uct_iface_close(iface);
}

}  // namespace
}  // namespace uct_tm_test
