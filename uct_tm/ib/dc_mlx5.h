/*
 * tm_dc's mlx5 DC provider, the parts that need no device: the iface address
 * a DC target publishes and the checks a peer's address must pass, and the
 * bookkeeping of one DCI's outstanding operations through an error and its
 * recovery. Pure (no verbs calls) so that tests/unit runs them without DC
 * hardware; the verbs side (DCT, DCIs, address handles) builds on them.
 */
#ifndef UCT_TM_IB_DC_MLX5_H_
#define UCT_TM_IB_DC_MLX5_H_

#include "dc_provider.h"
#include "rc_wire.h"

#include <infiniband/verbs.h>
#include <ucs/type/status.h>

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <vector>

namespace uct_tm {
namespace ib {

inline Mlx5IfaceAddress pack_mlx5_iface_address(uint32_t dct_num, uint64_t dc_key) {
    Mlx5IfaceAddress a = {};
    a.dct_num  = dct_num;
    a.provider = static_cast<uint8_t>(DcProvider::kMlx5);
    a.version  = kMlx5AddressVersion;
    a.dc_key   = dc_key;
    return a;
}

/* The verdict on a peer's address: UCS_OK, or the status to return with a
 * static reason for the log. */
struct DcAddressCheck {
    ucs_status_t status = UCS_OK;
    const char  *reason = "";
};

/* Every field of a peer's (device, iface) address, as it came off the wire,
 * against what a DCI of this iface can reach: `local_roce` is this port's
 * link layer. The address handle and the DC address of a send are built
 * from these fields only after this passed. */
inline DcAddressCheck check_mlx5_peer_address(const void *dev_addr, const void *iface_addr,
                                              bool local_roce) {
    if ((dev_addr == nullptr) || (iface_addr == nullptr)) {
        return {UCS_ERR_INVALID_PARAM, "no device or iface address"};
    }
    DeviceAddress    dev;
    Mlx5IfaceAddress ia;
    memcpy(&dev, dev_addr, sizeof(dev)); /* unaligned, peer-supplied bytes */
    memcpy(&ia, iface_addr, sizeof(ia));
    if (ia.provider != static_cast<uint8_t>(DcProvider::kMlx5)) {
        return {UCS_ERR_UNREACHABLE, "not an mlx5 DC iface address"};
    }
    if (ia.version != kMlx5AddressVersion) {
        return {UCS_ERR_UNREACHABLE, "unknown mlx5 DC address version"};
    }
    if (ia.reserved != 0) {
        return {UCS_ERR_INVALID_PARAM, "reserved bits set in the iface address"};
    }
    if ((ia.dct_num == 0) || (ia.dct_num >= (1u << 24))) {
        return {UCS_ERR_INVALID_PARAM, "DCT number is not a 24-bit queue pair number"};
    }
    if (ia.dc_key == 0) {
        return {UCS_ERR_INVALID_PARAM, "zero DC access key"};
    }
    if (dev.roce > 1) {
        return {UCS_ERR_INVALID_PARAM, "bad link-layer flag in the device address"};
    }
    if ((dev.mtu < IBV_MTU_256) || (dev.mtu > IBV_MTU_4096)) {
        return {UCS_ERR_INVALID_PARAM, "bad path MTU in the device address"};
    }
    if ((dev.roce != 0) != local_roce) {
        return {UCS_ERR_UNREACHABLE, "other link layer (InfiniBand vs RoCE)"};
    }
    if (dev.roce != 0) {
        static const uint8_t kZeroGid[sizeof(dev.gid)] = {};
        if (memcmp(dev.gid, kZeroGid, sizeof(dev.gid)) == 0) {
            return {UCS_ERR_INVALID_PARAM, "zero GID on RoCE"};
        }
    } else if ((dev.lid == 0) || (dev.lid >= 0xc000)) {
        /* 0xc000 and up are multicast LIDs, 0xffff the permissive one. */
        return {UCS_ERR_INVALID_PARAM, "LID is not a unicast LID"};
    }
    return {};
}

/*
 * One DCI's outstanding operations, in posting order -- a DCI completes in
 * that order, and a signaled completion also stands for the unsignaled
 * sends before it. Each operation gets exactly one outcome: OK from the
 * completion that covers it, or an error once the DCI failed.
 *
 * States: kReady (sends may be posted) -> kError (an error completion came;
 * no posts; everything outstanding is failed as its flush completion
 * arrives, or all at once by fail_outstanding() when the caller resets the
 * DCI without waiting for flushes) -> kDrained (nothing outstanding; the
 * caller moves the QP RESET -> INIT -> RTR -> RTS) -> recovered() -> kReady,
 * and the DCI goes back to the pool.
 *
 * The ring is sized once (the DCI's send queue depth): posting allocates
 * nothing. `Op` is the caller's handle of an operation (trivially copyable).
 */
template <typename Op> class DciOps {
public:
    enum class State : uint8_t { kReady, kError, kDrained };

    explicit DciOps(size_t depth) : ring_(depth ? depth : 1) {}

    State  state() const { return state_; }
    size_t outstanding() const { return count_; }
    bool   full() const { return count_ == ring_.size(); }

    /* Records a posted operation; false (nothing recorded) when the DCI is
     * not ready or its queue is full -- the caller must not post then. */
    bool post(uint64_t wr_id, Op op) {
        if ((state_ != State::kReady) || full()) {
            return false;
        }
        ring_[(head_ + count_) % ring_.size()] = Entry{wr_id, op};
        ++count_;
        return true;
    }

    /* A completion of `wr_id` with `ok`: `done(op, status)` for every
     * operation it settles, oldest first. The unsignaled ones before it
     * succeeded if the DCI was ready (it executes in order, so an error is
     * reported on the first operation that failed); `wr_id` itself gets
     * `ok`. After an error every completion -- the flushes -- is an error.
     * A completion of an operation not outstanding (a duplicate, or one
     * failed already) settles nothing. Returns how many were settled. */
    template <typename Done> size_t complete(uint64_t wr_id, bool ok, Done &&done) {
        size_t n = 0;
        for (; n < count_; ++n) {
            if (ring_[(head_ + n) % ring_.size()].wr_id == wr_id) {
                break;
            }
        }
        if (n == count_) {
            return 0;
        }
        const bool   ready  = (state_ == State::kReady);
        const bool   failed = !ok || !ready;
        const size_t settle = n + 1;
        for (size_t i = 0; i < settle; ++i) {
            const Entry e = ring_[head_];
            head_         = (head_ + 1) % ring_.size();
            --count_;
            const bool this_ok = (i + 1 < settle) ? ready : !failed;
            done(e.op, this_ok ? UCS_OK : UCS_ERR_IO_ERROR);
        }
        if (failed) {
            state_ = (count_ == 0) ? State::kDrained : State::kError;
        }
        return settle;
    }

    /* Fails everything still outstanding (the caller resets the DCI
     * without waiting for the flushes, or destroys it): each exactly once,
     * later completions of them settle nothing. */
    template <typename Done> size_t fail_outstanding(Done &&done) {
        const size_t n = count_;
        while (count_ != 0) {
            const Entry e = ring_[head_];
            head_         = (head_ + 1) % ring_.size();
            --count_;
            done(e.op, UCS_ERR_IO_ERROR);
        }
        if (state_ != State::kReady || n != 0) {
            state_ = State::kDrained;
        }
        return n;
    }

    /* The caller brought the QP back to RTS: true and kReady if it was
     * drained; false (no change) otherwise -- an operation still outstanding
     * would complete against the new incarnation. */
    bool recovered() {
        if (state_ != State::kDrained) {
            return false;
        }
        state_ = State::kReady;
        head_  = 0;
        return true;
    }

private:
    struct Entry {
        uint64_t wr_id;
        Op       op;
    };
    std::vector<Entry> ring_;
    size_t             head_  = 0;
    size_t             count_ = 0;
    State              state_ = State::kReady;
};

}  // namespace ib
}  // namespace uct_tm

#endif
