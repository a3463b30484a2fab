/*
 * Untagged messages (UCT_TM_PROTO_OP_UNTAGGED, libfabric's fi_msg: fi_send,
 * fi_recv) and multi-receive buffers (UCT_TM_PROTO_RECV_MULTI, FI_MULTI_RECV
 * with FI_OPT_MIN_MULTI_RECV = the worker's min_multi_recv).
 *
 * Untagged: every size class expected and unexpected (info says UNTAGGED,
 * tag 0, the length, the source); kept apart from tagged traffic both ways
 * (a tagged receive with mask 0 takes no untagged message, probes see none);
 * taken in posting order (message i in receive i); source-filtered receives
 * with two senders; remote data narrow and wide, SYNC, vectors, MORE
 * batches; cancel.
 *
 * Multi-receive: messages packed one after the other in arrival order, one
 * callback each with the receive's handle and where the bytes start, the
 * last one truncated to what is left, and a final completion
 * (UCT_TM_PROTO_INFO_MULTI_RECV) once fewer than min_multi_recv bytes are
 * left; messages that arrived before the post taken at post time; a
 * rendezvous placed whole; cancel; every argument check. Every transport of
 * the suite.
 */
#include "proto_fixture.h"
#include "raw_iface.h"

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <optional>
#include <vector>

namespace uct_tm_test {
namespace {

constexpr uint64_t kAll  = ~uint64_t{0};
constexpr unsigned kU    = UCT_TM_PROTO_OP_UNTAGGED;
constexpr size_t   kRndv = 200000; /* above the default 128 KiB rendezvous threshold */
/* Given as the tag of untagged sends and receives: it must be ignored (the
 * receiver sees tag 0, a receive matches whatever tag a sender passed). */
constexpr uint64_t kIgnoredTag  = 0x5eed;
constexpr uint64_t kIgnoredTag2 = 0xbad0;
/* eager (short, one AM, 1000 B) and rendezvous */
constexpr size_t kSizes[] = {0, 8, 1000, kRndv};

/* A send call that sent (done, or a request to wait for). */
bool sent(ucs_status_t st) {
    return (st == UCS_OK) || (st == UCS_INPROGRESS);
}

/* Progresses both workers `n` times. */
void spin(const Pair &p, int n) {
    for (int i = 0; i < n; ++i) {
        uct_tm_proto_worker_progress(p.a);
        uct_tm_proto_worker_progress(p.b);
    }
}

class UntaggedTest : public ProtoTest {
  protected:
    /* An untagged receive on b (tag and mask given only to be ignored). */
    uct_tm_proto_request_t post_u(void *buf, size_t len, uct_tm_proto_ep_h src = nullptr) {
        uct_tm_proto_op_params_t q = {};
        q.flags                    = kU;
        uct_tm_proto_request_t r   = 0;
        EXPECT_EQ(UCS_INPROGRESS,
                  uct_tm_proto_recv(p_.b, buf, len, kIgnoredTag2, kAll, src, &q, &r));
        return r;
    }
    /* An untagged send from a (see ProtoTest::send). */
    ucs_status_t send_u(const void *buf, size_t len, unsigned flags = 0,
                        std::optional<uint64_t> data = std::nullopt,
                        uct_tm_proto_request_t *req_out = nullptr) {
        return send(buf, len, kIgnoredTag, flags | kU, data, req_out);
    }
    /* Waits until b has queued `target` arrivals as unexpected in all. */
    bool wait_unexpected_count(uint64_t target) {
        return wait_for(p_, [&] { return stats_of(p_.b).unexpected >= target; });
    }
    /* What an untagged receive from a reports. */
    void expect_untagged(const uct_tm_proto_info_t &info, size_t len,
                         std::optional<uint64_t> data = std::nullopt) {
        EXPECT_EQ(info.flags, unsigned{UCT_TM_PROTO_INFO_UNTAGGED} |
                                      (data ? unsigned{UCT_TM_PROTO_INFO_REMOTE_DATA} : 0u));
        if (data) {
            EXPECT_EQ(info.data, *data);
        }
        EXPECT_EQ(info.tag, 0u);
        EXPECT_EQ(info.length, len);
        EXPECT_EQ(info.source, uct_tm_proto_worker_id(p_.a));
        EXPECT_EQ(info.ep, p_.ba);
        EXPECT_EQ(info.buffer, nullptr) << "not a multi-receive";
    }
    /* A message of `len` bytes sent now goes, whole, to a receive posted now. */
    void expect_next_receive_takes(size_t len) {
        const auto        msg = pattern(len, 77);
        std::vector<char> next(len);
        auto              r   = post_u(next.data(), next.size());
        ASSERT_EQ(UCS_OK, send_u(msg.data(), msg.size()));
        ASSERT_EQ(UCS_OK, wait_request(p_, p_.b, r));
        EXPECT_EQ(next, msg);
    }
    /* Nothing live on either side. */
    void expect_no_requests() {
        EXPECT_EQ(stats_of(p_.a).requests, 0u);
        EXPECT_EQ(stats_of(p_.b).requests, 0u);
    }
};

/* ---- untagged send / receive ----------------------------------------------- */

/* Every size class, receive posted first and message first: the bytes, the
 * byte after them untouched, and the info of an untagged message. */
TEST_P(UntaggedTest, RoundTripExpectedAndUnexpected) {
    uint32_t seed = 0;
    for (size_t len : kSizes) {
        for (bool expected : {true, false}) {
            SCOPED_TRACE(testing::Message() << len << " B" << (expected ? ", expected" : ", unexpected"));
            const auto             msg = pattern(len, ++seed);
            std::vector<char>      buf(len + 8, 'x');
            uct_tm_proto_request_t r = 0, s = 0;
            const uint64_t         unexpected0 = stats_of(p_.b).unexpected;
            if (expected) {
                r = post_u(buf.data(), len);
            }
            const ucs_status_t st = send_u(msg.data(), len, 0, std::nullopt, &s);
            ASSERT_TRUE((st == UCS_OK) || (st == UCS_INPROGRESS)) << ucs_status_string(st);
            if (!expected) {
                ASSERT_TRUE(wait_unexpected_count(unexpected0 + 1))
                        << "the message never arrived unexpected";
                r = post_u(buf.data(), len);
            }
            uct_tm_proto_info_t info;
            ASSERT_EQ(UCS_OK, wait_request(p_, p_.b, r, &info));
            if (s != 0) {
                ASSERT_EQ(UCS_OK, wait_request(p_, p_.a, s));
            }
            expect_untagged(info, len);
            EXPECT_TRUE(same_bytes(buf.data(), msg.data(), len));
            EXPECT_EQ(buf[len], 'x') << "written past the message";
            if (expected) {
                EXPECT_EQ(stats_of(p_.b).unexpected, unexpected0) << "a posted receive was passed by";
            }
        }
    }
    expect_no_requests();
}

/* An untagged message is not taken by a tagged receive that matches every
 * tag (mask 0), a tagged message not by an untagged receive, though each of
 * those receives was posted first; a probe matching every tag does not see
 * an untagged message. Eager and rendezvous untagged messages. */
TEST_P(UntaggedTest, KeptApartFromTagged) {
    for (size_t ulen : {size_t{8}, kRndv}) {
        SCOPED_TRACE(testing::Message() << "untagged " << ulen << " B");
        const auto umsg = pattern(ulen, 1), tmsg = pattern(64, 2);
        /* receives first: the tagged wildcard and the untagged one */
        {
            std::vector<char> tbuf(kRndv, 'x'), ubuf(kRndv, 'x');
            auto              rt = post(tbuf.data(), tbuf.size(), 0, 0); /* any tag */
            auto              ru = post_u(ubuf.data(), ubuf.size());
            uct_tm_proto_request_t s1 = 0, s2 = 0;
            ASSERT_TRUE(sent(send_u(umsg.data(), ulen, 0, std::nullopt, &s1)));
            ASSERT_TRUE(sent(send(tmsg.data(), tmsg.size(), 0x77, 0, std::nullopt, &s2)));
            uct_tm_proto_info_t it, iu;
            ASSERT_EQ(UCS_OK, wait_request(p_, p_.b, ru, &iu));
            ASSERT_EQ(UCS_OK, wait_request(p_, p_.b, rt, &it));
            expect_untagged(iu, ulen);
            EXPECT_TRUE(same_bytes(ubuf.data(), umsg.data(), ulen));
            EXPECT_EQ(it.flags & UCT_TM_PROTO_INFO_UNTAGGED, 0u)
                    << "the tagged wildcard receive took the untagged message";
            EXPECT_EQ(it.tag, 0x77u);
            EXPECT_EQ(it.length, tmsg.size());
            EXPECT_TRUE(same_bytes(tbuf.data(), tmsg.data(), tmsg.size()));
            for (auto s : {s1, s2}) {
                if (s != 0) {
                    ASSERT_EQ(UCS_OK, wait_request(p_, p_.a, s));
                }
            }
        }
        /* messages first: untagged then tagged, both unexpected */
        {
            const uint64_t         unexpected0 = stats_of(p_.b).unexpected;
            uct_tm_proto_request_t s1 = 0, s2 = 0;
            ASSERT_TRUE(sent(send_u(umsg.data(), ulen, 0, std::nullopt, &s1)));
            ASSERT_TRUE(wait_unexpected_count(unexpected0 + 1)) << "the untagged message never arrived";
            ASSERT_TRUE(sent(send(tmsg.data(), tmsg.size(), 0x78, 0, std::nullopt, &s2)));
            ASSERT_TRUE(wait_unexpected(0x78));
            /* the probe of every tag finds the tagged one, the earlier untagged one unseen */
            uct_tm_proto_info_t peek;
            ASSERT_EQ(UCS_OK, uct_tm_proto_probe(p_.b, 0, 0, nullptr, UCT_TM_PROTO_PROBE_PEEK,
                                                 &peek, nullptr));
            EXPECT_EQ(peek.tag, 0x78u) << "a probe saw the untagged message";
            EXPECT_EQ(peek.length, tmsg.size());
            EXPECT_EQ(peek.flags & UCT_TM_PROTO_INFO_UNTAGGED, 0u);
            /* a tagged wildcard receive takes the tagged one, though the untagged arrived first */
            std::vector<char> tbuf(kRndv, 'x'), ubuf(kRndv, 'x');
            auto              rt = post(tbuf.data(), tbuf.size(), 0, 0);
            uct_tm_proto_info_t it, iu;
            ASSERT_EQ(UCS_OK, wait_request(p_, p_.b, rt, &it));
            EXPECT_EQ(it.tag, 0x78u);
            EXPECT_EQ(it.flags & UCT_TM_PROTO_INFO_UNTAGGED, 0u);
            EXPECT_TRUE(same_bytes(tbuf.data(), tmsg.data(), tmsg.size()));
            /* only the untagged one is left, and no probe sees it */
            EXPECT_EQ(UCS_ERR_NO_ELEM, uct_tm_proto_probe(p_.b, 0, 0, nullptr,
                                                          UCT_TM_PROTO_PROBE_PEEK, &peek, nullptr));
            /* a second tagged wildcard receive stays pending: nothing tagged is there */
            uint64_t x  = 0;
            auto     rx = post(&x, sizeof(x), 0, 0);
            spin(p_, 500);
            EXPECT_EQ(UCS_INPROGRESS, uct_tm_proto_request_test(p_.b, rx, nullptr))
                    << "a tagged receive took the untagged message";
            auto ru = post_u(ubuf.data(), ubuf.size());
            ASSERT_EQ(UCS_OK, wait_request(p_, p_.b, ru, &iu));
            expect_untagged(iu, ulen);
            EXPECT_TRUE(same_bytes(ubuf.data(), umsg.data(), ulen));
            EXPECT_EQ(UCS_OK, uct_tm_proto_request_cancel(p_.b, rx));
            EXPECT_EQ(UCS_ERR_CANCELED, wait_request(p_, p_.b, rx));
            for (auto s : {s1, s2}) {
                if (s != 0) {
                    ASSERT_EQ(UCS_OK, wait_request(p_, p_.a, s));
                }
            }
        }
        /* an untagged receive posted first does not take a tagged message */
        {
            std::vector<char> ubuf(64, 'x');
            auto              ru = post_u(ubuf.data(), ubuf.size());
            ASSERT_EQ(UCS_OK, send(tmsg.data(), tmsg.size(), 0x79));
            ASSERT_TRUE(wait_unexpected(0x79)) << "the tagged message did not stay unexpected";
            EXPECT_EQ(UCS_INPROGRESS, uct_tm_proto_request_test(p_.b, ru, nullptr))
                    << "an untagged receive took a tagged message";
            std::vector<char> tbuf(64);
            auto              rt = post(tbuf.data(), tbuf.size(), 0x79, kAll);
            ASSERT_EQ(UCS_OK, wait_request(p_, p_.b, rt));
            EXPECT_EQ(tbuf, tmsg);
            EXPECT_EQ(UCS_OK, uct_tm_proto_request_cancel(p_.b, ru));
            EXPECT_EQ(UCS_ERR_CANCELED, wait_request(p_, p_.b, ru));
            EXPECT_TRUE(std::all_of(ubuf.begin(), ubuf.end(), [](char c) { return c == 'x'; }));
        }
    }
    expect_no_requests();
}

/* N untagged messages of mixed sizes (rendezvous among them) from one
 * sender: message i lands in receive i, receives posted first or messages
 * arrived first. Remote data i tells the messages apart. */
TEST_P(UntaggedTest, ReceivesTakeMessagesInOrder) {
    constexpr uint32_t kCount = 25;
    const size_t       lens[] = {0, 8, 1000, 20000, kRndv};
    for (bool receives_first : {true, false}) {
        SCOPED_TRACE(receives_first ? "receives posted first" : "messages arrived first");
        std::vector<std::vector<char>>      data, bufs;
        std::vector<uct_tm_proto_request_t> rs, sends;
        if (receives_first) {
            for (uint32_t i = 0; i < kCount; ++i) {
                bufs.emplace_back(kRndv + 1, 'x');
                rs.push_back(post_u(bufs[i].data(), kRndv));
            }
        }
        const uint64_t unexpected0 = stats_of(p_.b).unexpected;
        for (uint32_t i = 0; i < kCount; ++i) {
            const size_t len = lens[(i * 3) % std::size(lens)];
            data.push_back(pattern(len, 100 + i));
            uct_tm_proto_request_t s  = 0;
            const ucs_status_t     st = send_u(data[i].data(), len, 0, uint64_t(i), &s);
            ASSERT_TRUE((st == UCS_OK) || (st == UCS_INPROGRESS)) << i;
            if (s != 0) {
                sends.push_back(s);
            }
            uct_tm_proto_worker_progress(p_.a);
        }
        if (!receives_first) {
            ASSERT_TRUE(wait_unexpected_count(unexpected0 + kCount));
            for (uint32_t i = 0; i < kCount; ++i) {
                bufs.emplace_back(kRndv + 1, 'x');
                rs.push_back(post_u(bufs[i].data(), kRndv));
            }
        }
        for (uint32_t i = 0; i < kCount; ++i) {
            uct_tm_proto_info_t info;
            ASSERT_EQ(UCS_OK, wait_request(p_, p_.b, rs[i], &info)) << i;
            ASSERT_EQ(info.data, uint64_t(i)) << "receive " << i << " took another message";
            expect_untagged(info, data[i].size(), uint64_t(i));
            EXPECT_TRUE(same_bytes(bufs[i].data(), data[i].data(), data[i].size())) << i;
            EXPECT_EQ(bufs[i][data[i].size()], 'x') << i;
        }
        for (auto s : sends) {
            EXPECT_EQ(UCS_OK, wait_request(p_, p_.a, s));
        }
    }
    expect_no_requests();
}

/* FI_DIRECTED_RECV: with messages from a and from c, an untagged receive
 * whose source is b's endpoint to c takes c's message, though a's arrived
 * first (message first) or arrives first (receive first); a receive from
 * any source takes a's. */
TEST_P(UntaggedTest, DirectedReceiveTakesOnlyItsSender) {
    ThirdWorker t;
    ASSERT_EQ(UCS_OK, connect_third(GetParam(), p_.b, &t));
    const auto progress_all = [&](const std::function<bool()> &done) {
        return wait_for(p_, [&] {
            uct_tm_proto_worker_progress(t.c());
            return done();
        });
    };
    const auto wait_b = [&](uct_tm_proto_request_t r, uct_tm_proto_info_t *info) {
        ucs_status_t st = UCS_INPROGRESS;
        EXPECT_TRUE(progress_all([&] {
            st = uct_tm_proto_request_test(p_.b, r, info);
            return st != UCS_INPROGRESS;
        })) << "receive did not complete in time";
        EXPECT_EQ(UCS_OK, uct_tm_proto_request_release(p_.b, r));
        return st;
    };
    const uint32_t id_a = uct_tm_proto_worker_id(p_.a), id_c = uct_tm_proto_worker_id(t.c());
    ASSERT_NE(id_a, id_c);
    uct_tm_proto_op_params_t q = {};
    q.flags                    = kU;
    for (bool message_first : {true, false}) {
        for (size_t len : {size_t{8}, kRndv}) {
            SCOPED_TRACE(testing::Message() << len << " B, "
                                            << (message_first ? "messages first" : "receive first"));
            const auto             ma = pattern(len, 1), mc = pattern(len, 2);
            std::vector<char>      bc_buf(len + 1, 'x'), any_buf(len + 1, 'x');
            uct_tm_proto_request_t rc = 0, rany = 0, sa = 0, sc = 0;
            const uint64_t         unexpected0 = stats_of(p_.b).unexpected;
            if (!message_first) {
                rc = post_u(bc_buf.data(), len, t.bc);
            }
            ucs_status_t st = uct_tm_proto_send(p_.ab, ma.data(), len, 0, &q, &sa);
            ASSERT_TRUE((st == UCS_OK) || (st == UCS_INPROGRESS)) << ucs_status_string(st);
            if (st == UCS_OK) {
                sa = 0;
            }
            /* a's message is at b (unexpected either way) before c sends */
            ASSERT_TRUE(progress_all([&] { return stats_of(p_.b).unexpected >= unexpected0 + 1; }));
            EXPECT_EQ(UCS_INPROGRESS,
                      rc ? uct_tm_proto_request_test(p_.b, rc, nullptr) : UCS_INPROGRESS)
                    << "the directed receive took the other sender's message";
            st = uct_tm_proto_send(t.cb, mc.data(), len, 0, &q, &sc);
            ASSERT_TRUE((st == UCS_OK) || (st == UCS_INPROGRESS)) << ucs_status_string(st);
            if (st == UCS_OK) {
                sc = 0;
            }
            if (message_first) {
                ASSERT_TRUE(
                        progress_all([&] { return stats_of(p_.b).unexpected >= unexpected0 + 2; }));
                rc = post_u(bc_buf.data(), len, t.bc);
            }
            uct_tm_proto_info_t info;
            ASSERT_EQ(UCS_OK, wait_b(rc, &info));
            EXPECT_EQ(info.source, id_c) << "the directed receive took another sender's message";
            EXPECT_EQ(info.ep, t.bc);
            EXPECT_EQ(info.flags, unsigned{UCT_TM_PROTO_INFO_UNTAGGED});
            EXPECT_EQ(info.length, len);
            EXPECT_TRUE(same_bytes(bc_buf.data(), mc.data(), len));
            rany = post_u(any_buf.data(), len);
            ASSERT_EQ(UCS_OK, wait_b(rany, &info));
            EXPECT_EQ(info.source, id_a);
            EXPECT_EQ(info.ep, p_.ba);
            EXPECT_TRUE(same_bytes(any_buf.data(), ma.data(), len));
            if (sa != 0) {
                ucs_status_t ss = UCS_INPROGRESS;
                ASSERT_TRUE(progress_all([&] {
                    return (ss = uct_tm_proto_request_test(p_.a, sa, nullptr)) != UCS_INPROGRESS;
                }));
                EXPECT_EQ(UCS_OK, ss);
                EXPECT_EQ(UCS_OK, uct_tm_proto_request_release(p_.a, sa));
            }
            if (sc != 0) {
                ucs_status_t ss = UCS_INPROGRESS;
                ASSERT_TRUE(progress_all([&] {
                    return (ss = uct_tm_proto_request_test(t.c(), sc, nullptr)) != UCS_INPROGRESS;
                }));
                EXPECT_EQ(UCS_OK, ss);
                EXPECT_EQ(UCS_OK, uct_tm_proto_request_release(t.c(), sc));
            }
        }
    }
    expect_no_requests();
    EXPECT_EQ(stats_of(t.c()).requests, 0u);
}

/* Remote data, narrow (fits beside the source word) and 64-bit wide, every
 * size class, expected and unexpected. */
TEST_P(UntaggedTest, RemoteDataNarrowAndWide) {
    uint32_t seed = 0;
    for (uint64_t data : {uint64_t{0}, uint64_t{0xffffffffull}, uint64_t{0xdeadbeef00c0ffeeull},
                          ~uint64_t{0}}) {
        for (size_t len : kSizes) {
            for (bool expected : {true, false}) {
                SCOPED_TRACE(testing::Message() << len << " B, data " << data
                                                << (expected ? ", expected" : ", unexpected"));
                const auto             msg = pattern(len, ++seed);
                std::vector<char>      buf(len + 1, 'x');
                uct_tm_proto_request_t r = 0, s = 0;
                const uint64_t         unexpected0 = stats_of(p_.b).unexpected;
                if (expected) {
                    r = post_u(buf.data(), len);
                }
                const ucs_status_t st = send_u(msg.data(), len, 0, data, &s);
                ASSERT_TRUE((st == UCS_OK) || (st == UCS_INPROGRESS)) << ucs_status_string(st);
                if (!expected) {
                    ASSERT_TRUE(wait_unexpected_count(unexpected0 + 1));
                    r = post_u(buf.data(), len);
                }
                uct_tm_proto_info_t info;
                ASSERT_EQ(UCS_OK, wait_request(p_, p_.b, r, &info));
                if (s != 0) {
                    ASSERT_EQ(UCS_OK, wait_request(p_, p_.a, s));
                }
                expect_untagged(info, len, data);
                EXPECT_TRUE(same_bytes(buf.data(), msg.data(), len));
                EXPECT_EQ(buf[len], 'x');
            }
        }
    }
    expect_no_requests();
}

/* SYNC (FI_MATCH_COMPLETE): an untagged sync send is not complete while no
 * receive took it, and completes once one did. */
TEST_P(UntaggedTest, SyncCompletesWhenMatched) {
    for (size_t len : kSizes) {
        SCOPED_TRACE(testing::Message() << len << " B");
        const auto             msg = pattern(len, 7);
        uct_tm_proto_request_t s   = 0;
        ASSERT_EQ(UCS_INPROGRESS, send_u(msg.data(), len, UCT_TM_PROTO_SEND_SYNC, 5, &s))
                << "a sync send completed with no receive posted";
        spin(p_, 2000);
        EXPECT_EQ(UCS_INPROGRESS, uct_tm_proto_request_test(p_.a, s, nullptr))
                << "completed before a receive took the message";
        std::vector<char>   buf(len + 1, 'x');
        auto                r = post_u(buf.data(), len);
        uct_tm_proto_info_t info;
        ASSERT_EQ(UCS_OK, wait_request(p_, p_.b, r, &info));
        ASSERT_EQ(UCS_OK, wait_request(p_, p_.a, s));
        expect_untagged(info, len, 5);
        EXPECT_TRUE(same_bytes(buf.data(), msg.data(), len));
        /* and with the receive posted first */
        std::fill(buf.begin(), buf.end(), 'x');
        r = post_u(buf.data(), len);
        ASSERT_EQ(UCS_OK, send_u(msg.data(), len, UCT_TM_PROTO_SEND_SYNC, 6));
        ASSERT_EQ(UCS_OK, wait_request(p_, p_.b, r, &info));
        expect_untagged(info, len, 6);
        EXPECT_TRUE(same_bytes(buf.data(), msg.data(), len));
        EXPECT_EQ(buf[len], 'x');
    }
    expect_no_requests();
}

/* Vectors (fi_sendv / fi_recvv): vector to vector, contiguous to vector and
 * vector to contiguous, every size class, expected and unexpected. */
TEST_P(UntaggedTest, VectorsBothWays) {
    uct_tm_proto_op_params_t q = {};
    q.flags                    = kU;
    uint32_t seed              = 0;
    for (size_t len : {size_t{0}, size_t{8}, size_t{1000}, size_t{20000}, kRndv}) {
        for (int shape = 0; shape < 3; ++shape) { /* 0 v->v, 1 c->v, 2 v->c */
            for (bool expected : {true, false}) {
                SCOPED_TRACE(testing::Message() << len << " B, shape " << shape
                                                << (expected ? ", expected" : ", unexpected"));
                const auto msg = pattern(len, ++seed);
                /* uneven elements, an empty one among them */
                const size_t cut1 = len / 3, cut2 = len - len / 5;
                std::vector<char> e0(cut1 + 1, 'x'), e1(1, 'x'), e2(cut2 - cut1 + 1, 'x'),
                        e3(len - cut2 + 1, 'x'), whole(len + 1, 'x');
                const uct_tm_proto_iov_t riov[4] = {
                        {e0.data(), cut1}, {e1.data(), 0}, {e2.data(), cut2 - cut1},
                        {e3.data(), len - cut2}};
                const uct_tm_proto_iov_t siov[3] = {
                        {const_cast<char *>(msg.data()), cut2},
                        {nullptr, 0},
                        {const_cast<char *>(msg.data()) + cut2, len - cut2}};
                const bool vrecv = shape != 2, vsend = shape != 1;
                uct_tm_proto_request_t r = 0, s = 0;
                const auto do_post = [&] {
                    if (vrecv) {
                        EXPECT_EQ(UCS_INPROGRESS, uct_tm_proto_recvv(p_.b, riov, 4, kIgnoredTag2,
                                                                     kAll, nullptr, &q, &r));
                    } else {
                        r = post_u(whole.data(), len);
                    }
                };
                const uint64_t unexpected0 = stats_of(p_.b).unexpected;
                if (expected) {
                    do_post();
                }
                ucs_status_t st;
                if (vsend) {
                    st = uct_tm_proto_sendv(p_.ab, siov, 3, kIgnoredTag, &q, &s);
                } else {
                    st = uct_tm_proto_send(p_.ab, msg.data(), len, kIgnoredTag, &q, &s);
                }
                ASSERT_TRUE((st == UCS_OK) || (st == UCS_INPROGRESS)) << ucs_status_string(st);
                if (st == UCS_OK) {
                    s = 0;
                }
                if (!expected) {
                    ASSERT_TRUE(wait_unexpected_count(unexpected0 + 1));
                    do_post();
                }
                uct_tm_proto_info_t info;
                ASSERT_EQ(UCS_OK, wait_request(p_, p_.b, r, &info));
                if (s != 0) {
                    ASSERT_EQ(UCS_OK, wait_request(p_, p_.a, s));
                }
                expect_untagged(info, len);
                if (vrecv) {
                    std::vector<char> got;
                    got.insert(got.end(), e0.begin(), e0.begin() + cut1);
                    got.insert(got.end(), e2.begin(), e2.begin() + (cut2 - cut1));
                    got.insert(got.end(), e3.begin(), e3.begin() + (len - cut2));
                    EXPECT_EQ(got, msg);
                    EXPECT_EQ(e0[cut1], 'x');
                    EXPECT_EQ(e1[0], 'x');
                    EXPECT_EQ(e2[cut2 - cut1], 'x');
                    EXPECT_EQ(e3[len - cut2], 'x');
                } else {
                    EXPECT_TRUE(same_bytes(whole.data(), msg.data(), len));
                    EXPECT_EQ(whole[len], 'x');
                }
            }
        }
    }
    expect_no_requests();
}

/* MORE (FI_MORE) batches of untagged and tagged messages interleaved, with
 * remote data, then a plain send: every message arrives once, each kind to
 * its own receives, in sending order. */
TEST_P(UntaggedTest, MoreBatchesKeepKindsAndOrder) {
    /* one message each way first, so that a transport that connects on first use has */
    for (int dir = 0; dir < 2; ++dir) {
        uint32_t               v = 1, got = 0;
        uct_tm_proto_request_t r, s;
        uct_tm_proto_worker_h  to = dir ? p_.a : p_.b, from = dir ? p_.b : p_.a;
        ASSERT_EQ(UCS_INPROGRESS,
                  uct_tm_proto_recv(to, &got, sizeof(got), 0xeeee, kAll, nullptr, nullptr, &r));
        const ucs_status_t st =
                uct_tm_proto_send(dir ? p_.ba : p_.ab, &v, sizeof(v), 0xeeee, nullptr, &s);
        ASSERT_TRUE((st == UCS_OK) || (st == UCS_INPROGRESS));
        ASSERT_EQ(UCS_OK, wait_request(p_, to, r));
        if (st == UCS_INPROGRESS) {
            ASSERT_EQ(UCS_OK, wait_request(p_, from, s));
        }
    }
    constexpr uint32_t             kCount = 40; /* half untagged, half tagged */
    std::vector<std::vector<char>> data;
    for (uint32_t i = 0; i < kCount; ++i) {
        const bool   untagged = (i % 2) == 0;
        const bool   more     = i + 1 < kCount;
        const size_t len      = (i * 37) % 700;
        data.push_back(pattern(len, 300 + i));
        const unsigned flags = (untagged ? kU : 0u) | (more ? unsigned{UCT_TM_PROTO_SEND_MORE} : 0u);
        ASSERT_EQ(UCS_OK, send(data[i].data(), len, 0x42, flags, uint64_t(i))) << i;
    }
    for (uint32_t k = 0; k < kCount / 2; ++k) {
        std::vector<char>   ubuf(701, 'x'), tbuf(701, 'x');
        uct_tm_proto_info_t iu, it;
        auto                ru = post_u(ubuf.data(), 700);
        auto                rt = post(tbuf.data(), 700, 0x42, kAll);
        ASSERT_EQ(UCS_OK, wait_request(p_, p_.b, ru, &iu)) << k;
        ASSERT_EQ(UCS_OK, wait_request(p_, p_.b, rt, &it)) << k;
        const uint32_t iu_expect = 2 * k, it_expect = 2 * k + 1;
        ASSERT_EQ(iu.data, uint64_t(iu_expect)) << "untagged receive " << k << " took another message";
        expect_untagged(iu, data[iu_expect].size(), uint64_t(iu_expect));
        EXPECT_TRUE(same_bytes(ubuf.data(), data[iu_expect].data(), iu.length)) << k;
        EXPECT_EQ(ubuf[iu.length], 'x');
        ASSERT_EQ(it.data, uint64_t(it_expect)) << "tagged receive " << k << " took another message";
        EXPECT_EQ(it.flags, unsigned{UCT_TM_PROTO_INFO_REMOTE_DATA});
        EXPECT_EQ(it.tag, 0x42u);
        EXPECT_EQ(it.length, data[it_expect].size());
        EXPECT_TRUE(same_bytes(tbuf.data(), data[it_expect].data(), it.length)) << k;
    }
    spin(p_, 200);
    expect_no_requests();
}

/* A posted untagged receive cancelled completes once, with
 * UCS_ERR_CANCELED; a later message goes to the next receive, not into
 * the cancelled one's buffer. */
TEST_P(UntaggedTest, CancelCompletesOnce) {
    CallCount                calls;
    uct_tm_proto_op_params_t q = {};
    q.flags                    = kU;
    q.cb                       = CallCount::cb;
    q.arg                      = &calls;
    std::vector<char>      buf(64, 'x');
    uct_tm_proto_request_t r = 0;
    ASSERT_EQ(UCS_INPROGRESS, uct_tm_proto_recv(p_.b, buf.data(), buf.size(), 0, 0, nullptr, &q, &r));
    EXPECT_EQ(UCS_OK, uct_tm_proto_request_cancel(p_.b, r));
    ASSERT_TRUE(wait_for(p_, [&] { return calls.n > 0; }));
    spin(p_, 200);
    EXPECT_EQ(calls.n, 1) << "completed more than once";
    EXPECT_EQ(calls.status, UCS_ERR_CANCELED);
    EXPECT_EQ(calls.req, r);
    EXPECT_EQ(UCS_ERR_NO_ELEM, uct_tm_proto_request_cancel(p_.b, r)) << "it completed already";
    uct_tm_proto_info_t info;
    EXPECT_EQ(UCS_ERR_CANCELED, uct_tm_proto_request_test(p_.b, r, &info));
    EXPECT_EQ(UCS_OK, uct_tm_proto_request_release(p_.b, r));
    expect_next_receive_takes(32);
    EXPECT_EQ(calls.n, 1);
    EXPECT_TRUE(std::all_of(buf.begin(), buf.end(), [](char c) { return c == 'x'; }))
            << "the cancelled receive's buffer was written";
    expect_no_requests();
}

INSTANTIATE_TEST_SUITE_P(transports, UntaggedTest, ::testing::ValuesIn(proto_transports()),
                         transport_name);

/* ---- multi-receive buffers ---------------------------------------------------- */

/* One callback of a multi-receive. */
struct MultiCall {
    uct_tm_proto_request_t req;
    uct_tm_proto_info_t    info;
};

struct MultiCalls {
    std::vector<MultiCall> calls;
    /* the final completion (UCT_TM_PROTO_INFO_MULTI_RECV) seen */
    size_t finals() const {
        size_t n = 0;
        for (const auto &c : calls) {
            n += (c.info.flags & UCT_TM_PROTO_INFO_MULTI_RECV) ? 1 : 0;
        }
        return n;
    }
};

void on_multi(void *arg, uct_tm_proto_request_t req, const uct_tm_proto_info_t *info) {
    static_cast<MultiCalls *>(arg)->calls.push_back({req, *info});
}

constexpr size_t kMinMultiRecv = 64;

class MultiRecvTest : public UntaggedTest {
  protected:
    void SetUp() override {
        UntaggedTest::SetUp();
        uct_tm_proto_worker_params_t extra = {};
        extra.field_mask     = UCT_TM_PROTO_WORKER_FIELD_MIN_MULTI_RECV;
        extra.min_multi_recv = kMinMultiRecv;
        reopen(extra);
    }
    /* Posts a multi-receive of `len` bytes at `buf` on b, reporting to `calls`. */
    uct_tm_proto_request_t post_multi(void *buf, size_t len, MultiCalls *calls,
                                      uct_tm_proto_ep_h src = nullptr) {
        uct_tm_proto_op_params_t q = {};
        q.flags                    = kU | UCT_TM_PROTO_RECV_MULTI;
        q.cb                       = on_multi;
        q.arg                      = calls;
        uct_tm_proto_request_t r   = 0;
        EXPECT_EQ(UCS_INPROGRESS, uct_tm_proto_recv(p_.b, buf, len, kIgnoredTag2, kAll, src, &q, &r));
        EXPECT_NE(r, 0u);
        return r;
    }
    bool wait_calls(const MultiCalls &c, size_t n) {
        return wait_for(p_, [&] { return c.calls.size() >= n; });
    }
    /* Call `i` reports a message of `len` bytes (seeded `seed`) placed at
     * `buf + offset` with `room` bytes left there. */
    void expect_message(const MultiCalls &c, size_t i, uct_tm_proto_request_t req, char *buf,
                        size_t offset, size_t room, size_t len, uint32_t seed) {
        ASSERT_LT(i, c.calls.size());
        SCOPED_TRACE(testing::Message() << "message " << i << " (" << len << " B at " << offset << ")");
        const MultiCall &m = c.calls[i];
        EXPECT_EQ(m.req, req) << "not the multi-receive's handle";
        EXPECT_EQ(m.info.flags & UCT_TM_PROTO_INFO_MULTI_RECV, 0u) << "a message's callback is not the last";
        EXPECT_NE(m.info.flags & UCT_TM_PROTO_INFO_UNTAGGED, 0u);
        EXPECT_EQ(m.info.tag, 0u);
        EXPECT_EQ(m.info.length, len) << "the sender's length";
        EXPECT_EQ(m.info.status, (len > room) ? UCS_ERR_MESSAGE_TRUNCATED : UCS_OK);
        EXPECT_EQ(m.info.source, uct_tm_proto_worker_id(p_.a));
        EXPECT_EQ(m.info.ep, p_.ba);
        EXPECT_EQ(m.info.buffer, static_cast<void *>(buf + offset))
                << "not packed after the earlier messages";
        const auto msg = pattern(len, seed);
        EXPECT_TRUE(same_bytes(buf + offset, msg.data(), std::min(len, room)));
    }
    void expect_final(const MultiCalls &c, size_t i, uct_tm_proto_request_t req, char *buf,
                      size_t used, ucs_status_t status) {
        ASSERT_LT(i, c.calls.size());
        const MultiCall &m = c.calls[i];
        EXPECT_EQ(m.req, req);
        EXPECT_NE(m.info.flags & UCT_TM_PROTO_INFO_MULTI_RECV, 0u) << "call " << i << " is not the last";
        EXPECT_EQ(m.info.status, status);
        EXPECT_EQ(m.info.length, used) << "the bytes the messages took";
        EXPECT_EQ(m.info.buffer, static_cast<void *>(buf));
    }
    /* Fills a multi-receive of `cap` bytes with `msg_len`-byte messages sent
     * after the post, for a worker whose min_multi_recv is `min`: every
     * callback, the final one, the request then complete, the next message
     * in the next receive. */
    void pack_until_released(size_t cap, size_t msg_len, size_t min);
};

void MultiRecvTest::pack_until_released(size_t cap, size_t msg_len, size_t min) {
    /* the model: each message at the first free byte, cut to what is left;
     * released once fewer than `min` bytes are left */
    std::vector<size_t> offsets, rooms;
    size_t              used = 0;
    while (cap - used >= min) {
        offsets.push_back(used);
        rooms.push_back(cap - used);
        used += std::min(msg_len, cap - used);
    }
    const size_t n = offsets.size();
    SCOPED_TRACE(testing::Message() << cap << " B buffer, " << msg_len << " B messages, min "
                                    << min << ": " << n << " messages, " << used << " B used");
    std::vector<char> buf(cap + 16, 'g');
    MultiCalls        calls;
    const auto        r = post_multi(buf.data(), cap, &calls);
    for (size_t i = 0; i < n; ++i) {
        const auto msg = pattern(msg_len, static_cast<uint32_t>(i));
        ASSERT_EQ(UCS_OK, send_u(msg.data(), msg_len)) << i;
        if (i + 1 < n) {
            uct_tm_proto_worker_progress(p_.b);
        }
    }
    ASSERT_TRUE(wait_calls(calls, n + 1)) << "got " << calls.calls.size() << " callbacks";
    spin(p_, 200);
    ASSERT_EQ(calls.calls.size(), n + 1) << "callbacks after the last";
    for (size_t i = 0; i < n; ++i) {
        expect_message(calls, i, r, buf.data(), offsets[i], rooms[i], msg_len,
                       static_cast<uint32_t>(i));
    }
    expect_final(calls, n, r, buf.data(), used, UCS_OK);
    EXPECT_EQ(calls.finals(), 1u);
    for (size_t i = cap; i < buf.size(); ++i) {
        ASSERT_EQ(buf[i], 'g') << "byte " << i << " written past the buffer";
    }
    /* the request is complete */
    uct_tm_proto_info_t info;
    EXPECT_EQ(UCS_OK, uct_tm_proto_request_test(p_.b, r, &info));
    EXPECT_NE(info.flags & UCT_TM_PROTO_INFO_MULTI_RECV, 0u);
    EXPECT_EQ(UCS_OK, uct_tm_proto_request_release(p_.b, r));
    EXPECT_EQ(UCS_ERR_INVALID_PARAM, uct_tm_proto_request_release(p_.b, r)) << "released twice";
    /* the next message goes to the next untagged receive */
    const auto        next = pattern(msg_len, static_cast<uint32_t>(n));
    std::vector<char> nbuf(msg_len + 1, 'x');
    auto              r2 = post_u(nbuf.data(), msg_len);
    ASSERT_EQ(UCS_OK, send_u(next.data(), msg_len));
    ASSERT_EQ(UCS_OK, wait_request(p_, p_.b, r2, &info));
    expect_untagged(info, msg_len);
    EXPECT_TRUE(same_bytes(nbuf.data(), next.data(), msg_len));
    EXPECT_EQ(calls.calls.size(), n + 1) << "the released buffer took another message";
    expect_no_requests();
}

/* 4096 B, 100 B messages, min 64: 40 whole messages (96 B left), the 41st
 * cut to 96 B (truncated), 0 B left: released, final with 4096 B used. */
TEST_P(MultiRecvTest, PacksMessagesUntilFewerThanMinLeft) {
    pack_until_released(4096, 100, kMinMultiRecv);
}

/* A larger min_multi_recv releases the buffer earlier: 4096 B, 100 B
 * messages, min 1000: 31 messages, 996 B left. */
TEST_P(MultiRecvTest, LargerMinReleasesEarlier) {
    uct_tm_proto_worker_params_t extra = {};
    extra.field_mask     = UCT_TM_PROTO_WORKER_FIELD_MIN_MULTI_RECV;
    extra.min_multi_recv = 1000;
    reopen(extra);
    pack_until_released(4096, 100, 1000);
}

/* Without the field the worker takes UCX_TM_PROTO_MIN_MULTI_RECV, 64 B by default. */
TEST_P(MultiRecvTest, DefaultMinIs64) {
    if (getenv("UCX_TM_PROTO_MIN_MULTI_RECV") != nullptr) {
        GTEST_SKIP() << "UCX_TM_PROTO_MIN_MULTI_RECV is set";
    }
    reopen(uct_tm_proto_worker_params_t{});
    pack_until_released(4096, 100, 64);
}

/* Messages that arrived before the multi-receive was posted are taken at
 * post time, in arrival order, packed; the receive stays open for more. */
TEST_P(MultiRecvTest, TakesUnexpectedMessagesAtPost) {
    const size_t   lens[] = {100, 0, 300, 8, 1000, 20000};
    const uint64_t unexpected0 = stats_of(p_.b).unexpected;
    for (size_t i = 0; i < std::size(lens); ++i) {
        const auto msg = pattern(lens[i], static_cast<uint32_t>(i));
        ASSERT_EQ(UCS_OK, send_u(msg.data(), lens[i])) << i;
    }
    ASSERT_TRUE(wait_unexpected_count(unexpected0 + std::size(lens)));
    std::vector<char> buf(65536 + 16, 'g');
    MultiCalls        calls;
    const auto        r = post_multi(buf.data(), 65536, &calls);
    ASSERT_TRUE(wait_calls(calls, std::size(lens)));
    /* one more, sent after the post, lands after them */
    const auto late = pattern(500, 99);
    ASSERT_EQ(UCS_OK, send_u(late.data(), late.size()));
    ASSERT_TRUE(wait_calls(calls, std::size(lens) + 1));
    size_t offset = 0;
    for (size_t i = 0; i < std::size(lens); ++i) {
        expect_message(calls, i, r, buf.data(), offset, 65536 - offset, lens[i],
                       static_cast<uint32_t>(i));
        offset += lens[i];
    }
    expect_message(calls, std::size(lens), r, buf.data(), offset, 65536 - offset, 500, 99);
    offset += 500;
    EXPECT_EQ(calls.finals(), 0u) << "released with room left";
    EXPECT_EQ(UCS_INPROGRESS, uct_tm_proto_request_test(p_.b, r, nullptr));
    /* closed by a cancel: the final completion says how much was taken */
    EXPECT_EQ(UCS_OK, uct_tm_proto_request_cancel(p_.b, r));
    ASSERT_TRUE(wait_calls(calls, std::size(lens) + 2));
    expect_final(calls, std::size(lens) + 1, r, buf.data(), offset, UCS_ERR_CANCELED);
    EXPECT_EQ(UCS_ERR_CANCELED, wait_request(p_, p_.b, r));
    expect_no_requests();
}

/* A rendezvous-sized message is placed whole into a buffer with room for
 * it, expected and unexpected, after an eager one. */
TEST_P(MultiRecvTest, RendezvousPlacedWhole) {
    constexpr size_t kCap = 1u << 20;
    std::vector<char> buf(kCap + 16, 'g');
    MultiCalls        calls;
    const auto        small = pattern(100, 1), big = pattern(kRndv, 2), big2 = pattern(kRndv, 3);
    const uint64_t    rndv0 = stats_of(p_.a).rndv_sends, unexpected0 = stats_of(p_.b).unexpected;
    /* unexpected: sent before the post */
    uct_tm_proto_request_t s1 = 0, s2 = 0;
    ASSERT_EQ(UCS_OK, send_u(small.data(), small.size()));
    ASSERT_EQ(UCS_INPROGRESS, send_u(big.data(), kRndv, 0, std::nullopt, &s1));
    ASSERT_TRUE(wait_unexpected_count(unexpected0 + 2));
    const auto r = post_multi(buf.data(), kCap, &calls);
    ASSERT_TRUE(wait_calls(calls, 2));
    ASSERT_EQ(UCS_OK, wait_request(p_, p_.a, s1));
    /* expected: sent after */
    ASSERT_EQ(UCS_INPROGRESS, send_u(big2.data(), kRndv, 0, std::nullopt, &s2));
    ASSERT_TRUE(wait_calls(calls, 3));
    ASSERT_EQ(UCS_OK, wait_request(p_, p_.a, s2));
    EXPECT_EQ(stats_of(p_.a).rndv_sends - rndv0, 2u) << "the large messages were not rendezvous";
    expect_message(calls, 0, r, buf.data(), 0, kCap, 100, 1);
    expect_message(calls, 1, r, buf.data(), 100, kCap - 100, kRndv, 2);
    expect_message(calls, 2, r, buf.data(), 100 + kRndv, kCap - 100 - kRndv, kRndv, 3);
    EXPECT_EQ(calls.finals(), 0u);
    EXPECT_EQ(UCS_OK, uct_tm_proto_request_cancel(p_.b, r));
    ASSERT_TRUE(wait_calls(calls, 4));
    expect_final(calls, 3, r, buf.data(), 100 + 2 * kRndv, UCS_ERR_CANCELED);
    EXPECT_EQ(UCS_ERR_CANCELED, wait_request(p_, p_.b, r));
    for (size_t i = kCap; i < buf.size(); ++i) {
        ASSERT_EQ(buf[i], 'g') << "byte " << i << " written past the buffer";
    }
    expect_no_requests();
}

/* Cancelling an open multi-receive: one final completion, with
 * UCT_TM_PROTO_INFO_MULTI_RECV and UCS_ERR_CANCELED, the bytes taken so far;
 * nothing after it; later messages go elsewhere. Also with nothing taken. */
TEST_P(MultiRecvTest, CancelCompletesOnce) {
    for (int taken : {0, 2}) {
        SCOPED_TRACE(testing::Message() << taken << " messages taken before the cancel");
        std::vector<char> buf(4096, 'g');
        MultiCalls        calls;
        const auto        r = post_multi(buf.data(), buf.size(), &calls);
        for (int i = 0; i < taken; ++i) {
            const auto msg = pattern(100, static_cast<uint32_t>(i));
            ASSERT_EQ(UCS_OK, send_u(msg.data(), msg.size()));
        }
        ASSERT_TRUE(wait_calls(calls, static_cast<size_t>(taken)));
        EXPECT_EQ(UCS_OK, uct_tm_proto_request_cancel(p_.b, r));
        ASSERT_TRUE(wait_calls(calls, static_cast<size_t>(taken) + 1));
        spin(p_, 300);
        ASSERT_EQ(calls.calls.size(), static_cast<size_t>(taken) + 1) << "completed more than once";
        for (int i = 0; i < taken; ++i) {
            expect_message(calls, i, r, buf.data(), 100 * i, buf.size() - 100 * i, 100,
                           static_cast<uint32_t>(i));
        }
        expect_final(calls, taken, r, buf.data(), 100 * taken, UCS_ERR_CANCELED);
        EXPECT_EQ(UCS_ERR_NO_ELEM, uct_tm_proto_request_cancel(p_.b, r)) << "it completed already";
        uct_tm_proto_info_t info;
        EXPECT_EQ(UCS_ERR_CANCELED, uct_tm_proto_request_test(p_.b, r, &info));
        EXPECT_EQ(UCS_OK, uct_tm_proto_request_release(p_.b, r));
        expect_next_receive_takes(100);
        EXPECT_EQ(calls.calls.size(), static_cast<size_t>(taken) + 1);
        for (size_t i = 100 * taken; i < buf.size(); ++i) {
            ASSERT_EQ(buf[i], 'g') << "the cancelled buffer was written at " << i;
        }
    }
    expect_no_requests();
}

/* A cancel that comes after the message that filled a multi-receive was
 * reported -- the receive is released, its final callback maybe not run yet
 * -- finds it final (UCS_ERR_NO_ELEM) and changes nothing: one final
 * callback, UCS_OK, the bytes taken. (The stress test's end met this.) */
TEST_P(MultiRecvTest, CancelAfterTheReleasingMessageFindsItFinal) {
    const size_t      cap = 100 + kMinMultiRecv - 1; /* 100 B leave fewer than min */
    std::vector<char> buf(cap, 'g');
    MultiCalls        calls;
    const auto        r   = post_multi(buf.data(), cap, &calls);
    const auto        msg = pattern(100, 7);
    ASSERT_EQ(UCS_OK, send_u(msg.data(), msg.size()));
    ASSERT_TRUE(wait_calls(calls, 1));
    EXPECT_EQ(UCS_ERR_NO_ELEM, uct_tm_proto_request_cancel(p_.b, r)) << "released: final";
    ASSERT_TRUE(wait_calls(calls, 2));
    spin(p_, 300);
    ASSERT_EQ(calls.calls.size(), 2u) << "completed more than once";
    expect_message(calls, 0, r, buf.data(), 0, cap, 100, 7);
    expect_final(calls, 1, r, buf.data(), 100, UCS_OK);
    EXPECT_EQ(UCS_ERR_NO_ELEM, uct_tm_proto_request_cancel(p_.b, r));
    uct_tm_proto_info_t info;
    EXPECT_EQ(UCS_OK, uct_tm_proto_request_test(p_.b, r, &info));
    EXPECT_EQ(UCS_OK, uct_tm_proto_request_release(p_.b, r));
    expect_no_requests();
}

/* RECV_MULTI without UNTAGGED, without a callback, with USER_REQUEST, with
 * recvv, with length 0: UCS_ERR_INVALID_PARAM, nothing made. */
TEST_P(MultiRecvTest, InvalidParamsRejected) {
    std::vector<char>        buf(4096);
    MultiCalls               calls;
    uct_tm_proto_request_t   r  = 0;
    const unsigned           mu = kU | UCT_TM_PROTO_RECV_MULTI;
    uct_tm_proto_op_params_t q  = {};
    q.cb                        = on_multi;
    q.arg                       = &calls;

    q.flags = UCT_TM_PROTO_RECV_MULTI; /* tagged */
    EXPECT_EQ(UCS_ERR_INVALID_PARAM,
              uct_tm_proto_recv(p_.b, buf.data(), buf.size(), 1, kAll, nullptr, &q, &r))
            << "without UNTAGGED";

    uct_tm_proto_op_params_t nocb = {};
    nocb.flags                    = mu;
    EXPECT_EQ(UCS_ERR_INVALID_PARAM,
              uct_tm_proto_recv(p_.b, buf.data(), buf.size(), 0, 0, nullptr, &nocb, &r))
            << "without a callback";

    alignas(UCT_TM_PROTO_REQUEST_ALIGN) unsigned char mem[UCT_TM_PROTO_REQUEST_SIZE];
    q.flags   = mu | UCT_TM_PROTO_OP_USER_REQUEST;
    q.request = mem;
    EXPECT_EQ(UCS_ERR_INVALID_PARAM,
              uct_tm_proto_recv(p_.b, buf.data(), buf.size(), 0, 0, nullptr, &q, &r))
            << "with USER_REQUEST";
    q.request = nullptr;

    q.flags                     = mu;
    const uct_tm_proto_iov_t iov[2] = {{buf.data(), 2048}, {buf.data() + 2048, 2048}};
    EXPECT_EQ(UCS_ERR_INVALID_PARAM, uct_tm_proto_recvv(p_.b, iov, 2, 0, 0, nullptr, &q, &r))
            << "with recvv";
    EXPECT_EQ(UCS_ERR_INVALID_PARAM, uct_tm_proto_recvv(p_.b, iov, 1, 0, 0, nullptr, &q, &r))
            << "with recvv of one element";

    EXPECT_EQ(UCS_ERR_INVALID_PARAM,
              uct_tm_proto_recv(p_.b, buf.data(), 0, 0, 0, nullptr, &q, &r))
            << "with length 0";

    EXPECT_EQ(stats_of(p_.b).requests, 0u) << "a rejected receive left a request";
    /* nothing was posted: a message goes to the next plain untagged receive */
    const auto        msg = pattern(50, 5);
    std::vector<char> got(50);
    auto              rr = post_u(got.data(), got.size());
    ASSERT_EQ(UCS_OK, send_u(msg.data(), msg.size()));
    ASSERT_EQ(UCS_OK, wait_request(p_, p_.b, rr));
    EXPECT_EQ(got, msg);
    spin(p_, 100);
    EXPECT_TRUE(calls.calls.empty()) << "a rejected multi-receive called back";
    expect_no_requests();
}

INSTANTIATE_TEST_SUITE_P(transports, MultiRecvTest, ::testing::ValuesIn(proto_transports()),
                         transport_name);

/* FI_OPT_MIN_MULTI_RECV is at least 1: min_multi_recv 0 is refused. */
TEST(MultiRecvParams, MinMultiRecvZeroRejected) {
    uct_tm_proto_worker_params_t p = {};
    p.field_mask = UCT_TM_PROTO_WORKER_FIELD_TRANSPORTS | UCT_TM_PROTO_WORKER_FIELD_MIN_MULTI_RECV;
    p.transports = "posix";
    p.min_multi_recv        = 0;
    uct_tm_proto_worker_h w = nullptr;
    EXPECT_EQ(UCS_ERR_INVALID_PARAM, uct_tm_proto_worker_create(&p, &w));
    EXPECT_EQ(w, nullptr);
    p.min_multi_recv = 1;
    ASSERT_EQ(UCS_OK, uct_tm_proto_worker_create(&p, &w));
    uct_tm_proto_worker_destroy(w);
}

/* FI_OPT_MIN_MULTI_RECV after creation: the value reads back; 0 and a
 * null worker are refused, changing nothing. */
TEST(MultiRecvParams, MinMultiRecvSetAfterCreation) {
    uct_tm_proto_worker_params_t p = {};
    p.field_mask = UCT_TM_PROTO_WORKER_FIELD_TRANSPORTS | UCT_TM_PROTO_WORKER_FIELD_MIN_MULTI_RECV;
    p.transports = "posix";
    p.min_multi_recv        = 10;
    uct_tm_proto_worker_h w = nullptr;
    ASSERT_EQ(UCS_OK, uct_tm_proto_worker_create(&p, &w));
    EXPECT_EQ(10u, uct_tm_proto_worker_min_multi_recv(w));
    EXPECT_EQ(UCS_OK, uct_tm_proto_worker_set_min_multi_recv(w, 300));
    EXPECT_EQ(300u, uct_tm_proto_worker_min_multi_recv(w));
    EXPECT_EQ(UCS_ERR_INVALID_PARAM, uct_tm_proto_worker_set_min_multi_recv(w, 0));
    EXPECT_EQ(UCS_ERR_INVALID_PARAM, uct_tm_proto_worker_set_min_multi_recv(nullptr, 5));
    EXPECT_EQ(300u, uct_tm_proto_worker_min_multi_recv(w));
    EXPECT_EQ(0u, uct_tm_proto_worker_min_multi_recv(nullptr));
    uct_tm_proto_worker_destroy(w);
}

/* ---- forged untagged messages ------------------------------------------------ */

/* A raw peer's untagged messages -- a MsgHeader with the flag and a tag, a
 * short one whose AM header (the tag) is set, a batch entry with the flag --
 * are untagged messages with tag 0: probes do not see them, untagged
 * receives take them in arrival order; a batch entry with an unknown flag
 * is dropped. */
TEST(UntaggedWire, ForgedMessagesAreUntaggedWithTagZero) {
    using uct_tm::proto::BatchEntry;
    using uct_tm::proto::BatchHeader;
    using uct_tm::proto::Kind;
    using uct_tm::proto::ShortHeader;
    Pair pair;
    ASSERT_EQ(UCS_OK, make_pair("posix", &pair));
    RawIface raw;
    ASSERT_EQ(UCS_OK, raw.open(pair.b));
    /* a source b has no endpoint to: not bound, its messages are delivered */
    const uint32_t src = (uct_tm_proto_worker_id(pair.a) ^ 0x5eed) & 0x7fffffffu;

    std::vector<char> eager = eager_message(src, 77, 8);
    eager[1]                = uct_tm::proto::kFlagUntagged; /* MsgHeader::flags */
    raw.send(uct_tm::proto::kAmId, eager, pair.b);

    std::vector<char> shrt(sizeof(uint64_t) + sizeof(ShortHeader) + 5, 'S');
    const uint64_t    am_tag = 0x1234;
    const ShortHeader sh     = {src, 0};
    memcpy(shrt.data(), &am_tag, sizeof(am_tag));
    memcpy(shrt.data() + sizeof(am_tag), &sh, sizeof(sh));
    raw.send(uct_tm::proto::kAmShortUntaggedId, shrt, pair.b);

    std::vector<char> batch(sizeof(BatchHeader));
    BatchHeader       bh = {};
    bh.kind              = Kind::kBatch;
    bh.source            = src;
    memcpy(batch.data(), &bh, sizeof(bh));
    for (uint8_t flags : {uint8_t{uct_tm::proto::kFlagUntagged}, uint8_t{0x10}}) {
        BatchEntry e = {};
        e.tag        = 78;
        e.length     = 4;
        e.flags      = flags;
        const size_t at = batch.size();
        batch.resize(at + sizeof(e) + e.length, 'B');
        memcpy(batch.data() + at, &e, sizeof(e));
    }
    raw.send(uct_tm::proto::kAmId, batch, pair.b);
    progress(pair.b);

    uct_tm_proto_info_t info;
    EXPECT_EQ(UCS_ERR_NO_ELEM, uct_tm_proto_probe(pair.b, 0, 0, nullptr, UCT_TM_PROTO_PROBE_PEEK,
                                                  &info, nullptr))
            << "probes see tagged messages only";
    uct_tm_proto_op_params_t q = {};
    q.flags                    = kU;
    for (size_t len : {size_t{8}, size_t{5}, size_t{4}}) {
        char                   buf[16];
        uct_tm_proto_request_t r = 0;
        ASSERT_EQ(UCS_INPROGRESS, uct_tm_proto_recv(pair.b, buf, sizeof(buf), 0, 0, nullptr, &q, &r));
        progress(pair.b);
        ASSERT_EQ(UCS_OK, uct_tm_proto_request_test(pair.b, r, &info)) << len << " B";
        EXPECT_EQ(info.length, len);
        EXPECT_EQ(info.tag, 0u);
        EXPECT_EQ(info.flags, unsigned{UCT_TM_PROTO_INFO_UNTAGGED});
        EXPECT_EQ(info.source, src);
        EXPECT_EQ(UCS_OK, uct_tm_proto_request_release(pair.b, r));
    }
    /* the entry with an unknown flag was dropped: nothing more */
    char                   buf[16];
    uct_tm_proto_request_t r = 0;
    ASSERT_EQ(UCS_INPROGRESS, uct_tm_proto_recv(pair.b, buf, sizeof(buf), 0, 0, nullptr, &q, &r));
    progress(pair.b);
    EXPECT_EQ(UCS_INPROGRESS, uct_tm_proto_request_test(pair.b, r, nullptr));
    EXPECT_EQ(UCS_OK, uct_tm_proto_request_cancel(pair.b, r));
    EXPECT_EQ(UCS_ERR_CANCELED, uct_tm_proto_request_test(pair.b, r, nullptr));
    EXPECT_EQ(UCS_OK, uct_tm_proto_request_release(pair.b, r));
    EXPECT_EQ(stats_of(pair.b).requests, 0u);
    destroy_pair(&pair);
}

}  // namespace
}  // namespace uct_tm_test
