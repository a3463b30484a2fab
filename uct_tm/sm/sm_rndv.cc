/*
 * tm_sm rendezvous and one-sided copies.
 *
 * tag_rndv_zcopy publishes the sender's buffer in a RndvSlot of its own
 * segment and sends an RTS element. A receiver with a matching posted receive
 * locks the slot (POSTED -> READING) and copies the data straight into the
 * posted buffer, single copy, with CMA. Large messages split the copy between
 * the two processes (see RndvSlot): the receiver describes its buffers in the
 * slot and sends an RTR; then it reads pieces from the back while the sender,
 * on the RTR, writes pieces from the front. When the last piece is in, the
 * receiver marks the slot DONE and sends a FIN that completes the sender's
 * operation. tag_rndv_cancel withdraws the slot (POSTED -> FREE), waiting out
 * a copy already in progress, so a receiver never reads memory the sender got
 * back. An unexpected RTS goes to the iface's rndv_cb with an rkey that
 * carries the slot, so that a later get_zcopy takes the same lock.
 */
#include "sm_rndv.h"

#include "sm_iface.h"
#include "sm_md.h"
#include "sm_split_min.h"
#include "sm_staging.h"

#include "common/alloc_status.h"
#include "common/ucs_assert.h"
#include "tag/uct_iov.h"

#include "base/clock.h"
#include "base/process_watch.h"
#include "base/range.h"
#include "base/self_pid.h"
#include <ucs/sys/string.h>
#include <ucs/debug/log_def.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <new>
#include <sys/uio.h>
#include <unistd.h>

namespace uct_tm {
namespace sm {
namespace {

constexpr uint32_t kGenMask = 0x0fffffffu;

uint64_t make_token(uint32_t index, uint32_t gen) { return (uint64_t{gen} << 32) | index; }
uint32_t token_index(uint64_t token) { return static_cast<uint32_t>(token); }
uint32_t token_gen(uint64_t token) { return static_cast<uint32_t>(token >> 32) & kGenMask; }

ucs_status_t errno_status(int err) {
    switch (err) {
    case EPERM:
    case EACCES:
        return UCS_ERR_UNREACHABLE;
    case ESRCH:
        return UCS_ERR_CONNECTION_RESET;
    case EFAULT:
        return UCS_ERR_INVALID_ADDR;
    case ENOMEM:
        return UCS_ERR_NO_MEMORY;
    default:
        return UCS_ERR_IO_ERROR;
    }
}

/* Drops `n` bytes from the front of an iovec array; returns the new count. */
size_t advance(struct iovec *&iov, size_t count, size_t n) {
    while ((count > 0) && (n >= iov->iov_len)) {
        n -= iov->iov_len;
        ++iov;
        --count;
    }
    if (count > 0) {
        iov->iov_base = static_cast<char *>(iov->iov_base) + n;
        iov->iov_len -= n;
    }
    return count;
}

/* The part [offset, offset + length) of an iov list; returns the entry count. */
size_t slice(const struct iovec *iov, size_t count, size_t offset, size_t length,
             struct iovec *out) {
    size_t n = 0;
    for (size_t i = 0; (i < count) && (length > 0); ++i) {
        if (offset >= iov[i].iov_len) {
            offset -= iov[i].iov_len;
            continue;
        }
        const size_t take = std::min(iov[i].iov_len - offset, length);
        out[n++]          = {static_cast<char *>(iov[i].iov_base) + offset, take};
        length -= take;
        offset = 0;
    }
    return n;
}

/* Copies between `local` and our own mapping at `mapped` (MD-allocated
 * shared memory, whose bounds the caller checked). */
void copy_mapped(struct iovec *local, size_t count, char *mapped, size_t length, bool write) {
    for (size_t i = 0; (i < count) && (length > 0); ++i) {
        const size_t n = std::min(local[i].iov_len, length);
        if (write) {
            memcpy(mapped, local[i].iov_base, n);
        } else {
            memcpy(local[i].iov_base, mapped, n);
        }
        mapped += n;
        length -= n;
    }
}

/* Moves `slot` of generation `gen` from `from` to `to` if it is there;
 * *seen: the word found otherwise. */
bool slot_move(RndvSlot *slot, uint32_t gen, uint32_t from, uint32_t to, std::memory_order order,
               uint32_t *seen = nullptr) {
    ucs_assertv(rndv_move_allowed(from, to), "RndvSlot move %u -> %u", from, to);
    uint32_t word = rndv_word(gen, from);
    const bool moved = slot->word.compare_exchange_strong(word, rndv_word(gen, to), order);
    if (seen != nullptr) {
        *seen = word;
    }
    return moved;
}

/* A receiver done with a sender's slot it holds READING moves it to
 * `state`; false if the sender revoked it meanwhile (cancel). */
bool release_slot(RndvSlot *slot, uint32_t gen, uint32_t state) {
    return slot_move(slot, gen, kRndvReading, state, std::memory_order_acq_rel);
}

/* RNDV_SPLIT_MIN; auto times CMA only where a copy can be split. */
size_t choose_split_min(const SmConfig &config) {
    if (config.rndv_split_min != UCS_MEMUNITS_AUTO) {
        return config.rndv_split_min;
    }
    return (config.rndv_split && config.cma) ? SplitMin::for_this_host() : SplitMin::kFallback;
}

}  // namespace

ucs_status_t SmRendezvous::init(const SmConfig &config, uct_md_h md, RndvSlot *slots,
                                uint32_t count) {
    md_             = md;
    split_enabled_  = config.rndv_split;
    split_min_      = choose_split_min(config);
    shm_direct_max_ = config.shm_direct_max;
    split_timeout_  = seconds_to_ns(config.split_timeout);
    cma_enabled_    = config.cma;
    copy_choice_    = CopyChoice(static_cast<CopyChoice::Setting>(config.rndv_copy));
    if (split_timeout_ == 0) {
        ucs_error("tm_sm: SPLIT_TIMEOUT must be positive (a split copy could never wait "
                  "for its sender's pieces)");
        return UCS_ERR_INVALID_PARAM;
    }
    slots_          = slots;
    if (!proof_.init()) {
        ucs_error("tm_sm: no random key for rendezvous proofs: %m");
        return UCS_ERR_IO_ERROR;
    }
    const ucs_status_t status = alloc_status([&] {
        ops_.resize(count);
        free_ops_.reserve(count);
    });
    if (status != UCS_OK) {
        return status;
    }
    for (uint32_t i = count; i-- > 0;) {
        free_ops_.push_back(i);
    }
    return UCS_OK;
}

/* Copies `length` bytes at `remote` in process `pid` into `local`. Handles
 * partial transfers (the kernel stops at page boundaries it cannot map).
 * Also when `pid` is our own: `remote` comes from a peer (FIFO element,
 * rkey) and may point anywhere; the kernel reports a bad address as EFAULT
 * where a memcpy would crash this process. */
ucs_status_t SmRendezvous::cma_copy(pid_t pid, struct iovec *local, size_t count,
                                    uint64_t remote, size_t length, bool write) {
    while (length > 0) {
        struct iovec  r = {reinterpret_cast<void *>(remote), length};
        const ssize_t n = write ? process_vm_writev(pid, local, count, &r, 1, 0)
                                : process_vm_readv(pid, local, count, &r, 1, 0);
        if (n <= 0) {
            const int err = (n == 0) ? EFAULT : errno;
            if (!cma_warned_ && ((err == EPERM) || (err == EACCES))) {
                cma_warned_ = true;
                ucs_error("tm_sm: cross-memory attach to process %d denied (%s): check "
                          "/proc/sys/kernel/yama/ptrace_scope", pid, strerror(err));
            }
            return errno_status(err);
        }
        remote += static_cast<size_t>(n);
        length -= static_cast<size_t>(n);
        count = advance(local, count, static_cast<size_t>(n));
        if ((count == 0) && (length > 0)) {
            return UCS_ERR_INVALID_PARAM; /* local buffers smaller than the copy */
        }
    }
    return UCS_OK;
}

/* ---- sender --------------------------------------------------------------------------- */

ucs_status_ptr_t SmRendezvous::send(SmEp *ep, uct_tag_t tag, const void *header,
                                    unsigned header_length, const uct_iov_t *iov, size_t iovcnt,
                                    uct_completion_t *comp) {
    size_t       length;
    ucs_status_t status = check_iov(iov, iovcnt, IovLimits{1, kRndvMaxZcopy}, &length);
    if (ucs_unlikely(status != UCS_OK)) {
        return UCS_STATUS_PTR(status);
    }
    if (ucs_unlikely(((header == nullptr) && header_length) ||
                     (header_length > iface_.geometry().seg_size - sizeof(RndvInfo)))) {
        return UCS_STATUS_PTR(UCS_ERR_INVALID_PARAM);
    }
    status = iface_.tx_ready(ep);
    if (ucs_unlikely(status != UCS_OK)) {
        return UCS_STATUS_PTR(status);
    }
    if (ucs_unlikely(free_ops_.empty())) {
        return UCS_STATUS_PTR(UCS_ERR_NO_RESOURCE);
    }
    const uint32_t index = free_ops_.back();
    RndvOp        &op    = ops_[index];
    ucs_assertv(!op.active, "rendezvous send %u on the free list is active", index);
    RndvInfo       info{};
    info.op_token      = make_token(index, op.gen);
    info.proof         = proof_.sign(info.op_token);
    /* No entry: a message of no bytes. */
    info.address       = (iovcnt > 0) ? reinterpret_cast<uintptr_t>(iov->buffer) : 0;
    info.length        = length;
    info.header_length = header_length;
    const MemHandle *memh = (iovcnt > 0) ? mem_handle(iov->memh) : nullptr;
    if ((memh != nullptr) && memh->shm.valid() && (length > 0) &&
        (info.address >= reinterpret_cast<uintptr_t>(memh->address)) &&
        (info.address - reinterpret_cast<uintptr_t>(memh->address) + length <= memh->length)) {
        /* MD-allocated shared memory: the receiver may map it and copy directly. */
        info.flags      = kRndvInShm;
        info.shm        = memh->shm.id();
        info.shm_offset = memh->shm.offset() +
                          (info.address - reinterpret_cast<uintptr_t>(memh->address));
    }
    slots_[index].mode.store(kRndvModeCma, std::memory_order_relaxed);
    slots_[index].word.store(rndv_word(op.gen, kRndvPosted), std::memory_order_release);
    status = iface_.send_rts(ep, tag, &info, sizeof(info), header, header_length);
    if (status != UCS_OK) {
        slots_[index].word.store(rndv_word(op.gen, kRndvFree), std::memory_order_release);
        return UCS_STATUS_PTR(status);
    }
    free_ops_.pop_back();
    op.active  = true;
    op.comp    = comp;
    op.ep      = ep;
    op.address = info.address;
    op.length  = info.length;
    ++ep->rndv_outstanding;
    ++active_;
    return reinterpret_cast<void *>(static_cast<uintptr_t>(info.op_token));
}

/* Withdraws slot `index` from receivers. A receiver copying right now
 * (READING) is waited for while it runs, at most kCancelWaitNs: one that is
 * stopped, gone or slower than that has the slot taken away (revoked), and
 * when it finishes it finds the send withdrawn and fails its receive with
 * UCS_ERR_CANCELED instead of reporting bytes we may have changed since. It
 * only ever reads our buffer, so nothing of ours is at risk after this. */
void SmRendezvous::cancel_slot(uint32_t index) {
    RndvSlot      &slot    = slots_[index];
    const uint32_t gen     = ops_[index].gen;
    const uint32_t reading = rndv_word(gen, kRndvReading);
    RemotePeer    *peer    = (ops_[index].ep != nullptr) ? ops_[index].ep->peer : nullptr;
    uint64_t       deadline = 0;
    for (uint32_t spins = 0;; ++spins) {
        uint32_t word;
        if (slot_move(&slot, gen, kRndvPosted, kRndvFree, std::memory_order_acq_rel, &word) ||
            (word != reading)) {
            return; /* withdrawn, or DONE (FIN in flight), REJECTED, already free */
        }
        if (slot.mode.load(std::memory_order_acquire) == kRndvModePull) {
            break; /* the receiver only gets what we push: stop pushing */
        }
        if ((spins % 1024) == 0) {
            const uint64_t now = monotonic_ns();
            if (deadline == 0) {
                deadline = now + kCancelWaitNs;
            }
            if ((now >= deadline) || (peer == nullptr) || !peer->check_alive() ||
                process_stopped(peer->pid())) {
                break;
            }
        }
        cpu_relax();
    }
    slot_move(&slot, gen, kRndvReading, kRndvFree, std::memory_order_acq_rel);
}

ucs_status_t SmRendezvous::cancel(SmEp *ep, void *op_handle) {
    const uint64_t token = reinterpret_cast<uintptr_t>(op_handle);
    const uint32_t index = token_index(token);
    if ((index >= ops_.size()) || !ops_[index].active || (ops_[index].gen != token_gen(token)) ||
        (ops_[index].ep != ep)) {
        return UCS_ERR_INVALID_PARAM;
    }
    ops_[index].comp = nullptr; /* UCT: the completion is not called */
    withdraw(index, UCS_ERR_CANCELED);
    return UCS_OK;
}

void SmRendezvous::cancel_ep(SmEp *ep) {
    for (uint32_t i = 0; i < ops_.size(); ++i) {
        if (ops_[i].active && (ops_[i].ep == ep)) {
            withdraw(i, UCS_ERR_CANCELED);
        }
    }
}

void SmRendezvous::forget_ep(SmEp *ep) {
    /* Withdrawn silently (their completions belong to an endpoint the user
     * gave up): nothing else would ever give their slots back if the
     * receiver never reads them. */
    for (uint32_t i = 0; i < ops_.size(); ++i) {
        if (ops_[i].active && (ops_[i].ep == ep)) {
            ops_[i].comp = nullptr;
            withdraw(i, UCS_ERR_CANCELED);
        }
    }
    for (SplitCopy &split : splits_) {
        if (split.ep == ep) {
            split.ep   = nullptr;
            split.comp = nullptr;
        }
    }
    deferred_gets_.forget_ep(ep);
}

void SmRendezvous::fail_peer(const RemotePeer *peer) {
    for (uint32_t i = 0; i < ops_.size(); ++i) {
        if (ops_[i].active && (ops_[i].ep != nullptr) && (ops_[i].ep->peer == peer)) {
            finish_op(i, UCS_ERR_CONNECTION_RESET);
        }
    }
}

void SmRendezvous::withdraw(uint32_t index, ucs_status_t status) {
    ucs_assertv(ops_[index].active, "withdrawing rendezvous send %u, not active", index);
    cancel_slot(index);
    staging_.abort_pushes(make_token(index, ops_[index].gen), status);
    finish_op(index, status);
}

void SmRendezvous::finish_op(uint32_t index, ucs_status_t status) {
    RndvOp &op = ops_[index];
    if (!op.active) {
        return;
    }
    ucs_assertv(active_ > 0, "rendezvous send %u active, none counted", index);
    uct_completion_t *comp = op.comp;
    if (op.ep != nullptr) {
        --op.ep->rndv_outstanding;
    }
    op.active = false;
    op.comp   = nullptr;
    op.ep     = nullptr;
    op.gen    = (op.gen + 1) & kGenMask;
    slots_[index].word.store(rndv_word(op.gen, kRndvFree), std::memory_order_release);
    free_ops_.push_back(index);
    --active_;
    complete(comp, status);
}

RndvOp *SmRendezvous::op_from(const Message &m, uint64_t token, const char *what) {
    const uint32_t index = token_index(token);
    if ((index >= ops_.size()) || !ops_[index].active || (ops_[index].gen != token_gen(token))) {
        return nullptr; /* cancelled or finished meanwhile, or stale */
    }
    RndvOp &op = ops_[index];
    /* Only the process the send went to may answer it: the token is no
     * secret from the other peers of this iface, and the element's peer
     * field is whatever its writer put there; the proof came with the RTS. */
    if ((op.ep == nullptr) || (iface_.peer_of(m.peer) != op.ep->peer) ||
        !proof_.valid(token, m.tag)) {
        iface_.drop(m, what);
        return nullptr;
    }
    return &op;
}

bool SmRendezvous::serves(uint64_t token, uint64_t proof, const RemotePeer *puller,
                          uint64_t address, uint64_t length) const {
    const uint32_t i = token_index(token);
    return (i < ops_.size()) && ops_[i].active && (ops_[i].gen == token_gen(token)) &&
           proof_.valid(token, proof) && (ops_[i].ep != nullptr) && (ops_[i].ep->peer == puller) &&
           (address >= ops_[i].address) && (length <= ops_[i].length) &&
           (address - ops_[i].address <= ops_[i].length - length);
}

void SmRendezvous::reject(const Message &m, uint64_t token) {
    IfaceAddress sender;
    if (!iface_.peer_address(m.peer, &sender) ||
        !RemotePeer::reject_rendezvous(sender, token_index(token), token_gen(token))) {
        iface_.drop(m, "rendezvous from an unknown peer");
        return;
    }
    ucs_error("tm_sm: rendezvous send of process %d refused: no answer can reach it (see "
              "above)", sender.segment.pid);
}

void SmRendezvous::reap_rejected() {
    for (uint32_t i = 0; i < ops_.size(); ++i) {
        const RndvOp &op = ops_[i];
        if (op.active && (slots_[i].word.load(std::memory_order_acquire) ==
                          rndv_word(op.gen, kRndvRejected))) {
            finish_op(i, UCS_ERR_UNREACHABLE);
        }
    }
}

void SmRendezvous::receive_fin(const Message &m) {
    if (op_from(m, m.imm, "rendezvous FIN from another process than the receiver") == nullptr) {
        return;
    }
    /* The receiver's word: UCS_OK or an error, never a pending status. */
    const int32_t status = static_cast<int32_t>(m.aux);
    finish_op(token_index(m.imm), ((status <= 0) && (status > UCS_ERR_LAST))
                                      ? static_cast<ucs_status_t>(status)
                                      : UCS_ERR_IO_ERROR);
}

/* ---- receiver ------------------------------------------------------------------------- */

void SmRendezvous::finish_receive(RemotePeer *sender, RndvSlot *slot, uint64_t token,
                                  uint64_t proof, TagEngine::Recv *recv, uct_tag_t tag,
                                  size_t length, ucs_status_t status) {
    if (release_slot(slot, token_gen(token), kRndvDone)) {
        iface_.send_control(sender, ControlMsg{Kind::kRndvFin, static_cast<uint32_t>(status), token,
                                               proof});
    } else {
        status = UCS_ERR_CANCELED;
    }
    iface_.tags().complete(recv, tag, 0, length, status);
}

bool SmRendezvous::read_rts(const Message &m, RndvInfo *info) {
    if (ucs_unlikely(!iface_.tag_enabled())) {
        iface_.drop(m, "tagged message but tag offload is off");
        return false;
    }
    if (ucs_unlikely(m.length < sizeof(*info))) {
        iface_.drop(m, "rendezvous without its descriptor");
        return false;
    }
    memcpy(info, m.payload, sizeof(*info));
    if (ucs_unlikely((info->header_length != m.length - sizeof(*info)) ||
                     (info->address + info->length < info->address))) {
        iface_.drop(m, "inconsistent rendezvous descriptor");
        return false;
    }
    return true;
}

void SmRendezvous::receive_rts(const Message &m) {
    RndvInfo info;
    if (!read_rts(m, &info)) {
        return;
    }
    TagEngine       &tags   = iface_.tags();
    RemotePeer      *sender = iface_.peer_of(m.peer);
    TagEngine::Recv *recv   = tags.match(m.tag);
    if (sender == nullptr) {
        /* No FIN could reach it: refuse the send in its own slot. A sender
         * that died after sending is a reset, as for every receive it was
         * to fill. */
        reject(m, info.op_token);
        if (recv != nullptr) {
            tags.complete(recv, m.tag, 0, info.length, iface_.unattached_peer_status(m.peer));
        }
        return;
    }
    if (recv == nullptr) {
        announce_unexpected(m, info, sender);
        return;
    }
    MatchedRts rts;
    rts.info   = info;
    rts.sender = sender;
    rts.recv   = recv;
    rts.tag    = m.tag;
    rts.slot   = sender->rndv_slot(token_index(info.op_token));
    if (rts.slot == nullptr) {
        tags.complete(recv, m.tag, 0, info.length, UCS_ERR_INVALID_PARAM);
        return;
    }
    if (!slot_move(rts.slot, token_gen(info.op_token), kRndvPosted, kRndvReading,
                   std::memory_order_acquire)) {
        /* The sender cancelled before we got to it. */
        tags.complete(recv, m.tag, 0, info.length, UCS_ERR_CANCELED);
        return;
    }
    rts.want  = tags.wanted(recv) ? std::min<size_t>(info.length, recv->capacity) : 0;
    rts.count = tags.iovecs(recv, rts.want, rts.local);
    copy_matched(rts);
}

void SmRendezvous::announce_unexpected(const Message &m, const RndvInfo &info,
                                       const RemotePeer *sender) {
    PackedRkey rkey{};
    rkey.magic         = kRkeyMagic;
    rkey.flags         = kRkeyRndv;
    rkey.address       = info.address;
    rkey.length        = info.length;
    rkey.pid           = sender->pid();
    rkey.rndv_token    = info.op_token;
    rkey.rndv_proof    = info.proof;
    const void *header = static_cast<const char *>(m.payload) + sizeof(info);
    if (!iface_.unexpected_rndv(m.tag, header, info.header_length, info.address, info.length,
                                &rkey)) {
        iface_.drop(m, "unexpected rendezvous but no rndv callback");
    }
}

void SmRendezvous::finish_matched(const MatchedRts &rts, ucs_status_t status) {
    finish_receive(rts.sender, rts.slot, rts.info.op_token, rts.info.proof, rts.recv, rts.tag,
                   rts.info.length, status);
}

void SmRendezvous::copy_matched(MatchedRts &rts) {
    const RndvInfo &info = rts.info;
    const bool      cma  = cma_allowed(rts.sender, info.address);
    /* The sender's buffer is MD-allocated shared memory: for small enough
     * messages (or without CMA) a plain copy from its mapping wins. */
    if ((info.flags & kRndvInShm) && ((rts.want <= shm_direct_max_) || !cma)) {
        const char *src = static_cast<const char *>(
            rts.sender->map_shm(info.shm, info.shm_offset, rts.want));
        if (src != nullptr) {
            for (size_t i = 0; i < rts.count; ++i) {
                memcpy(rts.local[i].iov_base, src, rts.local[i].iov_len);
                src += rts.local[i].iov_len;
            }
            ++counters_.direct;
            finish_matched(rts, UCS_OK);
            return;
        }
    }
    if (!cma) {
        pull_matched(rts, CopyTimer{});
        return;
    }
    const CopyTimer timer = start_timer(rts.want);
    if (copy_choice_.choose(rts.want, timer.alone) == CopyChoice::kPipelined) {
        pull_matched(rts, timer);
        return;
    }
    const pid_t  pid   = rts.sender->pid();
    const size_t piece = split_piece(rts.want, rts.count, rts.sender);
    if (piece == 0) {
        ++counters_.cma;
        const ucs_status_t status = cma_copy(pid, rts.local, rts.count, info.address, rts.want,
                                             false);
        copied(CopyChoice::kCma, rts.want, timer, status);
        finish_matched(rts, status);
        return;
    }
    ++counters_.split;
    SplitCopy split{rts.recv, rts.sender,  rts.slot, info.op_token, info.proof,
                    rts.tag,  info.length, 0,        UCS_OK};
    split.timer = timer;
    start_split(&split, rts.local, rts.count, info.address, rts.want, piece,
                ControlMsg{Kind::kRndvRtr, 0, split.token, split.proof});
    if (!keep_split(&split)) {
        finish_split(split, split.status);
    }
}

/* The sender copies the data through our staging chunks (no CMA to it, or
 * CopyChoice's pick: then timed by `timer`). */
void SmRendezvous::pull_matched(const MatchedRts &rts, const CopyTimer &timer) {
    rts.slot->mode.store(kRndvModePull, std::memory_order_release);
    ++counters_.pipelined;
    Pull pull;
    pull.purpose = Pull::Purpose::kRndv;
    pull.owner   = rts.sender;
    pull.ndest   = rts.count;
    std::copy(rts.local, rts.local + rts.count, pull.dest);
    pull.length     = rts.want;
    pull.recv       = rts.recv;
    pull.tag        = rts.tag;
    pull.msg_length = rts.info.length;
    pull.slot       = rts.slot;
    pull.token      = rts.info.op_token;
    pull.rndv_proof = rts.info.proof;
    pull.timer      = timer;
    ++rts.sender->refs;
    const ucs_status_t status = staging_.start_pull(pull, rts.info.address, rts.info.op_token);
    if (status != UCS_OK) {
        iface_.put_peer(rts.sender);
        finish_matched(rts, status);
    }
}

size_t SmRendezvous::split_piece(size_t want, size_t count, RemotePeer *peer) {
    if (!split_enabled_ || (want < split_min_) || (peer->pid() == self_pid()) ||
        (count > kRndvMaxIov)) {
        return 0;
    }
    const size_t piece = std::min<size_t>(std::max<size_t>(want / 2, 32 << 10), 256 << 10) & ~size_t{4095};
    const size_t pieces = (want + piece - 1) / piece;
    if ((pieces < 2) || (pieces > kMaxSplitPieces)) {
        return 0;
    }
    return peer->split_help.want_split() ? piece : 0;
}

void SmRendezvous::start_split(SplitCopy *split, const struct iovec *local, size_t count,
                               uint64_t address, size_t want, size_t piece,
                               const ControlMsg &invite) {
    RndvSlot      *slot   = split->slot;
    const uint32_t pieces = static_cast<uint32_t>((want + piece - 1) / piece);
    slot->piece_size      = static_cast<uint32_t>(piece);
    slot->receiver_pid    = self_pid();
    slot->iovcnt          = static_cast<uint32_t>(count);
    slot->length          = want;
    for (size_t i = 0; i < count; ++i) {
        slot->iov[i] = RemoteIov{reinterpret_cast<uintptr_t>(local[i].iov_base), local[i].iov_len};
    }
    /* A new epoch: a sender still busy with an earlier RTR in this slot
     * (an earlier get) claims and counts nothing of this one. */
    const uint16_t epoch = SplitClaim::unpack(slot->claim.load(std::memory_order_relaxed)).epoch +
                           1;
    split->epoch = epoch;
    slot->sender_done.store(SplitDone{0, epoch, UCS_OK}.pack(), std::memory_order_relaxed);
    slot->claim.store(SplitClaim{0, pieces, epoch}.pack(), std::memory_order_release);
    iface_.send_control(split->sender, invite);

    const struct iovec theirs = {reinterpret_cast<void *>(address), want};
    uint32_t           mine   = 0;
    split->status = copy_pieces(slot, true, split->sender->pid(), false, local, count, &theirs, 1,
                                want, piece, 0, epoch, &mine);
    ucs_assertv(mine <= pieces, "split copy: took %u of %u pieces", mine, pieces);
    split->sender_pieces = pieces - mine;
    counters_.pieces += pieces;
    counters_.pieces_theirs += split->sender_pieces;
    split->sender->split_help.split_claimed(split->sender_pieces);
    /* Nothing is left to claim: a conforming sender is inside its last piece. */
    split->deadline = deadline_after(monotonic_ns(), split_timeout_);
}

bool SmRendezvous::keep_split(SplitCopy *split) {
    if (split_done(*split)) {
        return false;
    }
    if (alloc_status([&] { splits_.push_back(*split); }) == UCS_OK) {
        ++split->sender->refs; /* keep its segment mapped while it writes */
        return true;
    }
    /* Cannot wait in the background: wait here, the sender is mid-piece. */
    wait_split(*split);
    if (!split_done(*split)) {
        split->status = split_abandoned(*split);
    }
    return false;
}

void SmRendezvous::wait_split(const SplitCopy &split) {
    while (!split_done(split) && split.sender->check_alive() && (monotonic_ns() < split.deadline)) {
        cpu_relax();
    }
}

ucs_status_t SmRendezvous::split_abandoned(const SplitCopy &split) {
    if (split.sender->dead()) {
        return UCS_ERR_CONNECTION_RESET;
    }
    ucs_error("tm_sm: process %d did not write its pieces of a split rendezvous copy within "
              "SPLIT_TIMEOUT: the copy fails",
              split.sender->pid());
    return UCS_ERR_TIMED_OUT;
}

ucs_status_t SmRendezvous::copy_pieces(RndvSlot *slot, bool from_back, pid_t pid, bool write,
                                       const struct iovec *ours, size_t nours,
                                       const struct iovec *theirs, size_t ntheirs, size_t length,
                                       size_t piece, uint32_t reading, uint16_t epoch,
                                       uint32_t *claimed) {
    const uint64_t pieces = (length + piece - 1) / piece;
    if (pieces > kMaxSplitPieces) {
        return UCS_ERR_IO_ERROR; /* no conforming receiver splits this finely */
    }
    ucs_status_t status = UCS_OK;
    SplitClaimer claimer(&slot->claim, epoch, from_back, pieces);
    uint32_t     index;
    for (;;) {
        const SplitClaimer::Take take = claimer.next(&index);
        if (take != SplitClaimer::Take::kTaken) {
            return (take == SplitClaimer::Take::kBad) ? UCS_ERR_IO_ERROR : status;
        }
        ++*claimed;
        const size_t offset = size_t{index} * piece;
        if (write && (status == UCS_OK) &&
            (slot->word.load(std::memory_order_acquire) != reading)) {
            status = UCS_ERR_TIMED_OUT; /* the receiver stopped waiting for us */
        }
        if ((status != UCS_OK) || (offset >= length)) {
            continue; /* keep claiming so the other side stops, but copy nothing */
        }
        const size_t bytes = std::min(piece, length - offset);
        struct iovec a[kRndvMaxIov + 1], b[kRndvMaxIov + 1];
        const size_t na = slice(ours, nours, offset, bytes, a);
        const size_t nb = slice(theirs, ntheirs, offset, bytes, b);
        const ssize_t n = write ? process_vm_writev(pid, a, na, b, nb, 0)
                                : process_vm_readv(pid, a, na, b, nb, 0);
        if (n != static_cast<ssize_t>(bytes)) {
            status = errno_status((n < 0) ? errno : EFAULT);
        }
    }
}

SplitDone SmRendezvous::sender_report(const SplitCopy &split) {
    return SplitDone::unpack(split.slot->sender_done.load(std::memory_order_acquire));
}

bool SmRendezvous::split_done(const SplitCopy &split) {
    const SplitDone done = sender_report(split);
    return (done.epoch == split.epoch) && (done.pieces == split.sender_pieces);
}

ucs_status_t SmRendezvous::split_status(const SplitCopy &split, ucs_status_t status) {
    if (status != UCS_OK) {
        return status;
    }
    const SplitDone done = sender_report(split);
    return (done.epoch == split.epoch) ? done.status : UCS_ERR_IO_ERROR;
}

void SmRendezvous::copied(CopyChoice::Way way, size_t bytes, const CopyTimer &timer,
                          ucs_status_t status) {
    if ((timer.started_ns != 0) && (status == UCS_OK)) {
        last_copy_end_ns_ = monotonic_ns();
        last_copy_ns_     = last_copy_end_ns_ - timer.started_ns;
        copy_choice_.record(way, bytes, last_copy_ns_, timer.alone);
    }
}

CopyTimer SmRendezvous::start_timer(size_t bytes) const {
    if (!copy_choice_.timed(bytes)) {
        return CopyTimer{};
    }
    /* Alone: no other copy of ours runs, and the last one ended a while
     * ago (a ping-pong's reply came between). CMA copies end inside their
     * call: in a window they follow each other with next to no gap. */
    const uint64_t now   = monotonic_ns();
    const bool     alone = splits_.empty() && staging_.pulls_idle() &&
                       (now - last_copy_end_ns_ >= last_copy_ns_ / 2);
    return CopyTimer{now, alone};
}

void SmRendezvous::finish_split(SplitCopy split, ucs_status_t status) {
    status = split_status(split, status);
    copied(CopyChoice::kCma, split.length, split.timer, status);
    if (split.recv == nullptr) {
        /* A get: the sender's buffer stays published until its owner
         * withdraws it (UCP cancels the send once told the data arrived). */
        if (!release_get_slot(split)) {
            status = UCS_ERR_CANCELED;
        }
        if (split.ep != nullptr) {
            --split.ep->gets_outstanding;
        }
        complete(split.comp, status);
        return;
    }
    finish_receive(split.sender, split.slot, split.token, split.proof, split.recv, split.tag,
                   split.length, status);
}

unsigned SmRendezvous::progress_splits() {
    unsigned       count = 0;
    const uint64_t now   = monotonic_ns(); /* called while splits wait: a vDSO read */
    for (size_t i = 0; i < splits_.size();) {
        SplitCopy   split  = splits_[i];
        const bool  done   = split_done(split);
        if (!done && !split.sender->dead() && (now < split.deadline)) {
            ++i;
            continue;
        }
        splits_.erase(splits_.begin() + static_cast<ptrdiff_t>(i));
        finish_split(split, done ? split.status : split_abandoned(split));
        iface_.put_peer(split.sender);
        ++count;
    }
    return count;
}

void SmRendezvous::orphan_receive(const TagEngine::Recv *recv) {
    for (const SplitCopy &split : splits_) {
        if (split.recv != recv) {
            continue;
        }
        /* Nothing is left to claim (we took our share already); the sender
         * may be inside one process_vm_writev into the buffer: wait it out,
         * SPLIT_TIMEOUT at most. Then the slot leaves READING before cancel
         * returns, which stops a slow sender before its next piece; progress
         * finishes the split (its FIN goes now). */
        wait_split(split);
        if (!split_done(split) && release_slot(split.slot, token_gen(split.token), kRndvDone)) {
            iface_.send_control(split.sender,
                                ControlMsg{Kind::kRndvFin,
                                           static_cast<uint32_t>(split_abandoned(split)),
                                           split.token, split.proof});
        }
    }
}

void SmRendezvous::receive_rtr(const Message &m) {
    const RndvOp *found = op_from(m, m.imm, "rendezvous RTR from another process than the receiver");
    if (found == nullptr) {
        return;
    }
    const RndvOp &op   = *found;
    RndvSlot     *slot = &slots_[token_index(m.imm)];
    RemotePeer   *peer = op.ep->peer;
    /* The epoch first: the fields below belong to it or to a later attempt,
     * and a later one takes every claim of ours out of this one. */
    const uint16_t epoch = SplitClaim::unpack(slot->claim.load(std::memory_order_acquire)).epoch;
    if (slot->word.load(std::memory_order_acquire) != rndv_word(op.gen, kRndvReading)) {
        return;
    }
    struct iovec theirs[kRndvMaxIov];
    uint32_t     iovcnt, piece;
    uint64_t     length;
    if (read_invitation(m, *slot, *peer, op.length, theirs, &iovcnt, &length, &piece)) {
        write_pieces(slot, peer, op.address, theirs, iovcnt, length, piece,
                     rndv_word(op.gen, kRndvReading), epoch);
    }
}

/* A get_zcopy of memory we registered, invited from the getter's own slot
 * (in its segment, so every field is the getter's word): we write the
 * pieces it leaves from the front, as for a rendezvous RTR. Only ranges of
 * our registrations, the memory UCP handed out keys for. */
void SmRendezvous::receive_get_rtr(const Message &m) {
    RemotePeer *getter = iface_.peer_of(m.peer);
    RndvSlot   *slot   = (getter != nullptr) ? getter->rndv_slot(token_index(m.imm)) : nullptr;
    if (slot == nullptr) {
        iface_.drop(m, "get invitation naming no slot");
        return;
    }
    const uint16_t epoch   = SplitClaim::unpack(slot->claim.load(std::memory_order_acquire)).epoch;
    const uint32_t reading = rndv_word(token_gen(m.imm), kRndvReading);
    if (slot->word.load(std::memory_order_acquire) != reading) {
        return; /* the getter finished (it took every piece) or gave up */
    }
    struct iovec theirs[kRndvMaxIov];
    uint32_t     iovcnt, piece;
    uint64_t     length, end;
    if (!read_invitation(m, *slot, *getter, UINT64_MAX, theirs, &iovcnt, &length, &piece)) {
        return;
    }
    if (!add_within(m.tag, length, &end) || !md_range_registered(md_, m.tag, length)) {
        iface_.drop(m, "get invitation for memory this process did not register");
        return;
    }
    if (write_pieces(slot, getter, m.tag, theirs, iovcnt, length, piece, reading, epoch)) {
        ++counters_.get_served;
    }
}

/* Pieces are claimed before they are copied, so a reader we cannot write
 * into (CMA denied this way round, or off here) gets none of them: it then
 * reads them all itself instead of failing on ours. */
bool SmRendezvous::write_pieces(RndvSlot *slot, RemotePeer *reader, uint64_t source,
                                const struct iovec *theirs, uint32_t iovcnt, uint64_t length,
                                uint32_t piece, uint32_t reading, uint16_t epoch) {
    if (!cma_allowed(reader, reinterpret_cast<uintptr_t>(theirs[0].iov_base))) {
        return false;
    }
    const struct iovec ours    = {reinterpret_cast<void *>(source), length};
    uint32_t           claimed = 0;
    const ucs_status_t status  = copy_pieces(slot, false, reader->pid(), true, &ours, 1, theirs,
                                             iovcnt, length, piece, reading, epoch, &claimed);
    report_split_pieces(&slot->sender_done, epoch, claimed, status);
    return true;
}

bool SmRendezvous::read_invitation(const Message &m, const RndvSlot &slot, const RemotePeer &reader,
                                   uint64_t max_length, struct iovec *theirs, uint32_t *iovcnt,
                                   uint64_t *length, uint32_t *piece) {
    /* The reader wrote these into shared memory: read each once, then check. */
    *piece  = slot.piece_size;
    *iovcnt = slot.iovcnt;
    *length = slot.length;
    if ((slot.receiver_pid != reader.pid()) || (*iovcnt == 0) || (*iovcnt > kRndvMaxIov) ||
        (*length == 0) || (*length > max_length) || (*piece < 4096) || (*piece > (64u << 20))) {
        iface_.drop(m, "inconsistent rendezvous invitation");
        return false;
    }
    uint64_t total = 0;
    for (uint32_t i = 0; i < *iovcnt; ++i) {
        const RemoteIov iov = slot.iov[i]; /* read once: the reader may rewrite it */
        uint64_t        end;
        if (!add_within(iov.address, iov.length, &end) || !add_within(total, iov.length, &total)) {
            iface_.drop(m, "rendezvous invitation with wrapping buffers");
            return false;
        }
        theirs[i] = {reinterpret_cast<void *>(iov.address), iov.length};
    }
    if (total < *length) {
        iface_.drop(m, "rendezvous invitation with short buffers");
        return false;
    }
    return true;
}

bool SmRendezvous::cma_allowed(RemotePeer *peer, uint64_t address) {
    if (!cma_enabled_) {
        return false;
    }
    if (peer->cma() == RemotePeer::Cma::kUnknown) {
        if ((peer->pid() == self_pid()) || (address == 0)) {
            return true; /* nothing to probe with yet */
        }
        /* One byte tells whether the kernel lets us at this process. */
        char          byte;
        struct iovec  l = {&byte, 1}, r = {reinterpret_cast<void *>(address), 1};
        const ssize_t n = process_vm_readv(peer->pid(), &l, 1, &r, 1, 0);
        if ((n < 0) && ((errno == EPERM) || (errno == EACCES))) {
            peer->set_cma(RemotePeer::Cma::kDenied);
            ucs_diag("tm_sm: cross-memory attach to process %d is not permitted; large messages "
                     "from it are copied through shared-memory staging chunks", peer->pid());
        } else {
            peer->set_cma(RemotePeer::Cma::kAllowed);
        }
    }
    return peer->cma() == RemotePeer::Cma::kAllowed;
}

ucs_status_t SmRendezvous::read_by_cma(pid_t pid, const struct iovec *dest, size_t ndest,
                                       size_t offset, uint64_t remote, size_t length) {
    struct iovec local[kRndvMaxIov];
    ndest = std::min<size_t>(ndest, kRndvMaxIov);
    std::copy(dest, dest + ndest, local);
    struct iovec *at    = local;
    const size_t  count = advance(at, ndest, offset);
    return cma_copy(pid, at, count, remote, length, false);
}

/* ---- one-sided ------------------------------------------------------------------------- */

ucs_status_t SmRendezvous::zcopy(SmEp *ep, const uct_iov_t *iov, size_t iovcnt,
                                 uint64_t remote_addr, uct_rkey_t rkey, uct_completion_t *comp,
                                 bool write) {
    /* A get that would complete inside the call reports from progress when
     * the call came from rndv_cb (see DeferredGets) or from outside progress:
     * UCP completes a receive matched in ucp_tag_msg_recv_nbx at once through
     * a path that hands its callback the param's user_data unchecked
     * (docs/using-with-ucx.md). */
    if (ucs_likely((comp == nullptr) ||
                   (iface_.in_progress() && !iface_.tags().in_rndv_callback()))) {
        return zcopy_now(ep, iov, iovcnt, remote_addr, rkey, comp, write);
    }
    return zcopy_deferred(ep, iov, iovcnt, remote_addr, rkey, comp, write);
}

ucs_status_t SmRendezvous::zcopy_deferred(SmEp *ep, const uct_iov_t *iov, size_t iovcnt,
                                          uint64_t remote_addr, uct_rkey_t rkey,
                                          uct_completion_t *comp, bool write) {
    ucs_status_t status = deferred_gets_.make_room(); /* before anything is copied */
    if (status != UCS_OK) {
        return status;
    }
    status = zcopy_now(ep, iov, iovcnt, remote_addr, rkey, comp, write);
    if (status != UCS_OK) {
        return status; /* an error, or a copy that completes from progress anyway */
    }
    deferred_gets_.add(ep, comp);
    iface_.slow_progress_next(); /* the polling loop does not look for these */
    return UCS_INPROGRESS;
}

ucs_status_t SmRendezvous::zcopy_now(SmEp *ep, const uct_iov_t *iov, size_t iovcnt,
                                     uint64_t remote_addr, uct_rkey_t rkey,
                                     uct_completion_t *comp, bool write) {
    OneSided op;
    op.ep               = ep;
    op.key              = remote_key(rkey);
    op.remote_addr      = remote_addr;
    op.comp             = comp;
    op.write            = write;
    ucs_status_t status = check_one_sided(iov, iovcnt, &op);
    if ((status != UCS_OK) || (op.total == 0)) {
        return status;
    }
    RemoteKey *key = op.key;
    if (key->has_shm) {
        /* MD-allocated shared memory: map it and copy directly. */
        void *mapped;
        if (remote_key_address(key, remote_addr, &mapped) == UCS_OK) {
            copy_mapped(op.local, op.count, static_cast<char *>(mapped), op.total, write);
            return UCS_OK;
        }
    }
    if ((key->pid != self_pid()) && !cma_allowed(ep->peer, remote_addr)) {
        return pull_get(op, CopyTimer{}, false);
    }
    /* A rendezvous slot or a split names the endpoint's peer: only for
     * its own memory (the key of another process is read, not shared). */
    const bool peers_key = key->pid == ep->peer->pid();
    /* A rendezvous send's buffer (its sender progresses until the send
     * completes), or registered memory whose owner may never progress (an
     * RMA target): its pipelined get is taken over by CMA if left waiting. */
    const bool choosing = !write && peers_key && (key->pid != self_pid()) &&
                          (op.count <= kRndvMaxIov);
    const CopyTimer timer = choosing ? start_timer(op.total) : CopyTimer{};
    if (choosing && (copy_choice_.choose(op.total, timer.alone) == CopyChoice::kPipelined)) {
        return pull_get(op, timer, !key->has_rndv); /* CMA reaches the owner */
    }
    RndvSlot  *slot      = nullptr;
    uint32_t   gen       = 0;
    if (key->has_rndv && peers_key) {
        slot = ep->peer->rndv_slot(token_index(key->rndv_token));
        gen  = token_gen(key->rndv_token);
        if ((slot == nullptr) ||
            !slot_move(slot, gen, kRndvPosted, kRndvReading, std::memory_order_acquire)) {
            return UCS_ERR_CANCELED; /* the sender withdrew the buffer */
        }
    }
    if ((slot != nullptr) && !write && (remote_addr == key->address)) {
        /* UCP reads an unexpected rendezvous send whole: share the copy with
         * its sender as a matched receive does. */
        const size_t piece = split_piece(op.total, op.count, ep->peer);
        if (piece != 0) {
            return split_get(ep, slot, *key, op.local, op.count, op.total, piece, comp, timer);
        }
    }
    if ((slot == nullptr) && peers_key && !write && !free_ops_.empty()) {
        /* UCP's own rendezvous reads the sender's registered buffer: the
         * same, its sender invited through a slot of ours. */
        const size_t piece = split_piece(op.total, op.count, ep->peer);
        if (piece != 0) {
            return split_plain_get(op, piece, timer);
        }
    }
    status = cma_copy(key->pid, op.local, op.count, remote_addr, op.total, write);
    copied(CopyChoice::kCma, op.total, timer, status);
    if ((slot != nullptr) && !release_slot(slot, gen, kRndvPosted)) {
        return UCS_ERR_CANCELED; /* the sender withdrew it while we copied */
    }
    return status;
}

ucs_status_t SmRendezvous::check_one_sided(const uct_iov_t *iov, size_t iovcnt, OneSided *op) {
    const ucs_status_t checked = check_iov(iov, iovcnt, IovLimits{kMaxSendIov, SIZE_MAX},
                                           &op->total);
    if (ucs_unlikely(checked != UCS_OK)) {
        return checked;
    }
    if (ucs_unlikely(op->key == nullptr) || !op->key->covers(op->remote_addr, op->total)) {
        return UCS_ERR_INVALID_PARAM;
    }
    for (size_t i = 0; i < iovcnt; ++i) {
        if (iov[i].length > 0) {
            op->local[op->count++] = {iov[i].buffer, iov[i].length};
        }
    }
    /* The key travelled through the peer: it may name memory of the peer
     * the endpoint reaches, and no other process (this one included). */
    RemotePeer *peer = op->ep->peer;
    if (ucs_unlikely(op->key->pid != peer->pid())) {
        ucs_error("tm_sm: %s_zcopy with an rkey of process %d over an endpoint to process %d: "
                  "refused",
                  op->write ? "put" : "get", op->key->pid, peer->pid());
        return UCS_ERR_INVALID_PARAM;
    }
    if (ucs_unlikely(op->ep->failed || peer->dead())) {
        return UCS_ERR_CONNECTION_RESET;
    }
    return UCS_OK;
}

/* The key's owner copies the range for us through our staging chunks (a
 * get; a put has no such way): no CMA to it, or CopyChoice's pick. */
ucs_status_t SmRendezvous::pull_get(const OneSided &op, const CopyTimer &timer, bool takeover) {
    SmEp *ep = op.ep;
    if (op.write) {
        ucs_error("tm_sm: put_zcopy to process %d needs cross-memory attach, which is not "
                  "permitted",
                  op.key->pid);
        return UCS_ERR_UNREACHABLE;
    }
    if (op.count > kRndvMaxIov) {
        return UCS_ERR_UNSUPPORTED;
    }
    Pull pull;
    pull.purpose = Pull::Purpose::kGet;
    pull.owner   = ep->peer;
    pull.ndest   = op.count;
    std::copy(op.local, op.local + op.count, pull.dest);
    pull.length     = op.total;
    pull.comp       = op.comp;
    pull.ep         = ep;
    pull.rndv_proof = op.key->rndv_proof;
    pull.timer      = timer;
    pull.takeover   = takeover;
    ++counters_.pipelined_gets;
    ++ep->peer->refs;
    ++ep->gets_outstanding;
    const ucs_status_t status = staging_.start_pull(pull, op.remote_addr,
                                                    op.key->has_rndv ? op.key->rndv_token : 0);
    if (status != UCS_OK) {
        --ep->gets_outstanding;
        iface_.put_peer(ep->peer);
        return status;
    }
    return UCS_INPROGRESS;
}

ucs_status_t SmRendezvous::split_get(SmEp *ep, RndvSlot *slot, const RemoteKey &key,
                                     const struct iovec *local, size_t count, size_t length,
                                     size_t piece, uct_completion_t *comp, const CopyTimer &timer) {
    const uint64_t token = key.rndv_token;
    SplitCopy split{nullptr, ep->peer, slot, token, key.rndv_proof, 0, length, 0, UCS_OK, ep, comp};
    split.timer = timer;
    return start_get_split(split, local, count, key.address, piece,
                           ControlMsg{Kind::kRndvRtr, 0, token, key.rndv_proof});
}

/* The slot comes from our free sends (no send of ours names it while the
 * get holds it), READING while the owner may write (release_get_slot). */
ucs_status_t SmRendezvous::split_plain_get(const OneSided &op, size_t piece,
                                           const CopyTimer &timer) {
    const uint32_t index = free_ops_.back();
    free_ops_.pop_back();
    RndvSlot      *slot  = &slots_[index];
    const uint64_t token = make_token(index, ops_[index].gen);
    slot->mode.store(kRndvModeCma, std::memory_order_relaxed);
    slot->word.store(rndv_word(ops_[index].gen, kRndvReading), std::memory_order_release);
    SplitCopy split{nullptr, op.ep->peer, slot, token, 0, 0, op.total, 0, UCS_OK, op.ep, op.comp};
    split.timer = timer;
    return start_get_split(split, op.local, op.count, op.remote_addr, piece,
                           ControlMsg{Kind::kGetRtr, 0, token, op.remote_addr});
}

ucs_status_t SmRendezvous::start_get_split(SplitCopy split, const struct iovec *local, size_t count,
                                           uint64_t address, size_t piece,
                                           const ControlMsg &invite) {
    ++counters_.get_split;
    start_split(&split, local, count, address, split.length, piece, invite);
    if (keep_split(&split)) {
        ++split.ep->gets_outstanding;
        return UCS_INPROGRESS;
    }
    const ucs_status_t status = release_get_slot(split) ? split_status(split, split.status)
                                                        : UCS_ERR_CANCELED;
    copied(CopyChoice::kCma, split.length, split.timer, status);
    return status;
}

/* A slot of ours (a get of registered memory borrowed it) goes back to the
 * free sends in its next generation, so that a late invitation finds
 * nothing; the sender's goes back to POSTED (false: it withdrew it). */
bool SmRendezvous::release_get_slot(const SplitCopy &split) {
    const uintptr_t at    = reinterpret_cast<uintptr_t>(split.slot);
    const uintptr_t first = reinterpret_cast<uintptr_t>(slots_);
    if ((at < first) || (at >= first + ops_.size() * sizeof(RndvSlot))) {
        return release_slot(split.slot, token_gen(split.token), kRndvPosted);
    }
    const uint32_t index = static_cast<uint32_t>((at - first) / sizeof(RndvSlot));
    RndvOp        &op    = ops_[index];
    op.gen               = (op.gen + 1) & kGenMask;
    slots_[index].word.store(rndv_word(op.gen, kRndvFree), std::memory_order_release);
    free_ops_.push_back(index);
    return true;
}

}  // namespace sm
}  // namespace uct_tm
