/*
 * The driver (HwTagEngine) over the device model, each race of the TM
 * engine forced in a chosen order: UCT tag semantics must hold in all of
 * them (consumed, then exactly one completion; cancel outcomes; ordering).
 */
#include "tm_model_harness.h"

#include <gtest/gtest.h>

#include <algorithm>

namespace uct_tm {
namespace ib {
namespace {

using test::Harness;
using test::Recv;
using test::Unexpected;

TmModel::Config small_model() {
    TmModel::Config c;
    c.caps.max_num_tags = 8;
    c.caps.max_ops      = 64;
    c.mtu               = 256;
    c.sync_req_diff     = 4;
    return c;
}

HwTagEngineConfig small_engine() {
    HwTagEngineConfig c;
    c.list_size      = 8;
    c.rx_buffers     = 16;
    c.rx_buffer_size = 1024;
    return c;
}

class TmRaces : public ::testing::Test {
  protected:
    TmRaces() : h(small_model(), small_engine()) {}
    void TearDown() override {
        if (h.alive()) {
            EXPECT_EQ(expected_anomalies, h.engine().counters().anomalies);
            EXPECT_EQ(0u, h.model().violations());
        }
    }
    static bool data_is(const Recv *r, uint64_t seed, size_t n) {
        const auto p = Harness::pattern(seed, n);
        return std::equal(p.begin(), p.end(), r->buffer.begin());
    }
    Harness  h;
    uint64_t expected_anomalies = 0;
};

TEST_F(TmRaces, ExpectedEagerIsConsumedThenCompletedOnce) {
    Recv *r = h.make_recv(128);
    ASSERT_EQ(UCS_OK, h.post(r, 7));
    h.send_eager(1, 7, Harness::pattern(7, 100), (uint64_t{0x1234} << 32) | 0x99);
    ASSERT_TRUE(h.drain());
    EXPECT_EQ(1, r->consumed);
    EXPECT_EQ(1, r->completed);
    EXPECT_TRUE(r->consumed_first);
    EXPECT_EQ(UCS_OK, r->status);
    EXPECT_EQ(7u, r->stag);
    EXPECT_EQ(100u, r->length);
    EXPECT_EQ((uint64_t{0x1234} << 32) | 0x99, r->imm);
    EXPECT_TRUE(data_is(r, 7, 100));
    EXPECT_EQ(1u, h.engine().counters().hw_matches);
    EXPECT_EQ(0u, h.model().held_handles());
}

TEST_F(TmRaces, UnexpectedGoesToTheTransportThenSyncReenablesHardwareMatching) {
    h.send_eager(1, 3, Harness::pattern(3, 20));
    ASSERT_TRUE(h.drain());
    ASSERT_EQ(1u, h.unexpected.size());
    EXPECT_EQ(Unexpected::kEager, h.unexpected[0].kind);
    EXPECT_EQ(3u, h.unexpected[0].stag);
    EXPECT_EQ(Harness::pattern(3, 20), h.unexpected[0].data);
    EXPECT_EQ(1u, h.engine().counters().syncs); /* the count reached the engine */
    EXPECT_TRUE(h.model().in_sync());
    Recv *r = h.make_recv(64);
    ASSERT_EQ(UCS_OK, h.post(r, 3));
    h.send_eager(1, 3, Harness::pattern(4, 20));
    ASSERT_TRUE(h.drain());
    EXPECT_EQ(1, r->completed);
    EXPECT_EQ(1u, h.engine().counters().hw_matches);
}

TEST_F(TmRaces, MessageBeatingTheAddIsClaimedBySoftwareForThePostedReceive) {
    Recv *r = h.make_recv(64);
    ASSERT_EQ(UCS_OK, h.post(r, 5)); /* ADD posted, not executed */
    h.send_eager(2, 5, Harness::pattern(5, 30));
    ASSERT_TRUE(h.model().step_arrival()); /* the engine has no tag yet: unexpected */
    ASSERT_TRUE(h.model().step_command()); /* ADD executes, out of sync */
    h.progress();
    EXPECT_TRUE(h.unexpected.empty());
    EXPECT_EQ(1, r->consumed);
    EXPECT_EQ(1, r->completed);
    EXPECT_EQ(UCS_OK, r->status);
    EXPECT_TRUE(data_is(r, 5, 30));
    EXPECT_EQ(1u, h.engine().counters().sw_claims);
    ASSERT_TRUE(h.drain()); /* the DEL removes the claimed tag before the count re-enables matching */
    EXPECT_EQ(0u, h.model().listed());
    EXPECT_TRUE(h.model().in_sync());
    EXPECT_EQ(0u, h.model().held_handles());
    EXPECT_EQ(1, r->completed);
}

/* A receive that software claims for a message the list reported
 * unexpected, force-cancelled from its own tag_consumed_cb, is the user's
 * again when the cancel returns: neither the eager payload nor a software
 * rendezvous request's header reaches it, and no completion follows. */
TEST_F(TmRaces, ClaimedReceiveForceCancelledInConsumedIsNeverWrittenAfter) {
    for (bool request : {false, true}) {
        SCOPED_TRACE(request ? "software rendezvous request" : "eager");
        Recv *r = h.make_recv(64);
        const std::function<void(Recv &)> cancel_and_reuse = [&](Recv &self) {
            EXPECT_EQ(UCS_OK, h.cancel(&self, 1));
            std::fill(self.buffer.begin(), self.buffer.end(), uint8_t{0x3c});
        };
        r->on_consumed = &cancel_and_reuse;
        ASSERT_EQ(UCS_OK, h.post(r, 5)); /* ADD posted, not executed */
        if (request) {
            h.send_sw_rndv_request(2, 5, Harness::pattern(6, 24));
        } else {
            h.send_eager(2, 5, Harness::pattern(5, 30));
        }
        ASSERT_TRUE(h.model().step_arrival()); /* no tag in the engine yet: unexpected */
        ASSERT_TRUE(h.model().step_command());
        h.progress();
        ASSERT_TRUE(h.drain());
        EXPECT_EQ(1, r->consumed);
        EXPECT_EQ(0, r->completed);
        EXPECT_EQ(0, r->rndv);
        EXPECT_TRUE(std::all_of(r->buffer.begin(), r->buffer.end(),
                                [](uint8_t b) { return b == 0x3c; }))
            << "written into a receive after it was cancelled with force";
        EXPECT_TRUE(h.unexpected.empty());
        EXPECT_EQ(0u, h.model().held_handles());
    }
    EXPECT_EQ(2u, h.engine().counters().sw_claims);
}

TEST_F(TmRaces, OutOfSyncArrivalsKeepPostingOrderThroughSoftware) {
    h.send_eager(1, 9, Harness::pattern(9, 8)); /* unexpected, count not yet reported */
    ASSERT_TRUE(h.model().step_arrival());
    Recv *wild  = h.make_recv(64);
    Recv *exact = h.make_recv(64);
    ASSERT_EQ(UCS_OK, h.post(wild, 0x10, 0xf0));
    ASSERT_EQ(UCS_OK, h.post(exact, 0x11));
    h.model().step_command(); /* both ADDs execute while the counts disagree */
    h.model().step_command();
    h.send_eager(1, 0x11, Harness::pattern(1, 8));
    h.send_eager(1, 0x11, Harness::pattern(2, 8));
    ASSERT_TRUE(h.model().step_arrival()); /* unexpected in hardware: out of sync */
    ASSERT_TRUE(h.model().step_arrival());
    h.progress();
    EXPECT_EQ(1u, h.unexpected.size()); /* tag 9 */
    EXPECT_EQ(1, wild->completed);      /* earliest posted takes the first */
    EXPECT_TRUE(data_is(wild, 1, 8));
    EXPECT_EQ(1, exact->completed);
    EXPECT_TRUE(data_is(exact, 2, 8));
    EXPECT_EQ(2u, h.engine().counters().sw_claims);
    ASSERT_TRUE(h.drain());
    EXPECT_EQ(0u, h.model().listed());
    EXPECT_TRUE(h.model().in_sync());
}

TEST_F(TmRaces, CancelLosesToAConsumeThatHappenedFirst) {
    Recv *r = h.make_recv(64);
    ASSERT_EQ(UCS_OK, h.post(r, 5));
    h.model().step_command();
    h.progress();
    ASSERT_EQ(UCS_OK, h.cancel(r, 0)); /* DEL posted */
    h.send_eager(1, 5, Harness::pattern(5, 10));
    ASSERT_TRUE(h.model().step_arrival()); /* consumed before the DEL executes */
    ASSERT_TRUE(h.model().step_command()); /* DEL fails: TM_ERR */
    ASSERT_TRUE(h.drain());
    EXPECT_EQ(1, r->consumed);
    EXPECT_EQ(1, r->completed);
    EXPECT_EQ(UCS_OK, r->status);
    EXPECT_TRUE(data_is(r, 5, 10));
    EXPECT_EQ(1u, h.model().counters().del_failed);
    EXPECT_EQ(0u, h.model().held_handles());
}

TEST_F(TmRaces, CancelThatWinsCompletesWithCanceledAndTheMessageGoesUnexpected) {
    Recv *r = h.make_recv(64);
    ASSERT_EQ(UCS_OK, h.post(r, 5));
    ASSERT_EQ(UCS_OK, h.cancel(r, 0));
    EXPECT_EQ(0, r->completed); /* later, from progress */
    h.model().step_command();
    h.model().step_command(); /* ADD then DEL */
    h.send_eager(1, 5, Harness::pattern(5, 10));
    ASSERT_TRUE(h.drain());
    EXPECT_EQ(0, r->consumed);
    EXPECT_EQ(1, r->completed);
    EXPECT_EQ(UCS_ERR_CANCELED, r->status);
    EXPECT_EQ(1u, h.unexpected.size());
    EXPECT_EQ(UCS_ERR_NO_ELEM, h.cancel(r, 0));
}

TEST_F(TmRaces, ForceCancelNeverCallsBackAndFreesContextAndBuffer) {
    Recv *r = h.make_recv(64);
    ASSERT_EQ(UCS_OK, h.post(r, 5));
    ASSERT_EQ(UCS_OK, h.cancel(r, 1));
    ASSERT_EQ(UCS_OK, h.post(r, 6)); /* same context, same buffer, at once */
    ASSERT_TRUE(h.drain());
    h.send_eager(1, 6, Harness::pattern(6, 10));
    ASSERT_TRUE(h.drain());
    EXPECT_EQ(1, r->consumed);
    EXPECT_EQ(1, r->completed);
    EXPECT_EQ(6u, r->stag);
    EXPECT_EQ(0u, h.model().held_handles());
}

TEST_F(TmRaces, CancelBetweenMatchAndDataValidDoesNotCancel) {
    Recv *r = h.make_recv(1024);
    ASSERT_EQ(UCS_OK, h.post(r, 5));
    h.model().step_command();
    h.send_eager(1, 5, Harness::pattern(5, 600)); /* multi-packet */
    ASSERT_TRUE(h.model().step_arrival());
    h.progress();
    EXPECT_EQ(1, r->consumed);
    EXPECT_EQ(0, r->completed);
    ASSERT_EQ(UCS_OK, h.cancel(r, 0));
    ASSERT_TRUE(h.drain());
    EXPECT_EQ(1, r->completed);
    EXPECT_EQ(UCS_OK, r->status);
    EXPECT_EQ(600u, r->length);
    EXPECT_TRUE(data_is(r, 5, 600));
}

TEST_F(TmRaces, ForceCancelBetweenMatchAndDataValidSilencesTheCompletion) {
    Recv *r = h.make_recv(1024);
    ASSERT_EQ(UCS_OK, h.post(r, 5));
    h.model().step_command();
    h.send_eager(1, 5, Harness::pattern(5, 600));
    ASSERT_TRUE(h.model().step_arrival());
    h.progress();
    ASSERT_EQ(UCS_OK, h.cancel(r, 1));
    ASSERT_TRUE(h.drain());
    EXPECT_EQ(1, r->consumed);
    EXPECT_EQ(0, r->completed);
    EXPECT_EQ(0u, h.model().held_handles());
}

TEST(TmRacesDeferred, AddCompletionAfterTheMatchStillCompletesOnceAndHoldsTheSlot) {
    TmModel::Config mc = small_model();
    mc.defer_op_completions = true;
    HwTagEngineConfig ec = small_engine();
    ec.list_size         = 1;
    Harness h(mc, ec);
    Recv   *r = h.make_recv(64);
    Recv   *s = h.make_recv(64);
    ASSERT_EQ(UCS_OK, h.post(r, 5));
    h.model().step_command(); /* ADD executes; its completion is held back */
    h.send_eager(1, 5, Harness::pattern(5, 10));
    h.model().step_arrival();
    h.progress();
    EXPECT_EQ(1, r->completed);
    EXPECT_EQ(UCS_ERR_EXCEEDS_LIMIT, h.post(s, 5)); /* the ADD completion is still due */
    ASSERT_TRUE(h.model().step_op_completion());
    h.progress();
    EXPECT_EQ(UCS_OK, h.post(s, 5));
    ASSERT_TRUE(h.drain());
    EXPECT_EQ(1, r->completed);
    EXPECT_EQ(0u, h.engine().counters().anomalies);
}

TEST_F(TmRaces, SyncRequestWhileOpsAreInFlightEndsInSync) {
    std::vector<Recv *> rs;
    for (int i = 0; i < 6; ++i) {
        h.send_eager(1, 100 + i, Harness::pattern(i, 8)); /* all unexpected */
    }
    for (int i = 0; i < 6; ++i) {
        h.model().step_arrival();
    }
    for (int i = 0; i < 4; ++i) {
        rs.push_back(h.make_recv(64));
        ASSERT_EQ(UCS_OK, h.post(rs.back(), 200 + i)); /* ADDs in flight, stale count */
    }
    h.model().step_command();
    h.progress(); /* SYNC_REQ on the unexpected beyond the gap and on the ADD */
    EXPECT_GT(h.engine().counters().sync_requests, 0u);
    ASSERT_TRUE(h.drain());
    EXPECT_TRUE(h.model().in_sync());
    EXPECT_EQ(6u, h.unexpected.size());
    for (int i = 0; i < 4; ++i) {
        h.send_eager(2, 200 + i, Harness::pattern(50 + i, 8));
    }
    ASSERT_TRUE(h.drain());
    for (int i = 0; i < 4; ++i) {
        EXPECT_EQ(1, rs[i]->completed);
        EXPECT_TRUE(data_is(rs[i], 50 + i, 8));
    }
    EXPECT_EQ(4u, h.engine().counters().hw_matches);
}

TEST_F(TmRaces, HardwareRendezvousCompletesAndTheEngineSendsFin) {
    Recv *r = h.make_recv(4096);
    ASSERT_EQ(UCS_OK, h.post(r, 5));
    h.send_rndv(3, 5, 0x77, Harness::pattern(11, 3000));
    ASSERT_TRUE(h.drain());
    EXPECT_EQ(1, r->consumed);
    EXPECT_EQ(1, r->completed);
    EXPECT_EQ(3000u, r->length);
    EXPECT_EQ(0u, r->imm);
    EXPECT_TRUE(data_is(r, 11, 3000));
    ASSERT_EQ(1u, h.hw_fins.size());
    EXPECT_EQ(std::make_pair(3u, 0x77u), h.hw_fins[0]);
    EXPECT_TRUE(h.sw_fins.empty());
}

TEST_F(TmRaces, HardwareRendezvousReadFailureCompletesWithAnErrorOnce) {
    Recv *r = h.make_recv(4096);
    ASSERT_EQ(UCS_OK, h.post(r, 5));
    h.model().fail_next_read(); /* fault: remote access error on the RDMA READ */
    h.send_rndv(3, 5, 0x70, Harness::pattern(10, 3000));
    ASSERT_TRUE(h.drain());
    EXPECT_EQ(1, r->consumed);
    EXPECT_EQ(1, r->completed);
    EXPECT_EQ(UCS_ERR_IO_ERROR, r->status);
    EXPECT_TRUE(h.hw_fins.empty()); /* the engine sends FIN only after a good read */
    /* ... and hands the sender's address to the transport, which fails the
     * connection so that the sender does not wait for that FIN forever. */
    ASSERT_EQ(1u, h.failed_rndvs.size());
    EXPECT_EQ(std::make_pair(3u, 0x70u), h.failed_rndvs[0]);
    EXPECT_EQ(0u, h.model().held_handles());
}

TEST_F(TmRaces, SoftwareRendezvousFailureCompletesWithItsStatus) {
    Recv *r = h.make_recv(100);
    ASSERT_EQ(UCS_OK, h.post(r, 5));
    h.send_rndv(3, 5, 0x71, Harness::pattern(10, 3000));
    h.model().run_until_idle();
    h.progress();
    ASSERT_TRUE(h.finish_sw_rndv(UCS_ERR_IO_ERROR));
    EXPECT_EQ(1, r->completed);
    EXPECT_EQ(UCS_ERR_IO_ERROR, r->status); /* not masked as truncation */
    ASSERT_TRUE(h.drain());
    EXPECT_EQ(1, r->completed);
}

TEST_F(TmRaces, RndvIncompleteIsFinishedInSoftwareAndTruncated) {
    Recv *r = h.make_recv(1000);
    ASSERT_EQ(UCS_OK, h.post(r, 5));
    h.send_rndv(3, 5, 0x78, Harness::pattern(12, 3000));
    h.model().run_until_idle();
    h.progress();
    EXPECT_EQ(1, r->consumed);
    EXPECT_EQ(0, r->completed);
    ASSERT_EQ(1u, h.sw_rndv_running.size());
    EXPECT_EQ(1000u, h.sw_rndv_running[0].length);
    EXPECT_EQ(3000u, h.sw_rndv_running[0].remote_length);
    ASSERT_TRUE(h.drain());
    EXPECT_EQ(1, r->completed);
    EXPECT_EQ(UCS_ERR_MESSAGE_TRUNCATED, r->status);
    EXPECT_EQ(3000u, r->length);
    EXPECT_TRUE(data_is(r, 12, 1000));
    ASSERT_EQ(1u, h.sw_fins.size());
    EXPECT_EQ(std::make_pair(3u, 0x78u), h.sw_fins[0]);
    EXPECT_TRUE(h.hw_fins.empty());
    EXPECT_EQ(0u, h.model().held_handles());
}

TEST_F(TmRaces, RndvIntoABufferTooSmallForItsHeadersIsTruncatedAndStillFinned) {
    /* 16 bytes cannot hold TMH + RVH: the FIN goes from the completion's
     * src_qp and app_ctx, or the sender's operation never completes. */
    Recv *r = h.make_recv(16);
    ASSERT_EQ(UCS_OK, h.post(r, 5));
    h.send_rndv(3, 5, 0x7a, Harness::pattern(14, 3000));
    ASSERT_TRUE(h.drain());
    EXPECT_EQ(1, r->consumed);
    EXPECT_EQ(1, r->completed);
    EXPECT_EQ(UCS_ERR_MESSAGE_TRUNCATED, r->status);
    ASSERT_EQ(1u, h.sw_fins.size());
    EXPECT_EQ(std::make_pair(3u, 0x7au), h.sw_fins[0]);
    EXPECT_TRUE(h.hw_fins.empty());
    EXPECT_EQ(0u, h.model().held_handles());
}

TEST_F(TmRaces, ForceCancelDuringSoftwareRendezvousStopsWritesButStillSendsFin) {
    Recv *r = h.make_recv(1000);
    ASSERT_EQ(UCS_OK, h.post(r, 5));
    h.send_rndv(3, 5, 0x79, Harness::pattern(13, 3000));
    h.model().run_until_idle();
    h.progress();
    ASSERT_EQ(1u, h.sw_rndv_running.size());
    ASSERT_EQ(UCS_OK, h.cancel(r, 1));
    EXPECT_EQ(1u, h.orphaned.size());
    std::fill(r->buffer.begin(), r->buffer.end(), 0);
    ASSERT_TRUE(h.drain());
    EXPECT_EQ(0, r->completed);
    EXPECT_TRUE(std::all_of(r->buffer.begin(), r->buffer.end(), [](uint8_t b) { return b == 0; }));
    EXPECT_EQ(1u, h.sw_fins.size());
}

TEST_F(TmRaces, UnexpectedRendezvousClaimedBySoftwareReadsIntoTheReceive) {
    Recv *r = h.make_recv(4096);
    ASSERT_EQ(UCS_OK, h.post(r, 5));
    h.send_rndv(3, 5, 0x7a, Harness::pattern(14, 2000));
    ASSERT_TRUE(h.model().step_arrival()); /* before the ADD: unexpected */
    ASSERT_TRUE(h.drain());
    EXPECT_TRUE(h.unexpected.empty());
    EXPECT_EQ(1, r->completed);
    EXPECT_EQ(UCS_OK, r->status);
    EXPECT_EQ(2000u, r->length);
    EXPECT_TRUE(data_is(r, 14, 2000));
    EXPECT_EQ(1u, h.sw_fins.size());
}

TEST_F(TmRaces, UnexpectedRendezvousWithNothingPostedGoesToTheTransport) {
    const std::vector<uint8_t> hdr = {1, 2, 3, 4, 5};
    h.send_rndv(3, 5, 0x7b, Harness::pattern(15, 2000), hdr);
    ASSERT_TRUE(h.drain());
    ASSERT_EQ(1u, h.unexpected.size());
    EXPECT_EQ(Unexpected::kRndv, h.unexpected[0].kind);
    EXPECT_EQ(hdr, h.unexpected[0].data);
    EXPECT_EQ(2000u, h.unexpected[0].length);
    EXPECT_NE(0u, h.unexpected[0].remote_va);
}

TEST_F(TmRaces, ListFullRefusesWithExceedsLimitUntilAReceiveCompletes) {
    std::vector<Recv *> rs;
    for (uint32_t i = 0; i < h.engine().list_size(); ++i) {
        rs.push_back(h.make_recv(64));
        ASSERT_EQ(UCS_OK, h.post(rs.back(), i));
    }
    Recv *extra = h.make_recv(64);
    EXPECT_EQ(UCS_ERR_EXCEEDS_LIMIT, h.post(extra, 99));
    h.send_eager(1, 0, Harness::pattern(0, 8));
    ASSERT_TRUE(h.drain());
    EXPECT_EQ(1, rs[0]->completed);
    EXPECT_EQ(UCS_OK, h.post(extra, 99));
    EXPECT_EQ(1u, h.engine().counters().refused);
}

TEST_F(TmRaces, TheDeviceListIsTheLimitWhenSmallerThanTheConfiguredOne) {
    TmModel::Config mc   = small_model();
    mc.caps.max_num_tags = 2;
    Harness small(mc, small_engine());
    EXPECT_EQ(2u, small.engine().list_size());
    TmModel::Config few_ops = small_model();
    few_ops.caps.max_ops    = 7; /* ADD + DEL per receive and a SYNC: 3 receives */
    Harness ops(few_ops, small_engine());
    EXPECT_EQ(3u, ops.engine().list_size());
}

TEST_F(TmRaces, SameBufferTwiceIsAlreadyExists) {
    Recv *r = h.make_recv(64);
    Recv  other;
    other = *r;
    ASSERT_EQ(UCS_OK, h.post(r, 5));
    uct_iov_t iov{};
    iov.buffer = r->buffer.data();
    iov.length = 64;
    iov.count  = 1;
    EXPECT_EQ(UCS_ERR_ALREADY_EXISTS, h.engine().post(6, ~0ull, &iov, 1, &other.ctx));
}

TEST_F(TmRaces, BadInputIsRefused) {
    Recv     *r = h.make_recv(64);
    uct_iov_t iov[2]{};
    iov[0].buffer = r->buffer.data();
    iov[0].length = 32;
    iov[0].count  = 1;
    iov[1]        = iov[0];
    EXPECT_EQ(UCS_ERR_INVALID_PARAM, h.engine().post(1, ~0ull, iov, 2, &r->ctx));
    EXPECT_EQ(UCS_ERR_INVALID_PARAM, h.engine().post(1, ~0ull, iov, 1, nullptr));
    EXPECT_EQ(UCS_ERR_INVALID_PARAM, h.engine().post(1, ~0ull, nullptr, 1, &r->ctx));
    iov[0].buffer = nullptr;
    EXPECT_EQ(UCS_ERR_INVALID_PARAM, h.engine().post(1, ~0ull, iov, 1, &r->ctx));
    EXPECT_EQ(UCS_ERR_NO_ELEM, h.cancel(r, 0)); /* never posted */
    uct_tag_context_t stray{};
    memset(stray.priv, 0xff, sizeof(stray.priv));
    EXPECT_EQ(UCS_ERR_NO_ELEM, h.engine().cancel(&stray, 1));
    EXPECT_EQ(UCS_ERR_NO_ELEM, h.engine().cancel(nullptr, 0));
    h.engine().release_rx(r->buffer.data()); /* not an untagged buffer: logged, ignored */
    h.engine().sw_rndv_done(12345, UCS_OK);  /* unknown rendezvous: logged, ignored */
    expected_anomalies = 1; /* the unknown rendezvous (a stray buffer is only logged) */
}

TEST_F(TmRaces, SoftwareRendezvousRequestExpectedAndUnexpected) {
    Recv *r = h.make_recv(64);
    ASSERT_EQ(UCS_OK, h.post(r, 5));
    const std::vector<uint8_t> hdr = {9, 8, 7};
    h.send_sw_rndv_request(1, 5, hdr);
    h.send_sw_rndv_request(1, 6, hdr);
    ASSERT_TRUE(h.drain());
    EXPECT_EQ(1, r->consumed);
    EXPECT_EQ(1, r->rndv);
    EXPECT_EQ(0, r->completed);
    EXPECT_TRUE(r->consumed_first);
    EXPECT_EQ(hdr, r->header);
    ASSERT_EQ(1u, h.unexpected.size());
    EXPECT_EQ(Unexpected::kRndv, h.unexpected[0].kind);
    EXPECT_EQ(0u, h.unexpected[0].remote_va);
    EXPECT_EQ(0u, h.unexpected[0].length);
    EXPECT_EQ(hdr, h.unexpected[0].data);
}

TEST_F(TmRaces, MultiPacketEagerWithImmediateZeroIsEagerExpectedAndUnexpected) {
    /* Sent with immediate 0 (the convention for multi-packet eagers): not a
     * software rendezvous request either way. */
    Recv *r = h.make_recv(1024);
    ASSERT_EQ(UCS_OK, h.post(r, 5));
    h.send_eager(1, 5, Harness::pattern(5, 600), uint64_t{0x55} << 32);
    h.send_eager(1, 6, Harness::pattern(6, 600), uint64_t{0x66} << 32);
    ASSERT_TRUE(h.drain());
    EXPECT_EQ(1, r->completed);
    EXPECT_EQ(0, r->rndv);
    EXPECT_EQ(uint64_t{0x55} << 32, r->imm);
    EXPECT_TRUE(data_is(r, 5, 600));
    ASSERT_EQ(1u, h.unexpected.size());
    EXPECT_EQ(Unexpected::kEager, h.unexpected[0].kind);
    EXPECT_EQ(uint64_t{0x66} << 32, h.unexpected[0].imm);
}

TEST_F(TmRaces, NoTagAndFinReachTheTransportAndAreNotCounted) {
    h.send_no_tag(4, {1, 2, 3});
    const TmHeader fin = make_tmh(TmhOp::kFin, 5, 0x42);
    h.model().deliver(4, &fin, sizeof(fin));
    ASSERT_TRUE(h.drain());
    ASSERT_EQ(2u, h.unexpected.size());
    EXPECT_EQ(Unexpected::kNoTag, h.unexpected[0].kind);
    EXPECT_EQ((std::vector<uint8_t>{0, 1, 2, 3}), h.unexpected[0].data);
    EXPECT_EQ(Unexpected::kFin, h.unexpected[1].kind);
    EXPECT_EQ(0x42u, h.unexpected[1].app_ctx);
    EXPECT_EQ(0u, h.engine().unexpected_count());
    EXPECT_EQ(0u, h.engine().counters().syncs);
}

TEST_F(TmRaces, EagerLongerThanTheBufferIsTruncatedWithTheSendersLength) {
    Recv *r = h.make_recv(16);
    ASSERT_EQ(UCS_OK, h.post(r, 5));
    h.send_eager(1, 5, Harness::pattern(5, 100));
    ASSERT_TRUE(h.drain());
    EXPECT_EQ(1, r->completed);
    EXPECT_EQ(UCS_ERR_MESSAGE_TRUNCATED, r->status);
    EXPECT_EQ(100u, r->length);
    EXPECT_TRUE(data_is(r, 5, 16));
}

TEST_F(TmRaces, KeptUntaggedBufferIsReusedOnlyAfterRelease) {
    h.eager_return = UCS_INPROGRESS;
    for (int i = 0; i < 16; ++i) { /* every untagged buffer kept by the layer above */
        h.send_eager(1, 50, Harness::pattern(i, 8));
    }
    h.send_eager(1, 51, Harness::pattern(99, 8));
    ASSERT_TRUE(h.drain());
    EXPECT_EQ(16u, h.unexpected.size());
    EXPECT_EQ(1u, h.model().pending_arrivals()); /* waits (RNR) */
    h.eager_return = UCS_OK;
    h.engine().release_rx(h.kept_rx[3]);
    ASSERT_TRUE(h.drain());
    ASSERT_EQ(17u, h.unexpected.size());
    EXPECT_EQ(Harness::pattern(99, 8), h.unexpected[16].data);
}

TEST(TmRacesBudget, ProgressHandlesAtMostItsBudgetPerCall) {
    HwTagEngineConfig ec = small_engine();
    ec.poll_budget       = 3;
    Harness h(small_model(), ec);
    for (int i = 0; i < 10; ++i) {
        h.send_eager(1, 40 + i, Harness::pattern(i, 8));
    }
    h.model().run_until_idle();
    EXPECT_EQ(3u, h.progress());
    EXPECT_EQ(3u, h.unexpected.size());
    ASSERT_TRUE(h.drain());
    EXPECT_EQ(10u, h.unexpected.size());
}

TEST_F(TmRaces, TeardownWithEverythingInFlightCallsNothingBack) {
    std::vector<Recv *> rs;
    for (int i = 0; i < 4; ++i) {
        rs.push_back(h.make_recv(1024));
        ASSERT_EQ(UCS_OK, h.post(rs.back(), i));
    }
    h.model().step_command();
    h.model().step_command();
    h.send_eager(1, 0, Harness::pattern(0, 600)); /* multi-packet, data pending */
    h.send_rndv(2, 1, 1, Harness::pattern(1, 500));
    h.model().step_arrival();
    h.model().step_arrival();
    ASSERT_EQ(UCS_OK, h.cancel(rs[2], 0));
    h.progress();
    const int consumed = rs[0]->consumed + rs[1]->consumed;
    h.destroy();
    EXPECT_EQ(2, consumed);
    for (Recv *r : rs) {
        EXPECT_EQ(0, r->completed);
    }
}

}  // namespace
}  // namespace ib
}  // namespace uct_tm
