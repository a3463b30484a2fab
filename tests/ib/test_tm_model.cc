/*
 * The device model's rules (tm_model.h), driven directly through the seam:
 * what a TM SRQ does with list operations, arrivals and its counters.
 */
#include "tm_model_harness.h"

#include <gtest/gtest.h>

namespace uct_tm {
namespace ib {
namespace {

using test::Harness;

class TmModelRules : public ::testing::Test {
  protected:
    TmModelRules() {
        TmModel::Fabric fabric;
        fabric.read = [](void *arg, uint32_t, uint64_t va, uint32_t rkey, void *dst, size_t len) {
            auto *self = static_cast<TmModelRules *>(arg);
            if ((rkey != 7) || (va + len > self->remote.size())) {
                return false;
            }
            memcpy(dst, self->remote.data() + va, len);
            return true;
        };
        fabric.send = [](void *arg, uint32_t dst, const void *msg, size_t len) {
            auto *self = static_cast<TmModelRules *>(arg);
            self->sent.emplace_back(dst, std::vector<uint8_t>(static_cast<const uint8_t *>(msg),
                                                              static_cast<const uint8_t *>(msg) + len));
        };
        fabric.arg = this;
        config.caps.max_num_tags = 4;
        config.caps.max_ops      = 16;
        config.mtu               = 256;
        config.sync_req_diff     = 2;
        model.reset(new TmModel(config));
        model->set_fabric(fabric);
        remote = Harness::pattern(9, 4096);
    }

    uint32_t add(uint64_t tag, uint64_t mask, std::vector<uint8_t> &buf, uint64_t recv_wr_id,
                 uint8_t flags = kTmOpSignaled | kTmOpSyncCount, uint32_t count = 0) {
        TmOp op;
        op.opcode         = TmOpcode::kAdd;
        op.flags          = flags;
        op.wr_id          = 1000 + recv_wr_id;
        op.recv_wr_id     = recv_wr_id;
        op.tag            = tag & mask;
        op.mask           = mask;
        op.unexpected_cnt = count;
        op.has_sge        = true;
        op.sge.addr       = buf.data();
        op.sge.length     = static_cast<uint32_t>(buf.size());
        EXPECT_EQ(UCS_OK, model->post_op(op));
        return op.handle;
    }
    ucs_status_t op(TmOpcode code, uint32_t handle, uint32_t count, uint64_t wr_id = 1,
                    uint8_t flags = kTmOpSignaled | kTmOpSyncCount) {
        TmOp o;
        o.opcode         = code;
        o.flags          = flags;
        o.wr_id          = wr_id;
        o.handle         = handle;
        o.unexpected_cnt = count;
        return model->post_op(o);
    }
    void eager(uint32_t src, uint64_t tag, size_t len, uint32_t app_ctx = 0, bool imm = false,
               uint32_t immv = 0) {
        std::vector<uint8_t> msg(sizeof(TmHeader) + len);
        const TmHeader       tmh = make_tmh(TmhOp::kEager, tag, app_ctx);
        memcpy(msg.data(), &tmh, sizeof(tmh));
        const auto p = Harness::pattern(tag, len);
        std::copy(p.begin(), p.end(), msg.begin() + sizeof(tmh));
        model->deliver(src, msg.data(), msg.size(), imm, immv);
    }
    void rndv(uint32_t src, uint64_t tag, uint64_t va, uint32_t len, uint32_t rkey = 7) {
        std::vector<uint8_t> msg(sizeof(TmHeader) + sizeof(RndvHeader) + 4, 0x5a);
        const TmHeader       tmh = make_tmh(TmhOp::kRndv, tag, 77);
        const RndvHeader     rvh = make_rvh(va, rkey, len);
        memcpy(msg.data(), &tmh, sizeof(tmh));
        memcpy(msg.data() + sizeof(tmh), &rvh, sizeof(rvh));
        model->deliver(src, msg.data(), msg.size());
    }
    std::vector<TmCompletion> poll() {
        std::vector<TmCompletion> out(64);
        out.resize(model->poll(out.data(), 64));
        return out;
    }
    void untagged(std::vector<uint8_t> &buf, uint64_t wr_id) {
        TmSge sge;
        sge.addr   = buf.data();
        sge.length = static_cast<uint32_t>(buf.size());
        ASSERT_EQ(UCS_OK, model->post_recv(wr_id, sge));
    }

    TmModel::Config                                           config;
    std::unique_ptr<TmModel>                                  model;
    std::vector<uint8_t>                                      remote;
    std::vector<std::pair<uint32_t, std::vector<uint8_t>>>    sent;
};

TEST_F(TmModelRules, AddGetsItsHandleAtPostAndJoinsTheListWhenExecuted) {
    std::vector<uint8_t> buf(64);
    add(5, ~0ull, buf, 1);
    EXPECT_EQ(0u, model->listed());
    EXPECT_TRUE(poll().empty());
    ASSERT_TRUE(model->step_command());
    EXPECT_EQ(1u, model->listed());
    auto c = poll();
    ASSERT_EQ(1u, c.size());
    EXPECT_EQ(TmCqeOpcode::kAdd, c[0].opcode);
    EXPECT_EQ(1001u, c[0].wr_id);
    EXPECT_EQ(0, c[0].flags & kTmCqeSyncReq);
}

TEST_F(TmModelRules, SinglePacketEagerMatchesWithMatchAndDataValidTogether) {
    std::vector<uint8_t> buf(128);
    add(5, ~0ull, buf, 1);
    model->step_command();
    eager(3, 5, 100, 0xabc, true, 42);
    ASSERT_TRUE(model->step_arrival());
    auto c = poll();
    ASSERT_EQ(2u, c.size());
    EXPECT_EQ(TmCqeOpcode::kTmRecv, c[1].opcode);
    EXPECT_EQ(1u, c[1].wr_id);
    EXPECT_EQ(kTmCqeMatch | kTmCqeDataValid | kTmCqeWithImm, c[1].flags);
    EXPECT_EQ(5u, c[1].tag);
    EXPECT_EQ(0xabcu, c[1].priv);
    EXPECT_EQ(42u, c[1].imm);
    EXPECT_EQ(100u, c[1].byte_len);
    EXPECT_EQ(3u, c[1].src_qp);
    const auto p = Harness::pattern(5, 100);
    EXPECT_TRUE(std::equal(p.begin(), p.end(), buf.begin()));
    EXPECT_EQ(0u, model->listed());
}

TEST_F(TmModelRules, MultiPacketEagerReportsMatchFirstAndHoldsTheSendersNextMessage) {
    std::vector<uint8_t> big(1024), other(64), un(1024);
    add(1, ~0ull, big, 1);
    add(2, ~0ull, other, 2);
    model->run_until_idle();
    poll();
    eager(3, 1, 600);        /* > mtu: multi-packet */
    eager(3, 2, 10);         /* same sender: waits for the first to finish */
    eager(4, 2, 10);         /* other sender: free to go */
    ASSERT_TRUE(model->step_arrival(3));
    auto c = poll();
    ASSERT_EQ(1u, c.size());
    EXPECT_EQ(kTmCqeMatch, c[0].flags);
    EXPECT_FALSE(model->step_arrival(3));
    ASSERT_TRUE(model->step_arrival(4)); /* takes tag 2 */
    untagged(un, 9);
    ASSERT_TRUE(model->step_transfer());
    c = poll();
    ASSERT_EQ(2u, c.size());
    EXPECT_EQ(4u, c[0].src_qp);
    EXPECT_EQ(kTmCqeMatch | kTmCqeDataValid, c[0].flags);
    EXPECT_EQ(1u, c[1].wr_id);
    EXPECT_EQ(kTmCqeDataValid, c[1].flags);
    EXPECT_EQ(600u, c[1].byte_len);
    ASSERT_TRUE(model->step_arrival(3)); /* now unexpected: tag 2 was taken */
    c = poll();
    ASSERT_EQ(1u, c.size());
    EXPECT_EQ(TmCqeOpcode::kRecv, c[0].opcode);
}

TEST_F(TmModelRules, UnexpectedMessageStopsMatchingUntilSoftwareReportsTheCount) {
    std::vector<uint8_t> buf(64), un1(64), un2(64);
    untagged(un1, 11);
    untagged(un2, 12);
    eager(1, 9, 8); /* nothing posted: unexpected */
    model->step_arrival();
    EXPECT_EQ(1u, model->hw_unexpected());
    EXPECT_FALSE(model->in_sync());
    add(5, ~0ull, buf, 1, kTmOpSignaled | kTmOpSyncCount, 0); /* stale count */
    model->step_command();
    auto c = poll();
    ASSERT_EQ(2u, c.size());
    EXPECT_EQ(TmCqeOpcode::kRecv, c[0].opcode);
    EXPECT_EQ(11u, c[0].wr_id);
    EXPECT_EQ(TmCqeOpcode::kAdd, c[1].opcode);
    EXPECT_NE(0, c[1].flags & kTmCqeSyncReq);
    eager(1, 5, 8); /* matches the listed tag, but out of sync: unexpected */
    model->step_arrival();
    c = poll();
    ASSERT_EQ(1u, c.size());
    EXPECT_EQ(TmCqeOpcode::kRecv, c[0].opcode);
    EXPECT_EQ(1u, model->listed());
    ASSERT_EQ(UCS_OK, op(TmOpcode::kSync, 0, 2));
    model->step_command();
    c = poll();
    ASSERT_EQ(1u, c.size());
    EXPECT_EQ(TmCqeOpcode::kSync, c[0].opcode);
    EXPECT_EQ(0, c[0].flags & kTmCqeSyncReq);
    EXPECT_TRUE(model->in_sync());
    eager(1, 5, 8);
    model->step_arrival();
    c = poll();
    ASSERT_EQ(1u, c.size());
    EXPECT_EQ(TmCqeOpcode::kTmRecv, c[0].opcode);
}

TEST_F(TmModelRules, UnexpectedCompletionsAskForSyncBeyondTheGap) {
    std::vector<std::vector<uint8_t>> bufs(4, std::vector<uint8_t>(64));
    for (size_t i = 0; i < bufs.size(); ++i) {
        untagged(bufs[i], i);
        eager(1, 9, 8);
    }
    model->run_until_idle();
    auto c = poll();
    ASSERT_EQ(4u, c.size());
    EXPECT_EQ(0, c[0].flags & kTmCqeSyncReq); /* gap 1 */
    EXPECT_EQ(0, c[1].flags & kTmCqeSyncReq); /* gap 2 */
    EXPECT_NE(0, c[2].flags & kTmCqeSyncReq); /* gap 3 > sync_req_diff */
    EXPECT_NE(0, c[3].flags & kTmCqeSyncReq);
}

TEST_F(TmModelRules, DelFailsWithTmErrWhenTheTagWasConsumedFirst) {
    std::vector<uint8_t> buf(64);
    const uint32_t       h = add(5, ~0ull, buf, 1);
    model->step_command();
    ASSERT_EQ(UCS_OK, op(TmOpcode::kDel, h, 0, 2));
    eager(1, 5, 8);
    model->step_arrival(); /* consume races ahead of the DEL */
    model->step_command();
    auto c = poll();
    ASSERT_EQ(3u, c.size());
    EXPECT_EQ(TmCqeOpcode::kTmRecv, c[1].opcode);
    EXPECT_EQ(TmCqeOpcode::kDel, c[2].opcode);
    EXPECT_EQ(TmCqeStatus::kTmErr, c[2].status);
    EXPECT_EQ(0u, model->held_handles());
    EXPECT_EQ(0u, model->violations());
}

TEST_F(TmModelRules, DelRemovesAListedTag) {
    std::vector<uint8_t> buf(64), un(64);
    const uint32_t       h = add(5, ~0ull, buf, 1);
    ASSERT_EQ(UCS_OK, op(TmOpcode::kDel, h, 0, 2));
    model->run_until_idle();
    auto c = poll();
    ASSERT_EQ(2u, c.size());
    EXPECT_EQ(TmCqeStatus::kSuccess, c[1].status);
    EXPECT_EQ(0u, model->listed());
    EXPECT_EQ(0u, model->held_handles());
    untagged(un, 3);
    eager(1, 5, 8);
    model->step_arrival();
    EXPECT_EQ(TmCqeOpcode::kRecv, poll().at(0).opcode);
}

TEST_F(TmModelRules, ListIsFullUntilSoftwareHasPolledEveryCompletionOfATag) {
    std::vector<std::vector<uint8_t>> bufs(5, std::vector<uint8_t>(64));
    uint32_t                          h[4];
    for (int i = 0; i < 4; ++i) {
        h[i] = add(i, ~0ull, bufs[i], i);
    }
    TmOp extra;
    extra.opcode = TmOpcode::kAdd;
    EXPECT_EQ(UCS_ERR_EXCEEDS_LIMIT, model->post_op(extra));
    ASSERT_EQ(UCS_OK, op(TmOpcode::kDel, h[0], 0, 2));
    model->run_until_idle();
    EXPECT_EQ(UCS_ERR_EXCEEDS_LIMIT, model->post_op(extra)); /* DEL done, not yet polled */
    poll();
    extra.flags = kTmOpSignaled;
    EXPECT_EQ(UCS_OK, model->post_op(extra));
}

TEST_F(TmModelRules, AtMostMaxOpsAreOutstanding) {
    for (uint32_t i = 0; i < config.caps.max_ops; ++i) {
        ASSERT_EQ(UCS_OK, op(TmOpcode::kSync, 0, 0, i, kTmOpSyncCount)); /* unsignaled */
    }
    EXPECT_EQ(UCS_ERR_NO_RESOURCE, op(TmOpcode::kSync, 0, 0));
    model->run_until_idle();
    EXPECT_EQ(UCS_ERR_NO_RESOURCE, op(TmOpcode::kSync, 0, 0)); /* nothing signaled retired them */
    EXPECT_EQ(config.caps.max_ops, model->outstanding_ops());
}

TEST_F(TmModelRules, SignaledCompletionRetiresTheOpsBeforeIt) {
    ASSERT_EQ(UCS_OK, op(TmOpcode::kSync, 0, 0, 1, kTmOpSyncCount));
    ASSERT_EQ(UCS_OK, op(TmOpcode::kSync, 0, 0, 2, kTmOpSyncCount | kTmOpSignaled));
    ASSERT_EQ(UCS_OK, op(TmOpcode::kSync, 0, 0, 3, kTmOpSyncCount));
    model->run_until_idle();
    EXPECT_EQ(1u, poll().size());
    EXPECT_EQ(1u, model->outstanding_ops());
}

TEST_F(TmModelRules, EarliestAddedEntryWinsAmongMatches) {
    std::vector<uint8_t> a(64), b(64), c(64);
    add(0x10, 0xf0, a, 1); /* wildcard low nibble */
    add(0x15, ~0ull, b, 2);
    add(0x15, ~0ull, c, 3);
    model->run_until_idle();
    poll();
    eager(1, 0x15, 4);
    eager(1, 0x15, 4);
    eager(1, 0x15, 4);
    model->run_until_idle();
    auto r = poll();
    ASSERT_EQ(3u, r.size());
    EXPECT_EQ(1u, r[0].wr_id);
    EXPECT_EQ(2u, r[1].wr_id);
    EXPECT_EQ(3u, r[2].wr_id);
}

TEST_F(TmModelRules, RendezvousReadsRemoteMemoryAndSendsFin) {
    std::vector<uint8_t> buf(2048);
    add(5, ~0ull, buf, 1);
    model->step_command();
    poll();
    rndv(6, 5, 100, 1500);
    model->step_arrival();
    auto c = poll();
    ASSERT_EQ(1u, c.size());
    EXPECT_EQ(kTmCqeMatch | kTmCqeRndv, c[0].flags);
    EXPECT_TRUE(sent.empty());
    model->step_transfer();
    c = poll();
    ASSERT_EQ(1u, c.size());
    EXPECT_EQ(kTmCqeDataValid | kTmCqeRndv, c[0].flags);
    EXPECT_EQ(1500u, c[0].byte_len);
    EXPECT_TRUE(std::equal(remote.begin() + 100, remote.begin() + 1600, buf.begin()));
    ASSERT_EQ(1u, sent.size());
    EXPECT_EQ(6u, sent[0].first);
    TmHeader fin;
    memcpy(&fin, sent[0].second.data(), sizeof(fin));
    EXPECT_EQ(static_cast<uint8_t>(TmhOp::kFin), fin.opcode);
    EXPECT_EQ(77u, tmh_app_ctx(fin));
}

TEST_F(TmModelRules, RendezvousIntoASmallBufferIsIncompleteWithTheHeadersInIt) {
    std::vector<uint8_t> buf(40);
    add(5, ~0ull, buf, 1);
    model->step_command();
    poll();
    rndv(6, 5, 0, 1500);
    model->step_arrival();
    auto c = poll();
    ASSERT_EQ(1u, c.size());
    EXPECT_EQ(TmCqeStatus::kRndvIncomplete, c[0].status);
    EXPECT_EQ(kTmCqeMatch | kTmCqeDataValid | kTmCqeRndv, c[0].flags);
    EXPECT_EQ(36u, c[0].byte_len);
    RndvHeader rvh;
    memcpy(&rvh, buf.data() + sizeof(TmHeader), sizeof(rvh));
    EXPECT_EQ(1500u, rvh_len(rvh));
    EXPECT_EQ(0u, model->pending_transfers());
    EXPECT_TRUE(sent.empty()); /* software owes the FIN */
}

TEST_F(TmModelRules, FailedReadCompletesWithAnErrorAndNoFin) {
    std::vector<uint8_t> buf(2048);
    add(5, ~0ull, buf, 1);
    model->step_command();
    poll();
    rndv(6, 5, 0, 100, 8); /* wrong rkey */
    model->run_until_idle();
    auto c = poll();
    ASSERT_EQ(2u, c.size());
    EXPECT_EQ(TmCqeStatus::kError, c[1].status);
    EXPECT_TRUE(sent.empty());
}

TEST_F(TmModelRules, UnexpectedWaitsForAnUntaggedBuffer) {
    eager(1, 5, 8);
    EXPECT_FALSE(model->step_arrival());
    EXPECT_TRUE(model->idle());
    std::vector<uint8_t> un(64);
    untagged(un, 4);
    EXPECT_FALSE(model->idle());
    EXPECT_TRUE(model->step_arrival());
    auto c = poll();
    ASSERT_EQ(1u, c.size());
    EXPECT_EQ(4u, c[0].wr_id);
    EXPECT_EQ(24u, c[0].byte_len);
    TmHeader tmh;
    memcpy(&tmh, un.data(), sizeof(tmh));
    EXPECT_EQ(5u, tmh_tag(tmh));
}

TEST_F(TmModelRules, ASendersStateGoesWithItsLastMessage) {
    /* tm_dc's connections come and go by the thousand; a scheduler step
     * walks the senders, so what a finished sender leaves must go too. */
    std::vector<uint8_t> un(64), big(1024);
    const uint8_t        notag[3] = {0, 1, 2};
    for (uint32_t qp = 100; qp < 2100; ++qp) {
        untagged(un, qp);
        model->connected_now(qp);
        model->deliver(qp, notag, sizeof(notag));
        model->run_until_idle();
        ASSERT_EQ(1u, poll().size());
    }
    model->connected_now(5000); /* connected, closed, never sent */
    EXPECT_EQ(1u, model->tracked_senders());
    add(1, ~0ull, big, 1);
    model->run_until_idle();
    poll();
    eager(3, 1, 600); /* multi-packet: its sender is held until the transfer ends */
    ASSERT_TRUE(model->step_arrival(3));
    EXPECT_EQ(1u, model->tracked_senders());
    ASSERT_TRUE(model->step_transfer());
    EXPECT_EQ(0u, model->tracked_senders());
    EXPECT_EQ(2u, poll().size());
}

TEST_F(TmModelRules, NoTagAndFinAreNotCountedAsUnexpected) {
    std::vector<uint8_t> a(64), b(64);
    untagged(a, 1);
    untagged(b, 2);
    const uint8_t  notag[3] = {0, 1, 2};
    const TmHeader fin      = make_tmh(TmhOp::kFin, 5, 3);
    model->deliver(1, notag, sizeof(notag));
    model->deliver(1, &fin, sizeof(fin));
    model->run_until_idle();
    auto c = poll();
    ASSERT_EQ(2u, c.size());
    EXPECT_EQ(TmCqeOpcode::kNoTag, c[0].opcode);
    EXPECT_EQ(TmCqeOpcode::kNoTag, c[1].opcode);
    EXPECT_EQ(0u, model->hw_unexpected());
    EXPECT_TRUE(model->in_sync());
}

TEST_F(TmModelRules, EagerLongerThanTheTaggedBufferIsALengthError) {
    std::vector<uint8_t> buf(16);
    add(5, ~0ull, buf, 1);
    model->step_command();
    poll();
    eager(1, 5, 100);
    model->step_arrival();
    auto c = poll();
    ASSERT_EQ(1u, c.size());
    EXPECT_EQ(TmCqeStatus::kLengthError, c[0].status);
    EXPECT_EQ(100u, c[0].byte_len);
}

TEST_F(TmModelRules, RandomStepsAreReproducibleFromTheSeed) {
    auto run = [this](uint64_t seed) {
        model.reset(new TmModel(config));
        std::vector<std::vector<uint8_t>> bufs(4, std::vector<uint8_t>(64));
        std::vector<std::vector<uint8_t>> un(8, std::vector<uint8_t>(64));
        for (int i = 0; i < 4; ++i) {
            add(i, ~0ull, bufs[i], i);
        }
        for (int i = 0; i < 8; ++i) {
            untagged(un[i], 100 + i);
            eager(1 + i % 2, i % 5, 8);
        }
        std::mt19937_64 rng(seed);
        std::vector<uint64_t> trace;
        while (model->step_random(rng)) {
        }
        for (const TmCompletion &c : poll()) {
            trace.push_back(c.wr_id);
        }
        return trace;
    };
    EXPECT_EQ(run(5), run(5));
    bool differs = false;
    for (uint64_t s = 6; (s < 40) && !differs; ++s) {
        differs = (run(s) != run(5));
    }
    EXPECT_TRUE(differs);
}

}  // namespace
}  // namespace ib
}  // namespace uct_tm
