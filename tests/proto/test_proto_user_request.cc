/*
 * Requests in the caller's memory (UCT_TM_PROTO_OP_USER_REQUEST) over each
 * transport: completion exactly once through the status word (and the
 * callback), cancellation, truncation, posting order mixed with handle
 * requests, destroying the endpoint or the worker with such requests
 * outstanding, and bad input.
 */
#include "proto_fixture.h"

#include <cstring>
#include <memory>

namespace uct_tm_test {
namespace {

constexpr uint64_t kAll = ~uint64_t{0};
/* 8: one eager message, 20000: fragmented eager, 300000: rendezvous */
const size_t kSizes[] = {0, 8, 20000, 300000};

struct UserRequest {
    alignas(UCT_TM_PROTO_REQUEST_ALIGN) unsigned char bytes[UCT_TM_PROTO_REQUEST_SIZE];

    ucs_status_t status(uct_tm_proto_info_t *info = nullptr) const {
        return uct_tm_proto_request_user_test(bytes, info);
    }
};

using UserRequestTest = ProtoTest;

uct_tm_proto_op_params_t user_params(UserRequest *req, unsigned flags = 0) {
    uct_tm_proto_op_params_t params = {};
    params.flags   = flags | UCT_TM_PROTO_OP_USER_REQUEST;
    params.request = req->bytes;
    return params;
}

bool completed(const Pair &pair, const UserRequest &req) {
    return wait_for(pair, [&] { return req.status() != UCS_INPROGRESS; });
}

/* Every size, receive posted first and not, with a callback: the status word
 * turns final once, the callback runs once with req 0 and the same info, and
 * no handle is made. */
TEST_P(UserRequestTest, CompletesExactlyOnce) {
    for (bool expected : {true, false}) {
        for (size_t len : kSizes) {
            const auto        data = pattern(len, 11);
            std::vector<char> buf(len + 8, 'x');
            UserRequest       rreq;
            struct Seen {
                int                    calls = 0;
                uct_tm_proto_request_t req   = 1;
                uct_tm_proto_info_t    info  = {};
            } seen;
            auto rparams = user_params(&rreq);
            rparams.cb   = [](void *arg, uct_tm_proto_request_t req,
                            const uct_tm_proto_info_t *info) {
                auto *s = static_cast<Seen *>(arg);
                ++s->calls;
                s->req  = req;
                s->info = *info;
            };
            rparams.arg = &seen;
            uct_tm_proto_request_t handle = 1;
            if (expected) {
                ASSERT_EQ(UCS_INPROGRESS, uct_tm_proto_recv(p_.b, buf.data(), len, 3, kAll,
                                                            nullptr, &rparams, &handle));
                EXPECT_EQ(handle, 0u);
            }
            UserRequest        sreq;
            auto               sparams = user_params(&sreq);
            /* remote data (the general send path) with the receive posted
             * first, none (the one-call path) with it unexpected */
            const bool with_data = expected;
            if (with_data) {
                sparams.flags |= UCT_TM_PROTO_SEND_REMOTE_DATA;
                sparams.data   = 0x7700000077ull;
            }
            const ucs_status_t st      = uct_tm_proto_send(p_.ab, data.data(), len, 3, &sparams,
                                                           nullptr);
            ASSERT_TRUE((st == UCS_OK) || (st == UCS_INPROGRESS)) << len;
            if (!expected) {
                ASSERT_TRUE(wait_unexpected(3));
                ASSERT_EQ(UCS_INPROGRESS, uct_tm_proto_recv(p_.b, buf.data(), len, 3, kAll,
                                                            nullptr, &rparams, nullptr));
            }
            ASSERT_TRUE(completed(p_, rreq)) << len;
            if (st == UCS_INPROGRESS) {
                ASSERT_TRUE(completed(p_, sreq)) << len;
                EXPECT_EQ(UCS_OK, sreq.status()) << len;
            }
            uct_tm_proto_info_t info;
            EXPECT_EQ(UCS_OK, rreq.status(&info)) << len;
            EXPECT_EQ(info.length, len);
            EXPECT_EQ(info.tag, 3u);
            if (with_data) {
                EXPECT_EQ(info.flags, unsigned{UCT_TM_PROTO_INFO_REMOTE_DATA});
                EXPECT_EQ(info.data, 0x7700000077ull);
            } else {
                EXPECT_EQ(info.flags, 0u);
            }
            EXPECT_EQ(info.source, uct_tm_proto_worker_id(p_.a));
            EXPECT_EQ(info.ep, p_.ba);
            EXPECT_TRUE(same_bytes(buf.data(), data.data(), len)) << len;
            EXPECT_EQ(buf[len], 'x') << len;
            EXPECT_EQ(seen.calls, 1) << "the status turns final after the callback";
            EXPECT_EQ(seen.req, 0u);
            EXPECT_EQ(seen.info.length, len);
            for (int i = 0; i < 100; ++i) {
                uct_tm_proto_worker_progress(p_.a);
                uct_tm_proto_worker_progress(p_.b);
            }
            EXPECT_EQ(seen.calls, 1) << len;
            EXPECT_EQ(UCS_OK, rreq.status()) << len;
        }
    }
    uct_tm_proto_stats_t st;
    uct_tm_proto_worker_stats(p_.b, &st);
    EXPECT_EQ(st.unexpected_bytes, 0u);
}

/* The memory may be reused as soon as the status is final: one request
 * memory for many receives in turn. */
TEST_P(UserRequestTest, MemoryReusedAfterCompletion) {
    UserRequest rreq;
    auto        params = user_params(&rreq);
    for (uint32_t i = 0; i < 300; ++i) {
        uint32_t got = 0;
        ASSERT_EQ(UCS_INPROGRESS, uct_tm_proto_recv(p_.b, &got, sizeof(got), 8, kAll, nullptr,
                                                    &params, nullptr));
        ASSERT_EQ(UCS_OK, send(&i, sizeof(i), 8));
        ASSERT_TRUE(completed(p_, rreq));
        ASSERT_EQ(UCS_OK, rreq.status());
        ASSERT_EQ(got, i);
    }
}

TEST_P(UserRequestTest, CancelReceive) {
    uint32_t    x = 0;
    UserRequest r, rs;
    auto        params  = user_params(&r);
    auto        sparams = user_params(&rs);
    ASSERT_EQ(UCS_INPROGRESS, uct_tm_proto_recv(p_.b, &x, 4, 1, kAll, nullptr, &params, nullptr));
    ASSERT_EQ(UCS_INPROGRESS, /* source-filtered queue */
              uct_tm_proto_recv(p_.b, &x, 4, 1, kAll, p_.ba, &sparams, nullptr));
    EXPECT_EQ(UCS_ERR_INVALID_PARAM, uct_tm_proto_request_cancel_user(p_.a, r.bytes))
            << "b's request is not a's";
    EXPECT_EQ(UCS_OK, uct_tm_proto_request_cancel_user(p_.b, r.bytes));
    EXPECT_EQ(UCS_OK, uct_tm_proto_request_cancel_user(p_.b, rs.bytes));
    ASSERT_TRUE(completed(p_, r));
    ASSERT_TRUE(completed(p_, rs));
    EXPECT_EQ(UCS_ERR_CANCELED, r.status());
    EXPECT_EQ(UCS_ERR_CANCELED, rs.status());
    EXPECT_EQ(UCS_ERR_NO_ELEM, uct_tm_proto_request_cancel_user(p_.b, r.bytes));
    /* a cancelled receive takes nothing: the message goes to the next one */
    uint32_t v = 42;
    ASSERT_EQ(UCS_OK, send(&v, 4, 1));
    ASSERT_EQ(UCS_INPROGRESS, uct_tm_proto_recv(p_.b, &x, 4, 1, kAll, nullptr, &params, nullptr));
    ASSERT_TRUE(completed(p_, r));
    EXPECT_EQ(UCS_OK, r.status());
    EXPECT_EQ(x, 42u);
    EXPECT_EQ(UCS_ERR_NO_ELEM, uct_tm_proto_request_cancel_user(p_.b, r.bytes));
}

/* A rendezvous send in the caller's memory, cancelled before any receive
 * matched it, completes CANCELED and is never delivered. */
TEST_P(UserRequestTest, CancelRendezvousSend) {
    auto        data = std::make_unique<std::vector<char>>(pattern(300000, 4));
    UserRequest s;
    auto        params = user_params(&s);
    ASSERT_EQ(UCS_INPROGRESS,
              uct_tm_proto_send(p_.ab, data->data(), data->size(), 9, &params, nullptr));
    ASSERT_TRUE(wait_unexpected(9));
    ASSERT_EQ(UCS_OK, uct_tm_proto_request_cancel_user(p_.a, s.bytes));
    ASSERT_TRUE(completed(p_, s));
    EXPECT_EQ(UCS_ERR_CANCELED, s.status());
    data.reset();
    uct_tm_proto_info_t info;
    EXPECT_EQ(UCS_ERR_NO_ELEM, uct_tm_proto_probe(p_.b, 9, kAll, nullptr, UCT_TM_PROTO_PROBE_PEEK,
                                                  &info, nullptr));
}

/* A longer message fills the buffer, never writes past it and completes
 * MESSAGE_TRUNCATED with the sender's length, expected or not, every size. */
TEST_P(UserRequestTest, Truncation) {
    for (bool expected : {true, false}) {
        for (size_t len : {size_t(100), size_t(20000), size_t(300000)}) {
            for (size_t cap : {size_t(0), size_t(50), len - 1}) {
                const auto        data = pattern(len, 3);
                std::vector<char> buf(cap + 64, 'g');
                UserRequest       r;
                auto              params = user_params(&r);
                if (expected) {
                    ASSERT_EQ(UCS_INPROGRESS, uct_tm_proto_recv(p_.b, buf.data(), cap, 5, kAll,
                                                                nullptr, &params, nullptr));
                }
                uct_tm_proto_request_t s  = 0;
                const ucs_status_t     st = send(data.data(), len, 5, 0, 0, &s);
                ASSERT_TRUE((st == UCS_OK) || (st == UCS_INPROGRESS));
                if (!expected) {
                    ASSERT_TRUE(wait_unexpected(5));
                    ASSERT_EQ(UCS_INPROGRESS, uct_tm_proto_recv(p_.b, buf.data(), cap, 5, kAll,
                                                                nullptr, &params, nullptr));
                }
                ASSERT_TRUE(completed(p_, r));
                uct_tm_proto_info_t info;
                EXPECT_EQ(UCS_ERR_MESSAGE_TRUNCATED, r.status(&info)) << len << " into " << cap;
                expect_truncated(buf, cap, data, info);
                if (s != 0) {
                    EXPECT_EQ(UCS_OK, wait_request(p_, p_.a, s));
                }
            }
        }
    }
}

/* Receives in the caller's memory and handle receives, alternately posted
 * for one tag, take the messages in posting order; every size class. */
TEST_P(UserRequestTest, OrderingMixedWithHandleRequests) {
    constexpr uint32_t kCount = 12;
    for (size_t len : {size_t(8), size_t(20000), size_t(300000)}) {
        std::vector<std::vector<char>>      bufs(kCount, std::vector<char>(len));
        std::vector<UserRequest>            users(kCount);
        std::vector<uct_tm_proto_request_t> handles(kCount, 0);
        for (uint32_t i = 0; i < kCount; ++i) {
            if (i % 2 == 0) {
                auto params = user_params(&users[i]);
                ASSERT_EQ(UCS_INPROGRESS, uct_tm_proto_recv(p_.b, bufs[i].data(), len, 6, kAll,
                                                            nullptr, &params, nullptr));
            } else {
                handles[i] = post(bufs[i].data(), len, 6, kAll);
            }
        }
        std::vector<uct_tm_proto_request_t> sends;
        for (uint32_t i = 0; i < kCount; ++i) {
            const auto             data = pattern(len, i);
            uct_tm_proto_request_t s    = 0;
            const ucs_status_t     st   = send(data.data(), len, 6, UCT_TM_PROTO_SEND_INJECT, i,
                                               &s);
            ASSERT_TRUE((st == UCS_OK) || (st == UCS_INPROGRESS));
            if (s != 0) {
                sends.push_back(s);
            }
        }
        for (uint32_t i = 0; i < kCount; ++i) {
            uct_tm_proto_info_t info;
            if (i % 2 == 0) {
                ASSERT_TRUE(completed(p_, users[i]));
                EXPECT_EQ(UCS_OK, users[i].status(&info));
            } else {
                EXPECT_EQ(UCS_OK, wait_request(p_, p_.b, handles[i], &info));
            }
            EXPECT_EQ(info.data, i) << "receive " << i << " of " << len << " B";
            EXPECT_EQ(bufs[i], pattern(len, i)) << "receive " << i << " of " << len << " B";
        }
        for (auto s : sends) {
            EXPECT_EQ(UCS_OK, wait_request(p_, p_.a, s));
        }
    }
}

/* Destroying the endpoint completes the sends in the caller's memory using
 * it (CANCELED, at the next progress); destroying the worker completes its
 * receives, offloaded or in software, at once. */
TEST_P(UserRequestTest, DestroyWithOutstandingRequests) {
    uint64_t    x = 0, y = 0;
    UserRequest r1, r2;
    auto        p1 = user_params(&r1);
    auto        p2 = user_params(&r2);
    ASSERT_EQ(UCS_INPROGRESS, uct_tm_proto_recv(p_.b, &x, sizeof(x), 14, kAll, nullptr, &p1,
                                                nullptr));
    ASSERT_EQ(UCS_INPROGRESS, /* source filter: held in software */
              uct_tm_proto_recv(p_.b, &y, sizeof(y), 14, kAll, p_.ba, &p2, nullptr));

    const auto  data = pattern(300000, 5);
    UserRequest s;
    auto        sparams = user_params(&s);
    ASSERT_EQ(UCS_INPROGRESS,
              uct_tm_proto_send(p_.ab, data.data(), data.size(), 4, &sparams, nullptr));
    uct_tm_proto_ep_destroy(p_.ab);
    p_.ab = nullptr;
    ASSERT_TRUE(completed(p_, s));
    EXPECT_EQ(UCS_ERR_CANCELED, s.status());

    EXPECT_EQ(UCS_INPROGRESS, r1.status());
    EXPECT_EQ(UCS_INPROGRESS, r2.status());
    uct_tm_proto_worker_destroy(p_.b);
    p_.b  = nullptr;
    p_.ba = nullptr;
    EXPECT_EQ(UCS_ERR_CANCELED, r1.status());
    EXPECT_EQ(UCS_ERR_CANCELED, r2.status());
}

TEST_P(UserRequestTest, BadInput) {
    uint64_t                 x = 0;
    UserRequest              r;
    uct_tm_proto_op_params_t params = {};
    params.flags                    = UCT_TM_PROTO_OP_USER_REQUEST; /* request NULL */
    uct_tm_proto_request_t h        = 0;
    EXPECT_EQ(UCS_ERR_INVALID_PARAM,
              uct_tm_proto_recv(p_.b, &x, sizeof(x), 1, kAll, nullptr, &params, &h));
    EXPECT_EQ(UCS_ERR_INVALID_PARAM, uct_tm_proto_send(p_.ab, &x, sizeof(x), 1, &params, &h));
    params.request = r.bytes + 1; /* misaligned */
    EXPECT_EQ(UCS_ERR_INVALID_PARAM,
              uct_tm_proto_recv(p_.b, &x, sizeof(x), 1, kAll, nullptr, &params, &h));
    EXPECT_EQ(UCS_ERR_INVALID_PARAM, uct_tm_proto_send(p_.ab, &x, sizeof(x), 1, &params, &h));
    /* without the flag a handle pointer is still needed */
    params.flags = 0;
    EXPECT_EQ(UCS_ERR_INVALID_PARAM,
              uct_tm_proto_recv(p_.b, &x, sizeof(x), 1, kAll, nullptr, &params, nullptr));
    /* cancel: NULL, misaligned, memory holding no request */
    EXPECT_EQ(UCS_ERR_INVALID_PARAM, uct_tm_proto_request_cancel_user(p_.b, nullptr));
    EXPECT_EQ(UCS_ERR_INVALID_PARAM, uct_tm_proto_request_cancel_user(p_.b, r.bytes + 1));
    memset(r.bytes, 0, sizeof(r.bytes));
    auto *pub   = reinterpret_cast<uct_tm_proto_request_status_t *>(r.bytes);
    pub->status = UCS_INPROGRESS;
    EXPECT_EQ(UCS_ERR_INVALID_PARAM, uct_tm_proto_request_cancel_user(p_.b, r.bytes));
    memset(r.bytes, 0x5a, sizeof(r.bytes));
    pub->status = UCS_INPROGRESS;
    EXPECT_EQ(UCS_ERR_INVALID_PARAM, uct_tm_proto_request_cancel_user(p_.b, r.bytes));
    EXPECT_EQ(UCS_ERR_INVALID_PARAM, uct_tm_proto_request_cancel_user(nullptr, r.bytes));
}

INSTANTIATE_TEST_SUITE_P(transports, UserRequestTest, ::testing::ValuesIn(proto_transports()),
                         transport_name);

}  // namespace
}  // namespace uct_tm_test
