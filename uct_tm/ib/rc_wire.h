/*
 * tm_rc wire format. Every message starts with a header laid out as rdma-core's
 * struct ibv_tmh (tm_types.h), so the software path and a NIC's tag-matching
 * engine read the same bytes:
 *   EAGER   tag message; the 64-bit immediate is app_ctx (high half) and the
 *           send's immediate data (low half), as rc_mlx5 does. The low half
 *           travels as immediate data when it is not 0, and always when the
 *           message is longer than the path MTU (a TM NIC's completion of a
 *           multi-packet message is then never taken for a rendezvous,
 *           tm_list.h). With kind = kRndvRequest: a software rendezvous
 *           request (one packet, immediate data 0)
 *   RNDV    tag rendezvous: struct ibv_rvh {va, rkey, len} of the sender's
 *           buffer, then the layer above's header; app_ctx names the sender's
 *           operation, echoed by the receiver's FIN
 *   FIN     the receiver read a rendezvous message; app_ctx = the operation
 *   NO_TAG  everything else, told apart by the first reserved byte (Kind):
 *           active messages (second byte: AM id), rendezvous cancels (app_ctx = the
 *           operation; the receiver acknowledges with a FIN)
 * Multi-byte fields are big-endian, as the NIC expects.
 */
#ifndef UCT_TM_IB_RC_WIRE_H_
#define UCT_TM_IB_RC_WIRE_H_

#include <infiniband/tm_types.h>

#include <cstddef>
#include <cstdint>
#include <endian.h>

namespace uct_tm {
namespace ib {

enum class Kind : uint8_t { kTag = 0, kAm = 1, kRndvRequest = 2, kRndvCancel = 3,
                           kRndvFailed = 4, /* the receiver's READ failed: the connection is failed */
                           kProbe = 5 /* liveness: the peer's QP acknowledging it is all that counts */ };

struct WireHeader {
    uint8_t  opcode;  /* enum ibv_tmh_op */
    uint8_t  kind;    /* Kind, for IBV_TMH_NO_TAG; zero otherwise */
    uint8_t  am_id;   /* Kind::kAm */
    uint8_t  zero;
    uint32_t app_ctx; /* big-endian */
    uint64_t tag;     /* big-endian */
};
static_assert(sizeof(WireHeader) == sizeof(struct ibv_tmh), "header is an ibv_tmh");
static_assert(offsetof(WireHeader, opcode) == offsetof(struct ibv_tmh, opcode), "opcode");
static_assert(offsetof(WireHeader, app_ctx) == offsetof(struct ibv_tmh, app_ctx), "app_ctx");
static_assert(offsetof(WireHeader, tag) == offsetof(struct ibv_tmh, tag), "tag");
static_assert(sizeof(struct ibv_rvh) == 16, "rendezvous header");

inline WireHeader tag_header(uint8_t opcode, uint64_t tag, uint32_t app_ctx) {
    return WireHeader{opcode, 0, 0, 0, htobe32(app_ctx), htobe64(tag)};
}

inline WireHeader am_header(uint8_t id) {
    return WireHeader{IBV_TMH_NO_TAG, static_cast<uint8_t>(Kind::kAm), id, 0, 0, 0};
}

/* A software rendezvous request is tagged (a NIC matches it like eager data)
 * and marked in `kind`: the convention of the hardware tag list (tm_list.h). */
inline WireHeader rndv_request_header(uint64_t tag) {
    return WireHeader{IBV_TMH_EAGER, static_cast<uint8_t>(Kind::kRndvRequest), 0, 0, 0,
                      htobe64(tag)};
}

inline WireHeader rndv_cancel_header(uint32_t op) {
    return WireHeader{IBV_TMH_NO_TAG, static_cast<uint8_t>(Kind::kRndvCancel), 0, 0, htobe32(op), 0};
}

inline WireHeader probe_header() {
    return WireHeader{IBV_TMH_NO_TAG, static_cast<uint8_t>(Kind::kProbe), 0, 0, 0, 0};
}

inline WireHeader rndv_failed_header(uint32_t op) {
    return WireHeader{IBV_TMH_NO_TAG, static_cast<uint8_t>(Kind::kRndvFailed), 0, 0, htobe32(op), 0};
}

/* Address of an iface's port: what a peer needs to build the path to it. */
struct DeviceAddress {
    uint8_t  roce;    /* 1: Ethernet link layer (GID routed), 0: InfiniBand (LID) */
    uint8_t  mtu;     /* enum ibv_mtu of the port */
    uint16_t lid;
    uint8_t  gid[16];
};
static_assert(sizeof(DeviceAddress) == 20, "device address layout");

/* Address of an endpoint: its queue pair, and the largest SEND its iface
 * receives (SEG_SIZE), which the other side must not exceed. */
struct EpAddress {
    uint32_t qp_num;
    uint32_t seg_size;
};
static_assert(sizeof(EpAddress) == 8, "endpoint address layout");

/* tm_dc (on-demand provider): an iface's address -- the UD queue pair its
 * connection requests go to, and an id that tells its incarnations apart.
 * `provider` (DcProvider, dc_provider.h) names the provider that wrote it:
 * 0 for on-demand, as the byte always was; an iface refuses the address of
 * another provider, whose other fields mean something else. */
struct IfaceAddress {
    uint32_t ud_qpn;
    uint8_t  provider;
    uint8_t  reserved[3];
    uint64_t uid;
};
static_assert(offsetof(IfaceAddress, provider) == 4, "provider byte after the queue pair");
static_assert(sizeof(IfaceAddress) == 16, "iface address layout");

/* tm_dc connection datagrams (UdChannel): an initiator asks a target iface
 * for a queue pair bound to its own (kConnRequest, repeated until answered),
 * the target answers with it (kConnReply, again for a repeated request), and
 * the initiator lets it go when its endpoint goes or its queue pair is
 * evicted (kDisconnect, repeated until the target acknowledges it with
 * kDisconnectAck, which it sends whether or not it still had that end).
 * uct_ep_check on an endpoint without a connection asks the target iface
 * whether it lives (kPing: conn_id is the target's uid, rc_qpn a sequence
 * number; the target answers kPong with the same fields if it is that iface). */
enum class ConnKind : uint8_t {
    kConnRequest   = 1,
    kConnReply     = 2,
    kDisconnect    = 3,
    kDisconnectAck = 4,
    kPing          = 5,
    kPong          = 6,
};
inline constexpr uint8_t kConnVersion = 1;

struct ConnMessage {
    ConnKind      kind;
    uint8_t       version;
    uint16_t      reserved;
    uint32_t      rc_qpn;    /* the sender's RC QP of this connection */
    uint32_t      seg_size;  /* the largest message the sender receives */
    uint32_t      reply_qpn; /* the sender's UD QP */
    uint64_t      uid;       /* the initiator's iface */
    uint64_t      conn_id;   /* the initiator's name for the connection */
    DeviceAddress dev;       /* the sender's port */
    uint32_t      reserved2;
};
static_assert(sizeof(ConnMessage) == 56, "connection message layout");

}  // namespace ib
}  // namespace uct_tm

#endif
