/* fi_tagged(3): typed trampolines into Endpoint::post_send / post_recv.
 * The single-buffer calls are flattened: the post inlined with the call's
 * constant flags folded (about 80 instructions a message less,
 * contrib/bench_fabric.sh). */
#include "endpoint.h"

namespace uct_tm {
namespace fabric {

namespace {

ssize_t tsend_common(fid_ep *f, const iovec *iov, size_t count, void *desc, fi_addr_t dest,
                     uint64_t tag, uint64_t data, void *context, uint64_t flags, bool quiet) {
    Endpoint *ep = object_of<Endpoint>(f);
    if (ep == nullptr) {
        return -FI_EINVAL;
    }
    return guarded([&] {
        return ep->post_send(
            Xfer{iov, count, dest, tag, 0, data, context, desc, flags, true, quiet});
    });
}

ssize_t trecv_common(fid_ep *f, const iovec *iov, size_t count, void *desc, fi_addr_t src,
                     uint64_t tag, uint64_t ignore, void *context, uint64_t flags) {
    Endpoint *ep = object_of<Endpoint>(f);
    if (ep == nullptr) {
        return -FI_EINVAL;
    }
    return guarded([&] {
        return ep->post_recv(
            Xfer{iov, count, src, tag, ignore, 0, context, desc, flags, true, false});
    });
}

[[gnu::flatten]] ssize_t trecv(fid_ep *ep, void *buf, size_t len, void *desc, fi_addr_t src,
                               uint64_t tag, uint64_t ignore, void *context) {
    const iovec v = one(buf, len);
    return trecv_common(ep, &v, 1, desc, src, tag, ignore, context,
                        rx_op_flags(ep) & ~FI_MULTI_RECV);
}

/* The vector calls take no desc: the layer stages or pushes vectors. */
ssize_t trecvv(fid_ep *ep, const iovec *iov, void **, size_t count, fi_addr_t src, uint64_t tag,
               uint64_t ignore, void *context) {
    return trecv_common(ep, iov, count, nullptr, src, tag, ignore, context,
                        rx_op_flags(ep) & ~FI_MULTI_RECV);
}

ssize_t trecvmsg(fid_ep *ep, const fi_msg_tagged *msg, uint64_t flags) {
    if (msg == nullptr) {
        return -FI_EINVAL;
    }
    return trecv_common(ep, msg->msg_iov, msg->iov_count, first_desc(msg->desc, msg->iov_count),
                        msg->addr, msg->tag, msg->ignore, msg->context, flags);
}

[[gnu::flatten]] ssize_t tsend(fid_ep *ep, const void *buf, size_t len, void *desc, fi_addr_t dest,
                               uint64_t tag, void *context) {
    const iovec v = one(buf, len);
    return tsend_common(ep, &v, 1, desc, dest, tag, 0, context, tx_op_flags(ep), false);
}

ssize_t tsendv(fid_ep *ep, const iovec *iov, void **, size_t count, fi_addr_t dest, uint64_t tag,
               void *context) {
    return tsend_common(ep, iov, count, nullptr, dest, tag, 0, context, tx_op_flags(ep), false);
}

ssize_t tsendmsg(fid_ep *ep, const fi_msg_tagged *msg, uint64_t flags) {
    if (msg == nullptr) {
        return -FI_EINVAL;
    }
    return tsend_common(ep, msg->msg_iov, msg->iov_count, first_desc(msg->desc, msg->iov_count),
                        msg->addr, msg->tag, msg->data, msg->context, flags, false);
}

[[gnu::flatten]] ssize_t tinject(fid_ep *ep, const void *buf, size_t len, fi_addr_t dest,
                                 uint64_t tag) {
    const iovec v = one(buf, len);
    return tsend_common(ep, &v, 1, nullptr, dest, tag, 0, nullptr, FI_INJECT, true);
}

[[gnu::flatten]] ssize_t tsenddata(fid_ep *ep, const void *buf, size_t len, void *desc,
                                   uint64_t data, fi_addr_t dest, uint64_t tag, void *context) {
    const iovec v = one(buf, len);
    return tsend_common(ep, &v, 1, desc, dest, tag, data, context,
                        tx_op_flags(ep) | FI_REMOTE_CQ_DATA, false);
}

[[gnu::flatten]] ssize_t tinjectdata(fid_ep *ep, const void *buf, size_t len, uint64_t data,
                                     fi_addr_t dest, uint64_t tag) {
    const iovec v = one(buf, len);
    return tsend_common(ep, &v, 1, nullptr, dest, tag, data, nullptr, FI_INJECT | FI_REMOTE_CQ_DATA,
                        true);
}

fi_ops_tagged make_tagged_ops() {
    fi_ops_tagged o{};
    o.size       = sizeof(o);
    o.recv       = trecv;
    o.recvv      = trecvv;
    o.recvmsg    = trecvmsg;
    o.send       = tsend;
    o.sendv      = tsendv;
    o.sendmsg    = tsendmsg;
    o.inject     = tinject;
    o.senddata   = tsenddata;
    o.injectdata = tinjectdata;
    return o;
}

}  // namespace

fi_ops_tagged g_tagged_ops = make_tagged_ops();

}  // namespace fabric
}  // namespace uct_tm
