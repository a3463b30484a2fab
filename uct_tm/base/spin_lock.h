/*
 * A lock for short critical sections that threads rarely contend for:
 * libucs's spinlock. An uncontended lock and unlock cost a few
 * instructions where std::mutex's cost about 60 each (callgrind), which
 * the tm MD paid twice per receive UCP 1.13 registers. A holder must not
 * block for long: waiters spin. BasicLockable, for std::lock_guard.
 */
#ifndef UCT_TM_BASE_SPIN_LOCK_H_
#define UCT_TM_BASE_SPIN_LOCK_H_

#include <ucs/type/spinlock.h>

#include <new>

namespace uct_tm {

class SpinLock {
  public:
    /* Throws std::bad_alloc if the lock cannot be set up (pthread_spin_init
     * fails only for want of memory). */
    SpinLock() {
        if (ucs_spinlock_init(&lock_, 0) != UCS_OK) {
            throw std::bad_alloc();
        }
    }
    ~SpinLock() { ucs_spinlock_destroy(&lock_); }
    SpinLock(const SpinLock &)            = delete;
    SpinLock &operator=(const SpinLock &) = delete;

    void lock() { ucs_spin_lock(&lock_); }
    void unlock() { ucs_spin_unlock(&lock_); }

  private:
    ucs_spinlock_t lock_;
};

}  // namespace uct_tm

#endif
