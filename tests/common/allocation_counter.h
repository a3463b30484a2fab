/*
 * Counts every C++ allocation of the test program that includes it (replaces
 * the global operator new / delete), so a steady-state test can assert that a
 * cycle allocates nothing. Include from exactly one translation unit of a
 * program.
 */
#ifndef UCT_TM_TESTS_ALLOCATION_COUNTER_H_
#define UCT_TM_TESTS_ALLOCATION_COUNTER_H_

#include <atomic>
#include <cstdlib>
#include <new>

inline std::atomic<size_t> g_allocations{0};

void *operator new(std::size_t size) {
    ++g_allocations;
    if (void *p = std::malloc(size ? size : 1)) {
        return p;
    }
    throw std::bad_alloc();
}
void *operator new[](std::size_t size) { return operator new(size); }
void *operator new(std::size_t size, const std::nothrow_t &) noexcept {
    ++g_allocations;
    return std::malloc(size ? size : 1);
}
void *operator new[](std::size_t size, const std::nothrow_t &t) noexcept {
    return operator new(size, t);
}
void *operator new(std::size_t size, std::align_val_t align, const std::nothrow_t &) noexcept {
    ++g_allocations;
    const size_t a = static_cast<size_t>(align);
    return std::aligned_alloc(a, (size + a - 1) / a * a);
}
void *operator new(std::size_t size, std::align_val_t align) {
    if (void *p = operator new(size, align, std::nothrow)) {
        return p;
    }
    throw std::bad_alloc();
}
void operator delete(void *p) noexcept { std::free(p); }
void operator delete(void *p, std::size_t) noexcept { std::free(p); }
void operator delete[](void *p) noexcept { std::free(p); }
void operator delete[](void *p, std::size_t) noexcept { std::free(p); }
void operator delete(void *p, std::align_val_t) noexcept { std::free(p); }
void operator delete(void *p, std::size_t, std::align_val_t) noexcept { std::free(p); }

#endif
