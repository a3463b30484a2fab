/* fi_msg(3), untagged: typed trampolines into the endpoint, as in
 * tagged.cc (the single-buffer calls to its inline plain post). */
#include "endpoint.h"

namespace uct_tm {
namespace fabric {

namespace {

ssize_t recv(fid_ep *f, void *buf, size_t len, void *desc, fi_addr_t src, void *context) {
    Endpoint *ep = object_of<Endpoint>(f);
    return (ep == nullptr)
               ? -FI_EINVAL
               : ep->recv_one<false>(buf, len, desc, src, 0, 0, context, ep->rx_op_flags());
}

/* The vector calls take no desc: the layer stages or pushes vectors. */
ssize_t recvv(fid_ep *f, const iovec *iov, void **, size_t count, fi_addr_t src, void *context) {
    Endpoint *ep = object_of<Endpoint>(f);
    return (ep == nullptr) ? -FI_EINVAL
                           : ep->recv_any(Xfer{iov, count, src, 0, 0, 0, context, nullptr,
                                               ep->rx_op_flags(), false, false});
}

ssize_t recvmsg(fid_ep *f, const fi_msg *msg, uint64_t flags) {
    Endpoint *ep = object_of<Endpoint>(f);
    if ((ep == nullptr) || (msg == nullptr)) {
        return -FI_EINVAL;
    }
    return ep->recv_any(Xfer{msg->msg_iov, msg->iov_count, msg->addr, 0, 0, 0, msg->context,
                             first_desc(msg->desc, msg->iov_count), flags, false, false});
}

ssize_t send(fid_ep *f, const void *buf, size_t len, void *desc, fi_addr_t dest, void *context) {
    Endpoint *ep = object_of<Endpoint>(f);
    return (ep == nullptr)
               ? -FI_EINVAL
               : ep->send_one<false, false>(buf, len, desc, dest, 0, 0, context, ep->tx_op_flags());
}

ssize_t sendv(fid_ep *f, const iovec *iov, void **, size_t count, fi_addr_t dest, void *context) {
    Endpoint *ep = object_of<Endpoint>(f);
    return (ep == nullptr) ? -FI_EINVAL
                           : ep->send_any(Xfer{iov, count, dest, 0, 0, 0, context, nullptr,
                                               ep->tx_op_flags(), false, false});
}

ssize_t sendmsg(fid_ep *f, const fi_msg *msg, uint64_t flags) {
    Endpoint *ep = object_of<Endpoint>(f);
    if ((ep == nullptr) || (msg == nullptr)) {
        return -FI_EINVAL;
    }
    return ep->send_any(Xfer{msg->msg_iov, msg->iov_count, msg->addr, 0, 0, msg->data, msg->context,
                             first_desc(msg->desc, msg->iov_count), flags, false, false});
}

ssize_t inject(fid_ep *f, const void *buf, size_t len, fi_addr_t dest) {
    Endpoint *ep = object_of<Endpoint>(f);
    return (ep == nullptr)
               ? -FI_EINVAL
               : ep->send_one<false, true>(buf, len, nullptr, dest, 0, 0, nullptr, FI_INJECT);
}

ssize_t senddata(fid_ep *f, const void *buf, size_t len, void *desc, uint64_t data, fi_addr_t dest,
                 void *context) {
    Endpoint *ep = object_of<Endpoint>(f);
    return (ep == nullptr) ? -FI_EINVAL
                           : ep->send_one<false, false>(buf, len, desc, dest, 0, data, context,
                                                        ep->tx_op_flags() | FI_REMOTE_CQ_DATA);
}

ssize_t injectdata(fid_ep *f, const void *buf, size_t len, uint64_t data, fi_addr_t dest) {
    Endpoint *ep = object_of<Endpoint>(f);
    return (ep == nullptr) ? -FI_EINVAL
                           : ep->send_one<false, true>(buf, len, nullptr, dest, 0, data, nullptr,
                                                       FI_INJECT | FI_REMOTE_CQ_DATA);
}

template <template <auto> class W> fi_ops_msg make_msg_ops() {
    fi_ops_msg o{};
    o.size       = sizeof(o);
    o.recv       = W<recv>::fn;
    o.recvv      = W<recvv>::fn;
    o.recvmsg    = W<recvmsg>::fn;
    o.send       = W<send>::fn;
    o.sendv      = W<sendv>::fn;
    o.sendmsg    = W<sendmsg>::fn;
    o.inject     = W<inject>::fn;
    o.senddata   = W<senddata>::fn;
    o.injectdata = W<injectdata>::fn;
    return o;
}

}  // namespace

fi_ops_msg g_msg_ops        = make_msg_ops<Direct>();
fi_ops_msg g_msg_ops_serial = make_msg_ops<Serial>();

}  // namespace fabric
}  // namespace uct_tm
