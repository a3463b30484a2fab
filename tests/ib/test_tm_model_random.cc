/*
 * Seeded random schedules of the device model under the driver: posts,
 * cancels and messages of every kind from several senders, with the model's
 * events (list ops, arrivals, transfers, late op completions) in random
 * order. Checked against the matching rules as the software tag list
 * states them (earliest posted matching receive; unexpected only when no
 * posted receive matches; per-sender order), plus: every receive completes
 * exactly once, consumed first, with the right bytes; every rendezvous that
 * reached a receive gets exactly one FIN; the run drains in bounded steps.
 */
#include "tm_model_harness.h"

#include <gtest/gtest.h>

#include <cstdio>
#include <cstdlib>
#include <map>
#include <random>

namespace uct_tm {
namespace ib {
namespace {

using test::Harness;
using test::Recv;
using test::Unexpected;

enum class Kind { kEager, kRndv, kSwRequest };

struct Msg {
    uint64_t id;
    uint32_t src;
    uint64_t tag;
    Kind     kind;
    size_t   length; /* payload / rendezvous data */
};

struct Posted {
    Recv     *recv;
    uint64_t  tag, mask;
    bool      cancel_requested = false;
    bool      forced           = false; /* cancelled with force: no callback after it */
    int       calls_at_force   = 0;
};

/* Chronological log entry for posts / cancels: before the consume or
 * unexpected event number `at`. */
struct Op {
    size_t at;
    bool   cancel;
    bool   force;
    size_t posted; /* index into `posted` */
};

std::vector<uint8_t> body(uint64_t id, size_t n) {
    std::vector<uint8_t> v = Harness::pattern(id, n);
    memcpy(v.data(), &id, sizeof(id)); /* n >= 8 */
    return v;
}

/* Every third message has immediate 0 in its low half (multi-packet ones
 * are then sent with immediate 0, which must not read as a rendezvous request). */
uint64_t imm_of(uint64_t id) { return (id << 32) | ((id % 3 == 0) ? 0 : id + 1); }

uint64_t id_of(const std::vector<uint8_t> &v) {
    uint64_t id = UINT64_MAX;
    if (v.size() >= sizeof(id)) {
        memcpy(&id, v.data(), sizeof(id));
    }
    return id;
}

struct Totals {
    unsigned long hw_matches = 0, sw_claims = 0, unexpected = 0, cancels = 0, syncs = 0,
                  sw_rndv = 0, del_failed = 0, rndv_incomplete = 0, read_failures = 0,
                  forced = 0;
};

void run_seed(uint64_t seed, Totals *totals) {
    SCOPED_TRACE("seed " + std::to_string(seed));
    std::mt19937_64 rng(seed);
    auto            pick = [&rng](size_t n) { return std::uniform_int_distribution<size_t>(0, n - 1)(rng); };

    TmModel::Config mc;
    mc.caps.max_num_tags    = 6;
    /* Every third seed: just the ops the driver reserves (ADD + DEL per
     * receive, one SYNC), so a DEL that protects a claim must always fit. */
    mc.caps.max_ops         = (seed % 3 == 0) ? 2 * 6 + 1 : 64;
    mc.mtu                  = 512;
    mc.sync_req_diff        = 3;
    mc.defer_op_completions = (seed % 2) == 1;
    HwTagEngineConfig ec;
    ec.list_size      = 6;
    ec.rx_buffers     = 24;
    ec.rx_buffer_size = 2048;
    Harness h(mc, ec);

    std::vector<Msg>    msgs;
    std::vector<Posted> posted;
    std::vector<Op>     ops;
    const uint64_t      masks[] = {~uint64_t{0}, ~uint64_t{1}, ~uint64_t{3}};

    for (int step = 0; step < 250; ++step) {
        const size_t action = pick(100);
        if (action < 30) {
            Recv *r = h.make_recv(64 + pick(1500));
            const uint64_t tag  = pick(4);
            const uint64_t mask = masks[pick(3)];
            ops.push_back(Op{h.events.size(), false, false, posted.size()});
            const ucs_status_t s = h.post(r, tag, mask);
            if (s == UCS_OK) {
                posted.push_back(Posted{r, tag, mask});
            } else {
                ASSERT_EQ(UCS_ERR_EXCEEDS_LIMIT, s);
                ops.pop_back();
            }
        } else if (action < 40) {
            if (!posted.empty()) {
                const size_t i     = pick(posted.size());
                Posted      &p     = posted[i];
                const bool   force = (pick(4) == 0);
                if (!p.forced && (p.recv->completed + p.recv->rndv == 0) &&
                    (force || !p.cancel_requested)) {
                    const ucs_status_t s = h.cancel(p.recv, force);
                    if (s == UCS_OK) {
                        p.cancel_requested = true;
                        p.forced           = force;
                        p.calls_at_force   = p.recv->consumed;
                        ops.push_back(Op{h.events.size(), true, force, i});
                    }
                }
            }
        } else if (action < 70) {
            Msg m;
            m.id  = msgs.size();
            m.src = 1 + static_cast<uint32_t>(pick(3));
            m.tag = pick(4);
            const size_t k = pick(10);
            m.kind   = (k < 6) ? Kind::kEager : (k < 9) ? Kind::kRndv : Kind::kSwRequest;
            m.length = (m.kind == Kind::kRndv) ? 100 + pick(2500) : 8 + pick(1000);
            if (m.kind == Kind::kSwRequest) {
                m.length = 8;
            }
            msgs.push_back(m);
            const std::vector<uint8_t> data = body(m.id, m.length);
            switch (m.kind) {
            case Kind::kEager:
                h.send_eager(m.src, m.tag, data, imm_of(m.id));
                break;
            case Kind::kRndv:
                h.send_rndv(m.src, m.tag, static_cast<uint32_t>(m.id), data, body(m.id, 8));
                break;
            case Kind::kSwRequest:
                h.send_sw_rndv_request(m.src, m.tag, data);
                break;
            }
        } else {
            if (pick(30) == 0) {
                h.model().fail_next_read(); /* fault: the next hardware RDMA READ fails */
            }
            for (size_t n = 1 + pick(8); n > 0; --n) {
                h.model().step_random(rng);
            }
            h.progress();
            if (pick(2) == 0) {
                /* fault: now and then the software rendezvous read fails */
                h.finish_sw_rndv((pick(20) == 0) ? UCS_ERR_IO_ERROR : UCS_OK);
            }
        }
    }
    ASSERT_TRUE(h.drain()) << "no quiescence within the bound: a hang";
    for (size_t i = 0; i < posted.size(); ++i) {
        Posted &p = posted[i];
        if ((p.recv->completed + p.recv->rndv == 0) && !p.cancel_requested &&
            (h.cancel(p.recv, 0) == UCS_OK)) {
            p.cancel_requested = true;
            ops.push_back(Op{h.events.size(), true, false, i});
        }
    }
    ASSERT_TRUE(h.drain());

    /* Every receive: exactly one completion, consumed first (unless cancelled). */
    std::map<uint64_t, Recv *> got;         /* message id -> receive */
    std::map<long, uint64_t>   msg_of_recv; /* receive id -> message id */
    size_t forced = 0;
    for (const Posted &p : posted) {
        Recv *r = p.recv;
        if (p.forced) { /* nothing after the cancel, whatever the engine did with the buffer */
            ++forced;
            EXPECT_EQ(0, r->completed + r->rndv) << "receive " << r->id;
            EXPECT_EQ(p.calls_at_force, r->consumed) << "receive " << r->id;
            continue;
        }
        ASSERT_EQ(1, r->completed + r->rndv) << "receive " << r->id;
        if ((r->completed == 1) && (r->status == UCS_ERR_CANCELED)) {
            EXPECT_TRUE(p.cancel_requested);
            EXPECT_EQ(0, r->consumed);
            continue;
        }
        ASSERT_EQ(1, r->consumed) << "receive " << r->id;
        EXPECT_TRUE(r->consumed_first);
        uint64_t id = (r->rndv == 1) ? id_of(r->header) : id_of(r->buffer);
        if (r->status == UCS_ERR_IO_ERROR) { /* an injected read failure: no bytes to tell */
            for (const TmModel::FailedRead &f : h.model().failed_reads()) {
                if (f.buffer == r->buffer.data()) {
                    id = h.remote_id(f.rkey);
                }
            }
            if (h.sw_failed.count(r->buffer.data())) {
                id = h.remote_id(h.sw_failed[r->buffer.data()]);
            }
        }
        ASSERT_LT(id, msgs.size()) << "receive " << r->id << " holds no message";
        ASSERT_EQ(0u, got.count(id)) << "message " << id << " delivered twice";
        got[id]            = r;
        msg_of_recv[r->id] = id;
        const Msg &m       = msgs[id];
        EXPECT_EQ(m.tag, r->stag);
        if (m.kind == Kind::kSwRequest) {
            EXPECT_EQ(1, r->rndv);
            EXPECT_EQ(body(m.id, 8), r->header);
            continue;
        }
        ASSERT_EQ(1, r->completed);
        EXPECT_EQ(m.length, r->length);
        if ((m.kind == Kind::kRndv) && (r->status == UCS_ERR_IO_ERROR)) {
            ++totals->read_failures; /* injected: the bytes are not checked */
            continue;
        }
        const bool fits = m.length <= r->buffer.size();
        EXPECT_EQ(fits ? UCS_OK : UCS_ERR_MESSAGE_TRUNCATED, r->status) << "message " << id;
        const auto expect = body(m.id, m.length);
        const size_t n    = std::min(m.length, r->buffer.size());
        EXPECT_TRUE(std::equal(expect.begin(), expect.begin() + n, r->buffer.begin()))
            << "message " << id << " bytes";
        if (m.kind == Kind::kEager) {
            EXPECT_EQ(imm_of(m.id), r->imm);
        }
    }
    /* Every message: in a receive or handed up unexpected, once. */
    std::map<uint64_t, size_t> unexpected_of; /* message id -> index in h.unexpected */
    for (size_t i = 0; i < h.unexpected.size(); ++i) {
        const Unexpected &u = h.unexpected[i];
        const uint64_t    id = id_of(u.data);
        ASSERT_LT(id, msgs.size());
        ASSERT_EQ(0u, got.count(id)) << "message " << id << " both matched and unexpected";
        ASSERT_EQ(0u, unexpected_of.count(id));
        unexpected_of[id] = i;
        EXPECT_EQ(msgs[id].tag, u.stag);
    }
    /* A message the engine consumed into a force-cancelled receive is gone
     * (as with rc_mlx5): at most one per forced cancel. */
    ASSERT_LE(got.size() + unexpected_of.size(), msgs.size());
    EXPECT_LE(msgs.size() - got.size() - unexpected_of.size(), forced);
    totals->forced += forced;

    /* FIN: once for every rendezvous that reached a receive. */
    std::map<uint32_t, int> fins;
    for (const auto &f : h.hw_fins) {
        ++fins[f.second];
    }
    for (const auto &f : h.sw_fins) {
        ++fins[f.second];
    }
    for (const Msg &m : msgs) {
        if ((m.kind == Kind::kRndv) && !got.count(m.id) && !unexpected_of.count(m.id)) {
            EXPECT_GE(1, fins[static_cast<uint32_t>(m.id)]) << "message " << m.id;
        }
    }
    for (const auto &[id, r] : got) {
        if (msgs[id].kind != Kind::kRndv) {
            continue;
        }
        if (r->status == UCS_ERR_IO_ERROR) { /* no FIN after a failed hardware read */
            EXPECT_GE(1, fins[static_cast<uint32_t>(id)]) << "message " << id;
        } else {
            EXPECT_EQ(1, fins[static_cast<uint32_t>(id)]) << "message " << id;
        }
    }

    /* Matching rules, replayed in the order the engine reported: posts and
     * cancels enter at the point they were made. */
    struct Alive {
        size_t posted;
        bool   cancelling; /* non-forced cancel requested: may match or not */
    };
    std::vector<Alive>       alive; /* posting order */
    std::map<uint32_t, long> last_of_src;
    size_t                   next_op = 0;
    for (size_t e = 0; e <= h.events.size(); ++e) {
        while ((next_op < ops.size()) && (ops[next_op].at <= e)) {
            const Op &op = ops[next_op++];
            if (!op.cancel) {
                alive.push_back(Alive{op.posted, false});
                continue;
            }
            for (size_t k = 0; k < alive.size(); ++k) {
                if (alive[k].posted == op.posted) {
                    if (op.force) {
                        alive.erase(alive.begin() + static_cast<std::ptrdiff_t>(k));
                    } else {
                        alive[k].cancelling = true;
                    }
                    break;
                }
            }
        }
        if (e == h.events.size()) {
            break;
        }
        const long ev = h.events[e];
        if ((ev >= 0) && !msg_of_recv.count(ev)) {
            /* consumed, then force-cancelled: its message is unknown */
            for (size_t k = 0; k < alive.size(); ++k) {
                if (posted[alive[k].posted].recv->id == ev) {
                    alive.erase(alive.begin() + static_cast<std::ptrdiff_t>(k));
                    break;
                }
            }
            continue;
        }
        const uint64_t id = (ev >= 0) ? msg_of_recv[ev]
                                      : id_of(h.unexpected[static_cast<size_t>(-1 - ev)].data);
        const Msg &m = msgs[id];
        ASSERT_GT(static_cast<long>(m.id), last_of_src.count(m.src) ? last_of_src[m.src] : -1)
            << "sender " << m.src << " reordered";
        last_of_src[m.src] = static_cast<long>(m.id);
        bool found = false;
        for (size_t k = 0; k < alive.size(); ++k) {
            const Posted &p       = posted[alive[k].posted];
            const bool    matches = ((m.tag ^ p.tag) & p.mask) == 0;
            if ((ev >= 0) && (p.recv->id == ev)) {
                EXPECT_TRUE(matches) << "message " << id << " in a receive it does not match";
                alive.erase(alive.begin() + static_cast<std::ptrdiff_t>(k));
                found = true;
                break;
            }
            if (matches && !alive[k].cancelling) {
                ADD_FAILURE() << "message " << id << " skipped the earlier posted receive "
                              << p.recv->id;
                break;
            }
        }
        if (ev >= 0) {
            EXPECT_TRUE(found) << "receive " << ev << " was not posted";
        }
    }
    const auto &ec_ = h.engine().counters();
    totals->hw_matches += ec_.hw_matches;
    totals->sw_claims += ec_.sw_claims;
    totals->unexpected += ec_.unexpected;
    totals->cancels += ec_.cancels;
    totals->syncs += ec_.syncs;
    totals->sw_rndv += ec_.sw_rndv;
    totals->del_failed += h.model().counters().del_failed;
    totals->rndv_incomplete += h.model().counters().rndv_incomplete;
    EXPECT_EQ(0u, h.engine().counters().anomalies);
    EXPECT_EQ(0u, h.model().violations());
    EXPECT_EQ(0u, h.model().held_handles());
    EXPECT_EQ(0u, h.engine().posted());
    EXPECT_TRUE(h.model().in_sync());
}

TEST(TmModelRandom, SeededSchedulesKeepUctTagSemantics) {
    /* TM_MODEL_SEEDS=N runs more schedules (a soak); make check runs 300. */
    const char    *env   = getenv("TM_MODEL_SEEDS");
    const uint64_t seeds = (env != nullptr) ? strtoull(env, nullptr, 10) : 2000;
    Totals         totals;
    for (uint64_t seed = 1; seed <= seeds; ++seed) {
        run_seed(seed, &totals);
        if (::testing::Test::HasFatalFailure()) {
            return;
        }
    }
    /* The schedules reached every path they are meant to check. */
    printf("random schedules: %lu hw matches, %lu sw claims, %lu unexpected, %lu cancels, "
           "%lu syncs, %lu sw rendezvous, %lu del failed, %lu rndv incomplete, %lu failed reads, "
           "%lu forced cancels\n",
           totals.hw_matches, totals.sw_claims, totals.unexpected, totals.cancels, totals.syncs,
           totals.sw_rndv, totals.del_failed, totals.rndv_incomplete, totals.read_failures,
           totals.forced);
    EXPECT_GT(totals.hw_matches, 0u);
    EXPECT_GT(totals.sw_claims, 0u);
    EXPECT_GT(totals.unexpected, 0u);
    EXPECT_GT(totals.cancels, 0u);
    EXPECT_GT(totals.syncs, 0u);
    EXPECT_GT(totals.sw_rndv, 0u);
    EXPECT_GT(totals.del_failed, 0u);
    EXPECT_GT(totals.rndv_incomplete, 0u);
    EXPECT_GT(totals.read_failures, 0u);
    EXPECT_GT(totals.forced, 0u);
}

}  // namespace
}  // namespace ib
}  // namespace uct_tm
