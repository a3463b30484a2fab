/*
 * QpPool (uct_tm/ib/qp_pool.h): the on-demand RC queue-pair pool's policy without a
 * device -- room below capacity, least-recently-used eviction of idle
 * holders only, waiters served first come first, and nobody jumping the
 * queue.
 */
#include "ib/qp_pool.h"

#include <gtest/gtest.h>

#include <vector>

namespace {

using uct_tm::ib::QpPool;

struct FakeEp {
    uint64_t last_use = 0;
    bool     busy     = false; /* something in flight: not evictable */
};

/* A pool whose idle test is !busy and whose evictions are recorded. */
struct Harness {
    QpPool<FakeEp>        pool;
    std::vector<FakeEp *> evicted;
    bool room(uint64_t now = 0) {
        return pool.room(
                now, [](const FakeEp *ep, uint64_t) { return !ep->busy; },
                [this](FakeEp *ep) { evicted.push_back(ep); });
    }
};

TEST(QpPool, RoomBelowCapacityEvictsNothing) {
    Harness h;
    h.pool.set_capacity(2);
    FakeEp a, b;
    ASSERT_TRUE(h.room());
    h.pool.hold(&a);
    ASSERT_TRUE(h.room());
    h.pool.hold(&b);
    EXPECT_TRUE(h.evicted.empty());
    EXPECT_EQ(h.pool.held(), 2u);
}

TEST(QpPool, FullOfBusyHoldersHasNoRoom) {
    Harness h;
    h.pool.set_capacity(2);
    FakeEp a, b;
    a.busy = b.busy = true;
    h.pool.hold(&a);
    h.pool.hold(&b);
    EXPECT_FALSE(h.room());
    EXPECT_TRUE(h.evicted.empty());
    EXPECT_EQ(h.pool.held(), 2u);
}

TEST(QpPool, EvictsTheLeastRecentlyUsedIdleHolder) {
    Harness h;
    h.pool.set_capacity(3);
    FakeEp a, b, c;
    a.last_use = 5;
    b.last_use = 2;
    b.busy     = true; /* older, but busy: kept */
    c.last_use = 9;
    h.pool.hold(&a);
    h.pool.hold(&b);
    h.pool.hold(&c);
    ASSERT_TRUE(h.room());
    ASSERT_EQ(h.evicted.size(), 1u);
    EXPECT_EQ(h.evicted[0], &a);
    EXPECT_EQ(h.pool.held(), 2u);
    EXPECT_EQ(h.pool.holders(), (std::vector<FakeEp *>{&b, &c}));
}

TEST(QpPool, WaitersAreServedFirstComeFirstAsRoomAppears) {
    Harness h;
    h.pool.set_capacity(1);
    FakeEp a, b, c;
    a.busy = true;
    h.pool.hold(&a);
    h.pool.wait(&b);
    h.pool.wait(&c);
    std::vector<FakeEp *> taken;
    auto take = [&](FakeEp *ep) {
        taken.push_back(ep);
        ep->busy = true; /* a fresh connection carries its first send */
        h.pool.hold(ep);
    };
    h.pool.serve([&] { return h.room(); }, take);
    EXPECT_TRUE(taken.empty()) << "the only holder is busy";
    EXPECT_TRUE(h.pool.has_waiters());

    a.busy = false;
    h.pool.serve([&] { return h.room(); }, take);
    ASSERT_EQ(taken, (std::vector<FakeEp *>{&b})) << "first come first, one room made";
    EXPECT_EQ(h.evicted, (std::vector<FakeEp *>{&a}));
    EXPECT_TRUE(h.pool.has_waiters()) << "c still waits";

    b.busy = false;
    h.pool.serve([&] { return h.room(); }, take);
    EXPECT_EQ(taken, (std::vector<FakeEp *>{&b, &c}));
    EXPECT_FALSE(h.pool.has_waiters());
    EXPECT_EQ(h.pool.holders(), (std::vector<FakeEp *>{&c}));
}

/* A waiter whose queue pair could not be made (take() does not hold it)
 * leaves the room to the next one. */
TEST(QpPool, AFailedTakeLeavesItsRoomToTheNext) {
    Harness h;
    h.pool.set_capacity(1);
    FakeEp b, c;
    h.pool.wait(&b);
    h.pool.wait(&c);
    std::vector<FakeEp *> taken;
    h.pool.serve([&] { return h.room(); },
                 [&](FakeEp *ep) {
                     taken.push_back(ep);
                     if (ep == &c) {
                         ep->busy = true;
                         h.pool.hold(ep);
                     }
                 });
    EXPECT_EQ(taken, (std::vector<FakeEp *>{&b, &c}));
    EXPECT_EQ(h.pool.holders(), (std::vector<FakeEp *>{&c}));
    EXPECT_FALSE(h.pool.has_waiters());
}

TEST(QpPool, LeaveAndUnholdForgetTheEndpoint) {
    Harness h;
    h.pool.set_capacity(1);
    FakeEp a, b;
    a.busy = true;
    h.pool.hold(&a);
    h.pool.wait(&b);
    h.pool.leave(&b);
    EXPECT_FALSE(h.pool.has_waiters());
    h.pool.unhold(&a);
    EXPECT_EQ(h.pool.held(), 0u);
    EXPECT_TRUE(h.room()) << "a's place is free again";
    EXPECT_TRUE(h.evicted.empty()) << "leaving is not an eviction";
}

}  // namespace
