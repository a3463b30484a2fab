/*
 * Faults injected inside a transport (test-only settings of tm_rc), with
 * software matching and with the device model alike:
 *  - FAIL_READ=1: the first rendezvous READ fails without reaching the wire,
 *    as a remote access error would;
 *  - CORRUPT_RKEY=1: the sender's first rendezvous advertises a corrupted
 *    rkey, so the device itself rejects the READ (both QPs go to error).
 * As on rc_mlx5, either fails the connection: the receive completes once
 * with an error, both endpoints report the error to their iface's handler,
 * the sender's operation completes once with an error (no hang waiting for
 * a FIN) and later operations on either side fail.
 *
 * A peer that goes away (its endpoint and iface destroyed, so its QP is gone)
 * while the sender only waits for a FIN: the keepalive probe
 * (KEEPALIVE_INTERVAL) runs out of transport retries (short TIMEOUT and
 * RETRY_COUNT here) and the sender's operation completes once with an error;
 * uct_ep_check probes on demand the same way.
 */
#include "tag_fixture.h"

#include <algorithm>
#include <chrono>
#include <cstring>
#include <memory>

namespace uct_tm_test {
namespace {

constexpr size_t    kRndvLength = 100000;
constexpr uct_tag_t kTag        = 0x5eed;

}  // namespace

class TagFaultTest : public TagTest {
  protected:
    /* A rendezvous of kRndvLength bytes into a posted receive of `capacity`
     * bytes whose READ fails, by the fault `setting`=1 on both ifaces. */
    void expect_failed_rndv_fails_connection(const char *setting, size_t capacity) {
        if (lacks(Path::kRndv)) {
            GTEST_SKIP() << "no rendezvous";
        }
        reopen({{setting, "1"}}, {{setting, "1"}});
        if (IsSkipped() || HasFatalFailure()) {
            return;
        }
        RecvCtx     r;
        RecvBuffers b(capacity);
        ASSERT_EQ(post(r, kTag, UINT64_MAX, b), UCS_OK);
        Send s(Path::kRndv, kTag, 0, 7, kRndvLength);
        ASSERT_EQ(send(s), UCS_OK);
        ASSERT_TRUE(wait([&] { return (r.status != UCS_INPROGRESS) && (s.comp->calls > 0); }))
            << "receive status " << ucs_status_string(r.status) << ", sender completions "
            << s.comp->calls;
        drain();
        EXPECT_EQ(std::count(r.events.begin(), r.events.end(), RecvCtx::kCompleted), 1);
        EXPECT_EQ(r.status, UCS_ERR_IO_ERROR);
        EXPECT_EQ(s.comp->calls, 1);
        EXPECT_EQ(s.comp->status, UCS_ERR_IO_ERROR);
        ASSERT_TRUE(wait([&] { return tx_->errors.count(ep_) > 0; }));
        /* Endpoint to endpoint (tm_rc), the receiver's endpoint is the other
         * end of the sender's connection: failed too. Connected on demand
         * (tm_dc), the receiver's end of it is the iface's own (passive) and
         * fails silently; no endpoint of the receiver's user is touched. */
        const bool pairwise = rx_ep_ != nullptr;
        EXPECT_EQ(rx_->errors.entries.size(), pairwise ? 1u : 0u);
        EXPECT_EQ(tx_->errors.count(ep_), 1);
        EXPECT_NE(uct_ep_tag_eager_short(ep_, kTag, "x", 1), UCS_OK);
        if (pairwise) {
            EXPECT_NE(uct_ep_tag_eager_short(rx_ep_, kTag, "x", 1), UCS_OK);
        }
        Send again(Path::kRndv, kTag, 0, 8, kRndvLength);
        EXPECT_NE(again.post(ep_), UCS_OK);
        drain();
        EXPECT_EQ(s.comp->calls, 1);
        EXPECT_EQ(rx_->errors.entries.size(), pairwise ? 1u : 0u);
        EXPECT_EQ(tx_->errors.count(ep_), 1);
    }
};

/* Short transport retries and keepalive, on both sides: a dead peer is
 * noticed within about a second. */
const Settings kQuickDeath = {{"TIMEOUT", "12"}, {"RETRY_COUNT", "1"},
                              {"KEEPALIVE_INTERVAL", "200ms"}};
/* Bound on noticing it: keepalive interval, a 100 ms check, and the retries
 * of rxe under QEMU's software emulation, with room. */
constexpr double kDeathSeconds = 20;

class PeerDeathTest : public TagTest {
  protected:
    void SetUp() override {
        TagTest::SetUp();
        if (IsSkipped() || HasFatalFailure()) {
            return;
        }
        reopen(kQuickDeath, kQuickDeath); /* skipped where there are no such settings */
    }
    /* The receiver's endpoint and iface go, and with them its QP. */
    void kill_receiver() {
        if (rx_ep_ != nullptr) { /* CONNECT_TO_EP: the other end of ep_ */
            uct_ep_destroy(rx_ep_);
            rx_ep_ = nullptr;
        }
        rx_.reset();
    }
};

/* The receiver had the rendezvous (unexpected) and then went away. */
TEST_P(PeerDeathTest, RendezvousSendWaitingForFinFailsWhenThePeerDies) {
    if (lacks(Path::kRndv)) {
        GTEST_SKIP() << "no rendezvous";
    }
    Send s(Path::kRndv, kTag, 0, 9, kRndvLength);
    ASSERT_EQ(send(s), UCS_OK);
    ASSERT_TRUE(wait([&] { return !rx_->unexp.rndvs.empty(); }));
    drain(100);
    ASSERT_EQ(s.comp->calls, 0) << "completed with no FIN";
    kill_receiver();
    ASSERT_TRUE(wait([&] { return s.comp->calls > 0; }, kDeathSeconds))
        << "the rendezvous send still waits for a FIN from a dead peer";
    drain();
    EXPECT_EQ(s.comp->calls, 1);
    EXPECT_EQ(s.comp->status, UCS_ERR_ENDPOINT_TIMEOUT);
    ASSERT_EQ(tx_->errors.count(ep_), 1);
    EXPECT_EQ(tx_->errors.entries.back().status, UCS_ERR_ENDPOINT_TIMEOUT);
    EXPECT_NE(uct_ep_tag_eager_short(ep_, kTag, "x", 1), UCS_OK);
}

TEST_P(PeerDeathTest, EpCheckOfALivePeerReportsNothing) {
    if (!(tx_->attr.cap.flags & UCT_IFACE_FLAG_EP_CHECK)) {
        GTEST_SKIP() << "no UCT_IFACE_FLAG_EP_CHECK";
    }
    uct_completion_t comp = {};
    EXPECT_EQ(uct_ep_check(ep_, 1, nullptr), UCS_ERR_INVALID_PARAM);
    EXPECT_EQ(uct_ep_check(ep_, 0, &comp), UCS_ERR_INVALID_PARAM);
    for (int i = 0; i < 3; ++i) {
        EXPECT_EQ(uct_ep_check(ep_, 0, nullptr), UCS_OK);
        drain();
    }
    /* Flushed: every probe is back from the peer. */
    ASSERT_TRUE(wait([&] { return uct_ep_flush(ep_, 0, nullptr) == UCS_OK; }));
    EXPECT_EQ(tx_->errors.count(ep_), 0);
    EXPECT_EQ(uct_ep_tag_eager_short(ep_, kTag, "x", 1), UCS_OK);
    drain();
    EXPECT_EQ(rx_->unexp.complete_messages(), 1u);
}

TEST_P(PeerDeathTest, EpCheckOfADeadPeerRunsTheErrorHandler) {
    if (!(tx_->attr.cap.flags & UCT_IFACE_FLAG_EP_CHECK)) {
        GTEST_SKIP() << "no UCT_IFACE_FLAG_EP_CHECK";
    }
    kill_receiver();
    EXPECT_EQ(uct_ep_check(ep_, 0, nullptr), UCS_OK);
    ASSERT_TRUE(wait([&] { return tx_->errors.count(ep_) > 0; }, kDeathSeconds))
        << "ep_check of a dead peer reported nothing";
    drain();
    ASSERT_EQ(tx_->errors.count(ep_), 1);
    EXPECT_EQ(tx_->errors.entries.back().status, UCS_ERR_ENDPOINT_TIMEOUT);
    EXPECT_EQ(uct_ep_check(ep_, 0, nullptr), UCS_OK); /* reported already: not again */
    drain();
    EXPECT_EQ(tx_->errors.count(ep_), 1);
}

/* A READ of the whole message (with the model: the engine's own READ). */
TEST_P(TagFaultTest, FailedReadFailsTheConnection) {
    expect_failed_rndv_fails_connection("FAIL_READ", kRndvLength);
}

/* A smaller receive (with the model: RNDV_INCOMPLETE, software reads what fits). */
TEST_P(TagFaultTest, FailedTruncatedReadFailsTheConnection) {
    expect_failed_rndv_fails_connection("FAIL_READ", kRndvLength / 2);
}

/* The device rejects the READ: the sender learns it from its QP's state. */
TEST_P(TagFaultTest, ReadRejectedByTheDeviceFailsTheConnection) {
    expect_failed_rndv_fails_connection("CORRUPT_RKEY", kRndvLength);
}

TEST_P(TagFaultTest, TruncatedReadRejectedByTheDeviceFailsTheConnection) {
    expect_failed_rndv_fails_connection("CORRUPT_RKEY", kRndvLength / 2);
}

/* Transports that connect on demand (tm_dc): an endpoint to an iface that
 * never answers its connection request -- the address of a real iface with
 * the number of its connection queue pair changed to one nobody owns -- fails
 * through the error handler with UCS_ERR_ENDPOINT_TIMEOUT after CONN_TIMEOUT;
 * until then a send waits (NO_RESOURCE), afterwards it fails. */
class ConnectTimeoutTest : public TagTest {
  protected:
    void SetUp() override {
        TagTest::SetUp();
        if (IsSkipped() || HasFatalFailure()) {
            return;
        }
        const Settings quick = {{"CONN_TIMEOUT", "500ms"}};
        reopen(quick, quick); /* skipped where there is no such setting */
    }
};

TEST_P(ConnectTimeoutTest, UnansweredRequestFailsTheEndpoint) {
    std::string    addr = rx_->address();
    const uint32_t nobody = 0xfffff0; /* a 24-bit QP number no QP of the guest has */
    ASSERT_GE(addr.size(), rx_->attr.device_addr_len + sizeof(nobody));
    memcpy(&addr[rx_->attr.device_addr_len], &nobody, sizeof(nobody));
    uct_ep_h ep = nullptr;
    ASSERT_EQ(tx_->connect(addr, &ep), UCS_OK);
    EXPECT_EQ(uct_ep_tag_eager_short(ep, kTag, "x", 1), UCS_ERR_NO_RESOURCE);
    ASSERT_TRUE(wait([&] { return tx_->errors.count(ep) > 0; }, 20))
        << "an endpoint nobody answers did not fail";
    drain();
    EXPECT_EQ(tx_->errors.count(ep), 1);
    EXPECT_EQ(tx_->errors.entries.back().status, UCS_ERR_ENDPOINT_TIMEOUT);
    EXPECT_NE(uct_ep_tag_eager_short(ep, kTag, "x", 1), UCS_OK);
    EXPECT_NE(uct_ep_tag_eager_short(ep, kTag, "x", 1), UCS_ERR_NO_RESOURCE);
    uct_ep_destroy(ep);
}

/* uct_ep_check of an on-demand endpoint that never connected (or whose
 * connection was evicted): no queue pair to probe, so the target iface is
 * asked over the connection channel. A live one answers (no error, however
 * long); once it has closed, the endpoint fails with ENDPOINT_TIMEOUT. */
TEST_P(ConnectTimeoutTest, CheckWithoutAConnectionFindsAClosedIface) {
    std::unique_ptr<Node> peer(new Node(*env_, GetParam()));
    ASSERT_EQ(peer->status, UCS_OK);
    uct_ep_h ep = nullptr;
    ASSERT_EQ(tx_->connect(peer->address(), &ep), UCS_OK);
    for (int i = 0; i < 3; ++i) { /* three CONN_TIMEOUTs of checks answered */
        EXPECT_EQ(uct_ep_check(ep, 0, nullptr), UCS_OK);
        const auto until = std::chrono::steady_clock::now() + std::chrono::milliseconds(600);
        wait([&] { return std::chrono::steady_clock::now() > until; });
    }
    EXPECT_EQ(tx_->errors.count(ep), 0) << "a live iface was reported dead";
    peer.reset();
    EXPECT_EQ(uct_ep_check(ep, 0, nullptr), UCS_OK);
    ASSERT_TRUE(wait([&] { return tx_->errors.count(ep) > 0; }, 20))
            << "the check of an endpoint to a closed iface reported nothing";
    drain();
    EXPECT_EQ(tx_->errors.count(ep), 1);
    EXPECT_EQ(tx_->errors.entries.back().status, UCS_ERR_ENDPOINT_TIMEOUT);
    uct_ep_destroy(ep);
}

INSTANTIATE_TEST_SUITE_P(tm, TagFaultTest, ::testing::ValuesIn(tag_transports()),
                         transport_param_name);
GTEST_ALLOW_UNINSTANTIATED_PARAMETERIZED_TEST(TagFaultTest);
INSTANTIATE_TEST_SUITE_P(tm, PeerDeathTest, ::testing::ValuesIn(tag_transports()),
                         transport_param_name);
GTEST_ALLOW_UNINSTANTIATED_PARAMETERIZED_TEST(PeerDeathTest);
INSTANTIATE_TEST_SUITE_P(tm, ConnectTimeoutTest, ::testing::ValuesIn(tag_transports()),
                         transport_param_name);
GTEST_ALLOW_UNINSTANTIATED_PARAMETERIZED_TEST(ConnectTimeoutTest);

}  // namespace uct_tm_test
