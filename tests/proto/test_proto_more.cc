/*
 * UCT_TM_PROTO_SEND_MORE (fi_tagged's FI_MORE): small eager messages wait,
 * copied, and leave together in one transport message -- at the next send
 * without MORE, when the batch is full, at the next progress, or before
 * their endpoint closes -- in sending order with every other send. Over a
 * transport's tag list it is a hint the layer ignores. A peer's malformed
 * batch is dropped from the first bad entry on.
 */
#include "proto_fixture.h"
#include "raw_iface.h"
#include "wire.h"

#include <cstring>
#include <vector>

namespace uct_tm_test {
namespace {

constexpr uint64_t kAll = ~uint64_t{0};

using MoreTest = ProtoTest;

/* Whether the pair's data messages go over a transport's tag list (where
 * MORE is ignored): a tag-capable transport alone, offload on
 * (docs/proto.md, "Tag offload"). */
bool over_tag_list(const std::string &param) {
    return (param.rfind("tm_", 0) == 0) && (param.find(',') == std::string::npos) &&
           (param.find("+sw") == std::string::npos);
}

/* One message each way, so that a transport that connects on first use
 * (tcp) has connected: sends queued while it connects are not batched. */
void ping(const Pair &p, uct_tm_proto_ep_h ep, uct_tm_proto_worker_h from,
          uct_tm_proto_worker_h to) {
    uint32_t               v = 1, got = 0;
    uct_tm_proto_request_t r, s;
    ASSERT_EQ(UCS_INPROGRESS,
              uct_tm_proto_recv(to, &got, sizeof(got), 0xeeee, kAll, nullptr, nullptr, &r));
    const ucs_status_t st = uct_tm_proto_send(ep, &v, sizeof(v), 0xeeee, nullptr, &s);
    ASSERT_TRUE((st == UCS_OK) || (st == UCS_INPROGRESS));
    ASSERT_EQ(UCS_OK, wait_request(p, to, r));
    if (st == UCS_INPROGRESS) {
        ASSERT_EQ(UCS_OK, wait_request(p, from, s));
    }
}

void warm_up(const Pair &p) {
    ASSERT_NO_FATAL_FAILURE(ping(p, p.ab, p.a, p.b));
    ASSERT_NO_FATAL_FAILURE(ping(p, p.ba, p.b, p.a));
}

/* MORE messages of every small size, with and without remote data, between
 * sends of every other kind: all arrive once, in sending order. */
TEST_P(MoreTest, BatchesKeepSendingOrder) {
    ASSERT_NO_FATAL_FAILURE(warm_up(p_));
    const bool tag_list = over_tag_list(GetParam());
    const uint64_t batched0 = stats_of(p_.a).batched_sends;
    constexpr int kCount = 120;
    std::vector<std::vector<char>>      data;
    std::vector<uct_tm_proto_request_t> sends;
    for (int i = 0; i < kCount; ++i) {
        /* 3 of 4 with MORE; the rest: plain, sync, rendezvous (FENCE has its
         * own test: here it would hold every later send behind the
         * rendezvous, which no receive takes before the end) */
        const int    kind = i % 16;
        const bool   more = (i % 4) != 3;
        const size_t len  = (kind == 7) ? 200000 : size_t((i * 37) % 1500);
        unsigned     flags = more ? unsigned{UCT_TM_PROTO_SEND_MORE} : 0u;
        if (kind == 11) {
            flags |= UCT_TM_PROTO_SEND_SYNC;
        }
        data.push_back(pattern(len, i));
        uct_tm_proto_request_t s = 0;
        const ucs_status_t st = send(data[i].data(), len, 5, flags, uint64_t(i), &s);
        ASSERT_TRUE((st == UCS_OK) || (st == UCS_INPROGRESS)) << i << ucs_status_string(st);
        if (s != 0) {
            sends.push_back(s);
        }
    }
    for (int i = 0; i < kCount; ++i) {
        std::vector<char>   buf(200000 + 1, 'x');
        uct_tm_proto_info_t info;
        auto                r = post(buf.data(), 200000, 5, kAll);
        ASSERT_EQ(UCS_OK, wait_request(p_, p_.b, r, &info)) << i;
        ASSERT_EQ(info.data, uint64_t(i)) << "receive " << i << " took another message";
        ASSERT_EQ(info.length, data[i].size()) << i;
        EXPECT_TRUE(same_bytes(buf.data(), data[i].data(), info.length)) << i;
        EXPECT_EQ(buf[info.length], 'x') << i;
    }
    for (auto s : sends) {
        EXPECT_EQ(UCS_OK, wait_request(p_, p_.a, s));
    }
    const uint64_t batched = stats_of(p_.a).batched_sends - batched0;
    if (tag_list) {
        EXPECT_EQ(batched, 0u) << "MORE over a tag list is ignored";
    } else {
        EXPECT_GT(batched, uint64_t(kCount / 2)) << "MORE messages were not batched";
    }
}

/* MORE messages with no send after them leave at the next progress. */
TEST_P(MoreTest, LastMoreLeavesAtProgress) {
    std::vector<uint32_t> vals = {1, 2, 3, 4, 5};
    for (auto &v : vals) {
        ASSERT_EQ(UCS_OK, send(&v, sizeof(v), 6, UCT_TM_PROTO_SEND_MORE));
    }
    for (auto v : vals) {
        uint32_t got = 0;
        auto     r   = post(&got, sizeof(got), 6, kAll);
        ASSERT_EQ(UCS_OK, wait_request(p_, p_.b, r));
        EXPECT_EQ(got, v);
    }
}

/* Batched messages completed: they leave before their endpoint closes. */
TEST_P(MoreTest, BatchLeavesBeforeTheEndpointCloses) {
    ASSERT_NO_FATAL_FAILURE(warm_up(p_));
    std::vector<uint32_t>               got(8, 0);
    std::vector<uct_tm_proto_request_t> rs;
    for (auto &g : got) {
        rs.push_back(post(&g, sizeof(g), 7, kAll));
    }
    for (uint32_t i = 0; i < got.size(); ++i) {
        const uint32_t v = 100 + i;
        ASSERT_EQ(UCS_OK, send(&v, sizeof(v), 7, UCT_TM_PROTO_SEND_MORE));
    }
    uct_tm_proto_ep_destroy(p_.ab);
    p_.ab = nullptr;
    for (uint32_t i = 0; i < got.size(); ++i) {
        ASSERT_EQ(UCS_OK, wait_request(p_, p_.b, rs[i])) << i;
        EXPECT_EQ(got[i], 100 + i);
    }
}

INSTANTIATE_TEST_SUITE_P(transports, MoreTest, ::testing::ValuesIn(proto_transports()),
                         transport_name);

using uct_tm::proto::BatchEntry;
using uct_tm::proto::BatchHeader;
using uct_tm::proto::Kind;

/* A batch from `source` of entries (tag, payload length, flags); `extra`
 * stray bytes appended. Payload bytes are 'B'. */
std::vector<char> batch_message(uint32_t source,
                                const std::vector<std::tuple<uint64_t, uint32_t, uint8_t>> &entries,
                                uint32_t claim_extra = 0, size_t stray = 0) {
    std::vector<char> m(sizeof(BatchHeader));
    BatchHeader       h = {};
    h.kind              = Kind::kBatch;
    h.source            = source;
    memcpy(m.data(), &h, sizeof(h));
    for (const auto &[tag, len, flags] : entries) {
        BatchEntry e = {};
        e.tag        = tag;
        e.length     = len + claim_extra;
        e.flags      = flags;
        e.data       = tag * 3;
        const size_t at = m.size();
        m.resize(at + sizeof(e) + len, 'B');
        memcpy(m.data() + at, &e, sizeof(e));
    }
    m.resize(m.size() + stray, 'S');
    return m;
}

TEST(MoreWire, MalformedBatchesAreDroppedFromTheBadEntryOn) {
    Pair pair;
    ASSERT_EQ(UCS_OK, make_pair("posix", &pair));
    RawIface raw;
    ASSERT_EQ(UCS_OK, raw.open(pair.b));
    /* a source b has no endpoint to: not bound, its messages are delivered */
    const uint32_t src = (uct_tm_proto_worker_id(pair.a) ^ 0x5eed) & 0x7fffffffu;

    /* well formed: three messages, remote data and all */
    raw.send(uct_tm::proto::kAmId, batch_message(src, {{40, 8, 4}, {40, 0, 0}, {40, 100, 4}}),
             pair.b);
    progress(pair.b);
    uct_tm_proto_info_t info;
    ASSERT_EQ(UCS_OK, uct_tm_proto_probe(pair.b, 40, kAll, nullptr, UCT_TM_PROTO_PROBE_PEEK,
                                         &info, nullptr));
    EXPECT_EQ(info.length, 8u);
    EXPECT_EQ(info.flags, unsigned{UCT_TM_PROTO_INFO_REMOTE_DATA});
    EXPECT_EQ(info.data, 120u);
    EXPECT_EQ(info.source, src);
    EXPECT_EQ(discard_unexpected(pair.b, 40), 3u);

    /* the second entry claims more bytes than the message has: the first stays */
    raw.send(uct_tm::proto::kAmId, batch_message(src, {{41, 8, 0}, {41, 8, 0}}, 0, 0), pair.b);
    auto bad = batch_message(src, {{42, 8, 0}, {42, 16, 0}});
    BatchEntry e;
    memcpy(&e, bad.data() + sizeof(BatchHeader) + sizeof(BatchEntry) + 8, sizeof(e));
    e.length = 1u << 20;
    memcpy(bad.data() + sizeof(BatchHeader) + sizeof(BatchEntry) + 8, &e, sizeof(e));
    raw.send(uct_tm::proto::kAmId, bad, pair.b);
    /* unknown flags; stray bytes after the last entry; no entry at all */
    raw.send(uct_tm::proto::kAmId, batch_message(src, {{43, 8, 0}, {43, 8, 0x80}, {43, 8, 0}}),
             pair.b);
    raw.send(uct_tm::proto::kAmId, batch_message(src, {{44, 8, 0}}, 0, 5), pair.b);
    raw.send(uct_tm::proto::kAmId, batch_message(src, {}), pair.b);
    progress(pair.b);
    EXPECT_EQ(discard_unexpected(pair.b, 41), 2u);
    EXPECT_EQ(discard_unexpected(pair.b, 42), 1u) << "only the entry before the bad one";
    EXPECT_EQ(discard_unexpected(pair.b, 43), 1u) << "only the entry before the bad one";
    EXPECT_EQ(discard_unexpected(pair.b, 44), 1u);
    EXPECT_EQ(stats_of(pair.b).unexpected_bytes, 0u);

    /* the real pair still talks */
    uint32_t v = 9, got = 0;
    uct_tm_proto_request_t r;
    ASSERT_EQ(UCS_INPROGRESS,
              uct_tm_proto_recv(pair.b, &got, sizeof(got), 45, kAll, nullptr, nullptr, &r));
    uct_tm_proto_op_params_t more = {};
    more.flags = UCT_TM_PROTO_SEND_MORE;
    uct_tm_proto_request_t s = 0;
    ASSERT_EQ(UCS_OK, uct_tm_proto_send(pair.ab, &v, sizeof(v), 45, &more, &s));
    EXPECT_EQ(s, 0u);
    ASSERT_EQ(UCS_OK, wait_request(pair, pair.b, r));
    EXPECT_EQ(got, v);
    destroy_pair(&pair);
}

}  // namespace
}  // namespace uct_tm_test
