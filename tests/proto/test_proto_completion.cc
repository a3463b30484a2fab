/*
 * Completion levels and ordering of sends (fi_tagged's op flags):
 * TRANSMIT_COMPLETE (no receive needed), DELIVERY_COMPLETE (the receiver
 * holds the message when the send completes, matched or not), FENCE (a send
 * starts once every earlier one on the endpoint completed) and
 * NO_COMPLETION (selective completion: nothing to hold or release, the
 * callback hears of failures only). Every transport of the suite.
 */
#include "proto_fixture.h"

#include <vector>

namespace uct_tm_test {
namespace {

constexpr uint64_t kAll    = ~uint64_t{0};
constexpr size_t   kRndv   = 300000; /* above the default 128 KiB rendezvous threshold */
constexpr size_t   kEager[] = {0, 8, 2000, 20000};

using CompletionTest = ProtoTest;

/* Progresses both workers `n` times. */
void spin(const Pair &p, int n) {
    for (int i = 0; i < n; ++i) {
        uct_tm_proto_worker_progress(p.a);
        uct_tm_proto_worker_progress(p.b);
    }
}

/* An eager message with TRANSMIT or DELIVERY completes with no receive
 * posted; DELIVERY only once the receiver holds it (a PEEK finds it at once,
 * without the receiver progressing again). A size the transport sends by
 * rendezvous (over tm_rc's tag list 20000 B is) waits for its receive. */
TEST_P(CompletionTest, EagerCompletesWithoutAReceive) {
    for (unsigned level : {unsigned{UCT_TM_PROTO_SEND_TRANSMIT_COMPLETE},
                           unsigned{UCT_TM_PROTO_SEND_DELIVERY_COMPLETE}}) {
        for (size_t len : kEager) {
            SCOPED_TRACE(testing::Message() << len << " B, level " << level);
            const auto             msg = pattern(len, static_cast<uint32_t>(len));
            const uint64_t         tag = 0x100 + level + len;
            uct_tm_proto_request_t s   = 0;
            const uint64_t         rndv0 = stats_of(p_.a).rndv_sends;
            const ucs_status_t     st  = send(msg.data(), len, tag, level, std::nullopt, &s);
            ASSERT_TRUE((st == UCS_OK) || (st == UCS_INPROGRESS)) << ucs_status_string(st);
            const bool rndv = stats_of(p_.a).rndv_sends != rndv0;
            if (level == UCT_TM_PROTO_SEND_DELIVERY_COMPLETE) {
                /* the receiver's acknowledgement is needed: never done in the call */
                ASSERT_EQ(st, UCS_INPROGRESS);
            }
            if ((s != 0) && !rndv) {
                ASSERT_EQ(UCS_OK, wait_request(p_, p_.a, s));
            }
            if ((level == UCT_TM_PROTO_SEND_DELIVERY_COMPLETE) && !rndv) {
                uct_tm_proto_info_t info;
                ASSERT_EQ(UCS_OK, uct_tm_proto_probe(p_.b, tag, kAll, nullptr,
                                                     UCT_TM_PROTO_PROBE_PEEK, &info, nullptr))
                        << "the send completed before the receiver held the message";
                EXPECT_EQ(info.length, len);
            }
            std::vector<char> buf(len + 1, 'x');
            auto              r = post(buf.data(), len, tag, kAll);
            uct_tm_proto_info_t info;
            ASSERT_EQ(UCS_OK, wait_request(p_, p_.b, r, &info));
            if (rndv) {
                ASSERT_EQ(UCS_OK, wait_request(p_, p_.a, s));
            }
            EXPECT_EQ(info.length, len);
            EXPECT_TRUE(same_bytes(buf.data(), msg.data(), len));
            EXPECT_EQ(buf[len], 'x');
        }
    }
}

/* DELIVERY over active messages (untagged: every transport sends those as
 * AM): the receiver acknowledges a message before it reports it, expected
 * or not, whole or in fragments. So once the receive has completed, the
 * receiver may stop progressing (exit) and the send still completes. */
TEST_P(CompletionTest, DeliveryAcknowledgedBeforeTheReceiverReports) {
    constexpr unsigned kFlags = UCT_TM_PROTO_SEND_DELIVERY_COMPLETE | UCT_TM_PROTO_OP_UNTAGGED;
    for (bool expected : {true, false}) {
        for (size_t len : kEager) {
            SCOPED_TRACE(testing::Message()
                         << len << " B, " << (expected ? "expected" : "unexpected"));
            const auto               msg = pattern(len, static_cast<uint32_t>(len) + expected);
            std::vector<char>        buf(len + 1, 'x');
            uct_tm_proto_op_params_t rp = {};
            rp.flags                    = UCT_TM_PROTO_OP_UNTAGGED;
            uct_tm_proto_request_t r = 0, s = 0;
            if (expected) {
                ASSERT_EQ(UCS_INPROGRESS,
                          uct_tm_proto_recv(p_.b, buf.data(), len, 0, 0, nullptr, &rp, &r));
            }
            ASSERT_EQ(UCS_INPROGRESS, send(msg.data(), len, 0, kFlags, std::nullopt, &s));
            if (!expected) {
                for (int i = 0; i < 2000; ++i) { /* the sender pushes its fragments */
                    uct_tm_proto_worker_progress(p_.a);
                }
                ASSERT_EQ(UCS_INPROGRESS,
                          uct_tm_proto_recv(p_.b, buf.data(), len, 0, 0, nullptr, &rp, &r));
            }
            /* the receiver progresses until its receive completes, no further */
            ucs_status_t rs = UCS_INPROGRESS;
            for (int i = 0; (i < 2000000) && (rs == UCS_INPROGRESS); ++i) {
                uct_tm_proto_worker_progress(p_.b);
                uct_tm_proto_worker_progress(p_.a); /* the sender pushes fragments */
                rs = uct_tm_proto_request_test(p_.b, r, nullptr);
            }
            ASSERT_EQ(UCS_OK, rs);
            uct_tm_proto_request_release(p_.b, r);
            EXPECT_TRUE(same_bytes(buf.data(), msg.data(), len));
            ucs_status_t ss = UCS_INPROGRESS;
            for (int i = 0; (i < 200000) && (ss == UCS_INPROGRESS); ++i) {
                uct_tm_proto_worker_progress(p_.a);
                ss = uct_tm_proto_request_test(p_.a, s, nullptr);
            }
            ASSERT_EQ(UCS_OK, ss) << "the send waits on a receiver that reported the message";
            uct_tm_proto_request_release(p_.a, s);
        }
    }
}

/* A rendezvous with DELIVERY completes only once its data reached the
 * receive; expected messages and sync ones complete too. */
TEST_P(CompletionTest, DeliveryWaitsForRendezvousData) {
    const auto             msg = pattern(kRndv, 5);
    uct_tm_proto_request_t s   = 0;
    ASSERT_EQ(UCS_INPROGRESS,
              send(msg.data(), kRndv, 0x55, UCT_TM_PROTO_SEND_DELIVERY_COMPLETE, std::nullopt, &s));
    spin(p_, 2000);
    uct_tm_proto_info_t info;
    EXPECT_EQ(UCS_INPROGRESS, uct_tm_proto_request_test(p_.a, s, &info))
            << "completed with the data still at the sender";
    std::vector<char> buf(kRndv);
    auto              r = post(buf.data(), kRndv, 0x55, kAll);
    ASSERT_EQ(UCS_OK, wait_request(p_, p_.b, r));
    ASSERT_EQ(UCS_OK, wait_request(p_, p_.a, s));
    EXPECT_EQ(buf, msg);

    /* expected, every size, each level alone and with SYNC */
    for (unsigned flags : {unsigned{UCT_TM_PROTO_SEND_DELIVERY_COMPLETE},
                           unsigned{UCT_TM_PROTO_SEND_TRANSMIT_COMPLETE},
                           unsigned{UCT_TM_PROTO_SEND_DELIVERY_COMPLETE | UCT_TM_PROTO_SEND_SYNC},
                           unsigned{UCT_TM_PROTO_SEND_TRANSMIT_COMPLETE |
                                    UCT_TM_PROTO_SEND_DELIVERY_COMPLETE}}) {
        for (size_t len : {size_t{0}, size_t{8}, size_t{20000}, kRndv}) {
            SCOPED_TRACE(testing::Message() << len << " B, flags " << flags);
            const auto        data = pattern(len, flags);
            std::vector<char> rbuf(len + 1, 'x');
            auto              rr = post(rbuf.data(), len, 0x56, kAll);
            ASSERT_EQ(UCS_OK, send(data.data(), len, 0x56, flags));
            ASSERT_EQ(UCS_OK, wait_request(p_, p_.b, rr));
            EXPECT_TRUE(same_bytes(rbuf.data(), data.data(), len));
            EXPECT_EQ(rbuf[len], 'x');
        }
    }
    EXPECT_EQ(stats_of(p_.a).requests, 0u);
}

/* A fenced send waits for the endpoint's earlier sends to complete; the same
 * send without FENCE does not (so the test can tell). */
TEST_P(CompletionTest, FenceWaitsForEarlierSends) {
    for (bool fence : {false, true}) {
        SCOPED_TRACE(fence ? "FENCE" : "no FENCE");
        const uint64_t    t1 = fence ? 0x71 : 0x61, t2 = t1 + 1;
        const auto        big = pattern(kRndv, 1);
        uint64_t          small = 42, got = 0;
        auto              r2 = post(&got, sizeof(got), t2, kAll);
        uct_tm_proto_request_t s1 = 0, s2 = 0;
        ASSERT_EQ(UCS_INPROGRESS, send(big.data(), kRndv, t1, 0, std::nullopt, &s1));
        const ucs_status_t st = send(&small, sizeof(small), t2,
                                     fence ? unsigned{UCT_TM_PROTO_SEND_FENCE} : 0u, std::nullopt,
                                     &s2);
        ASSERT_TRUE((st == UCS_OK) || (st == UCS_INPROGRESS));
        if (fence) {
            ASSERT_EQ(st, UCS_INPROGRESS) << "a fenced send left with an earlier one outstanding";
        }
        spin(p_, 2000);
        uct_tm_proto_info_t info;
        if (fence) {
            EXPECT_EQ(UCS_INPROGRESS, uct_tm_proto_request_test(p_.b, r2, &info))
                    << "the fenced message arrived before the earlier send completed";
        } else {
            EXPECT_TRUE(wait_for(p_, [&] {
                return uct_tm_proto_request_test(p_.b, r2, &info) != UCS_INPROGRESS;
            })) << "without FENCE the second message did not overtake the unmatched rendezvous";
        }
        std::vector<char> buf(kRndv);
        auto              r1 = post(buf.data(), kRndv, t1, kAll);
        ASSERT_EQ(UCS_OK, wait_request(p_, p_.b, r1));
        ASSERT_EQ(UCS_OK, wait_request(p_, p_.b, r2));
        ASSERT_EQ(UCS_OK, wait_request(p_, p_.a, s1));
        if (s2 != 0) {
            ASSERT_EQ(UCS_OK, wait_request(p_, p_.a, s2));
        }
        EXPECT_EQ(buf, big);
        EXPECT_EQ(got, small);
    }
}

/* NO_COMPLETION: UCS_OK and no request, the data delivered, nothing left
 * live; a later fenced send's completion says every earlier one is done. */
TEST_P(CompletionTest, NoCompletionLeavesNothingToRelease) {
    CallCount                calls;
    uct_tm_proto_op_params_t q = {};
    q.flags = UCT_TM_PROTO_OP_NO_COMPLETION;
    q.cb    = CallCount::cb;
    q.arg   = &calls;
    const size_t lens[] = {0, 8, 2000, 20000, kRndv, kRndv + 1};
    std::vector<std::vector<char>> data;
    for (size_t i = 0; i < std::size(lens); ++i) {
        data.push_back(pattern(lens[i], static_cast<uint32_t>(i)));
        ASSERT_EQ(UCS_OK, uct_tm_proto_send(p_.ab, data[i].data(), lens[i], 0x80 + i, &q, nullptr));
    }
    /* the fence: completes only after all of the above */
    uct_tm_proto_op_params_t f = {};
    f.flags                    = UCT_TM_PROTO_SEND_FENCE;
    uint32_t               mark = 7;
    uct_tm_proto_request_t fs   = 0;
    const ucs_status_t     fst  = uct_tm_proto_send(p_.ab, &mark, sizeof(mark), 0x90, &f, &fs);
    ASSERT_TRUE((fst == UCS_OK) || (fst == UCS_INPROGRESS));
    std::vector<std::vector<char>>      bufs;
    std::vector<uct_tm_proto_request_t> rs;
    for (size_t i = 0; i < std::size(lens); ++i) {
        bufs.emplace_back(lens[i] + 1, 'x');
        rs.push_back(post(bufs[i].data(), lens[i], 0x80 + i, kAll));
    }
    uint32_t got = 0;
    auto     rm  = post(&got, sizeof(got), 0x90, kAll);
    if (fs != 0) {
        ASSERT_EQ(UCS_OK, wait_request(p_, p_.a, fs));
    }
    /* every earlier send completed: the rendezvous data was all read or written */
    for (size_t i = 0; i < std::size(lens); ++i) {
        uct_tm_proto_info_t info;
        ASSERT_EQ(UCS_OK, wait_request(p_, p_.b, rs[i], &info)) << i;
        EXPECT_TRUE(same_bytes(bufs[i].data(), data[i].data(), lens[i])) << i;
        EXPECT_EQ(bufs[i][lens[i]], 'x') << i;
    }
    ASSERT_EQ(UCS_OK, wait_request(p_, p_.b, rm));
    EXPECT_EQ(got, mark);
    spin(p_, 100);
    EXPECT_EQ(calls.n, 0) << "the callback ran for a send that succeeded";
    EXPECT_EQ(stats_of(p_.a).requests, 0u) << "a send without completion was not released";

    /* bad combinations */
    uct_tm_proto_op_params_t bad = q;
    bad.flags |= UCT_TM_PROTO_OP_USER_REQUEST;
    alignas(UCT_TM_PROTO_REQUEST_ALIGN) char mem[UCT_TM_PROTO_REQUEST_SIZE];
    bad.request = mem;
    EXPECT_EQ(UCS_ERR_INVALID_PARAM, uct_tm_proto_send(p_.ab, &mark, 4, 1, &bad, nullptr));
    uct_tm_proto_request_t r;
    EXPECT_EQ(UCS_ERR_INVALID_PARAM,
              uct_tm_proto_recv(p_.b, &got, 4, 1, kAll, nullptr, &q, &r))
            << "receives always complete";
}

/* A send without completion that fails reports it to its callback, once,
 * with no request; then nothing is left live. */
TEST_P(CompletionTest, NoCompletionReportsAFailure) {
    CallCount                calls;
    uct_tm_proto_op_params_t q = {};
    q.flags        = UCT_TM_PROTO_OP_NO_COMPLETION;
    q.cb           = CallCount::cb;
    q.arg          = &calls;
    const auto big = pattern(kRndv, 3);
    ASSERT_EQ(UCS_OK, uct_tm_proto_send(p_.ab, big.data(), kRndv, 0x99, &q, nullptr));
    spin(p_, 100);
    EXPECT_EQ(calls.n, 0);
    /* no receive will take it: destroying the endpoint cancels it */
    uct_tm_proto_ep_destroy(p_.ab);
    p_.ab = nullptr;
    spin(p_, 100);
    EXPECT_EQ(calls.n, 1);
    EXPECT_EQ(calls.status, UCS_ERR_CANCELED);
    EXPECT_EQ(calls.req, 0u);
    EXPECT_EQ(stats_of(p_.a).requests, 0u);
}

/* Vectored sends without completion, rendezvous-sized: each keeps its
 * own data though the next one stages through the same worker buffer. */
TEST_P(CompletionTest, NoCompletionVectorsKeepTheirData) {
    uct_tm_proto_op_params_t q = {};
    q.flags                    = UCT_TM_PROTO_OP_NO_COMPLETION;
    std::vector<std::vector<char>> data;
    for (uint32_t i = 0; i < 3; ++i) {
        data.push_back(pattern(kRndv, 40 + i));
        const uct_tm_proto_iov_t iov[2] = {{data[i].data(), 1000},
                                           {data[i].data() + 1000, kRndv - 1000}};
        ASSERT_EQ(UCS_OK, uct_tm_proto_sendv(p_.ab, iov, 2, 0xa0 + i, &q, nullptr)) << i;
    }
    for (uint32_t i = 0; i < 3; ++i) {
        std::vector<char> buf(kRndv);
        auto              r = post(buf.data(), kRndv, 0xa0 + i, kAll);
        ASSERT_EQ(UCS_OK, wait_request(p_, p_.b, r)) << i;
        EXPECT_EQ(buf, data[i]) << "message " << i << " sent another's bytes";
    }
    spin(p_, 100);
    EXPECT_EQ(stats_of(p_.a).requests, 0u);
}

/* TRANSMIT and DELIVERY on a stream of sends with no receive posted until
 * the end: each completes once, every message arrives in order. */
TEST_P(CompletionTest, LevelsKeepSendingOrder) {
    constexpr int                       kCount = 40;
    std::vector<uct_tm_proto_request_t> sends;
    std::vector<std::vector<char>>      data;
    const unsigned levels[] = {0, UCT_TM_PROTO_SEND_TRANSMIT_COMPLETE,
                               UCT_TM_PROTO_SEND_DELIVERY_COMPLETE, UCT_TM_PROTO_SEND_FENCE};
    for (int i = 0; i < kCount; ++i) {
        const size_t len = (i % 5 == 4) ? kRndv : size_t(i * 97);
        data.push_back(pattern(len, i));
        uct_tm_proto_request_t s = 0;
        const ucs_status_t st = send(data[i].data(), len, 7, levels[i % 4], uint64_t(i), &s);
        ASSERT_TRUE((st == UCS_OK) || (st == UCS_INPROGRESS)) << i;
        if (s != 0) {
            sends.push_back(s);
        }
    }
    for (int i = 0; i < kCount; ++i) {
        std::vector<char>   buf(kRndv);
        uct_tm_proto_info_t info;
        auto                r = post(buf.data(), buf.size(), 7, kAll);
        ASSERT_EQ(UCS_OK, wait_request(p_, p_.b, r, &info)) << i;
        ASSERT_EQ(info.data, uint64_t(i)) << "receive " << i << " took another message";
        EXPECT_TRUE(same_bytes(buf.data(), data[i].data(), data[i].size())) << i;
    }
    for (auto s : sends) {
        EXPECT_EQ(UCS_OK, wait_request(p_, p_.a, s)); /* and released */
    }
}

INSTANTIATE_TEST_SUITE_P(transports, CompletionTest, ::testing::ValuesIn(proto_transports()),
                         transport_name);

}  // namespace
}  // namespace uct_tm_test
