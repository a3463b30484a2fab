/*
 * The libfabric provider "tm" (libtm-fi.so) over the protocol layer
 * (src/proto/api/uct_tm_proto.h); docs/libfabric.md.
 *
 * Every fid object is a C++ object that holds its libfabric struct in a
 * Handle (the struct first, then a pointer back), so a trampoline gets from
 * the `struct fid *` libfabric passes to the object without offsetof tricks.
 */
#ifndef UCT_TM_FABRIC_PROVIDER_H_
#define UCT_TM_FABRIC_PROVIDER_H_

#include "api/uct_tm_proto.h"

#include <rdma/fabric.h>
#include <rdma/fi_cm.h>
#include <rdma/fi_domain.h>
#include <rdma/fi_endpoint.h>
#include <rdma/fi_errno.h>
#include <rdma/fi_tagged.h>
#include <rdma/providers/fi_prov.h>

#include <cstddef>
#include <cstdint>
#include <new>
#include <string>

namespace uct_tm {
namespace fabric {

constexpr const char *kProviderName    = "tm";
constexpr const char *kFabricName      = "tm";
constexpr uint32_t    kProviderVersion = FI_VERSION(0, 1);
/* The API of the headers built against: libfabric's core skips a provider
 * whose fi_version is below the version an application asks for. */
constexpr uint32_t kApiVersion = FI_VERSION(FI_MAJOR_VERSION, FI_MINOR_VERSION);
/* mr_mode before 1.5 was an enum, not the bits this provider reports. */
constexpr uint32_t kMinApiVersion = FI_VERSION(1, 5);

/* What the provider offers: tagged and untagged messages, the source of a
 * message, receives directed at one source, untagged multi-receives. */
constexpr uint64_t kPrimaryCaps = FI_TAGGED | FI_MSG | FI_SEND | FI_RECV | FI_DIRECTED_RECV;
constexpr uint64_t kCaps        = kPrimaryCaps | FI_SOURCE | FI_MULTI_RECV | FI_LOCAL_COMM |
                           FI_REMOTE_COMM;

/* A provider-specific address format: the layer's compact worker address
 * behind a small header, in a fixed-size name so that fi_av_insert can take
 * arrays, and of FI_NAME_MAX bytes: MPI libraries (Open MPI's mtl ofi)
 * keep names in buffers of that size. */
constexpr uint32_t kAddrFormat = FI_PROV_SPECIFIC | 0x746d;
constexpr size_t   kAddrLen    = FI_NAME_MAX;
constexpr size_t   kInjectSize = 4096;
constexpr size_t   kIovLimit   = UCT_TM_PROTO_IOV_MAX;
constexpr size_t   kMaxMsgSize = size_t{1} << 30;
constexpr size_t   kQueueSize  = 4096;
constexpr uint64_t kMsgOrder   = FI_ORDER_SAS;

/* The op flags sends and receives take (fi_tsendmsg, fi_trecvmsg, and
 * tx_attr / rx_attr op_flags); FI_PEEK, FI_CLAIM, FI_DISCARD: tagged only;
 * FI_MULTI_RECV: untagged only (the tagged calls ignore it in the op flags). */
constexpr uint64_t kTxOpFlags = FI_COMPLETION | FI_INJECT | FI_REMOTE_CQ_DATA | FI_INJECT_COMPLETE |
                                FI_TRANSMIT_COMPLETE | FI_DELIVERY_COMPLETE | FI_MATCH_COMPLETE |
                                FI_FENCE | FI_MORE;
constexpr uint64_t kRxOpFlags  = FI_COMPLETION | FI_MULTI_RECV;
constexpr uint64_t kProbeFlags = FI_PEEK | FI_CLAIM | FI_DISCARD;

fi_provider &provider();

/* A libfabric struct and the object that implements it. */
template <typename Fid, typename Obj> struct Handle {
    Fid  fid;
    Obj *self;
};

/* The object behind `f` if it is one of Obj's class, else nullptr (a wrong
 * or null fid is an error the caller reports, not undefined behaviour). */
template <typename Obj> Obj *object_of(const fid *f) {
    if ((f == nullptr) || (f->fclass != Obj::kClass)) {
        return nullptr;
    }
    using H = Handle<typename Obj::Fid, Obj>;
    return reinterpret_cast<const H *>(f)->self;
}

template <typename Obj, typename Fid> Obj *object_of(const Fid *f) {
    return (f == nullptr) ? nullptr : object_of<Obj>(&f->fid);
}

/* An op a table must have but the provider does not implement (and does
 * not advertise): -FI_ENOSYS with the op's own signature. */
template <typename F> struct NoSys;
template <typename R, typename... A> struct NoSys<R (*)(A...)> {
    static R fn(A...) { return static_cast<R>(-FI_ENOSYS); }
};
#define TM_FI_NOSYS(table, op) ::uct_tm::fabric::NoSys<decltype(table::op)>::fn

/* f() at the C ABI's edge: an allocation failure is -FI_ENOMEM, not an
 * exception unwinding into libfabric's caller. */
template <typename F> auto guarded(F &&f) noexcept -> decltype(f()) {
    try {
        return f();
    } catch (const std::bad_alloc &) {
        return -FI_ENOMEM;
    }
}

/* Every object's fi_ops: `close`, and `bind` and `control` if given; the
 * rest -FI_ENOSYS. */
fi_ops make_fid_ops(int (*close)(fid *), int (*bind)(fid *, fid *, uint64_t) = nullptr,
                    int (*control)(fid *, int, void *) = nullptr);

/* libfabric's negative error for a layer status. */
int fi_error(ucs_status_t status);

/* The name a worker address travels in (fi_getname, fi_av_insert). */
struct Name {
    uint16_t magic;
    uint8_t  length; /* bytes of the compact worker address; 0: "any" */
    uint8_t  address[kAddrLen - 3];
};
static_assert(sizeof(Name) == kAddrLen, "the name is kAddrLen bytes");
constexpr uint16_t kNameMagic = 0x6d74; /* "tm" */

/* True if `name` holds a well-formed address. */
bool name_valid(const Name &name);

}  // namespace fabric
}  // namespace uct_tm

#endif
