/*
 * A streaming receiver's window for the tag-list benchmarks: `window`
 * contexts, each with a 64-byte buffer, posted with exact tags in sequence
 * and reused round-robin; counts the completions they received.
 */
#ifndef UCT_TM_TESTS_BENCH_RECEIVE_WINDOW_H_
#define UCT_TM_TESTS_BENCH_RECEIVE_WINDOW_H_

#include <uct/api/uct.h>

#include <cstdint>
#include <vector>

namespace bench {

class ReceiveWindow {
  public:
    explicit ReceiveWindow(size_t window) : slots_(window), buffers_(window * 64) {}

    /* Posts receive number `seq` (tag = seq) on `engine` (TagEngine or HwTagEngine). */
    template <typename Engine> ucs_status_t post(Engine &engine, uint64_t seq) {
        const size_t i        = seq % slots_.size();
        Slot        &s        = slots_[i];
        s.ctx.tag_consumed_cb = on_consumed;
        s.ctx.completed_cb    = on_completed;
        s.ctx.rndv_cb         = on_rndv;
        uct_iov_t iov{&buffers_[i * 64], 64, nullptr, 0, 1};
        return engine.post(seq, UINT64_MAX, &iov, 1, &s.ctx);
    }

    /* Posts receives 0 .. window-1. */
    template <typename Engine> ucs_status_t fill(Engine &engine) {
        for (uint64_t seq = 0; seq < slots_.size(); ++seq) {
            const ucs_status_t status = post(engine, seq);
            if (status != UCS_OK) {
                return status;
            }
        }
        return UCS_OK;
    }

    uint64_t completions() const {
        uint64_t n = 0;
        for (const Slot &s : slots_) {
            n += s.completions;
        }
        return n;
    }

  private:
    struct Slot {
        uct_tag_context_t ctx; /* first: the callbacks find the Slot from it */
        uint64_t          completions = 0;
    };
    static void on_consumed(uct_tag_context_t *) {}
    static void on_completed(uct_tag_context_t *ctx, uct_tag_t, uint64_t, size_t, void *,
                             ucs_status_t) {
        ++reinterpret_cast<Slot *>(ctx)->completions;
    }
    static void on_rndv(uct_tag_context_t *, uct_tag_t, const void *, unsigned, ucs_status_t,
                        unsigned) {}

    std::vector<Slot> slots_;
    std::vector<char> buffers_;
};

}  // namespace bench

#endif
