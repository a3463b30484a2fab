/*
 * MemRegistry: the live registrations of an MD "tm" -- their handles and the
 * ranges they cover -- with no allocation in a steady register / deregister
 * cycle (the protocol layer registers every rendezvous buffer).
 *
 * Handles come from chunks that live as long as the registry, reused LIFO
 * through an intrusive free list, so add and remove are O(1). The ranges
 * are indexed only once covers() is first asked -- by a peer that cannot use
 * CMA, which asks for every copy: UCP 1.13 registers every receive buffer
 * it posts into the tag list and deregisters it at completion, and keeping
 * the index cost ~250 of the ~430 instructions of that pair when nobody asks.
 * From then on the ranges sit in a tree ordered by start address whose nodes
 * are kept for reuse after a removal (extract / insert node handles): add and
 * remove cost O(log n); with 64 Ki receives posted a sorted vector moved ~1.5
 * MB per registration (40 us per message in ucp_queue_depth). Memory is
 * allocated only when the number of live registrations reaches a new maximum
 * (and once, for the index, when covers() is first asked).
 *
 * Nothing survives a deregistration: registering records a range and pins
 * nothing, so there is no cost a cache across deregistration could save, and
 * covers() must answer for live registrations only -- it is what a peer that
 * cannot use CMA may ask this process to copy out for it. A registration
 * cached past its dereg would keep memory readable after the user freed it,
 * which a cache without memory-event hooks (ucs_rcache has them) cannot undo.
 *
 * Header-only and UCX-free so the unit tests run it alone. `Handle` needs
 * `address`, `length` (0 while the handle is free) and a `Handle *next_free`.
 */
#ifndef UCT_TM_BASE_MEM_REGISTRY_H_
#define UCT_TM_BASE_MEM_REGISTRY_H_

#include "common/alloc_status.h"

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <new>
#include <set>
#include <vector>

namespace uct_tm {

template <typename Handle> class MemRegistry {
  public:
    /* A handle for a new registration of [address, address + length),
     * recorded; null for an empty range or out of memory (nothing changed). */
    Handle *add(void *address, size_t length) {
        if ((length == 0) || ((free_ == nullptr) && !grow())) {
            return nullptr;
        }
        Handle *h = free_;
        if (indexed_ && !index(Range{reinterpret_cast<uintptr_t>(address), length, h})) {
            return nullptr;
        }
        free_        = h->next_free;
        h->next_free = nullptr;
        h->address   = address;
        h->length    = length;
        ++live_;
        return h;
    }

    /* Forgets a handle add() returned and takes it back for reuse. */
    void remove(Handle *h) {
        if (indexed_) {
            unindex(h);
        }
        h->length    = 0;
        h->next_free = free_;
        free_        = h;
        --live_;
    }

    /* True iff [address, address + length) lies inside one live
     * registration. The first call indexes the live ranges: false if that
     * runs out of memory (the next call tries again). */
    bool covers(uint64_t address, size_t length) {
        if (!indexed_ && !build_index()) {
            return false;
        }
        const Range key{address, 0, nullptr};
        for (auto it = ranges_.upper_bound(key); it != ranges_.begin();) {
            --it;
            if ((address - it->start <= it->length) &&
                (length <= it->length - (address - it->start))) {
                return true;
            }
        }
        return false;
    }

    size_t live() const { return live_; }
    /* Handles ever created (live + free): grows only with the peak of live(). */
    size_t created() const { return created_; }
    /* Whether covers() has been asked, so add and remove keep the index. */
    bool indexed() const { return indexed_; }

  private:
    struct Range {
        uintptr_t start;
        size_t    length;
        Handle   *handle;
    };
    struct ByStart {
        bool operator()(const Range &a, const Range &b) const { return a.start < b.start; }
    };
    using Ranges = std::multiset<Range, ByStart>;

    bool index(const Range &r) {
        if (!spare_nodes_.empty()) {
            typename Ranges::node_type node = std::move(spare_nodes_.back());
            spare_nodes_.pop_back();
            node.value() = r;
            ranges_.insert(std::move(node)); /* after equal starts: add order */
            return true;
        }
        return alloc_status([&] { ranges_.insert(r); }) == UCS_OK;
    }

    void unindex(const Handle *h) {
        const Range key{reinterpret_cast<uintptr_t>(h->address), 0, nullptr};
        for (auto it = ranges_.lower_bound(key); (it != ranges_.end()) && (it->start == key.start);
             ++it) {
            if (it->handle == h) {
                typename Ranges::node_type node = ranges_.extract(it);
                if (spare_nodes_.size() < spare_nodes_.capacity()) { /* reserved by grow() */
                    spare_nodes_.push_back(std::move(node));
                }
                return;
            }
        }
    }

    /* Indexes every live handle (length != 0), chunk by chunk. */
    bool build_index() {
        for (const Chunk &chunk : chunks_) {
            for (size_t i = 0; i < chunk.size; ++i) {
                Handle &h = chunk.handles[i];
                if ((h.length != 0) &&
                    !index(Range{reinterpret_cast<uintptr_t>(h.address), h.length, &h})) {
                    ranges_.clear();
                    return false;
                }
            }
        }
        indexed_ = true;
        return true;
    }

    bool grow() {
        const size_t n = std::max<size_t>(kFirstChunk, created_);
        std::unique_ptr<Handle[]> chunk(new (std::nothrow) Handle[n]);
        if (!chunk) {
            return false;
        }
        if (alloc_status([&] {
                chunks_.push_back(Chunk{std::move(chunk), n});
                spare_nodes_.reserve(created_ + n);
            }) != UCS_OK) {
            return false; /* a chunk already pushed stays owned, unused (length 0) */
        }
        Handle *c = chunks_.back().handles.get();
        for (size_t i = n; i-- > 0;) {
            c[i].next_free = free_;
            free_          = &c[i];
        }
        created_ += n;
        return true;
    }

    static constexpr size_t kFirstChunk = 16;

    struct Chunk {
        std::unique_ptr<Handle[]> handles;
        size_t                    size;
    };

    std::vector<Chunk> chunks_;
    Ranges             ranges_; /* by start, once indexed_; equal starts in add order */
    std::vector<typename Ranges::node_type> spare_nodes_; /* removed ranges' nodes, for add() */
    Handle                                *free_    = nullptr;
    size_t                                 created_ = 0;
    size_t                                  live_    = 0;
    bool                                    indexed_ = false;
};

}  // namespace uct_tm

#endif
