/*
 * Reply endpoints: a receiver that holds no endpoint to a sender still
 * answers it (rendezvous go-ahead, delivery acknowledgement, eager credit)
 * over an endpoint it creates from the sender's kHello -- what a libfabric
 * RDM receiver that never inserted the sender, or MPI adding its peers
 * lazily, needs. Its own ep_create() later adopts that endpoint; forged
 * hellos create nothing. Transports that connect to ifaces only (over tm_rc
 * the application exchanges endpoint addresses: both sides hold one).
 */
#include "proto_fixture.h"
#include "raw_iface.h"
#include "wire.h"

#include <cstring>
#include <string>
#include <vector>

namespace uct_tm_test {
namespace {

constexpr uint64_t kAll  = ~uint64_t{0};
constexpr size_t   kRndv = 300001; /* above the default 128 KiB rendezvous threshold */

std::vector<char> address_of(uct_tm_proto_worker_h w) {
    size_t len = 0;
    uct_tm_proto_worker_address(w, nullptr, &len);
    std::vector<char> addr(len);
    EXPECT_EQ(UCS_OK, uct_tm_proto_worker_address(w, addr.data(), &len));
    return addr;
}

uct_tm_proto_worker_h worker(const std::string &param, size_t cap = 0, unsigned peers = 0) {
    uct_tm_proto_worker_params_t params = {};
    std::string                  tls;
    apply_transport(param, &params, &tls);
    if (cap != 0) {
        params.field_mask |= UCT_TM_PROTO_WORKER_FIELD_UNEXPECTED_CAP |
                             UCT_TM_PROTO_WORKER_FIELD_MAX_PEERS;
        params.unexpected_cap = cap;
        params.max_peers      = peers;
    }
    uct_tm_proto_worker_h w = nullptr;
    return (uct_tm_proto_worker_create(&params, &w) == UCS_OK) ? w : nullptr;
}

uct_tm_proto_ep_h ep_to(uct_tm_proto_worker_h from, uct_tm_proto_worker_h to) {
    const auto        addr = address_of(to);
    uct_tm_proto_ep_h ep   = nullptr;
    EXPECT_EQ(UCS_OK, uct_tm_proto_ep_create(from, addr.data(), addr.size(), &ep));
    return ep;
}

/* Sends `msg` from p.a (tag, flags) into a receive of p.b posted first or
 * after (`late`); both must complete. Returns the receive's info. */
uct_tm_proto_info_t transfer(const Pair &p, const std::vector<char> &msg, uint64_t tag,
                             unsigned flags, bool late) {
    std::vector<char>        in(msg.size() + 100, 'x');
    uct_tm_proto_request_t   r = 0, s = 0;
    uct_tm_proto_op_params_t sp = {};
    sp.flags                    = flags;
    auto post                   = [&] {
        EXPECT_EQ(UCS_INPROGRESS,
                                    uct_tm_proto_recv(p.b, in.data(), in.size(), tag, kAll, nullptr, nullptr, &r));
    };
    if (!late) {
        post();
    }
    const ucs_status_t st = uct_tm_proto_send(p.ab, msg.data(), msg.size(), tag, &sp, &s);
    EXPECT_TRUE((st == UCS_OK) || (st == UCS_INPROGRESS)) << ucs_status_string(st);
    if (late) {
        for (int i = 0; i < 100; ++i) { /* the message arrives unexpected */
            uct_tm_proto_worker_progress(p.a);
            uct_tm_proto_worker_progress(p.b);
        }
        post();
    }
    uct_tm_proto_info_t info = {};
    EXPECT_EQ(UCS_OK, wait_request(p, p.b, r, &info)) << "the receive";
    if (st == UCS_INPROGRESS) {
        EXPECT_EQ(UCS_OK, wait_request(p, p.a, s)) << "the send: the receiver's reply came";
    }
    EXPECT_EQ(info.length, msg.size());
    EXPECT_TRUE(same_bytes(in.data(), msg.data(), msg.size()));
    return info;
}

class ReplyEndpoints : public ::testing::TestWithParam<std::string> {
  protected:
    void SetUp() override {
        if (GetParam().rfind("tm_rc", 0) == 0) {
            GTEST_SKIP() << "tm_rc connects endpoint to endpoint: both sides hold one";
        }
        /* a 64 KiB window: the credit test below spends several */
        p_.a = worker(GetParam(), 256 << 10, 4);
        p_.b = worker(GetParam(), 256 << 10, 4);
        ASSERT_TRUE((p_.a != nullptr) && (p_.b != nullptr));
        p_.ab = ep_to(p_.a, p_.b); /* b holds none to a */
        ASSERT_NE(nullptr, p_.ab);
    }
    void TearDown() override { destroy_pair(&p_); }
    Pair p_;
};

/* Rendezvous into a source-less receive (posted first, and arriving
 * unexpected) needs the receiver's CTS or read acknowledgement; a
 * DELIVERY_COMPLETE send its ACK. The application sees no endpoint. */
TEST_P(ReplyEndpoints, ReceiverWithoutAnEndpointAnswers) {
    for (bool late : {false, true}) {
        SCOPED_TRACE(late ? "unexpected first" : "receive first");
        const auto big = pattern(kRndv, late ? 2 : 1);
        EXPECT_EQ(nullptr, transfer(p_, big, 10 + late, 0, late).ep);
        const auto small = pattern(64, 3);
        EXPECT_EQ(nullptr,
                  transfer(p_, small, 20 + late, UCT_TM_PROTO_SEND_DELIVERY_COMPLETE, late).ep);
    }
}

/* Eager credit comes back without the receiver's endpoint: eight windows
 * of eager messages, each received, all arrive and every send completes
 * (lost credit would leave the sender waiting on rendezvous replies). */
TEST_P(ReplyEndpoints, EagerCreditComesBack) {
    constexpr size_t kLen = 8 << 10, kCount = 64; /* 512 KiB, the window 64 KiB */
    for (size_t i = 0; i < kCount; ++i) {
        SCOPED_TRACE(i);
        transfer(p_, pattern(kLen, static_cast<uint32_t>(i)), 30, 0, false);
        if (HasFailure()) {
            return;
        }
    }
}

/* The receiver's own ep_create() takes over the endpoint it created: the
 * same peer's later messages name it, and it sends. */
TEST_P(ReplyEndpoints, OwnEndpointAdoptsIt) {
    transfer(p_, pattern(kRndv, 4), 40, 0, false);
    p_.ba = ep_to(p_.b, p_.a);
    ASSERT_NE(nullptr, p_.ba);
    EXPECT_EQ(p_.ba, transfer(p_, pattern(kRndv, 5), 41, 0, false).ep);
    EXPECT_EQ(p_.ba, transfer(p_, pattern(8, 6), 42, 0, true).ep);
    std::swap(p_.a, p_.b);
    std::swap(p_.ab, p_.ba);
    EXPECT_EQ(p_.ba, transfer(p_, pattern(kRndv, 7), 43, 0, false).ep) << "b -> a";
}

INSTANTIATE_TEST_SUITE_P(transports, ReplyEndpoints, ::testing::ValuesIn(proto_transports()),
                         transport_name);

/* A receiver with no room for another endpoint (MAX_PEERS) parks its reply
 * until the application makes room and creates one: the DELIVERY_COMPLETE
 * send completes then, not before. */
TEST(ParkedReplies, DeliveryAckWaitsForRoomAndTheReceiversEndpoint) {
    Pair p;
    p.a                     = worker("posix");
    p.b                     = worker("posix", 256 << 10, 1);
    uct_tm_proto_worker_h c = worker("posix");
    ASSERT_TRUE((p.a != nullptr) && (p.b != nullptr) && (c != nullptr));
    uct_tm_proto_ep_h bc           = ep_to(p.b, c); /* b's one endpoint */
    p.ab                           = ep_to(p.a, p.b);
    char                     in[8] = {}, out[8] = "parked";
    CallCount                sc;
    uct_tm_proto_op_params_t sp = {};
    sp.flags                    = UCT_TM_PROTO_SEND_DELIVERY_COMPLETE;
    sp.cb                       = CallCount::cb;
    sp.arg                      = &sc;
    uct_tm_proto_request_t rreq = 0, sreq = 0;
    ASSERT_EQ(UCS_INPROGRESS,
              uct_tm_proto_recv(p.b, in, sizeof(in), 5, kAll, nullptr, nullptr, &rreq));
    ASSERT_EQ(UCS_INPROGRESS, uct_tm_proto_send(p.ab, out, sizeof(out), 5, &sp, &sreq));
    ASSERT_EQ(UCS_OK, wait_request(p, p.b, rreq));
    EXPECT_STREQ("parked", in);
    for (int i = 0; i < 1000; ++i) {
        uct_tm_proto_worker_progress(p.a);
        uct_tm_proto_worker_progress(p.b);
    }
    EXPECT_EQ(0, sc.n) << "no room for an endpoint to a at b: the acknowledgement waits";
    uct_tm_proto_ep_destroy(bc);
    p.ba = ep_to(p.b, p.a);
    ASSERT_TRUE(wait_for(p, [&] { return sc.n == 1; }));
    EXPECT_EQ(UCS_OK, sc.status);
    uct_tm_proto_request_release(p.a, sreq);
    uct_tm_proto_request_release(p.b, rreq);
    destroy_pair(&p);
    uct_tm_proto_worker_destroy(c);
}

/* A hello a conforming peer never sends -- short, a length that is not the
 * message's, addressed to another worker, naming another worker than its
 * sender, an address that is not one -- creates no endpoint: the worker,
 * allowed one peer, can still create its endpoint afterwards. */
TEST(ReplyEndpointWire, ForgedHellosCreateNothing) {
    uct_tm_proto_worker_h w = worker("posix", 256 << 10, 1);
    uct_tm_proto_worker_h x = worker("posix");
    uct_tm_proto_worker_h y = worker("posix");
    ASSERT_TRUE((w != nullptr) && (x != nullptr) && (y != nullptr));
    RawIface raw;
    ASSERT_EQ(UCS_OK, raw.open(w));
    uint32_t w_id = 0, x_id = 0;
    {
        const auto a = address_of(w), b = address_of(x);
        /* a full address starts with its AddressHeader */
        memcpy(&w_id, a.data() + offsetof(uct_tm::proto::AddressHeader, id), sizeof(w_id));
        memcpy(&x_id, b.data() + offsetof(uct_tm::proto::AddressHeader, id), sizeof(x_id));
    }
    auto hello = [&](uint32_t source, uint32_t target, const std::vector<char> &addr,
                     int length_delta) {
        uct_tm::proto::HelloHeader h = {};
        h.kind                       = uct_tm::proto::Kind::kHello;
        h.source                     = source;
        h.target                     = target;
        h.length                     = static_cast<uint32_t>(addr.size() + length_delta);
        std::vector<char> msg(sizeof(h));
        memcpy(msg.data(), &h, sizeof(h));
        msg.insert(msg.end(), addr.begin(), addr.end());
        return msg;
    };
    const auto                           x_addr = address_of(x), y_addr = address_of(y);
    const std::vector<std::vector<char>> forged = {
        std::vector<char>(12, 15),                      /* shorter than the header */
        hello(x_id, w_id, x_addr, 1),                   /* length past the message */
        hello(x_id, w_id + 1, x_addr, 0),               /* to another worker */
        hello(x_id, w_id, y_addr, 0),                   /* y's address, claiming x */
        hello(x_id, w_id, std::vector<char>(40, 7), 0), /* not an address */
        hello(w_id, w_id, address_of(w), 0),            /* from w itself */
    };
    for (const auto &msg : forged) {
        raw.send(uct_tm::proto::kAmId, msg, w);
        progress(w, 200);
    }
    uct_tm_proto_ep_h ep = ep_to(w, y);
    EXPECT_NE(nullptr, ep) << "a forged hello took the one endpoint allowed";
    uct_tm_proto_worker_destroy(w);
    uct_tm_proto_worker_destroy(x);
    uct_tm_proto_worker_destroy(y);
}

}  // namespace
}  // namespace uct_tm_test
