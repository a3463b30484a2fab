/*
 * MemRegistry: the live registrations of an MD "tm" -- their handles and the
 * ranges they cover -- with no allocation in a steady register / deregister
 * cycle (the protocol layer registers every rendezvous buffer).
 *
 * Handles come from chunks that live as long as the registry, reused LIFO
 * through an intrusive free list; the ranges sit in a vector sorted by start
 * address whose capacity never shrinks. Memory is allocated only when the
 * number of live registrations reaches a new maximum.
 *
 * Nothing survives a deregistration: registering records a range and pins
 * nothing, so there is no cost a cache across deregistration could save, and
 * covers() must answer for live registrations only -- it is what a peer that
 * cannot use CMA may ask this process to copy out for it. A registration
 * cached past its dereg would keep memory readable after the user freed it,
 * which a cache without memory-event hooks (ucs_rcache has them) cannot undo.
 *
 * Header-only and UCX-free so the unit tests run it alone. `Handle` needs
 * `address`, `length` and a `Handle *next_free`.
 */
#ifndef UCT_TM_BASE_MEM_REGISTRY_H_
#define UCT_TM_BASE_MEM_REGISTRY_H_

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <new>
#include <vector>

namespace uct_tm {

template <typename Handle> class MemRegistry {
  public:
    /* A handle for a new registration of [address, address + length),
     * recorded; null when out of memory (nothing changed). */
    Handle *add(void *address, size_t length) {
        if ((free_ == nullptr) && !grow()) {
            return nullptr;
        }
        const Range r{reinterpret_cast<uintptr_t>(address), length, free_};
        try {
            ranges_.insert(std::upper_bound(ranges_.begin(), ranges_.end(), r, by_start), r);
        } catch (const std::bad_alloc &) {
            return nullptr;
        }
        Handle *h  = free_;
        free_      = h->next_free;
        h->next_free = nullptr;
        h->address = address;
        h->length  = length;
        return h;
    }

    /* Forgets a handle add() returned and takes it back for reuse. */
    void remove(Handle *h) {
        const Range key{reinterpret_cast<uintptr_t>(h->address), 0, nullptr};
        for (auto it = std::lower_bound(ranges_.begin(), ranges_.end(), key, by_start);
             (it != ranges_.end()) && (it->start == key.start); ++it) {
            if (it->handle == h) {
                ranges_.erase(it);
                break;
            }
        }
        h->next_free = free_;
        free_        = h;
    }

    /* True iff [address, address + length) lies inside one live registration. */
    bool covers(uint64_t address, size_t length) const {
        const Range key{address, 0, nullptr};
        for (auto it = std::upper_bound(ranges_.begin(), ranges_.end(), key, by_start);
             it != ranges_.begin();) {
            --it;
            if ((address - it->start <= it->length) &&
                (length <= it->length - (address - it->start))) {
                return true;
            }
        }
        return false;
    }

    size_t live() const { return ranges_.size(); }
    /* Handles ever created (live + free): grows only with the peak of live(). */
    size_t created() const { return created_; }

  private:
    struct Range {
        uintptr_t start;
        size_t    length;
        Handle   *handle;
    };
    static bool by_start(const Range &a, const Range &b) { return a.start < b.start; }

    bool grow() {
        const size_t n = std::max<size_t>(kFirstChunk, created_);
        std::unique_ptr<Handle[]> chunk(new (std::nothrow) Handle[n]);
        if (!chunk) {
            return false;
        }
        try {
            chunks_.push_back(std::move(chunk));
            ranges_.reserve(created_ + n);
        } catch (const std::bad_alloc &) {
            return false; /* a chunk already pushed stays owned, unused */
        }
        Handle *c = chunks_.back().get();
        for (size_t i = n; i-- > 0;) {
            c[i].next_free = free_;
            free_          = &c[i];
        }
        created_ += n;
        return true;
    }

    static constexpr size_t kFirstChunk = 16;

    std::vector<std::unique_ptr<Handle[]>> chunks_;
    std::vector<Range>                     ranges_; /* sorted by start; equal starts in add order */
    Handle                                *free_    = nullptr;
    size_t                                 created_ = 0;
};

}  // namespace uct_tm

#endif
