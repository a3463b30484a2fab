/*
 * Partials: messages whose later fragments are still to come, by
 * (source, msg_id). Entries live in a SlotPool and are found through a
 * BucketTable (key -> slot), both of which keep their memory when entries go:
 * a steady stream of fragmented messages allocates nothing after the first
 * few (a hash map allocated a node per message).
 */
#ifndef UCT_TM_PROTO_PARTIALS_H_
#define UCT_TM_PROTO_PARTIALS_H_

#include "common/alloc_status.h"

#include "match/bucket_table.h"
#include "match/slot_pool.h"

#include <cstdint>

namespace uct_tm {
namespace proto {

struct Account;

struct Partial {
    uint64_t req     = 0;          /* the receive it goes to, or */
    uint32_t unex    = UINT32_MAX; /* the unexpected slot buffering it (neither: dropped) */
    uint32_t source  = 0;
    uint64_t length  = 0;
    uint64_t arrived = 0;
    uint64_t sreq    = 0;
    bool     sync    = false;
    bool     deliver = false;   /* kFlagDeliver: kAck once the last fragment is in */
    Account *charged = nullptr; /* the sender account it counts against as open */
};

class Partials {
    struct Entry {
        uint64_t  key        = 0;
        bool      live       = false;
        Partial   partial;
        uint32_t  free_link_ = 0;
        uint32_t &free_link() { return free_link_; }
    };
    using Pool = match::SlotPool<Entry>;
    struct KeyOf {
        const Pool &pool;
        uint64_t    operator()(uint32_t idx) const { return pool[idx].key; }
    };
    static uint64_t key(uint32_t source, uint32_t msg_id) { return (uint64_t{source} << 32) | msg_id; }
    KeyOf key_of() const { return KeyOf{pool_}; }

  public:
    /* The message's entry, or null. */
    Partial *find(uint32_t source, uint32_t msg_id) {
        const uint64_t                  k   = key(source, msg_id);
        const match::detail::BucketTable::Ref ref = table_.find_fast(k, table_.hash(k), key_of());
        return (ref != nullptr) ? &pool_[*ref].partial : nullptr;
    }

    /* Sets the message's entry (replacing one with the same key);
     * UCS_ERR_NO_MEMORY when memory runs out (nothing changed). */
    ucs_status_t set(uint32_t source, uint32_t msg_id, const Partial &p) {
        if (Partial *old = find(source, msg_id)) {
            *old = p;
            return UCS_OK;
        }
        if (!table_.has_room() && !table_.grow(key_of())) {
            return UCS_ERR_NO_MEMORY;
        }
        uint32_t idx = 0;
        if (alloc_status([&] { idx = pool_.allocate(); }) != UCS_OK) {
            return UCS_ERR_NO_MEMORY;
        }
        pool_[idx].key     = key(source, msg_id);
        pool_[idx].live    = true;
        pool_[idx].partial = p;
        table_.insert(table_.hash(pool_[idx].key), idx);
        return UCS_OK;
    }

    /* Forgets the message's entry (one find() returned). */
    void erase(uint32_t source, uint32_t msg_id) {
        const uint64_t                        k   = key(source, msg_id);
        const match::detail::BucketTable::Hash h   = table_.hash(k);
        const match::detail::BucketTable::Ref  ref = table_.find_fast(k, h, key_of());
        if (ref != nullptr) {
            const uint32_t idx = *ref;
            table_.erase(ref, h);
            pool_[idx].live = false;
            pool_.release(idx);
        }
    }

    size_t size() const { return pool_.live(); }

    /* Erases every entry fn(Partial &) returns true for (rare: a peer failed). */
    template <typename Fn> void erase_if(Fn &&fn) {
        for (uint32_t i = 0; i < pool_.issued(); ++i) {
            if (pool_[i].live && fn(pool_[i].partial)) {
                erase(static_cast<uint32_t>(pool_[i].key >> 32), static_cast<uint32_t>(pool_[i].key));
            }
        }
    }

    /* Calls fn(Partial &) for every entry (rare: endpoint destruction). */
    template <typename Fn> void for_each(Fn &&fn) {
        for (uint32_t i = 0; i < pool_.issued(); ++i) {
            if (pool_[i].live) {
                fn(pool_[i].partial);
            }
        }
    }

  private:

    Pool                       pool_;
    match::detail::BucketTable table_;
};

}  // namespace proto
}  // namespace uct_tm

#endif
