/*
 * Proofs for operation tokens that travel through shared memory. A token
 * (slot index | generation) names an operation and is no secret: every
 * process of the user can read the FIFOs it crosses and guess the next one.
 * The proof is a keyed hash of the token under a key that never leaves this
 * process, so an answer (a FIN, an invitation, a pull) is accepted only from
 * a process that was given the proof with the operation: another process can
 * neither compute it nor reuse one of an earlier generation. (One that reads
 * the receiver's FIFO while the request waits there sees it: the threat model
 * in docs/tm_sm.md.)
 *
 * The hash is SipHash-2-4 of the 8-byte token (Aumasson and Bernstein): a
 * MAC for short inputs, about 20 ns, drawn once per rendezvous operation.
 */
#ifndef UCT_TM_BASE_TOKEN_PROOF_H_
#define UCT_TM_BASE_TOKEN_PROOF_H_

#include <cstdint>

namespace uct_tm {

class TokenProof {
  public:
    /* A fresh key from the kernel's random source; false if it failed. */
    bool init();
    /* A given key (tests: the reference vectors). */
    void init(uint64_t k0, uint64_t k1) {
        k0_ = k0;
        k1_ = k1;
    }

    uint64_t sign(uint64_t token) const;
    bool     valid(uint64_t token, uint64_t proof) const { return sign(token) == proof; }

  private:
    uint64_t k0_ = 0;
    uint64_t k1_ = 0;
};

}  // namespace uct_tm

#endif
