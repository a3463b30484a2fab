#include "shm_arena.h"

#include "common/alloc_status.h"

#include <ucs/debug/log_def.h>

#include <cstring>
#include <new>

namespace uct_tm {

struct ShmArena {
    ShmSegment            segment;
    uint32_t              block_size = 0;
    uint32_t              blocks     = 0; /* in the arena */
    uint32_t              used       = 0; /* handed out now */
    uint32_t              fresh      = 0; /* blocks [fresh, blocks) were never handed out */
    unsigned              size_class = 0;
    std::vector<uint32_t> freed;          /* handed out before, free again: LIFO */
    ShmArena             *prev = nullptr;
    ShmArena             *next = nullptr;
};

namespace {

/* The class of `length` (<= kMaxBlock): blocks of kMinBlock << class bytes. */
unsigned size_class(size_t length) {
    unsigned c = 0;
    while ((ShmArenas::kMinBlock << c) < length) {
        ++c;
    }
    return c;
}

}  // namespace

void ShmArenas::List::push(ShmArena *a) {
    a->prev = nullptr;
    a->next = head;
    if (head != nullptr) {
        head->prev = a;
    }
    head = a;
}

void ShmArenas::List::unlink(ShmArena *a) {
    (a->prev != nullptr ? a->prev->next : head) = a->next;
    if (a->next != nullptr) {
        a->next->prev = a->prev;
    }
    a->prev = a->next = nullptr;
}

ShmArenas::~ShmArenas() {
    /* Blocks still allocated when the MD closes: their memory goes with it. */
    for (unsigned c = 0; c < kClasses; ++c) {
        for (List *list : {&available_[c], &full_[c]}) {
            while (ShmArena *a = list->head) {
                list->unlink(a);
                delete a;
            }
        }
    }
}

ucs_status_t ShmArenas::allocate(size_t length, ShmBlock *out) {
    if ((out == nullptr) || (length == 0)) {
        return UCS_ERR_INVALID_PARAM;
    }
    out->reset();
    if (length > kMaxBlock) {
        ucs_status_t status = ShmSegment::create(length, ShmBacking::kMemfd, numa_bind_, &out->own_);
        if (status != UCS_OK) {
            return status;
        }
        out->address_ = out->own_.address();
        out->length_  = out->own_.size();
        out->offset_  = 0;
        return UCS_OK;
    }
    const unsigned c = size_class(length);
    ShmArena      *a = available_[c].head;
    if (a == nullptr) {
        a = new (std::nothrow) ShmArena;
        if (a == nullptr) {
            return UCS_ERR_NO_MEMORY;
        }
        ucs_status_t status = ShmSegment::create(kArenaSize, ShmBacking::kMemfd, numa_bind_,
                                                 &a->segment);
        if (status != UCS_OK) {
            delete a;
            return status;
        }
        a->block_size = static_cast<uint32_t>(kMinBlock << c);
        a->blocks     = static_cast<uint32_t>(kArenaSize >> (6 + c));
        a->size_class = c;
        available_[c].push(a);
        ++arenas_;
    }
    uint32_t index;
    bool     reused = !a->freed.empty();
    if (reused) {
        index = a->freed.back();
        a->freed.pop_back();
    } else {
        index = a->fresh++;
    }
    if (++a->used == a->blocks) {
        available_[c].unlink(a);
        full_[c].push(a);
    }
    out->arenas_  = this;
    out->arena_   = a;
    out->offset_  = uint64_t{index} * a->block_size;
    out->length_  = a->block_size;
    out->address_ = static_cast<char *>(a->segment.address()) + out->offset_;
    if (reused) {
        memset(out->address_, 0, out->length_);
    }
    return UCS_OK;
}

void ShmArenas::release(ShmArena *a, uint64_t offset) {
    const unsigned c = a->size_class;
    if (a->used == a->blocks) {
        full_[c].unlink(a);
        available_[c].push(a);
    }
    if (--a->used == 0) {
        /* Empty: give its descriptor and mapping back now. */
        available_[c].unlink(a);
        delete a;
        --arenas_;
        return;
    }
    /* Cannot fail: room for every block of the arena is reserved below. */
    if (a->freed.capacity() < a->blocks) {
        if (alloc_status([&] { a->freed.reserve(a->blocks); }) != UCS_OK) {
            ucs_warn("tm shm: out of memory tracking a freed block; its space is lost until "
                     "its arena empties");
            return;
        }
    }
    a->freed.push_back(static_cast<uint32_t>(offset / a->block_size));
}

ShmBlock &ShmBlock::operator=(ShmBlock &&other) noexcept {
    if (this != &other) {
        reset();
        own_           = static_cast<ShmSegment &&>(other.own_);
        arenas_        = other.arenas_;
        arena_         = other.arena_;
        address_       = other.address_;
        length_        = other.length_;
        offset_        = other.offset_;
        other.arenas_  = nullptr;
        other.arena_   = nullptr;
        other.address_ = nullptr;
        other.length_  = 0;
        other.offset_  = 0;
    }
    return *this;
}

const ShmId &ShmBlock::id() const { return (arena_ != nullptr) ? arena_->segment.id() : own_.id(); }

void ShmBlock::reset() {
    if (arena_ != nullptr) {
        arenas_->release(arena_, offset_);
        arena_  = nullptr;
        arenas_ = nullptr;
    }
    own_.reset();
    address_ = nullptr;
    length_  = 0;
    offset_  = 0;
}

}  // namespace uct_tm
