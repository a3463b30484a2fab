/*
 * RequestPool (src/proto/request.h): handles are index + generation, so a
 * released slot's old handle is rejected even once the slot holds a new
 * request, also across the generation's wrap, and another pool's handle
 * is not this pool's request; a slot whose previous user
 * wrote cold fields comes back fully reset, one that stayed on the
 * offloaded eager path keeps them (they are still the defaults).
 */
#include "request.h"

#include <gtest/gtest.h>

#include <cstdint>

namespace {

using uct_tm::proto::ReqKind;
using uct_tm::proto::Request;
using uct_tm::proto::RequestPool;

/* Releases the live request `h` names. */
void release(RequestPool &pool, uint64_t h) {
    uint32_t index = 0;
    Request *r     = pool.lookup(h, &index);
    ASSERT_NE(r, nullptr);
    pool.release(index, *r);
}

TEST(RequestPool, ReleasedSlotsOldHandleIsRejectedWhenTheSlotIsReused) {
    RequestPool pool;
    uint64_t    first;
    Request    &r1 = pool.allocate(ReqKind::kRecv, &first);
    EXPECT_EQ(pool.lookup(first), &r1);
    uint32_t index = 0;
    ASSERT_EQ(pool.lookup(first, &index), &r1);
    pool.release(index, r1);
    EXPECT_EQ(pool.lookup(first), nullptr); /* released: stale */
    uint64_t second;
    Request &r2 = pool.allocate_offloaded(&second);
    EXPECT_EQ(&r2, &r1); /* LIFO: the same slot */
    EXPECT_NE(second, first);
    EXPECT_EQ(pool.lookup(second), &r2);
    EXPECT_EQ(pool.lookup(first), nullptr); /* the old handle does not reach the new request */
}

TEST(RequestPool, GenerationWrapSkipsZeroAndKeepsOldHandlesStale) {
    RequestPool pool;
    uint64_t    h;
    Request    &r = pool.allocate(ReqKind::kSend, &h);
    uint32_t index = 0;
    ASSERT_EQ(pool.lookup(h, &index), &r);
    pool.release(index, r);
    r.gen = UINT32_MAX; /* as after 2^32 - 2 reuses */
    uint64_t last;
    ASSERT_EQ(&pool.allocate(ReqKind::kSend, &last), &r);
    EXPECT_EQ(last >> 32, UINT32_MAX);
    ASSERT_EQ(pool.lookup(last, &index), &r);
    pool.release(index, r);
    EXPECT_EQ(r.gen, 1u); /* 0 is never a generation */
    uint64_t wrapped;
    ASSERT_EQ(&pool.allocate(ReqKind::kSend, &wrapped), &r);
    EXPECT_EQ(wrapped >> 32, 1u);
    EXPECT_EQ(pool.lookup(wrapped), &r);
    EXPECT_EQ(pool.lookup(last), nullptr);
    /* (h, generation 1, names the slot again: a 32-bit generation tells
     * handles apart for 2^32 - 1 reuses of a slot, not forever) */
}

TEST(RequestPool, ForgedHandlesAreRejected) {
    RequestPool pool;
    uint64_t    h;
    pool.allocate(ReqKind::kRecv, &h);
    EXPECT_EQ(pool.lookup(0), nullptr);
    EXPECT_EQ(pool.lookup(h + 1), nullptr);                  /* index never issued */
    EXPECT_EQ(pool.lookup(h ^ (uint64_t{1} << 40)), nullptr); /* wrong generation */
}

TEST(RequestPool, AnotherPoolsHandleIsRejected) {
    RequestPool mine, other;
    uint64_t    h_mine, h_other;
    mine.allocate(ReqKind::kRecv, &h_mine);
    other.allocate(ReqKind::kRecv, &h_other);
    EXPECT_EQ(h_mine & 0xffffffffu, h_other & 0xffffffffu); /* the same slot index */
    EXPECT_EQ(mine.lookup(h_other), nullptr);
    EXPECT_EQ(other.lookup(h_mine), nullptr);
}

TEST(RequestPool, SlotUsedByAnyPathComesBackFullyReset) {
    RequestPool pool;
    uint64_t    h;
    Request    &r = pool.allocate(ReqKind::kSend, &h);
    r.length      = 77;
    r.rndv        = true;
    r.offset      = 5;
    r.received    = 9;
    r.rbuf        = reinterpret_cast<char *>(&h);
    r.tag         = 3;
    r.done        = true;
    r.info.length = 11;
    release(pool, h);
    uint64_t h2;
    Request &fast = pool.allocate_offloaded(&h2); /* the previous user was general */
    ASSERT_EQ(&fast, &r);
    EXPECT_EQ(fast.length, 0u);
    EXPECT_FALSE(fast.rndv);
    EXPECT_EQ(fast.offset, 0u);
    EXPECT_EQ(fast.received, 0u);
    EXPECT_FALSE(fast.done);
    EXPECT_EQ(fast.info.length, 0u);
    EXPECT_EQ(fast.kind, ReqKind::kRecv);
    EXPECT_FALSE(fast.cold_dirty);
}

TEST(RequestPool, GeneralAllocationAfterTheOffloadedPathResetsWhatThatPathWrote) {
    RequestPool pool;
    uint64_t    h;
    Request    &r = pool.allocate_offloaded(&h);
    r.rbuf        = reinterpret_cast<char *>(&h); /* what recv_offloaded() writes */
    r.capacity    = 8;
    r.tag         = 1;
    r.mask        = 2;
    r.seq         = 3;
    r.done        = true;
    r.info.length = 8;
    release(pool, h);
    uint64_t h2;
    Request &g = pool.allocate(ReqKind::kRecv, &h2);
    ASSERT_EQ(&g, &r);
    EXPECT_EQ(g.rbuf, nullptr);
    EXPECT_EQ(g.capacity, 0u);
    EXPECT_EQ(g.tag, 0u);
    EXPECT_EQ(g.mask, 0u);
    EXPECT_EQ(g.seq, 0u);
    EXPECT_FALSE(g.done);
    EXPECT_EQ(g.info.length, 0u);
    EXPECT_TRUE(g.cold_dirty); /* a general user may write anything */
}

}  // namespace
