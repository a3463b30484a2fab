/*
 * tm_sm send paths: active messages, tagged eager sends and rendezvous
 * requests into the receiver's FIFO (inline, in its descriptors, in
 * fragments), and the control messages of rendezvous and pipelined copies.
 */
#include "sm_iface.h"

#include "common/alloc_status.h"
#include "base/copy_bytes.h"
#include "base/stream_copy.h"
#include "tag/uct_iov.h"

#include <ucs/debug/log_def.h>

#include <algorithm>
#include <cstring>
#include <new>

namespace uct_tm {
namespace sm {
namespace {

/* memcpy, or with `stream` stream_copy (CopyMode). */
void copy_to_peer(char *dst, const void *src, size_t n, bool stream) {
    if (stream) {
        stream_copy(dst, src, n);
    } else {
        memcpy(dst, src, n);
    }
}

/* Copies message bytes [offset, offset + length) gathered from `prefix`
 * followed by the iov list into `dst`. */
void gather(char *dst, size_t offset, size_t length, const void *prefix, size_t prefix_length,
            const uct_iov_t *iov, size_t iovcnt, bool stream = false) {
    if (offset < prefix_length) {
        const size_t n = std::min(length, prefix_length - offset);
        copy_to_peer(dst, static_cast<const char *>(prefix) + offset, n, stream);
        dst += n;
        length -= n;
        offset = prefix_length;
    }
    size_t base = prefix_length;
    for (size_t i = 0; (i < iovcnt) && (length > 0); ++i) {
        const size_t len = iov[i].length;
        if (offset < base + len) {
            const size_t at = offset - base;
            const size_t n  = std::min(len - at, length);
            copy_to_peer(dst, static_cast<const char *>(iov[i].buffer) + at, n, stream);
            dst += n;
            length -= n;
            offset += n;
        }
        base += len;
    }
}

}  // namespace

/* ---- sending ----------------------------------------------------------------------- */

template <typename Fill>
ucs_status_t SmIface::send_inline(SmEp *ep, Kind kind, uint32_t length, const Fill &fill) {
    const ucs_status_t status = tx_ready(ep);
    if (ucs_unlikely(status != UCS_OK)) {
        return status;
    }
    FifoWriter &fifo = ep->peer->fifo();
    uint64_t    seq;
    if (ucs_unlikely(!fifo.claim(1, &seq))) {
        return UCS_ERR_NO_RESOURCE;
    }
    ElemHeader *e = fifo.elem(seq);
    e->kind       = kind;
    e->flags      = kFlagFirst;
    e->peer       = ep->peer->slot();
    e->length     = length;
    fill(e);
    return fifo.publish(e, seq) ? UCS_OK : UCS_ERR_NO_RESOURCE;
}

ucs_status_t SmIface::send_gather(SmEp *ep, Kind kind, uint8_t am_id, uct_tag_t tag, uint64_t imm,
                                  const void *prefix, size_t prefix_length, const uct_iov_t *iov,
                                  size_t iovcnt, size_t total, size_t max_fragments) {
    ucs_status_t status = tx_ready(ep);
    if (ucs_unlikely(status != UCS_OK)) {
        return status;
    }
    FifoWriter &fifo = ep->peer->fifo();
    uint64_t    seq;
    if (total <= ep->inline_cap) {
        if (ucs_unlikely(!fifo.claim(1, &seq))) {
            return UCS_ERR_NO_RESOURCE;
        }
        ElemHeader *e = fifo.elem(seq);
        e->kind       = kind;
        e->flags      = kFlagFirst;
        e->peer       = ep->peer->slot();
        e->length     = static_cast<uint32_t>(total);
        e->aux        = am_id;
        e->tag        = tag;
        e->imm        = imm;
        gather(static_cast<char *>(inline_payload(e)), 0, total, prefix, prefix_length, iov, iovcnt);
        return fifo.publish(e, seq) ? UCS_OK : UCS_ERR_NO_RESOURCE;
    }
    /* Fragments of the receiver's descriptor size, as many as its FIFO takes. */
    const size_t seg    = ep->peer->geometry().seg_size;
    const size_t nfrags = (total + seg - 1) / seg;
    if (ucs_unlikely(nfrags > std::min<size_t>(max_fragments, ep->peer->max_fragments()))) {
        return refuse_for_geometry(ep, total, (max_fragments == 1) ? "its SEG_SIZE"
                                                                   : "its SEG_SIZE x FIFO_SIZE / 2");
    }
    if (ucs_unlikely(!fifo.claim(static_cast<uint32_t>(nfrags), &seq))) {
        return UCS_ERR_NO_RESOURCE;
    }
    const Fragments frags{kind, am_id, tag, imm, total, nfrags};
    return publish_fragments(ep, seq, nfrags, frags,
                             [&](char *dst, size_t offset, size_t length, bool stream) {
                                 gather(dst, offset, length, prefix, prefix_length, iov, iovcnt,
                                        stream);
                             });
}

/* Fragments are published first to last, each as soon as it is written:
 * the receiver copies one out while this side copies the next in, so a
 * message of n fragments costs about one copy plus one fragment, not two
 * copies (docs/perf.md). The receiver delivers an unexpected message only
 * whole (SmIface::receive_eager), so a sender that dies midway leaves no
 * half message with the layer above. */
template <typename Gather>
ucs_status_t SmIface::publish_fragments(SmEp *ep, uint64_t seq, size_t claimed,
                                        const Fragments &f, const Gather &gather_at) {
    FifoWriter  &fifo = ep->peer->fifo();
    const size_t seg  = ep->peer->geometry().seg_size;
    if (f.nfrags > 1) {
        ep->peer->touch_descriptors();
    }
    /* a corrupt segment fails the whole message before any of it is visible */
    ucs_status_t status = UCS_OK;
    for (size_t i = 0; i < std::min(claimed, f.nfrags); ++i) {
        if (ucs_unlikely(fifo.desc_payload(fifo.elem(seq + i)) == nullptr)) {
            status = UCS_ERR_IO_ERROR;
        }
    }
    bool                 skipped = false; /* the receiver gave up on us: the rest go as drops */
    const CopyMode::Plan plan    = copy_mode_.plan(f.total);
    const uint64_t       start   = plan.timed ? monotonic_ns() : 0;
    if (plan.stream) {
        copy_mode_.count_streamed();
    }
    for (size_t i = 0; i < claimed; ++i) {
        ElemHeader *e       = fifo.elem(seq + i);
        char       *payload = fifo.desc_payload(e); /* again: the receiver's memory may change */
        e->peer             = ep->peer->slot();
        if ((payload == nullptr) && (i < f.nfrags)) {
            status = UCS_ERR_IO_ERROR;
        }
        if ((status != UCS_OK) || skipped || (i >= f.nfrags)) {
            e->kind   = Kind::kDropped; /* or claimed for a message that came out shorter */
            e->flags  = 0;
            e->length = 0;
        } else {
            const size_t offset = i * seg;
            const size_t length = std::min(seg, f.total - offset);
            gather_at(payload, offset, length, plan.stream);
            e->kind   = f.kind;
            e->flags  = kFlagDesc | ((i == 0) ? kFlagFirst : 0) | ((i + 1 < f.nfrags) ? kFlagMore : 0);
            e->length = static_cast<uint32_t>(length);
            e->aux    = f.am_id;
            e->tag    = f.tag;
            e->imm    = (i + 1 == f.nfrags) ? f.imm : 0;
        }
        if (!fifo.publish(e, seq + i)) {
            skipped = true;
        }
    }
    if (plan.timed && (status == UCS_OK) && !skipped) {
        copy_mode_.copied(f.total, monotonic_ns() - start);
    }
    return (status != UCS_OK) ? status : (skipped ? UCS_ERR_NO_RESOURCE : UCS_OK);
}

ucs_status_t SmIface::refuse_for_geometry(SmEp *ep, size_t total, const char *why) {
    RemotePeer *peer = ep->peer;
    if (!peer->geometry_warned) {
        peer->geometry_warned = true;
        ucs_warn("tm_sm: a %zu-byte message to process %d exceeds %s (FIFO element %u B, "
                 "SEG_SIZE %u, FIFO_SIZE %u; ours %u B, %u, %u): refused with "
                 "UCS_ERR_EXCEEDS_LIMIT; set UCX_TM_SM_SEG_SIZE, FIFO_SIZE and FIFO_ELEM_SIZE "
                 "alike on every process", total, peer->pid(), why, peer->geometry().elem_size,
                 peer->geometry().seg_size, peer->geometry().fifo_elems, geometry_.elem_size,
                 geometry_.seg_size, geometry_.fifo_elems);
    }
    return UCS_ERR_EXCEEDS_LIMIT;
}

ucs_status_t SmIface::send_short_by_desc(SmEp *ep, Kind kind, uint8_t am_id, uct_tag_t tag,
                                         const void *prefix, size_t prefix_length,
                                         const void *data, size_t length) {
    const uct_iov_t iov = {const_cast<void *>(data), length, nullptr, 0, 1};
    return send_gather(ep, kind, am_id, tag, 0, prefix, prefix_length, &iov, 1,
                       prefix_length + length, (kind == Kind::kAm) ? 1 : SIZE_MAX);
}

/* A bcopy that may exceed the receiver's descriptors (BCOPY_MAX above its
 * SEG_SIZE, or a receiver with smaller ones): packed through the window of
 * its first element's descriptor, where up to SEG_SIZE of it already is in
 * place, else into bounce_; a longer one goes in fragments. */
ssize_t SmIface::send_bcopy_bounced(SmEp *ep, Kind kind, uint8_t am_id, uct_tag_t tag,
                                    uint64_t imm, uct_pack_callback_t pack_cb, void *arg) {
    if (ucs_unlikely(pack_cb == nullptr)) {
        return UCS_ERR_INVALID_PARAM;
    }
    const ucs_status_t status = tx_ready(ep);
    if (ucs_unlikely(status != UCS_OK)) {
        return status;
    }
    /* One element claimed before packing: once packed, the send must not
     * come back with NO_RESOURCE (UCP's pack callback advances its request). */
    FifoWriter &fifo = ep->peer->fifo();
    uint64_t    seq;
    if (ucs_unlikely(!fifo.claim(1, &seq))) {
        return UCS_ERR_NO_RESOURCE;
    }
    /* Through a window when the last bcopy fitted a descriptor: one that did
     * not saves a copy of one fragment of several, and its spill would fault
     * a page at a time in every new window (descriptors rotate). Streamed
     * copies (CopyMode) go from our own memory. */
    const uint32_t  desc   = fifo.elem(seq)->desc; /* read once: the receiver's memory */
    char *const     window = (last_bcopy_spilled_ || copy_mode_.may_stream_bcopy())
                                 ? nullptr
                                 : ep->peer->pack_window(desc);
    char *const     placed = (window != nullptr) ? fifo.desc_payload_of(desc) : nullptr;
    char *const     packed = (window != nullptr) ? window : bounce_.data();
    const size_t    length = pack_cb(packed, arg);
    const size_t    seg    = ep->peer->geometry().seg_size;
    const size_t    nfrags = std::max<size_t>(1, (length + seg - 1) / seg);
    const Fragments frags{kind, am_id, tag, imm, length, nfrags};
    if (ucs_unlikely((length > bcopy_max_) || (nfrags > ep->peer->max_fragments()))) {
        publish_drop(ep, seq);
        if (length > bcopy_max_) {
            ucs_error("tm_sm: pack callback wrote %zu bytes, more than max_bcopy %zu", length,
                      bcopy_max_);
            return UCS_ERR_INVALID_PARAM;
        }
        return refuse_for_geometry(ep, length, "its SEG_SIZE x FIFO_SIZE / 2");
    }
    if ((nfrags > 1) && !fifo.extend(seq + 1, static_cast<uint32_t>(nfrags - 1))) {
        /* The rest cannot follow the first element now: that one goes as a
         * drop and the message waits in the endpoint's backlog. */
        publish_drop(ep, seq);
        return backlog_bcopy(ep, frags, packed);
    }
    copy_mode_.bcopy_packed(length);
    last_bcopy_spilled_ = (nfrags > 1);
    ++((window != nullptr) ? counters_.packed_in_place : counters_.packed_aside);
    const ucs_status_t sent = publish_fragments(
        ep, seq, nfrags, frags, [&](char *dst, size_t offset, size_t n, bool stream) {
            /* the first fragment is in place, unless its element's descriptor changed */
            if ((offset != 0) || (dst != placed)) {
                copy_to_peer(dst, packed + offset, n, stream);
            }
        });
    return (sent == UCS_OK) ? static_cast<ssize_t>(length) : static_cast<ssize_t>(sent);
}

void SmIface::publish_drop(SmEp *ep, uint64_t seq) {
    FifoWriter &fifo = ep->peer->fifo();
    ElemHeader *e    = fifo.elem(seq);
    e->peer          = ep->peer->slot();
    e->kind          = Kind::kDropped;
    e->flags         = 0;
    e->length        = 0;
    fifo.publish(e, seq);
}

/* The packed message is the endpoint's until the receiver's FIFO has room
 * for all its fragments: the caller may reuse its data at once, and later
 * sends on the endpoint wait behind it (tx_ready). */
ssize_t SmIface::backlog_bcopy(SmEp *ep, const Fragments &f, const char *packed) {
    Backlog           &b      = ep->backlog;
    const ucs_status_t status = alloc_status([&] {
        b.data.assign(packed, packed + f.total);
        backlogged_.push_back(ep);
    });
    if (status != UCS_OK) {
        return status;
    }
    b.frags            = f;
    b.active           = true;
    maybe_background_  = true;
    ++counters_.backlogged;
    return static_cast<ssize_t>(f.total);
}

/* False while the receiver's FIFO has no room for the whole message. */
bool SmIface::send_backlog(SmEp *ep) {
    Backlog &b = ep->backlog;
    uint64_t seq;
    if (!ep->peer->fifo().claim(static_cast<uint32_t>(b.frags.nfrags), &seq)) {
        return false;
    }
    publish_fragments(ep, seq, b.frags.nfrags, b.frags,
                      [&](char *dst, size_t offset, size_t n, bool stream) {
                          copy_to_peer(dst, b.data.data() + offset, n, stream);
                      });
    drop_backlog(ep);
    return true;
}

void SmIface::drop_backlog(SmEp *ep) {
    if (ep->backlog.active) {
        ep->backlog.active = false;
        backlogged_.erase(std::remove(backlogged_.begin(), backlogged_.end(), ep),
                          backlogged_.end());
    }
}

ucs_status_t SmIface::send_control_now(RemotePeer *peer, const ControlMsg &msg) {
    FifoWriter &fifo = peer->fifo();
    uint64_t    seq;
    if (!fifo.claim(1, &seq)) {
        return UCS_ERR_NO_RESOURCE;
    }
    ElemHeader *e = fifo.elem(seq);
    e->kind       = msg.kind;
    e->flags      = kFlagFirst;
    e->peer       = peer->slot();
    e->length     = msg.length;
    e->aux        = msg.aux;
    e->tag        = msg.proof;
    e->imm        = msg.imm;
    memcpy(inline_payload(e), &msg.payload, msg.length);
    peer->last_control = seq + 1; /* closing waits until the peer took it (drain_outboxes) */
    return fifo.publish(e, seq) ? UCS_OK : UCS_ERR_NO_RESOURCE;
}

void SmIface::send_control(RemotePeer *peer, const ControlMsg &msg) {
    if (peer->dead()) {
        return;
    }
    if (peer->outbox.empty() && (send_control_now(peer, msg) == UCS_OK)) {
        return;
    }
    if (alloc_status([&] {
            peer->outbox.push_back(msg);
            has_outbox_       = true;
            maybe_background_ = true; /* whoever called: slow_progress() retries it */
        }) != UCS_OK) {
        ucs_error("tm_sm: out of memory queueing a control message to process %d", peer->pid());
    }
}

ucs_status_t SmIface::am_short(SmEp *ep, uint8_t id, uint64_t header, const void *payload,
                               unsigned length) {
    if (ucs_unlikely((id >= UCT_AM_ID_MAX) || (length + sizeof(header) > inline_cap_) ||
                     ((payload == nullptr) && (length > 0)))) {
        return UCS_ERR_INVALID_PARAM;
    }
    if (ucs_unlikely(length + sizeof(header) > ep->inline_cap)) {
        return send_short_by_desc(ep, Kind::kAm, id, 0, &header, sizeof(header), payload, length);
    }
    return send_inline(ep, Kind::kAm, static_cast<uint32_t>(length + sizeof(header)),
                       [&](ElemHeader *e) {
                           e->aux  = id;
                           char *p = static_cast<char *>(inline_payload(e));
                           memcpy(p, &header, sizeof(header));
                           copy_bytes(p + sizeof(header), payload, length);
                       });
}

/* bcopy: pack straight into the receiver's descriptor (one copy). */
template <typename Fill>
ssize_t SmIface::send_bcopy(SmEp *ep, Kind kind, uct_pack_callback_t pack_cb, void *arg,
                            const Fill &fill) {
    if (ucs_unlikely(pack_cb == nullptr)) {
        return UCS_ERR_INVALID_PARAM;
    }
    const ucs_status_t status = tx_ready(ep);
    if (ucs_unlikely(status != UCS_OK)) {
        return status;
    }
    FifoWriter &fifo = ep->peer->fifo();
    uint64_t    seq;
    if (ucs_unlikely(!fifo.claim(1, &seq))) {
        return UCS_ERR_NO_RESOURCE;
    }
    ElemHeader *e       = fifo.elem(seq);
    char       *payload = fifo.desc_payload(e);
    e->peer             = ep->peer->slot();
    if (ucs_unlikely(payload == nullptr)) {
        e->kind = Kind::kDropped;
        fifo.publish(e, seq);
        return UCS_ERR_IO_ERROR;
    }
    /* Streaming (CopyMode): packed aside into our own memory, then copied
     * past this core's cache; the pack callback cannot be told to stream. */
    const CopyMode::Plan plan   = copy_mode_.plan(CopyMode::kUnknownSize);
    const uint64_t       start  = plan.timed ? monotonic_ns() : 0;
    const size_t         length = pack_cb(plan.stream ? bounce_.data() : payload, arg);
    if (ucs_unlikely((length > ep->peer->geometry().seg_size) ||
                     (plan.stream && (length > bounce_.size())))) {
        ucs_error("tm_sm: pack callback wrote %zu bytes, more than max_bcopy %u", length,
                  std::min(ep->peer->geometry().seg_size, geometry_.seg_size));
        e->kind = Kind::kDropped;
        fifo.publish(e, seq);
        return UCS_ERR_INVALID_PARAM;
    }
    copy_mode_.bcopy_packed(length);
    if (plan.stream) {
        const bool large = copy_mode_.large(length);
        copy_to_peer(payload, bounce_.data(), length, large);
        if (large) {
            copy_mode_.count_streamed();
        }
    }
    e->kind   = kind;
    e->flags  = kFlagFirst | kFlagDesc;
    e->length = static_cast<uint32_t>(length);
    fill(e);
    if (!fifo.publish(e, seq)) {
        return UCS_ERR_NO_RESOURCE;
    }
    if (plan.timed) {
        copy_mode_.copied(length, monotonic_ns() - start);
    }
    return static_cast<ssize_t>(length);
}

ssize_t SmIface::am_bcopy(SmEp *ep, uint8_t id, uct_pack_callback_t pack_cb, void *arg) {
    if (ucs_unlikely(id >= UCT_AM_ID_MAX)) {
        return UCS_ERR_INVALID_PARAM;
    }
    if (ucs_unlikely(ep->bcopy_bounce)) {
        return send_bcopy_bounced(ep, Kind::kAm, id, 0, 0, pack_cb, arg);
    }
    return send_bcopy(ep, Kind::kAm, pack_cb, arg, [id](ElemHeader *e) { e->aux = id; });
}

/* Copied out before return (no completion is ever due). */
ucs_status_t SmIface::am_zcopy(SmEp *ep, uint8_t id, const void *header, unsigned header_length,
                               const uct_iov_t *iov, size_t iovcnt, uct_completion_t *) {
    if (ucs_unlikely((id >= UCT_AM_ID_MAX) || (header_length > inline_cap_) ||
                     ((header == nullptr) && header_length))) {
        return UCS_ERR_INVALID_PARAM;
    }
    size_t             total;
    const ucs_status_t status =
        check_iov(iov, iovcnt, IovLimits{kMaxSendIov, geometry_seg_max() - header_length}, &total);
    if (ucs_unlikely(status != UCS_OK)) {
        return status;
    }
    return send_gather(ep, Kind::kAm, id, 0, 0, header, header_length, iov, iovcnt,
                       total + header_length, 1);
}

ucs_status_t SmIface::tag_eager_short(SmEp *ep, uct_tag_t tag, const void *data, size_t length) {
    if (ucs_unlikely((length > inline_cap_) || ((data == nullptr) && (length > 0)))) {
        return UCS_ERR_INVALID_PARAM;
    }
    if (ucs_unlikely(length > ep->inline_cap)) {
        return send_short_by_desc(ep, Kind::kTagEager, 0, tag, nullptr, 0, data, length);
    }
    return send_inline(ep, Kind::kTagEager, static_cast<uint32_t>(length), [&](ElemHeader *e) {
        e->tag = tag;
        e->imm = 0;
        copy_bytes(inline_payload(e), data, length);
    });
}

ssize_t SmIface::tag_eager_bcopy(SmEp *ep, uct_tag_t tag, uint64_t imm, uct_pack_callback_t pack_cb,
                                 void *arg) {
    if (ucs_unlikely(ep->bcopy_bounce)) {
        return send_bcopy_bounced(ep, Kind::kTagEager, 0, tag, imm, pack_cb, arg);
    }
    return send_bcopy(ep, Kind::kTagEager, pack_cb, arg, [&](ElemHeader *e) {
        e->tag = tag;
        e->imm = imm;
    });
}

ucs_status_t SmIface::tag_eager_zcopy(SmEp *ep, uct_tag_t tag, uint64_t imm, const uct_iov_t *iov,
                                      size_t iovcnt, uct_completion_t *) {
    /* One small buffer (the protocol layer's eager message: tag_eager_short
     * has no imm): one inline element, copied as tag_eager_short copies. */
    if (ucs_likely(is_one_buffer(iov, iovcnt) && (iov->length <= ep->inline_cap))) {
        return send_inline(ep, Kind::kTagEager, static_cast<uint32_t>(iov->length),
                           [&](ElemHeader *e) {
                               e->tag = tag;
                               e->imm = imm;
                               copy_bytes(inline_payload(e), iov->buffer, iov->length);
                           });
    }
    return tag_eager_zcopy_gather(ep, tag, imm, iov, iovcnt);
}

ucs_status_t SmIface::tag_eager_zcopy_gather(SmEp *ep, uct_tag_t tag, uint64_t imm,
                                             const uct_iov_t *iov, size_t iovcnt) {
    size_t             total;
    const ucs_status_t status = check_iov(iov, iovcnt, IovLimits{kMaxSendIov, eager_max_}, &total);
    if (ucs_unlikely(status != UCS_OK)) {
        return status;
    }
    return send_gather(ep, Kind::kTagEager, 0, tag, imm, nullptr, 0, iov, iovcnt, total,
                       SIZE_MAX);
}

ucs_status_t SmIface::tag_rndv_request(SmEp *ep, uct_tag_t tag, const void *header,
                                       unsigned header_length) {
    const MayQueueWork mark{this};
    if (ucs_unlikely(((header == nullptr) && header_length) ||
                     (header_length > geometry_seg_max()))) {
        return UCS_ERR_INVALID_PARAM;
    }
    const uct_iov_t iov = {const_cast<void *>(header), header_length, nullptr, 0, 1};
    return send_gather(ep, Kind::kTagRndvReq, 0, tag, 0, nullptr, 0, &iov, 1, header_length, 1);
}

}  // namespace sm
}  // namespace uct_tm
