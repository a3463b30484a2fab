/*
 * Malformed wire messages: a raw UCT endpoint (UCX's posix transport, or
 * tm_sm for tagged messages, opened here without the layer) sends the
 * layer's AM ids random bytes and headers with forged kinds, lengths,
 * offsets and request handles, and tagged messages larger than any
 * conforming sender may send. The worker must log and drop every one of
 * them -- no crash, no completion of anything -- and still deliver a real
 * message afterwards.
 */
#include "proto_fixture.h"
#include "raw_iface.h"
#include "wire.h"

#include <uct/api/uct.h>

#include <chrono>
#include <cstring>
#include <random>

#include <unistd.h>

namespace uct_tm_test {
namespace {

TEST(ProtoWire, MalformedMessagesAreDropped) {
    Pair pair;
    ASSERT_EQ(UCS_OK, make_pair("posix", &pair));
    RawIface raw;
    ASSERT_EQ(UCS_OK, raw.open(pair.b));

    /* a receive that a forged message must not complete */
    uint64_t               victim_buf[8] = {};
    uct_tm_proto_request_t victim;
    ASSERT_EQ(UCS_INPROGRESS, uct_tm_proto_recv(pair.b, victim_buf, sizeof(victim_buf), 0, 0,
                                                pair.ba, nullptr, &victim));
    std::mt19937_64 rng(7);
    for (int i = 0; i < 3000; ++i) {
        std::vector<char> msg(rng() % 120);
        for (auto &c : msg) {
            c = static_cast<char>(rng());
        }
        if (!msg.empty()) {
            /* a valid kind most of the time, so the field checks are reached */
            msg[0] = static_cast<char>(1 + rng() % static_cast<int>(uct_tm::proto::Kind::kLast));
        }
        if ((i % 3 == 0) && (msg.size() >= 24)) {
            /* request handles that look plausible: small index, small generation */
            const uint64_t h = (uint64_t{1 + rng() % 3} << 32) | (1 + rng() % 4);
            memcpy(&msg[8], &h, 8);
            memcpy(&msg[16], &h, 8);
        }
        raw.send((rng() % 2) ? uct_tm::proto::kAmId : uct_tm::proto::kAmShortId, msg, pair.b);
    }
    for (int i = 0; i < 1000; ++i) {
        uct_tm_proto_worker_progress(pair.b);
    }
    /* a source-filtered receive ignores messages from elsewhere: still pending */
    EXPECT_EQ(UCS_INPROGRESS, uct_tm_proto_request_test(pair.b, victim, nullptr));
    ASSERT_EQ(UCS_OK, uct_tm_proto_request_cancel(pair.b, victim));
    EXPECT_EQ(UCS_ERR_CANCELED, wait_request(pair, pair.b, victim));
    /* drop what the garbage left as unexpected messages, then the real thing works */
    uct_tm_proto_info_t info;
    while (uct_tm_proto_probe(pair.b, 0, 0, nullptr,
                              UCT_TM_PROTO_PROBE_PEEK | UCT_TM_PROTO_PROBE_DISCARD, &info,
                              nullptr) == UCS_OK) {
    }
    for (size_t n : {size_t(8), size_t(20000), size_t(300000)}) {
        const auto             data = pattern(n, 9);
        std::vector<char>      buf(n);
        uct_tm_proto_request_t r, s;
        ASSERT_EQ(UCS_INPROGRESS, uct_tm_proto_recv(pair.b, buf.data(), n, 42, ~uint64_t{0},
                                                    nullptr, nullptr, &r));
        const ucs_status_t st = uct_tm_proto_send(pair.ab, data.data(), n, 42, nullptr, &s);
        ASSERT_TRUE((st == UCS_OK) || (st == UCS_INPROGRESS));
        ASSERT_EQ(UCS_OK, wait_request(pair, pair.b, r, &info));
        if (st == UCS_INPROGRESS) {
            ASSERT_EQ(UCS_OK, wait_request(pair, pair.a, s));
        }
        EXPECT_EQ(buf, data);
    }
    destroy_pair(&pair);
}

/* Tagged eager messages arrive in transport fragments; an unexpected one is
 * gathered until its last fragment. One larger than the credit the worker
 * gives a peer (which no conforming sender exceeds) is dropped whole, and
 * a fragmented one within it is delivered intact. */
TEST(ProtoWire, OversizedTaggedMessageIsDropped) {
    uct_tm_proto_worker_params_t extra = {};
    extra.field_mask     = UCT_TM_PROTO_WORKER_FIELD_UNEXPECTED_CAP | UCT_TM_PROTO_WORKER_FIELD_MAX_PEERS;
    extra.unexpected_cap = 64 << 10;
    extra.max_peers      = 4; /* 16 KiB of credit per peer */
    Pair pair;
    ASSERT_EQ(UCS_OK, make_pair("tm_sm", &pair, &extra));
    RawIface raw;
    ASSERT_EQ(UCS_OK, raw.open(pair.b, "tm", "tm_sm", "tm_shm"));
    uct_iface_attr_t attr;
    ASSERT_EQ(UCS_OK, uct_iface_query(raw.iface, &attr));
    ASSERT_GE(attr.cap.tag.eager.max_zcopy, size_t(40000));
    ASSERT_LT(attr.cap.am.max_zcopy, size_t(12000)) /* one descriptor */
            << "the small message must be fragmented too";

    /* imm: the source word (the id, top bit: remote data follows), then the data */
    const uint64_t source = uint64_t{uct_tm::proto::source_word(uct_tm_proto_worker_id(pair.a), true)}
                            << 32;
    const auto     big    = pattern(40000, 3);
    const auto     small  = pattern(12000, 4);
    for (const auto *m : {&big, &small}) {
        uct_iov_t iov = {const_cast<char *>(m->data()), m->size(), UCT_MEM_HANDLE_NULL, 0, 1};
        const uct_tag_t tag = (m == &big) ? 77 : 78;
        ucs_status_t st;
        while ((st = uct_ep_tag_eager_zcopy(raw.ep, tag, source | 5, &iov, 1, 0, nullptr)) ==
               UCS_ERR_NO_RESOURCE) {
            uct_worker_progress(raw.worker);
            uct_tm_proto_worker_progress(pair.b);
        }
        ASSERT_EQ(UCS_OK, st);
    }
    for (int i = 0; i < 1000; ++i) {
        uct_tm_proto_worker_progress(pair.b);
    }
    uct_tm_proto_info_t info;
    EXPECT_EQ(UCS_ERR_NO_ELEM, uct_tm_proto_probe(pair.b, 77, ~uint64_t{0}, nullptr,
                                                  UCT_TM_PROTO_PROBE_PEEK, &info, nullptr))
            << "a tagged message above the per-peer credit was buffered";
    ASSERT_EQ(UCS_OK, uct_tm_proto_probe(pair.b, 78, ~uint64_t{0}, nullptr, UCT_TM_PROTO_PROBE_PEEK,
                                         &info, nullptr));
    EXPECT_EQ(info.length, small.size());
    EXPECT_EQ(info.data, 5u);
    EXPECT_EQ(info.flags, unsigned{UCT_TM_PROTO_INFO_REMOTE_DATA});
    std::vector<char>      buf(small.size());
    uct_tm_proto_request_t r;
    ASSERT_EQ(UCS_INPROGRESS, uct_tm_proto_recv(pair.b, buf.data(), buf.size(), 78, ~uint64_t{0},
                                                nullptr, nullptr, &r));
    ASSERT_EQ(UCS_OK, wait_request(pair, pair.b, r, &info));
    EXPECT_EQ(info.length, small.size());
    EXPECT_EQ(buf, small);
    destroy_pair(&pair);
}

}  // namespace
}  // namespace uct_tm_test

namespace uct_tm_test {
namespace {

using uct_tm::proto::Kind;
using uct_tm::proto::MsgHeader;


/* An am_short message (AM header = tag, then source and imm) claiming `source`. */
std::vector<char> short_message(uint32_t source, uint64_t tag, size_t payload) {
    std::vector<char> m(sizeof(tag) + 8 + payload, 'S');
    memcpy(m.data(), &tag, sizeof(tag));
    memcpy(m.data() + sizeof(tag), &source, sizeof(source));
    return m;
}

/* Real traffic of every protocol from a to b, data checked. */
void expect_traffic_flows(const Pair &pair, uint64_t tag) {
    for (size_t n : {size_t(8), size_t(20000), size_t(300000)}) {
        const auto             data = pattern(n, 9);
        std::vector<char>      buf(n);
        uct_tm_proto_request_t r, s;
        uct_tm_proto_info_t    info;
        ASSERT_EQ(UCS_INPROGRESS, uct_tm_proto_recv(pair.b, buf.data(), n, tag, ~uint64_t{0},
                                                    nullptr, nullptr, &r));
        const ucs_status_t st = uct_tm_proto_send(pair.ab, data.data(), n, tag, nullptr, &s);
        ASSERT_TRUE((st == UCS_OK) || (st == UCS_INPROGRESS));
        ASSERT_EQ(UCS_OK, wait_request(pair, pair.b, r, &info)) << n;
        if (st == UCS_INPROGRESS) {
            ASSERT_EQ(UCS_OK, wait_request(pair, pair.a, s)) << n;
        }
        EXPECT_EQ(buf, data) << n;
        EXPECT_EQ(info.source, uct_tm_proto_worker_id(pair.a));
    }
}

/* A sender that ignores the credit it was granted: eager messages far beyond
 * it, claiming a peer b has an endpoint to, then a source it has none to;
 * then fragmented messages begun and never finished. b buffers at most the
 * credit per claimed source (a window; one for all sources without
 * endpoint) and a few open fragmented messages, and real traffic from that
 * peer flows once the buffered ones are discarded. */
TEST(ProtoWire, SenderIgnoringCreditIsRefused) {
    uct_tm_proto_worker_params_t extra = {};
    extra.field_mask     = UCT_TM_PROTO_WORKER_FIELD_UNEXPECTED_CAP | UCT_TM_PROTO_WORKER_FIELD_MAX_PEERS;
    extra.unexpected_cap = 64 << 10;
    extra.max_peers      = 4;
    const size_t window  = 16 << 10;
    Pair pair;
    ASSERT_EQ(UCS_OK, make_pair("posix", &pair, &extra));
    RawIface raw;
    ASSERT_EQ(UCS_OK, raw.open(pair.b));

    const uint32_t a_id    = uct_tm_proto_worker_id(pair.a);
    const uint32_t nobody  = a_id ^ 0x5eed; /* b has no endpoint to it */
    const size_t   kMsgs   = 64;            /* of 1000 B: four windows */
    for (uint32_t source : {a_id, nobody}) {
        for (size_t i = 0; i < kMsgs; ++i) {
            raw.send(uct_tm::proto::kAmId, eager_message(source, 5, 1000), pair.b);
            raw.send(uct_tm::proto::kAmShortId, short_message(source, 5, 100), pair.b);
        }
    }
    progress(pair.b);
    uct_tm_proto_stats_t stats;
    uct_tm_proto_worker_stats(pair.b, &stats);
    EXPECT_LE(stats.unexpected_peak, 2 * window)
            << "a sender beyond its credit was buffered: " << stats.unexpected_peak << " bytes";
    const size_t held = discard_unexpected(pair.b, 5);
    EXPECT_LE(held, 2 * window / 100);
    EXPECT_GE(held, 2 * window / 1100) << "messages within the credit must be kept";

    /* fragmented messages begun and never finished (each within the credit) */
    for (uint32_t id = 0; id < 100; ++id) {
        raw.send(uct_tm::proto::kAmId, eager_message(nobody, 6, 10, Kind::kFirst, 100, 1000 + id),
                 pair.b);
    }
    progress(pair.b);
    EXPECT_LE(discard_unexpected(pair.b, 6), 4u)
            << "a sender's unfinished fragmented messages were kept without bound";

    expect_traffic_flows(pair, 42);
    destroy_pair(&pair);
}

/* A sender claiming another worker's id, over another transport than the
 * one b's endpoint to that worker uses (workers over tm_sm and posix: the
 * endpoints go over tm_sm; the spoofer sends over posix). b drops its
 * messages: a receive filtered on the real worker is not completed, nothing
 * is buffered under that worker's id. A source b has no endpoint to is not
 * bound: its message is delivered, with no endpoint (docs/proto.md). */
TEST(ProtoWire, SpoofedSourceIsDropped) {
    Pair pair;
    if (make_pair("tm_sm,posix", &pair) != UCS_OK) {
        destroy_pair(&pair);
        GTEST_SKIP() << "tm_sm and posix together are not available";
    }
    RawIface raw;
    ASSERT_EQ(UCS_OK, raw.open(pair.b)); /* b's posix iface */

    const uint32_t         a_id = uct_tm_proto_worker_id(pair.a);
    uint64_t               victim_buf[16] = {};
    uct_tm_proto_request_t victim;
    ASSERT_EQ(UCS_INPROGRESS, uct_tm_proto_recv(pair.b, victim_buf, sizeof(victim_buf), 9,
                                                ~uint64_t{0}, pair.ba, nullptr, &victim));
    raw.send(uct_tm::proto::kAmId, eager_message(a_id, 9, 64), pair.b);
    raw.send(uct_tm::proto::kAmShortId, short_message(a_id, 9, 64), pair.b);
    raw.send(uct_tm::proto::kAmId, eager_message(a_id, 10, 64), pair.b);
    raw.send(uct_tm::proto::kAmShortId, short_message(a_id, 10, 64), pair.b);
    progress(pair.b);
    EXPECT_EQ(UCS_INPROGRESS, uct_tm_proto_request_test(pair.b, victim, nullptr))
            << "a message claiming a over another transport took a receive for a";
    EXPECT_EQ(0u, discard_unexpected(pair.b, 10))
            << "a message claiming a over another transport was buffered";

    /* a source b holds no endpoint to: not bound, delivered without endpoint */
    const uint32_t nobody = a_id ^ 0x5eed;
    raw.send(uct_tm::proto::kAmId, eager_message(nobody, 11, 64), pair.b);
    progress(pair.b);
    uct_tm_proto_info_t info;
    ASSERT_EQ(UCS_OK, uct_tm_proto_probe(pair.b, 11, ~uint64_t{0}, nullptr,
                                         UCT_TM_PROTO_PROBE_PEEK | UCT_TM_PROTO_PROBE_DISCARD,
                                         &info, nullptr));
    EXPECT_EQ(info.source, nobody);
    EXPECT_EQ(info.ep, nullptr);

    /* the real a completes the receive */
    const auto data = pattern(sizeof(victim_buf), 3);
    uct_tm_proto_request_t s;
    const ucs_status_t st = uct_tm_proto_send(pair.ab, data.data(), data.size(), 9, nullptr, &s);
    ASSERT_TRUE((st == UCS_OK) || (st == UCS_INPROGRESS));
    ASSERT_EQ(UCS_OK, wait_request(pair, pair.b, victim, &info));
    if (st == UCS_INPROGRESS) {
        ASSERT_EQ(UCS_OK, wait_request(pair, pair.a, s));
    }
    EXPECT_TRUE(same_bytes(victim_buf, data.data(), data.size()));
    EXPECT_EQ(info.source, a_id);
    expect_traffic_flows(pair, 42);
    destroy_pair(&pair);
}

/* Rendezvous data (push: posix has no get) naming a live receive, from a
 * worker other than the rendezvous's sender: dropped, and the real data
 * completes the receive intact. The request handle is the one the receiver
 * sent in its CTS; a peer that learns it still cannot fill the receive. */
TEST(ProtoWire, RendezvousDataFromAnotherPeerIsDropped) {
    Pair pair;
    ASSERT_EQ(UCS_OK, make_pair("posix", &pair));
    RawIface raw;
    ASSERT_EQ(UCS_OK, raw.open(pair.b));

    const size_t           n    = 300000;
    const auto             data = pattern(n, 12);
    std::vector<char>      buf(n);
    uct_tm_proto_request_t r, s;
    ASSERT_EQ(UCS_INPROGRESS, uct_tm_proto_recv(pair.b, buf.data(), n, 13, ~uint64_t{0}, nullptr,
                                                nullptr, &r));
    ASSERT_EQ(UCS_INPROGRESS, uct_tm_proto_send(pair.ab, data.data(), n, 13, nullptr, &s));
    progress(pair.b); /* b matches the request and sends its CTS; a has not pushed yet */

    /* kData: kind, 3 reserved bytes, the source (offset 4), receiver request, offset */
    std::vector<char> forged(24 + 1000, 'X');
    forged[0]               = static_cast<char>(Kind::kData);
    const uint32_t other    = uct_tm_proto_worker_id(pair.a) ^ 0x5eed;
    const uint64_t offset   = 0;
    memcpy(&forged[4], &other, sizeof(other));
    memcpy(&forged[8], &r, sizeof(r));
    memcpy(&forged[16], &offset, sizeof(offset));
    raw.send(uct_tm::proto::kAmId, forged, pair.b);
    progress(pair.b);

    uct_tm_proto_info_t info;
    ASSERT_EQ(UCS_OK, wait_request(pair, pair.b, r, &info));
    ASSERT_EQ(UCS_OK, wait_request(pair, pair.a, s));
    EXPECT_EQ(info.length, n);
    EXPECT_EQ(buf, data) << "rendezvous data from another peer was placed";
    uct_tm_proto_stats_t stats;
    uct_tm_proto_worker_stats(pair.b, &stats);
    EXPECT_EQ(stats.rndv_gets, 0u) << "the test needs the push protocol";
    destroy_pair(&pair);
}

}  // namespace
}  // namespace uct_tm_test

namespace uct_tm_test {
namespace {

uct_tm_proto_worker_h make_worker(const char *transports, unsigned max_peers = 0) {
    uct_tm_proto_worker_params_t p = {};
    p.field_mask = UCT_TM_PROTO_WORKER_FIELD_TRANSPORTS;
    p.transports = transports;
    if (max_peers != 0) {
        p.field_mask |= UCT_TM_PROTO_WORKER_FIELD_MAX_PEERS;
        p.max_peers = max_peers;
    }
    uct_tm_proto_worker_h w = nullptr;
    return (uct_tm_proto_worker_create(&p, &w) == UCS_OK) ? w : nullptr;
}

ucs_status_t connect(uct_tm_proto_worker_h from, uct_tm_proto_worker_h to, uct_tm_proto_ep_h *ep) {
    size_t len = 0;
    uct_tm_proto_worker_address(to, nullptr, &len);
    std::vector<char> addr(len);
    const ucs_status_t st = uct_tm_proto_worker_address(to, addr.data(), &len);
    return (st == UCS_OK) ? uct_tm_proto_ep_create(from, addr.data(), len, ep) : st;
}

/* Each peer is granted UNEXPECTED_CAP / MAX_PEERS of credit: endpoints to
 * one more peer are refused, more endpoints to a known one are not. */
TEST(ProtoWire, EndpointsToAtMostMaxPeers) {
    uct_tm_proto_worker_h w = make_worker("posix", 1);
    uct_tm_proto_worker_h x = make_worker("posix");
    uct_tm_proto_worker_h y = make_worker("posix");
    ASSERT_TRUE((w != nullptr) && (x != nullptr) && (y != nullptr));
    uct_tm_proto_ep_h ep;
    EXPECT_EQ(UCS_OK, connect(w, x, &ep));
    EXPECT_EQ(UCS_OK, connect(w, x, &ep));
    EXPECT_EQ(UCS_ERR_EXCEEDS_LIMIT, connect(w, y, &ep));
    for (auto *v : {w, x, y}) {
        uct_tm_proto_worker_destroy(v);
    }
}

/* Workers listing their transports in different orders: both endpoints of
 * the pair pick the same transport (the lower id's order), so the messages
 * of each arrive over the iface the other's endpoint is bound to. */
TEST(ProtoWire, DifferentTransportOrdersStillTalk) {
    Pair pair;
    pair.a = make_worker("posix,tm_sm");
    pair.b = make_worker("tm_sm,posix");
    if ((pair.a == nullptr) || (pair.b == nullptr)) {
        destroy_pair(&pair);
        GTEST_SKIP() << "tm_sm and posix together are not available";
    }
    ASSERT_EQ(UCS_OK, connect(pair.a, pair.b, &pair.ab));
    ASSERT_EQ(UCS_OK, connect(pair.b, pair.a, &pair.ba));
    expect_traffic_flows(pair, 7);
    std::swap(pair.a, pair.b);
    std::swap(pair.ab, pair.ba);
    expect_traffic_flows(pair, 8);
    destroy_pair(&pair);
}

/* A worker's compact address (uct_tm_proto_worker_address_compact). */
std::vector<char> compact_address(uct_tm_proto_worker_h w) {
    size_t len = 0;
    uct_tm_proto_worker_address_compact(w, nullptr, &len);
    std::vector<char> addr(len);
    return (uct_tm_proto_worker_address_compact(w, addr.data(), &len) == UCS_OK)
               ? addr
               : std::vector<char>();
}

/* The compact form names the same iface as the full one: endpoints made
 * from it carry every protocol, and it fits libfabric's FI_NAME_MAX (64)
 * with room for a name's header. */
TEST(ProtoWire, CompactAddressesConnect) {
    for (const char *tls : {"tm_sm", "posix", "tcp", "tm_sm,tcp"}) {
        Pair pair;
        pair.a = make_worker(tls);
        pair.b = make_worker(tls);
        if ((pair.a == nullptr) || (pair.b == nullptr)) {
            destroy_pair(&pair);
            continue; /* tcp may not open here */
        }
        size_t full = 0;
        uct_tm_proto_worker_address(pair.a, nullptr, &full);
        const std::vector<char> to_b = compact_address(pair.b);
        const std::vector<char> to_a = compact_address(pair.a);
        ASSERT_FALSE(to_a.empty()) << tls;
        EXPECT_LT(to_a.size(), full) << tls;
        EXPECT_LE(to_a.size(), 56u) << tls;
        ASSERT_EQ(UCS_OK, uct_tm_proto_ep_create(pair.a, to_b.data(), to_b.size(), &pair.ab));
        ASSERT_EQ(UCS_OK, uct_tm_proto_ep_create(pair.b, to_a.data(), to_a.size(), &pair.ba));
        expect_traffic_flows(pair, 11);
        destroy_pair(&pair);
    }
}

/* Offset of the first transport code: tag, counts, then two varints. */
size_t first_code_offset(const std::vector<char> &c) {
    size_t at = 2;
    for (int v = 0; v < 2; ++v) {
        while (static_cast<uint8_t>(c.at(at)) & 0x80) {
            ++at;
        }
        ++at;
    }
    return at;
}

/* Every cut, a trailing byte, an unknown transport code, a byte marked
 * non-zero that is zero, a varint beyond 32 bits: refused, no endpoint. */
TEST(ProtoWire, MalformedCompactAddressesAreRefused) {
    uct_tm_proto_worker_h w = make_worker("tm_sm");
    uct_tm_proto_worker_h x = make_worker("tm_sm");
    ASSERT_TRUE((w != nullptr) && (x != nullptr));
    const std::vector<char> good = compact_address(x);
    ASSERT_GT(good.size(), 8u);
    uct_tm_proto_ep_h ep = nullptr;
    for (size_t len = 1; len < good.size(); ++len) {
        EXPECT_EQ(UCS_ERR_INVALID_PARAM, uct_tm_proto_ep_create(w, good.data(), len, &ep)) << len;
    }
    std::vector<char> bad = good;
    bad.push_back(0);
    EXPECT_EQ(UCS_ERR_INVALID_PARAM, uct_tm_proto_ep_create(w, bad.data(), bad.size(), &ep));
    const size_t code = first_code_offset(good);
    bad               = good;
    bad[code]         = static_cast<char>(200);
    EXPECT_EQ(UCS_ERR_INVALID_PARAM, uct_tm_proto_ep_create(w, bad.data(), bad.size(), &ep));
    /* tm_sm's device address: its length, a bitmap, then the marked bytes */
    const size_t map  = code + 2;
    const size_t data = map + (static_cast<uint8_t>(good.at(code + 1)) + 7) / 8;
    ASSERT_NE(0, good.at(map) & 1) << "tm_sm's host id starts with a non-zero byte";
    bad       = good;
    bad[data] = 0;
    EXPECT_EQ(UCS_ERR_INVALID_PARAM, uct_tm_proto_ep_create(w, bad.data(), bad.size(), &ep));
    const std::vector<char> huge = {good[0], good[1], '\xff', '\xff', '\xff',
                                    '\xff',  '\xff',  '\x7f', 0};
    EXPECT_EQ(UCS_ERR_INVALID_PARAM, uct_tm_proto_ep_create(w, huge.data(), huge.size(), &ep));
    EXPECT_EQ(UCS_OK, uct_tm_proto_ep_create(w, good.data(), good.size(), &ep));
    uct_tm_proto_worker_destroy(w);
    uct_tm_proto_worker_destroy(x);
}

/* The device address of a one-transport worker's full address. */
std::vector<char> device_address(uct_tm_proto_worker_h w) {
    size_t len = 0;
    uct_tm_proto_worker_address(w, nullptr, &len);
    std::vector<char> addr(len);
    if (uct_tm_proto_worker_address(w, addr.data(), &len) != UCS_OK) {
        return {};
    }
    const size_t at = sizeof(uct_tm::proto::AddressHeader);
    const size_t tl = static_cast<uint8_t>(addr.at(at));
    uint16_t     dev_len;
    memcpy(&dev_len, &addr.at(at + 1 + tl), sizeof(dev_len));
    const auto dev = addr.begin() + static_cast<long>(at + 3 + tl);
    return std::vector<char>(dev, dev + dev_len);
}

/* With no device named, tcp opens on a network interface, not on the
 * loopback (which reaches this host only, and which some hosts list
 * first: ranks on two hosts then found each other unreachable). */
TEST(ProtoWire, TcpPrefersANetworkInterface) {
    uct_tm_proto_worker_h any = make_worker("tcp");
    uct_tm_proto_worker_h lo  = make_worker("tcp:lo");
    if ((any == nullptr) || (lo == nullptr)) {
        for (auto *w : {any, lo}) {
            if (w != nullptr) {
                uct_tm_proto_worker_destroy(w);
            }
        }
        GTEST_SKIP() << "tcp or its loopback device does not open here";
    }
    EXPECT_NE(device_address(lo), device_address(any));
    uct_tm_proto_worker_destroy(any);
    uct_tm_proto_worker_destroy(lo);
}

/* A worker over "tm_sm,tcp" polls its second transport sparingly once it
 * has been quiet: messages from a tcp-only peer still arrive after pauses
 * longer than it keeps polling on every call (1 ms), both ways. */
TEST(ProtoWire, QuietSecondTransportStillDelivers) {
    Pair pair;
    pair.a = make_worker("tcp");
    pair.b = make_worker("tm_sm,tcp");
    if ((pair.a == nullptr) || (pair.b == nullptr)) {
        destroy_pair(&pair);
        GTEST_SKIP() << "tcp does not open here";
    }
    ASSERT_EQ(UCS_OK, connect(pair.a, pair.b, &pair.ab));
    ASSERT_EQ(UCS_OK, connect(pair.b, pair.a, &pair.ba));
    for (int round = 0; round < 3; ++round) {
        for (int i = 0; i < 100; ++i) { /* the receiver polls, and finds nothing */
            uct_tm_proto_worker_progress(pair.b);
        }
        usleep(5000);
        expect_traffic_flows(pair, 20 + round);
        std::swap(pair.a, pair.b);
        std::swap(pair.ab, pair.ba);
    }
    destroy_pair(&pair);
}

}  // namespace
}  // namespace uct_tm_test
