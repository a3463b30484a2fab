/*
 * Unexpected messages: what arrived before a matching receive was posted.
 * Eager data is buffered here (counted against the unexpected cap);
 * a rendezvous request keeps only its header until a receive asks for the
 * data. The tag matcher holds (tag, slot index) for matching in arrival
 * order; UnexpectedQueue keeps the same order per source for directed
 * receives and probes. A message a probe claimed (PEEK|CLAIM) stays
 * here, out of matching, until recv_claimed or discard_claimed takes it.
 */
#ifndef UCT_TM_PROTO_UNEXPECTED_H_
#define UCT_TM_PROTO_UNEXPECTED_H_

#include "common/ucs_assert.h"
#include "match/slot_pool.h"
#include "match/tag_matcher.h"

#include <algorithm>
#include <cstdint>
#include <deque>
#include <unordered_map>
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
    bool     put_offer = false; /* rndv: the sender offered to write (kFlagPut) */
    bool     sync     = false;
    bool     claimed  = false; /* held by a PEEK|CLAIM probe */
    bool     discard  = false; /* dropped while fragments are still coming */
    bool     held     = false; /* buffered receives: reported once it arrived whole */
    bool     untagged = false; /* fi_msg: in the untagged arrival list, not the matcher */
    bool     taken     = false; /* out of matching: a receive took it (fragments may still come) */
    uint32_t source   = 0;
    bool     has_data = false; /* remote data sent (rdata) */
    uint64_t rdata    = 0;
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

/* The unexpected messages in arrival order, matched through the tag matcher
 * the posted receives share (a new receive looks here before it is held). */
class UnexpectedQueue {
  public:
    explicit UnexpectedQueue(match::TagMatcher &matcher) : matcher_(matcher) {}

    /* Messages in matching (claimed ones are out of it). */
    size_t count() const { return matcher_.unexpected_count(); }

    /* A fresh slot for a message about to be queued; throws std::bad_alloc. */
    uint32_t allocate() { return pool_.allocate(); }

    /* Queues slot `idx` (its tag and source set) for matching, last in
     * arrival order; on an error the caller releases the slot. Throws
     * std::bad_alloc (nothing queued). */
    ucs_status_t enqueue(uint32_t idx) {
        Unexpected &u    = pool_[idx];
        Arrivals   &from = arrivals_of(u.source);
        from.handles.push_back(pool_.handle(idx));
        const match::ArriveResult ar = matcher_.arrive(u.tag, idx);
        if (ar.status != UCS_OK) {
            from.handles.pop_back();
            return ar.status;
        }
        u.mh = ar.handle;
        ++from.live;
        return UCS_OK;
    }

    /* Untagged messages (fi_msg) are matched in arrival order alone, out of
     * the tag matcher: slot `idx` goes last; throws std::bad_alloc. */
    void enqueue_untagged(uint32_t idx) { untagged_.push_back(pool_.handle(idx)); }
    size_t untagged_count() const { return untagged_.size(); }

    /* The earliest untagged message (from `source`), taken out of matching
     * (the slot stays until remove()). */
    bool find_untagged(bool has_source, uint32_t source, uint32_t *idx) {
        for (auto it = untagged_.begin(); it != untagged_.end(); ++it) {
            uint32_t          i = 0;
            const Unexpected *u = pool_.lookup(*it, &i);
            /* live: every way out of the list (here, withdraw_rts) erases */
            ucs_assertv(u != nullptr, "stale untagged message handle %#llx",
                        static_cast<unsigned long long>(*it));
            if (has_source && (u->source != source)) {
                continue;
            }
            untagged_.erase(it);
            *idx = i;
            return true;
        }
        return false;
    }

    /* The earliest message matching (and from `source`), not claimed; with
     * `remove` it leaves matching (the slot stays until remove()). */
    bool find(uint64_t tag, uint64_t mask, bool has_source, uint32_t source, uint32_t *idx,
              bool remove) {
        if (count() == 0) {
            return false;
        }
        if (has_source) {
            return find_from(tag, mask, source, idx, remove);
        }
        match::Message     m;
        const ucs_status_t status = remove ? matcher_.claim(tag, mask, &m)
                                           : matcher_.peek(tag, mask, &m);
        if (status != UCS_OK) {
            return false;
        }
        *idx = static_cast<uint32_t>(m.cookie);
        if (remove) {
            pool_[*idx].taken = true;
        }
        return true;
    }

    /* A probe claimed message `idx` (already out of matching): the handle
     * that names it to recv_claimed / discard_claimed. */
    uint64_t claim(uint32_t idx) {
        pool_[idx].claimed = true;
        return pool_.handle(idx);
    }

    /* The handle that names slot `idx` (claimed: to recv_claimed / discard_claimed). */
    uint64_t handle(uint32_t idx) { return pool_.handle(idx); }

    /* The claimed message a handle names, or null. */
    Unexpected *claimed(uint64_t handle, uint32_t *idx) {
        Unexpected *u = pool_.lookup(handle, idx);
        return ((u != nullptr) && u->claimed) ? u : nullptr;
    }

    /* Withdraws the rendezvous request `sreq` of `source` if no receive
     * took it; whether it did. */
    bool withdraw_rts(uint32_t source, uint64_t sreq) {
        for (auto it = untagged_.begin(); it != untagged_.end(); ++it) {
            uint32_t    idx;
            Unexpected *u = pool_.lookup(*it, &idx);
            if ((u != nullptr) && u->rndv && (u->source == source) && (u->sreq == sreq)) {
                untagged_.erase(it);
                remove(idx);
                return true;
            }
        }
        const auto from = arrivals_.find(source);
        if (from == arrivals_.end()) {
            return false;
        }
        for (uint64_t handle : from->second.handles) {
            uint32_t    idx;
            Unexpected *u = pool_.lookup(handle, &idx);
            if ((u != nullptr) && u->rndv && !u->claimed && !u->taken && (u->sreq == sreq) &&
                (matcher_.take(u->mh) == UCS_OK)) {
                remove(idx);
                return true;
            }
        }
        return false;
    }

    /* Frees a message out of matching (or never queued). */
    void remove(uint32_t idx) {
        const Unexpected &u      = pool_[idx];
        const bool        listed = !u.untagged && (u.mh.generation != 0);
        const uint32_t    source = u.source;
        pool_.release(idx);
        if (listed) {
            forget(source);
        }
    }

    /* Frees a slot enqueue() refused. */
    void release(uint32_t idx) { pool_.release(idx); }

    Unexpected &operator[](uint32_t idx) { return pool_[idx]; }
    template <typename Fn> void for_each_live(Fn &&fn) { pool_.for_each_live(fn); }

  private:
    /* One source's queued messages (handles in arrival order; freed ones
     * dropped at the front at once, elsewhere once they outnumber the live). */
    struct Arrivals {
        std::deque<uint64_t> handles;
        size_t               live = 0;
    };

    /* The earliest message from `source` matching, as find(). */
    bool find_from(uint64_t tag, uint64_t mask, uint32_t source, uint32_t *idx, bool remove) {
        const auto from = arrivals_.find(source);
        if (from == arrivals_.end()) {
            return false;
        }
        for (uint64_t h : from->second.handles) {
            uint32_t    i;
            Unexpected *u = pool_.lookup(h, &i);
            if ((u == nullptr) || u->claimed || u->taken ||
                !match::tag_matches(u->tag, tag, mask)) {
                continue;
            }
            if (remove) {
                if (matcher_.take(u->mh) != UCS_OK) {
                    continue; /* not reached: taken ones are marked */
                }
                u->taken = true;
            }
            *idx = i;
            return true;
        }
        return false;
    }

    /* `source`'s list, made at its first message; throws std::bad_alloc.
     * Mostly the source of the message before: one compare. */
    Arrivals &arrivals_of(uint32_t source) {
        if ((last_ == nullptr) || (source != last_source_)) {
            last_        = &arrivals_[source]; /* nodes stay put: none is erased */
            last_source_ = source;
        }
        return *last_;
    }

    /* A queued message of `source` was freed. */
    void forget(uint32_t source) {
        Arrivals &from = arrivals_of(source);
        --from.live;
        std::deque<uint64_t> &q = from.handles;
        uint32_t              idx;
        while (!q.empty() && (pool_.lookup(q.front(), &idx) == nullptr)) {
            q.pop_front();
        }
        if (q.size() > 2 * from.live + 64) {
            q.erase(std::remove_if(q.begin(), q.end(),
                                   [this](uint64_t h) {
                                       uint32_t i;
                                       return pool_.lookup(h, &i) == nullptr;
                                   }),
                    q.end());
        }
    }

    match::TagMatcher   &matcher_;
    UnexpectedPool       pool_;
    std::unordered_map<uint32_t, Arrivals> arrivals_; /* tagged messages by source */
    Arrivals                              *last_        = nullptr;
    uint32_t                               last_source_ = 0;
    std::deque<uint64_t> untagged_; /* untagged messages in matching, in arrival order */
};

}  // namespace proto
}  // namespace uct_tm

#endif
