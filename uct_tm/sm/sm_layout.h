/*
 * Layout of a tm_sm iface's shared-memory segment. Every field a peer can
 * write is re-validated by whoever reads it; geometry is copied out once,
 * after validation, and never re-read from shared memory.
 *
 *   +----------------------+  0
 *   | SegmentHeader        |  geometry (immutable once published), FIFO tail/head
 *   +----------------------+  fifo_offset
 *   | FIFO elements        |  fifo_elems x elem_size, receive queue of the owner
 *   +----------------------+  descs_offset
 *   | receive descriptors  |  num_descs x desc_stride: payloads larger than an
 *   |                      |  element; one is attached to each FIFO element
 *   +----------------------+  peers_offset
 *   | PeerSlot[max_peers]  |  senders announce their own segment here
 *   +----------------------+  rndv_offset
 *   | RndvSlot[rndv_slots] |  state of the owner's outgoing rendezvous sends
 *   +----------------------+
 */
#ifndef UCT_TM_SM_SM_LAYOUT_H_
#define UCT_TM_SM_SM_LAYOUT_H_

#include "base/shm_segment.h"

#include <ucs/sys/compiler_def.h>

#include <atomic>
#include <cstddef>
#include <cstdint>

namespace uct_tm {
namespace sm {

inline constexpr uint64_t kSegmentMagic   = 0x6d735f6d745f7375ull; /* "us_tm_sm" */
inline constexpr uint32_t kLayoutVersion  = 8;
inline constexpr size_t   kCacheLine      = 64;
inline constexpr uint64_t kStateReady     = 1ull << 63;
inline constexpr uint64_t kStateSkipped   = 1ull << 62;
inline constexpr uint64_t kStateSeqMask   = kStateSkipped - 1;

/* Immutable geometry, as published by the owner and checked by peers. */
struct Geometry {
    uint32_t fifo_elems;      /* power of two */
    uint32_t elem_size;       /* multiple of the cache line */
    uint64_t fifo_offset;
    uint32_t num_descs;
    uint32_t desc_stride;     /* multiple of the cache line */
    uint64_t descs_offset;
    uint32_t desc_payload;    /* payload offset inside a descriptor */
    uint32_t seg_size;        /* payload bytes of a descriptor */
    uint32_t max_peers;
    uint32_t rndv_slots;
    uint64_t peers_offset;
    uint64_t rndv_offset;
    uint32_t staging_chunks;     /* pipelined copies when CMA is not allowed */
    uint32_t staging_chunk_size; /* multiple of the page size */
    uint64_t staging_offset;     /* staging_chunks x staging_chunk_size */
    uint64_t staging_states_offset; /* staging_chunks x StagingState */
    uint64_t total_size;
};

/* The bytes from the segment's start through its descriptors: what every
 * eager message touches, so what both sides map in at once (at most 64 MiB,
 * whatever a peer's header claims). */
inline uint64_t prefault_length(const Geometry &g) {
    constexpr uint64_t kMax = uint64_t{64} << 20;
    const uint64_t     end  = g.descs_offset + uint64_t{g.num_descs} * g.desc_stride;
    return (end < kMax) ? end : kMax;
}

/* Reads a segment's FIFO and descriptors once (ShmSegment::touch), before
 * the first message of several fragments through it, on either side: such
 * a message reaches the spare descriptors that single-descriptor messages
 * leave untouched, and on some hypervisors each page's first access traps
 * (docs/tm_sm.md), once here instead of in each of the first few hundred
 * messages. */
class DescriptorTouch {
  public:
    void before_fragments(const ShmSegment &segment, const Geometry &geometry) {
        if (ucs_unlikely(!done_)) {
            done_ = true;
            segment.touch(prefault_length(geometry));
        }
    }

  private:
    bool done_ = false;
};

struct SegmentHeader {
    uint64_t magic;
    uint32_t version;
    int32_t  pid;
    uint32_t uid;
    uint32_t iface_serial;
    uint64_t boot_id;
    Geometry geometry;

    alignas(kCacheLine) std::atomic<uint64_t> tail; /* next sequence senders claim */
    alignas(kCacheLine) std::atomic<uint64_t> head; /* next sequence the owner reads */
    alignas(kCacheLine) std::atomic<uint32_t> closed; /* owner is going away */
    /* Elements the owner skipped (their sender died): senders publish by a
     * plain store unless this moved since their claim (sm_fifo.h). Written
     * only on a skip, so its line stays in every sender's cache. */
    alignas(kCacheLine) std::atomic<uint64_t> skips;
};

/* Kinds of FIFO elements. */
enum class Kind : uint8_t {
    kDropped = 0, /* claimed, then given up by its sender: skip */
    kAm      = 1, /* active message: aux = am id */
    kTagEager,    /* tagged eager fragment: tag, imm (last fragment only) */
    kTagRndv,     /* tagged rendezvous (tag_rndv_zcopy): RndvInfo + header */
    kTagRndvReq,  /* software rendezvous request (tag_rndv_request): header */
    /* Answers name an operation of the process they go to by its token
     * (imm) and carry the token's proof (tag; base/token_proof.h). */
    kRndvFin,  /* receiver finished reading a rendezvous send: aux = status */
    kRndvRtr,  /* receiver invites the sender to write pieces of a rendezvous */
    kPullReq,  /* "copy this range of your memory into my staging chunks": PullRequest */
    kPullNack, /* owner refuses or abandons a pull: imm = pull token, aux = status */
    /* a getter invites the key's owner to write pieces of a get_zcopy: imm =
     * the token of the getter's slot describing it, tag = the source address */
    kGetRtr,
    kLast
};

/* Element flags. */
enum : uint8_t {
    kFlagDesc  = 1u << 0, /* payload is in the attached descriptor, not inline */
    kFlagFirst = 1u << 1, /* first fragment of a message */
    kFlagMore  = 1u << 2, /* more fragments follow in the next elements */
};

struct alignas(8) ElemHeader {
    std::atomic<uint64_t> state;  /* sequence | kStateReady */
    Kind                  kind;
    uint8_t               flags;
    uint16_t              peer;   /* sender's slot in the owner's peer table */
    uint32_t              length; /* payload bytes of this element */
    uint32_t              desc;   /* attached descriptor (owner writes, senders read) */
    uint32_t              aux;
    uint64_t              tag;
    uint64_t              imm;
};
static_assert(sizeof(ElemHeader) == 40, "FIFO element header");

/* Payload prefix of a kTagRndv element. */
struct RndvInfo {
    uint64_t op_token; /* RndvSlot index | generation << 32 */
    uint64_t address;  /* sender's buffer */
    uint64_t length;
    uint32_t header_length;
    uint32_t flags;      /* kRndvInShm */
    ShmId    shm;        /* kRndvInShm: the buffer is MD-allocated shared memory */
    uint64_t shm_offset; /* of `address` in that segment */
    uint64_t proof;      /* of op_token: answers to the send must carry it */
};
static_assert(sizeof(RndvInfo) == 72, "rendezvous info");
inline constexpr uint32_t kRndvInShm = 1u << 0;

/* Payload of a kPullReq element: the owner of [address, address + length)
 * copies it, piece by piece, into the requester's staging chunks. */
inline constexpr uint32_t kPullMaxChunks = 4;
struct PullRequest {
    uint64_t pull_token; /* requester's pull index | generation << 32 */
    uint64_t address;
    uint64_t length;
    uint64_t pull_proof; /* of pull_token: a NACK must carry it */
    uint64_t rndv_token; /* non-zero: the range is this rendezvous send of the owner's */
    uint64_t rndv_proof; /* of rndv_token, as the owner's RTS gave it */
    uint32_t piece_size; /* = the requester's staging chunk size */
    uint16_t nchunks;
    uint16_t chunk[kPullMaxChunks];
    uint16_t reserved;
};
static_assert(sizeof(PullRequest) == 64, "pull request");
static_assert(sizeof(PullRequest) <= 2 * kCacheLine - sizeof(ElemHeader),
              "a pull request fits inline in the smallest FIFO element");

/* One staging chunk's hand-over word, in the requester's segment:
 * (generation << 40) | (piece << 2) | mark. The owner of the data claims a
 * free chunk (compare-and-swap to kWriting) before it writes the piece, so
 * that a requester allowed to read the owner's memory itself may revoke the
 * piece the owner has not claimed (kRevoked) and copy the rest alone. The
 * generation is the pull's, so a stale owner never matches. */
enum class StagingMark : uint64_t { kFree = 0, kWriting = 1, kReady = 2, kRevoked = 3 };
struct alignas(kCacheLine) StagingState {
    std::atomic<uint64_t> word;
};
inline uint64_t staging_word(uint32_t gen, uint64_t piece, StagingMark mark) {
    return (uint64_t{gen & 0xffffff} << 40) | (piece << 2) | static_cast<uint64_t>(mark);
}
inline uint64_t staging_free(uint32_t gen, uint64_t piece) {
    return staging_word(gen, piece, StagingMark::kFree);
}
inline uint64_t staging_ready(uint32_t gen, uint64_t piece) {
    return staging_word(gen, piece, StagingMark::kReady);
}
inline uint32_t    staging_gen(uint64_t word) { return static_cast<uint32_t>(word >> 40); }
inline StagingMark staging_mark(uint64_t word) { return static_cast<StagingMark>(word & 3); }

/* A sender's entry in the owner's peer table. */
struct alignas(kCacheLine) PeerSlot {
    std::atomic<uint32_t> state; /* kPeerFree, or generation << 2 | kPeerUsed */
    uint32_t              iface_serial;
    ShmId                 segment; /* the sender's own segment */
};
inline constexpr uint32_t kPeerFree    = 0;
inline constexpr uint32_t kPeerClaimed = 1; /* being filled */
inline constexpr uint32_t kPeerUsed    = 2;

/* State of one outgoing rendezvous send, in the sender's segment, shared
 * with its receiver.
 *
 * `word` keeps a cancel and the receiver's copy from overlapping:
 *   POSTED -> READING (receiver, CAS) -> DONE (receiver) ; POSTED -> FREE (cancel)
 *   POSTED -> REJECTED (a receiver that cannot send the FIN: the sender polls)
 * packed as generation << 4 | state.
 *
 * The copy itself is split between both processes when the message is big
 * enough: the receiver describes its buffers here (RTR), then the receiver
 * reads pieces from the back with process_vm_readv while the sender writes
 * pieces from the front with process_vm_writev, each claiming one piece at a
 * time from the two ends of `claim`. A sender that does not progress leaves
 * every piece to the receiver: never slower than a plain CMA read. */
inline constexpr uint32_t kRndvMaxIov = 8;
/* Most iov entries a send, get or put takes. */
inline constexpr size_t kMaxSendIov = 16;

struct RemoteIov {
    uint64_t address;
    uint64_t length;
};

struct alignas(kCacheLine) RndvSlot {
    std::atomic<uint32_t> word;
    std::atomic<uint32_t> mode;         /* receiver: kRndvModeCma, or kRndvModePull (no
                                           reads of the sender's memory: cancel needs no wait) */
    uint32_t              piece_size;   /* RTR: bytes per piece */
    std::atomic<uint64_t> claim;        /* RTR: unclaimed pieces (SplitClaim) */
    std::atomic<uint64_t> sender_done;  /* pieces the sender wrote, its error (SplitDone) */
    int32_t               receiver_pid; /* RTR */
    uint32_t              iovcnt;       /* RTR: receiver buffers */
    uint64_t              length;       /* RTR: bytes to move (min of message and buffers) */
    RemoteIov             iov[kRndvMaxIov];
};
enum : uint32_t { kRndvFree = 0, kRndvPosted = 1, kRndvReading = 2, kRndvDone = 3, kRndvRejected = 4 };
enum : uint32_t { kRndvModeCma = 0, kRndvModePull = 1 };

inline uint32_t rndv_word(uint32_t gen, uint32_t state) { return (gen << 4) | state; }

/* The moves of `word` by compare-and-swap, within one generation: the
 * receiver locks POSTED -> READING and gives back READING -> DONE (a
 * receive) or READING -> POSTED (a get); the sender withdraws POSTED ->
 * FREE, or revokes READING -> FREE; a receiver that cannot answer refuses
 * POSTED -> REJECTED. (Publishing and finishing a send store the word.) */
constexpr bool rndv_move_allowed(uint32_t from, uint32_t to) {
    if (from == kRndvPosted) {
        return (to == kRndvReading) || (to == kRndvFree) || (to == kRndvRejected);
    }
    return (from == kRndvReading) && ((to == kRndvDone) || (to == kRndvPosted) || (to == kRndvFree));
}

inline size_t align_up(size_t value, size_t align) { return (value + align - 1) & ~(align - 1); }

/* Lays out a segment; false if the parameters do not fit. With
 * `page_end_payloads` each descriptor's payload ends on a page boundary
 * (the headroom in front grows to fill the page): senders can pack into it
 * through a window (sm_pack_windows.h). */
bool make_geometry(uint32_t fifo_elems, uint32_t elem_size, uint32_t spare_descs, uint32_t seg_size,
                   size_t rx_headroom, uint32_t max_peers, uint32_t rndv_slots,
                   uint32_t staging_chunks, uint32_t staging_chunk_size, bool page_end_payloads,
                   Geometry *out);

/* Checks a geometry read from a peer's segment of `segment_size` bytes. */
bool valid_geometry(const Geometry &g, uint64_t segment_size);

/* This host's boot identity: peers with another one are not reachable. */
uint64_t boot_id();

}  // namespace sm
}  // namespace uct_tm

#endif
