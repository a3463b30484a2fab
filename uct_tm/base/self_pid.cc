#include "base/self_pid.h"

#include <pthread.h>
#include <unistd.h>

#include <atomic>
#include <mutex>

namespace uct_tm {

namespace {

std::atomic<pid_t> g_pid{0}; /* 0: not known yet */

void forget_pid() { g_pid.store(0, std::memory_order_relaxed); }

}  // namespace

pid_t self_pid() {
    pid_t pid = g_pid.load(std::memory_order_relaxed);
    if (pid == 0) {
        static std::once_flag registered;
        std::call_once(registered, [] { pthread_atfork(nullptr, nullptr, forget_pid); });
        pid = getpid();
        g_pid.store(pid, std::memory_order_relaxed);
    }
    return pid;
}

}  // namespace uct_tm
