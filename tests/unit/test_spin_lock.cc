#include "base/spin_lock.h"

#include <gtest/gtest.h>

#include <atomic>
#include <mutex>
#include <thread>
#include <vector>

namespace {

/* Two threads, started together, add to one counter by plain loads and
 * stores under the lock: no update is lost (without the lock, the two
 * cores lose many of each other's). */
TEST(SpinLock, ExcludesTheOtherThread) {
    uct_tm::SpinLock lock;
    volatile long    counter = 0; /* one load and one store per addition */
    std::atomic<int> ready{0};
    constexpr long   kAdds = 500000;
    auto             add   = [&] {
        ready.fetch_add(1);
        while (ready.load() < 2) {
        }
        for (long i = 0; i < kAdds; ++i) {
            std::lock_guard<uct_tm::SpinLock> guard(lock);
            counter = counter + 1;
        }
    };
    std::vector<std::thread> threads;
    for (int t = 0; t < 2; ++t) {
        threads.emplace_back(add);
    }
    for (std::thread &t : threads) {
        t.join();
    }
    EXPECT_EQ(counter, 2 * kAdds);
}

/* A released lock can be taken again at once (by this thread, then by another). */
TEST(SpinLock, ReleasedLockIsFree) {
    uct_tm::SpinLock lock;
    lock.lock();
    lock.unlock();
    bool taken = false;
    std::thread([&] {
        std::lock_guard<uct_tm::SpinLock> guard(lock);
        taken = true;
    }).join();
    EXPECT_TRUE(taken);
}

}  // namespace
