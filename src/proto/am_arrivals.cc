/*
 * Active messages: every kind of the wire format (wire.h) arriving over an
 * iface's two AM ids, each header checked before use (docs/proto.md
 * "Protocols and wire format"): messages go on to matching (recv.cc),
 * fragments and rendezvous data to the receive they belong to, replies to
 * control.cc and rndv_get.cc. A malformed message is logged (rate-limited)
 * and dropped.
 */
#include "worker.h"

#include <ucs/debug/log_def.h>

#include <cstring>

namespace uct_tm {
namespace proto {

namespace {

/* Copies a header out of (unaligned) AM data; false if the data is shorter. */
template <typename Header> bool read_header(const char *p, size_t length, Header *h) {
    if (length < sizeof(Header)) {
        return false;
    }
    memcpy(h, p, sizeof(Header));
    return true;
}

ucs_status_t am_cb(void *arg, void *data, size_t length, unsigned) {
    guarded("a message", [&]() __attribute__((always_inline)) {
        const Iface *iface = static_cast<Iface *>(arg);
        iface->worker->am_arrived(data, length, iface);
    });
    return UCS_OK; /* handled or dropped: never kept */
}

ucs_status_t am_short_cb(void *arg, void *data, size_t length, unsigned) {
    guarded("a short message", [&]() __attribute__((always_inline)) {
        const Iface *iface = static_cast<Iface *>(arg);
        iface->worker->am_short_arrived(data, length, iface, false);
    });
    return UCS_OK;
}

ucs_status_t am_short_untagged_cb(void *arg, void *data, size_t length, unsigned) {
    guarded("a short message", [&]() __attribute__((always_inline)) {
        const Iface *iface = static_cast<Iface *>(arg);
        iface->worker->am_short_arrived(data, length, iface, true);
    });
    return UCS_OK;
}

}  // namespace

ucs_status_t set_am_handlers(Iface *iface) {
    ucs_status_t status = uct_iface_set_am_handler(iface->iface, kAmId, am_cb, iface, 0);
    if (status == UCS_OK) {
        status = uct_iface_set_am_handler(iface->iface, kAmShortId, am_short_cb, iface, 0);
    }
    if (status == UCS_OK) {
        status = uct_iface_set_am_handler(iface->iface, kAmShortUntaggedId, am_short_untagged_cb,
                                          iface, 0);
    }
    return status;
}

template <typename Header>
bool Worker::dispatch(const char *p, size_t length,
                      void (Worker::*handler)(const Header &, const char *, size_t)) {
    Header h;
    if (!read_header(p, length, &h)) {
        return false;
    }
    (this->*handler)(h, p + sizeof(h), length - sizeof(h));
    return true;
}

void Worker::am_arrived(const void *data, size_t length, const Iface *iface) {
    if (length < kSourceOffset + sizeof(uint32_t)) {
        TM_PROTO_DROPPED("dropped a %zu-byte message", length);
        return;
    }
    const char *p = static_cast<const char *>(data);
    Kind        kind;
    memcpy(&kind, p, 1);
    /* a message's source is checked with the rest of it (handle_message) */
    if ((kind != Kind::kEager) && (kind != Kind::kFirst) && (kind != Kind::kRts) &&
        !bound_source(p, iface)) {
        return;
    }
    switch (kind) {
    case Kind::kEager:
    case Kind::kFirst:
    case Kind::kRts: {
        MsgHeader h;
        if (!read_header(p, length, &h)) {
            break;
        }
        const size_t len = length - sizeof(h);
        /* an eager message never exceeds the credit we give a peer */
        if (((kind != Kind::kRts) && (h.length > window_)) ||
            ((kind == Kind::kEager) && (len != h.length)) ||
            ((kind == Kind::kFirst) && (len >= h.length)) || ((kind == Kind::kRts) && (len != 0) && !(h.flags & kFlagGet))) {
            break;
        }
        if (h.flags & kFlagUntagged) {
            h.tag = 0; /* whatever came */
        }
        rx_.handle_message(h, p + sizeof(h), len, iface);
        return;
    }
    case Kind::kMiddle:
        if (!dispatch(p, length, &Worker::handle_fragment)) {
            break;
        }
        return;
    case Kind::kData:
        if (!dispatch(p, length, &Worker::handle_data)) {
            break;
        }
        return;
    case Kind::kBatch:
        if (length <= sizeof(BatchHeader)) {
            break;
        }
        handle_batch(p, length, iface);
        return;
    case Kind::kHello: handle_hello(p, length, iface); return;
    case Kind::kPutReq: {
        PutHeader ph;
        if (!read_header(p, length, &ph)) {
            break;
        }
        rndv_.handle_put_request(ph, p + sizeof(ph), length - sizeof(ph));
        return;
    }
    case Kind::kCts:
    case Kind::kPutDone:
    case Kind::kAck:
    case Kind::kCancel:
    case Kind::kCancelAck:
    case Kind::kCredit:
    case Kind::kDeliverReq: {
        CtrlHeader c;
        if ((length != sizeof(c)) || !read_header(p, length, &c)) {
            break;
        }
        control_.handle(c);
        return;
    }
    default:
        break;
    }
    TM_PROTO_DROPPED("dropped a malformed message (kind %u, %zu bytes)",
                     static_cast<unsigned>(static_cast<uint8_t>(kind)), length);
}

/* Eager messages a sender batched (MORE), in their sending order. The source
 * was bound to the iface by am_arrived(). A malformed entry drops it and
 * the rest of the batch. */
void Worker::handle_batch(const char *p, size_t length, const Iface *iface) {
    BatchHeader b;
    memcpy(&b, p, sizeof(b));
    size_t off = sizeof(b);
    while (off < length) {
        BatchEntry e;
        if (length - off < sizeof(e)) {
            TM_PROTO_DROPPED("dropped a batch from worker %u: %zu stray bytes", b.source,
                             length - off);
            return;
        }
        memcpy(&e, p + off, sizeof(e));
        off += sizeof(e);
        if ((e.length > length - off) || (e.length > window_) || (e.flags & ~(kFlagData | kFlagUntagged))) {
            TM_PROTO_DROPPED("dropped a batch from worker %u: an entry of %u bytes, flags %#x",
                             b.source, e.length, e.flags);
            return;
        }
        MsgHeader h = {};
        h.kind      = Kind::kEager;
        h.flags     = e.flags;
        h.source    = b.source;
        h.tag       = (e.flags & kFlagUntagged) ? 0 : e.tag; /* untagged: 0, whatever came */
        h.data      = e.data;
        h.length    = e.length;
        rx_.handle_message(h, p + off, e.length, iface);
        off += e.length;
    }
}

/* A small eager message: the AM header (the tag; 0 untagged), ShortHeader, the payload. */
[[gnu::always_inline]] inline void Worker::am_short_arrived(const void *data, size_t length,
                                                            const Iface *iface, bool untagged) {
    const char *p = static_cast<const char *>(data);
    uint64_t    tag;
    ShortHeader sh;
    if (length < sizeof(tag) + sizeof(sh)) {
        TM_PROTO_DROPPED("dropped a %zu-byte short message", length);
        return;
    }
    memcpy(&tag, p, sizeof(tag));
    memcpy(&sh, p + sizeof(tag), sizeof(sh));
    MsgHeader h = {};
    h.kind   = Kind::kEager;
    h.flags  = static_cast<uint8_t>((word_has_data(sh.source) ? kFlagData : 0) |
                                    (untagged ? kFlagUntagged : 0));
    h.source = word_source(sh.source);
    h.data   = sh.data;
    h.tag    = untagged ? 0 : tag;
    h.length = length - sizeof(tag) - sizeof(sh);
    rx_.handle_message(h, p + sizeof(tag) + sizeof(sh), h.length, iface);
}

bool Worker::bound_source(const char *header, const Iface *iface) {
    uint32_t source;
    memcpy(&source, header + kSourceOffset, sizeof(source));
    Endpoint *ep;
    if (!bound(source, iface, &ep)) {
        refuse(source, "arrived over another transport than our endpoint to it");
        return false;
    }
    return true;
}

void Worker::handle_fragment(const FragHeader &f, const char *payload, size_t len) {
    Partial *found = rx_.partials().find(f.source, f.msg_id);
    if ((found == nullptr) || (f.offset != found->arrived) || (len > found->length - found->arrived) ||
        (len == 0)) {
        TM_PROTO_DROPPED("dropped a fragment from worker %u (message %u, offset %llu)",
                         f.source, f.msg_id, static_cast<unsigned long long>(f.offset));
        return;
    }
    Partial &part = *found;
    part.arrived += len;
    const bool last = part.arrived == part.length;
    if (part.req != 0) {
        Request *r = reqs_.lookup(part.req);
        if (r != nullptr) {
            place(*r, f.offset, payload, len);
            r->offset = part.arrived;
            if (last) {
                completions_.finish_recv(*r);
            }
        }
    } else if (part.unex != UINT32_MAX) {
        Unexpected &u = rx_.unexpected()[part.unex];
        memcpy(u.data.data() + f.offset, payload, len);
        u.arrived = part.arrived;
        if (last && u.held) {
            const uint64_t msg = rx_.unexpected().handle(part.unex);
            if (alloc_status([&] { later_.push_back({Later::Kind::kBuffered, msg}); }) !=
                UCS_OK) {
                ucs_error("tm_proto: out of memory reporting a message from worker %u: kept "
                          "unreported", u.source);
            }
        }
    }
    if (last) {
        const Partial done = part;
        rx_.erase_partial(f.source, f.msg_id);
        if (done.deliver) {
            control_.send_ack(done.source, done.sreq);
        }
        if (done.unex == UINT32_MAX) {
            control_.message_consumed(done.source, done.length, done.sync, done.sreq);
        }
        /* still unexpected: consumed when a receive or a discard takes it */
    }
}

void Worker::handle_data(const DataHeader &d, const char *payload, size_t len) {
    Request *r = reqs_.lookup(d.rreq);
    if ((r == nullptr) || (r->kind != ReqKind::kRecv) || r->done ||
        (r->rstate != RecvState::kArriving) || !r->peer_part || (d.offset != r->offset) ||
        (len > r->limit - r->offset) || (len == 0) || (d.source != r->info.source)) {
        TM_PROTO_DROPPED("dropped rendezvous data (offset %llu, %zu bytes)",
                         static_cast<unsigned long long>(d.offset), len);
        return;
    }
    place(*r, d.offset, payload, len);
    r->offset += len;
    if (r->offset == r->limit) {
        r->peer_part = false;
        rndv_.part_done(*r, UCS_OK);
    }
}


}  // namespace proto
}  // namespace uct_tm
