/*
 * BucketTable: hash table mapping a 64-bit key to the index of the first
 * entry of that key's FIFO list (the entries live in a SlotPool; the table
 * never stores keys, it asks `key_of(index)` for the head's key).
 *
 * Layout: groups of one cache line each, 16 control bytes then 12 32-bit
 * heads. A control byte is kEmpty or 7 bits of the key's hash; a lookup
 * compares a whole group's control bytes at once (SSE2) and reads an entry only
 * on a 7-bit match, so one lookup touches one table line (plus, on a match,
 * the entry it returns). Control byte 12 counts keys that overflowed this full
 * group into the next ones (F14-style): a lookup stops at the first group of
 * its probe whose count is 0, an erase decrements the counts along the
 * erased key's probe, so there are no tombstones and no cleanup passes. Counts
 * saturate at 255 (then stay, costing only longer probes, until a rehash).
 *
 * Memory: at most 5/8 full, so 8.5-17 bytes per distinct key. (Fuller tables
 * suffer under churn at constant depth: keys displaced from a full home group
 * never move back, so at 3/4 a fifth of the operations probed a second group,
 * and at 7/8 probes grew to 2-30 groups.)
 *
 * Locality: the 2 lowest "free" bits of a key (the lowest bits the class mask
 * lets through) go into the control byte, the rest picks the group. So 4
 * consecutive keys (a message sequence, a run of ranks) share one group with
 * distinct control bytes, and consecutive runs of 4 take consecutive groups
 * within a 64-group block: a dense sequence walks the table in address order,
 * which the hardware prefetcher follows, while keys differing anywhere else
 * spread evenly (see hash_run()).
 *
 * Failure: growth reports false (table unchanged) instead of throwing.
 */
#ifndef UCT_TM_MATCH_BUCKET_TABLE_H_
#define UCT_TM_MATCH_BUCKET_TABLE_H_

#include "table_allocator.h"

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <utility>

#if defined(__SSE2__)
#include <emmintrin.h>
#endif

namespace uct_tm {
namespace match {
namespace detail {

inline constexpr size_t kGroupSlots = 12;

/* Index of the lowest set bit of a non-zero slot mask (unsigned: no sign
 * extension on the way to an address). */
inline unsigned lowest(uint32_t m) { return static_cast<unsigned>(__builtin_ctz(m)); }
inline constexpr int8_t kEmptyCtrl  = -128;

struct alignas(64) TableGroup {
    int8_t   ctrl[16]; /* [0, 12): slots; [12]: overflow count (unsigned); [13, 16): 0 */
    uint32_t head[kGroupSlots];

    uint8_t overflow() const { return static_cast<uint8_t>(ctrl[kGroupSlots]); }
    void    bump_overflow() {
        if (overflow() != 255) {
            ctrl[kGroupSlots] = static_cast<int8_t>(overflow() + 1);
        }
    }
    void unbump_overflow() {
        if (overflow() != 255) {
            ctrl[kGroupSlots] = static_cast<int8_t>(overflow() - 1);
        }
    }

#if defined(__SSE2__)
    using Want = __m128i;
    /* Broadcast of a control byte. (Spelled out: GCC 12 may build
     * _mm_set1_epi8 of a byte through a 1-byte stack store and a 4-byte
     * load, a store-forwarding stall of ~15 cycles on every lookup.) */
    static Want want(int8_t value) {
        const uint32_t b = static_cast<uint8_t>(value) * 0x01010101u;
        return _mm_shuffle_epi32(_mm_cvtsi32_si128(static_cast<int>(b)), 0);
    }
    using Ctrl = __m128i;
    Ctrl        load() const { return _mm_load_si128(reinterpret_cast<const __m128i *>(ctrl)); }
    static uint32_t match(Ctrl c, Want w) {
        return static_cast<uint32_t>(_mm_movemask_epi8(_mm_cmpeq_epi8(c, w))) & 0xfff;
    }
    static uint32_t empties(Ctrl c) { return static_cast<uint32_t>(_mm_movemask_epi8(c)) & 0xfff; }
    /* `c` with byte i replaced by the byte of `value`. */
    static __m128i with_byte(__m128i c, unsigned i, Want value) {
        alignas(16) static constexpr int8_t kLane[32] = {0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0,
                                                         0, 0, 0, 0, 0, -1};
        const __m128i lane = _mm_loadu_si128(reinterpret_cast<const __m128i *>(&kLane[16 - i]));
        return _mm_or_si128(_mm_andnot_si128(lane, c), _mm_and_si128(lane, value));
    }
    /* Stores `c` with byte i replaced by the byte of `value`. */
    void store_ctrl(Ctrl c, unsigned i, Want value) {
        _mm_store_si128(reinterpret_cast<__m128i *>(ctrl), with_byte(c, i, value));
    }
    /* Slots whose control byte equals `w`. */
    uint32_t    match(Want w) const {
        return static_cast<uint32_t>(_mm_movemask_epi8(_mm_cmpeq_epi8(load(), w))) & 0xfff;
    }
    /* Empty slots: the only control value with the sign bit set. */
    uint32_t empties() const { return static_cast<uint32_t>(_mm_movemask_epi8(load())) & 0xfff; }
    /* Writes one control byte as a whole-group store: the next lookup loads
     * the group with one 16-byte load, which a 1-byte store could not forward
     * to (a pipeline stall on every operation of a hot group). */
    void set_ctrl(unsigned i, Want value) { store_ctrl(load(), i, value); }
    /* Bytes of a 16-byte aligned array equal to `value`, one bit each. */
    static uint32_t match16(const int8_t *bytes, int8_t value) {
        const __m128i v = _mm_load_si128(reinterpret_cast<const __m128i *>(bytes));
        return static_cast<uint32_t>(_mm_movemask_epi8(_mm_cmpeq_epi8(v, want(value))));
    }
    /* bytes[i] = value as one 16-byte store, so that match16() forwards from it. */
    static void set16(int8_t *bytes, unsigned i, int8_t value) {
        __m128i *const v = reinterpret_cast<__m128i *>(bytes);
        _mm_store_si128(v, with_byte(_mm_load_si128(v), i, want(value)));
    }
    void set_ctrl(unsigned i, int8_t value) { set_ctrl(i, want(value)); }
#else
    using Want = int8_t;
    using Ctrl = const int8_t *;
    static Want want(int8_t value) { return value; }
    Ctrl        load() const { return ctrl; }
    static uint32_t match(Ctrl c, Want w) {
        uint32_t m = 0;
        for (unsigned i = 0; i < kGroupSlots; ++i) {
            m |= static_cast<uint32_t>(c[i] == w) << i;
        }
        return m;
    }
    static uint32_t empties(Ctrl c) { return match(c, kEmptyCtrl); }
    void            store_ctrl(Ctrl, unsigned i, Want value) { ctrl[i] = value; }
    static uint32_t match16(const int8_t *bytes, int8_t value) {
        uint32_t m = 0;
        for (unsigned i = 0; i < 16; ++i) {
            m |= static_cast<uint32_t>(bytes[i] == value) << i;
        }
        return m;
    }
    static void set16(int8_t *bytes, unsigned i, int8_t value) { bytes[i] = value; }
    uint32_t    match(Want w) const {
        uint32_t m = 0;
        for (unsigned i = 0; i < kGroupSlots; ++i) {
            m |= static_cast<uint32_t>(ctrl[i] == w) << i;
        }
        return m;
    }
    uint32_t empties() const { return match(kEmptyCtrl); }
    void     set_ctrl(unsigned i, int8_t value) { ctrl[i] = value; }
#endif
};
static_assert(sizeof(TableGroup) == 64, "a table group is one cache line");

/* Read-only group of a table that has never allocated: lookups miss, and
 * max_size 0 sends every insert through grow() first. */
alignas(64) inline constexpr TableGroup kNoGroups = {
        {kEmptyCtrl, kEmptyCtrl, kEmptyCtrl, kEmptyCtrl, kEmptyCtrl, kEmptyCtrl, kEmptyCtrl,
         kEmptyCtrl, kEmptyCtrl, kEmptyCtrl, kEmptyCtrl, kEmptyCtrl, 0, 0, 0, 0},
        {}};

class BucketTable {
  public:
    /* Reference to a key's head index inside the table; valid until the
     * next insert, erase or growth. */
    using Ref = uint32_t *;

    /* Where a key lives: its home group and its control byte. Valid until
     * the table grows (or is moved). */
    struct Hash {
        TableGroup *home;
        int8_t      ctrl;
    };

    BucketTable() = default;
    ~BucketTable() { release(); }
    BucketTable(BucketTable &&o) noexcept { swap(o); }
    BucketTable &operator=(BucketTable &&o) noexcept {
        BucketTable tmp(std::move(o));
        swap(tmp);
        return *this;
    }
    BucketTable(const BucketTable &)            = delete;
    BucketTable &operator=(const BucketTable &) = delete;

    /* Declares which bits keys can have (the class mask), so the locality
     * bits are the lowest of those. Only while the table is empty. */
    void set_key_mask(uint64_t mask) {
        shift_      = (mask == 0) ? 0 : static_cast<uint8_t>(__builtin_ctzll(mask));
        rest_shift_ = static_cast<uint8_t>((shift_ + 2 > 63) ? 63 : shift_ + 2);
    }

    size_t size() const { return size_; }
    /* True when one more key fits without growing. */
    bool   has_room() const { return size_ < max_size_; }
    /* Keys it holds before it must grow. */
    size_t max_size() const { return max_size_; }
    size_t memory_bytes() const { return allocated() ? array_bytes(groups_bytes(group_mask_ + 1)) : 0; }

    /* hash() of a table whose keys may have bit 0 set (the exact class):
     * the same function with the shifts known. */
    Hash hash_low(uint64_t key) const { return hash_run(key >> 2, key & 3); }

    Hash hash(uint64_t key) const { return hash_run(key >> rest_shift_, (key >> shift_) & 3); }

    /* Starts loading a key's home group, so that several independent lookups
     * overlap their cache misses. (Always inline: GCC 12 finds a wrapper of
     * __builtin_prefetch free of side effects and drops calls to it.) */
    [[gnu::always_inline]] void prefetch(Hash h) const { __builtin_prefetch(h.home); }

    /* Head index of the first slot on `h`'s home group whose control byte
     * matches, or kNoHead: a guess (the key is not compared) for prefetching. */
    uint32_t candidate(Hash h) const {
        const TableGroup &g = *h.home;
        const uint32_t    m = g.match(TableGroup::want(h.ctrl));
        return (m != 0) ? g.head[lowest(m)] : kNoHead;
    }

    /* find() for the common case, inline: the key is the first fingerprint
     * match in its home group, or absent from a home group nothing
     * overflowed from. Anything else takes the full probe. */
    template <typename KeyOf>
    [[gnu::always_inline]] Ref find_fast(uint64_t key, Hash h, const KeyOf &key_of) const {
        TableGroup &grp = *h.home;
        uint32_t    m   = grp.match(TableGroup::want(h.ctrl));
        if (__builtin_expect(m != 0, 1)) {
            const Ref ref = &grp.head[lowest(m)];
            if (__builtin_expect(key_of(*ref) == key, 1)) {
                return ref;
            }
            m &= m - 1;
        }
        if (__builtin_expect((m | grp.overflow()) == 0, 1)) {
            return nullptr;
        }
        return find(key, h, key_of);
    }

    struct Found {
        Ref  ref;
        bool inserted;
    };

    /* find_or_insert() for the common case, inline: no fingerprint match and
     * no overflow in the home group, which has an empty slot. has_room()
     * must be true. */
    template <typename KeyOf>
    [[gnu::always_inline]] Found find_or_insert_fast(uint64_t key, Hash h, const KeyOf &key_of,
                                                     uint32_t head) {
        TableGroup                  &grp  = *h.home;
        const TableGroup::Want       want = TableGroup::want(h.ctrl);
        const TableGroup::Ctrl       c    = grp.load();
        const uint32_t               e    = TableGroup::empties(c);
        if (__builtin_expect(((TableGroup::match(c, want) | grp.overflow()) == 0) & (e != 0), 1)) {
            const unsigned i = lowest(e);
            grp.store_ctrl(c, i, want);
            grp.head[i] = head;
            ++size_;
            return Found{&grp.head[i], true};
        }
        Found found;
        found.ref = find_or_insert(key, h, key_of, head, &found.inserted);
        return found;
    }

    /* Head of `key` (whose hash is `h`), or nullptr. */
    template <typename KeyOf> [[gnu::noinline]] Ref find(uint64_t key, Hash h, const KeyOf &key_of) const {
        const TableGroup::Want want = TableGroup::want(h.ctrl);
        /* A probe visits every group at most once (in a small table every
         * group may have overflowed). */
        for (size_t g = index_of(h.home), left = group_mask_;; g = next(g, h), --left) {
            TableGroup &grp = groups_[g];
            for (uint32_t m = grp.match(want); m != 0; m &= m - 1) {
                const Ref ref = &grp.head[lowest(m)];
                if (key_of(*ref) == key) {
                    return ref;
                }
            }
            if (__builtin_expect(grp.overflow() == 0, 1) || (left == 0)) {
                return nullptr;
            }
        }
    }

    /* Head of `key`; if absent, inserts (key -> head) and sets *inserted.
     * has_room() must be true. */
    template <typename KeyOf>
    [[gnu::noinline]] Ref find_or_insert(uint64_t key, Hash h, const KeyOf &key_of, uint32_t head,
                                         bool *inserted) {
        const TableGroup::Want want = TableGroup::want(h.ctrl);
        TableGroup            &grp  = *h.home;
        for (uint32_t m = grp.match(want); m != 0; m &= m - 1) {
            const Ref ref = &grp.head[lowest(m)];
            if (key_of(*ref) == key) {
                *inserted = false;
                return ref;
            }
        }
        if (__builtin_expect((grp.overflow() != 0) && (group_mask_ != 0), 0)) {
            const Ref ref = find(key, Hash{&groups_[next(index_of(h.home), h)], h.ctrl}, key_of);
            if (ref != nullptr) {
                *inserted = false;
                return ref;
            }
        }
        *inserted = true;
        return insert(h, head, want);
    }

    /* Inserts a key known to be absent. has_room() must be true. */
    Ref insert(Hash h, uint32_t head) { return insert(h, head, TableGroup::want(h.ctrl)); }

    /* Removes the key at `ref`, whose hash is `h`. */
    void erase(Ref ref, Hash h) {
        TableGroup *const grp = group_of(ref);
        grp->set_ctrl(static_cast<unsigned>(ref - grp->head), kEmptyCtrl);
        --size_;
        if (__builtin_expect(grp != h.home, 0)) {
            /* It overflowed from its home group: undo the counts on its way. */
            for (size_t g = index_of(h.home); &groups_[g] != grp; g = next(g, h)) {
                groups_[g].unbump_overflow();
            }
        }
    }

    /* Doubles the capacity (or allocates the first group), reinserting every
     * key; false (table unchanged) when memory runs out. */
    template <typename KeyOf> bool grow(const KeyOf &key_of) {
        const size_t ngroups = allocated() ? 2 * (group_mask_ + 1) : 1;
        BucketTable  bigger;
        if (!bigger.allocate(ngroups)) {
            return false;
        }
        bigger.shift_      = shift_;
        bigger.rest_shift_ = rest_shift_;
        if (allocated()) {
            for (size_t g = 0; g <= group_mask_; ++g) {
                const TableGroup &grp = groups_[g];
                for (uint32_t m = ~grp.empties() & 0xfff; m != 0; m &= m - 1) {
                    const uint32_t head = grp.head[lowest(m)];
                    bigger.insert(bigger.hash(key_of(head)), head);
                }
            }
        }
        swap(bigger);
        return true;
    }

    /* Forgets every key; keeps the capacity. */
    void clear() {
        if (allocated()) {
            for (size_t g = 0; g <= group_mask_; ++g) {
                init_group(groups_[g]);
            }
        }
        size_ = 0;
    }

    /* Forgets every key and frees the groups. */
    void reset() {
        BucketTable empty;
        empty.shift_      = shift_;
        empty.rest_shift_ = rest_shift_;
        swap(empty);
    }

  private:
    static constexpr uint32_t kNoHead = UINT32_MAX;
    /* Consecutive runs of 4 keys of one block go to consecutive groups. */
    static constexpr unsigned kBlockBits = 6;

    /* `run`: the key without its 2 locality bits `local`. The block (run
     * without its low kBlockBits) is mixed by a 64x64->128-bit multiply
     * folded to 64 bits: structured keys (ranks in high bits, strides,
     * multiples of the golden ratio) spread like random ones, and
     * consecutive blocks stay evenly spread. Its top bits pick the block's
     * first group and 5 control bits; the run's low bits add an offset, so a
     * dense sequence walks one 4 KiB page of groups in order (the hardware
     * prefetcher follows). */
    Hash hash_run(uint64_t run, uint64_t local) const {
        const __uint128_t p   = static_cast<__uint128_t>(run >> kBlockBits) * 0x9e3779b97f4a7c15ULL;
        const uint64_t    top = (static_cast<uint64_t>(p) ^ static_cast<uint64_t>(p >> 64)) >> top_shift_;
        const size_t group = ((top >> 5) + (run & ((1u << kBlockBits) - 1))) & group_mask_;
        return Hash{&groups_[group], static_cast<int8_t>(((top & 31) << 2) | local)};
    }

    static size_t groups_bytes(size_t n) { return n * sizeof(TableGroup); }
    static void   init_group(TableGroup &g) {
        std::memset(g.ctrl, kEmptyCtrl, kGroupSlots);
        std::memset(g.ctrl + kGroupSlots, 0, sizeof(g.ctrl) - kGroupSlots);
    }
    static TableGroup *group_of(Ref ref) {
        return reinterpret_cast<TableGroup *>(reinterpret_cast<uintptr_t>(ref) &
                                              ~uintptr_t{sizeof(TableGroup) - 1});
    }

    bool   allocated() const { return groups_ != &kNoGroups; }
    size_t index_of(const TableGroup *g) const { return static_cast<size_t>(g - groups_); }

    /* Next group of `h`'s probe: double hashing by the control byte (an
     * odd step visits every group), so keys that overflowed a group do not
     * pile onto its neighbours. */
    size_t next(size_t g, Hash h) const {
        return (g + 2 * static_cast<size_t>(h.ctrl) + 1) & group_mask_;
    }

    Ref insert(Hash h, uint32_t head, TableGroup::Want want) {
        for (size_t g = index_of(h.home);; g = next(g, h)) {
            TableGroup    &grp = groups_[g];
            const uint32_t e   = grp.empties();
            if (__builtin_expect(e != 0, 1)) {
                const unsigned i = lowest(e);
                grp.set_ctrl(i, want);
                grp.head[i] = head;
                ++size_;
                return &grp.head[i];
            }
            grp.bump_overflow();
        }
    }

    /* Makes this (empty, unallocated) table `ngroups` groups large. */
    bool allocate(size_t ngroups) {
        void *p = array_alloc(groups_bytes(ngroups));
        if (p == nullptr) {
            return false;
        }
        groups_     = static_cast<TableGroup *>(p);
        group_mask_ = ngroups - 1;
        max_size_   = ngroups * kGroupSlots * 5 / 8;
        top_shift_  = static_cast<uint8_t>(59 - __builtin_ctzll(ngroups));
        for (size_t g = 0; g < ngroups; ++g) {
            init_group(groups_[g]);
        }
        return true;
    }

    void release() {
        if (allocated()) {
            array_free(groups_, groups_bytes(group_mask_ + 1));
        }
    }

    void swap(BucketTable &o) noexcept {
        std::swap(groups_, o.groups_);
        std::swap(group_mask_, o.group_mask_);
        std::swap(size_, o.size_);
        std::swap(max_size_, o.max_size_);
        std::swap(top_shift_, o.top_shift_);
        std::swap(shift_, o.shift_);
        std::swap(rest_shift_, o.rest_shift_);
    }

    TableGroup *groups_     = const_cast<TableGroup *>(&kNoGroups);
    size_t      group_mask_ = 0;
    size_t      size_       = 0;
    size_t      max_size_   = 0;
    uint8_t     top_shift_  = 59; /* 64 - 5 control bits - log2(groups) */
    uint8_t     shift_      = 0;
    uint8_t     rest_shift_ = 2;
};

}  // namespace detail
}  // namespace match
}  // namespace uct_tm

#endif
