/*
 * Verbs memory domains of component "tm": one MD per verbs device, named
 * "tm_<device>" (the shared-memory MD is "tm"). The MD owns the device
 * context and protection domain every tm_rc iface on it shares; memory
 * registration is ibv_reg_mr. A packed rkey is {kRkeyMagic, rkey}: the
 * component's rkey_unpack tells it from a shared-memory rkey by the magic,
 * and an unpacked rkey is the 32-bit key itself (no allocation).
 */
#ifndef UCT_TM_IB_IB_MD_H_
#define UCT_TM_IB_IB_MD_H_

#include "base/ucx_abi.h"

#include <infiniband/verbs.h>
#include <uct/api/uct.h>

#include <cstdint>
#include <string>

namespace uct_tm {
namespace ib {

inline constexpr char     kMdPrefix[] = "tm_";
inline constexpr uint32_t kRkeyMagic  = 0x746d6962u; /* "tmib" */

struct PackedRkey {
    uint32_t magic;
    uint32_t rkey;
};
static_assert(sizeof(PackedRkey) == 8, "packed verbs rkey layout");

/* A registration: the verbs MR. */
struct MemHandle {
    uint32_t       magic = kMemHandleMagic;
    struct ibv_mr *mr    = nullptr;
    static constexpr uint32_t kMemHandleMagic = 0x69626d68u; /* "ibmh" */
};

/* The MR behind a uct_mem_h of a verbs MD, or null. */
inline struct ibv_mr *mr_of(uct_mem_h memh) {
    const auto *h = static_cast<const MemHandle *>(memh);
    return ((h != nullptr) && (memh != UCT_MEM_HANDLE_NULL) &&
            (h->magic == MemHandle::kMemHandleMagic))
               ? h->mr : nullptr;
}

struct IbMd {
    abi::MdHeader       header; /* first: libuct sees a struct uct_md */
    std::string         device;
    struct ibv_context *ctx = nullptr;
    struct ibv_pd      *pd  = nullptr;
    struct ibv_device_attr_ex attr{};

    static IbMd *from(uct_md_h md);
};

/* The verbs MD behind `md`, or null if it is not one. */
IbMd *ib_md(uct_md_h md);

/* MD names "tm_<device>" of the devices with an active port, at most `max`. */
unsigned md_names(char (*names)[UCT_MD_NAME_MAX], unsigned max);

ucs_status_t md_open(const char *name, const uct_md_config_t *config, uct_md_h *md);

bool         is_packed_rkey(const void *rkey_buffer);
ucs_status_t rkey_unpack(const void *rkey_buffer, uct_rkey_t *rkey, void **handle);
/* True for the handle rkey_unpack() gives verbs rkeys. */
bool         is_rkey_handle(const void *handle);

}  // namespace ib
}  // namespace uct_tm

#endif
