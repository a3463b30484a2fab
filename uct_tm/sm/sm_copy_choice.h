/*
 * CopyChoice: which way a rendezvous send's data is copied to its receiver
 * (a matched receive, or a get_zcopy of the send's buffer) -- pipelined
 * through the receiver's staging chunks (the sender copies pieces in while
 * the receiver copies them out) or by cross-memory attach (one
 * process_vm_readv, or a split with the sender).
 *
 * Pipelined, OSU over 2 vCPUs whose modified lines crossed fast (host F,
 * docs/perf.md): one-way latency 0.23-0.33x posix,cma from 256 KiB where
 * CMA gave 0.46-0.58x; with slow crossings 0.73-0.96x against 0.61-0.82x
 * at 64-256 KiB and even from 1 MiB. It copies only while the sender
 * progresses, which a rendezvous sender does until its send completes;
 * one that computes instead leaves it waiting, where CMA reads alone. So
 * each way's recent time per byte is kept per size class, and the way not
 * taken tried every kProbeEvery-th transfer of its class. A copy chosen
 * alone (none in flight, and a pause since the last: a ping-pong's, a
 * blocking receive's) takes the faster way: on vCPUs placed far apart the
 * pipelined copy ran 1.2-1.4x CMA's. Copies in a window queue behind each
 * other on the owner, so their times do not measure throughput (a pure
 * time rule picked CMA in osu_bw, which the pipelined copy doubles): there
 * it is kept unless it ran kSlowerBy times CMA's.
 */
#ifndef UCT_TM_SM_SM_COPY_CHOICE_H_
#define UCT_TM_SM_SM_COPY_CHOICE_H_

#include <algorithm>
#include <cstddef>
#include <cstdint>

namespace uct_tm {
namespace sm {

/* A transfer CopyChoice decides: when it started (0: untimed) and whether
 * it was chosen alone: no other copy in flight, nor one just ended. */
struct CopyTimer {
    uint64_t started_ns = 0;
    bool     alone      = false;
};

class CopyChoice {
  public:
    enum class Setting : int { kAuto = 0, kCma = 1, kPipelined = 2 }; /* UCX_TM_SM_RNDV_COPY */
    enum Way : uint8_t { kCma = 0, kPipelined = 1 };

    static constexpr uint32_t kProbeEvery = 64;
    static constexpr uint64_t kSlowerBy   = 4;
    static constexpr uint64_t kMaxJump    = 4; /* one copy moves a way's cost at most 4x up */
    static constexpr unsigned kClasses    = 8;        /* below 128 KiB, 128 KiB, ..., from 8 MiB */
    static constexpr size_t   kMinBytes   = 16 << 10; /* below: CMA, one call, untimed */

    explicit CopyChoice(Setting setting = Setting::kAuto) : setting_(setting) {}

    /* Whether a transfer of `bytes` is timed for the choice (record() keeps it). */
    bool timed(size_t bytes) const { return (setting_ == Setting::kAuto) && (bytes >= kMinBytes); }

    /* The way for a transfer of `bytes` that CMA could make, `alone` if
     * no other copy is in flight. */
    Way choose(size_t bytes, bool alone) {
        if (!timed(bytes)) {
            return (setting_ == Setting::kPipelined) ? kPipelined : kCma;
        }
        Class &c = class_of(bytes, alone);
        ++c.transfers;
        if ((c.cost[kCma] == 0) || (c.cost[kPipelined] == 0)) {
            return (c.cost[kPipelined] == 0) ? kPipelined : kCma; /* each way once first */
        }
        const Way way = best(c, alone);
        return ((c.transfers % kProbeEvery) == 0) ? other(way) : way;
    }

    /* A transfer that `choose` sent `way` took `ns` for `bytes` (success only). */
    void record(Way way, size_t bytes, uint64_t ns, bool alone) {
        if (!timed(bytes)) {
            return;
        }
        /* ns per KiB, at least 1 (0 means not measured yet). The way taken
         * averages its copies; a probe's time replaces what the other way
         * had, which is older than the probe. One copy that stalled (a
         * descheduled peer: 11 ms where 0.1 is usual) moves the cost by
         * kMaxJump at most: a sustained change turns the choice within a
         * few copies. */
        Class         &c     = class_of(bytes, alone);
        const uint64_t kept  = c.cost[way];
        const uint64_t cost  = std::min((ns << 10) / bytes + 1,
                                       (kept == 0) ? UINT64_MAX : kMaxJump * kept);
        const bool     taken = (c.cost[kCma] != 0) && (c.cost[kPipelined] != 0) &&
                           (best(c, alone) == way);
        c.cost[way] = taken ? (3 * kept + cost) / 4 : cost;
        ++chosen_[way];
    }

    /* Transfers each way recorded (PRINT_STATS). */
    uint64_t chosen(Way way) const { return chosen_[way]; }
    /* ns per KiB kept for the class of `bytes`, 0 if not measured. */
    uint64_t cost(Way way, size_t bytes, bool alone) const {
        return classes_[alone][size_class(bytes)].cost[way];
    }

    static unsigned size_class(size_t bytes) {
        unsigned c = 0;
        for (size_t b = bytes >> 16; (b > 1) && (c + 1 < kClasses); b >>= 1) {
            ++c;
        }
        return c;
    }

  private:
    struct Class {
        uint64_t cost[2]   = {0, 0};
        uint32_t transfers = 0;
    };
    static Way other(Way way) { return (way == kCma) ? kPipelined : kCma; }
    static Way best(const Class &c, bool alone) {
        const uint64_t slower_by = alone ? 1 : kSlowerBy;
        return (c.cost[kPipelined] <= slower_by * c.cost[kCma]) ? kPipelined : kCma;
    }
    Class &class_of(size_t bytes, bool alone) { return classes_[alone][size_class(bytes)]; }

    Setting  setting_;
    Class    classes_[2][kClasses]; /* [alone] */
    uint64_t chosen_[2] = {0, 0};
};

}  // namespace sm
}  // namespace uct_tm

#endif
