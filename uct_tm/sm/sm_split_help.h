/*
 * SplitHelp: whether splitting copies with one peer pays right now.
 *
 * A split copy costs a system call per piece; it pays only while the
 * other process writes some of them. A peer busy with copies of its own
 * (both sides receiving large messages, as in osu_bibw) answers the
 * invitation after we took every piece: one call per piece, no help
 * (Open MPI osu_bibw 64 KiB on UCX 1.22: 267 of 161,280 pieces written
 * by the other side, 0.74x posix against 0.99x unsplit; osu_bw: half).
 * After kUnhelpedRun splits in a row that the peer took no piece of, its
 * copies go whole, one call; every kProbeEvery-th is split again to see
 * whether it helps again.
 */
#ifndef UCT_TM_SM_SM_SPLIT_HELP_H_
#define UCT_TM_SM_SM_SPLIT_HELP_H_

#include <cstdint>

namespace uct_tm {
namespace sm {

class SplitHelp {
  public:
    static constexpr uint32_t kUnhelpedRun = 8;
    static constexpr uint32_t kProbeEvery  = 64;

    /* Whether to split the next copy that could be split. */
    bool want_split() {
        if (unhelped_ < kUnhelpedRun) {
            return true;
        }
        if (++since_probe_ < kProbeEvery) {
            return false;
        }
        since_probe_ = 0;
        return true;
    }

    /* A split copy is all claimed: the peer took `theirs` pieces. */
    void split_claimed(uint32_t theirs) {
        if (theirs > 0) {
            unhelped_ = 0;
        } else if (unhelped_ < kUnhelpedRun) {
            ++unhelped_;
        }
    }

  private:
    uint32_t unhelped_    = 0; /* splits in a row without a piece of theirs */
    uint32_t since_probe_ = 0;
};

}  // namespace sm
}  // namespace uct_tm

#endif  // UCT_TM_SM_SM_SPLIT_HELP_H_
