/*
 * AddressSet (posted-buffer registry of the tag engine): set semantics
 * against std::unordered_set under random insert/erase with heavy probe-run
 * overlap, erase by the position insert() reported (stale after shifts and
 * rehashes), and no growth in a steady post/match cycle.
 */
#include "tag/address_set.h"

#include <gtest/gtest.h>

#include <atomic>
#include <cstdint>
#include <cstdlib>
#include <new>
#include <random>
#include <unordered_map>
#include <unordered_set>
#include <vector>

/* Counts array allocations of this test binary (the set allocates its table
 * with new[]), so the steady-state test can tell a rehash into new memory. */
static std::atomic<size_t> g_array_allocations{0};

void *operator new[](std::size_t size) {
    ++g_array_allocations;
    if (void *p = std::malloc(size ? size : 1)) {
        return p;
    }
    throw std::bad_alloc();
}
void operator delete[](void *p) noexcept { std::free(p); }
void operator delete[](void *p, std::size_t) noexcept { std::free(p); }

namespace {

using uct_tm::AddressSet;

TEST(AddressSet, InsertEraseContains) {
    AddressSet s;
    EXPECT_FALSE(s.contains(0x1000));
    EXPECT_TRUE(s.insert(0x1000));
    EXPECT_FALSE(s.insert(0x1000)) << "a second insert of the same key must be refused";
    EXPECT_TRUE(s.contains(0x1000));
    EXPECT_EQ(1u, s.size());
    s.erase(0x2000); /* absent: no effect */
    EXPECT_EQ(1u, s.size());
    s.erase(0x1000);
    EXPECT_FALSE(s.contains(0x1000));
    EXPECT_EQ(0u, s.size());
    EXPECT_TRUE(s.insert(0x1000));
}

/* Keys from a small range of 64-byte-aligned addresses collide in long
 * probe runs; erasing from the middle of runs exercises the backward shift. */
TEST(AddressSet, MatchesReferenceUnderRandomOperations) {
    std::mt19937_64                 rng(12345);
    AddressSet                      s;
    std::unordered_set<uintptr_t>   ref;
    std::uniform_int_distribution<> key_index(1, 3000);
    for (int step = 0; step < 400000; ++step) {
        const uintptr_t key = 0x7f0000000000ull + 64u * static_cast<uintptr_t>(key_index(rng));
        if ((rng() % 3) != 0) {
            ASSERT_EQ(ref.insert(key).second, s.insert(key)) << "step " << step;
        } else {
            ref.erase(key);
            s.erase(key);
        }
        ASSERT_EQ(ref.size(), s.size()) << "step " << step;
        if ((step % 997) == 0) {
            for (uintptr_t k : ref) {
                ASSERT_TRUE(s.contains(k)) << "lost key after step " << step;
            }
        }
    }
    for (int i = 1; i <= 3000; ++i) {
        const uintptr_t key = 0x7f0000000000ull + 64u * static_cast<uintptr_t>(i);
        EXPECT_EQ(ref.count(key) == 1, s.contains(key)) << "key " << i;
    }
}

/* The tag engine erases a buffer with the position its insert() reported;
 * later erases shift entries back and growth rehashes them, so many hints are
 * stale by then: erase must still remove exactly that key. */
TEST(AddressSet, EraseWithStaleHintsMatchesReference) {
    std::mt19937_64                       rng(777);
    AddressSet                            s;
    std::unordered_map<uintptr_t, size_t> ref; /* key -> the position insert() reported */
    std::uniform_int_distribution<>       key_index(1, 500);
    size_t                                stale = 0;
    for (int step = 0; step < 200000; ++step) {
        const uintptr_t key = 0x7f0000000000ull + 64u * static_cast<uintptr_t>(key_index(rng));
        auto            it  = ref.find(key);
        if (it == ref.end()) {
            size_t where = SIZE_MAX;
            ASSERT_TRUE(s.insert(key, &where)) << "step " << step;
            ASSERT_LT(where, s.capacity());
            ref.emplace(key, where);
        } else if ((rng() % 2) == 0) {
            size_t where = SIZE_MAX;
            ASSERT_FALSE(s.insert(key, &where)) << "duplicate accepted at step " << step;
        } else {
            /* A hint pointing at another key (or nothing) must not remove that one. */
            const size_t hint = it->second;
            s.erase(key, hint);
            ref.erase(it);
            ASSERT_FALSE(s.contains(key)) << "step " << step;
            for (const auto &kv : ref) {
                if (kv.second == hint) {
                    ++stale;
                }
            }
        }
        ASSERT_EQ(ref.size(), s.size()) << "step " << step;
        if ((step % 991) == 0) {
            for (const auto &kv : ref) {
                ASSERT_TRUE(s.contains(kv.first)) << "lost key after step " << step;
            }
        }
    }
    EXPECT_GT(stale, 0u) << "the test never erased with a position another key had";
}

/* The tag engine's steady state: a window of posted buffers, one matched and
 * one posted per step. The table must not grow (nor rehash into new memory). */
TEST(AddressSet, SteadyCycleDoesNotGrow) {
    AddressSet             s;
    std::vector<uintptr_t> window;
    for (uintptr_t i = 1; i <= 32; ++i) {
        window.push_back(i * 4096);
        ASSERT_TRUE(s.insert(i * 4096));
    }
    const size_t capacity    = s.capacity();
    const size_t allocations = g_array_allocations.load();
    size_t       refused     = 0;
    for (uintptr_t i = 33; i < 100000; ++i) {
        s.erase(window[i % 32]);
        window[i % 32] = i * 4096;
        refused += s.insert(i * 4096) ? 0 : 1;
    }
    EXPECT_EQ(0u, refused);
    EXPECT_EQ(capacity, s.capacity());
    EXPECT_EQ(allocations, g_array_allocations.load()) << "the cycle allocated a new table";
    EXPECT_EQ(32u, s.size());
}

}  // namespace
