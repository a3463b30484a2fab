/*
 * stream_copy: memcpy with non-temporal stores (x86 SSE2 movntdq), which
 * write whole lines to memory instead of fetching them into this core's
 * cache first.
 *
 * Why: tm_sm's mid-size eager messages cross between the two processes'
 * cores through shared descriptors. On some hosts, for minutes at a time, a
 * line modified in one core's cache reaches the other core several times
 * slower than memory does (docs/perf.md, "the mid-size slow mode"): there an
 * ordinary copy into the descriptor and the receiver's copy out of it both
 * crawl, while the same bytes written past the cache cross at memory speed.
 * When lines cross quickly, ordinary stores stay faster (the receiver reads
 * from the sender's cache), so tm_sm chooses per message (CopyMode).
 * Elsewhere than x86 it is memcpy.
 */
#ifndef UCT_TM_BASE_STREAM_COPY_H_
#define UCT_TM_BASE_STREAM_COPY_H_

#include <cstddef>
#include <cstdint>
#include <cstring>

#if defined(__x86_64__)
#include <emmintrin.h>
#endif

namespace uct_tm {

inline void stream_copy(void *dst, const void *src, size_t n) {
#if defined(__x86_64__)
    char       *d = static_cast<char *>(dst);
    const char *s = static_cast<const char *>(src);
    /* up to the first 16-byte boundary of the destination: ordinary stores */
    const size_t head = (16 - (reinterpret_cast<uintptr_t>(d) & 15)) & 15;
    if (n < head + 64) {
        memcpy(d, s, n);
        return;
    }
    memcpy(d, s, head);
    d += head;
    s += head;
    n -= head;
    for (; n >= 64; n -= 64, d += 64, s += 64) {
        const __m128i a = _mm_loadu_si128(reinterpret_cast<const __m128i *>(s));
        const __m128i b = _mm_loadu_si128(reinterpret_cast<const __m128i *>(s + 16));
        const __m128i c = _mm_loadu_si128(reinterpret_cast<const __m128i *>(s + 32));
        const __m128i e = _mm_loadu_si128(reinterpret_cast<const __m128i *>(s + 48));
        _mm_stream_si128(reinterpret_cast<__m128i *>(d), a);
        _mm_stream_si128(reinterpret_cast<__m128i *>(d + 16), b);
        _mm_stream_si128(reinterpret_cast<__m128i *>(d + 32), c);
        _mm_stream_si128(reinterpret_cast<__m128i *>(d + 48), e);
    }
    memcpy(d, s, n);
    /* streaming stores are weakly ordered: visible before whatever publishes them */
    _mm_sfence();
#else
    memcpy(dst, src, n);
#endif
}

}  // namespace uct_tm

#endif
