/*
 * Unexpected messages: what arrived before a matching receive was posted.
 * Eager data is buffered here (counted against the unexpected cap);
 * a rendezvous request keeps only its header until a receive asks for the
 * data. The tag matcher holds (tag, slot index) for matching in arrival
 * order; `arrival` keeps the same order for source-filtered searches.
 */
#ifndef UCT_TM_PROTO_UNEXPECTED_H_
#define UCT_TM_PROTO_UNEXPECTED_H_

#include "match/slot_pool.h"
#include "match/tag_matcher.h"

#include <cstdint>
#include <deque>
#include <vector>

namespace uct_tm {
namespace proto {

struct Account;

struct Unexpected {
    uint32_t gen        = 1;
    uint32_t free_link_ = 0;
    uint32_t &free_link() { return free_link_; }

    bool     live     = false;
    bool     rndv     = false; /* a rendezvous request: no data here */
    bool     sync     = false;
    bool     claimed  = false; /* held by a PEEK|CLAIM probe */
    bool     discard  = false; /* dropped while fragments are still coming */
    uint32_t source   = 0;
    uint32_t imm      = 0;
    uint64_t tag      = 0;
    uint64_t length   = 0;     /* the sender's length */
    uint64_t arrived  = 0;     /* eager bytes buffered so far */
    uint64_t sreq     = 0;     /* sender's request, for replies */
    uint32_t msg_id   = 0;
    Account *charged  = nullptr; /* the sender account its buffered bytes count against */
    match::MsgHandle mh;
    uint64_t receiver = 0;     /* a receive that took it while fragments still come */
    std::vector<char> data;
};

class UnexpectedPool {
  public:
    uint32_t allocate() {
        const uint32_t idx = pool_.allocate();
        Unexpected    &u   = pool_[idx];
        std::vector<char> keep = std::move(u.data);
        const uint32_t gen = u.gen;
        u = Unexpected();
        u.gen  = gen;
        keep.clear();
        u.data = std::move(keep);
        u.live = true;
        return idx;
    }
    void release(uint32_t idx) {
        Unexpected &u = pool_[idx];
        u.live = false;
        u.gen  = (u.gen + 1 == 0) ? 1 : u.gen + 1;
        if (u.data.capacity() > (64u << 10)) {
            std::vector<char>().swap(u.data); /* keep only small buffers around */
        }
        pool_.release(idx);
    }
    Unexpected &operator[](uint32_t idx) { return pool_[idx]; }
    uint64_t handle(uint32_t idx) { return (uint64_t{pool_[idx].gen} << 32) | (uint64_t{idx} + 1); }
    /* The live message with this handle, or null. */
    Unexpected *lookup(uint64_t h, uint32_t *idx) {
        const uint64_t low = h & 0xffffffffu;
        if ((low == 0) || (low > pool_.issued())) {
            return nullptr;
        }
        Unexpected &u = pool_[static_cast<uint32_t>(low - 1)];
        if (!u.live || (u.gen != static_cast<uint32_t>(h >> 32))) {
            return nullptr;
        }
        *idx = static_cast<uint32_t>(low - 1);
        return &u;
    }
    size_t live() const { return pool_.live(); }
    /* Calls fn(Unexpected &) for every live message (rare: endpoint destruction). */
    template <typename Fn> void for_each_live(Fn &&fn) {
        for (uint32_t i = 0; i < pool_.issued(); ++i) {
            if (pool_[i].live) {
                fn(pool_[i]);
            }
        }
    }

  private:
    match::SlotPool<Unexpected> pool_;
};

}  // namespace proto
}  // namespace uct_tm

#endif
