/*
 * The two shared counters of a split rendezvous copy (RndvSlot::claim and
 * RndvSlot::sender_done), each packed with the attempt's epoch.
 *
 * A get whose sender did not write its pieces in time leaves the slot
 * POSTED, and the next get of the same send reuses the slot with a new RTR.
 * A sender still inside the earlier RTR read that one's buffers; it must
 * then claim nothing and count nothing, or it would write into buffers the
 * receiver gave up and count pieces the new attempt never saw. Every
 * attempt has its own epoch and every compare-and-swap carries it.
 */
#ifndef UCT_TM_SM_SM_SPLIT_CLAIM_H_
#define UCT_TM_SM_SM_SPLIT_CLAIM_H_

#include <ucs/type/status.h>

#include <atomic>
#include <cstdint>

namespace uct_tm {
namespace sm {

/* Pieces of one split copy: 24 bits each for both ends of the claim. */
inline constexpr uint32_t kMaxSplitPieces = (1u << 24) - 1;

/* `claim`: the pieces [lo, hi) nobody took yet, of attempt `epoch`. */
struct SplitClaim {
    uint32_t lo;
    uint32_t hi;
    uint16_t epoch;

    static constexpr SplitClaim unpack(uint64_t word) {
        return {static_cast<uint32_t>(word & kMaxSplitPieces),
                static_cast<uint32_t>((word >> 24) & kMaxSplitPieces),
                static_cast<uint16_t>(word >> 48)};
    }
    constexpr uint64_t pack() const {
        return uint64_t{lo & kMaxSplitPieces} | (uint64_t{hi & kMaxSplitPieces} << 24) |
               (uint64_t{epoch} << 48);
    }
};

/* `sender_done`: pieces the sender finished writing in attempt `epoch`,
 * and the first error it hit. */
static_assert(sizeof(ucs_status_t) == 1, "ucs_status_t is a packed 8-bit enum");
struct SplitDone {
    uint32_t     pieces;
    uint16_t     epoch;
    ucs_status_t status;

    static constexpr SplitDone unpack(uint64_t word) {
        const auto code = static_cast<int8_t>(static_cast<uint8_t>(word >> 48));
        /* Written by the peer: anything but an error is not a completion status. */
        const ucs_status_t status = (code > 0) ? UCS_ERR_IO_ERROR : static_cast<ucs_status_t>(code);
        return {static_cast<uint32_t>(word), static_cast<uint16_t>(word >> 32), status};
    }
    constexpr uint64_t pack() const {
        const int8_t code = (status > 0) ? int8_t{UCS_ERR_IO_ERROR} : static_cast<int8_t>(status);
        return uint64_t{pieces} | (uint64_t{epoch} << 32) |
               (uint64_t{static_cast<uint8_t>(code)} << 48);
    }
};

/* Takes pieces one at a time from one end of a `claim` word in shared
 * memory, for one attempt of a copy of `pieces` pieces. The peer may write
 * any value there, or keep rewriting it: a bounded number of tries (each
 * piece is lost to a conforming other side at most once), no index beyond
 * the message. */
class SplitClaimer {
  public:
    enum class Take { kTaken, kNone, kBad };

    SplitClaimer(std::atomic<uint64_t> *claim, uint16_t epoch, bool from_back, uint64_t pieces)
        : claim_(claim), word_(claim->load(std::memory_order_acquire)), epoch_(epoch),
          from_back_(from_back), pieces_(pieces), tries_left_(4 * pieces + 64) {}

    /* kTaken with the piece's *index; kNone when nothing is left or the
     * attempt is over (another epoch); kBad for a counter no conforming
     * peer writes. */
    Take next(uint32_t *index) {
        while (tries_left_-- > 0) {
            const SplitClaim c = SplitClaim::unpack(word_);
            if ((c.epoch != epoch_) || (c.lo >= c.hi)) {
                return Take::kNone;
            }
            const uint32_t at = from_back_ ? c.hi - 1 : c.lo;
            if (at >= pieces_) {
                return Take::kBad;
            }
            const SplitClaim next = from_back_ ? SplitClaim{c.lo, at, c.epoch}
                                               : SplitClaim{at + 1, c.hi, c.epoch};
            if (claim_->compare_exchange_weak(word_, next.pack(), std::memory_order_acq_rel,
                                              std::memory_order_acquire)) {
                word_  = next.pack();
                *index = at;
                return Take::kTaken;
            }
        }
        return Take::kBad;
    }

  private:
    std::atomic<uint64_t> *claim_;
    uint64_t               word_;
    uint16_t               epoch_;
    bool                   from_back_;
    uint64_t               pieces_;
    uint64_t               tries_left_;
};

/* Adds `count` finished pieces and `status` (kept if it is the first
 * error) to `done` if it still counts attempt `epoch`; false if the attempt
 * is over, or the peer keeps rewriting the word. */
inline bool report_split_pieces(std::atomic<uint64_t> *done, uint16_t epoch, uint32_t count,
                                ucs_status_t status) {
    uint64_t word = done->load(std::memory_order_acquire);
    for (int tries = 0; tries < 64; ++tries) {
        SplitDone d = SplitDone::unpack(word);
        if (d.epoch != epoch) {
            return false;
        }
        d.pieces += count;
        d.status = (d.status == UCS_OK) ? status : d.status;
        if (done->compare_exchange_weak(word, d.pack(), std::memory_order_release,
                                        std::memory_order_acquire)) {
            return true;
        }
    }
    return false;
}

}  // namespace sm
}  // namespace uct_tm

#endif
