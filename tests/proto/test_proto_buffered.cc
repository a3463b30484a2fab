/*
 * Buffered receives (UCT_TM_PROTO_WORKER_FIELD_BUFFERED, fi_tagged's
 * FI_BUFFERED_RECV): a message no posted receive matched is reported once,
 * whole, with its bytes in the layer's buffer (none for a rendezvous), and is
 * the application's until it takes it (recv_claimed) or drops it
 * (discard_claimed); later receives do not match it. Every transport.
 */
#include "proto_fixture.h"

#include <cstring>
#include <vector>

namespace uct_tm_test {
namespace {

constexpr uint64_t kAll  = ~uint64_t{0};
constexpr size_t   kRndv = 300000;

struct Report {
    uint64_t            msg;
    uct_tm_proto_info_t info;
    const void         *data;
    size_t              data_length;
    std::vector<char>   copy; /* the bytes at report time */
};

class BufferedTest : public ProtoTest {
  protected:
    void SetUp() override {
        ProtoTest::SetUp();
        uct_tm_proto_worker_params_t extra = {};
        extra.field_mask   = UCT_TM_PROTO_WORKER_FIELD_BUFFERED;
        extra.buffered_cb  = [](void *arg, uint64_t msg, const uct_tm_proto_info_t *info,
                               const void *data, size_t data_length) {
            auto *self = static_cast<BufferedTest *>(arg);
            const char *c = static_cast<const char *>(data);
            self->reports_.push_back(
                    {msg, *info, data, data_length, std::vector<char>(c, c + data_length)});
        };
        extra.buffered_arg = this;
        reopen(extra);
    }
    bool wait_reports(size_t n) {
        return wait_for(p_, [&] { return reports_.size() >= n; });
    }
    std::vector<Report> reports_;
};

/* Every protocol is reported once, whole; taken or dropped, the senders
 * complete; a later receive does not match a held message. */
TEST_P(BufferedTest, UnmatchedMessagesAreReportedAndHeld) {
    const size_t                        lens[] = {0, 8, 2000, 20000, kRndv};
    std::vector<std::vector<char>>      data;
    std::vector<uct_tm_proto_request_t> sends;
    for (size_t i = 0; i < std::size(lens); ++i) {
        data.push_back(pattern(lens[i], static_cast<uint32_t>(i)));
        uct_tm_proto_request_t s = 0;
        const unsigned flags = (i == 1) ? unsigned{UCT_TM_PROTO_SEND_SYNC} : 0u;
        const ucs_status_t st = send(data[i].data(), lens[i], 0x300 + i, flags, uint64_t(i), &s);
        ASSERT_TRUE((st == UCS_OK) || (st == UCS_INPROGRESS)) << i;
        if (s != 0) {
            sends.push_back(s);
        }
    }
    ASSERT_TRUE(wait_reports(std::size(lens)));
    for (int i = 0; i < 200; ++i) {
        uct_tm_proto_worker_progress(p_.b);
    }
    ASSERT_EQ(reports_.size(), std::size(lens)) << "a message was reported twice";
    for (size_t i = 0; i < std::size(lens); ++i) {
        const Report &r = reports_[i];
        SCOPED_TRACE(i);
        EXPECT_EQ(r.info.tag, 0x300 + i) << "reported out of arrival order";
        EXPECT_EQ(r.info.length, lens[i]);
        EXPECT_EQ(r.info.data, uint64_t(i));
        EXPECT_EQ(r.info.ep, p_.ba);
        if ((lens[i] == kRndv) || ((r.data == nullptr) && (lens[i] != 0))) {
            /* a rendezvous request: above the rendezvous threshold, and over a
             * tag list also sync messages and those above its eager limit
             * (tm_rc: 20000 B) */
            EXPECT_EQ(r.data, nullptr);
            EXPECT_EQ(r.data_length, 0u);
        } else {
            ASSERT_EQ(r.data_length, lens[i]);
            EXPECT_TRUE(same_bytes(r.copy.data(), data[i].data(), lens[i]));
        }
    }
    /* held: neither a probe nor a new receive finds them */
    uct_tm_proto_info_t info;
    EXPECT_EQ(UCS_ERR_NO_ELEM, uct_tm_proto_probe(p_.b, 0x300, ~uint64_t{0xf}, nullptr,
                                                  UCT_TM_PROTO_PROBE_PEEK, &info, nullptr));
    uint64_t               x = 0;
    uct_tm_proto_request_t late = post(&x, sizeof(x), 0x302, kAll);
    for (int i = 0; i < 500; ++i) {
        uct_tm_proto_worker_progress(p_.b);
    }
    EXPECT_EQ(UCS_INPROGRESS, uct_tm_proto_request_test(p_.b, late, &info))
            << "a receive posted later took a held message";
    EXPECT_EQ(UCS_OK, uct_tm_proto_request_cancel(p_.b, late));
    EXPECT_EQ(UCS_ERR_CANCELED, wait_request(p_, p_.b, late));

    /* the data pointer still holds the bytes; take the even ones, drop the odd */
    for (size_t i = 0; i < std::size(lens); ++i) {
        const Report &r = reports_[i];
        if (r.data != nullptr) {
            EXPECT_TRUE(same_bytes(r.data, data[i].data(), lens[i])) << i;
        }
        if (i % 2 == 0) {
            std::vector<char>      buf(lens[i] + 1, 'x');
            uct_tm_proto_request_t rr;
            ASSERT_EQ(UCS_INPROGRESS, uct_tm_proto_recv_claimed(p_.b, r.msg, buf.data(), lens[i],
                                                                nullptr, &rr));
            ASSERT_EQ(UCS_OK, wait_request(p_, p_.b, rr, &info)) << i;
            EXPECT_TRUE(same_bytes(buf.data(), data[i].data(), lens[i])) << i;
            EXPECT_EQ(buf[lens[i]], 'x') << i;
        } else {
            ASSERT_EQ(UCS_OK, uct_tm_proto_discard_claimed(p_.b, r.msg)) << i;
        }
        EXPECT_EQ(UCS_ERR_INVALID_PARAM, uct_tm_proto_discard_claimed(p_.b, r.msg))
                << "a message taken twice";
    }
    for (auto s : sends) {
        EXPECT_EQ(UCS_OK, wait_request(p_, p_.a, s)); /* sync and rendezvous included */
    }
    uct_tm_proto_stats_t st;
    uct_tm_proto_worker_stats(p_.b, &st);
    EXPECT_EQ(st.unexpected_bytes, 0u);
}

/* Posted receives still match first; only the rest is reported. */
TEST_P(BufferedTest, PostedReceivesMatchFirst) {
    std::vector<char> buf(20000 + 1, 'x');
    auto              r  = post(buf.data(), 20000, 0x41, kAll);
    const auto        d1 = pattern(20000, 1), d2 = pattern(64, 2);
    ASSERT_EQ(UCS_OK, send(d1.data(), d1.size(), 0x41));
    ASSERT_EQ(UCS_OK, send(d2.data(), d2.size(), 0x42));
    ASSERT_EQ(UCS_OK, wait_request(p_, p_.b, r));
    EXPECT_TRUE(same_bytes(buf.data(), d1.data(), d1.size()));
    ASSERT_TRUE(wait_reports(1));
    EXPECT_EQ(reports_.size(), 1u);
    EXPECT_EQ(reports_[0].info.tag, 0x42u);
    EXPECT_EQ(reports_[0].copy, d2);
    EXPECT_EQ(UCS_OK, uct_tm_proto_discard_claimed(p_.b, reports_[0].msg));
}

INSTANTIATE_TEST_SUITE_P(transports, BufferedTest, ::testing::ValuesIn(proto_transports()),
                         transport_name);

TEST(BufferedParams, CallbackRequired) {
    uct_tm_proto_worker_params_t p = {};
    p.field_mask = UCT_TM_PROTO_WORKER_FIELD_TRANSPORTS | UCT_TM_PROTO_WORKER_FIELD_BUFFERED;
    p.transports = "posix";
    uct_tm_proto_worker_h w = nullptr;
    EXPECT_EQ(UCS_ERR_INVALID_PARAM, uct_tm_proto_worker_create(&p, &w));
    EXPECT_EQ(w, nullptr);
}

}  // namespace
}  // namespace uct_tm_test
