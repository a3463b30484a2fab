/*
 * Remote data (UCT_TM_PROTO_SEND_REMOTE_DATA, fi_tagged's FI_REMOTE_CQ_DATA):
 * 64 bits with a present flag, over every protocol a message can take --
 * short, eager, fragmented, rendezvous, sync; expected and unexpected; the
 * transport's tag list (where remote data above 32 bits moves the message
 * to a rendezvous request) and software matching -- and in sending order.
 * PEEK reports it, probe_copy copies what is here of a message. Receives
 * posted before any endpoint exists take messages sent later.
 */
#include "proto_fixture.h"

#include <algorithm>
#include <cstring>
#include <optional>
#include <vector>

namespace uct_tm_test {
namespace {

constexpr uint64_t kAll = ~uint64_t{0};
/* 0 and 2^32 - 1 fit beside the source word; the others do not. */
const std::optional<uint64_t> kData[] = {std::nullopt, 0, 0xffffffffull, 0x100000000ull,
                                         0xdeadbeef00c0ffeeull, ~uint64_t{0}};
/* short (am_short), one AM, fragmented eager, rendezvous */
constexpr size_t kSizes[] = {0, 8, 2000, 20000, 300000};

using RemoteDataTest = ProtoTest;

void expect_data(const uct_tm_proto_info_t &info, const std::optional<uint64_t> &data,
                 const char *what) {
    if (data) {
        EXPECT_EQ(info.flags, unsigned{UCT_TM_PROTO_INFO_REMOTE_DATA}) << what;
        EXPECT_EQ(info.data, *data) << what;
    } else {
        EXPECT_EQ(info.flags, 0u) << what << ": no remote data was sent";
    }
}

TEST_P(RemoteDataTest, EveryProtocolExpectedAndUnexpected) {
    uint32_t seed = 0;
    for (size_t len : kSizes) {
        for (const auto &data : kData) {
            for (bool expected : {true, false}) {
                for (unsigned sync : {0u, unsigned{UCT_TM_PROTO_SEND_SYNC}}) {
                    SCOPED_TRACE(testing::Message()
                                 << len << " B, data " << (data ? *data : 0) << (data ? "" : " (none)")
                                 << (expected ? ", expected" : ", unexpected")
                                 << (sync ? ", sync" : ""));
                    const auto        msg = pattern(len, ++seed);
                    std::vector<char> buf(len + 8, 'x');
                    const uint64_t    tag = 0x500 + seed;
                    uct_tm_proto_request_t r = 0, s = 0;
                    if (expected) {
                        r = post(buf.data(), len, tag, kAll);
                    }
                    const ucs_status_t st = send(msg.data(), len, tag, sync, data, &s);
                    ASSERT_TRUE((st == UCS_OK) || (st == UCS_INPROGRESS)) << ucs_status_string(st);
                    if (!expected) {
                        ASSERT_TRUE(wait_unexpected(tag));
                        uct_tm_proto_info_t peek;
                        ASSERT_EQ(UCS_OK, uct_tm_proto_probe(p_.b, tag, kAll, nullptr,
                                                             UCT_TM_PROTO_PROBE_PEEK, &peek,
                                                             nullptr));
                        expect_data(peek, data, "PEEK");
                        EXPECT_EQ(peek.length, len);
                        r = post(buf.data(), len, tag, kAll);
                    }
                    uct_tm_proto_info_t info;
                    ASSERT_EQ(UCS_OK, wait_request(p_, p_.b, r, &info));
                    if (s != 0) {
                        ASSERT_EQ(UCS_OK, wait_request(p_, p_.a, s));
                    }
                    expect_data(info, data, "receive");
                    EXPECT_EQ(info.length, len);
                    EXPECT_EQ(info.source, uct_tm_proto_worker_id(p_.a));
                    EXPECT_TRUE(same_bytes(buf.data(), msg.data(), len));
                    EXPECT_EQ(buf[len], 'x');
                }
            }
        }
    }
}

/* Messages of one sender with and without remote data, narrow and wide, of
 * every size, match in sending order: wide data over a tag list takes the
 * rendezvous request, which must not overtake nor be overtaken. */
/* fi_tinjectdata's sends: INJECT | REMOTE_DATA. A small one with narrow
 * data leaves in the call (UCS_OK, no request), directed receive or not;
 * wide data or a larger message takes the general path. Either way the
 * buffer is the caller's again at return and the data arrives. */
TEST_P(RemoteDataTest, InjectWithDataLeavesAtOnce) {
    transfer(8, 0x8ff, 1, nullptr); /* a transport that connects lazily (tcp) is connected */
    uint32_t seed = 0;
    for (size_t len : {size_t{0}, size_t{8}, size_t{2000}}) {
        for (const auto &data : kData) {
            for (bool directed : {false, true}) {
                SCOPED_TRACE(testing::Message()
                             << len << " B, data " << (data ? *data : 0) << (data ? "" : " (none)")
                             << (directed ? ", directed" : ""));
                auto                     msg = pattern(len, ++seed);
                const auto               ref = msg;
                std::vector<char>        buf(len + 8, 'x');
                const uint64_t           tag    = 0x900 + seed;
                uct_tm_proto_request_t   r      = post(buf.data(), len, tag, kAll,
                                                directed ? p_.ba : nullptr);
                uct_tm_proto_op_params_t params = {};
                params.flags                    = UCT_TM_PROTO_SEND_INJECT |
                               (data ? UCT_TM_PROTO_SEND_REMOTE_DATA : 0);
                params.data              = data.value_or(0);
                uct_tm_proto_request_t s = 0;
                const ucs_status_t st = uct_tm_proto_send(p_.ab, msg.data(), len, tag, &params, &s);
                const bool         narrow = !data || ((*data >> 32) == 0);
                if ((len <= 8) && narrow) {
                    EXPECT_EQ(UCS_OK, st) << "a small inject with narrow data leaves in the call";
                }
                ASSERT_TRUE((st == UCS_OK) || (st == UCS_INPROGRESS)) << ucs_status_string(st);
                std::fill(msg.begin(), msg.end(), 'z'); /* INJECT: the buffer is ours again */
                uct_tm_proto_info_t info;
                ASSERT_EQ(UCS_OK, wait_request(p_, p_.b, r, &info));
                if (st == UCS_INPROGRESS) {
                    ASSERT_EQ(UCS_OK, wait_request(p_, p_.a, s));
                }
                expect_data(info, data, "receive");
                EXPECT_EQ(info.length, len);
                EXPECT_TRUE(same_bytes(buf.data(), ref.data(), len));
                EXPECT_EQ(buf[len], 'x');
            }
        }
    }
}

TEST_P(RemoteDataTest, MixedDataKeepsSendingOrder) {
    constexpr uint32_t kCount = 60;
    std::vector<std::vector<char>>       payloads;
    std::vector<uct_tm_proto_request_t>  sends;
    for (uint32_t i = 0; i < kCount; ++i) {
        const size_t len = kSizes[(i * 7) % std::size(kSizes)];
        payloads.push_back(pattern(len, i));
        const auto &data = kData[i % std::size(kData)];
        uct_tm_proto_request_t s = 0;
        const ucs_status_t st = send(payloads[i].data(), len, 42, 0, data, &s);
        ASSERT_TRUE((st == UCS_OK) || (st == UCS_INPROGRESS)) << i;
        if (s != 0) {
            sends.push_back(s);
        }
        uct_tm_proto_worker_progress(p_.a);
    }
    for (uint32_t i = 0; i < kCount; ++i) {
        std::vector<char>   buf(300000);
        uct_tm_proto_info_t info;
        auto                r = post(buf.data(), buf.size(), 42, kAll);
        ASSERT_EQ(UCS_OK, wait_request(p_, p_.b, r, &info)) << i;
        ASSERT_EQ(info.length, payloads[i].size()) << "receive " << i << " took another message";
        EXPECT_TRUE(same_bytes(buf.data(), payloads[i].data(), info.length)) << i;
        expect_data(info, kData[i % std::size(kData)], "in order");
    }
    for (auto s : sends) {
        EXPECT_EQ(UCS_OK, wait_request(p_, p_.a, s));
    }
}

TEST_P(RemoteDataTest, ProbeCopiesWhatIsHere) {
    const auto small = pattern(3000, 1);
    const auto large = pattern(300000, 2);
    /* narrow data: over a tag list wide data would make it a rendezvous request */
    ASSERT_EQ(UCS_OK, send(small.data(), small.size(), 0x61, 0, 0x89abcdefull));
    uct_tm_proto_request_t s = 0;
    const ucs_status_t     st = send(large.data(), large.size(), 0x62, 0, std::nullopt, &s);
    ASSERT_TRUE((st == UCS_OK) || (st == UCS_INPROGRESS));
    ASSERT_TRUE(wait_unexpected(0x61));
    ASSERT_TRUE(wait_unexpected(0x62));

    /* a buffer shorter than the message: its first bytes, nothing past it */
    std::vector<char>   buf(1000 + 8, 'g');
    size_t              copied = 7;
    uct_tm_proto_info_t info;
    ASSERT_EQ(UCS_OK, uct_tm_proto_probe_copy(p_.b, 0x61, kAll, nullptr, UCT_TM_PROTO_PROBE_PEEK,
                                              buf.data(), 1000, &copied, &info, nullptr));
    EXPECT_EQ(copied, 1000u);
    EXPECT_EQ(info.length, small.size());
    expect_data(info, 0x89abcdefull, "probe_copy");
    EXPECT_TRUE(same_bytes(buf.data(), small.data(), 1000));
    for (size_t i = 1000; i < buf.size(); ++i) {
        ASSERT_EQ(buf[i], 'g') << "byte " << i << " written past the buffer";
    }
    /* a longer buffer: the whole message; PEEK left it in place */
    std::vector<char> all(8000, 'g');
    ASSERT_EQ(UCS_OK, uct_tm_proto_probe_copy(p_.b, 0x61, kAll, nullptr, UCT_TM_PROTO_PROBE_PEEK,
                                              all.data(), all.size(), &copied, nullptr, nullptr));
    EXPECT_EQ(copied, small.size());
    EXPECT_TRUE(same_bytes(all.data(), small.data(), small.size()));
    EXPECT_EQ(all[small.size()], 'g');

    /* a rendezvous request: its data is still at the sender */
    ASSERT_EQ(UCS_OK, uct_tm_proto_probe_copy(p_.b, 0x62, kAll, nullptr, UCT_TM_PROTO_PROBE_PEEK,
                                              all.data(), all.size(), &copied, &info, nullptr));
    EXPECT_EQ(info.length, large.size());
    EXPECT_EQ(copied, 0u);

    /* bad arguments change nothing */
    EXPECT_EQ(UCS_ERR_INVALID_PARAM,
              uct_tm_proto_probe_copy(p_.b, 0x61, kAll, nullptr, UCT_TM_PROTO_PROBE_PEEK, nullptr,
                                      10, &copied, &info, nullptr));
    EXPECT_EQ(copied, 0u);
    EXPECT_EQ(UCS_ERR_INVALID_PARAM,
              uct_tm_proto_probe_copy(nullptr, 0x61, kAll, nullptr, UCT_TM_PROTO_PROBE_PEEK,
                                      all.data(), all.size(), &copied, &info, nullptr));
    EXPECT_EQ(UCS_ERR_NO_ELEM,
              uct_tm_proto_probe_copy(p_.b, 0x63, kAll, nullptr, UCT_TM_PROTO_PROBE_PEEK,
                                      all.data(), all.size(), &copied, &info, nullptr));
    EXPECT_EQ(copied, 0u);

    /* CLAIM with a copy, then the claimed message received whole */
    uct_tm_proto_msg_t msg = 0;
    std::fill(all.begin(), all.end(), 'g');
    ASSERT_EQ(UCS_OK, uct_tm_proto_probe_copy(p_.b, 0x61, kAll, nullptr,
                                              UCT_TM_PROTO_PROBE_PEEK | UCT_TM_PROTO_PROBE_CLAIM,
                                              all.data(), 16, &copied, &info, &msg));
    EXPECT_EQ(copied, 16u);
    EXPECT_TRUE(same_bytes(all.data(), small.data(), 16));
    std::vector<char>      whole(small.size());
    uct_tm_proto_request_t r;
    ASSERT_EQ(UCS_INPROGRESS, uct_tm_proto_recv_claimed(p_.b, msg, whole.data(), whole.size(),
                                                        nullptr, &r));
    ASSERT_EQ(UCS_OK, wait_request(p_, p_.b, r, &info));
    EXPECT_EQ(whole, small);
    expect_data(info, 0x89abcdefull, "recv_claimed");

    /* DISCARD with a copy: the copy is made, the message gone, the sender done */
    ASSERT_EQ(UCS_OK, uct_tm_proto_probe_copy(p_.b, 0x62, kAll, nullptr,
                                              UCT_TM_PROTO_PROBE_PEEK | UCT_TM_PROTO_PROBE_DISCARD,
                                              nullptr, 0, &copied, &info, nullptr));
    EXPECT_EQ(copied, 0u);
    EXPECT_EQ(UCS_ERR_NO_ELEM, uct_tm_proto_probe(p_.b, 0x62, kAll, nullptr,
                                                  UCT_TM_PROTO_PROBE_PEEK, &info, nullptr));
    if (s != 0) {
        EXPECT_EQ(UCS_OK, wait_request(p_, p_.a, s));
    }
}

/* Receives posted on a worker that has no endpoint yet take the messages
 * that peer sends once both are wired up, in posting order. */
TEST_P(RemoteDataTest, ReceivesPostedBeforeAnyEndpoint) {
    destroy_pair(&p_);
    uct_tm_proto_worker_params_t params = {};
    std::string                  tls;
    apply_transport(GetParam(), &params, &tls);
    ASSERT_EQ(UCS_OK, uct_tm_proto_worker_create(&params, &p_.a));
    ASSERT_EQ(UCS_OK, uct_tm_proto_worker_create(&params, &p_.b));
    constexpr int          kCount = 6;
    constexpr size_t       kCap   = 300000;
    std::vector<std::vector<char>> bufs(kCount, std::vector<char>(kCap + 8, 'x'));
    uct_tm_proto_request_t rs[kCount];
    for (int i = 0; i < kCount; ++i) {
        ASSERT_EQ(UCS_INPROGRESS, uct_tm_proto_recv(p_.b, bufs[i].data(), kCap, 9, kAll,
                                                    nullptr, nullptr, &rs[i]));
    }
    for (int i = 0; i < 100; ++i) {
        uct_tm_proto_worker_progress(p_.b);
    }
    for (int i = 0; i < 2; ++i) {
        uct_tm_proto_worker_h from = i ? p_.b : p_.a;
        uct_tm_proto_worker_h to   = i ? p_.a : p_.b;
        size_t                len  = 0;
        uct_tm_proto_worker_address(to, nullptr, &len);
        std::vector<char> addr(len);
        ASSERT_EQ(UCS_OK, uct_tm_proto_worker_address(to, addr.data(), &len));
        const ucs_status_t st = uct_tm_proto_ep_create(from, addr.data(), len, i ? &p_.ba : &p_.ab);
        ASSERT_TRUE((st == UCS_OK) || (st == UCS_INPROGRESS)) << ucs_status_string(st);
    }
    ASSERT_EQ(UCS_OK, connect_eps(p_.ab, p_.ba));
    const size_t lens[kCount] = {0, 8, 2000, 20000, 300000, 64};
    std::vector<uct_tm_proto_request_t> sends;
    for (int i = 0; i < kCount; ++i) {
        const auto data = pattern(lens[i], i);
        uct_tm_proto_request_t s = 0;
        const ucs_status_t     st = send(data.data(), lens[i], 9, UCT_TM_PROTO_SEND_INJECT,
                                         uint64_t(i), &s);
        ASSERT_TRUE((st == UCS_OK) || (st == UCS_INPROGRESS));
        if (s != 0) {
            sends.push_back(s);
        }
    }
    for (int i = 0; i < kCount; ++i) {
        uct_tm_proto_info_t info;
        ASSERT_EQ(UCS_OK, wait_request(p_, p_.b, rs[i], &info)) << i;
        EXPECT_EQ(info.length, lens[i]) << "receive " << i;
        expect_data(info, uint64_t(i), "posted before the endpoints");
        EXPECT_EQ(info.ep, p_.ba);
        EXPECT_TRUE(same_bytes(bufs[i].data(), pattern(lens[i], i).data(), lens[i])) << i;
        EXPECT_EQ(bufs[i][lens[i]], 'x') << i;
    }
    for (auto s : sends) {
        EXPECT_EQ(UCS_OK, wait_request(p_, p_.a, s));
    }
}

INSTANTIATE_TEST_SUITE_P(transports, RemoteDataTest, ::testing::ValuesIn(proto_transports()),
                         transport_name);

/* Worker ids are 31 bits: the top bit of a source word flags remote data. */
TEST(RemoteDataIds, WorkerIdsBelowTwoToThe31) {
    uct_tm_proto_worker_params_t params = {};
    params.field_mask = UCT_TM_PROTO_WORKER_FIELD_TRANSPORTS | UCT_TM_PROTO_WORKER_FIELD_ID;
    params.transports = "posix";
    uct_tm_proto_worker_h w = nullptr;
    params.id = 0x80000000u;
    EXPECT_EQ(UCS_ERR_INVALID_PARAM, uct_tm_proto_worker_create(&params, &w));
    EXPECT_EQ(w, nullptr);
    params.id = 0x7fffffffu;
    ASSERT_EQ(UCS_OK, uct_tm_proto_worker_create(&params, &w));
    EXPECT_EQ(uct_tm_proto_worker_id(w), 0x7fffffffu);
    uct_tm_proto_worker_destroy(w);
    params.field_mask = UCT_TM_PROTO_WORKER_FIELD_TRANSPORTS;
    for (int i = 0; i < 64; ++i) { /* random ids */
        ASSERT_EQ(UCS_OK, uct_tm_proto_worker_create(&params, &w));
        EXPECT_NE(uct_tm_proto_worker_id(w), 0u);
        EXPECT_LE(uct_tm_proto_worker_id(w), 0x7fffffffu);
        uct_tm_proto_worker_destroy(w);
    }
}

}  // namespace
}  // namespace uct_tm_test
