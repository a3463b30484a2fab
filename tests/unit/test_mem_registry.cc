/*
 * MemRegistry (the live registrations of MD "tm"): what covers() answers for
 * nested, overlapping and equal ranges, that a deregistered range stops being
 * covered at once, the index built at the first question, handle reuse, and
 * no allocation in a steady register / deregister cycle.
 */
#include "allocation_counter.h"
#include "base/mem_registry.h"

#include <gtest/gtest.h>

#include <random>
#include <vector>

namespace {

struct TestHandle {
    void       *address   = nullptr;
    size_t      length    = 0;
    TestHandle *next_free = nullptr;
};

using Registry = uct_tm::MemRegistry<TestHandle>;

void *at(uintptr_t a) { return reinterpret_cast<void *>(a); }

TEST(MemRegistry, CoversInsideOneLiveRange) {
    Registry    reg;
    TestHandle *h = reg.add(at(0x10000), 0x1000);
    ASSERT_NE(h, nullptr);
    EXPECT_EQ(h->address, at(0x10000));
    EXPECT_EQ(h->length, 0x1000u);
    EXPECT_TRUE(reg.covers(0x10000, 0x1000));
    EXPECT_TRUE(reg.covers(0x10800, 0x800));
    EXPECT_TRUE(reg.covers(0x10fff, 1));
    EXPECT_TRUE(reg.covers(0x11000, 0)) << "an empty range at the end is inside";
    EXPECT_FALSE(reg.covers(0xffff, 2)) << "starts before the range";
    EXPECT_FALSE(reg.covers(0x10800, 0x801)) << "ends past the range";
    EXPECT_FALSE(reg.covers(0x11000, 1));
    EXPECT_FALSE(reg.covers(0, 0x20000));
    EXPECT_FALSE(reg.covers(UINT64_MAX, 2)) << "wrapping range";
}

TEST(MemRegistry, NestedAndOverlappingRanges) {
    Registry    reg;
    TestHandle *outer = reg.add(at(0x10000), 0x10000);
    TestHandle *inner = reg.add(at(0x14000), 0x1000);
    TestHandle *later = reg.add(at(0x1c000), 0x8000); /* overlaps outer's tail */
    ASSERT_TRUE(outer && inner && later);
    /* inside `outer` although the nearest start below is `inner`'s */
    EXPECT_TRUE(reg.covers(0x15000, 0x2000));
    /* spans outer and later, but no single registration holds it */
    EXPECT_FALSE(reg.covers(0x1b000, 0x6000));
    EXPECT_TRUE(reg.covers(0x1f000, 0x1000));
    EXPECT_TRUE(reg.covers(0x20000, 0x4000));
    reg.remove(outer);
    EXPECT_FALSE(reg.covers(0x15000, 0x2000)) << "only inner is left around there";
    EXPECT_TRUE(reg.covers(0x14000, 0x1000));
    EXPECT_TRUE(reg.covers(0x1c000, 0x8000));
    EXPECT_EQ(reg.live(), 2u);
}

TEST(MemRegistry, EqualRangesAreSeparateRegistrations) {
    Registry    reg;
    TestHandle *a = reg.add(at(0x10000), 0x1000);
    TestHandle *b = reg.add(at(0x10000), 0x1000);
    ASSERT_TRUE(a && b);
    EXPECT_NE(a, b);
    reg.remove(a);
    EXPECT_TRUE(reg.covers(0x10000, 0x1000)) << "the second registration still holds it";
    reg.remove(b);
    EXPECT_FALSE(reg.covers(0x10000, 0x1000)) << "deregistered: not covered any more";
    EXPECT_EQ(reg.live(), 0u);
}

TEST(MemRegistry, RemoveTakesTheGivenHandleOfEqualStarts) {
    Registry    reg;
    TestHandle *small = reg.add(at(0x10000), 0x100);
    TestHandle *large = reg.add(at(0x10000), 0x1000);
    ASSERT_TRUE(small && large);
    reg.remove(large);
    EXPECT_TRUE(reg.covers(0x10000, 0x100));
    EXPECT_FALSE(reg.covers(0x10000, 0x101)) << "the large one went, not the small one";
}

TEST(MemRegistry, HandlesAreReusedLifo) {
    Registry    reg;
    TestHandle *a = reg.add(at(0x10000), 0x1000);
    reg.remove(a);
    TestHandle *b = reg.add(at(0x20000), 0x2000);
    EXPECT_EQ(a, b) << "a released handle is the next one handed out";
    EXPECT_EQ(b->address, at(0x20000));
    EXPECT_EQ(b->length, 0x2000u);
    EXPECT_FALSE(reg.covers(0x10000, 1)) << "the old range went with the old registration";
}

TEST(MemRegistry, SteadyCycleDoesNotAllocate) {
    Registry reg;
    std::vector<TestHandle *> live;
    live.reserve(64);
    /* reach the peak once */
    for (uintptr_t i = 0; i < 40; ++i) {
        live.push_back(reg.add(at(0x100000 + i * 0x1000), 0x800));
    }
    for (TestHandle *h : live) {
        reg.remove(h);
    }
    live.clear();
    const size_t created = reg.created();
    const size_t before  = g_allocations.load();
    std::mt19937 rng(5);
    for (int round = 0; round < 10000; ++round) {
        if ((live.size() < 40) && ((live.empty()) || (rng() % 2 == 0))) {
            const uintptr_t a = 0x100000 + (rng() % 1000) * 0x100;
            live.push_back(reg.add(at(a), 1 + rng() % 0x2000));
            ASSERT_NE(live.back(), nullptr);
        } else {
            const size_t k = rng() % live.size();
            reg.remove(live[k]);
            live[k] = live.back();
            live.pop_back();
        }
    }
    EXPECT_EQ(g_allocations.load(), before) << "register / deregister below the peak allocated";
    EXPECT_EQ(reg.created(), created);
}

/* Registered before covers() was ever asked, so not indexed yet: the first
 * question indexes exactly the live ones, and later changes keep up. */
TEST(MemRegistry, FirstQuestionIndexesTheLiveRegistrations) {
    Registry    reg;
    TestHandle *a = reg.add(at(0x10000), 0x1000);
    TestHandle *b = reg.add(at(0x20000), 0x1000);
    TestHandle *c = reg.add(at(0x30000), 0x1000);
    ASSERT_TRUE(a && b && c);
    reg.remove(b);
    EXPECT_FALSE(reg.indexed()) << "nobody asked: add and remove keep no index";
    EXPECT_EQ(reg.live(), 2u);
    EXPECT_TRUE(reg.covers(0x10000, 0x1000));
    EXPECT_TRUE(reg.indexed());
    EXPECT_FALSE(reg.covers(0x20000, 1)) << "deregistered before the first question";
    EXPECT_TRUE(reg.covers(0x30800, 0x800));
    reg.remove(a);
    TestHandle *d = reg.add(at(0x40000), 0x100);
    ASSERT_NE(d, nullptr);
    EXPECT_FALSE(reg.covers(0x10000, 1));
    EXPECT_TRUE(reg.covers(0x40000, 0x100));
    EXPECT_EQ(reg.add(at(0x50000), 0), nullptr) << "an empty range";
}

TEST(MemRegistry, SteadyCycleAfterTheIndexDoesNotAllocate) {
    Registry                  reg;
    std::vector<TestHandle *> live;
    for (uintptr_t i = 0; i < 40; ++i) {
        live.push_back(reg.add(at(0x100000 + i * 0x1000), 0x800));
    }
    ASSERT_TRUE(reg.covers(0x100000, 0x800));
    for (TestHandle *h : live) {
        reg.remove(h);
    }
    const size_t before = g_allocations.load();
    for (int round = 0; round < 1000; ++round) {
        TestHandle *h = reg.add(at(0x200000 + (round % 40) * 0x100), 0x100);
        ASSERT_NE(h, nullptr);
        ASSERT_TRUE(reg.covers(0x200000 + (round % 40) * 0x100, 0x100));
        reg.remove(h);
    }
    EXPECT_EQ(g_allocations.load(), before) << "the index reuses the nodes of removed ranges";
}

/* Random adds, removes and questions against a linear scan; the first
 * question comes after `quiet` steps of adds and removes alone. */
void check_against_model(int quiet) {
    struct Model {
        uintptr_t   start;
        size_t      length;
        TestHandle *h;
    };
    Registry           reg;
    std::vector<Model> model;
    std::mt19937       rng(11);
    for (int step = 0; step < 20000; ++step) {
        const unsigned op = rng() % ((step < quiet) ? 2 : 3);
        if ((op == 0) || model.empty()) {
            const uintptr_t s = 0x1000 + (rng() % 256) * 0x40;
            const size_t    n = 1 + rng() % 0x400;
            TestHandle     *h = reg.add(at(s), n);
            ASSERT_NE(h, nullptr);
            model.push_back({s, n, h});
        } else if (op == 1) {
            const size_t k = rng() % model.size();
            reg.remove(model[k].h);
            model.erase(model.begin() + static_cast<std::ptrdiff_t>(k));
        } else {
            const uint64_t a = 0x1000 + rng() % 0x4800;
            const size_t   n = rng() % 0x500;
            bool           expect = false;
            for (const Model &m : model) {
                expect = expect || ((a >= m.start) && (a + n <= m.start + m.length));
            }
            ASSERT_EQ(reg.covers(a, n), expect) << "step " << step << " [" << a << ", +" << n << ")";
        }
    }
}

TEST(MemRegistry, MatchesALinearModel) { check_against_model(0); }

TEST(MemRegistry, MatchesALinearModelWhenIndexedLate) { check_against_model(5000); }

}  // namespace
