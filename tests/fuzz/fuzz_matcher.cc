/*
 * libFuzzer target: the fuzz input is decoded into matcher operations which
 * run on both uct_tm::match::TagMatcher and the linear reference model
 * (tests/common/matcher_op_stream.h). Any divergence traps; ASan/UBSan catch
 * memory errors in the matcher along the way.
 */
#include "matcher_op_stream.h"

#include <cstddef>
#include <cstdint>
#include <cstdio>

/* Harness self-check: build with -DFUZZ_MATCHER_MODEL_FAULTS=<ModelFault bits>
 * to fuzz against a deliberately wrong model; the fuzzer must then crash. */
#ifndef FUZZ_MATCHER_MODEL_FAULTS
#define FUZZ_MATCHER_MODEL_FAULTS 0
#endif

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    using uct_tm::match_test::MatcherOpStream;
    MatcherOpStream::Config base;
    base.model_faults = FUZZ_MATCHER_MODEL_FAULTS;
    MatcherOpStream               stream(base);
    const MatcherOpStream::Result r = stream.run_bytes(data, size);
    if (!r.ok) {
        /* Re-run with call tracing for a readable report. */
        MatcherOpStream::Config cfg = base;
        cfg.trace      = true;
        cfg.trace_keep = 200;
        MatcherOpStream               traced(cfg);
        const MatcherOpStream::Result r2 = traced.run_bytes(data, size);
        fprintf(stderr, "fuzz_matcher: %s\n", (r2.ok ? r : r2).divergence.c_str());
        fflush(stderr);
        __builtin_trap();
    }
    return 0;
}
