/*
 * The protocol layer's contract over each transport (tm_sm, posix, tcp):
 * every size class (eager, fragmented eager, rendezvous) expected and
 * unexpected with payload, tag, length, immediate data and source checked;
 * posting order with wildcards and source filters; truncation on every path;
 * cancellation of receives and rendezvous sends; probe PEEK / CLAIM /
 * DISCARD; sync sends; the unexpected cap and back-pressure.
 */
#include "proto_fixture.h"

#include <cstring>
#include <memory>

namespace uct_tm_test {
namespace {

constexpr uint64_t kAll = ~uint64_t{0};
/* 0: empty, 8: one eager message, 20000: fragmented eager, 300000: rendezvous */
const size_t kSizes[] = {0, 8, 1000, 20000, 300000};

TEST_P(ProtoTest, ExpectedEverySize) {
    for (size_t len : kSizes) {
        ASSERT_NO_FATAL_FAILURE(transfer(len, 100 + len, 1, nullptr));
    }
    if (GetParam() == "tm_sm") {
        uct_tm_proto_stats_t st;
        uct_tm_proto_worker_stats(p_.b, &st);
        EXPECT_GT(st.rndv_gets, 0u); /* CMA: the receiver reads the sender's buffer */
        EXPECT_GT(st.offloaded_recvs, 0u);
    }
}

/* Request slots are reused LIFO and an offloaded eager receive resets only
 * what its path writes: a slot a rendezvous receive used must come back
 * clean for the small receive after it, and a cancelled receive reports no
 * message (nothing left over from the slot's last user). */
TEST_P(ProtoTest, ReusedRequestSlotStartsFresh) {
    for (int round = 0; round < 3; ++round) {
        /* the last one source-filtered: the general path takes the slot */
        ASSERT_NO_FATAL_FAILURE(transfer(300000, 7 + round, round + 2, nullptr));
        ASSERT_NO_FATAL_FAILURE(transfer(8, 7 + round, round + 2, nullptr));
        ASSERT_NO_FATAL_FAILURE(transfer(300000, 7 + round, round + 2, p_.ba));
        uint64_t x      = 0;
        auto     cancel = post(&x, sizeof(x), 999, kAll);
        ASSERT_EQ(UCS_OK, uct_tm_proto_request_cancel(p_.b, cancel));
        uct_tm_proto_info_t info;
        ASSERT_EQ(UCS_ERR_CANCELED, wait_request(p_, p_.b, cancel, &info));
        EXPECT_EQ(info.length, 0u);
        EXPECT_EQ(info.tag, 0u);
        EXPECT_EQ(info.flags, 0u);
    }
}

TEST_P(ProtoTest, UnexpectedEverySize) {
    std::vector<uct_tm_proto_request_t> sends;
    for (size_t len : kSizes) {
        const auto             data = pattern(len, 2);
        uct_tm_proto_request_t sreq;
        const ucs_status_t     st = send(data.data(), len, 200 + len, UCT_TM_PROTO_SEND_INJECT,
                                         static_cast<uint32_t>(len), &sreq);
        ASSERT_TRUE((st == UCS_OK) || (st == UCS_INPROGRESS)) << len;
        sends.push_back(sreq);
    }
    /* let everything arrive before the receives are posted */
    uct_tm_proto_info_t info;
    ASSERT_TRUE(wait_for(p_, [&] {
        return uct_tm_proto_probe(p_.b, 200 + kSizes[4], kAll, nullptr, UCT_TM_PROTO_PROBE_PEEK,
                                  &info, nullptr) == UCS_OK;
    }));
    for (size_t len : kSizes) {
        const auto        data = pattern(len, 2);
        std::vector<char> buf(len);
        auto              rreq = post(buf.data(), len, 200 + len, kAll);
        ASSERT_EQ(UCS_OK, wait_request(p_, p_.b, rreq, &info)) << len;
        EXPECT_TRUE(same_bytes(buf.data(), data.data(), len)) << len;
        EXPECT_EQ(info.length, len);
        EXPECT_EQ(info.data, static_cast<uint32_t>(len));
    }
    for (auto s : sends) {
        if (s != 0) {
            EXPECT_EQ(UCS_OK, wait_request(p_, p_.a, s));
        }
    }
}

/* Receives posted with wildcards and exact tags interleaved: each message
 * goes to the earliest posted receive that matches it. */
TEST_P(ProtoTest, EarliestPostedReceiveWins) {
    uint64_t r[6];
    uint32_t got[6] = {};
    r[0] = post(&got[0], 4, 0x10, kAll);         /* exact 0x10 */
    r[1] = post(&got[1], 4, 0x100, 0xf00);       /* class 0x1xx */
    r[2] = post(&got[2], 4, 0x110, kAll);        /* exact 0x110, after the class */
    r[3] = post(&got[3], 4, 0, 0);               /* anything */
    r[4] = post(&got[4], 4, 0x10, kAll, p_.ba);  /* exact 0x10, from a */
    r[5] = post(&got[5], 4, 0x110, kAll);
    const uint64_t tags[6] = {0x110, 0x110, 0x10, 0x10, 0x555, 0x110};
    /* 0x110 -> r1 (the class, posted before r2), 0x110 -> r2, 0x10 -> r0, 0x10 -> r3 (the
     * wildcard, before the source-filtered r4), 0x555 -> nobody, 0x110 -> r5 */
    for (uint32_t i = 0; i < 6; ++i) {
        ASSERT_EQ(UCS_OK, send(&i, 4, tags[i]));
    }
    uct_tm_proto_info_t info;
    ASSERT_EQ(UCS_OK, wait_request(p_, p_.b, r[1], &info));
    EXPECT_EQ(got[1], 0u);
    ASSERT_EQ(UCS_OK, wait_request(p_, p_.b, r[2], &info));
    EXPECT_EQ(got[2], 1u);
    ASSERT_EQ(UCS_OK, wait_request(p_, p_.b, r[0], &info));
    EXPECT_EQ(got[0], 2u);
    ASSERT_EQ(UCS_OK, wait_request(p_, p_.b, r[3], &info));
    EXPECT_EQ(got[3], 3u);
    /* 0x555 matches nobody left but nothing: r4 wants 0x10, r5 wants 0x110 */
    ASSERT_EQ(UCS_OK, wait_request(p_, p_.b, r[5], &info));
    EXPECT_EQ(got[5], 5u);
    EXPECT_EQ(UCS_INPROGRESS, uct_tm_proto_request_test(p_.b, r[4], nullptr));
    uint32_t x = 9;
    ASSERT_EQ(UCS_OK, send(&x, 4, 0x10));
    ASSERT_EQ(UCS_OK, wait_request(p_, p_.b, r[4], &info));
    EXPECT_EQ(got[4], 9u);
    /* 0x555 waits as unexpected */
    uint32_t y = 0;
    auto     r6 = post(&y, 4, 0x555, kAll);
    ASSERT_EQ(UCS_OK, wait_request(p_, p_.b, r6, &info));
    EXPECT_EQ(y, 4u);
}

/* Messages from one sender with one tag arrive in sending order, across
 * protocols (eager then rendezvous then eager). */
TEST_P(ProtoTest, SameTagInSendingOrder) {
    const size_t lens[] = {8, 300000, 20000, 8, 300000};
    std::vector<uct_tm_proto_request_t> sends;
    for (uint32_t i = 0; i < 5; ++i) {
        auto data = pattern(lens[i], i);
        uct_tm_proto_request_t s;
        send(data.data(), lens[i], 7, UCT_TM_PROTO_SEND_INJECT, i, &s);
        sends.push_back(s);
    }
    for (uint32_t i = 0; i < 5; ++i) {
        std::vector<char>   buf(300000);
        uct_tm_proto_info_t info;
        auto                r = post(buf.data(), buf.size(), 7, kAll);
        ASSERT_EQ(UCS_OK, wait_request(p_, p_.b, r, &info));
        EXPECT_EQ(info.data, i);
        EXPECT_EQ(info.length, lens[i]);
        EXPECT_TRUE(same_bytes(buf.data(), pattern(lens[i], i).data(), lens[i]));
    }
    for (auto s : sends) {
        if (s != 0) {
            EXPECT_EQ(UCS_OK, wait_request(p_, p_.a, s));
        }
    }
}

/* A longer message fills the buffer with its first bytes, never writes past
 * it, completes with MESSAGE_TRUNCATED and the sender's length; the sender
 * completes normally. Every path, expected and unexpected. */
TEST_P(ProtoTest, TruncationEveryPath) {
    for (bool expected : {true, false}) {
        for (size_t len : {size_t(100), size_t(20000), size_t(300000)}) {
            for (size_t cap : {size_t(0), size_t(50), len - 1}) {
                const auto             data = pattern(len, 3);
                std::vector<char>      buf(cap + 64, 'g');
                uct_tm_proto_request_t r = 0, s = 0;
                if (expected) {
                    r = post(buf.data(), cap, 5, kAll);
                }
                const ucs_status_t st = send(data.data(), len, 5, 0, 0, &s);
                ASSERT_TRUE((st == UCS_OK) || (st == UCS_INPROGRESS));
                if (!expected) {
                    ASSERT_TRUE(wait_unexpected(5));
                    r = post(buf.data(), cap, 5, kAll);
                }
                uct_tm_proto_info_t info;
                EXPECT_EQ(UCS_ERR_MESSAGE_TRUNCATED, wait_request(p_, p_.b, r, &info))
                        << len << " into " << cap;
                expect_truncated(buf, cap, data, info);
                if (s != 0) {
                    EXPECT_EQ(UCS_OK, wait_request(p_, p_.a, s));
                }
            }
        }
    }
}

TEST_P(ProtoTest, CancelReceive) {
    uint32_t x   = 0;
    auto     r   = post(&x, 4, 1, kAll);
    auto     rs  = post(&x, 4, 1, kAll, p_.ba); /* source-filtered queue */
    int      calls = 0;
    EXPECT_EQ(UCS_OK, uct_tm_proto_request_cancel(p_.b, r));
    EXPECT_EQ(UCS_OK, uct_tm_proto_request_cancel(p_.b, rs));
    EXPECT_EQ(UCS_ERR_CANCELED, wait_request(p_, p_.b, r));
    EXPECT_EQ(UCS_ERR_CANCELED, wait_request(p_, p_.b, rs));
    EXPECT_EQ(UCS_ERR_INVALID_PARAM, uct_tm_proto_request_cancel(p_.b, r)); /* released */
    /* a cancelled receive takes nothing: the message waits for the next one */
    uint32_t v = 42;
    ASSERT_EQ(UCS_OK, send(&v, 4, 1));
    uct_tm_proto_op_params_t params = {};
    params.cb  = [](void *arg, uct_tm_proto_request_t, const uct_tm_proto_info_t *) {
        ++*static_cast<int *>(arg);
    };
    params.arg = &calls;
    uct_tm_proto_request_t r2;
    ASSERT_EQ(UCS_INPROGRESS, uct_tm_proto_recv(p_.b, &x, 4, 1, kAll, nullptr, &params, &r2));
    ASSERT_TRUE(wait_for(p_, [&] { return calls == 1; }));
    /* matched already: cancel loses, the receive completes normally, once */
    EXPECT_EQ(UCS_ERR_NO_ELEM, uct_tm_proto_request_cancel(p_.b, r2));
    EXPECT_EQ(UCS_OK, wait_request(p_, p_.b, r2));
    EXPECT_EQ(x, 42u);
    for (int i = 0; i < 100; ++i) {
        uct_tm_proto_worker_progress(p_.b);
    }
    EXPECT_EQ(calls, 1);
}

/* A rendezvous send cancelled before any receive matched it completes with
 * CANCELED and is never delivered; one already matched completes OK. */
TEST_P(ProtoTest, CancelRendezvousSend) {
    auto                   cancelled = std::make_unique<std::vector<char>>(pattern(300000, 4));
    const auto             data      = *cancelled;
    uct_tm_proto_request_t s;
    ASSERT_EQ(UCS_INPROGRESS, send(cancelled->data(), cancelled->size(), 9, 0, 1, &s));
    uct_tm_proto_info_t info;
    ASSERT_TRUE(wait_for(p_, [&] {
        return uct_tm_proto_probe(p_.b, 9, kAll, nullptr, UCT_TM_PROTO_PROBE_PEEK, &info,
                                  nullptr) == UCS_OK;
    }));
    ASSERT_EQ(UCS_OK, uct_tm_proto_request_cancel(p_.a, s));
    EXPECT_EQ(UCS_ERR_CANCELED, wait_request(p_, p_.a, s));
    cancelled.reset(); /* the sender's memory is gone: nobody may read it any more */
    EXPECT_EQ(UCS_ERR_NO_ELEM, uct_tm_proto_probe(p_.b, 9, kAll, nullptr, UCT_TM_PROTO_PROBE_PEEK,
                                                  &info, nullptr));
    /* lost race: the receive is posted first */
    std::vector<char> buf(data.size());
    auto              r = post(buf.data(), buf.size(), 9, kAll);
    ASSERT_EQ(UCS_INPROGRESS, send(data.data(), data.size(), 9, 0, 2, &s));
    ASSERT_TRUE(wait_for(p_, [&] {
        uct_tm_proto_stats_t st;
        uct_tm_proto_worker_stats(p_.b, &st);
        return st.expected >= 1;
    }));
    const ucs_status_t cs = uct_tm_proto_request_cancel(p_.a, s);
    EXPECT_TRUE((cs == UCS_OK) || (cs == UCS_ERR_NO_ELEM));
    EXPECT_EQ(UCS_OK, wait_request(p_, p_.a, s));
    uct_tm_proto_info_t rinfo;
    EXPECT_EQ(UCS_OK, wait_request(p_, p_.b, r, &rinfo));
    EXPECT_EQ(rinfo.data, 2u) << "the cancelled message was delivered";
    EXPECT_EQ(buf, data);
}

TEST_P(ProtoTest, ProbePeekClaimDiscard) {
    uint32_t a = 1, b = 2, c = 3;
    ASSERT_EQ(UCS_OK, send(&a, 4, 0x21, 0, 11));
    ASSERT_EQ(UCS_OK, send(&b, 4, 0x22, 0, 12));
    ASSERT_EQ(UCS_OK, send(&c, 4, 0x23, 0, 13));
    uct_tm_proto_info_t info;
    ASSERT_TRUE(wait_for(p_, [&] {
        return uct_tm_proto_probe(p_.b, 0x23, kAll, nullptr, UCT_TM_PROTO_PROBE_PEEK, &info,
                                  nullptr) == UCS_OK;
    }));
    /* PEEK: the earliest match, left in place */
    ASSERT_EQ(UCS_OK, uct_tm_proto_probe(p_.b, 0x20, 0xf0, nullptr, UCT_TM_PROTO_PROBE_PEEK,
                                         &info, nullptr));
    EXPECT_EQ(info.tag, 0x21u);
    EXPECT_EQ(info.data, 11u);
    EXPECT_EQ(info.length, 4u);
    /* CLAIM: held, invisible to receives and probes */
    uct_tm_proto_msg_t msg = 0;
    ASSERT_EQ(UCS_OK, uct_tm_proto_probe(p_.b, 0x20, 0xf0, nullptr,
                                         UCT_TM_PROTO_PROBE_PEEK | UCT_TM_PROTO_PROBE_CLAIM, &info,
                                         &msg));
    EXPECT_EQ(info.tag, 0x21u);
    ASSERT_EQ(UCS_OK, uct_tm_proto_probe(p_.b, 0x20, 0xf0, nullptr, UCT_TM_PROTO_PROBE_PEEK,
                                         &info, nullptr));
    EXPECT_EQ(info.tag, 0x22u);
    /* DISCARD: gone */
    ASSERT_EQ(UCS_OK, uct_tm_proto_probe(p_.b, 0x22, kAll, nullptr,
                                         UCT_TM_PROTO_PROBE_PEEK | UCT_TM_PROTO_PROBE_DISCARD,
                                         &info, nullptr));
    EXPECT_EQ(UCS_ERR_NO_ELEM, uct_tm_proto_probe(p_.b, 0x22, kAll, nullptr,
                                                  UCT_TM_PROTO_PROBE_PEEK, &info, nullptr));
    /* the claimed one is received through its handle */
    uint32_t               x = 0;
    uct_tm_proto_request_t r;
    ASSERT_EQ(UCS_INPROGRESS, uct_tm_proto_recv_claimed(p_.b, msg, &x, 4, nullptr, &r));
    ASSERT_EQ(UCS_OK, wait_request(p_, p_.b, r, &info));
    EXPECT_EQ(x, 1u);
    EXPECT_EQ(UCS_ERR_INVALID_PARAM, uct_tm_proto_recv_claimed(p_.b, msg, &x, 4, nullptr, &r));
    /* claim then discard */
    ASSERT_EQ(UCS_OK, uct_tm_proto_probe(p_.b, 0, 0, p_.ba,
                                         UCT_TM_PROTO_PROBE_PEEK | UCT_TM_PROTO_PROBE_CLAIM, &info,
                                         &msg));
    EXPECT_EQ(info.tag, 0x23u);
    EXPECT_EQ(UCS_OK, uct_tm_proto_discard_claimed(p_.b, msg));
    EXPECT_EQ(UCS_ERR_NO_ELEM, uct_tm_proto_probe(p_.b, 0, 0, nullptr, UCT_TM_PROTO_PROBE_PEEK,
                                                  &info, nullptr));
    EXPECT_EQ(UCS_ERR_INVALID_PARAM, uct_tm_proto_probe(p_.b, 0, 0, nullptr, 0, &info, nullptr));
}

/* A sync send completes only once a receive matched it (or it was discarded). */
TEST_P(ProtoTest, SyncSendCompletesWhenMatched) {
    for (size_t len : {size_t(8), size_t(20000), size_t(300000)}) {
        const auto             data = pattern(len, 5);
        uct_tm_proto_request_t s;
        ASSERT_EQ(UCS_INPROGRESS,
                  send(data.data(), len, 3, UCT_TM_PROTO_SEND_SYNC | UCT_TM_PROTO_SEND_INJECT, 0, &s));
        for (int i = 0; i < 2000; ++i) {
            uct_tm_proto_worker_progress(p_.a);
            uct_tm_proto_worker_progress(p_.b);
        }
        EXPECT_EQ(UCS_INPROGRESS, uct_tm_proto_request_test(p_.a, s, nullptr)) << len;
        std::vector<char> buf(len);
        auto              r = post(buf.data(), len, 3, kAll);
        EXPECT_EQ(UCS_OK, wait_request(p_, p_.a, s)) << len;
        EXPECT_EQ(UCS_OK, wait_request(p_, p_.b, r));
        EXPECT_EQ(buf, data);
    }
    /* discarded also counts */
    uint32_t               v = 1;
    uct_tm_proto_request_t s;
    ASSERT_EQ(UCS_INPROGRESS, send(&v, 4, 4, UCT_TM_PROTO_SEND_SYNC, 0, &s));
    uct_tm_proto_info_t info;
    ASSERT_TRUE(wait_for(p_, [&] {
        return uct_tm_proto_probe(p_.b, 4, kAll, nullptr,
                                  UCT_TM_PROTO_PROBE_PEEK | UCT_TM_PROTO_PROBE_DISCARD, &info,
                                  nullptr) == UCS_OK;
    }));
    EXPECT_EQ(UCS_OK, wait_request(p_, p_.a, s));
}

/* Over the cap, senders switch to rendezvous: the receiver's buffered eager
 * bytes never exceed the cap, and every message still arrives intact. */
TEST_P(ProtoTest, UnexpectedCapPushesSendersToRendezvous) {
    uct_tm_proto_worker_params_t extra = {};
    extra.field_mask     = UCT_TM_PROTO_WORKER_FIELD_UNEXPECTED_CAP | UCT_TM_PROTO_WORKER_FIELD_MAX_PEERS;
    extra.unexpected_cap = 64 << 10;
    extra.max_peers      = 2;
    reopen(extra);
    constexpr int kMsgs = 40;
    std::vector<uct_tm_proto_request_t> sends;
    for (int i = 0; i < kMsgs; ++i) {
        const auto             data = pattern(4000, i);
        uct_tm_proto_request_t s;
        const ucs_status_t st = send(data.data(), data.size(), 1000 + i, UCT_TM_PROTO_SEND_INJECT,
                                     0, &s);
        ASSERT_TRUE((st == UCS_OK) || (st == UCS_INPROGRESS));
        sends.push_back(s);
        for (int k = 0; k < 50; ++k) {
            uct_tm_proto_worker_progress(p_.a);
            uct_tm_proto_worker_progress(p_.b);
        }
    }
    uct_tm_proto_stats_t st;
    uct_tm_proto_worker_stats(p_.a, &st);
    EXPECT_GT(st.backpressure, 0u);
    uct_tm_proto_worker_stats(p_.b, &st);
    EXPECT_LE(st.unexpected_peak, size_t(32) << 10);
    for (int i = kMsgs - 1; i >= 0; --i) {
        std::vector<char> buf(4000);
        auto              r = post(buf.data(), buf.size(), 1000 + i, kAll);
        ASSERT_EQ(UCS_OK, wait_request(p_, p_.b, r));
        EXPECT_EQ(buf, pattern(4000, i));
    }
    for (auto s : sends) {
        if (s != 0) {
            EXPECT_EQ(UCS_OK, wait_request(p_, p_.a, s));
        }
    }
    uct_tm_proto_worker_stats(p_.b, &st);
    EXPECT_EQ(st.unexpected_bytes, 0u);
}

TEST_P(ProtoTest, BadInput) {
    uct_tm_proto_request_t r;
    uint32_t               x = 0;
    EXPECT_EQ(UCS_ERR_INVALID_PARAM, uct_tm_proto_send(nullptr, &x, 4, 0, nullptr, &r));
    EXPECT_EQ(UCS_ERR_INVALID_PARAM, uct_tm_proto_send(p_.ab, nullptr, 4, 0, nullptr, &r));
    EXPECT_EQ(UCS_ERR_INVALID_PARAM, uct_tm_proto_send(p_.ab, &x, 4, 0, nullptr, nullptr));
    uct_tm_proto_op_params_t bad = {};
    bad.flags = 1u << 20;
    EXPECT_EQ(UCS_ERR_INVALID_PARAM, uct_tm_proto_send(p_.ab, &x, 4, 0, &bad, &r));
    EXPECT_EQ(UCS_ERR_INVALID_PARAM, uct_tm_proto_recv(nullptr, &x, 4, 0, 0, nullptr, nullptr, &r));
    EXPECT_EQ(UCS_ERR_INVALID_PARAM, uct_tm_proto_recv(p_.b, nullptr, 4, 0, 0, nullptr, nullptr, &r));
    EXPECT_EQ(UCS_ERR_INVALID_PARAM, uct_tm_proto_request_test(p_.b, 12345, nullptr));
    EXPECT_EQ(UCS_ERR_INVALID_PARAM, uct_tm_proto_request_release(p_.b, 0));
    EXPECT_EQ(UCS_ERR_INVALID_PARAM, uct_tm_proto_request_cancel(p_.b, ~uint64_t{0}));
    EXPECT_EQ(UCS_ERR_INVALID_PARAM, uct_tm_proto_discard_claimed(p_.b, 77));
    char junk[64] = {};
    uct_tm_proto_ep_h ep;
    EXPECT_EQ(UCS_ERR_INVALID_PARAM, uct_tm_proto_ep_create(p_.a, junk, sizeof(junk), &ep));
    EXPECT_EQ(UCS_ERR_INVALID_PARAM, uct_tm_proto_ep_create(p_.a, junk, 3, &ep));
    size_t len = 1;
    EXPECT_EQ(UCS_ERR_BUFFER_TOO_SMALL, uct_tm_proto_worker_address(p_.a, junk, &len));
    EXPECT_GT(len, 1u);
    /* a request of the other worker, though a live one sits in the same
     * slot of this worker's pool, is not this worker's */
    auto mine  = post(&x, 4, 0xbeef, kAll); /* on b */
    uint64_t y = 0;
    uct_tm_proto_request_t theirs;
    ASSERT_EQ(UCS_INPROGRESS,
              uct_tm_proto_recv(p_.a, &y, sizeof(y), 0xbeef, kAll, nullptr, nullptr, &theirs));
    EXPECT_EQ(UCS_ERR_INVALID_PARAM, uct_tm_proto_request_test(p_.b, theirs, nullptr));
    EXPECT_EQ(UCS_ERR_INVALID_PARAM, uct_tm_proto_request_release(p_.b, theirs));
    EXPECT_EQ(UCS_ERR_INVALID_PARAM, uct_tm_proto_request_cancel(p_.b, theirs));
    EXPECT_EQ(UCS_ERR_INVALID_PARAM, uct_tm_proto_request_test(p_.a, mine, nullptr));
    EXPECT_EQ(UCS_OK, uct_tm_proto_request_cancel(p_.a, theirs));
    EXPECT_EQ(UCS_ERR_CANCELED, wait_request(p_, p_.a, theirs));
    EXPECT_EQ(UCS_OK, uct_tm_proto_request_cancel(p_.b, mine));
    EXPECT_EQ(UCS_ERR_CANCELED, wait_request(p_, p_.b, mine));
    /* a pending receive cannot be released */
    auto pending = post(&x, 4, 0xdead, kAll);
    EXPECT_EQ(UCS_ERR_BUSY, uct_tm_proto_request_release(p_.b, pending));
    EXPECT_EQ(UCS_OK, uct_tm_proto_request_cancel(p_.b, pending));
    EXPECT_EQ(UCS_ERR_CANCELED, wait_request(p_, p_.b, pending));
}

/* Endpoint wireup (uct_tm_proto_ep_address / ep_connect) on every
 * transport: over a connect-to-iface one the address carries no transport
 * bytes and connecting only checks it; over tm_rc it connects the QPs.
 * Everything a peer's address says is checked before it is used. */
TEST_P(ProtoTest, EndpointAddressIsCheckedBeforeUse) {
    /* a third worker c, with endpoints c <-> b not connected yet */
    Pair q;
    ASSERT_EQ(UCS_OK, make_pair(GetParam(), &q));
    uct_tm_proto_worker_h c = q.a;
    auto worker_addr = [](uct_tm_proto_worker_h w) {
        size_t len = 0;
        uct_tm_proto_worker_address(w, nullptr, &len);
        std::vector<char> a(len);
        EXPECT_EQ(UCS_OK, uct_tm_proto_worker_address(w, a.data(), &len));
        return a;
    };
    const auto        addr_b = worker_addr(p_.b), addr_c = worker_addr(c);
    uct_tm_proto_ep_h cb = nullptr, bc = nullptr;
    const ucs_status_t st_cb = uct_tm_proto_ep_create(c, addr_b.data(), addr_b.size(), &cb);
    ASSERT_TRUE((st_cb == UCS_OK) || (st_cb == UCS_INPROGRESS)) << ucs_status_string(st_cb);
    const ucs_status_t st_bc = uct_tm_proto_ep_create(p_.b, addr_c.data(), addr_c.size(), &bc);
    ASSERT_EQ(st_cb, st_bc) << "both ends of a pair connect the same way";
    uint32_t x = 1;
    uct_tm_proto_request_t r;
    if (st_cb == UCS_INPROGRESS) {
        EXPECT_EQ(UCS_ERR_NOT_CONNECTED, uct_tm_proto_send(cb, &x, sizeof(x), 1, nullptr, &r));
    }
    /* bad arguments */
    size_t len = 0;
    EXPECT_EQ(UCS_ERR_INVALID_PARAM, uct_tm_proto_ep_address(nullptr, nullptr, &len));
    EXPECT_EQ(UCS_ERR_INVALID_PARAM, uct_tm_proto_ep_address(cb, nullptr, nullptr));
    EXPECT_EQ(UCS_ERR_BUFFER_TOO_SMALL, uct_tm_proto_ep_address(cb, nullptr, &len));
    EXPECT_GT(len, 0u);
    const std::vector<char> a_cb = ep_address(cb), a_bc = ep_address(bc), a_ab = ep_address(p_.ab);
    ASSERT_FALSE(a_cb.empty());
    ASSERT_FALSE(a_bc.empty());
    char junk[64] = {};
    EXPECT_EQ(UCS_ERR_INVALID_PARAM, uct_tm_proto_ep_connect(nullptr, a_cb.data(), a_cb.size()));
    EXPECT_EQ(UCS_ERR_INVALID_PARAM, uct_tm_proto_ep_connect(bc, nullptr, a_cb.size()));
    EXPECT_EQ(UCS_ERR_INVALID_PARAM, uct_tm_proto_ep_connect(bc, junk, sizeof(junk)));
    /* another pair's address: c's endpoint to b given to a's and b's to a,
     * b's own, and a's endpoint to b given to b's endpoint to c */
    EXPECT_EQ(UCS_ERR_INVALID_PARAM, uct_tm_proto_ep_connect(p_.ab, a_cb.data(), a_cb.size()));
    EXPECT_EQ(UCS_ERR_INVALID_PARAM, uct_tm_proto_ep_connect(p_.ba, a_cb.data(), a_cb.size()));
    EXPECT_EQ(UCS_ERR_INVALID_PARAM, uct_tm_proto_ep_connect(bc, a_bc.data(), a_bc.size()));
    EXPECT_EQ(UCS_ERR_INVALID_PARAM, uct_tm_proto_ep_connect(bc, a_ab.data(), a_ab.size()));
    /* every length but the right one */
    std::vector<char> longer(a_cb);
    longer.push_back(0);
    EXPECT_EQ(UCS_ERR_INVALID_PARAM, uct_tm_proto_ep_connect(bc, longer.data(), longer.size()));
    for (size_t n = 0; n < a_cb.size(); ++n) {
        EXPECT_EQ(UCS_ERR_INVALID_PARAM, uct_tm_proto_ep_connect(bc, a_cb.data(), n)) << n;
    }
    /* every bit of the header and transport name (the transport's own
     * endpoint bytes after them are its to check) */
    uint16_t uct_bytes; /* the header's ep_addr_len (bytes 6-7) */
    memcpy(&uct_bytes, a_cb.data() + 6, sizeof(uct_bytes));
    EXPECT_EQ(uct_bytes > 0, st_cb == UCS_INPROGRESS);
    for (size_t bit = 0; bit < (a_cb.size() - uct_bytes) * 8; ++bit) {
        if ((bit / 8 >= 17) && (bit / 8 < 20)) {
            continue; /* reserved */
        }
        std::vector<char> bad(a_cb);
        bad[bit / 8] = static_cast<char>(bad[bit / 8] ^ (1 << (bit % 8)));
        EXPECT_EQ(UCS_ERR_INVALID_PARAM, uct_tm_proto_ep_connect(bc, bad.data(), bad.size()))
                << "bit " << bit;
    }
    /* the right addresses connect; again is fine */
    ASSERT_EQ(UCS_OK, connect_eps(cb, bc));
    EXPECT_EQ(UCS_OK, uct_tm_proto_ep_connect(bc, a_cb.data(), a_cb.size()));
    if (st_cb == UCS_INPROGRESS) {
        /* connected to another endpoint already */
        std::vector<char> other(a_cb);
        other.back() = static_cast<char>(other.back() ^ 1);
        EXPECT_EQ(UCS_ERR_ALREADY_EXISTS, uct_tm_proto_ep_connect(bc, other.data(), other.size()));
    }
    /* and carry a message both ways (b progresses in wait_for with c) */
    for (int dir = 0; dir < 2; ++dir) {
        uct_tm_proto_worker_h from = dir ? p_.b : c, to = dir ? c : p_.b;
        uct_tm_proto_ep_h     ep   = dir ? bc : cb;
        const Pair            both = {from, to, nullptr, nullptr};
        uint32_t              in   = 0;
        uct_tm_proto_request_t rreq;
        ASSERT_EQ(UCS_INPROGRESS,
                  uct_tm_proto_recv(to, &in, sizeof(in), 0x77, kAll, nullptr, nullptr, &rreq));
        x = 0xabc0 + dir;
        uct_tm_proto_request_t sreq = 0;
        const ucs_status_t st = uct_tm_proto_send(ep, &x, sizeof(x), 0x77, nullptr, &sreq);
        ASSERT_TRUE((st == UCS_OK) || (st == UCS_INPROGRESS)) << ucs_status_string(st);
        uct_tm_proto_info_t info;
        ASSERT_EQ(UCS_OK, wait_request(both, to, rreq, &info));
        if (st == UCS_INPROGRESS) {
            ASSERT_EQ(UCS_OK, wait_request(both, from, sreq));
        }
        EXPECT_EQ(x, in);
        EXPECT_EQ(uct_tm_proto_worker_id(from), info.source);
    }
    uct_tm_proto_ep_destroy(bc);
    destroy_pair(&q);
}

INSTANTIATE_TEST_SUITE_P(transports, ProtoTest, ::testing::ValuesIn(proto_transports()),
                         transport_name);

}  // namespace
}  // namespace uct_tm_test
