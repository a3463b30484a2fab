/*
 * SmStagingCopies: a tm_sm iface's pipelined copies through shared-memory
 * staging chunks, for peers that CMA cannot reach.
 *
 * It holds both ends: our pulls (a rendezvous receive or a get_zcopy that
 * lends our staging chunks to the owner of the data and copies them out) and
 * our pushes (a peer's pull of our memory: we copy it into that peer's
 * chunks), and the free list of our chunks. A rendezvous pull is finished
 * through SmRendezvous, which also tells whether a push serves a send of ours.
 */
#ifndef UCT_TM_SM_SM_STAGING_H_
#define UCT_TM_SM_SM_STAGING_H_

#include "base/token_proof.h"
#include "sm_copy_choice.h"
#include "sm_layout.h"
#include "sm_link.h"

#include "tag/tag_engine.h"

#include <uct/api/uct.h>

#include <sys/uio.h>
#include <vector>

namespace uct_tm {
namespace sm {

class SmRendezvous;

/* A pipelined copy this iface asked a peer for (CMA not allowed): the peer
 * fills our staging chunks, we copy them out. Free (active false) or
 * active; its chunks are lent (nchunks > 0) from the first request on. */
struct Pull {
    enum class Purpose : uint8_t { kRndv, kGet };
    bool         active = false;
    Purpose      purpose = Purpose::kRndv;
    uint32_t     gen    = 1;
    RemotePeer  *owner  = nullptr;
    struct iovec dest[kRndvMaxIov];
    size_t       ndest  = 0;
    size_t       length = 0; /* bytes to copy */
    uint64_t     address    = 0; /* in the owner's memory */
    uint64_t     rndv_token = 0; /* non-zero: the owner's rendezvous send */
    uint32_t     pieces = 0;
    uint32_t     next   = 0; /* next piece to copy out */
    uint16_t     chunk[kPullMaxChunks];
    uint16_t     nchunks = 0;
    ucs_status_t status  = UCS_OK;
    /* kRndv: finish the receive and FIN the sender */
    TagEngine::Recv *recv = nullptr;
    uct_tag_t        tag  = 0;
    size_t           msg_length = 0;
    RndvSlot        *slot  = nullptr;
    uint64_t         token = 0;
    uint64_t         rndv_proof = 0; /* of token / rndv_token, from the owner's RTS */
    /* kGet */
    uct_completion_t *comp = nullptr;
    SmEp             *ep   = nullptr;
    CopyTimer         timer   = {}; /* CopyChoice picked it: timed from its chunks' arrival */
    uint32_t          sharing = 1; /* pulls active when its chunks came (this one included) */
    /* CMA may read the owner's range (registered memory, not a send): an
     * owner that leaves us waiting (owner_idle) has the rest read by us. */
    bool     takeover      = false;
    uint64_t waiting_since = 0; /* monotonic_ns() of its request */
};

/* The other side of a peer's Pull: we copy our memory into its chunks. */
struct Push {
    RemotePeer *puller;
    uint64_t    pull_token;
    uint64_t    pull_proof; /* our NACKs carry it */
    const char *src;
    size_t      length;
    uint32_t    piece;
    uint32_t    pieces;
    uint32_t    next;
    uint16_t    chunk[kPullMaxChunks];
    uint16_t    nchunks;
    uint64_t    rndv_token; /* non-zero: serves this rendezvous send of ours */
};

class SmStagingCopies {
  public:
    SmStagingCopies(SmIfaceLink iface, SmRendezvous &rndv) : iface_(iface), rndv_(rndv) {}
    /* Our chunks are those of `geometry` in our segment at `segment`;
     * pushes must come from memory registered with `md`. */
    ucs_status_t init(uct_md_h md, const Geometry &geometry, char *segment);

    /* Asks `pull.owner` to copy [address, address + pull.length) into
     * `pull.dest` through our staging chunks; `pull` carries the purpose
     * and completion. */
    ucs_status_t start_pull(Pull pull, uint64_t address, uint64_t rndv_token);
    void         receive_request(const Message &m);
    void         receive_nack(const Message &m);
    /* Withdraws the pushes serving rendezvous send `rndv_token` (being
     * cancelled): their pullers learn it by a NACK. */
    void         abort_pushes(uint64_t rndv_token, ucs_status_t status);
    unsigned     progress();
    bool         busy() const { return (pulls_active_ > 0) || !pushes_.empty(); }
    bool         pulls_idle() const { return pulls_active_ == 0; }
    /* Pulls whose rest we read ourselves: their owner kept us waiting. */
    uint64_t taken_over() const { return taken_over_; }

    /* A pipelined copy the owner keeps waiting this long (it computes, or
     * runs no progress at all: an RMA target) is finished by CMA; an owner
     * in progress hands a 64 KiB piece over within a few microseconds. One
     * busy reading a copy of its own by CMA (both ways at once: osu_bibw)
     * stays away as long as that takes, so the wait grows with what is
     * left at kTakeoverBytesPerNs (a CMA read's rate), lest each side's
     * takeover make the other's. */
    static constexpr uint64_t kTakeoverNs         = 50000;
    static constexpr uint64_t kTakeoverBytesPerNs = 8;
    /* A rendezvous receive force-cancelled: its pull keeps draining the
     * owner's pieces (the owner and its FIN must not wait) into no buffer. */
    void         orphan_receive(const TagEngine::Recv *recv);
    /* `ep`'s pipelined gets complete as cancelled (flush with CANCEL). */
    void         cancel_gets(SmEp *ep);
    /* `ep` goes: its gets finish unreported. */
    void         forget_ep(SmEp *ep);

  private:
    /* Lends chunks to pull `index` and asks its owner to fill them; a pull
     * finding no free chunk waits for one in progress(). */
    void          request(size_t index);
    void          finish(size_t index, ucs_status_t status);
    /* Gives back a chunk of pull `gen` that ended before its owner was
     * through (cancelled, or taken over); one the owner is writing into
     * waits in draining_ until it is done. */
    void return_chunk(uint16_t chunk, uint32_t gen, RemotePeer *owner);
    void drain_chunks();
    /* Copies out the pieces of pull `index` its owner made ready; false
     * when it waits for the owner. */
    bool copy_out(size_t index, unsigned *count);
    /* Whether pull.owner filled none of our takeover pulls' chunks, nor
     * this pull's since its request, for the wait above. */
    bool owner_idle(const Pull &pull) const;
    /* Revokes the piece pull `index` waits for and reads the rest by CMA;
     * false if the owner claimed that piece meanwhile (it is running). */
    bool take_over(size_t index);
    /* Pushes piece after piece of `push` while its puller frees chunks;
     * false when the pull is over without us (revoked, or its chunks reused). */
    bool          push_pieces(Push &push, unsigned *count);
    StagingState *own_state(uint32_t i) const { return states_ + i; }
    char         *own_chunk(uint32_t i) const { return chunks_ + size_t{i} * chunk_size_; }

    SmIfaceLink   iface_;
    SmRendezvous &rndv_;
    uct_md_h      md_         = nullptr;
    StagingState *states_     = nullptr;
    char         *chunks_     = nullptr;
    uint32_t      nchunks_    = 0;
    uint32_t      chunk_size_ = 0;

    std::vector<Pull>     pulls_;
    size_t                pulls_active_ = 0;
    std::vector<uint16_t> free_chunks_; /* our staging chunks not lent to a pull */
    struct Draining {
        uint16_t    chunk;
        uint64_t    word; /* the owner's claim in it */
        RemotePeer *owner;
    };
    std::vector<Draining> draining_; /* returned while their owner wrote into them */
    std::vector<Push>     pushes_;
    uint32_t              serial_ = 0;
    uint64_t              taken_over_ = 0;
    TokenProof            proof_; /* of our pulls' tokens */
};

}  // namespace sm
}  // namespace uct_tm

#endif
