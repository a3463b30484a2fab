#include "ib_md.h"

#include "ib_device.h"

#include <ucs/debug/log_def.h>

#include <cerrno>
#include <climits>
#include <cstdio>
#include <cstring>
#include <new>
#include <unistd.h>

namespace uct_tm {
namespace ib {
namespace {

IbMd      *md_of(abi::MdHeader *md) { return reinterpret_cast<IbMd *>(md); }
MemHandle *handle_of(uct_mem_h memh) { return static_cast<MemHandle *>(memh); }

void md_close(abi::MdHeader *header) {
    IbMd *md = md_of(header);
    if (md->pd != nullptr) {
        ibv_dealloc_pd(md->pd);
    }
    if (md->ctx != nullptr) {
        ibv_close_device(md->ctx);
    }
    delete md;
}

ucs_status_t md_query(abi::MdHeader *header, abi::MdAttr *attr) {
    const IbMd *md         = md_of(header);
    attr->max_alloc        = 0;
    attr->max_reg          = md->attr.orig_attr.max_mr_size;
    attr->flags            = UCT_MD_FLAG_REG | UCT_MD_FLAG_NEED_MEMH | UCT_MD_FLAG_NEED_RKEY;
    attr->reg_mem_types    = UCS_BIT(UCS_MEMORY_TYPE_HOST);
    /* UCP may cache memory regions and drop them when the memory is unmapped,
     * as it does for UCX's own verbs MDs. */
    attr->cache_mem_types  = UCS_BIT(UCS_MEMORY_TYPE_HOST);
    attr->access_mem_types = UCS_BIT(UCS_MEMORY_TYPE_HOST);
    attr->alloc_mem_types  = 0;
    /* Pinning costs a syscall plus a page walk. */
    attr->reg_cost         = {16e-6, 0.06e-9};
    attr->rkey_packed_size = sizeof(PackedRkey);
    return UCS_OK;
}

ucs_status_t md_mem_alloc(abi::MdHeader *, size_t *, void **, unsigned, const char *,
                          uct_mem_h *) {
    return UCS_ERR_UNSUPPORTED;
}

ucs_status_t md_mem_free(abi::MdHeader *, uct_mem_h) { return UCS_ERR_UNSUPPORTED; }

ucs_status_t md_mem_reg(abi::MdHeader *header, void *address, size_t length, unsigned,
                        uct_mem_h *memh) {
    if ((address == nullptr) || (length == 0) || (memh == nullptr)) {
        return UCS_ERR_INVALID_PARAM;
    }
    auto *handle = new (std::nothrow) MemHandle;
    if (handle == nullptr) {
        return UCS_ERR_NO_MEMORY;
    }
    handle->mr = ibv_reg_mr(md_of(header)->pd, address, length,
                            IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_READ |
                                IBV_ACCESS_REMOTE_WRITE);
    if (handle->mr == nullptr) {
        ucs_error("tm: ibv_reg_mr(%p, %zu) on %s: %s", address, length,
                  md_of(header)->device.c_str(), strerror(errno));
        delete handle;
        return UCS_ERR_IO_ERROR;
    }
    *memh = handle;
    return UCS_OK;
}

ucs_status_t md_mem_dereg(abi::MdHeader *, uct_mem_h memh) {
    if (mr_of(memh) == nullptr) {
        return UCS_ERR_INVALID_PARAM;
    }
    const int rc = ibv_dereg_mr(handle_of(memh)->mr);
    handle_of(memh)->magic = 0;
    delete handle_of(memh);
    return (rc == 0) ? UCS_OK : UCS_ERR_IO_ERROR;
}

ucs_status_t md_mkey_pack(abi::MdHeader *, uct_mem_h memh, void *rkey_buffer) {
    if ((mr_of(memh) == nullptr) || (rkey_buffer == nullptr)) {
        return UCS_ERR_INVALID_PARAM;
    }
    const struct ibv_mr *mr     = mr_of(memh);
    const PackedRkey     packed = pack_rkey(mr->rkey, reinterpret_cast<uintptr_t>(mr->addr), mr->length);
    memcpy(rkey_buffer, &packed, sizeof(packed));
    return UCS_OK;
}

const abi::MdCallbacks md_callbacks = {
    md_close, md_query, md_mem_alloc, md_mem_free, md_mem_reg, md_mem_dereg, md_mkey_pack,
};

unsigned md_names(char (*names)[UCT_MD_NAME_MAX], unsigned max) {
    unsigned n = 0;
    for (const DeviceInfo &d : devices()) {
        if (n == max) {
            break;
        }
        if (sizeof(kMdPrefix) - 1 + d.name.size() >= UCT_MD_NAME_MAX) {
            ucs_debug("tm: verbs device %s: name too long for an MD name", d.name.c_str());
            continue;
        }
        snprintf(names[n++], UCT_MD_NAME_MAX, "%s%s", kMdPrefix, d.name.c_str());
    }
    return n;
}

ucs_status_t md_open(const char *name, const uct_md_config_t *, uct_md_h *md_p) {
    if ((name == nullptr) || (md_p == nullptr)) {
        return UCS_ERR_INVALID_PARAM;
    }
    if (strncmp(name, kMdPrefix, sizeof(kMdPrefix) - 1) != 0) {
        return UCS_ERR_NO_DEVICE;
    }
    const std::string device = name + sizeof(kMdPrefix) - 1;
    if (find_device(device) == nullptr) {
        return UCS_ERR_NO_DEVICE;
    }
    IbMd *md = new (std::nothrow) IbMd;
    if (md == nullptr) {
        return UCS_ERR_NO_MEMORY;
    }
    abi::init_md_header(&md->header, md_component(), &md_callbacks);
    md->device = device;
    md->ctx    = open_device(device);
    if (md->ctx != nullptr) {
        md->pd = ibv_alloc_pd(md->ctx);
    }
    if ((md->pd == nullptr) || (ibv_query_device_ex(md->ctx, nullptr, &md->attr) != 0)) {
        ucs_error("tm: cannot open verbs MD %s: %s", name, strerror(errno));
        md_close(&md->header);
        return UCS_ERR_NO_DEVICE;
    }
    *md_p = abi::to_uct(&md->header);
    return UCS_OK;
}

ucs_status_t rkey_unpack(const void *rkey_buffer, uct_rkey_t *rkey, void **handle) {
    if ((rkey_buffer == nullptr) || (rkey == nullptr)) {
        return UCS_ERR_INVALID_PARAM;
    }
    PackedRkey packed;
    if (!read_packed_rkey(rkey_buffer, kRkeyMagic, &packed)) {
        ucs_error("tm_ib: malformed rkey (magic 0x%x address 0x%lx length %lu)", packed.magic,
                  static_cast<unsigned long>(packed.address),
                  static_cast<unsigned long>(packed.length));
        return UCS_ERR_INVALID_PARAM;
    }
    RemoteKey *key = new_remote_key<RemoteKey>(packed, rkey, handle);
    if (key == nullptr) {
        return UCS_ERR_NO_MEMORY;
    }
    key->rkey = packed.rkey;
    return UCS_OK;
}

/* Remote memory of a verbs peer is reached by RDMA only. */
ucs_status_t rkey_ptr(uct_rkey_t, void *, uint64_t, void **) { return UCS_ERR_UNSUPPORTED; }

ucs_status_t rkey_release(uct_rkey_t rkey, void *) {
    delete remote_key(rkey);
    return UCS_OK;
}

const abi::ComponentDesc component_desc = {
    "tm_ib", md_names, md_open, rkey_unpack, rkey_ptr, rkey_release, "TM verbs memory domain",
    "TM_IB_",
};

}  // namespace

IbMd *ib_md(uct_md_h md) {
    return ((md != nullptr) && (abi::from_uct(md)->callbacks == &md_callbacks))
               ? reinterpret_cast<IbMd *>(md) : nullptr;
}

const abi::ComponentDesc &md_component() { return component_desc; }

}  // namespace ib
}  // namespace uct_tm
