/*
 * Software tag matcher: see tag_matcher.h for the contract.
 *
 * Posted side: one hash index per distinct mask (a "mask class"), from
 * `tag & mask` to a FIFO ring of receives with that key. The exact class lives
 * in the TagMatcher object itself (`exact_`, used by the inline fast path);
 * the others are here, in Impl. An arrival looks up every active class once;
 * the ring heads are the earliest candidates of their class and the lowest
 * posting sequence wins. Receives whose mask found no free class go to one
 * overflow ring scanned in order.
 *
 * Unexpected side: one arrival-ordered ring of all messages (mask 0 and the
 * fallback scan), plus up to 1 + kMaxUnexpectedIndexes keyed indexes (slot 0 =
 * exact tags, always on; the others built on demand for masks searched often).
 * Every message sits in every active index, each with its own ring links.
 */
#include "tag_matcher.h"

#include <algorithm>
#include <array>
#include <new>
#include <utility>

namespace uct_tm {
namespace match {

using detail::BucketTable;
using detail::FlatPool;
using detail::Links;
using detail::PostedEntry;

namespace {

constexpr uint32_t kMaxUnexpectedIndexes = 4;
constexpr uint32_t kMaxMaskClasses       = 1024;
constexpr uint16_t kOverflowClass        = UINT16_MAX;
/* An unexpected-side index unused for this many masked searches may be
 * recycled for another mask. */
constexpr uint64_t kStaleIndexQueries = 256;
/* Masked classes whose table lines an arrival prefetches together. */
constexpr size_t kPrefetchClasses = 8;
/* Arrivals of a batch whose lines are requested together. */
constexpr size_t kBatchWindow = 16;

struct UnexpectedEntry {
    Tag      tag;
    uint64_t cookie;
    uint64_t seq;
    uint32_t gen; /* odd while queued */
    uint32_t unused;
    Links    order;                             /* arrival ring; free list while free */
    Links    index[kMaxUnexpectedIndexes + 1]; /* one ring per keyed index */

    uint32_t &free_link() { return order.next; }
};

/* Appends `idx` at the tail of the circular list starting at `head`. */
template <typename LinksOf> void ring_push_back(uint32_t &head, uint32_t idx, const LinksOf &links) {
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
template <typename LinksOf> uint32_t ring_remove(uint32_t head, uint32_t idx, const LinksOf &links) {
    const Links l = links(idx);
    if (l.next == idx) {
        return kNoIndex;
    }
    links(l.prev).next = l.next;
    links(l.next).prev = l.prev;
    return (head == idx) ? l.next : head;
}

/* Appends `idx` to the FIFO ring of `key`; the table has room. */
template <typename KeyOf, typename LinksOf>
void keyed_push(BucketTable &table, Tag key, uint32_t idx, const KeyOf &key_of, const LinksOf &links) {
    bool             inserted;
    BucketTable::Ref head = table.find_or_insert(key, table.hash(key), key_of, idx, &inserted);
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
void keyed_remove(BucketTable &table, Tag key, uint32_t idx, const KeyOf &key_of,
                  const LinksOf &links, const SeqOf &seq_of, BucketTable::Ref slot = nullptr) {
    const Links l = links(idx);
    if (l.next == idx) {
        const BucketTable::Hash h = table.hash(key);
        table.erase(slot ? slot : table.find(key, h, key_of), h);
        return;
    }
    const bool is_head = seq_of(l.prev) > seq_of(idx);
    if (is_head && (slot == nullptr)) {
        slot = table.find(key, table.hash(key), key_of);
    }
    links(l.prev).next = l.next;
    links(l.next).prev = l.prev;
    if (is_head) {
        *slot = l.next;
    }
}

template <typename Pool> ucs_status_t check_handle(const Pool &pool, Handle handle) {
    if (handle.is_null() || handle.index >= pool.issued()) {
        return UCS_ERR_INVALID_PARAM;
    }
    const uint32_t gen = pool[handle.index].gen;
    return ((gen & 1) && (gen == handle.generation)) ? UCS_OK : UCS_ERR_NO_ELEM;
}

/* Key of a posted receive in a class with mask `mask`. */
struct PostedKey {
    const FlatPool<PostedEntry> *pool;
    Tag                          mask;
    Tag operator()(uint32_t i) const { return (*pool)[i].tag & mask; }
};

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
        classes.emplace_back(kExactMask); /* placeholder: class 0 is TagMatcher::exact_ */
        unexpected_index[0].active = true;
    }

    /* ---- posted side: masked classes ------------------------------------ */

    /* Class for a non-exact `mask`, creating or recycling one; kOverflowClass
     * when all class slots hold receives. May throw std::bad_alloc. */
    uint16_t class_for(Tag mask) {
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
        const int32_t  pos  = classes[cls].active_pos;
        const uint16_t last = active.back();
        active[pos]              = last;
        classes[last].active_pos = pos;
        active.pop_back();
        classes[cls].active_pos = -1;
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
        for (uint32_t s = 0; s < index_slots(); ++s) {
            UnexpectedIndex &ui = unexpected_index[s];
            if (ui.active && !ui.table.has_room() && !ui.table.grow(unexpected_key(ui.mask))) {
                result.status = UCS_ERR_NO_MEMORY;
                return result;
            }
        }
        if (!unexpected.reserve_one()) {
            result.status = UCS_ERR_NO_MEMORY;
            return result;
        }
        const uint32_t   idx = unexpected.take();
        UnexpectedEntry &e   = unexpected[idx];
        e.tag                = tag;
        e.cookie             = cookie;
        e.seq                = unexpected_seq_next++;
        e.gen += 1;
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
        e.gen += 1;
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
        uint32_t i = order_head;
        do {
            if (!ui.table.has_room() && !ui.table.grow(unexpected_key(mask))) {
                ui.table.reset();
                return false;
            }
            keyed_push(ui.table, unexpected[i].tag & mask, i, unexpected_key(mask),
                       unexpected_links(s));
            i = unexpected[i].order.next;
        } while (i != order_head);
        ui.active    = true;
        ui.last_used = query_clock;
        ++index_builds;
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
        ++fallback_scans;
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
        UnexpectedIndex &ui   = unexpected_index[s];
        ui.last_used          = query_clock;
        const Tag        key  = tag & ui.mask;
        BucketTable::Ref slot = ui.table.find(key, ui.table.hash(key), unexpected_key(ui.mask));
        return slot ? *slot : kNoIndex;
    }

    Message message_of(uint32_t idx) const {
        const UnexpectedEntry &e = unexpected[idx];
        return Message{e.tag, e.cookie, Handle{idx, e.gen}};
    }

    size_t memory_bytes() const {
        size_t bytes = sizeof(*this) + unexpected.memory_bytes() +
                       classes.capacity() * sizeof(MaskClass) +
                       active.capacity() * sizeof(uint16_t) + overflow_masks.capacity() * sizeof(Tag);
        for (const MaskClass &c : classes) {
            bytes += c.table.memory_bytes();
        }
        for (const UnexpectedIndex &ui : unexpected_index) {
            bytes += ui.table.memory_bytes();
        }
        return bytes;
    }

    MatcherOptions options;

    /* Posted side beyond the exact class. */
    std::vector<MaskClass> classes;
    std::vector<uint16_t>  active;
    uint32_t               overflow_head = kNoIndex;
    std::vector<Tag>       overflow_masks; /* by pool index, allocated once overflow happens */
    uint64_t               posted_cancelled = 0; /* left by cancel, cancel_matching, drain */

    /* Unexpected side. */
    FlatPool<UnexpectedEntry>                              unexpected;
    std::array<UnexpectedIndex, kMaxUnexpectedIndexes + 1> unexpected_index;
    uint32_t                                               order_head          = kNoIndex;
    uint64_t                                               unexpected_seq_next = 0;
    uint64_t                                               query_clock         = 0;

    uint64_t unexpected_matches = 0;
    uint64_t fallback_scans     = 0;
    uint64_t index_builds       = 0;
};

TagMatcher::TagMatcher(const MatcherOptions &options) : impl_(std::make_unique<Impl>(options)) {
    update_posted_room();
    staging_ = (options.staging_min_index_bytes == 0);
}
TagMatcher::~TagMatcher()                                 = default;
TagMatcher::TagMatcher(TagMatcher &&) noexcept            = default;
TagMatcher &TagMatcher::operator=(TagMatcher &&) noexcept = default;

void TagMatcher::update_posted_room() {
    posted_room_ = std::min(impl_->options.max_posted, posted_.capacity());
}

/* ---- posted side, general path ------------------------------------------- */

void TagMatcher::unstage_all() {
    while (stage_count_ != 0) {
        unstage_oldest();
    }
}

PostResult TagMatcher::post_general(Tag tag, Tag mask, void *ctx, bool check_unexpected) {
    unstage_all();
    if (check_unexpected && (unexpected_count_ != 0)) {
        Impl          &im    = *impl_;
        const uint32_t found = im.find_unexpected(tag, mask);
        if (found != kNoIndex) {
            PostResult result;
            result.matched = true;
            result.message = im.message_of(found);
            im.remove_unexpected(found);
            --unexpected_count_;
            ++im.unexpected_matches;
            return result;
        }
    }
    return enqueue_posted(tag, mask, ctx);
}

PostResult TagMatcher::enqueue_posted(Tag tag, Tag mask, void *ctx) {
    Impl      &im = *impl_;
    PostResult result;
    if (posted_.live() >= im.options.max_posted) {
        result.status = UCS_ERR_EXCEEDS_LIMIT;
        return result;
    }
    uint16_t cls = 0;
    if (mask != kExactMask) {
        try {
            cls = im.class_for(mask);
        } catch (const std::bad_alloc &) {
            result.status = UCS_ERR_NO_MEMORY;
            return result;
        }
    }
    if (cls != kOverflowClass) {
        BucketTable &table = (cls == 0) ? exact_ : im.classes[cls].table;
        if (!table.has_room() && !table.grow(PostedKey{&posted_, im.classes[cls].mask})) {
            result.status = UCS_ERR_NO_MEMORY;
            return result;
        }
        staging_ = exact_.memory_bytes() >= im.options.staging_min_index_bytes;
    }
    if (!posted_.reserve_one()) {
        result.status = UCS_ERR_NO_MEMORY;
        return result;
    }
    update_posted_room();
    if ((cls == kOverflowClass) && (im.overflow_masks.size() < posted_.capacity())) {
        try {
            im.overflow_masks.resize(posted_.capacity());
        } catch (const std::bad_alloc &) {
            result.status = UCS_ERR_NO_MEMORY;
            return result;
        }
    }

    const uint32_t idx = posted_.take();
    PostedEntry   &e   = posted_[idx];
    e.tag              = tag;
    e.ctx              = ctx;
    e.seq              = posted_seq_++;
    e.cls              = cls;
    e.gen += 1;
    const auto links = [this](uint32_t i) -> Links & { return posted_[i].link; };
    if (cls == 0) {
        keyed_push(exact_, tag, idx, exact_key(), links);
    } else if (cls == kOverflowClass) {
        im.overflow_masks[idx] = mask;
        ring_push_back(im.overflow_head, idx, links);
        ++masked_posted_;
    } else {
        Impl::MaskClass &c = im.classes[cls];
        keyed_push(c.table, tag & c.mask, idx, PostedKey{&posted_, c.mask}, links);
        if (c.count++ == 0) {
            im.activate(cls);
        }
        ++masked_posted_;
    }
    result.handle = Handle{idx, posted_[idx].gen};
    return result;
}

/* Removes a posted receive from its class. */
void TagMatcher::remove_posted(uint32_t idx) {
    Impl        &im    = *impl_;
    PostedEntry &e     = posted_[idx];
    const auto   links = [this](uint32_t i) -> Links & { return posted_[i].link; };
    const auto   seq   = [this](uint32_t i) { return posted_[i].seq; };
    if (e.cls == 0) {
        keyed_remove(exact_, e.tag, idx, exact_key(), links, seq);
    } else if (e.cls == kOverflowClass) {
        im.overflow_head = ring_remove(im.overflow_head, idx, links);
        --masked_posted_;
    } else {
        Impl::MaskClass &c = im.classes[e.cls];
        keyed_remove(c.table, e.tag & c.mask, idx, PostedKey{&posted_, c.mask}, links, seq);
        if (--c.count == 0) {
            im.deactivate(e.cls);
        }
        --masked_posted_;
    }
    e.gen += 1;
    posted_.release(idx);
}

/* The oldest receive of the overflow ring matching `tag` and posted before
 * `before` (a sequence number); kNoIndex if none. */
[[gnu::always_inline]] inline uint32_t TagMatcher::scan_overflow(Tag tag, uint64_t before) {
    Impl &im = *impl_;
    ++im.fallback_scans;
    uint32_t i = im.overflow_head;
    do {
        const PostedEntry &e = posted_[i];
        if (e.seq > before) {
            break; /* ring is in posting order: nothing older remains */
        }
        if (tag_matches(tag, e.tag, im.overflow_masks[i])) {
            return i;
        }
        i = e.link.next;
    } while (i != im.overflow_head);
    return kNoIndex;
}

/* Removes posted receive `idx`, the head of its key's ring at `slot` of
 * `table` (its hash `h`): unlinked without a lookup. */
[[gnu::always_inline]] inline void TagMatcher::unlink_head(uint32_t idx, BucketTable *table,
                                                           BucketTable::Ref  slot,
                                                           BucketTable::Hash h) {
    PostedEntry   &e    = posted_[idx];
    const uint32_t next = e.link.next;
    if (next == idx) {
        table->erase(slot, h);
    } else {
        const uint32_t prev     = e.link.prev;
        posted_[prev].link.next = next;
        posted_[next].link.prev = prev;
        *slot                   = next;
    }
    if (e.cls != 0) {
        Impl::MaskClass &c = impl_->classes[e.cls];
        if (--c.count == 0) {
            impl_->deactivate(e.cls);
        }
        --masked_posted_;
    }
    e.gen += 1;
    posted_.release(idx);
}

/* Earliest-posted receive matching `tag` over every class (nothing staged);
 * best.idx is kNoIndex if none. The heads of every class are merged by
 * posting sequence. */
[[gnu::always_inline]] inline TagMatcher::Found TagMatcher::find_posted_any(Tag tag) {
    Impl &im = *impl_;
    Found best;
    /* One lookup per class in use: start every home-group load first so the
     * misses overlap instead of queueing behind each other. */
    const bool              exact = exact_.size() != 0;
    const BucketTable::Hash eh    = exact_.hash_low(tag);
    if (exact) {
        exact_.prefetch(eh);
    }
    BucketTable::Hash hashes[kPrefetchClasses];
    const size_t      nprefetch = std::min(im.active.size(), kPrefetchClasses);
    for (size_t i = 0; i < nprefetch; ++i) {
        const Impl::MaskClass &c = im.classes[im.active[i]];
        hashes[i]                = c.table.hash(tag & c.mask);
        c.table.prefetch(hashes[i]);
    }
    if (exact) {
        const BucketTable::Ref slot = exact_.find_fast(tag, eh, exact_key());
        if (slot != nullptr) {
            best = Found{*slot, posted_[*slot].seq, kExactMask, &exact_, slot, eh};
        }
    }
    for (size_t i = 0; i < im.active.size(); ++i) {
        Impl::MaskClass        &c    = im.classes[im.active[i]];
        const Tag               key  = tag & c.mask;
        const BucketTable::Hash h    = (i < nprefetch) ? hashes[i] : c.table.hash(key);
        const BucketTable::Ref  slot = c.table.find_fast(key, h, PostedKey{&posted_, c.mask});
        if ((slot != nullptr) && (posted_[*slot].seq < best.seq)) {
            best = Found{*slot, posted_[*slot].seq, c.mask, &c.table, slot, h};
        }
    }
    if (im.overflow_head != kNoIndex) {
        const uint32_t i = scan_overflow(tag, best.seq);
        if (i != kNoIndex) {
            best = Found{i, posted_[i].seq, im.overflow_masks[i], nullptr, nullptr, {}};
        }
    }
    return best;
}

bool TagMatcher::take_posted_any(Tag tag, Receive *recv) {
    const Found best = find_posted_any(tag);
    if (best.idx == kNoIndex) {
        return false;
    }
    const PostedEntry &e = posted_[best.idx];
    *recv                = Receive{e.tag, best.mask, e.ctx};
    if (best.table == nullptr) {
        remove_posted(best.idx);
    } else {
        unlink_head(best.idx, best.table, best.slot, best.hash);
    }
    return true;
}

void *TagMatcher::peek_posted(Tag tag) {
    unstage_all();
    const Found best = find_posted_any(tag);
    return (best.idx == kNoIndex) ? nullptr : posted_[best.idx].ctx;
}

ArriveResult TagMatcher::arrive_general(Tag tag, uint64_t cookie, bool queue) {
    unstage_all();
    ArriveResult result;
    if (take_posted_any(tag, &result.recv)) {
        result.matched = true;
        return result;
    }
    return queue ? queue_unexpected(tag, cookie) : result;
}

ArriveResult TagMatcher::queue_unexpected(Tag tag, uint64_t cookie) {
    ArriveResult result = impl_->enqueue_unexpected(tag, cookie);
    unexpected_count_ += (result.status == UCS_OK);
    return result;
}

/* ---- batches ---------------------------------------------------------------- */

void TagMatcher::batch(const Tag *tags, const uint64_t *cookies, size_t n, ArriveResult *out) {
    for (size_t i = 0; i < n;) {
        if (masked_posted_ != 0) {
            /* masked classes in use: one at a time (each arrival already
             * prefetches all its class lookups together) */
            out[i] = arrive_general(tags[i], cookies ? cookies[i] : 0, cookies != nullptr);
            ++i;
            continue;
        }
        /* Exact only, and no arrival can change that: the hashes stay valid
         * (arrivals never grow the exact index). Stage 1 requests the index
         * lines, stage 2 the entries their first fingerprint match points at,
         * stage 3 matches in order, hitting the cache. */
        const size_t      k = std::min(kBatchWindow, n - i);
        BucketTable::Hash h[kBatchWindow];
        for (size_t j = 0; j < k; ++j) {
            h[j] = exact_.hash(tags[i + j]);
            exact_.prefetch(h[j]);
        }
        for (size_t j = 0; j < k; ++j) {
            const uint32_t c = exact_.candidate(h[j]);
            if (c != kNoIndex) {
                const char *p = reinterpret_cast<const char *>(&posted_[c]);
                __builtin_prefetch(p);
                __builtin_prefetch(p + sizeof(PostedEntry) - 1);
            }
        }
        for (size_t j = 0; j < k; ++j, ++i) {
            /* field by field: copying a whole result just built field by
             * field would stall on store forwarding */
            ArriveResult &o = out[i];
            o.status        = UCS_OK;
            o.handle        = Handle{};
            o.matched       = take_exact_any(tags[i], h[j], &o.recv);
            if (!o.matched) {
                o.recv = Receive{};
                if (cookies != nullptr) {
                    o = queue_unexpected(tags[i], cookies[i]);
                }
            }
        }
    }
}

void TagMatcher::arrive_batch(const Tag *tags, const uint64_t *cookies, size_t n, ArriveResult *out) {
    batch(tags, cookies, n, out);
}

void TagMatcher::match_posted_batch(const Tag *tags, size_t n, ArriveResult *out) {
    batch(tags, nullptr, n, out);
}

/* ---- cancel, probes --------------------------------------------------------- */

ucs_status_t TagMatcher::cancel(RecvHandle handle, void **ctx) {
    unstage_all();
    const ucs_status_t status = check_handle(posted_, handle);
    if (status != UCS_OK) {
        return status;
    }
    if (ctx != nullptr) {
        *ctx = posted_[handle.index].ctx;
    }
    remove_posted(handle.index);
    ++impl_->posted_cancelled;
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
        --unexpected_count_;
        ++impl_->unexpected_matches;
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
    --unexpected_count_;
    ++impl_->unexpected_matches;
    return UCS_OK;
}

/* ---- bulk removal ------------------------------------------------------------ */

std::vector<void *> TagMatcher::remove_matching(Tag tag, Tag mask) {
    unstage_all();
    std::vector<std::pair<uint64_t, uint32_t>> victims;
    for (uint32_t i = 0; i < posted_.issued(); ++i) {
        const PostedEntry &e = posted_[i];
        if ((e.gen & 1) && tag_matches(e.tag, tag, mask)) {
            victims.emplace_back(e.seq, i);
        }
    }
    std::sort(victims.begin(), victims.end());
    std::vector<void *> ctxs;
    ctxs.reserve(victims.size());
    for (const auto &v : victims) {
        ctxs.push_back(posted_[v.second].ctx);
        remove_posted(v.second);
    }
    impl_->posted_cancelled += victims.size();
    return ctxs;
}

std::vector<void *> TagMatcher::remove_all_posted() { return remove_matching(0, 0); }

std::vector<Message> TagMatcher::remove_all_unexpected() {
    Impl                &im = *impl_;
    std::vector<Message> msgs;
    msgs.reserve(im.unexpected.live());
    while (im.order_head != kNoIndex) {
        const uint32_t head = im.order_head;
        msgs.push_back(im.message_of(head));
        im.remove_unexpected(head);
    }
    unexpected_count_ = 0;
    return msgs;
}

/* ---- introspection ----------------------------------------------------------- */

size_t TagMatcher::memory_bytes() const {
    return sizeof(*this) + posted_.memory_bytes() + exact_.memory_bytes() + impl_->memory_bytes();
}

const MatcherOptions &TagMatcher::options() const { return impl_->options; }

MatcherStats TagMatcher::stats() const {
    const Impl  &im = *impl_;
    MatcherStats stats;
    /* every queued receive leaves by a match, a cancel or a drain */
    stats.posted_matches          = posted_seq_ - posted_.live() - im.posted_cancelled;
    stats.unexpected_matches      = im.unexpected_matches;
    stats.fallback_scans          = im.fallback_scans;
    stats.unexpected_index_builds = im.index_builds;
    stats.mask_classes_in_use     = static_cast<uint32_t>(im.active.size());
    return stats;
}

}  // namespace match
}  // namespace uct_tm
