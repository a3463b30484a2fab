/*
 * Time and spinning helpers (UCX 1.13 does not install ucs/time or
 * ucs/arch/cpu.h).
 */
#ifndef UCT_TM_BASE_CLOCK_H_
#define UCT_TM_BASE_CLOCK_H_

#include <cstdint>
#include <ctime>

#if defined(__x86_64__) || defined(__i386__)
#include <immintrin.h>
#endif

namespace uct_tm {

/* Nanoseconds on the monotonic clock (a vDSO call, no system call). */
inline uint64_t monotonic_ns() {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return static_cast<uint64_t>(ts.tv_sec) * 1000000000ull + static_cast<uint64_t>(ts.tv_nsec);
}

/* Seconds from a setting (may be "inf") to nanoseconds, saturating. */
inline uint64_t seconds_to_ns(double seconds) {
    if (!(seconds < 1.8e10)) {
        return UINT64_MAX; /* inf, NaN, or beyond 2^64 ns */
    }
    return (seconds <= 0) ? 0 : static_cast<uint64_t>(seconds * 1e9);
}

/* `now` + `ns`, saturating: a deadline an "inf" setting never reaches. */
inline uint64_t deadline_after(uint64_t now, uint64_t ns) {
    return (ns > UINT64_MAX - now) ? UINT64_MAX : now + ns;
}

/* Tells the CPU we are spinning on memory another core will write. */
inline void cpu_relax() {
#if defined(__x86_64__) || defined(__i386__)
    _mm_pause();
#elif defined(__aarch64__)
    asm volatile("yield" ::: "memory");
#endif
}

}  // namespace uct_tm

#endif
