/* fi_tagged(3): typed trampolines into the endpoint. The single-buffer
 * calls go to its inline plain post (recv_one / send_one), the vector and
 * message calls to recv_any / send_any, which check everything. */
#include "endpoint.h"

namespace uct_tm {
namespace fabric {

namespace {

ssize_t trecv(fid_ep *f, void *buf, size_t len, void *desc, fi_addr_t src, uint64_t tag,
              uint64_t ignore, void *context) {
    Endpoint *ep = object_of<Endpoint>(f);
    return (ep == nullptr) ? -FI_EINVAL
                           : ep->recv_one<true>(buf, len, desc, src, tag, ignore, context,
                                                ep->rx_op_flags() & ~FI_MULTI_RECV);
}

/* The vector calls take no desc: the layer stages or pushes vectors. */
ssize_t trecvv(fid_ep *f, const iovec *iov, void **, size_t count, fi_addr_t src, uint64_t tag,
               uint64_t ignore, void *context) {
    Endpoint *ep = object_of<Endpoint>(f);
    return (ep == nullptr) ? -FI_EINVAL
                           : ep->recv_any(Xfer{iov, count, src, tag, ignore, 0, context, nullptr,
                                               ep->rx_op_flags() & ~FI_MULTI_RECV, true, false});
}

ssize_t trecvmsg(fid_ep *f, const fi_msg_tagged *msg, uint64_t flags) {
    Endpoint *ep = object_of<Endpoint>(f);
    if ((ep == nullptr) || (msg == nullptr)) {
        return -FI_EINVAL;
    }
    return ep->recv_any(Xfer{msg->msg_iov, msg->iov_count, msg->addr, msg->tag, msg->ignore, 0,
                             msg->context, first_desc(msg->desc, msg->iov_count), flags, true,
                             false});
}

ssize_t tsend(fid_ep *f, const void *buf, size_t len, void *desc, fi_addr_t dest, uint64_t tag,
              void *context) {
    Endpoint *ep = object_of<Endpoint>(f);
    return (ep == nullptr) ? -FI_EINVAL
                           : ep->send_one<true, false>(buf, len, desc, dest, tag, 0, context,
                                                       ep->tx_op_flags());
}

ssize_t tsendv(fid_ep *f, const iovec *iov, void **, size_t count, fi_addr_t dest, uint64_t tag,
               void *context) {
    Endpoint *ep = object_of<Endpoint>(f);
    return (ep == nullptr) ? -FI_EINVAL
                           : ep->send_any(Xfer{iov, count, dest, tag, 0, 0, context, nullptr,
                                               ep->tx_op_flags(), true, false});
}

ssize_t tsendmsg(fid_ep *f, const fi_msg_tagged *msg, uint64_t flags) {
    Endpoint *ep = object_of<Endpoint>(f);
    if ((ep == nullptr) || (msg == nullptr)) {
        return -FI_EINVAL;
    }
    return ep->send_any(Xfer{msg->msg_iov, msg->iov_count, msg->addr, msg->tag, 0, msg->data,
                             msg->context, first_desc(msg->desc, msg->iov_count), flags, true,
                             false});
}

ssize_t tinject(fid_ep *f, const void *buf, size_t len, fi_addr_t dest, uint64_t tag) {
    Endpoint *ep = object_of<Endpoint>(f);
    return (ep == nullptr)
               ? -FI_EINVAL
               : ep->send_one<true, true>(buf, len, nullptr, dest, tag, 0, nullptr, FI_INJECT);
}

ssize_t tsenddata(fid_ep *f, const void *buf, size_t len, void *desc, uint64_t data, fi_addr_t dest,
                  uint64_t tag, void *context) {
    Endpoint *ep = object_of<Endpoint>(f);
    return (ep == nullptr) ? -FI_EINVAL
                           : ep->send_one<true, false>(buf, len, desc, dest, tag, data, context,
                                                       ep->tx_op_flags() | FI_REMOTE_CQ_DATA);
}

ssize_t tinjectdata(fid_ep *f, const void *buf, size_t len, uint64_t data, fi_addr_t dest,
                    uint64_t tag) {
    Endpoint *ep = object_of<Endpoint>(f);
    return (ep == nullptr) ? -FI_EINVAL
                           : ep->send_one<true, true>(buf, len, nullptr, dest, tag, data, nullptr,
                                                      FI_INJECT | FI_REMOTE_CQ_DATA);
}

template <template <auto> class W> fi_ops_tagged make_tagged_ops() {
    fi_ops_tagged o{};
    o.size       = sizeof(o);
    o.recv       = W<trecv>::fn;
    o.recvv      = W<trecvv>::fn;
    o.recvmsg    = W<trecvmsg>::fn;
    o.send       = W<tsend>::fn;
    o.sendv      = W<tsendv>::fn;
    o.sendmsg    = W<tsendmsg>::fn;
    o.inject     = W<tinject>::fn;
    o.senddata   = W<tsenddata>::fn;
    o.injectdata = W<tinjectdata>::fn;
    return o;
}

}  // namespace

fi_ops_tagged g_tagged_ops        = make_tagged_ops<Direct>();
fi_ops_tagged g_tagged_ops_serial = make_tagged_ops<Serial>();

}  // namespace fabric
}  // namespace uct_tm
