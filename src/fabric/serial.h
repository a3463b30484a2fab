/*
 * Threading. A domain opened for FI_THREAD_DOMAIN leaves serialization to
 * the application: its objects use the plain ops tables, with no lock and
 * no test on the data path. A domain opened for any other level
 * (FI_THREAD_SAFE, FI_THREAD_FID, FI_THREAD_ENDPOINT, FI_THREAD_COMPLETION:
 * one lock satisfies them all) gives its objects ops tables whose every
 * entry takes the domain's mutex around the plain call. The layer's worker
 * is single-threaded, and a CQ read progresses every endpoint bound to the
 * CQ, so one lock per domain is what keeps two threads out of one worker.
 */
#ifndef UCT_TM_FABRIC_SERIAL_H_
#define UCT_TM_FABRIC_SERIAL_H_

#include "provider.h"

#include <mutex>

namespace uct_tm {
namespace fabric {

/* A level fi_domain(3) defines (every one is served; FI_THREAD_UNSPEC
 * as FI_THREAD_SAFE). */
inline bool threading_known(int threading) {
    switch (threading) {
    case FI_THREAD_UNSPEC:
    case FI_THREAD_SAFE:
    case FI_THREAD_FID:
    case FI_THREAD_DOMAIN:
    case FI_THREAD_COMPLETION:
    case FI_THREAD_ENDPOINT: return true;
    default: return false;
    }
}

/* The mutex of the domain `f` belongs to if that domain serializes; null
 * if it does not, or for a null or foreign fid (the call reports that). */
std::mutex *serial_lock(const fid *f);

inline const fid                *fid_of(const fid *f) { return f; }
template <typename F> const fid *fid_of(const F *f) { return (f == nullptr) ? nullptr : &f->fid; }

/* An ops-table entry as it is (FI_THREAD_DOMAIN). */
template <auto Fn> struct Direct { static constexpr auto fn = Fn; };

/* An ops-table entry under its domain's lock. */
template <auto Fn> struct Serial;
template <typename R, typename F, typename... A, R (*Fn)(F *, A...)> struct Serial<Fn> {
    static R fn(F *f, A... args) {
        std::mutex *m = serial_lock(fid_of(f));
        if (m == nullptr) {
            return Fn(f, args...);
        }
        std::lock_guard<std::mutex> guard(*m);
        return Fn(f, args...);
    }
};

/* f() under `m` if it is not null: the blocking calls (fi_cq_sread,
 * fi_cntr_wait) take the lock per attempt, so other threads post and read
 * while one waits. */
template <typename F> auto holding(std::mutex *m, F &&f) -> decltype(f()) {
    if (m == nullptr) {
        return f();
    }
    std::lock_guard<std::mutex> guard(*m);
    return f();
}

}  // namespace fabric
}  // namespace uct_tm

#endif
