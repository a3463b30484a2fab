/*
 * Verbs memory domains, component "tm_ib": one MD per verbs device, named
 * "tm_<device>" (component "tm" has the shared-memory MD "tm"). The MD owns
 * the device context and protection domain every tm_rc iface on it shares;
 * memory registration is ibv_reg_mr. A packed rkey is {kRkeyMagic, rkey,
 * range}, unpacked by the component's own rkey_unpack; the unpacked key
 * keeps the range so that one-sided copies outside it fail locally instead
 * of breaking the connection.
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
    uint64_t address;
    uint64_t length;
};
static_assert(sizeof(PackedRkey) == 24, "packed verbs rkey layout");

/* An unpacked verbs rkey (uct_rkey_t points to it). */
struct RemoteKey {
    uint32_t rkey;
    uint64_t address;
    uint64_t length;
    /* True iff [addr, addr + len) lies inside the registered range. */
    bool covers(uint64_t addr, uint64_t len) const {
        return (addr >= address) && (len <= length) && (addr - address <= length - len);
    }
};

inline const RemoteKey *remote_key(uct_rkey_t rkey) {
    return reinterpret_cast<const RemoteKey *>(rkey);
}

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
};

/* The verbs MD behind `md`, or null if it is not one. */
IbMd *ib_md(uct_md_h md);

/* Component "tm_ib" (the verbs MDs), for the plugin to register. */
const abi::ComponentDesc &md_component();

}  // namespace ib
}  // namespace uct_tm

#endif
