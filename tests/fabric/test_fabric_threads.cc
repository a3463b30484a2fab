/* Threading levels: every level fi_domain(3) defines is offered, and a
 * domain opened for FI_THREAD_SAFE takes posts and reads from many threads
 * at once on the same endpoints and CQs. */
#include "fabric_fixture.h"

#include <rdma/fi_eq.h>

#include <atomic>
#include <chrono>
#include <cstring>
#include <functional>
#include <thread>
#include <vector>

using namespace fabric_test;

namespace {

constexpr int      kThreads    = 4;
constexpr int      kPerThread  = 1500;
constexpr uint64_t kPayloadKey = 0x5a5a0000a5a5ull;

uint64_t tag_of(int thread, int i) { return (uint64_t(thread) << 32) | uint64_t(i); }

/* What one operation saw: how many completions named it, and whether each
 * carried what the operation expects. */
struct Slot {
    uint64_t          tag  = 0;
    uint64_t          data = 0; /* receives: the buffer */
    std::atomic<int>  completions{0};
    std::atomic<bool> wrong{false};
};

/* A pair of endpoints in one domain opened at `level`, each with its AV
 * holding the other. */
struct Pair {
    Fabric    fabric;
    Ep        a, b;
    fi_addr_t a_to_b = FI_ADDR_NOTAVAIL, b_to_a = FI_ADDR_NOTAVAIL;

    void open(fi_threading level, fi_wait_obj wait = FI_WAIT_NONE) {
        ASSERT_EQ(0, fabric.open(test_domain(), kCaps, level));
        ASSERT_EQ(0, a.open(fabric, FI_CQ_FORMAT_TAGGED, FI_AV_TABLE, 0, wait));
        ASSERT_EQ(0, b.open(fabric, FI_CQ_FORMAT_TAGGED, FI_AV_TABLE, 0, wait));
        a_to_b = a.insert(b.name());
        b_to_a = b.insert(a.name());
        ASSERT_NE(FI_ADDR_NOTAVAIL, a_to_b);
        ASSERT_NE(FI_ADDR_NOTAVAIL, b_to_a);
    }
    void close() {
        a.close();
        b.close();
        fabric.close();
    }
};

/* Reads what `cq` holds and counts each entry into the slot it names; a
 * receive's entry must carry its slot's tag and data. */
void drain(fid_cq *cq, bool receives) {
    fi_cq_tagged_entry e[8];
    const ssize_t      n = fi_cq_read(cq, e, 8);
    for (ssize_t i = 0; i < n; ++i) {
        Slot *s = static_cast<Slot *>(e[i].op_context);
        if (receives && ((e[i].tag != s->tag) || (s->data != (s->tag ^ kPayloadKey)))) {
            s->wrong = true;
        }
        ++s->completions;
    }
    if ((n < 0) && (n != -FI_EAGAIN)) {
        ADD_FAILURE() << "fi_cq_read: " << fi_strerror(int(-n));
    }
}

/* Runs fn(t) on kThreads threads, t = 0 .. kThreads - 1, and joins them. */
void on_threads(const std::function<void(int)> &fn) {
    std::vector<std::thread> threads;
    for (int t = 0; t < kThreads; ++t) {
        threads.emplace_back(fn, t);
    }
    for (std::thread &t : threads) {
        t.join();
    }
}

}  // namespace

TEST(FabricThreads, EveryLevelIsOffered) {
    for (fi_threading level : {FI_THREAD_SAFE, FI_THREAD_FID, FI_THREAD_ENDPOINT,
                               FI_THREAD_COMPLETION, FI_THREAD_DOMAIN}) {
        Fabric f;
        ASSERT_EQ(0, f.open(test_domain(), kCaps, level)) << level;
        EXPECT_EQ(level, f.info->domain_attr->threading);
        f.close();
    }
    /* unasked, the level that lets the application most */
    fi_info *info = tm_info(test_domain(), kCaps, FI_THREAD_UNSPEC);
    ASSERT_NE(nullptr, info);
    EXPECT_EQ(FI_THREAD_SAFE, info->domain_attr->threading);
    fi_freeinfo(info);
}

/* Each thread posts its own receives and sends on the shared endpoints and
 * reads both shared CQs, so completions of one thread's operations reach
 * the others: every operation must complete exactly once, with its data. */
TEST(FabricThreads, SafeDomainTakesPostsAndReadsFromManyThreads) {
    Pair p;
    p.open(FI_THREAD_SAFE);
    std::vector<Slot>     sends(kThreads * kPerThread), recvs(kThreads * kPerThread);
    std::vector<uint64_t> payload(kThreads * kPerThread);
    std::atomic<int>      errors{0};
    auto                  worker = [&](int t) {
        for (int i = 0; i < kPerThread; ++i) {
            const size_t k = size_t(t) * kPerThread + i;
            recvs[k].tag = sends[k].tag = tag_of(t, i);
            payload[k]                  = tag_of(t, i) ^ kPayloadKey;
            if (fi_trecv(p.b.ep, &recvs[k].data, sizeof(uint64_t), nullptr, FI_ADDR_UNSPEC,
                                          recvs[k].tag, 0, &recvs[k]) != 0) {
                ++errors;
            }
            ssize_t ret;
            while ((ret = fi_tsend(p.a.ep, &payload[k], sizeof(uint64_t), nullptr, p.a_to_b,
                                                    sends[k].tag, &sends[k])) == -FI_EAGAIN) {
                drain(p.a.cq, false);
                drain(p.b.cq, true);
            }
            errors += (ret != 0);
            drain(p.a.cq, false);
            drain(p.b.cq, true);
        }
    };
    on_threads(worker);
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(20);
    auto       done     = [](const std::vector<Slot> &v) {
        for (const Slot &s : v) {
            if (s.completions.load() == 0) {
                return false;
            }
        }
        return true;
    };
    while ((!done(sends) || !done(recvs)) && (std::chrono::steady_clock::now() < deadline)) {
        drain(p.a.cq, false);
        drain(p.b.cq, true);
    }
    EXPECT_EQ(0, errors.load());
    int once = 0;
    for (size_t k = 0; k < recvs.size(); ++k) {
        EXPECT_FALSE(recvs[k].wrong.load()) << "receive " << k;
        once += (sends[k].completions == 1) && (recvs[k].completions == 1);
    }
    EXPECT_EQ(kThreads * kPerThread, once);
    p.close();
}

/* Control calls from many threads at once: each opens its endpoint, CQ
 * and AV in the shared domain, sends itself a message and closes them;
 * the domain then closes (no child left counted). */
TEST(FabricThreads, SafeDomainOpensAndClosesFromManyThreads) {
    Fabric f;
    ASSERT_EQ(0, f.open(test_domain(), kCaps, FI_THREAD_SAFE));
    std::atomic<int> good{0};
    auto             worker = [&](int t) {
        for (int i = 0; i < 10; ++i) {
            Ep e;
            if (e.open(f, FI_CQ_FORMAT_TAGGED, FI_AV_TABLE) != 0) {
                e.close();
                continue;
            }
            const fi_addr_t    self = e.insert(e.name());
            uint64_t           in = 0, out = tag_of(t, i);
            fi_cq_tagged_entry c[2];
            const bool         posted = (self != FI_ADDR_NOTAVAIL) &&
                                (fi_trecv(e.ep, &in, sizeof(in), nullptr, FI_ADDR_UNSPEC, out, 0,
                                                      &in) == 0) &&
                                (fi_tsend(e.ep, &out, sizeof(out), nullptr, self, out, &out) == 0);
            good += posted && (wait_cq(e.cq, &c[0], nullptr) == 1) &&
                    (wait_cq(e.cq, &c[1], nullptr) == 1) && (in == out);
            e.close();
        }
    };
    on_threads(worker);
    EXPECT_EQ(kThreads * 10, good.load());
    f.close(); /* expects fi_close of the domain to return 0 */
}

/* fi_cq_sread takes the domain's lock per attempt: while one thread waits
 * in it, another sends the message it waits for. */
TEST(FabricThreads, BlockingReadLetsOtherThreadsPost) {
    Pair p;
    p.open(FI_THREAD_SAFE, FI_WAIT_UNSPEC);
    uint64_t in = 0, out = 42;
    ASSERT_EQ(0, fi_trecv(p.b.ep, &in, sizeof(in), nullptr, FI_ADDR_UNSPEC, 7, 0, &in));
    fi_cq_tagged_entry got{};
    ssize_t            read = 0;
    std::thread        waiter([&] { read = fi_cq_sread(p.b.cq, &got, 1, nullptr, 10000); });
    std::this_thread::sleep_for(std::chrono::milliseconds(100)); /* the waiter is inside */
    ASSERT_EQ(0, fi_tsend(p.a.ep, &out, sizeof(out), nullptr, p.a_to_b, 7, &out));
    fi_cq_tagged_entry sent{};
    EXPECT_EQ(1, wait_cq(p.a.cq, &sent, nullptr));
    waiter.join();
    EXPECT_EQ(1, read);
    EXPECT_EQ(&in, got.op_context);
    EXPECT_EQ(42u, in);
    p.close();
}
