/* fi_msg(3), untagged: typed trampolines into Endpoint::post_send / post_recv
 * (the single-buffer calls flattened, as in tagged.cc). */
#include "endpoint.h"

namespace uct_tm {
namespace fabric {

namespace {

ssize_t send_common(fid_ep *f, const iovec *iov, size_t count, void *desc, fi_addr_t dest,
                    uint64_t data, void *context, uint64_t flags, bool quiet) {
    Endpoint *ep = object_of<Endpoint>(f);
    if (ep == nullptr) {
        return -FI_EINVAL;
    }
    return guarded([&] {
        return ep->post_send(
            Xfer{iov, count, dest, 0, 0, data, context, desc, flags, false, quiet});
    });
}

ssize_t recv_common(fid_ep *f, const iovec *iov, size_t count, void *desc, fi_addr_t src,
                    void *context, uint64_t flags) {
    Endpoint *ep = object_of<Endpoint>(f);
    if (ep == nullptr) {
        return -FI_EINVAL;
    }
    return guarded([&] {
        return ep->post_recv(Xfer{iov, count, src, 0, 0, 0, context, desc, flags, false, false});
    });
}

[[gnu::flatten]] ssize_t recv(fid_ep *ep, void *buf, size_t len, void *desc, fi_addr_t src,
                              void *context) {
    const iovec v = one(buf, len);
    return recv_common(ep, &v, 1, desc, src, context, rx_op_flags(ep));
}

/* The vector calls take no desc: the layer stages or pushes vectors. */
ssize_t recvv(fid_ep *ep, const iovec *iov, void **, size_t count, fi_addr_t src, void *context) {
    return recv_common(ep, iov, count, nullptr, src, context, rx_op_flags(ep));
}

ssize_t recvmsg(fid_ep *ep, const fi_msg *msg, uint64_t flags) {
    if (msg == nullptr) {
        return -FI_EINVAL;
    }
    return recv_common(ep, msg->msg_iov, msg->iov_count, first_desc(msg->desc, msg->iov_count),
                       msg->addr, msg->context, flags);
}

[[gnu::flatten]] ssize_t send(fid_ep *ep, const void *buf, size_t len, void *desc, fi_addr_t dest,
                              void *context) {
    const iovec v = one(buf, len);
    return send_common(ep, &v, 1, desc, dest, 0, context, tx_op_flags(ep), false);
}

ssize_t sendv(fid_ep *ep, const iovec *iov, void **, size_t count, fi_addr_t dest, void *context) {
    return send_common(ep, iov, count, nullptr, dest, 0, context, tx_op_flags(ep), false);
}

ssize_t sendmsg(fid_ep *ep, const fi_msg *msg, uint64_t flags) {
    if (msg == nullptr) {
        return -FI_EINVAL;
    }
    return send_common(ep, msg->msg_iov, msg->iov_count, first_desc(msg->desc, msg->iov_count),
                       msg->addr, msg->data, msg->context, flags, false);
}

[[gnu::flatten]] ssize_t inject(fid_ep *ep, const void *buf, size_t len, fi_addr_t dest) {
    const iovec v = one(buf, len);
    return send_common(ep, &v, 1, nullptr, dest, 0, nullptr, FI_INJECT, true);
}

[[gnu::flatten]] ssize_t senddata(fid_ep *ep, const void *buf, size_t len, void *desc,
                                  uint64_t data, fi_addr_t dest, void *context) {
    const iovec v = one(buf, len);
    return send_common(ep, &v, 1, desc, dest, data, context, tx_op_flags(ep) | FI_REMOTE_CQ_DATA,
                       false);
}

[[gnu::flatten]] ssize_t injectdata(fid_ep *ep, const void *buf, size_t len, uint64_t data,
                                    fi_addr_t dest) {
    const iovec v = one(buf, len);
    return send_common(ep, &v, 1, nullptr, dest, data, nullptr, FI_INJECT | FI_REMOTE_CQ_DATA,
                       true);
}

fi_ops_msg make_msg_ops() {
    fi_ops_msg o{};
    o.size       = sizeof(o);
    o.recv       = recv;
    o.recvv      = recvv;
    o.recvmsg    = recvmsg;
    o.send       = send;
    o.sendv      = sendv;
    o.sendmsg    = sendmsg;
    o.inject     = inject;
    o.senddata   = senddata;
    o.injectdata = injectdata;
    return o;
}

}  // namespace

fi_ops_msg g_msg_ops = make_msg_ops();

}  // namespace fabric
}  // namespace uct_tm
