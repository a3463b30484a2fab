/*
 * The hardware tag list seam: the narrow interface between the hardware
 * tag-matching driver (HwTagEngine) and a NIC's tag-matching engine.
 *
 * It is shaped like the rdma-core TM verbs, not like our software matcher,
 * so that the verbs implementation is a thin translation and the device
 * model (TmModel) has to reproduce exactly what the verbs expose:
 *
 *  - list operations (ibv_post_srq_ops): ADD(tag, mask, one sge,
 *    recv_wr_id) returns a handle at post time; DEL(handle); SYNC. Each may
 *    carry the software unexpected count (IBV_OPS_TM_SYNC) and may be
 *    signaled (IBV_OPS_SIGNALED). They execute asynchronously, in posting
 *    order; at most max_ops are outstanding;
 *  - untagged receive buffers (ibv_post_srq_recv) that take every message the
 *    engine did not match (unexpected tagged, NO_TAG, FIN), whole, headers
 *    included;
 *  - completions (ibv_poll_cq_ex + ibv_wc_read_tm_info), see TmCompletion.
 *
 * Implementations: TmModel (tm_model.h, a software model of the engine with
 * a scheduler that tests drive) and TmVerbsList (tm_verbs_list.h, a TM SRQ
 * through rdma-core; built only with verbs, untested on hardware).
 * HwTagEngine is a template over the implementation (no virtual call on the
 * data path); is_tm_list<> below states what it needs.
 */
#ifndef UCT_TM_TAG_TM_LIST_H_
#define UCT_TM_TAG_TM_LIST_H_

#include <ucs/type/status.h>

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <type_traits>
#include <utility>

namespace uct_tm {

/* ---- wire headers (infiniband/tm_types.h, mirrored so the model builds
 *      without rdma-core; tm_verbs_list.cc static_asserts the layouts) ---- */

enum class TmhOp : uint8_t {
    kNoTag = 0, /* not tagged: always delivered to an untagged buffer */
    kRndv  = 1, /* TMH + RVH + user header: the receiver reads the data */
    kFin   = 2, /* rendezvous done (sent by the receiver's HW or SW) */
    kEager = 3, /* TMH + payload */
};

/* struct ibv_tmh: multi-byte fields big-endian on the wire. */
struct TmHeader {
    uint8_t  opcode;
    uint8_t  reserved[3];
    uint32_t app_ctx_be;
    uint64_t tag_be;
};
static_assert(sizeof(TmHeader) == 16, "ibv_tmh is 16 bytes");

/* struct ibv_rvh */
struct RndvHeader {
    uint64_t va_be;
    uint32_t rkey_be;
    uint32_t len_be;
};
static_assert(sizeof(RndvHeader) == 16, "ibv_rvh is 16 bytes");

/*
 * Sender conventions the driver relies on (what a matched message's
 * completion cannot tell through verbs, the sender makes unambiguous):
 *  - eager: TMH EAGER + payload; the 64-bit UCT imm travels as
 *    TMH.app_ctx (high half) and the immediate (low half). Sent with an
 *    immediate when the low half is not 0, and ALWAYS when the message is
 *    longer than one path MTU (so a DATA_VALID without immediate means a
 *    rendezvous);
 *  - software rendezvous request (uct_ep_tag_rndv_request): TMH EAGER with
 *    reserved[0] = kTmhRndvRequest + the header, one packet, immediate 0
 *    (expected: one MATCH|DATA_VALID completion with immediate 0;
 *    unexpected: told by the marker);
 *  - hardware rendezvous: TMH RNDV + RVH + header, no immediate; app_ctx
 *    names the sender's operation and comes back in the FIN.
 * The marker byte is the one tm_rc's wire header calls `kind`
 * (Kind::kRndvRequest = 2); the engine ignores reserved bytes.
 */
inline constexpr uint8_t kTmhRndvRequest = 2;

inline TmHeader make_tmh(TmhOp op, uint64_t tag, uint32_t app_ctx) {
    TmHeader h{};
    h.opcode     = static_cast<uint8_t>(op);
    h.app_ctx_be = __builtin_bswap32(app_ctx);
    h.tag_be     = __builtin_bswap64(tag);
    return h;
}

inline TmHeader make_rndv_request_tmh(uint64_t tag) {
    TmHeader h    = make_tmh(TmhOp::kEager, tag, 0);
    h.reserved[0] = kTmhRndvRequest;
    return h;
}
inline uint64_t tmh_tag(const TmHeader &h) { return __builtin_bswap64(h.tag_be); }
inline uint32_t tmh_app_ctx(const TmHeader &h) { return __builtin_bswap32(h.app_ctx_be); }

inline RndvHeader make_rvh(uint64_t va, uint32_t rkey, uint32_t len) {
    RndvHeader r;
    r.va_be   = __builtin_bswap64(va);
    r.rkey_be = __builtin_bswap32(rkey);
    r.len_be  = __builtin_bswap32(len);
    return r;
}
inline uint64_t rvh_va(const RndvHeader &r) { return __builtin_bswap64(r.va_be); }
inline uint32_t rvh_rkey(const RndvHeader &r) { return __builtin_bswap32(r.rkey_be); }
inline uint32_t rvh_len(const RndvHeader &r) { return __builtin_bswap32(r.len_be); }

/* ---- list operations ---- */

struct TmSge {
    void    *addr   = nullptr;
    uint32_t length = 0;
    uint32_t lkey   = 0;
};

enum class TmOpcode : uint8_t { kAdd, kDel, kSync };

enum : uint8_t {
    kTmOpSignaled  = 1u << 0, /* IBV_OPS_SIGNALED: a completion is reported */
    kTmOpSyncCount = 1u << 1, /* IBV_OPS_TM_SYNC: unexpected_cnt is valid */
};

struct TmOp {
    TmOpcode opcode         = TmOpcode::kSync;
    uint8_t  flags          = 0;
    uint64_t wr_id          = 0; /* identifies the op's own completion */
    uint32_t unexpected_cnt = 0; /* unexpected messages software has handled */
    uint32_t handle         = 0; /* out for ADD, in for DEL */
    /* ADD */
    uint64_t recv_wr_id = 0; /* identifies the tagged buffer in receive completions */
    uint64_t tag        = 0;
    uint64_t mask       = 0; /* matches when (TMH.tag & mask) == (tag & mask) */
    bool     has_sge    = false;
    TmSge    sge;
};

/* ---- completions ---- */

enum class TmCqeOpcode : uint8_t {
    kAdd,    /* IBV_WC_TM_ADD */
    kDel,    /* IBV_WC_TM_DEL (status kTmErr: the tag was consumed first) */
    kSync,   /* IBV_WC_TM_SYNC */
    kRecv,   /* IBV_WC_RECV: unexpected tagged message in an untagged buffer */
    kNoTag,  /* IBV_WC_TM_NO_TAG: TMH opcode NO_TAG or FIN, in an untagged buffer */
    kTmRecv, /* IBV_WC_TM_RECV: about a tagged buffer (MATCH and/or DATA_VALID) */
};

enum class TmCqeStatus : uint8_t {
    kSuccess,        /* IBV_WC_SUCCESS */
    kTmErr,          /* IBV_WC_TM_ERR */
    kRndvIncomplete, /* IBV_WC_TM_RNDV_INCOMPLETE: TMH+RVH[+hdr] in the tagged buffer */
    kLengthError,    /* IBV_WC_LOC_LEN_ERR: the message did not fit the buffer */
    kError,          /* any other failure (flush, remote access, ...) */
};

enum : uint8_t {
    kTmCqeSyncReq   = 1u << 0, /* IBV_WC_TM_SYNC_REQ: post a SYNC with the count */
    kTmCqeMatch     = 1u << 1, /* IBV_WC_TM_MATCH: tag, priv valid */
    kTmCqeDataValid = 1u << 2, /* IBV_WC_TM_DATA_VALID: the data is in memory */
    kTmCqeWithImm   = 1u << 3, /* IBV_WC_WITH_IMM: imm valid */
    /* The matched message is a rendezvous request (TMH opcode RNDV): its
     * completion reports imm 0. Verbs does not expose the TMH of a matched
     * message; TmVerbsList infers it from a DATA_VALID without MATCH and
     * without immediate, so senders must give every multi-packet eager an
     * immediate (docs/tm_hw_list.md). */
    kTmCqeRndv = 1u << 4,
};

struct TmCompletion {
    uint64_t    wr_id    = 0; /* op wr_id, recv_wr_id, or the untagged buffer's wr_id */
    TmCqeOpcode opcode   = TmCqeOpcode::kSync;
    TmCqeStatus status   = TmCqeStatus::kSuccess;
    uint8_t     flags    = 0;
    uint32_t    byte_len = 0;
    uint32_t    imm      = 0; /* host order */
    uint32_t    src_qp   = 0; /* the sender's connection */
    uint64_t    tag      = 0; /* ibv_wc_tm_info.tag (with kTmCqeMatch) */
    uint32_t    priv     = 0; /* ibv_wc_tm_info.priv = TMH.app_ctx */
};

struct TmCaps {
    uint32_t max_num_tags = 0; /* tagged buffers in the list at once */
    uint32_t max_ops      = 0; /* outstanding list operations */
    uint32_t max_sge      = 1;
    uint32_t max_rndv_hdr = 0; /* TMH + RVH + user header */
};

/*
 * What HwTagEngine needs from a tag list implementation L:
 *
 *   const TmCaps &L::caps() const;
 *   ucs_status_t L::post_op(TmOp &op);
 *       UCS_OK (ADD: op.handle set), UCS_ERR_EXCEEDS_LIMIT (list full),
 *       UCS_ERR_NO_RESOURCE (max_ops outstanding), UCS_ERR_INVALID_PARAM.
 *   ucs_status_t L::post_recv(uint64_t wr_id, const TmSge &sge);
 *   unsigned L::poll(TmCompletion *out, unsigned max);
 */
template <typename L, typename = void> struct is_tm_list : std::false_type {};
template <typename L>
struct is_tm_list<
    L, std::void_t<decltype(std::declval<const L &>().caps()),
                   decltype(std::declval<L &>().post_op(std::declval<TmOp &>())),
                   decltype(std::declval<L &>().post_recv(uint64_t{}, std::declval<const TmSge &>())),
                   decltype(std::declval<L &>().poll(static_cast<TmCompletion *>(nullptr), 0u))>>
    : std::bool_constant<
          std::is_same_v<decltype(std::declval<L &>().post_op(std::declval<TmOp &>())), ucs_status_t> &&
          std::is_same_v<decltype(std::declval<L &>().poll(static_cast<TmCompletion *>(nullptr), 0u)),
                         unsigned>> {};

}  // namespace uct_tm

#endif
