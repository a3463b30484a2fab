#include "truncation_guard.h"

#include <ucs/debug/log_def.h>

#include <atomic>
#include <cerrno>
#include <csignal>
#include <cstdint>
#include <mutex>
#include <sys/mman.h>

namespace uct_tm {
namespace {

/* A watched range; `start` 0 marks it free. The handler reads it without a
 * lock: watch() fills `length` before it publishes `start`. */
struct Range {
    std::atomic<uintptr_t> start{0};
    std::atomic<size_t>    length{0};
    std::atomic<bool>      truncated{false};
};
static_assert(std::atomic<uintptr_t>::is_always_lock_free &&
                  std::atomic<size_t>::is_always_lock_free &&
                  std::atomic<bool>::is_always_lock_free,
              "the SIGBUS handler reads the ranges");

Range            g_ranges[TruncationGuard::kRanges];
std::atomic<int> g_used{0}; /* ranges [0, g_used) may be taken */
std::mutex       g_mutex;   /* watch, unwatch, installing the handler */
struct sigaction g_previous;
bool             g_installed   = false;
bool             g_install_failed = false; /* warned once; no retries */
bool             g_full_warned = false;

/* What SIGBUS would have done without the guard. */
void pass_on(int sig, siginfo_t *info, void *context) {
    if (g_previous.sa_flags & SA_SIGINFO) {
        g_previous.sa_sigaction(sig, info, context);
        return;
    }
    if ((g_previous.sa_handler != SIG_DFL) && (g_previous.sa_handler != SIG_IGN)) {
        g_previous.sa_handler(sig);
        return;
    }
    /* The default action: a faulting access runs again and is killed by it,
     * a signal sent by kill() is raised again. */
    signal(sig, SIG_DFL);
    if (info->si_code <= 0) {
        raise(sig);
    }
}

/* The watched range holding `address`, or null. */
Range *range_of(uintptr_t address) {
    const int used = g_used.load(std::memory_order_acquire);
    for (int i = 0; i < used; ++i) {
        const uintptr_t start = g_ranges[i].start.load(std::memory_order_acquire);
        if ((start != 0) &&
            (address - start < g_ranges[i].length.load(std::memory_order_relaxed))) {
            return &g_ranges[i];
        }
    }
    return nullptr;
}

void on_sigbus(int sig, siginfo_t *info, void *context) {
    const int saved_errno = errno;
    Range    *range       = (info->si_code == BUS_ADRERR)
                                ? range_of(reinterpret_cast<uintptr_t>(info->si_addr))
                                : nullptr;
    if (range != nullptr) {
        void *start = reinterpret_cast<void *>(range->start.load(std::memory_order_relaxed));
        void *zeros = mmap(start, range->length.load(std::memory_order_relaxed),
                           PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED, -1, 0);
        if (zeros == start) {
            range->truncated.store(true, std::memory_order_release);
            errno = saved_errno;
            return; /* the access runs again, on zero pages */
        }
    }
    errno = saved_errno;
    pass_on(sig, info, context);
}

bool install_locked() {
    if (g_installed || g_install_failed) {
        return g_installed;
    }
    struct sigaction action = {};
    action.sa_sigaction     = on_sigbus;
    action.sa_flags         = SA_SIGINFO | SA_ONSTACK | SA_RESTART;
    sigemptyset(&action.sa_mask);
    if (sigaction(SIGBUS, &action, &g_previous) != 0) {
        ucs_warn("tm shm: cannot install the SIGBUS handler for named segments: %m");
        g_install_failed = true;
        return false;
    }
    g_installed = true;
    return true;
}

}  // namespace

int TruncationGuard::watch(void *address, size_t length) {
    if ((address == nullptr) || (length == 0)) {
        return -1;
    }
    std::lock_guard<std::mutex> lock(g_mutex);
    if (!install_locked()) {
        return -1;
    }
    const int used = g_used.load(std::memory_order_relaxed);
    int       i    = 0;
    while ((i < used) && (g_ranges[i].start.load(std::memory_order_relaxed) != 0)) {
        ++i;
    }
    if (i == kRanges) {
        if (!g_full_warned) {
            g_full_warned = true;
            ucs_warn("tm shm: more than %d named segment mappings: the rest are not guarded "
                     "against truncation",
                     kRanges);
        }
        return -1;
    }
    g_ranges[i].length.store(length, std::memory_order_relaxed);
    g_ranges[i].truncated.store(false, std::memory_order_relaxed);
    g_ranges[i].start.store(reinterpret_cast<uintptr_t>(address), std::memory_order_release);
    if (i == used) {
        g_used.store(used + 1, std::memory_order_release);
    }
    return i;
}

void TruncationGuard::unwatch(int handle) {
    if ((handle < 0) || (handle >= kRanges)) {
        return;
    }
    std::lock_guard<std::mutex> lock(g_mutex);
    g_ranges[handle].start.store(0, std::memory_order_release);
}

bool TruncationGuard::truncated(int handle) {
    return (handle >= 0) && (handle < kRanges) &&
           g_ranges[handle].truncated.load(std::memory_order_acquire);
}

}  // namespace uct_tm
