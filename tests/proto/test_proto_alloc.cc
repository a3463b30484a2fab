/*
 * Steady-state allocation of the protocol layer: once warmed up, a cycle of
 * fragmented eager messages over AM (offload off: the receiver tracks each
 * message's later fragments) allocates nothing, the receive posted first.
 */
#include "allocation_counter.h"
#include "proto_fixture.h"

#include <vector>

namespace uct_tm_test {
namespace {

constexpr size_t kFragmented = 20000; /* above one AM, below the rendezvous threshold */

/* Progresses both workers until `req` (of `owner`) completes; frees it. */
ucs_status_t finish(const Pair &pair, uct_tm_proto_worker_h owner, uct_tm_proto_request_t req) {
    ucs_status_t status;
    for (long spins = 0; (status = uct_tm_proto_request_test(owner, req, nullptr)) == UCS_INPROGRESS;
         ++spins) {
        if (spins > 100000000) {
            return UCS_ERR_TIMED_OUT;
        }
        uct_tm_proto_worker_progress(pair.a);
        uct_tm_proto_worker_progress(pair.b);
    }
    uct_tm_proto_request_release(owner, req);
    return status;
}

/* One message a -> b, the receive posted first. */
void cycle(const Pair &pair, const std::vector<char> &out, std::vector<char> *in, uint64_t tag) {
    uct_tm_proto_request_t rreq = 0, sreq = 0;
    ASSERT_EQ(UCS_INPROGRESS, uct_tm_proto_recv(pair.b, in->data(), in->size(), tag, ~uint64_t{0},
                                                nullptr, nullptr, &rreq));
    const ucs_status_t sent = uct_tm_proto_send(pair.ab, out.data(), out.size(), tag, nullptr, &sreq);
    ASSERT_TRUE((sent == UCS_OK) || (sent == UCS_INPROGRESS)) << ucs_status_string(sent);
    ASSERT_EQ(UCS_OK, finish(pair, pair.b, rreq));
    if (sent == UCS_INPROGRESS) {
        ASSERT_EQ(UCS_OK, finish(pair, pair.a, sreq));
    }
}

/* Over each transport without offload: the data goes over AM. Not a
 * parameterized test: gtest's registration of one, inlined next to the
 * counting operator delete, trips -Wmismatched-new-delete. */
void steady_cycle(const std::string &transport) {
    SCOPED_TRACE(transport);
    Pair pair;
    ASSERT_EQ(UCS_OK, make_pair(transport, &pair));
    const std::vector<char> out = pattern(kFragmented, 7);
    std::vector<char>       in(kFragmented);
    for (uint64_t i = 0; i < 64; ++i) { /* warm-up: pools and tables reach their size */
        cycle(pair, out, &in, i);
    }
    uct_tm_proto_stats_t before_stats;
    uct_tm_proto_worker_stats(pair.b, &before_stats);
    const size_t before = g_allocations.load();
    for (uint64_t i = 0; i < 256; ++i) {
        cycle(pair, out, &in, i);
    }
    const size_t allocated = g_allocations.load() - before;
    uct_tm_proto_stats_t after_stats;
    uct_tm_proto_worker_stats(pair.b, &after_stats);
    EXPECT_EQ(0u, allocated) << "allocations in 256 steady fragmented-eager cycles";
    EXPECT_EQ(before_stats.expected + 256, after_stats.expected) << "every message matched a posted receive";
    EXPECT_EQ(out, in);
    destroy_pair(&pair);
}

/* UCT_TM_PROTO_TEST_TRANSPORTS="tm_rc+sw" in the guest (tests/ib/test_rxe_proto.sh). */
TEST(ProtoAlloc, FragmentedEagerOverAmSteadyCycleAllocatesNothing) {
    for (const std::string &tl : test_transports({"tm_sm+sw"})) {
        ASSERT_NO_FATAL_FAILURE(steady_cycle(tl));
    }
}

}  // namespace
}  // namespace uct_tm_test
