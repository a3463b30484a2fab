/*
 * Google Benchmark: the UCT tag-list engine (uct_tm::TagEngine) as a
 * transport drives it for eager messages: one iteration is one message into a
 * posted receive -- match(tag) (tag_consumed_cb), scatter 8 bytes, complete()
 * (completed_cb) -- plus posting the receive that replaces it, with W receives
 * posted at all times (W = the argument: a streaming receiver's window).
 * Receives are exact and matched oldest-first, each into its own buffer, as
 * tm_perftest tag_bw does. This isolates the software tag list's share of
 * tm_sm's per-message cost from the FIFO and the cross-core transfer.
 */
#include "base/tag_engine.h"

#include <benchmark/benchmark.h>

#include <cstdint>
#include <vector>

namespace {

struct Slot {
    uct_tag_context_t ctx;
    uint64_t          completions = 0;
};

void on_consumed(uct_tag_context_t *) {}

void on_completed(uct_tag_context_t *ctx, uct_tag_t, uint64_t, size_t, void *, ucs_status_t) {
    ++reinterpret_cast<Slot *>(ctx)->completions; /* ctx is Slot's first member */
}

void on_rndv(uct_tag_context_t *, uct_tag_t, const void *, unsigned, ucs_status_t, unsigned) {}

void BM_eager_into_posted(benchmark::State &state) {
    const size_t window = static_cast<size_t>(state.range(0));
    uct_tm::TagEngineLimits limits;
    limits.list_size = window;
    uct_tm::TagEngine engine(limits);
    std::vector<Slot>     slots(window);
    std::vector<char>     buffers(window * 64);
    const char            payload[8] = {1, 2, 3, 4, 5, 6, 7, 8};
    uint64_t              next_post = 0, next_match = 0;

    auto post = [&](uint64_t seq) {
        const size_t i  = seq % window;
        Slot        &s  = slots[i];
        s.ctx.tag_consumed_cb = on_consumed;
        s.ctx.completed_cb    = on_completed;
        s.ctx.rndv_cb         = on_rndv;
        uct_iov_t iov{&buffers[i * 64], 64, nullptr, 0, 1};
        return engine.post(seq, UINT64_MAX, &iov, 1, &s.ctx);
    };
    for (; next_post < window; ++next_post) {
        if (post(next_post) != UCS_OK) {
            state.SkipWithError("post failed");
            return;
        }
    }
    for (auto _ : state) {
        uct_tm::TagEngine::Recv *recv = engine.match(next_match);
        engine.scatter(recv, 0, payload, sizeof(payload));
        engine.complete(recv, next_match, 0, sizeof(payload), UCS_OK);
        ++next_match;
        benchmark::DoNotOptimize(post(next_post++));
    }
    uint64_t completions = 0;
    for (const Slot &s : slots) {
        completions += s.completions;
    }
    if (completions != next_match) {
        state.SkipWithError("lost completions");
    }
    state.SetItemsProcessed(state.iterations());
}

BENCHMARK(BM_eager_into_posted)->Arg(1)->Arg(32)->Arg(1024)->Arg(65536);

}  // namespace

BENCHMARK_MAIN();
