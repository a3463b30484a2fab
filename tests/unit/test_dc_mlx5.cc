/*
 * tm_dc's mlx5 DC provider without DC hardware (uct_tm/ib/dc_mlx5.h): the
 * iface address both providers share the size and provider byte of, every
 * field of a hostile peer address, and one DCI's operations through an error
 * and its recovery -- each settled exactly once.
 */
#include "ib/dc_mlx5.h"

#include <gtest/gtest.h>

#include <cstring>
#include <utility>
#include <vector>

namespace uct_tm {
namespace ib {
namespace {

DeviceAddress ib_dev(uint16_t lid) {
    DeviceAddress d = {};
    d.roce          = 0;
    d.mtu           = IBV_MTU_4096;
    d.lid           = lid;
    return d;
}

DeviceAddress roce_dev() {
    DeviceAddress d = {};
    d.roce          = 1;
    d.mtu           = IBV_MTU_1024;
    d.gid[10]       = 0xff;
    d.gid[11]       = 0xff;
    d.gid[15]       = 7;
    return d;
}

DcAddressCheck check(const DeviceAddress &d, const Mlx5IfaceAddress &a, bool roce = false) {
    return check_mlx5_peer_address(&d, &a, roce);
}

TEST(DcMlx5Address, PackedFieldsAndProviderByte) {
    const Mlx5IfaceAddress a = pack_mlx5_iface_address(0x123456, 0x1122334455667788ull);
    uint8_t bytes[sizeof(a)];
    memcpy(bytes, &a, sizeof(a));
    /* Where the on-demand provider looks for its byte. */
    EXPECT_EQ(bytes[offsetof(IfaceAddress, provider)], static_cast<uint8_t>(DcProvider::kMlx5));
    EXPECT_EQ(a.dct_num, 0x123456u);
    EXPECT_EQ(a.version, kMlx5AddressVersion);
    EXPECT_EQ(a.reserved, 0u);
    EXPECT_EQ(a.dc_key, 0x1122334455667788ull);
    EXPECT_EQ(check(ib_dev(5), a).status, UCS_OK);
    EXPECT_EQ(check(roce_dev(), a, true).status, UCS_OK);
}

TEST(DcMlx5Address, OnDemandAddressIsRefusedAsUnreachable) {
    IfaceAddress od = {};
    od.ud_qpn       = 0x42;
    od.provider     = static_cast<uint8_t>(DcProvider::kOnDemand);
    od.uid          = 99;
    const DeviceAddress d = ib_dev(5);
    EXPECT_EQ(check_mlx5_peer_address(&d, &od, false).status, UCS_ERR_UNREACHABLE);
}

TEST(DcMlx5Address, EveryIfaceFieldIsChecked) {
    const Mlx5IfaceAddress good = pack_mlx5_iface_address(77, 5);
    const DeviceAddress    d    = ib_dev(5);
    std::vector<std::pair<Mlx5IfaceAddress, ucs_status_t>> bad;
    Mlx5IfaceAddress a;
    a = good; a.provider = 2;          bad.emplace_back(a, UCS_ERR_UNREACHABLE);
    a = good; a.provider = 0xff;       bad.emplace_back(a, UCS_ERR_UNREACHABLE);
    a = good; a.version = 0;           bad.emplace_back(a, UCS_ERR_UNREACHABLE);
    a = good; a.version = 2;           bad.emplace_back(a, UCS_ERR_UNREACHABLE);
    a = good; a.reserved = 1;          bad.emplace_back(a, UCS_ERR_INVALID_PARAM);
    a = good; a.reserved = 0x8000;     bad.emplace_back(a, UCS_ERR_INVALID_PARAM);
    a = good; a.dct_num = 0;           bad.emplace_back(a, UCS_ERR_INVALID_PARAM);
    a = good; a.dct_num = 1u << 24;    bad.emplace_back(a, UCS_ERR_INVALID_PARAM);
    a = good; a.dct_num = 0xffffffffu; bad.emplace_back(a, UCS_ERR_INVALID_PARAM);
    a = good; a.dc_key = 0;            bad.emplace_back(a, UCS_ERR_INVALID_PARAM);
    for (const auto &b : bad) {
        const DcAddressCheck c = check(d, b.first);
        EXPECT_EQ(c.status, b.second) << c.reason;
        EXPECT_STRNE(c.reason, "");
    }
    a = good; a.dct_num = (1u << 24) - 1;
    EXPECT_EQ(check(d, a).status, UCS_OK);
}

TEST(DcMlx5Address, EveryDeviceFieldIsChecked) {
    const Mlx5IfaceAddress a = pack_mlx5_iface_address(77, 5);
    DeviceAddress          d;
    d = ib_dev(5); d.roce = 2;                EXPECT_EQ(check(d, a).status, UCS_ERR_INVALID_PARAM);
    d = ib_dev(5); d.mtu = 0;                 EXPECT_EQ(check(d, a).status, UCS_ERR_INVALID_PARAM);
    d = ib_dev(5); d.mtu = IBV_MTU_4096 + 1;  EXPECT_EQ(check(d, a).status, UCS_ERR_INVALID_PARAM);
    d = ib_dev(0);                            EXPECT_EQ(check(d, a).status, UCS_ERR_INVALID_PARAM);
    d = ib_dev(0xc000);                       EXPECT_EQ(check(d, a).status, UCS_ERR_INVALID_PARAM);
    d = ib_dev(0xffff);                       EXPECT_EQ(check(d, a).status, UCS_ERR_INVALID_PARAM);
    d = ib_dev(0xbfff);                       EXPECT_EQ(check(d, a).status, UCS_OK);
    /* Link layers do not mix. */
    EXPECT_EQ(check(ib_dev(5), a, true).status, UCS_ERR_UNREACHABLE);
    EXPECT_EQ(check(roce_dev(), a, false).status, UCS_ERR_UNREACHABLE);
    d = roce_dev(); memset(d.gid, 0, sizeof(d.gid));
    EXPECT_EQ(check(d, a, true).status, UCS_ERR_INVALID_PARAM);
    d = roce_dev(); d.lid = 0; /* a LID means nothing on RoCE */
    EXPECT_EQ(check(d, a, true).status, UCS_OK);
    EXPECT_EQ(check_mlx5_peer_address(nullptr, &a, false).status, UCS_ERR_INVALID_PARAM);
    EXPECT_EQ(check_mlx5_peer_address(&d, nullptr, true).status, UCS_ERR_INVALID_PARAM);
}

/* Unaligned peer bytes are read, not dereferenced in place. */
TEST(DcMlx5Address, UnalignedBuffers) {
    alignas(8) uint8_t buf[1 + sizeof(DeviceAddress) + 1 + sizeof(Mlx5IfaceAddress)];
    const DeviceAddress    d = ib_dev(9);
    const Mlx5IfaceAddress a = pack_mlx5_iface_address(3, 4);
    memcpy(buf + 1, &d, sizeof(d));
    memcpy(buf + 2 + sizeof(d), &a, sizeof(a));
    EXPECT_EQ(check_mlx5_peer_address(buf + 1, buf + 2 + sizeof(d), false).status, UCS_OK);
}

using Settled = std::vector<std::pair<int, ucs_status_t>>;
using Ops     = DciOps<int>;

struct Recorder {
    Settled *out;
    void     operator()(int op, ucs_status_t s) const { out->emplace_back(op, s); }
};

TEST(DcMlx5DciOps, SignaledCompletionSettlesTheUnsignaledBeforeIt) {
    Ops     ops(8);
    Settled s;
    for (int i = 1; i <= 4; ++i) {
        ASSERT_TRUE(ops.post(100 + i, i));
    }
    EXPECT_EQ(ops.complete(103, true, Recorder{&s}), 3u);
    EXPECT_EQ(s, (Settled{{1, UCS_OK}, {2, UCS_OK}, {3, UCS_OK}}));
    EXPECT_EQ(ops.outstanding(), 1u);
    EXPECT_EQ(ops.state(), Ops::State::kReady);
    EXPECT_EQ(ops.complete(103, true, Recorder{&s}), 0u); /* a duplicate settles nothing */
    EXPECT_EQ(ops.complete(104, true, Recorder{&s}), 1u);
    EXPECT_EQ(ops.outstanding(), 0u);
    EXPECT_FALSE(ops.recovered()); /* nothing to recover from */
}

TEST(DcMlx5DciOps, FullQueueRefusesPosts) {
    Ops ops(2);
    EXPECT_TRUE(ops.post(1, 1));
    EXPECT_TRUE(ops.post(2, 2));
    EXPECT_TRUE(ops.full());
    EXPECT_FALSE(ops.post(3, 3));
    EXPECT_EQ(ops.outstanding(), 2u);
}

TEST(DcMlx5DciOps, ErrorFailsEveryOutstandingOpExactlyOnceThenRecovers) {
    Ops     ops(4);
    Settled s;
    for (int round = 0; round < 3; ++round) { /* the ring wraps across recoveries */
        s.clear();
        for (int i = 1; i <= 4; ++i) {
            ASSERT_TRUE(ops.post(10 * round + i, i));
        }
        /* op 1 unsignaled, op 2 fails: 1 succeeded, 2 failed. */
        EXPECT_EQ(ops.complete(10 * round + 2, false, Recorder{&s}), 2u);
        EXPECT_EQ(ops.state(), Ops::State::kError);
        EXPECT_FALSE(ops.post(99, 99)); /* no posts to a DCI in error */
        EXPECT_FALSE(ops.recovered());  /* not drained yet */
        /* The flushes: a successful-looking one still fails. */
        EXPECT_EQ(ops.complete(10 * round + 3, true, Recorder{&s}), 1u);
        EXPECT_EQ(ops.complete(10 * round + 4, false, Recorder{&s}), 1u);
        EXPECT_EQ(ops.complete(10 * round + 4, false, Recorder{&s}), 0u);
        EXPECT_EQ(s, (Settled{{1, UCS_OK}, {2, UCS_ERR_IO_ERROR}, {3, UCS_ERR_IO_ERROR},
                              {4, UCS_ERR_IO_ERROR}}));
        EXPECT_EQ(ops.state(), Ops::State::kDrained);
        EXPECT_FALSE(ops.post(99, 99));
        EXPECT_TRUE(ops.recovered());
        EXPECT_FALSE(ops.recovered()); /* once */
        EXPECT_EQ(ops.state(), Ops::State::kReady);
    }
}

TEST(DcMlx5DciOps, ResetWithoutFlushesFailsTheRestOnce) {
    Ops     ops(4);
    Settled s;
    ASSERT_TRUE(ops.post(1, 1));
    ASSERT_TRUE(ops.post(2, 2));
    ASSERT_TRUE(ops.post(3, 3));
    EXPECT_EQ(ops.complete(1, false, Recorder{&s}), 1u);
    EXPECT_EQ(ops.fail_outstanding(Recorder{&s}), 2u);
    EXPECT_EQ(ops.fail_outstanding(Recorder{&s}), 0u);
    /* Flushes that arrive after the reset settle nothing. */
    EXPECT_EQ(ops.complete(2, false, Recorder{&s}), 0u);
    EXPECT_EQ(ops.complete(3, false, Recorder{&s}), 0u);
    EXPECT_EQ(s, (Settled{{1, UCS_ERR_IO_ERROR}, {2, UCS_ERR_IO_ERROR}, {3, UCS_ERR_IO_ERROR}}));
    EXPECT_TRUE(ops.recovered());
    EXPECT_TRUE(ops.post(4, 4));
}

TEST(DcMlx5DciOps, ErrorOnTheLastOpDrainsAtOnce) {
    Ops     ops(4);
    Settled s;
    ASSERT_TRUE(ops.post(1, 1));
    EXPECT_EQ(ops.complete(1, false, Recorder{&s}), 1u);
    EXPECT_EQ(ops.state(), Ops::State::kDrained);
    EXPECT_EQ(s, (Settled{{1, UCS_ERR_IO_ERROR}}));
}

TEST(DcMlx5DciOps, DestroyingAReadyDciFailsItsOps) {
    Ops     ops(4);
    Settled s;
    EXPECT_EQ(ops.fail_outstanding(Recorder{&s}), 0u);
    EXPECT_EQ(ops.state(), Ops::State::kReady); /* idle: nothing to recover */
    ASSERT_TRUE(ops.post(1, 1));
    EXPECT_EQ(ops.fail_outstanding(Recorder{&s}), 1u);
    EXPECT_EQ(ops.state(), Ops::State::kDrained);
    EXPECT_EQ(s, (Settled{{1, UCS_ERR_IO_ERROR}}));
}

}  // namespace
}  // namespace ib
}  // namespace uct_tm
