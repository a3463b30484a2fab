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
#include "sm_iface.h"

#include "base/tm_md.h"

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

ucs_status_t SmIface::start_pull(Pull pull, uint64_t address, uint64_t rndv_token) {
    if (geometry_.staging_chunks == 0) {
        return UCS_ERR_UNSUPPORTED;
    }
    const size_t chunk = geometry_.staging_chunk_size;
    pull.pieces = static_cast<uint32_t>((pull.length + chunk - 1) / chunk);
    pull.gen    = ++pull_serial_ & 0xffffff;
    pull.next   = 0;
    pull.nchunks = 0;
    pull.active  = true;
    size_t index = 0;
    while ((index < pulls_.size()) && pulls_[index].active) {
        ++index;
    }
    try {
        if (index == pulls_.size()) {
            pulls_.emplace_back();
        }
    } catch (const std::bad_alloc &) {
        return UCS_ERR_NO_MEMORY;
    }
    pulls_[index] = pull;
    ++pulls_active_;
    request_pull(index, address, rndv_token);
    return UCS_OK;
}

/* Lends chunks to a pull and asks its owner to fill them; a pull finding no
 * free chunk waits for one in progress_transfers(). */
void SmIface::request_pull(size_t index, uint64_t address, uint64_t rndv_token) {
    Pull &pull = pulls_[index];
    pull.address    = address;
    pull.rndv_token = rndv_token;
    if (pull.pieces == 0) {
        finish_pull(index, UCS_OK);
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
        own_staging_state(pull.chunk[j])->word.store(staging_free(pull.gen, j),
                                                     std::memory_order_release);
        req.chunk[j] = pull.chunk[j];
    }
    pull.nchunks    = static_cast<uint16_t>(n);
    req.pull_token  = (uint64_t{pull.gen} << 32) | index;
    req.address     = address;
    req.length      = pull.length;
    req.rndv_token  = rndv_token;
    req.piece_size  = geometry_.staging_chunk_size;
    req.nchunks     = static_cast<uint16_t>(n);
    ControlMsg msg{Kind::kPullReq, 0, 0};
    msg.length  = sizeof(req);
    msg.payload = req;
    send_control(pull.owner, msg);
}

void SmIface::finish_pull(size_t index, ucs_status_t status) {
    Pull pull = pulls_[index]; /* callbacks below may start new pulls */
    for (uint16_t j = 0; j < pull.nchunks; ++j) {
        free_chunks_.push_back(pull.chunk[j]);
    }
    pulls_[index].active = false;
    --pulls_active_;
    if (pull.purpose == Pull::Purpose::kRndv) {
        /* A sender that withdrew the send took the slot back: no FIN. */
        if (release_rndv_slot(pull.slot, pull.token >> 32 & 0x0fffffff, kRndvDone)) {
            send_control(pull.owner, ControlMsg{Kind::kRndvFin, static_cast<uint32_t>(status), pull.token});
        } else if (status == UCS_OK) {
            status = UCS_ERR_CANCELED;
        }
        tags_.complete(pull.recv, pull.tag, 0, pull.msg_length, status);
        put_peer(pull.owner);
    } else {
        if (pull.ep != nullptr) {
            --pull.ep->gets_outstanding;
        }
        put_peer(pull.owner);
        complete(pull.comp, status);
    }
}

void SmIface::receive_pull_request(const Message &m) {
    PullRequest req;
    RemotePeer *puller = peer_of(m.peer);
    if ((m.length < sizeof(req)) || (puller == nullptr)) {
        drop(m, "malformed pull request");
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
        const uint32_t i = static_cast<uint32_t>(req.rndv_token);
        ok = (i < rndv_ops_.size()) && rndv_ops_[i].active &&
             (rndv_ops_[i].gen == ((req.rndv_token >> 32) & 0x0fffffff)) &&
             (rndv_ops_[i].ep != nullptr) && (rndv_ops_[i].ep->peer == puller) &&
             (req.address >= rndv_ops_[i].address) &&
             (req.length <= rndv_ops_[i].length) &&
             (req.address - rndv_ops_[i].address <= rndv_ops_[i].length - req.length);
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
        send_control(puller, ControlMsg{Kind::kPullNack, static_cast<uint32_t>(status), req.pull_token});
        return;
    }
    Push push{puller, req.pull_token, reinterpret_cast<const char *>(req.address), req.length,
              req.piece_size, static_cast<uint32_t>((req.length + req.piece_size - 1) / req.piece_size),
              0, {}, req.nchunks, req.rndv_token};
    std::copy(req.chunk, req.chunk + req.nchunks, push.chunk);
    try {
        pushes_.push_back(push);
    } catch (const std::bad_alloc &) {
        send_control(puller, ControlMsg{Kind::kPullNack, static_cast<uint32_t>(UCS_ERR_NO_MEMORY),
                                        req.pull_token});
        return;
    }
    ++puller->refs;
}

void SmIface::receive_pull_nack(const Message &m) {
    const uint32_t index = pull_index(m.imm);
    if ((index < pulls_.size()) && pulls_[index].active && (pulls_[index].gen == pull_gen(m.imm)) &&
        (peer_of(m.peer) == pulls_[index].owner)) {
        const auto status = static_cast<ucs_status_t>(static_cast<int32_t>(m.aux));
        finish_pull(index, (status < 0) ? status : UCS_ERR_IO_ERROR);
    }
}

/* Withdraws the pushes serving rendezvous send `token` (being cancelled):
 * their pullers learn it by a NACK, and our memory is no longer copied out. */
void SmIface::abort_pushes(uint64_t rndv_token, ucs_status_t status) {
    for (size_t i = 0; i < pushes_.size();) {
        if (pushes_[i].rndv_token != rndv_token) {
            ++i;
            continue;
        }
        const Push push = pushes_[i];
        pushes_.erase(pushes_.begin() + static_cast<ptrdiff_t>(i));
        send_control(push.puller, ControlMsg{Kind::kPullNack, static_cast<uint32_t>(status),
                                             push.pull_token});
        put_peer(push.puller);
    }
}

unsigned SmIface::progress_transfers() {
    unsigned     count = 0;
    const size_t chunk = geometry_.staging_chunk_size;
    for (size_t i = 0; i < pulls_.size(); ++i) {
        Pull &pull = pulls_[i];
        if (!pull.active) {
            continue;
        }
        if (pull.owner->dead()) {
            finish_pull(i, UCS_ERR_CONNECTION_RESET);
            continue;
        }
        if (pull.nchunks == 0) {
            request_pull(i, pull.address, pull.rndv_token);
            continue;
        }
        while (pull.next < pull.pieces) {
            const uint16_t c     = pull.chunk[pull.next % pull.nchunks];
            StagingState  *state = own_staging_state(c);
            if (state->word.load(std::memory_order_acquire) != staging_ready(pull.gen, pull.next)) {
                break;
            }
            const size_t offset = size_t{pull.next} * chunk;
            scatter_into(pull.dest, pull.ndest, offset, own_staging_chunk(c),
                         std::min(chunk, pull.length - offset));
            state->word.store(staging_free(pull.gen, pull.next + pull.nchunks),
                              std::memory_order_release);
            ++pull.next;
            ++count;
        }
        if (pull.next == pull.pieces) {
            finish_pull(i, UCS_OK);
        }
    }
    for (size_t i = 0; i < pushes_.size();) {
        Push          &push = pushes_[i];
        const uint32_t gen  = pull_gen(push.pull_token) & 0xffffff;
        while ((push.next < push.pieces) && !push.puller->dead()) {
            const uint16_t c     = push.chunk[push.next % push.nchunks];
            StagingState  *state = push.puller->staging_state(c);
            if (state->word.load(std::memory_order_acquire) != staging_free(gen, push.next)) {
                break;
            }
            const size_t offset = size_t{push.next} * push.piece;
            memcpy(push.puller->staging_chunk(c), push.src + offset,
                   std::min<size_t>(push.piece, push.length - offset));
            state->word.store(staging_ready(gen, push.next), std::memory_order_release);
            ++push.next;
            ++count;
        }
        if ((push.next == push.pieces) || push.puller->dead()) {
            RemotePeer *puller = push.puller;
            pushes_.erase(pushes_.begin() + static_cast<ptrdiff_t>(i));
            put_peer(puller);
        } else {
            ++i;
        }
    }
    return count;
}

}  // namespace sm
}  // namespace uct_tm
