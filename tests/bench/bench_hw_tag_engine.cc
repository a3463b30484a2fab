/*
 * Google Benchmark: the driver of the hardware tag list (HwTagEngine) as a
 * verbs transport would run it for eager messages the NIC matched. One
 * iteration: the "NIC" completes the oldest posted receive (MATCH |
 * DATA_VALID, 8 bytes placed), progress() polls it and the ADD completion of
 * the previous post (tag_consumed_cb, completed_cb, shadow and slot
 * bookkeeping), and a new receive is posted (shadow entry, ADD). W receives
 * are posted at all times (W = the argument). The list is a loopback that
 * costs next to nothing, so the figure is the driver's own share -- what a
 * real NIC adds is the doorbell, the CQE read and the PCIe round trips.
 * BM_unexpected_claimed: the slow path, every message reported unexpected
 * (out of sync) and claimed by the posted receive in software (copy, DEL,
 * a second progress() for the DEL's completion).
 */
#include "tag/hw_tag_engine_impl.h"
#include "receive_window.h"

#include <benchmark/benchmark.h>

#include <cstdint>
#include <cstring>
#include <vector>

namespace {

using namespace uct_tm;

/* The seam with a NIC that matches in the order the bench tells it. */
class LoopbackList {
  public:
    /* tags: a power of two (masks, not divisions: the list must cost next to nothing). */
    explicit LoopbackList(uint32_t tags)
        : entries_(tags), ring_(ring_size(tags)), rx_(64 * 1024) {
        caps_.max_num_tags = tags;
        caps_.max_ops      = 2 * tags + 2;
    }
    const TmCaps &caps() const { return caps_; }
    ucs_status_t  post_op(TmOp &op) {
        TmCompletion c;
        c.wr_id = op.wr_id;
        switch (op.opcode) {
        case TmOpcode::kAdd:
            op.handle              = next_handle_++ & (caps_.max_num_tags - 1);
            entries_[op.handle]    = Entry{op.recv_wr_id, op.sge.addr};
            c.opcode               = TmCqeOpcode::kAdd;
            break;
        case TmOpcode::kDel:
            c.opcode = TmCqeOpcode::kDel;
            break;
        case TmOpcode::kSync:
            c.opcode = TmCqeOpcode::kSync;
            break;
        }
        push(c);
        return UCS_OK;
    }
    ucs_status_t post_recv(uint64_t wr_id, const TmSge &sge) {
        rx_wr_id_ = wr_id;
        rx_addr_  = sge.addr;
        return UCS_OK;
    }
    unsigned poll(TmCompletion *out, unsigned max) {
        unsigned n = 0;
        while ((n < max) && (head_ != tail_)) {
            out[n++] = ring_[head_++ & (ring_.size() - 1)];
        }
        return n;
    }
    /* The NIC matches the entry of `handle`. */
    void match(uint32_t handle, uint64_t tag, const void *data, uint32_t len) {
        const Entry &e = entries_[handle];
        memcpy(e.buffer, data, len);
        TmCompletion c;
        c.wr_id    = e.recv_wr_id;
        c.opcode   = TmCqeOpcode::kTmRecv;
        c.flags    = kTmCqeMatch | kTmCqeDataValid;
        c.tag      = tag;
        c.byte_len = len;
        push(c);
    }
    /* The NIC reports the message unexpected (counts out of sync). */
    void unexpected(uint64_t tag, const void *data, uint32_t len) {
        const TmHeader tmh = make_tmh(TmhOp::kEager, tag, 0);
        memcpy(rx_addr_, &tmh, sizeof(tmh));
        memcpy(static_cast<char *>(rx_addr_) + sizeof(tmh), data, len);
        TmCompletion c;
        c.wr_id    = rx_wr_id_;
        c.opcode   = TmCqeOpcode::kRecv;
        c.byte_len = sizeof(tmh) + len;
        push(c);
    }

  private:
    static size_t ring_size(uint32_t tags) {
        size_t n = 64;
        while (n < 4 * static_cast<size_t>(tags) + 64) {
            n *= 2;
        }
        return n;
    }
    struct Entry {
        uint64_t recv_wr_id = 0;
        void    *buffer     = nullptr;
    };
    void push(const TmCompletion &c) { ring_[tail_++ & (ring_.size() - 1)] = c; }

    TmCaps                    caps_;
    std::vector<Entry>        entries_;
    std::vector<TmCompletion> ring_;
    std::vector<char>         rx_;
    uint64_t                  head_ = 0, tail_ = 0;
    uint32_t                  next_handle_ = 0;
    uint64_t                  rx_wr_id_    = 0;
    void                     *rx_addr_     = nullptr;
};

template <bool kUnexpected> void run(benchmark::State &state) {
    const uint32_t    window = static_cast<uint32_t>(state.range(0));
    LoopbackList      list(window);
    HwTagEngineConfig config;
    config.list_size  = window;
    config.rx_buffers = 1;
    HwTagEngine<LoopbackList> engine(list, config, HwTagTransport());
    engine.start();
    bench::ReceiveWindow receives(window);
    const char           payload[8] = {1, 2, 3, 4, 5, 6, 7, 8};
    uint64_t             next_post = window, next_match = 0;
    auto                 post = [&](uint64_t seq) { return receives.post(engine, seq); };
    if (receives.fill(engine) != UCS_OK) {
        state.SkipWithError("post failed");
        return;
    }
    while (engine.progress() > 0) {
    }
    for (auto _ : state) {
        if (kUnexpected) {
            list.unexpected(next_match, payload, sizeof(payload));
        } else {
            list.match(static_cast<uint32_t>(next_match & (window - 1)), next_match, payload,
                       sizeof(payload));
        }
        ++next_match;
        engine.progress();
        if (kUnexpected) {
            engine.progress(); /* the DEL that took the claimed receive out of the list */
        }
        if (post(next_post++) != UCS_OK) {
            state.SkipWithError("post refused");
            return;
        }
    }
    while (engine.progress() > 0) {
    }
    if ((receives.completions() != next_match) || (engine.counters().anomalies != 0)) {
        state.SkipWithError("lost completions");
    }
    state.SetItemsProcessed(state.iterations());
}

void BM_hw_matched(benchmark::State &state) { run<false>(state); }
void BM_unexpected_claimed(benchmark::State &state) { run<true>(state); }

BENCHMARK(BM_hw_matched)->Arg(1)->Arg(32)->Arg(1024);
BENCHMARK(BM_unexpected_claimed)->Arg(1)->Arg(32)->Arg(1024);

}  // namespace

BENCHMARK_MAIN();
