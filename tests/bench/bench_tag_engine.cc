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
#include "tag/tag_engine.h"
#include "receive_window.h"

#include <benchmark/benchmark.h>

#include <cstdint>
#include <vector>

namespace {

void BM_eager_into_posted(benchmark::State &state) {
    const size_t window = static_cast<size_t>(state.range(0));
    uct_tm::TagEngineLimits limits;
    limits.list_size = window;
    uct_tm::TagEngine engine(limits);
    bench::ReceiveWindow receives(window);
    /* 8 B messages, from the heap: under the sanitizers GCC cannot bound
     * copy_bytes()'s length and flags every copy from a stack array. */
    const std::vector<char> payload = {1, 2, 3, 4, 5, 6, 7, 8};
    constexpr size_t        kLength = 8;
    uint64_t             next_post = window, next_match = 0;
    auto                 post = [&](uint64_t seq) { return receives.post(engine, seq); };
    if (receives.fill(engine) != UCS_OK) {
        state.SkipWithError("post failed");
        return;
    }
    for (auto _ : state) {
        uct_tm::TagEngine::Recv *recv = engine.match(next_match);
        engine.scatter(recv, 0, payload.data(), kLength);
        engine.complete(recv, next_match, 0, kLength, UCS_OK);
        ++next_match;
        benchmark::DoNotOptimize(post(next_post++));
    }
    if (receives.completions() != next_match) {
        state.SkipWithError("lost completions");
    }
    state.SetItemsProcessed(state.iterations());
}

BENCHMARK(BM_eager_into_posted)->Arg(1)->Arg(32)->Arg(1024)->Arg(65536);

}  // namespace

BENCHMARK_MAIN();
