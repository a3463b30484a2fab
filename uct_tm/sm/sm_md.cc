#include "sm_md.h"

#include "base/mem_registry.h"
#include "base/range.h"
#include "base/self_pid.h"
#include "base/spin_lock.h"
#include "common/alloc_status.h"

#include <ucs/debug/log_def.h>

#include <climits>
#include <cstring>
#include <mutex>
#include <new>
#include <utility>
#include <unistd.h>

namespace uct_tm {
namespace sm {
namespace {

struct TmMd {
    abi::MdHeader header; /* first: libuct sees a struct uct_md */

    /* Live registrations and allocations, for md_range_registered(), and
     * the arenas of the allocations. An MD may be shared by several workers:
     * guarded (a spinlock: registration is on UCP's receive path; only an
     * allocation, which may map a new arena, holds it long). The arenas are
     * declared first so that they outlive every handle's block. */
    SpinLock               lock;
    ShmArenas              arenas{true};
    MemRegistry<MemHandle> registry;

    MemHandle *add(void *address, size_t length) {
        std::lock_guard<SpinLock> guard(lock);
        MemHandle *h = registry.add(address, length);
        if (h != nullptr) {
            h->magic = MemHandle::kMemHandleMagic;
        }
        return h;
    }
    /* A new allocation of at least `length` bytes, registered. */
    ucs_status_t allocate(size_t length, MemHandle **out) {
        std::lock_guard<SpinLock> guard(lock);
        ShmBlock     block;
        ucs_status_t status = arenas.allocate(length, &block);
        if (status != UCS_OK) {
            return status;
        }
        MemHandle *h = registry.add(block.address(), block.length());
        if (h == nullptr) {
            return UCS_ERR_NO_MEMORY; /* the block goes back */
        }
        h->magic = MemHandle::kMemHandleMagic;
        h->shm   = std::move(block);
        *out     = h;
        return UCS_OK;
    }
    void remove(MemHandle *h) {
        std::lock_guard<SpinLock> guard(lock);
        h->magic = 0; /* a second dereg of it is refused */
        if (h->shm.valid()) {
            h->shm.reset(); /* out of line: not for every registration */
        }
        registry.remove(h);
    }
    bool covers(uint64_t address, size_t length) {
        std::lock_guard<SpinLock> guard(lock);
        return registry.covers(address, length);
    }
};

TmMd      *md_of(abi::MdHeader *md) { return reinterpret_cast<TmMd *>(md); }
MemHandle *handle_of(uct_mem_h memh) { return static_cast<MemHandle *>(memh); }

void md_close(abi::MdHeader *md) { delete md_of(md); }

ucs_status_t md_query(abi::MdHeader *, abi::MdAttr *attr) {
    attr->max_alloc        = ULONG_MAX;
    attr->max_reg          = ULONG_MAX;
    attr->flags            = UCT_MD_FLAG_REG | UCT_MD_FLAG_ALLOC | UCT_MD_FLAG_NEED_RKEY;
    /* UCP's v2 tag-offload rendezvous (1.16 on) names the sender's MD in its
     * header only if the MD needs a handle for zero-copy; otherwise it sends
     * index 255 and the receiver of an unexpected one aborts in
     * ucp_rkey.c. Asking for a handle also makes UCP account for the
     * registration of a zero-copy send, which it then does (cached). */
    if (abi::kUcxRelease >= 116) {
        attr->flags |= UCT_MD_FLAG_NEED_MEMH;
    }
    attr->reg_mem_types    = UCS_BIT(UCS_MEMORY_TYPE_HOST);
    /* A registration names a range of this process (CMA) or of one of our
     * segments (checked by serial at attach): UCP may cache it and drop it
     * when the memory goes, as it does for UCX's own shared-memory MDs. */
    attr->cache_mem_types  = UCS_BIT(UCS_MEMORY_TYPE_HOST);
    attr->alloc_mem_types  = UCS_BIT(UCS_MEMORY_TYPE_HOST);
    attr->access_mem_types = UCS_BIT(UCS_MEMORY_TYPE_HOST);
    /* Registration only records the range. */
    attr->reg_cost         = {20e-9, 0};
    attr->rkey_packed_size = sizeof(PackedRkey);
    return UCS_OK;
}

ucs_status_t md_mem_alloc(abi::MdHeader *md, size_t *length, void **address, unsigned flags,
                          const char *, uct_mem_h *memh) {
    if ((length == nullptr) || (address == nullptr) || (memh == nullptr) || (*length == 0)) {
        return UCS_ERR_INVALID_PARAM;
    }
    if (flags & UCT_MD_MEM_FLAG_FIXED) {
        return UCS_ERR_UNSUPPORTED;
    }
    MemHandle   *handle;
    ucs_status_t status = md_of(md)->allocate(*length, &handle);
    if (status != UCS_OK) {
        return status;
    }
    *length     = handle->length;
    *address    = handle->address;
    *memh       = handle;
    return UCS_OK;
}

ucs_status_t md_mem_free(abi::MdHeader *md, uct_mem_h memh) {
    if ((mem_handle(memh) == nullptr) || !handle_of(memh)->shm.valid()) {
        return UCS_ERR_INVALID_PARAM;
    }
    md_of(md)->remove(handle_of(memh));
    return UCS_OK;
}

ucs_status_t md_mem_reg(abi::MdHeader *md, void *address, size_t length, unsigned,
                        uct_mem_h *memh) {
    if ((address == nullptr) || (length == 0) || (memh == nullptr)) {
        return UCS_ERR_INVALID_PARAM;
    }
    MemHandle *handle = md_of(md)->add(address, length);
    if (handle == nullptr) {
        return UCS_ERR_NO_MEMORY;
    }
    *memh = handle;
    return UCS_OK;
}

ucs_status_t md_mem_dereg(abi::MdHeader *md, uct_mem_h memh) {
    if ((mem_handle(memh) == nullptr) || handle_of(memh)->shm.valid()) {
        return UCS_ERR_INVALID_PARAM; /* allocated memory is released by mem_free */
    }
    md_of(md)->remove(handle_of(memh));
    return UCS_OK;
}

ucs_status_t md_mkey_pack(abi::MdHeader *, uct_mem_h memh, void *rkey_buffer) {
    if ((mem_handle(memh) == nullptr) || (rkey_buffer == nullptr)) {
        return UCS_ERR_INVALID_PARAM;
    }
    const MemHandle &h = *handle_of(memh);
    PackedRkey       packed{};
    packed.magic   = kRkeyMagic;
    packed.address = reinterpret_cast<uintptr_t>(h.address);
    packed.length  = h.length;
    packed.pid     = self_pid();
    if (h.shm.valid()) {
        packed.flags      = kRkeyHasShm;
        packed.shm        = h.shm.id();
        packed.shm_offset = h.shm.offset();
    }
    memcpy(rkey_buffer, &packed, sizeof(packed));
    return UCS_OK;
}

const abi::MdCallbacks md_callbacks = {
    md_close, md_query, md_mem_alloc, md_mem_free, md_mem_reg, md_mem_dereg, md_mkey_pack,
};

constexpr char kMdName[] = "tm";

unsigned md_names(char (*names)[UCT_MD_NAME_MAX], unsigned max) {
    if (max == 0) {
        return 0;
    }
    snprintf(names[0], UCT_MD_NAME_MAX, "%s", kMdName);
    return 1;
}

ucs_status_t md_open(const char *name, const uct_md_config_t *, uct_md_h *md_p) {
    if ((name == nullptr) || (md_p == nullptr)) {
        return UCS_ERR_INVALID_PARAM;
    }
    if (strcmp(name, kMdName) != 0) {
        return UCS_ERR_NO_DEVICE;
    }
    TmMd *md = nullptr;
    if (alloc_status([&] { md = new TmMd; }) != UCS_OK) {
        return UCS_ERR_NO_MEMORY;
    }
    abi::init_md_header(&md->header, md_component(), &md_callbacks);
    *md_p = abi::to_uct(&md->header);
    return UCS_OK;
}

ucs_status_t rkey_unpack(const void *rkey_buffer, uct_rkey_t *rkey, void **handle) {
    if ((rkey_buffer == nullptr) || (rkey == nullptr)) {
        return UCS_ERR_INVALID_PARAM;
    }
    /* Everything here came from a peer: a key whose range wraps, or whose
     * segment does not belong to its owner or does not hold the range,
     * would send rkey_ptr and one-sided copies outside the memory it names. */
    PackedRkey packed;
    const bool valid   = read_packed_rkey(rkey_buffer, kRkeyMagic, &packed);
    const bool has_shm = (packed.flags & kRkeyHasShm) != 0;
    if (!valid || (packed.pid <= 0) ||
        (has_shm && ((packed.shm.pid != packed.pid) ||
                     !range_within(packed.shm_offset, packed.length, packed.shm.size)))) {
        ucs_error("tm: malformed rkey (magic 0x%x pid %d address 0x%lx length %lu%s)",
                  packed.magic, packed.pid, static_cast<unsigned long>(packed.address),
                  static_cast<unsigned long>(packed.length),
                  has_shm ? ", segment range outside its segment or not its owner's" : "");
        return UCS_ERR_INVALID_PARAM;
    }
    RemoteKey *key = new_remote_key<RemoteKey>(packed, rkey, handle);
    if (key == nullptr) {
        return UCS_ERR_NO_MEMORY;
    }
    key->pid     = packed.pid;
    key->has_shm = has_shm;
    if (key->has_shm) {
        key->shm        = packed.shm;
        key->shm_offset = packed.shm_offset;
    }
    key->has_rndv   = (packed.flags & kRkeyRndv) != 0;
    key->rndv_token = packed.rndv_token;
    key->rndv_proof = packed.rndv_proof;
    return UCS_OK;
}

ucs_status_t rkey_ptr(uct_rkey_t rkey, void *, uint64_t raddr, void **laddr) {
    return remote_key_address(remote_key(rkey), raddr, laddr);
}

ucs_status_t rkey_release(uct_rkey_t rkey, void *) {
    delete remote_key(rkey);
    return UCS_OK;
}

const abi::ComponentDesc component_desc = {
    "tm", md_names, md_open, rkey_unpack, rkey_ptr, rkey_release, "TM memory domain", "TM_",
};

}  // namespace

ucs_status_t remote_key_address(RemoteKey *key, uint64_t raddr, void **laddr) {
    /* An address of the range: one past its end is not (a caller reads there). */
    if ((key == nullptr) || (laddr == nullptr) || !key->covers(raddr, 1)) {
        return UCS_ERR_INVALID_PARAM;
    }
    if (!key->has_shm) {
        return UCS_ERR_UNREACHABLE; /* ordinary memory: reachable by CMA only */
    }
    if (shm_is_named(key->shm)) {
        return UCS_ERR_UNREACHABLE; /* not an allocation of ours: those are sealed memfds */
    }
    if (!key->mapping.valid()) {
        /* Only the pages of the key's range: a block of an arena does not
         * bring its neighbours' pages along. */
        ucs_status_t status = ShmSegment::attach_range(key->shm, key->shm_offset, key->length,
                                                       &key->mapping);
        if (status != UCS_OK) {
            return UCS_ERR_UNREACHABLE;
        }
    }
    *laddr = static_cast<char *>(key->mapping.address()) +
             (key->shm_offset - key->mapping.map_offset()) + (raddr - key->address);
    return UCS_OK;
}

bool is_shm_md(uct_md_h md) {
    return (md != nullptr) && (abi::from_uct(md)->callbacks == &md_callbacks);
}

bool md_range_registered(uct_md_h md, uint64_t address, size_t length) {
    return (md != nullptr) && md_of(abi::from_uct(md))->covers(address, length);
}

const abi::ComponentDesc &md_component() { return component_desc; }

}  // namespace sm
}  // namespace uct_tm
