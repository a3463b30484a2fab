/* The C entry points: argument checks, then the worker. They are all the
 * library exports; everything else is built hidden. */
#pragma GCC visibility push(default)
#include "api/uct_tm_proto.h"
#pragma GCC visibility pop
#include "worker.h"

#include <memory>

using uct_tm::alloc_status;
using uct_tm::proto::Config;
using uct_tm::proto::Endpoint;

namespace {

bool valid(const uct_tm_proto_ep *ep) {
    return (ep != nullptr) && (ep->magic == Endpoint::kMagic) && (ep->worker != nullptr);
}

}  // namespace

extern "C" {

ucs_status_t uct_tm_proto_worker_create(const uct_tm_proto_worker_params_t *params,
                                        uct_tm_proto_worker_h *worker_p) {
    if (worker_p == nullptr) {
        return UCS_ERR_INVALID_PARAM;
    }
    *worker_p = nullptr;
    Config       config;
    ucs_status_t status = uct_tm::proto::read_config(params, &config);
    if (status != UCS_OK) {
        return status;
    }
    std::unique_ptr<uct_tm_proto_worker> w;
    status = alloc_status([&] {
        w = std::make_unique<uct_tm_proto_worker>(config);
        return w->open();
    });
    if (status == UCS_OK) {
        *worker_p = w.release();
    }
    return status;
}

void uct_tm_proto_worker_destroy(uct_tm_proto_worker_h worker) {
    delete worker;
}

unsigned uct_tm_proto_worker_progress(uct_tm_proto_worker_h worker) {
    return (worker != nullptr) ? worker->progress() : 0;
}

ucs_status_t uct_tm_proto_worker_address(uct_tm_proto_worker_h worker, void *buffer,
                                         size_t *length) {
    if (worker == nullptr) {
        return UCS_ERR_INVALID_PARAM;
    }
    return alloc_status([&] { return worker->address(buffer, length); });
}

ucs_status_t uct_tm_proto_worker_address_compact(uct_tm_proto_worker_h worker, void *buffer,
                                                 size_t *length) {
    if (worker == nullptr) {
        return UCS_ERR_INVALID_PARAM;
    }
    return alloc_status([&] { return worker->address(buffer, length, true); });
}

uint32_t uct_tm_proto_worker_id(uct_tm_proto_worker_h worker) {
    return (worker != nullptr) ? worker->id() : 0;
}

ucs_status_t uct_tm_proto_worker_set_min_multi_recv(uct_tm_proto_worker_h worker, size_t bytes) {
    if ((worker == nullptr) || (bytes == 0)) {
        return UCS_ERR_INVALID_PARAM;
    }
    worker->set_min_multi_recv(bytes);
    return UCS_OK;
}

size_t uct_tm_proto_worker_min_multi_recv(uct_tm_proto_worker_h worker) {
    return (worker != nullptr) ? worker->min_multi_recv() : 0;
}

void uct_tm_proto_worker_stats(uct_tm_proto_worker_h worker, uct_tm_proto_stats_t *stats) {
    if ((worker != nullptr) && (stats != nullptr)) {
        worker->stats(stats);
    }
}

ucs_status_t uct_tm_proto_ep_create(uct_tm_proto_worker_h worker, const void *address,
                                    size_t length, uct_tm_proto_ep_h *ep_p) {
    if ((worker == nullptr) || (ep_p == nullptr)) {
        return UCS_ERR_INVALID_PARAM;
    }
    *ep_p = nullptr;
    Endpoint          *ep     = nullptr;
    const ucs_status_t status = alloc_status([&] { return worker->ep_create(address, length, &ep); });
    if ((status == UCS_OK) || (status == UCS_INPROGRESS)) {
        *ep_p = static_cast<uct_tm_proto_ep_h>(ep);
    }
    return status;
}

ucs_status_t uct_tm_proto_ep_address(uct_tm_proto_ep_h ep, void *buffer, size_t *length) {
    if (!valid(ep) || !ep->worker->owns(ep)) {
        return UCS_ERR_INVALID_PARAM;
    }
    return ep->worker->ep_address(ep, buffer, length);
}

ucs_status_t uct_tm_proto_ep_connect(uct_tm_proto_ep_h ep, const void *address, size_t length) {
    if (!valid(ep) || !ep->worker->owns(ep)) {
        return UCS_ERR_INVALID_PARAM;
    }
    return alloc_status([&] { return ep->worker->ep_connect(ep, address, length); });
}

void uct_tm_proto_ep_destroy(uct_tm_proto_ep_h ep) {
    if (valid(ep) && ep->worker->owns(ep)) {
        ep->worker->ep_destroy(ep);
    }
}

ucs_status_t uct_tm_proto_send(uct_tm_proto_ep_h ep, const void *buffer, size_t length,
                               uct_tm_proto_tag_t tag, const uct_tm_proto_op_params_t *params,
                               uct_tm_proto_request_t *req) {
    if (!valid(ep)) {
        return UCS_ERR_INVALID_PARAM;
    }
    if (ucs_unlikely(!ep->connected || (ep->failure != UCS_OK))) {
        /* uct_tm_proto_ep_connect() first; or the peer failed */
        return ep->connected ? ep->failure : UCS_ERR_NOT_CONNECTED;
    }
    return ep->worker->send(ep, buffer, length, tag, params, req);
}

ucs_status_t uct_tm_proto_recv(uct_tm_proto_worker_h worker, void *buffer, size_t length,
                               uct_tm_proto_tag_t tag, uct_tm_proto_tag_t mask,
                               uct_tm_proto_ep_h source, const uct_tm_proto_op_params_t *params,
                               uct_tm_proto_request_t *req) {
    if (worker == nullptr) {
        return UCS_ERR_INVALID_PARAM;
    }
    return worker->recv(buffer, length, tag, mask, source, params, req);
}

ucs_status_t uct_tm_proto_sendv(uct_tm_proto_ep_h ep, const uct_tm_proto_iov_t *iov,
                                size_t iovcnt, uct_tm_proto_tag_t tag,
                                const uct_tm_proto_op_params_t *params,
                                uct_tm_proto_request_t *req) {
    if (!valid(ep)) {
        return UCS_ERR_INVALID_PARAM;
    }
    if (!ep->connected || (ep->failure != UCS_OK)) {
        return ep->connected ? ep->failure : UCS_ERR_NOT_CONNECTED;
    }
    return ep->worker->sendv(ep, iov, iovcnt, tag, params, req);
}

ucs_status_t uct_tm_proto_recvv(uct_tm_proto_worker_h worker, const uct_tm_proto_iov_t *iov,
                                size_t iovcnt, uct_tm_proto_tag_t tag, uct_tm_proto_tag_t mask,
                                uct_tm_proto_ep_h source, const uct_tm_proto_op_params_t *params,
                                uct_tm_proto_request_t *req) {
    if (worker == nullptr) {
        return UCS_ERR_INVALID_PARAM;
    }
    return worker->recvv(iov, iovcnt, tag, mask, source, params, req);
}

ucs_status_t uct_tm_proto_probe(uct_tm_proto_worker_h worker, uct_tm_proto_tag_t tag,
                                uct_tm_proto_tag_t mask, uct_tm_proto_ep_h source, unsigned flags,
                                uct_tm_proto_info_t *info, uct_tm_proto_msg_t *msg) {
    if (worker == nullptr) {
        return UCS_ERR_INVALID_PARAM;
    }
    return worker->probe(tag, mask, source, flags, nullptr, 0, nullptr, info, msg);
}

ucs_status_t uct_tm_proto_probe_copy(uct_tm_proto_worker_h worker, uct_tm_proto_tag_t tag,
                                     uct_tm_proto_tag_t mask, uct_tm_proto_ep_h source,
                                     unsigned flags, void *buffer, size_t length, size_t *copied,
                                     uct_tm_proto_info_t *info, uct_tm_proto_msg_t *msg) {
    if (worker == nullptr) {
        if (copied != nullptr) {
            *copied = 0;
        }
        return UCS_ERR_INVALID_PARAM;
    }
    return worker->probe(tag, mask, source, flags, buffer, length, copied, info, msg);
}

ucs_status_t uct_tm_proto_recv_claimed(uct_tm_proto_worker_h worker, uct_tm_proto_msg_t msg,
                                       void *buffer, size_t length,
                                       const uct_tm_proto_op_params_t *params,
                                       uct_tm_proto_request_t *req) {
    if (worker == nullptr) {
        return UCS_ERR_INVALID_PARAM;
    }
    return worker->recv_claimed(msg, buffer, length, params, req);
}

ucs_status_t uct_tm_proto_recv_claimedv(uct_tm_proto_worker_h worker, uct_tm_proto_msg_t msg,
                                        const uct_tm_proto_iov_t *iov, size_t iovcnt,
                                        const uct_tm_proto_op_params_t *params,
                                        uct_tm_proto_request_t *req) {
    if (worker == nullptr) {
        return UCS_ERR_INVALID_PARAM;
    }
    return worker->recv_claimedv(msg, iov, iovcnt, params, req);
}

ucs_status_t uct_tm_proto_discard_claimed(uct_tm_proto_worker_h worker, uct_tm_proto_msg_t msg) {
    return (worker == nullptr) ? UCS_ERR_INVALID_PARAM : worker->discard_claimed(msg);
}

ucs_status_t uct_tm_proto_request_test(uct_tm_proto_worker_h worker, uct_tm_proto_request_t req,
                                       uct_tm_proto_info_t *info) {
    return (worker == nullptr) ? UCS_ERR_INVALID_PARAM : worker->test(req, info);
}

ucs_status_t uct_tm_proto_request_release(uct_tm_proto_worker_h worker,
                                          uct_tm_proto_request_t req) {
    return (worker == nullptr) ? UCS_ERR_INVALID_PARAM : worker->release(req);
}

ucs_status_t uct_tm_proto_request_cancel(uct_tm_proto_worker_h worker,
                                         uct_tm_proto_request_t req) {
    return (worker == nullptr) ? UCS_ERR_INVALID_PARAM : worker->cancel(req);
}

ucs_status_t uct_tm_proto_request_cancel_user(uct_tm_proto_worker_h worker, void *request) {
    return (worker == nullptr) ? UCS_ERR_INVALID_PARAM : worker->cancel_user(request);
}

ucs_status_t uct_tm_proto_mem_map(uct_tm_proto_worker_h worker,
                                  const uct_tm_proto_mem_map_params_t *params,
                                  uct_tm_proto_mem_h *memh) {
    if ((worker == nullptr) || (memh == nullptr)) {
        return UCS_ERR_INVALID_PARAM;
    }
    *memh = 0;
    return alloc_status([&] { return worker->mem_map(params, memh); });
}

ucs_status_t uct_tm_proto_mem_unmap(uct_tm_proto_worker_h worker, uct_tm_proto_mem_h memh) {
    return (worker == nullptr) ? UCS_ERR_INVALID_PARAM : worker->mem_unmap(memh);
}

}  // extern "C"
