/*
 * Software tag matcher: see tag_matcher.h for the contract.
 *
 * Posted side: one MaskClass per distinct mask (class 0 = exact), each a
 * BucketTable from `tag & mask` to a FIFO ring of receives with that key. An
 * arrival looks up every active class once; the ring heads are the earliest
 * candidates of their class and the lowest posting sequence wins. Receives
 * whose mask found no free class go to one overflow ring scanned in order.
 *
 * Unexpected side: one arrival-ordered ring of all messages (mask 0 and the
 * fallback scan), plus up to 1 + kMaxUnexpectedIndexes keyed indexes (slot 0 =
 * exact tags, always on; the others built on demand for masks searched often).
 * Every message sits in every active index, each with its own ring links.
 */
#include "tag_matcher.h"

#include "bucket_table.h"
#include "slot_pool.h"

#include <algorithm>
#include <array>
#include <new>
#include <utility>

namespace uct_tm {
namespace match {

namespace {

constexpr uint32_t kMaxUnexpectedIndexes = 4;
constexpr uint32_t kMaxMaskClasses       = 1024;
constexpr uint16_t kOverflowClass        = UINT16_MAX;
/* An unexpected-side index unused for this many masked searches may be
 * recycled for another mask. */
constexpr uint64_t kStaleIndexQueries = 256;
/* Masked classes whose table lines an arrival prefetches together. */
constexpr size_t kPrefetchClasses = 8;

struct Links {
    uint32_t next = kNoIndex;
    uint32_t prev = kNoIndex;
};

struct PostedEntry {
    Tag      tag  = 0;
    void    *ctx  = nullptr;
    uint64_t seq  = 0;
    Links    link;            /* key ring, or overflow ring; free list when idle */
    uint32_t gen  = 1;
    uint16_t cls  = 0;
    uint16_t live = 0;

    uint32_t &free_link() { return link.next; }
};
static_assert(sizeof(PostedEntry) == 40, "posted receive entry must stay compact");

struct UnexpectedEntry {
    Tag      tag    = 0;
    uint64_t cookie = 0;
    uint64_t seq    = 0;
    uint32_t gen    = 1;
    uint32_t live   = 0;
    Links    order;                                 /* arrival ring */
    Links    index[kMaxUnexpectedIndexes + 1];     /* one ring per keyed index */

    uint32_t &free_link() { return order.next; }
};

uint32_t next_generation(uint32_t gen) { return (gen + 1 == 0) ? 1 : gen + 1; }

/* Appends `idx` at the tail of the circular list starting at `head`. */
template <typename LinksOf>
[[gnu::always_inline]] inline void ring_push_back(uint32_t &head, uint32_t idx, const LinksOf &links) {
    if (head == kNoIndex) {
        links(idx) = Links{idx, idx};
        head       = idx;
        return;
    }
    const uint32_t tail = links(head).prev;
    links(idx)          = Links{head, tail};
    links(tail).next    = idx;
    links(head).prev    = idx;
}

/* Unlinks `idx` from the circular list starting at `head`; returns the new head. */
template <typename LinksOf>
[[gnu::always_inline]] inline uint32_t ring_remove(uint32_t head, uint32_t idx, const LinksOf &links) {
    const Links l = links(idx);
    if (l.next == idx) {
        return kNoIndex;
    }
    links(l.prev).next = l.next;
    links(l.next).prev = l.prev;
    return (head == idx) ? l.next : head;
}

/* Appends `idx` to the FIFO ring of `key`; the table has room (reserve_one). */
template <typename KeyOf, typename LinksOf>
[[gnu::always_inline]] inline void keyed_push(BucketTable &table, Tag key, uint32_t idx, const KeyOf &key_of, const LinksOf &links) {
    bool             inserted;
    BucketTable::Ref head = table.find_or_insert(key, key_of, idx, &inserted);
    if (inserted) {
        links(idx) = Links{idx, idx};
    } else {
        ring_push_back(*head, idx, links);
    }
}

/* Removes `idx` from the FIFO ring of `key`. A ring's head is its oldest
 * entry, so `idx` is the head iff its predecessor (the tail) is newer: only
 * then does the table need a lookup. `slot`, if known, is key's table slot. */
template <typename KeyOf, typename LinksOf, typename SeqOf>
[[gnu::always_inline]] inline void keyed_remove(BucketTable &table, Tag key, uint32_t idx, const KeyOf &key_of,
                  const LinksOf &links, const SeqOf &seq_of, BucketTable::Ref slot = nullptr) {
    const Links l = links(idx);
    if (l.next == idx) {
        table.erase(slot ? slot : table.find(key, key_of));
        return;
    }
    const bool is_head = seq_of(l.prev) > seq_of(idx);
    links(l.prev).next = l.next;
    links(l.next).prev = l.prev;
    if (is_head) {
        *(slot ? slot : table.find(key, key_of)) = l.next;
    }
}

template <typename Pool> ucs_status_t check_handle(const Pool &pool, Handle handle) {
    if (handle.is_null() || handle.index >= pool.issued()) {
        return UCS_ERR_INVALID_PARAM;
    }
    const auto &entry = pool[handle.index];
    return (entry.live && entry.gen == handle.generation) ? UCS_OK : UCS_ERR_NO_ELEM;
}

}  // namespace

struct TagMatcher::Impl {
    struct MaskClass {
        Tag         mask;
        BucketTable table;
        uint32_t    count      = 0;
        int32_t     active_pos = -1;

        explicit MaskClass(Tag m) : mask(m) { table.set_key_mask(m); }
    };

    struct UnexpectedIndex {
        Tag         mask      = kExactMask;
        BucketTable table;
        bool        active    = false;
        uint64_t    last_used = 0;
    };

    explicit Impl(const MatcherOptions &opts) : options(opts) {
        options.max_mask_classes       = std::min(options.max_mask_classes, kMaxMaskClasses);
        options.max_unexpected_indexes = std::min(options.max_unexpected_indexes,
                                                  kMaxUnexpectedIndexes);
        classes.emplace_back(kExactMask);
        unexpected_index[0].active = true;
    }

    /* ---- posted side ---------------------------------------------------- */

    auto posted_links() {
        return [this](uint32_t i) -> Links & { return posted[i].link; };
    }
    auto posted_key(Tag mask) const {
        return [this, mask](uint32_t i) { return posted[i].tag & mask; };
    }
    auto posted_seq() const {
        return [this](uint32_t i) { return posted[i].seq; };
    }

    /* Class for `mask`, creating or recycling one; kOverflowClass when all
     * class slots hold receives. May throw std::bad_alloc. */
    [[gnu::always_inline]] uint16_t class_for(Tag mask) {
        if (mask == kExactMask) {
            return 0;
        }
        uint16_t idle = kOverflowClass;
        for (size_t c = 1; c < classes.size(); ++c) {
            if (classes[c].mask == mask) {
                return static_cast<uint16_t>(c);
            }
            if ((classes[c].count == 0) && (idle == kOverflowClass)) {
                idle = static_cast<uint16_t>(c);
            }
        }
        if (classes.size() <= options.max_mask_classes) {
            /* `active` must hold every masked class without reallocating:
             * activate() runs after the point where failure is allowed. */
            active.reserve(classes.size());
            classes.emplace_back(mask);
            return static_cast<uint16_t>(classes.size() - 1);
        }
        if (idle != kOverflowClass) {
            classes[idle].mask = mask;
            classes[idle].table.clear();
            classes[idle].table.set_key_mask(mask);
        }
        return idle;
    }

    void activate(uint16_t cls) {
        classes[cls].active_pos = static_cast<int32_t>(active.size());
        active.push_back(cls); /* capacity reserved up front */
    }

    void deactivate(uint16_t cls) {
        const int32_t pos  = classes[cls].active_pos;
        const uint16_t last = active.back();
        active[pos]                   = last;
        classes[last].active_pos      = pos;
        active.pop_back();
        classes[cls].active_pos = -1;
    }

    [[gnu::always_inline]] PostResult enqueue_posted(Tag tag, Tag mask, void *ctx) {
        PostResult result;
        if (posted.live() >= options.max_posted) {
            result.status = UCS_ERR_EXCEEDS_LIMIT;
            return result;
        }
        uint16_t cls;
        uint32_t idx;
        try {
            cls = class_for(mask);
            if (cls != kOverflowClass) {
                classes[cls].table.reserve_one(posted_key(classes[cls].mask));
            }
            idx = posted.allocate();
        } catch (const std::bad_alloc &) {
            result.status = UCS_ERR_NO_MEMORY;
            return result;
        }
        if (cls == kOverflowClass) {
            try {
                if (overflow_masks.size() <= idx) {
                    overflow_masks.resize(posted.issued());
                }
            } catch (const std::bad_alloc &) {
                posted.release(idx);
                result.status = UCS_ERR_NO_MEMORY;
                return result;
            }
            overflow_masks[idx] = mask;
        }

        PostedEntry &e = posted[idx];
        e.tag          = tag;
        e.ctx          = ctx;
        e.seq          = posted_seq_next++;
        e.cls          = cls;
        e.live         = 1;
        if (cls == kOverflowClass) {
            ring_push_back(overflow_head, idx, posted_links());
        } else {
            MaskClass &c = classes[cls];
            keyed_push(c.table, tag & c.mask, idx, posted_key(c.mask), posted_links());
            if ((c.count++ == 0) && (cls != 0)) {
                activate(cls);
            }
        }
        result.handle = Handle{idx, e.gen};
        return result;
    }

    [[gnu::always_inline]] void remove_posted(uint32_t idx, BucketTable::Ref slot = nullptr) {
        PostedEntry &e = posted[idx];
        if (e.cls == kOverflowClass) {
            overflow_head = ring_remove(overflow_head, idx, posted_links());
        } else {
            MaskClass &c = classes[e.cls];
            keyed_remove(c.table, e.tag & c.mask, idx, posted_key(c.mask), posted_links(),
                         posted_seq(), slot);
            if ((--c.count == 0) && (e.cls != 0)) {
                deactivate(e.cls);
            }
        }
        e.live = 0;
        e.gen  = next_generation(e.gen);
        posted.release(idx);
    }

    /* Earliest-posted receive matching `tag`, removed; false if none. With
     * only exact receives posted (the common case) this is one lookup;
     * anything else takes the general path, kept out of line so the exact
     * path stays small. */
    [[gnu::always_inline]] bool take_posted(Tag tag, Receive *recv) {
        if (__builtin_expect(!active.empty() || (overflow_head != kNoIndex), 0)) {
            return take_posted_any(tag, recv);
        }
        if (classes[0].count == 0) {
            return false;
        }
        BucketTable::Ref slot = classes[0].table.find(tag, posted_key(kExactMask));
        if (slot == nullptr) {
            return false;
        }
        const uint32_t     idx = *slot;
        const PostedEntry &e   = posted[idx];
        *recv                  = Receive{e.tag, kExactMask, e.ctx};
        remove_posted(idx, slot);
        ++stats.posted_matches;
        return true;
    }

    /* take_posted() with masked classes or the overflow ring in use: the
     * heads of every class are merged by posting sequence. */
    [[gnu::noinline]] bool take_posted_any(Tag tag, Receive *recv) {
        uint32_t         best      = kNoIndex;
        uint64_t         best_seq  = UINT64_MAX;
        BucketTable::Ref best_slot = nullptr;
        /* One lookup per class in use: start every home-group load first so
         * the misses overlap instead of queueing behind each other. */
        const bool     exact      = classes[0].count != 0;
        const uint64_t exact_hash = classes[0].table.hash(tag);
        if (exact) {
            classes[0].table.prefetch(exact_hash);
        }
        uint64_t     hashes[kPrefetchClasses];
        const size_t nprefetch = std::min(active.size(), kPrefetchClasses);
        for (size_t i = 0; i < nprefetch; ++i) {
            const MaskClass &c = classes[active[i]];
            hashes[i]          = c.table.hash(tag & c.mask);
            c.table.prefetch(hashes[i]);
        }
        if (exact) {
            best_slot = classes[0].table.find(tag, exact_hash, posted_key(kExactMask));
            if (best_slot != nullptr) {
                best     = *best_slot;
                best_seq = posted[best].seq;
            }
        }
        for (size_t i = 0; i < active.size(); ++i) {
            MaskClass       &c    = classes[active[i]];
            const Tag        key  = tag & c.mask;
            const uint64_t   h    = (i < nprefetch) ? hashes[i] : c.table.hash(key);
            BucketTable::Ref slot = c.table.find(key, h, posted_key(c.mask));
            if ((slot != nullptr) && (posted[*slot].seq < best_seq)) {
                best      = *slot;
                best_seq  = posted[best].seq;
                best_slot = slot;
            }
        }
        if (overflow_head != kNoIndex) {
            ++stats.fallback_scans;
            uint32_t i = overflow_head;
            do {
                const PostedEntry &e = posted[i];
                if (e.seq > best_seq) {
                    break; /* ring is in posting order: nothing older remains */
                }
                if (tag_matches(tag, e.tag, mask_of(i))) {
                    best      = i;
                    best_slot = nullptr;
                    break;
                }
                i = e.link.next;
            } while (i != overflow_head);
        }
        if (best == kNoIndex) {
            return false;
        }
        const PostedEntry &e = posted[best];
        *recv = Receive{e.tag, mask_of(best), e.ctx};
        remove_posted(best, best_slot);
        ++stats.posted_matches;
        return true;
    }

    /* Overflow receives have no class to hold their mask: it lives in a side
     * array indexed like the pool, allocated only once overflow happens. */
    Tag mask_of(uint32_t idx) const {
        const PostedEntry &e = posted[idx];
        return (e.cls == kOverflowClass) ? overflow_masks[idx] : classes[e.cls].mask;
    }

    /* ---- unexpected side ------------------------------------------------ */

    auto unexpected_links(uint32_t slot) {
        return [this, slot](uint32_t i) -> Links & { return unexpected[i].index[slot]; };
    }
    auto order_links() {
        return [this](uint32_t i) -> Links & { return unexpected[i].order; };
    }
    auto unexpected_key(Tag mask) const {
        return [this, mask](uint32_t i) { return unexpected[i].tag & mask; };
    }
    auto unexpected_seq() const {
        return [this](uint32_t i) { return unexpected[i].seq; };
    }

    uint32_t index_slots() const { return 1 + options.max_unexpected_indexes; }

    ArriveResult enqueue_unexpected(Tag tag, uint64_t cookie) {
        ArriveResult result;
        if (unexpected.live() >= options.max_unexpected) {
            result.status = UCS_ERR_EXCEEDS_LIMIT;
            return result;
        }
        uint32_t idx;
        try {
            for (uint32_t s = 0; s < index_slots(); ++s) {
                if (unexpected_index[s].active) {
                    unexpected_index[s].table.reserve_one(unexpected_key(unexpected_index[s].mask));
                }
            }
            idx = unexpected.allocate();
        } catch (const std::bad_alloc &) {
            result.status = UCS_ERR_NO_MEMORY;
            return result;
        }
        UnexpectedEntry &e = unexpected[idx];
        e.tag              = tag;
        e.cookie           = cookie;
        e.seq              = unexpected_seq_next++;
        e.live             = 1;
        ring_push_back(order_head, idx, order_links());
        for (uint32_t s = 0; s < index_slots(); ++s) {
            UnexpectedIndex &ui = unexpected_index[s];
            if (ui.active) {
                keyed_push(ui.table, tag & ui.mask, idx, unexpected_key(ui.mask),
                           unexpected_links(s));
            }
        }
        result.handle = Handle{idx, e.gen};
        return result;
    }

    void remove_unexpected(uint32_t idx) {
        UnexpectedEntry &e = unexpected[idx];
        order_head         = ring_remove(order_head, idx, order_links());
        for (uint32_t s = 0; s < index_slots(); ++s) {
            UnexpectedIndex &ui = unexpected_index[s];
            if (ui.active) {
                keyed_remove(ui.table, e.tag & ui.mask, idx, unexpected_key(ui.mask),
                             unexpected_links(s), unexpected_seq());
            }
        }
        e.live = 0;
        e.gen  = next_generation(e.gen);
        unexpected.release(idx);
    }

    /* Builds a keyed index for `mask` in slot `s` over every queued message,
     * in arrival order. False (slot left inactive) if memory ran out. */
    bool build_index(uint32_t s, Tag mask) {
        UnexpectedIndex &ui = unexpected_index[s];
        ui.active           = false;
        ui.mask             = mask;
        ui.table.clear();
        ui.table.set_key_mask(mask);
        try {
            uint32_t i = order_head;
            do {
                ui.table.reserve_one(unexpected_key(mask));
                keyed_push(ui.table, unexpected[i].tag & mask, i, unexpected_key(mask),
                           unexpected_links(s));
                i = unexpected[i].order.next;
            } while (i != order_head);
        } catch (const std::bad_alloc &) {
            ui.table.reset();
            return false;
        }
        ui.active    = true;
        ui.last_used = query_clock;
        ++stats.unexpected_index_builds;
        return true;
    }

    /* A slot to build a new index in: an idle one, or one unused for a while. */
    uint32_t pick_index_slot() const {
        uint32_t oldest = 0;
        for (uint32_t s = 1; s < index_slots(); ++s) {
            const UnexpectedIndex &ui = unexpected_index[s];
            if (!ui.active) {
                return s;
            }
            if ((oldest == 0) || (ui.last_used < unexpected_index[oldest].last_used)) {
                oldest = s;
            }
        }
        if ((oldest != 0) &&
            (query_clock - unexpected_index[oldest].last_used > kStaleIndexQueries)) {
            return oldest;
        }
        return 0;
    }

    /* Earliest-arrived message matching (tag, mask), or kNoIndex. */
    uint32_t find_unexpected(Tag tag, Tag mask) {
        if (order_head == kNoIndex) {
            return kNoIndex;
        }
        if (mask == 0) {
            return order_head;
        }
        ++query_clock;
        for (uint32_t s = 0; s < index_slots(); ++s) {
            UnexpectedIndex &ui = unexpected_index[s];
            if (ui.active && (ui.mask == mask)) {
                return lookup_index(s, tag);
            }
        }
        if (unexpected.live() >= options.unexpected_index_threshold) {
            const uint32_t s = pick_index_slot();
            if ((s != 0) && build_index(s, mask)) {
                return lookup_index(s, tag);
            }
        }
        ++stats.fallback_scans;
        uint32_t i = order_head;
        do {
            if (tag_matches(unexpected[i].tag, tag, mask)) {
                return i;
            }
            i = unexpected[i].order.next;
        } while (i != order_head);
        return kNoIndex;
    }

    uint32_t lookup_index(uint32_t s, Tag tag) {
        UnexpectedIndex &ui = unexpected_index[s];
        ui.last_used        = query_clock;
        BucketTable::Ref slot = ui.table.find(tag & ui.mask, unexpected_key(ui.mask));
        return slot ? *slot : kNoIndex;
    }

    Message message_of(uint32_t idx) const {
        const UnexpectedEntry &e = unexpected[idx];
        return Message{e.tag, e.cookie, Handle{idx, e.gen}};
    }

    /* ---- bulk removal ---------------------------------------------------- */

    std::vector<void *> remove_posted_matching(Tag tag, Tag mask) {
        std::vector<std::pair<uint64_t, uint32_t>> victims;
        for (uint32_t i = 0; i < posted.issued(); ++i) {
            const PostedEntry &e = posted[i];
            if (e.live && tag_matches(e.tag, tag, mask)) {
                victims.emplace_back(e.seq, i);
            }
        }
        std::sort(victims.begin(), victims.end());
        std::vector<void *> ctxs;
        ctxs.reserve(victims.size());
        for (const auto &v : victims) {
            ctxs.push_back(posted[v.second].ctx);
            remove_posted(v.second);
        }
        return ctxs;
    }

    size_t memory_bytes() const {
        size_t bytes = sizeof(*this) + posted.memory_bytes() + unexpected.memory_bytes() +
                       classes.capacity() * sizeof(MaskClass) +
                       active.capacity() * sizeof(uint16_t) +
                       overflow_masks.capacity() * sizeof(Tag);
        for (const MaskClass &c : classes) {
            bytes += c.table.memory_bytes();
        }
        for (const UnexpectedIndex &ui : unexpected_index) {
            bytes += ui.table.memory_bytes();
        }
        return bytes;
    }

    MatcherOptions options;
    MatcherStats   stats;

    SlotPool<PostedEntry>  posted;
    std::vector<MaskClass> classes;
    std::vector<uint16_t>  active;
    uint32_t               overflow_head   = kNoIndex;
    std::vector<Tag>       overflow_masks;
    uint64_t               posted_seq_next = 0;

    SlotPool<UnexpectedEntry>                                  unexpected;
    std::array<UnexpectedIndex, kMaxUnexpectedIndexes + 1>     unexpected_index;
    uint32_t                                                   order_head          = kNoIndex;
    uint64_t                                                   unexpected_seq_next = 0;
    uint64_t                                                   query_clock         = 0;
};

TagMatcher::TagMatcher(const MatcherOptions &options) : impl_(std::make_unique<Impl>(options)) {}
TagMatcher::~TagMatcher()                                 = default;
TagMatcher::TagMatcher(TagMatcher &&) noexcept            = default;
TagMatcher &TagMatcher::operator=(TagMatcher &&) noexcept = default;

PostResult TagMatcher::post(Tag tag, Tag mask, void *ctx) {
    if (impl_->order_head == kNoIndex) {
        return impl_->enqueue_posted(tag, mask, ctx);
    }
    const uint32_t found = impl_->find_unexpected(tag, mask);
    if (found == kNoIndex) {
        return impl_->enqueue_posted(tag, mask, ctx);
    }
    PostResult result;
    result.matched = true;
    result.message = impl_->message_of(found);
    impl_->remove_unexpected(found);
    ++impl_->stats.unexpected_matches;
    return result;
}

PostResult TagMatcher::post_expected_only(Tag tag, Tag mask, void *ctx) {
    return impl_->enqueue_posted(tag, mask, ctx);
}

ArriveResult TagMatcher::arrive(Tag tag, uint64_t cookie) {
    ArriveResult result;
    if (impl_->take_posted(tag, &result.recv)) {
        result.matched = true;
        return result;
    }
    return impl_->enqueue_unexpected(tag, cookie);
}

ArriveResult TagMatcher::match_posted(Tag tag) {
    ArriveResult result;
    result.matched = impl_->take_posted(tag, &result.recv);
    return result;
}

ucs_status_t TagMatcher::cancel(RecvHandle handle, void **ctx) {
    const ucs_status_t status = check_handle(impl_->posted, handle);
    if (status != UCS_OK) {
        return status;
    }
    if (ctx != nullptr) {
        *ctx = impl_->posted[handle.index].ctx;
    }
    impl_->remove_posted(handle.index);
    return UCS_OK;
}

ucs_status_t TagMatcher::peek(Tag tag, Tag mask, Message *msg) {
    if (msg == nullptr) {
        return UCS_ERR_INVALID_PARAM;
    }
    const uint32_t found = impl_->find_unexpected(tag, mask);
    if (found == kNoIndex) {
        return UCS_ERR_NO_ELEM;
    }
    *msg = impl_->message_of(found);
    return UCS_OK;
}

ucs_status_t TagMatcher::claim(Tag tag, Tag mask, Message *msg) {
    const ucs_status_t status = peek(tag, mask, msg);
    if (status == UCS_OK) {
        impl_->remove_unexpected(msg->handle.index);
        ++impl_->stats.unexpected_matches;
    }
    return status;
}

ucs_status_t TagMatcher::take(MsgHandle handle, Message *msg) {
    const ucs_status_t status = check_handle(impl_->unexpected, handle);
    if (status != UCS_OK) {
        return status;
    }
    if (msg != nullptr) {
        *msg = impl_->message_of(handle.index);
    }
    impl_->remove_unexpected(handle.index);
    ++impl_->stats.unexpected_matches;
    return UCS_OK;
}

std::vector<void *> TagMatcher::remove_matching(Tag tag, Tag mask) {
    return impl_->remove_posted_matching(tag, mask);
}

std::vector<void *> TagMatcher::remove_all_posted() {
    return impl_->remove_posted_matching(0, 0);
}

std::vector<Message> TagMatcher::remove_all_unexpected() {
    std::vector<Message> msgs;
    msgs.reserve(impl_->unexpected.live());
    while (impl_->order_head != kNoIndex) {
        const uint32_t head = impl_->order_head;
        msgs.push_back(impl_->message_of(head));
        impl_->remove_unexpected(head);
    }
    return msgs;
}

size_t TagMatcher::posted_count() const { return impl_->posted.live(); }
size_t TagMatcher::unexpected_count() const { return impl_->unexpected.live(); }
size_t TagMatcher::memory_bytes() const { return impl_->memory_bytes(); }
const MatcherOptions &TagMatcher::options() const { return impl_->options; }

MatcherStats TagMatcher::stats() const {
    MatcherStats stats = impl_->stats;
    stats.mask_classes_in_use = static_cast<uint32_t>(impl_->active.size());
    return stats;
}

}  // namespace match
}  // namespace uct_tm
