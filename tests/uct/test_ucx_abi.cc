/*
 * The plugin's view of UCX's private layouts, checked against libuct's own
 * behaviour: if a mirrored offset were wrong, these calls (all implemented
 * inside libuct, reading or writing our structures) would misbehave.
 */
#include "uct_env.h"

#include "ib/ib_rkey.h"
#include "sm/sm_rkey.h"

#include <gtest/gtest.h>
#include <ucs/type/class.h>
#include <uct/api/version.h>

#include <algorithm>
#include <cstring>

extern "C" ucs_class_t uct_base_iface_t_class;
/* Exported by libuct; its parameter struct lives in the uninstalled uct_v2.h. */
extern "C" ucs_status_t uct_iface_estimate_perf(uct_iface_h iface, void *perf_attr);

#define UCX_RELEASE (UCT_VERNO_MAJOR * 100 + UCT_VERNO_MINOR)

/* The v2 reachability and connection checks (libuct 1.15+ / 1.16+), with
 * their parameter blocks as UCX's uct_v2.h declares them: 1.18 appended the
 * addresses' lengths to the reachability block. */
struct ReachableParams {
    uint64_t                 field_mask;
    const uct_device_addr_t *device_addr;
    const uct_iface_addr_t  *iface_addr;
    char                    *info_string;
    size_t                   info_string_length;
    int                      scope; /* 0: same device, 1: network */
#if UCX_RELEASE >= 118
    size_t device_addr_length;
    size_t iface_addr_length;
#endif
};
struct IsConnectedParams {
    uint64_t                 field_mask;
    const uct_device_addr_t *device_addr;
    const uct_iface_addr_t  *iface_addr;
    const uct_ep_addr_t     *ep_addr;
};
#if UCX_RELEASE >= 114
/* The head of uct_md_attr_v2_t (uct_md_query_v2, libuct 1.14+), room for the
 * rest behind it; 1.15 inserted reg_nonblock_mem_types before cache_mem_types. */
struct MdAttrV2Head {
    uint64_t field_mask;
    uint64_t max_alloc;
    size_t   max_reg;
    uint64_t flags;
    uint64_t reg_mem_types;
#if UCX_RELEASE >= 115
    uint64_t reg_nonblock_mem_types;
#endif
    uint64_t cache_mem_types;
    char     rest[1024];
};
constexpr uint64_t kMdAttrFieldRegMemTypes   = 1u << 3;
constexpr uint64_t kMdAttrFieldCacheMemTypes = (UCX_RELEASE >= 115) ? (1u << 5) : (1u << 4);
extern "C" ucs_status_t uct_md_query_v2(uct_md_h md, MdAttrV2Head *attr);
#endif
extern "C" int uct_iface_is_reachable_v2(uct_iface_h iface, const ReachableParams *params);
extern "C" int uct_ep_is_connected(uct_ep_h ep, const IsConnectedParams *params);

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

/* MD names of `component` and, per MD, the transports libuct lists on it. */
std::vector<std::pair<std::string, std::vector<std::string>>> mds_of(uct_component_h component) {
    std::vector<std::pair<std::string, std::vector<std::string>>> found;
    uct_component_attr_t attr = {};
    attr.field_mask           = UCT_COMPONENT_ATTR_FIELD_MD_RESOURCE_COUNT;
    EXPECT_EQ(uct_component_query(component, &attr), UCS_OK);
    std::vector<uct_md_resource_desc_t> resources(attr.md_resource_count);
    attr.field_mask   = UCT_COMPONENT_ATTR_FIELD_MD_RESOURCES;
    attr.md_resources = resources.data();
    EXPECT_EQ(uct_component_query(component, &attr), UCS_OK);
    for (const auto &r : resources) {
        uct_md_config_t *config;
        uct_md_h         md;
        EXPECT_EQ(uct_md_config_read(component, nullptr, nullptr, &config), UCS_OK);
        EXPECT_EQ(uct_md_open(component, r.md_name, config, &md), UCS_OK) << r.md_name;
        uct_config_release(config);
        uct_md_attr_t md_attr;
        EXPECT_EQ(uct_md_query(md, &md_attr), UCS_OK);
        uct_component_attr_t name = {};
        name.field_mask           = UCT_COMPONENT_ATTR_FIELD_NAME;
        EXPECT_EQ(uct_component_query(component, &name), UCS_OK);
        EXPECT_STREQ(md_attr.component_name, name.name) << r.md_name;
        std::vector<std::string> tls;
        uct_tl_resource_desc_t  *tl_resources;
        unsigned                 count;
        EXPECT_EQ(uct_md_query_tl_resources(md, &tl_resources, &count), UCS_OK);
        for (unsigned i = 0; i < count; ++i) {
            tls.emplace_back(tl_resources[i].tl_name);
        }
        uct_release_tl_resource_list(tl_resources);
        uct_md_close(md);
        found.emplace_back(r.md_name, tls);
    }
    return found;
}

/* One component per MD family, as UCX has: "tm" holds the shared-memory MD
 * "tm" and tm_sm only; "tm_ib", registered exactly when the build has
 * rdma-core, holds the verbs MDs "tm_<device>" (none without a device) and
 * tm_rc and tm_dc only. */
TEST(UcxAbi, OneComponentPerMdFamily) {
    const auto tm = mds_of(find_tm_component("tm"));
    ASSERT_EQ(tm.size(), 1u);
    EXPECT_EQ(tm[0].first, "tm");
    EXPECT_EQ(tm[0].second, std::vector<std::string>{"tm_sm"});
    uct_component_h ib = find_tm_component("tm_ib");
#if UCT_TM_HAVE_VERBS
    ASSERT_NE(ib, nullptr);
    for (const auto &md : mds_of(ib)) {
        EXPECT_EQ(md.first.rfind("tm_", 0), 0u) << md.first;
        EXPECT_EQ(md.second, (std::vector<std::string>{"tm_rc", "tm_dc"})) << md.first;
    }
#else
    EXPECT_EQ(ib, nullptr) << "built without rdma-core";
#endif
}

/* libuct hands an rkey buffer to the component whose MD packed it; each
 * component unpacks its own family's keys and refuses the other's, whose
 * magic differs (nothing routes by it). */
TEST(UcxAbi, EachComponentUnpacksOnlyItsRkeys) {
    UctEnv            env;
    std::vector<char> buffer(4096, 'x');
    uct_mem_h         memh;
    ASSERT_EQ(uct_md_mem_reg(env.md(), buffer.data(), buffer.size(), UCT_MD_MEM_ACCESS_ALL, &memh),
              UCS_OK);
    uct_tm::sm::PackedRkey shm_key;
    ASSERT_EQ(uct_md_mkey_pack(env.md(), memh, &shm_key), UCS_OK);
    /* A verbs key, in a buffer as long as a shared-memory one (what "tm" reads). */
    uct_tm::sm::PackedRkey       room{};
    const uct_tm::ib::PackedRkey ib_key = uct_tm::ib::pack_rkey(0x1234, 0x10000, 4096);
    static_assert(sizeof(ib_key) <= sizeof(room), "a verbs key fits");
    memcpy(&room, &ib_key, sizeof(ib_key));
    uct_rkey_bundle_t bundle;
    EXPECT_EQ(uct_rkey_unpack(env.component(), &room, &bundle), UCS_ERR_INVALID_PARAM);
#if UCT_TM_HAVE_VERBS
    uct_component_h ib = find_tm_component("tm_ib");
    ASSERT_NE(ib, nullptr);
    EXPECT_EQ(uct_rkey_unpack(ib, &shm_key, &bundle), UCS_ERR_INVALID_PARAM);
    ASSERT_EQ(uct_rkey_unpack(ib, &ib_key, &bundle), UCS_OK);
    void *local = nullptr;
    EXPECT_EQ(uct_rkey_ptr(ib, &bundle, 0x10000, &local), UCS_ERR_UNSUPPORTED) << "RDMA only";
    EXPECT_EQ(uct_rkey_release(ib, &bundle), UCS_OK);
#endif
    EXPECT_EQ(uct_md_mem_dereg(env.md(), memh), UCS_OK);
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
    /* From 1.14 libuct asks the MD for uct_md_attr_v2_t and converts: each
     * capability must arrive in its own field. */
    /* From 1.16 the MD asks for memory handles: UCP's v2 tag-offload
     * rendezvous names the sender's MD only for such an MD (else the
     * receiver of an unexpected one aborts). */
    const uint64_t need_memh = (UCX_RELEASE >= 116) ? UCT_MD_FLAG_NEED_MEMH : 0;
    EXPECT_EQ(attr.cap.flags, UCT_MD_FLAG_REG | UCT_MD_FLAG_ALLOC | UCT_MD_FLAG_NEED_RKEY | need_memh);
    EXPECT_EQ(attr.cap.reg_mem_types, UCS_BIT(UCS_MEMORY_TYPE_HOST));
    EXPECT_EQ(attr.cap.alloc_mem_types, UCS_BIT(UCS_MEMORY_TYPE_HOST));
    EXPECT_EQ(attr.cap.access_mem_types, UCS_BIT(UCS_MEMORY_TYPE_HOST));
    EXPECT_EQ(attr.cap.detect_mem_types, 0u);
    EXPECT_EQ(attr.cap.max_reg, SIZE_MAX);
    EXPECT_GT(attr.reg_cost.c, 0);
    EXPECT_LT(attr.reg_cost.c, 1e-6);
    EXPECT_GT(attr.rkey_packed_size, 0u);
    EXPECT_LE(attr.rkey_packed_size, 256u);
    EXPECT_TRUE(ucs_cpu_is_set(0, &attr.local_cpus));
#if UCX_RELEASE >= 114
    /* UCP keeps registrations only of MDs whose memory types say so, and
     * from 1.16 asserts that every MD it registers a datatype iterator on
     * is such an MD (a checked UCX aborts at the first rendezvous). */
    MdAttrV2Head v2 = {};
    v2.field_mask   = kMdAttrFieldCacheMemTypes | kMdAttrFieldRegMemTypes;
    ASSERT_EQ(uct_md_query_v2(env.md(), &v2), UCS_OK);
    EXPECT_EQ(v2.reg_mem_types, UCS_BIT(UCS_MEMORY_TYPE_HOST));
    EXPECT_EQ(v2.cache_mem_types, UCS_BIT(UCS_MEMORY_TYPE_HOST));
#endif
}

/* Registration, key packing and unpacking as a UCX client does them: the
 * signatures of mem_reg (1.14), mkey_pack (1.16) and rkey_unpack (1.19)
 * changed, and libuct calls the plugin with the running release's form. */
TEST(UcxAbi, RegisterPackUnpackThroughLibuct) {
    UctEnv            env;
    uct_md_attr_t     attr;
    ASSERT_EQ(uct_md_query(env.md(), &attr), UCS_OK);
    std::vector<char> buffer(4096, 'x');
    uct_mem_h         memh = nullptr;
    ASSERT_EQ(uct_md_mem_reg(env.md(), buffer.data(), buffer.size(), UCT_MD_MEM_ACCESS_ALL, &memh),
              UCS_OK);
    ASSERT_NE(memh, nullptr);
    std::vector<char> packed(attr.rkey_packed_size);
    ASSERT_EQ(uct_md_mkey_pack(env.md(), memh, packed.data()), UCS_OK);
    uct_rkey_bundle_t bundle = {};
    ASSERT_EQ(uct_rkey_unpack(env.component(), packed.data(), &bundle), UCS_OK);
    /* Ordinary memory is reachable by CMA only, not by a local pointer. */
    void *local = nullptr;
    EXPECT_EQ(uct_rkey_ptr(env.component(), &bundle,
                           reinterpret_cast<uintptr_t>(buffer.data()), &local),
              UCS_ERR_UNREACHABLE);
    EXPECT_EQ(uct_rkey_release(env.component(), &bundle), UCS_OK);
    EXPECT_EQ(uct_md_mem_dereg(env.md(), memh), UCS_OK);
}

/* Allocation through the MD (mem_alloc gained a system device in 1.19):
 * shared memory this process and its peers can map. */
TEST(UcxAbi, AllocateThroughLibuct) {
    UctEnv                 env;
    const uct_alloc_method_t method = UCT_ALLOC_METHOD_MD;
    uct_md_h               mds[]  = {env.md()};
    uct_mem_alloc_params_t params = {};
    params.field_mask = UCT_MEM_ALLOC_PARAM_FIELD_FLAGS | UCT_MEM_ALLOC_PARAM_FIELD_MDS |
                        UCT_MEM_ALLOC_PARAM_FIELD_MEM_TYPE | UCT_MEM_ALLOC_PARAM_FIELD_NAME;
    params.flags      = UCT_MD_MEM_ACCESS_ALL;
    params.mds.mds    = mds;
    params.mds.count  = 1;
    params.mem_type   = UCS_MEMORY_TYPE_HOST;
    params.name       = "test_ucx_abi";
    uct_allocated_memory_t mem = {};
    ASSERT_EQ(uct_mem_alloc(10000, &method, 1, &params, &mem), UCS_OK);
    EXPECT_EQ(mem.method, UCT_ALLOC_METHOD_MD);
    EXPECT_EQ(mem.md, env.md());
    ASSERT_GE(mem.length, 10000u);
    memset(mem.address, 0x5a, mem.length); /* the whole length is ours */
    EXPECT_EQ(uct_mem_free(&mem), UCS_OK);
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

/* uct_perf_attr_t as UCX's uct_v2.h declares it, written out here from the
 * release's sources independently of the plugin's mirror: 1.17 appended
 * flags, 1.19 inserted path_bandwidth (and moved the later field bits up). */
struct PerfAttr {
    uint64_t field_mask;
    int      operation;
    int      local_memory_type, remote_memory_type;
    uint8_t  local_sys_device, remote_sys_device;
    double   send_pre_overhead, send_post_overhead, recv_overhead;
    struct { double dedicated, shared; } bandwidth;
#if UCX_RELEASE >= 119
    struct { double dedicated, shared; } path_bandwidth;
#endif
    struct { double c, m; } latency;
    size_t   max_inflight_eps;
#if UCX_RELEASE >= 117
    uint64_t flags;
#endif
};
constexpr uint64_t kFieldOperation       = 1u << 0;
constexpr uint64_t kFieldSendPreOverhead = 1u << 5;
constexpr uint64_t kFieldRecvOverhead    = 1u << 7;
constexpr uint64_t kFieldBandwidth       = 1u << 8;
constexpr uint64_t kFieldLatency         = (UCX_RELEASE >= 119) ? (1u << 10) : (1u << 9);
constexpr uint64_t kFieldMaxInflightEps  = (UCX_RELEASE >= 119) ? (1u << 11) : (1u << 10);

TEST(UcxAbi, EstimatePerfGoesThroughInternalOps) {
    UctEnv             env;
    uct_iface_params_t params = {};
    uct_iface_h        iface;
    ASSERT_EQ(env.open_iface("tm_sm", params, &iface), UCS_OK);
    uct_iface_attr_t attr;
    ASSERT_EQ(uct_iface_query(iface, &attr), UCS_OK);
    /* libuct dispatches uct_iface_estimate_perf through the base iface's
     * internal_ops pointer to the plugin's estimate, which answers from
     * iface_query: the figures must be ours, each in its field. */
    PerfAttr perf;
    memset(&perf, 0xff, sizeof(perf)); /* a field written where it does not belong shows */
    perf.field_mask = kFieldSendPreOverhead | kFieldRecvOverhead | kFieldBandwidth |
                      kFieldLatency | kFieldMaxInflightEps;
    ASSERT_EQ(uct_iface_estimate_perf(iface, &perf), UCS_OK);
    EXPECT_DOUBLE_EQ(perf.send_pre_overhead, attr.overhead);
    EXPECT_DOUBLE_EQ(perf.recv_overhead, attr.overhead);
    EXPECT_DOUBLE_EQ(perf.latency.c, attr.latency.c);
    EXPECT_DOUBLE_EQ(perf.latency.m, attr.latency.m);
    EXPECT_DOUBLE_EQ(perf.bandwidth.shared, attr.bandwidth.shared);
    EXPECT_DOUBLE_EQ(perf.bandwidth.dedicated, attr.bandwidth.dedicated);
    EXPECT_EQ(perf.max_inflight_eps, SIZE_MAX);
    /* not asked for: untouched */
    uint64_t untouched;
    memset(&untouched, 0xff, sizeof(untouched));
    EXPECT_EQ(memcmp(&perf.send_post_overhead, &untouched, sizeof(double)), 0);
    uct_iface_close(iface);
}

/* Per operation, tm_sm's estimates say what its operations cost relative to
 * each other, which is what UCP's v2 engine compares: a zero-copy send is a
 * copy too (costlier than a short one), a CMA get a system call, and tm_sm's
 * own rendezvous costs more to start than an eager send but copies on two
 * cores (faster per byte than a get). */
TEST(UcxAbi, EstimatePerfPerOperation) {
    UctEnv             env;
    uct_iface_params_t params = {};
    uct_iface_h        iface;
    ASSERT_EQ(env.open_iface("tm_sm", params, &iface), UCS_OK);
    auto estimate = [&](int op) {
        PerfAttr perf = {};
        perf.field_mask = kFieldOperation | kFieldSendPreOverhead | kFieldBandwidth | kFieldLatency;
        perf.operation  = op;
        EXPECT_EQ(uct_iface_estimate_perf(iface, &perf), UCS_OK);
        return perf;
    };
    enum { kGetZcopy = 8, kEagerShort = 9, kEagerBcopy = 10, kEagerZcopy = 11, kRndvZcopy = 12 };
    const PerfAttr eager_short = estimate(kEagerShort);
    EXPECT_GT(eager_short.bandwidth.dedicated, 0);
    EXPECT_DOUBLE_EQ(estimate(kEagerBcopy).send_pre_overhead, eager_short.send_pre_overhead);
    EXPECT_GT(estimate(kEagerZcopy).send_pre_overhead, eager_short.send_pre_overhead);
    const PerfAttr get = estimate(kGetZcopy), rndv = estimate(kRndvZcopy);
    EXPECT_GT(get.send_pre_overhead, eager_short.send_pre_overhead);
    EXPECT_GT(rndv.send_pre_overhead, estimate(kEagerZcopy).send_pre_overhead);
    EXPECT_LT(get.bandwidth.dedicated, rndv.bandwidth.dedicated);
    uct_iface_close(iface);
}

/* An iface and its addresses, through libuct. */
struct Addressed {
    uct_iface_h       iface = nullptr;
    std::vector<char> dev, addr;
    Addressed(UctEnv &env) {
        uct_iface_params_t params = {};
        EXPECT_EQ(env.open_iface("tm_sm", params, &iface), UCS_OK);
        uct_iface_attr_t attr;
        EXPECT_EQ(uct_iface_query(iface, &attr), UCS_OK);
        dev.resize(attr.device_addr_len);
        addr.resize(attr.iface_addr_len);
        EXPECT_EQ(uct_iface_get_device_address(iface, reinterpret_cast<uct_device_addr_t *>(dev.data())),
                  UCS_OK);
        EXPECT_EQ(uct_iface_get_address(iface, reinterpret_cast<uct_iface_addr_t *>(addr.data())),
                  UCS_OK);
    }
    ~Addressed() { uct_iface_close(iface); }
    const uct_device_addr_t *device() const {
        return reinterpret_cast<const uct_device_addr_t *>(dev.data());
    }
    const uct_iface_addr_t *address() const {
        return reinterpret_cast<const uct_iface_addr_t *>(addr.data());
    }
};

/* UCP asks reachability through the v2 call (1.15 on), with a scope: a peer
 * on this host is reachable for the network and for "same device"; an
 * address of another host is not, and says why in the info string. */
TEST(UcxAbi, ReachabilityV2ThroughLibuct) {
#if UCX_RELEASE < 115
    GTEST_SKIP() << "UCX " << UCT_VERNO_STRING << " has no uct_iface_is_reachable_v2";
#else
    UctEnv    env;
    Addressed a(env), b(env);
    char      info[128];
    auto      reachable = [&](const uct_device_addr_t *dev, int scope) {
        ReachableParams p = {};
        p.field_mask      = 0x1f; /* device, iface, info string and its length, scope */
        p.device_addr     = dev;
        p.iface_addr      = b.address();
        p.info_string     = info;
        p.info_string_length = sizeof(info);
        p.scope           = scope;
        info[0]           = 'x';
        return uct_iface_is_reachable_v2(a.iface, &p);
    };
    EXPECT_TRUE(reachable(b.device(), 1));
    EXPECT_TRUE(reachable(b.device(), 0));
    std::vector<char> other_host = b.dev;
    other_host[0] ^= 0x5a; /* another host's identity */
    EXPECT_FALSE(reachable(reinterpret_cast<const uct_device_addr_t *>(other_host.data()), 1));
    EXPECT_NE(std::string(info), "") << "no reason given";
    EXPECT_NE(std::string(info), "x") << "no reason given";
#endif
}

/* UCP 1.16+ asks whether an endpoint already reaches a peer before making
 * another: true for the iface it was created to, false for another. */
TEST(UcxAbi, EpIsConnectedThroughLibuct) {
#if UCX_RELEASE < 116
    GTEST_SKIP() << "UCX " << UCT_VERNO_STRING << " has no uct_ep_is_connected";
#else
    UctEnv          env;
    Addressed       a(env), b(env), c(env);
    uct_ep_params_t ep_params = {};
    ep_params.field_mask = UCT_EP_PARAM_FIELD_IFACE | UCT_EP_PARAM_FIELD_IFACE_ADDR |
                           UCT_EP_PARAM_FIELD_DEV_ADDR;
    ep_params.iface      = a.iface;
    ep_params.iface_addr = b.address();
    ep_params.dev_addr   = b.device();
    uct_ep_h ep;
    ASSERT_EQ(uct_ep_create(&ep_params, &ep), UCS_OK);
    IsConnectedParams p = {};
    p.field_mask  = 0x3; /* device and iface address */
    p.device_addr = b.device();
    p.iface_addr  = b.address();
    EXPECT_TRUE(uct_ep_is_connected(ep, &p));
    p.iface_addr = c.address();
    EXPECT_FALSE(uct_ep_is_connected(ep, &p));
    uct_ep_destroy(ep);
#endif
}

}  // namespace
}  // namespace uct_tm_test
