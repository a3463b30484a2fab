/*
 * The shared memory MD "tm" hands out (mem_alloc), without a descriptor per
 * allocation.
 *
 * Small allocations (up to ShmArenas::kMaxBlock) are blocks of arenas: memfd
 * segments of kArenaSize bytes, each cut into equal blocks of one power-of-two
 * size class. A thousand small buffers then cost a few descriptors and
 * mappings instead of a thousand (the process limit is often 1024). Freed
 * blocks are handed out again (last freed first, zeroed, as a new segment
 * would be); an arena whose last block is freed is unmapped and closed at
 * once, so freeing everything gives every descriptor back. Larger
 * allocations get a segment of their own.
 *
 * A block's packed rkey names its arena, its offset there and its own length:
 * rkey_unpack, rkey_ptr and one-sided copies check every access against that
 * range, and a peer maps only the pages that hold it (attach_range).
 *
 * Not thread-safe: the MD serialises allocate and ShmBlock::reset.
 */
#ifndef UCT_TM_BASE_SHM_ARENA_H_
#define UCT_TM_BASE_SHM_ARENA_H_

#include "shm_segment.h"

#include <cstddef>
#include <cstdint>
#include <vector>

namespace uct_tm {

class ShmArenas;
struct ShmArena;

/* One allocation: a block of an arena, or a segment of its own. */
class ShmBlock {
  public:
    ShmBlock() = default;
    ~ShmBlock() { reset(); }
    ShmBlock(ShmBlock &&other) noexcept { *this = static_cast<ShmBlock &&>(other); }
    ShmBlock &operator=(ShmBlock &&other) noexcept;
    ShmBlock(const ShmBlock &)            = delete;
    ShmBlock &operator=(const ShmBlock &) = delete;

    bool         valid() const { return address_ != nullptr; }
    void        *address() const { return address_; }
    size_t       length() const { return length_; }
    /* The segment that holds the block, and where in it the block starts. */
    const ShmId &id() const;
    uint64_t     offset() const { return offset_; }
    /* Gives the block back (closing an arena it leaves empty). */
    void         reset();

  private:
    friend class ShmArenas;

    ShmSegment own_;              /* large: a segment of its own */
    ShmArenas *arenas_  = nullptr; /* small: the arena's owner ... */
    ShmArena  *arena_   = nullptr; /* ... and the arena */
    void      *address_ = nullptr;
    size_t     length_  = 0;
    uint64_t   offset_  = 0;
};

class ShmArenas {
  public:
    static constexpr size_t   kMinBlock  = 64;
    static constexpr size_t   kMaxBlock  = 64 * 1024;
    static constexpr size_t   kArenaSize = 2 * 1024 * 1024;
    static constexpr unsigned kClasses   = 11; /* 64 B .. 64 KiB */
    static_assert((kMinBlock << (kClasses - 1)) == kMaxBlock, "size classes");

    explicit ShmArenas(bool numa_bind) : numa_bind_(numa_bind) {}
    ~ShmArenas();
    ShmArenas(const ShmArenas &)            = delete;
    ShmArenas &operator=(const ShmArenas &) = delete;

    /* At least `length` bytes of zeroed shared memory (length() says how
     * many); the arenas must outlive the block. */
    ucs_status_t allocate(size_t length, ShmBlock *out);

    /* Arenas open now (each one descriptor and one mapping). */
    size_t arenas() const { return arenas_; }

  private:
    friend class ShmBlock;

    /* Arenas of one size class: those with a free block first. */
    struct List {
        ShmArena *head = nullptr;
        void      push(ShmArena *a);
        void      unlink(ShmArena *a);
    };

    void release(ShmArena *arena, uint64_t offset);

    List   available_[kClasses]; /* with at least one free block */
    List   full_[kClasses];
    size_t arenas_ = 0;
    bool   numa_bind_;
};

}  // namespace uct_tm

#endif
