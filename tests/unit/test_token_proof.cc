#include "base/token_proof.h"

#include <gtest/gtest.h>

#include <set>

namespace {

/* The reference implementation's vector for an 8-byte message: key bytes
 * 00..0f, message bytes 00..07, output bytes 62 24 93 9a 79 f5 f5 93. */
TEST(TokenProof, MatchesSipHash24ReferenceVector) {
    uct_tm::TokenProof p;
    p.init(0x0706050403020100ull, 0x0f0e0d0c0b0a0908ull);
    EXPECT_EQ(p.sign(0x0706050403020100ull), 0x93f5f5799a932462ull);
    EXPECT_TRUE(p.valid(0x0706050403020100ull, 0x93f5f5799a932462ull));
    EXPECT_FALSE(p.valid(0x0706050403020101ull, 0x93f5f5799a932462ull));
}

/* Two processes (two keys) sign the same token differently, and one key
 * gives every generation of a slot its own proof. */
TEST(TokenProof, KeysFromTheKernelDiffer) {
    uct_tm::TokenProof a, b;
    ASSERT_TRUE(a.init());
    ASSERT_TRUE(b.init());
    EXPECT_NE(a.sign(1), b.sign(1));
    std::set<uint64_t> proofs;
    for (uint64_t gen = 0; gen < 1000; ++gen) {
        proofs.insert(a.sign((gen << 32) | 7));
    }
    EXPECT_EQ(proofs.size(), 1000u);
}

}  // namespace
