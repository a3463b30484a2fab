/*
 * Two protocol-layer workers in one process over one transport, with
 * endpoints to each other, and bounded waits (a hang fails the test after
 * kWaitSeconds instead of blocking the suite).
 */
#ifndef UCT_TM_TESTS_PROTO_FIXTURE_H_
#define UCT_TM_TESTS_PROTO_FIXTURE_H_

#include "api/uct_tm_proto.h"

#include <gtest/gtest.h>

#include <cstring>
#include <functional>
#include <optional>
#include <string>
#include <vector>

namespace uct_tm_test {

inline constexpr double kWaitSeconds = 20;

struct Pair {
    uct_tm_proto_worker_h a = nullptr; /* usually the sender */
    uct_tm_proto_worker_h b = nullptr; /* usually the receiver */
    uct_tm_proto_ep_h     ab = nullptr; /* a -> b */
    uct_tm_proto_ep_h     ba = nullptr; /* b -> a */
};

/* Workers `a` and `b` over `transports` ("tl[:dev]", "+sw" appended: no
 * offload), parameters applied to both (field_mask of `extra` ORed in). */
/* Sets transports (and offload off for "+sw") from a test parameter; the
 * transports string lives in *tls. */
void         apply_transport(const std::string &param, uct_tm_proto_worker_params_t *params,
                             std::string *tls);
ucs_status_t make_pair(const std::string &transports, Pair *pair,
                       const uct_tm_proto_worker_params_t *extra = nullptr);
void         destroy_pair(Pair *pair);
/* Worker `w`'s address (uct_tm_proto_worker_address), empty on error. */
std::vector<char> worker_address(uct_tm_proto_worker_h w);
/* Endpoint `ep`'s address (uct_tm_proto_ep_address), empty on error. */
std::vector<char> ep_address(uct_tm_proto_ep_h ep);
/* Connects endpoints ab (a -> b) and ba (b -> a) to each other with their
 * addresses (every transport: over a connect-to-iface one it only checks
 * them). */
ucs_status_t connect_eps(uct_tm_proto_ep_h ab, uct_tm_proto_ep_h ba);

/* Progresses both workers until done() or the deadline; false on timeout. */
bool wait_for(const Pair &pair, const std::function<bool()> &done);

/* Waits for a request to complete and returns its final status and info. */
ucs_status_t wait_request(const Pair &pair, uct_tm_proto_worker_h owner,
                          uct_tm_proto_request_t req, uct_tm_proto_info_t *info = nullptr);

/* A worker's counters (uct_tm_proto_worker_stats). */
uct_tm_proto_stats_t stats_of(uct_tm_proto_worker_h w);

/* What a request's callback reported: how often it ran, the last status and
 * request (CallCount::cb, its arg the CallCount). */
struct CallCount {
    int                    n      = 0;
    ucs_status_t           status = UCS_OK;
    uct_tm_proto_request_t req    = ~uint64_t{0}; /* none reported yet */
    static void cb(void *arg, uct_tm_proto_request_t req, const uct_tm_proto_info_t *info) {
        auto *c = static_cast<CallCount *>(arg);
        ++c->n;
        c->status = info->status;
        c->req    = req;
    }
};

/* Deterministic payload of message `seed`. */
std::vector<char> pattern(size_t length, uint32_t seed);

/* Whether n bytes at a and b are equal (an empty vector's data() may be
 * null, which memcmp must not get even for n = 0). */
inline bool same_bytes(const void *a, const void *b, size_t n) {
    return (n == 0) || (memcmp(a, b, n) == 0);
}

/* A third worker c with endpoints to and from b (as
 * ProtoTest.EndpointAddressIsCheckedBeforeUse makes one); destroyed with the
 * test, failed or not. */
struct ThirdWorker {
    Pair              q;
    uct_tm_proto_ep_h bc = nullptr; /* b -> c */
    uct_tm_proto_ep_h cb = nullptr; /* c -> b */
    ~ThirdWorker() {
        if (bc != nullptr) {
            uct_tm_proto_ep_destroy(bc);
        }
        destroy_pair(&q);
    }
    uct_tm_proto_worker_h c() const { return q.a; }
};

/* Makes worker c over `param`'s transports and connects it with b. */
ucs_status_t connect_third(const std::string &param, uct_tm_proto_worker_h b, ThirdWorker *t);

/* Transports tested: tm_sm (ours, when the plugin registered it) with tag
 * offload and without ("tm_sm+sw": receives matched in software, data over
 * AM), posix, tcp, and a worker over two ifaces ("tm_sm,posix"). */
std::vector<std::string> proto_transports();
/* `defaults`, or the space-separated test parameters in
 * UCT_TM_PROTO_TEST_TRANSPORTS (e.g. "tm_rc tm_rc+sw": the guest run,
 * tests/ib/test_rxe_proto.sh). */
std::vector<std::string> test_transports(const std::vector<std::string> &defaults);

/* gtest parameter name of a transport ("tcp:lo" -> "tcp_lo", "tm_sm+sw" -> "tm_sm_sw"). */
std::string transport_name(const ::testing::TestParamInfo<std::string> &info);

class ProtoTest : public ::testing::TestWithParam<std::string> {
  protected:
    void SetUp() override;
    void TearDown() override;
    /* Re-creates the pair with these parameters. */
    void reopen(const uct_tm_proto_worker_params_t &extra);
    /* Sends and waits for the send to complete if it returned a request. */
    ucs_status_t send(const void *buf, size_t len, uint64_t tag, unsigned flags = 0,
                      std::optional<uint64_t> data = std::nullopt,
                      uct_tm_proto_request_t *req_out = nullptr);
    uct_tm_proto_request_t post(void *buf, size_t len, uint64_t tag, uint64_t mask,
                                uct_tm_proto_ep_h src = nullptr);
    /* Posts a receive of `len` bytes on b (from `src`, any if null), sends
     * them from a with `tag` and remote data 77, waits for both and checks the data,
     * the byte after it and the receive's info. */
    void transfer(size_t len, uint64_t tag, uint32_t seed, uct_tm_proto_ep_h src);
    /* Waits until a message tagged `tag` is unexpected at b (PEEK finds it). */
    bool wait_unexpected(uint64_t tag);
    /* A receive of `cap` bytes into `buf` (guard bytes 'g' after them) took
     * the longer message `data`: its first bytes, nothing past, the sender's
     * length in info. */
    static void expect_truncated(const std::vector<char> &buf, size_t cap,
                                 const std::vector<char> &data, const uct_tm_proto_info_t &info);

    Pair p_;
};

}  // namespace uct_tm_test

#endif
