/*
 * Pipelined copies through shared memory, for peers that CMA cannot reach
 * (ptrace restrictions, non-dumpable processes, UCX_TM_SM_CMA=n).
 *
 * The side that wants data (the puller: a rendezvous receiver, or get_zcopy)
 * lends up to kPullMaxChunks of its staging chunks and sends a PullRequest.
 * The owner of the data checks that it may hand out that range (a rendezvous
 * send of its own, or memory registered with its MD), then copies piece after
 * piece into the chunks as the puller frees them; the StagingState words
 * hand each chunk back and forth. Both sides work from progress, so the two
 * copies overlap; the owner's data never becomes readable by the puller
 * outside what it copies.
 */
#include "sm_staging.h"

#include "sm_iface.h"
#include "sm_md.h"
#include "sm_rndv.h"

#include "common/alloc_status.h"
#include "common/ucs_assert.h"

#include <ucs/debug/log_def.h>

#include <algorithm>
#include <cstring>
#include <new>

namespace uct_tm {
namespace sm {
namespace {

uint32_t pull_index(uint64_t token) { return static_cast<uint32_t>(token); }
uint32_t pull_gen(uint64_t token) { return static_cast<uint32_t>(token >> 32); }

/* Copies `length` bytes at message offset `offset` out of `src` into an iov list. */
void scatter_into(const struct iovec *dest, size_t ndest, size_t offset, const char *src,
                  size_t length) {
    for (size_t i = 0; (i < ndest) && (length > 0); ++i) {
        if (offset >= dest[i].iov_len) {
            offset -= dest[i].iov_len;
            continue;
        }
        const size_t n = std::min(dest[i].iov_len - offset, length);
        memcpy(static_cast<char *>(dest[i].iov_base) + offset, src, n);
        src += n;
        length -= n;
        offset = 0;
    }
}

}  // namespace

ucs_status_t SmStagingCopies::init(uct_md_h md, const Geometry &geometry, char *segment) {
    md_         = md;
    states_     = reinterpret_cast<StagingState *>(segment + geometry.staging_states_offset);
    chunks_     = segment + geometry.staging_offset;
    nchunks_    = geometry.staging_chunks;
    chunk_size_ = geometry.staging_chunk_size;
    if (!proof_.init()) {
        ucs_error("tm_sm: no random key for pull proofs: %m");
        return UCS_ERR_IO_ERROR;
    }
    const ucs_status_t status = alloc_status([&] {
        free_chunks_.reserve(nchunks_);
        draining_.reserve(nchunks_);
    });
    if (status != UCS_OK) {
        return status;
    }
    for (uint32_t i = nchunks_; i-- > 0;) {
        free_chunks_.push_back(static_cast<uint16_t>(i));
    }
    return UCS_OK;
}

ucs_status_t SmStagingCopies::start_pull(Pull pull, uint64_t address, uint64_t rndv_token) {
    if (nchunks_ == 0) {
        return UCS_ERR_UNSUPPORTED;
    }
    pull.pieces     = static_cast<uint32_t>((pull.length + chunk_size_ - 1) / chunk_size_);
    pull.gen        = ++serial_ & 0xffffff;
    pull.next       = 0;
    pull.nchunks    = 0;
    pull.active     = true;
    pull.address    = address;
    pull.rndv_token = rndv_token;
    size_t index = 0;
    while ((index < pulls_.size()) && pulls_[index].active) {
        ++index;
    }
    if (alloc_status([&] {
            if (index == pulls_.size()) {
                pulls_.emplace_back();
            }
        }) != UCS_OK) {
        return UCS_ERR_NO_MEMORY;
    }
    pulls_[index] = pull;
    ++pulls_active_;
    request(index);
    return UCS_OK;
}

void SmStagingCopies::request(size_t index) {
    Pull &pull = pulls_[index];
    ucs_assertv(pull.active && (pull.nchunks == 0), "pull %zu: active %d, %u chunks lent", index,
                pull.active, pull.nchunks);
    if (pull.pieces == 0) {
        finish(index, UCS_OK);
        return;
    }
    const size_t n = std::min<size_t>({kPullMaxChunks, free_chunks_.size(), pull.pieces});
    if (n == 0) {
        return; /* retried when a chunk is returned */
    }
    PullRequest req{};
    for (size_t j = 0; j < n; ++j) {
        pull.chunk[j] = free_chunks_.back();
        free_chunks_.pop_back();
        own_state(pull.chunk[j])->word.store(staging_free(pull.gen, j), std::memory_order_release);
        req.chunk[j] = pull.chunk[j];
    }
    pull.nchunks    = static_cast<uint16_t>(n);
    if (pull.takeover) {
        pull.waiting_since = monotonic_ns();
    }
    if (pull.timer.started_ns != 0) {
        /* Timed from here, and as one of `sharing` pulls copying at once
         * (several in flight take turns with the owner and with us: each
         * one's time is theirs too); a wait for chunks other pulls hold is
         * queueing behind them, which CMA's copies would have done as well. */
        pull.timer.started_ns = monotonic_ns();
        pull.sharing = static_cast<uint32_t>(pulls_active_);
    }
    req.pull_token  = (uint64_t{pull.gen} << 32) | index;
    req.pull_proof  = proof_.sign(req.pull_token);
    req.address     = pull.address;
    req.length      = pull.length;
    req.rndv_token  = pull.rndv_token;
    req.rndv_proof  = pull.rndv_proof;
    req.piece_size  = chunk_size_;
    req.nchunks     = static_cast<uint16_t>(n);
    ControlMsg msg{Kind::kPullReq, 0, 0};
    msg.length  = sizeof(req);
    msg.payload = req;
    iface_.send_control(pull.owner, msg);
}

void SmStagingCopies::finish(size_t index, ucs_status_t status) {
    ucs_assertv(pulls_[index].active && (pulls_active_ > 0), "pull %zu: active %d, %zu active",
                index, pulls_[index].active, pulls_active_);
    Pull pull = pulls_[index]; /* callbacks below may start new pulls */
    for (uint16_t j = 0; j < pull.nchunks; ++j) {
        if (pull.next == pull.pieces) {
            free_chunks_.push_back(pull.chunk[j]); /* the owner is through */
        } else {
            return_chunk(pull.chunk[j], pull.gen, pull.owner);
        }
    }
    ucs_assert(free_chunks_.size() + draining_.size() <= nchunks_);
    pulls_[index].active = false;
    --pulls_active_;
    rndv_.copied(CopyChoice::kPipelined, pull.length * std::max<uint32_t>(pull.sharing, 1),
                 pull.timer, status);
    if (pull.purpose == Pull::Purpose::kRndv) {
        rndv_.finish_receive(pull.owner, pull.slot, pull.token, pull.rndv_proof, pull.recv,
                             pull.tag, pull.msg_length, status);
        iface_.put_peer(pull.owner);
        return;
    }
    if (pull.ep != nullptr) {
        --pull.ep->gets_outstanding;
    }
    iface_.put_peer(pull.owner);
    complete(pull.comp, status);
}

void SmStagingCopies::return_chunk(uint16_t chunk, uint32_t gen, RemotePeer *owner) {
    /* Revoked: an owner yet to claim it finds it so and stops. */
    const uint64_t word    = own_state(chunk)->word.exchange(staging_word(gen, 0,
                                                                          StagingMark::kRevoked),
                                                             std::memory_order_acq_rel);
    const bool     writing = (staging_gen(word) == gen) &&
                         (staging_mark(word) == StagingMark::kWriting);
    if (!writing || owner->dead()) {
        free_chunks_.push_back(chunk);
        return;
    }
    /* Its owner still copies in, and then marks the piece ready: reused
     * now, that mark would overwrite the next pull's word. */
    draining_.push_back(Draining{chunk, word, owner});
    ++owner->refs;
}

void SmStagingCopies::drain_chunks() {
    for (size_t i = 0; i < draining_.size();) {
        const Draining d = draining_[i];
        if ((own_state(d.chunk)->word.load(std::memory_order_acquire) == d.word) &&
            !d.owner->dead()) {
            ++i;
            continue;
        }
        draining_[i] = draining_.back();
        draining_.pop_back();
        free_chunks_.push_back(d.chunk);
        iface_.put_peer(d.owner);
    }
}

void SmStagingCopies::receive_request(const Message &m) {
    PullRequest req;
    RemotePeer *puller = iface_.peer_of(m.peer);
    if ((m.length < sizeof(req)) || (puller == nullptr)) {
        iface_.drop(m, "malformed pull request");
        return;
    }
    memcpy(&req, m.payload, sizeof(req));
    const Geometry &g  = puller->geometry();
    bool            ok = (req.nchunks >= 1) && (req.nchunks <= kPullMaxChunks) &&
              (req.piece_size == g.staging_chunk_size) && (req.length > 0) &&
              (req.address + req.length > req.address);
    for (uint16_t j = 0; ok && (j < req.nchunks); ++j) {
        ok = req.chunk[j] < g.staging_chunks;
    }
    ucs_status_t status = UCS_ERR_INVALID_PARAM;
    if (ok && (req.rndv_token != 0)) {
        /* A rendezvous send of ours, still outstanding, covering the range. */
        ok     = rndv_.serves(req.rndv_token, req.rndv_proof, puller, req.address, req.length);
        status = ok ? UCS_OK : UCS_ERR_CANCELED;
    } else if (ok) {
        /* Anything else must be memory this process registered for peers. */
        ok     = md_range_registered(md_, req.address, req.length);
        status = ok ? UCS_OK : UCS_ERR_INVALID_ADDR;
        if (!ok) {
            ucs_error("tm_sm: process %d asked for %lu bytes at 0x%lx, which is not registered "
                      "memory: refused", puller->pid(), static_cast<unsigned long>(req.length),
                      static_cast<unsigned long>(req.address));
        }
    }
    if (!ok) {
        iface_.send_control(puller, ControlMsg{Kind::kPullNack, static_cast<uint32_t>(status),
                                               req.pull_token, req.pull_proof});
        return;
    }
    Push push{puller,
              req.pull_token,
              req.pull_proof,
              reinterpret_cast<const char *>(req.address),
              req.length,
              req.piece_size,
              static_cast<uint32_t>((req.length + req.piece_size - 1) / req.piece_size),
              0,
              {},
              req.nchunks,
              req.rndv_token};
    std::copy(req.chunk, req.chunk + req.nchunks, push.chunk);
    if (alloc_status([&] {
            pushes_.push_back(push);
        }) != UCS_OK) {
        iface_.send_control(puller,
                            ControlMsg{Kind::kPullNack, static_cast<uint32_t>(UCS_ERR_NO_MEMORY),
                                       req.pull_token, req.pull_proof});
        return;
    }
    ++puller->refs;
}

void SmStagingCopies::receive_nack(const Message &m) {
    const uint32_t index = pull_index(m.imm);
    if ((index < pulls_.size()) && pulls_[index].active && (pulls_[index].gen == pull_gen(m.imm)) &&
        (iface_.peer_of(m.peer) == pulls_[index].owner) && proof_.valid(m.imm, m.tag)) {
        const auto status = static_cast<ucs_status_t>(static_cast<int32_t>(m.aux));
        finish(index, (status < 0) ? status : UCS_ERR_IO_ERROR);
    }
}

void SmStagingCopies::abort_pushes(uint64_t rndv_token, ucs_status_t status) {
    for (size_t i = 0; i < pushes_.size();) {
        if (pushes_[i].rndv_token != rndv_token) {
            ++i;
            continue;
        }
        const Push push = pushes_[i];
        pushes_.erase(pushes_.begin() + static_cast<ptrdiff_t>(i));
        iface_.send_control(push.puller, ControlMsg{Kind::kPullNack, static_cast<uint32_t>(status),
                                                    push.pull_token, push.pull_proof});
        iface_.put_peer(push.puller);
    }
}

void SmStagingCopies::orphan_receive(const TagEngine::Recv *recv) {
    for (Pull &pull : pulls_) {
        if (pull.active && (pull.purpose == Pull::Purpose::kRndv) && (pull.recv == recv)) {
            pull.ndest = 0;
        }
    }
}

void SmStagingCopies::cancel_gets(SmEp *ep) {
    for (size_t i = 0; i < pulls_.size(); ++i) {
        if (pulls_[i].active && (pulls_[i].purpose == Pull::Purpose::kGet) && (pulls_[i].ep == ep)) {
            finish(i, UCS_ERR_CANCELED);
        }
    }
}

void SmStagingCopies::forget_ep(SmEp *ep) {
    for (Pull &pull : pulls_) {
        if (pull.active && (pull.ep == ep)) {
            pull.ep   = nullptr;
            pull.comp = nullptr;
        }
    }
}

bool SmStagingCopies::copy_out(size_t index, unsigned *count) {
    Pull &pull = pulls_[index];
    while (pull.next < pull.pieces) {
        const uint16_t c     = pull.chunk[pull.next % pull.nchunks];
        StagingState  *state = own_state(c);
        if (state->word.load(std::memory_order_acquire) != staging_ready(pull.gen, pull.next)) {
            return false;
        }
        const size_t offset = size_t{pull.next} * chunk_size_;
        scatter_into(pull.dest, pull.ndest, offset, own_chunk(c),
                     std::min<size_t>(chunk_size_, pull.length - offset));
        state->word.store(staging_free(pull.gen, pull.next + pull.nchunks),
                          std::memory_order_release);
        ++pull.next;
        ++*count;
        if (pull.takeover) {
            pull.owner->pushed_ns = monotonic_ns();
        }
    }
    return true;
}

bool SmStagingCopies::owner_idle(const Pull &pull) const {
    /* An owner filling other pulls of ours first runs: ours waits its turn. */
    const uint64_t since = std::max(pull.waiting_since, pull.owner->pushed_ns);
    const uint64_t left  = pull.length - size_t{pull.next} * chunk_size_;
    return monotonic_ns() - since > std::max(kTakeoverNs, left / kTakeoverBytesPerNs);
}

bool SmStagingCopies::take_over(size_t index) {
    Pull          &pull   = pulls_[index];
    const uint16_t c      = pull.chunk[pull.next % pull.nchunks];
    uint64_t       expect = staging_free(pull.gen, pull.next);
    if (!own_state(c)->word.compare_exchange_strong(
            expect, staging_word(pull.gen, pull.next, StagingMark::kRevoked),
            std::memory_order_acq_rel, std::memory_order_acquire)) {
        return false;
    }
    /* The owner writes pieces in order: it wrote none past this one, and
     * stops at the revoked word (or at another pull's, once we reuse it). */
    const size_t offset = size_t{pull.next} * chunk_size_;
    ++taken_over_;
    finish(index, rndv_.read_by_cma(pull.owner->pid(), pull.dest, pull.ndest, offset,
                                    pull.address + offset, pull.length - offset));
    return true;
}

bool SmStagingCopies::push_pieces(Push &push, unsigned *count) {
    const uint32_t gen = pull_gen(push.pull_token) & 0xffffff;
    while (push.next < push.pieces) {
        const uint16_t c      = push.chunk[push.next % push.nchunks];
        StagingState  *state  = push.puller->staging_state(c);
        uint64_t       expect = staging_free(gen, push.next);
        if (!state->word.compare_exchange_strong(
                expect, staging_word(gen, push.next, StagingMark::kWriting),
                std::memory_order_acquire, std::memory_order_acquire)) {
            /* The previous piece still in the chunk: wait. Revoked, or
             * another pull's word: the puller no longer waits for us. */
            return (staging_gen(expect) == gen) && (staging_mark(expect) != StagingMark::kRevoked);
        }
        const size_t offset = size_t{push.next} * push.piece;
        memcpy(push.puller->staging_chunk(c), push.src + offset,
               std::min<size_t>(push.piece, push.length - offset));
        state->word.store(staging_ready(gen, push.next), std::memory_order_release);
        ++push.next;
        ++*count;
    }
    return true;
}

unsigned SmStagingCopies::progress() {
    unsigned count = 0;
    if (ucs_unlikely(!draining_.empty())) {
        drain_chunks();
    }
    for (size_t i = 0; i < pulls_.size(); ++i) {
        Pull &pull = pulls_[i];
        if (!pull.active) {
            continue;
        }
        if (pull.owner->dead()) {
            finish(i, UCS_ERR_CONNECTION_RESET);
            continue;
        }
        if (pull.nchunks == 0) {
            request(i);
            continue;
        }
        if (copy_out(i, &count)) {
            ucs_assertv(pull.next == pull.pieces, "pull %zu: piece %u of %u", i, pull.next,
                        pull.pieces);
            finish(i, UCS_OK);
        } else if (pull.takeover && owner_idle(pull)) {
            count += take_over(i) ? 1 : 0;
        }
    }
    for (size_t i = 0; i < pushes_.size();) {
        Push &push = pushes_[i];
        if (!push.puller->dead() && push_pieces(push, &count) && (push.next < push.pieces)) {
            ++i;
            continue;
        }
        RemotePeer *puller = push.puller;
        pushes_.erase(pushes_.begin() + static_cast<ptrdiff_t>(i));
        iface_.put_peer(puller);
    }
    return count;
}

}  // namespace sm
}  // namespace uct_tm
