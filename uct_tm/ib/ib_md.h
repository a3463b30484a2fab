/*
 * Verbs memory domains, component "tm_ib": one MD per verbs device, named
 * "tm_<device>" (component "tm" has the shared-memory MD "tm"). The MD owns
 * the device context and protection domain every tm_rc iface on it shares;
 * memory registration is ibv_reg_mr. Its rkeys are in ib_rkey.h.
 */
#ifndef UCT_TM_IB_IB_MD_H_
#define UCT_TM_IB_IB_MD_H_

#include "ib_rkey.h"

#include "base/ucx_abi.h"

#include <infiniband/verbs.h>
#include <uct/api/uct.h>

#include <cstdint>
#include <string>

namespace uct_tm {
namespace ib {

inline constexpr char kMdPrefix[] = "tm_";

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
