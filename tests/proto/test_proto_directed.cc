/*
 * Directed receives (FI_DIRECTED_RECV, MPI's receives from one rank) with
 * two senders, against a reference model: b receives from a and from c;
 * receives from any source, from a and from c (exact, masked and wildcard
 * tags over 4 tags) are posted between messages from either sender, each
 * message waited for (matched or unexpected) before the next step, and
 * PEEK probes filtered on a source asked in between. Every message must
 * land in the receive the model gives it (one list: the earliest posted
 * receive whose tag and source match; a new receive takes the earliest
 * arrived matching message), a probe must name the message the model
 * does, and a cancelled receive must complete CANCELED. The remote data of
 * each message is its number. And deep queues: thousands of directed
 * receives (or unexpected messages) from two senders, matched in the
 * reverse of their order.
 */
#include "proto_fixture.h"

#include <deque>
#include <memory>
#include <random>

namespace uct_tm_test {
namespace {

constexpr uint64_t kAll = ~uint64_t{0};

struct ModelRecv {
    uint64_t               tag, mask;
    int                    src; /* -1: any, else the sender (0: a, 1: c) */
    uct_tm_proto_request_t req;
    uint64_t               buf = 0;
};

struct ModelMsg {
    uint64_t tag;
    int      src;
    uint64_t id;
};

bool takes(const ModelRecv &r, const ModelMsg &m) {
    return (((r.tag ^ m.tag) & r.mask) == 0) && ((r.src < 0) || (r.src == m.src));
}

class DirectedTest : public ProtoTest {
  protected:
    void SetUp() override {
        ProtoTest::SetUp();
        ASSERT_EQ(UCS_OK, connect_third(GetParam(), p_.b, t_.get()));
        ids_[0] = uct_tm_proto_worker_id(p_.a);
        ids_[1] = uct_tm_proto_worker_id(t_->c());
    }
    /* c and b's endpoint to it go before b does */
    void TearDown() override {
        t_.reset();
        ProtoTest::TearDown();
    }
    bool progress_until(const std::function<bool()> &done) {
        return wait_for(p_, [&] {
            uct_tm_proto_worker_progress(t_->c());
            return done();
        });
    }
    uct_tm_proto_ep_h from(int src) const {
        return (src < 0) ? nullptr : (src == 0) ? p_.ba : t_->bc;
    }
    /* Sends message `id` (8 B, the id also as remote data) from a or c. */
    void send_from(int src, uint64_t tag, uint64_t id) {
        uct_tm_proto_op_params_t params = {};
        params.flags                    = UCT_TM_PROTO_SEND_REMOTE_DATA;
        params.data                     = id;
        uct_tm_proto_request_t req      = 0;
        payloads_.push_back(id); /* the send's buffer until it completes */
        const ucs_status_t st = uct_tm_proto_send((src == 0) ? p_.ab : t_->cb, &payloads_.back(),
                                                  sizeof(id), tag, &params, &req);
        ASSERT_TRUE((st == UCS_OK) || (st == UCS_INPROGRESS)) << ucs_status_string(st);
        if (st == UCS_INPROGRESS) {
            sends_.push_back({(src == 0) ? p_.a : t_->c(), req});
        }
    }
    /* Receive `r` completed with message `m`. */
    void expect_took(ModelRecv &r, const ModelMsg &m) {
        uct_tm_proto_info_t info{};
        ucs_status_t        st = UCS_INPROGRESS;
        ASSERT_TRUE(progress_until([&] {
            st = uct_tm_proto_request_test(p_.b, r.req, &info);
            return st != UCS_INPROGRESS;
        })) << "message "
            << m.id << " did not reach its receive";
        ASSERT_EQ(UCS_OK, st);
        EXPECT_EQ(m.id, info.data) << "the receive took another message";
        EXPECT_EQ(m.id, r.buf);
        EXPECT_EQ(ids_[m.src], info.source);
        EXPECT_EQ(UCS_OK, uct_tm_proto_request_release(p_.b, r.req));
    }
    void finish_sends() {
        for (const auto &s : sends_) {
            ASSERT_TRUE(progress_until([&] {
                return uct_tm_proto_request_test(s.first, s.second, nullptr) != UCS_INPROGRESS;
            }));
            EXPECT_EQ(UCS_OK, uct_tm_proto_request_release(s.first, s.second));
        }
        sends_.clear();
        payloads_.clear();
    }
    /* `steps` random steps, a receive posted in `posts` of 10 (else mostly a message). */
    void random_round(std::mt19937_64 &rng, uint64_t *next_id, int steps, unsigned posts);
    void random_rounds(int steps, unsigned posts);
    void arrive(ModelMsg m);
    void post_one(ModelRecv r);
    void probe(std::mt19937_64 &rng);

    std::unique_ptr<ThirdWorker>            t_      = std::make_unique<ThirdWorker>();
    uint32_t                                ids_[2] = {};
    std::vector<std::unique_ptr<ModelRecv>> posted_;
    std::vector<ModelMsg>                   unexpected_;
    std::vector<std::pair<uct_tm_proto_worker_h, uct_tm_proto_request_t>> sends_;
    std::deque<uint64_t>                                                  payloads_;
};

/* A message arrives: the model's receive takes it, or it waits unexpected. */
void DirectedTest::arrive(ModelMsg m) {
    const uint64_t before = stats_of(p_.b).unexpected;
    send_from(m.src, m.tag, m.id);
    for (auto it = posted_.begin(); it != posted_.end(); ++it) {
        if (takes(**it, m)) {
            std::unique_ptr<ModelRecv> r = std::move(*it);
            posted_.erase(it);
            expect_took(*r, m);
            return;
        }
    }
    ASSERT_TRUE(progress_until([&] { return stats_of(p_.b).unexpected > before; }))
        << "message " << m.id << " neither matched nor waits unexpected";
    unexpected_.push_back(m);
}

/* A receive is posted: the earliest unexpected message it matches, or it waits. */
void DirectedTest::post_one(ModelRecv r) {
    auto rp = std::make_unique<ModelRecv>(r);
    rp->req = post(&rp->buf, sizeof(rp->buf), r.tag, r.mask, from(r.src));
    for (auto it = unexpected_.begin(); it != unexpected_.end(); ++it) {
        if (takes(*rp, *it)) {
            const ModelMsg m = *it;
            unexpected_.erase(it);
            expect_took(*rp, m);
            return;
        }
    }
    posted_.push_back(std::move(rp));
}

/* PEEK from a random source (or any) for a random tag: the model's message. */
void DirectedTest::probe(std::mt19937_64 &rng) {
    const ModelRecv     q{rng() % 4, kAll, static_cast<int>(rng() % 3) - 1, 0};
    uct_tm_proto_info_t info{};
    const ucs_status_t  st = uct_tm_proto_probe(p_.b, q.tag, q.mask, from(q.src),
                                                UCT_TM_PROTO_PROBE_PEEK, &info, nullptr);
    for (const ModelMsg &m : unexpected_) {
        if (takes(q, m)) {
            ASSERT_EQ(UCS_OK, st) << "probe missed message " << m.id;
            EXPECT_EQ(m.id, info.data) << "probe named another message";
            return;
        }
    }
    EXPECT_EQ(UCS_ERR_NO_ELEM, st) << "probe found message " << info.data;
}

void DirectedTest::random_round(std::mt19937_64 &rng, uint64_t *next_id, int steps,
                                unsigned posts) {
    static constexpr uint64_t kMasks[] = {kAll, kAll, kAll, ~uint64_t{1}, 0};
    for (int step = 0; step < steps; ++step) {
        const unsigned what = rng() % 10;
        if (what < posts) {
            post_one(ModelRecv{rng() % 4, kMasks[rng() % 5], static_cast<int>(rng() % 3) - 1, 0});
        } else if (what < 9) {
            arrive(ModelMsg{rng() % 4, static_cast<int>(rng() % 2), (*next_id)++});
        } else {
            probe(rng);
        }
        if (HasFatalFailure()) {
            return;
        }
    }
}

/* Random rounds against the model; each ends with the receives left
 * cancelled and the messages left taken by receives from their sender. */
void DirectedTest::random_rounds(int steps, unsigned posts) {
    std::mt19937_64 rng(20261202);
    uint64_t        next_id = 1;
    for (int round = 0; round < 30; ++round) {
        SCOPED_TRACE(testing::Message() << "round " << round);
        ASSERT_NO_FATAL_FAILURE(random_round(rng, &next_id, steps, posts));
        for (auto &r : posted_) {
            ASSERT_EQ(UCS_OK, uct_tm_proto_request_cancel(p_.b, r->req));
            EXPECT_EQ(UCS_ERR_CANCELED, wait_request(p_, p_.b, r->req));
        }
        posted_.clear();
        while (!unexpected_.empty()) {
            const ModelMsg m = unexpected_.front();
            ASSERT_NO_FATAL_FAILURE(post_one(ModelRecv{m.tag, kAll, m.src, 0}));
        }
        ASSERT_NO_FATAL_FAILURE(finish_sends());
    }
}

TEST_P(DirectedTest, MixFromTwoSendersMatchesTheModel) { random_rounds(40, 4); }

/* Receives outnumber messages: a sender's directed receives pass the 8 its
 * ring holds and go on in its matcher. */
TEST_P(DirectedTest, MixWithDeepQueuesMatchesTheModel) { random_rounds(120, 7); }

/* Thousands of directed receives from a and from c, distinct tags, each
 * sender's messages sent in the reverse order; then as many messages first
 * and the receives posted in reverse. Each lands where its tag and sender say. */
TEST_P(DirectedTest, DeepQueuesFromTwoSenders) {
    constexpr uint64_t kDepth = 2000;
    for (bool receives_first : {true, false}) {
        SCOPED_TRACE(receives_first ? "receives first" : "messages first");
        std::vector<ModelRecv> rs(2 * kDepth); /* rs[k]: tag k / 2 from sender k % 2 */
        const auto             post_all = [&] {
            for (uint64_t i = 0; i < 2 * kDepth; ++i) {
                ModelRecv &r = rs[receives_first ? i : 2 * kDepth - 1 - i];
                const auto k = static_cast<uint64_t>(&r - rs.data());
                r.src        = static_cast<int>(k % 2);
                r.tag        = k / 2;
                r.req        = post(&r.buf, sizeof(r.buf), r.tag, kAll, from(r.src));
            }
        };
        const uint64_t before = stats_of(p_.b).unexpected;
        if (receives_first) {
            post_all();
        }
        for (uint64_t i = 2 * kDepth; i-- > 0;) {
            ASSERT_NO_FATAL_FAILURE(send_from(static_cast<int>(i % 2), i / 2, 1000000 + i));
        }
        if (!receives_first) {
            ASSERT_TRUE(
                progress_until([&] { return stats_of(p_.b).unexpected >= before + 2 * kDepth; }));
            post_all();
        }
        for (uint64_t i = 0; i < 2 * kDepth; ++i) {
            ASSERT_NO_FATAL_FAILURE(
                expect_took(rs[i], ModelMsg{i / 2, static_cast<int>(i % 2), 1000000 + i}));
        }
        ASSERT_NO_FATAL_FAILURE(finish_sends());
    }
}

INSTANTIATE_TEST_SUITE_P(transports, DirectedTest, ::testing::ValuesIn(proto_transports()),
                         transport_name);

}  // namespace
}  // namespace uct_tm_test
