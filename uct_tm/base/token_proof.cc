#include "base/token_proof.h"

#include <cerrno>
#include <sys/random.h>

namespace uct_tm {
namespace {

constexpr uint64_t rotl(uint64_t x, int b) { return (x << b) | (x >> (64 - b)); }

struct SipState {
    uint64_t v0, v1, v2, v3;

    void round() {
        v0 += v1;
        v1 = rotl(v1, 13);
        v1 ^= v0;
        v0 = rotl(v0, 32);
        v2 += v3;
        v3 = rotl(v3, 16);
        v3 ^= v2;
        v0 += v3;
        v3 = rotl(v3, 21);
        v3 ^= v0;
        v2 += v1;
        v1 = rotl(v1, 17);
        v1 ^= v2;
        v2 = rotl(v2, 32);
    }

    void absorb(uint64_t m) {
        v3 ^= m;
        round();
        round();
        v0 ^= m;
    }
};

}  // namespace

bool TokenProof::init() {
    uint64_t key[2];
    size_t   got = 0;
    while (got < sizeof(key)) {
        const ssize_t n = getrandom(reinterpret_cast<char *>(key) + got, sizeof(key) - got, 0);
        if (n < 0) {
            if (errno == EINTR) {
                continue;
            }
            return false;
        }
        got += static_cast<size_t>(n);
    }
    k0_ = key[0];
    k1_ = key[1];
    return true;
}

uint64_t TokenProof::sign(uint64_t token) const {
    SipState s{k0_ ^ 0x736f6d6570736575ull, k1_ ^ 0x646f72616e646f6dull,
               k0_ ^ 0x6c7967656e657261ull, k1_ ^ 0x7465646279746573ull};
    s.absorb(token);
    s.absorb(uint64_t{8} << 56); /* the final block: the message length, no tail bytes */
    s.v2 ^= 0xff;
    for (int i = 0; i < 4; ++i) {
        s.round();
    }
    return s.v0 ^ s.v1 ^ s.v2 ^ s.v3;
}

}  // namespace uct_tm
