/*
 * Reply endpoints: a receiver needs an endpoint to a sender to answer it
 * (CTS, ACK, credit), and libfabric's RDM endpoints, like MPI's lazily added
 * peers, receive from senders they never inserted. So every endpoint over a
 * transport that connects to ifaces starts with a kHello carrying its
 * worker's address; a receiver holding no endpoint to that worker creates
 * one from it (implicit: no handle reaches the application) and sends the
 * replies parked for it. The application's own ep_create() to that worker
 * later adopts it. docs/proto.md "Endpoints".
 */
#include "worker.h"

#include "common/alloc_status.h"

#include <ucs/debug/log_def.h>

#include <cstring>

namespace uct_tm {
namespace proto {

void Worker::send_hello(Endpoint *ep) {
    if (hello_address_.empty()) {
        std::vector<char> a(kMaxHelloAddress);
        size_t            length = a.size();
        ucs_status_t      status = address(a.data(), &length, true);
        if (status != UCS_OK) { /* beyond the compact form's limits */
            length = a.size();
            status = address(a.data(), &length, false);
        }
        if (status != UCS_OK) {
            ucs_diag("tm_proto: worker %u's address does not fit a hello (%zu bytes): peers "
                     "without an endpoint to it cannot reply until they create one",
                     config_.id, length);
            return;
        }
        a.resize(length);
        hello_address_.swap(a);
    }
    if (hello_now(ep) == UCS_ERR_NO_RESOURCE) {
        ep->hello_due = true;
        mark_busy(ep);
    }
}

ucs_status_t Worker::hello_now(Endpoint *ep) {
    HelloHeader h      = {};
    h.kind             = Kind::kHello;
    h.source           = config_.id;
    h.target           = ep->peer_id;
    h.length           = static_cast<uint32_t>(hello_address_.size());
    const ssize_t sent = tx_.am_send(ep, &h, sizeof(h), hello_address_.data(),
                                     hello_address_.size());
    if (sent == UCS_ERR_NO_RESOURCE) {
        return UCS_ERR_NO_RESOURCE;
    }
    ep->hello_due = false;
    if (sent < 0) {
        ucs_diag("tm_proto: hello to worker %u failed: %s", ep->peer_id,
                 ucs_status_string(static_cast<ucs_status_t>(sent)));
        return static_cast<ucs_status_t>(sent);
    }
    return UCS_OK;
}

/* Inside the transport's callback: noted here, the endpoint created from
 * progress (accept_hellos), where creating one disturbs no walk. */
void Worker::handle_hello(const char *p, size_t length, const Iface *iface) {
    HelloHeader h;
    if (length < sizeof(h)) {
        TM_PROTO_DROPPED("dropped a %zu-byte hello", length);
        return;
    }
    memcpy(&h, p, sizeof(h));
    if ((h.length != length - sizeof(h)) || (h.length > kMaxHelloAddress) ||
        (h.target != config_.id) || (h.source == config_.id)) {
        TM_PROTO_DROPPED("dropped a malformed hello from worker %u (%zu bytes)", h.source, length);
        return;
    }
    if (peers_.of(h.source) != nullptr) {
        return; /* we reply over our own endpoint to it */
    }
    for (const Hello &x : hellos_) {
        if (x.source == h.source) {
            return;
        }
    }
    if (hellos_.size() >= config_.max_peers) {
        TM_PROTO_DROPPED("dropped worker %u's hello: %zu others wait", h.source, hellos_.size());
        return;
    }
    /* the progress step first: a hello kept without one would wait for the next */
    const ucs_status_t status = alloc_status([&] {
        later(Later::Kind::kHello, 0);
        hellos_.push_back(Hello{h.source, iface, std::vector<char>(p + sizeof(h), p + length)});
    });
    if (status != UCS_OK) {
        ucs_error("tm_proto: no memory for worker %u's hello", h.source);
    }
}

void Worker::accept_hellos() {
    std::vector<Hello> batch;
    batch.swap(hellos_);
    for (const Hello &x : batch) {
        if (peers_.has(x.source)) {
            continue; /* created since */
        }
        if (peers_.size() >= config_.max_peers) {
            /* implicit endpoints whose peers failed hold no handle and no use */
            std::vector<Endpoint *> failed;
            peers_.for_each([&](Endpoint *ep) {
                if (ep->implicit && (ep->failure != UCS_OK)) {
                    failed.push_back(ep);
                }
            });
            for (Endpoint *ep : failed) {
                ep_destroy(ep);
            }
        }
        if (peers_.size() >= config_.max_peers) {
            TM_PROTO_DROPPED("no endpoint for worker %u's replies: endpoints to %zu peers "
                             "already (UCX_TM_PROTO_MAX_PEERS)",
                             x.source, peers_.size());
            continue;
        }
        Endpoint          *ep     = nullptr;
        const ucs_status_t status = alloc_status(
            [&] { return create_endpoint(x.address.data(), x.address.size(), &ep, &x); });
        if (status != UCS_OK) {
            TM_PROTO_DROPPED("no endpoint from worker %u's hello: %s", x.source,
                             ucs_status_string(status));
        }
    }
}

Endpoint *Worker::adopt(uint32_t id, const Iface *chosen) {
    Endpoint *found = nullptr;
    peers_.for_each([&](Endpoint *ep) {
        if (ep->implicit && (ep->peer_id == id)) {
            found = ep;
        }
    });
    if (found == nullptr) {
        return nullptr;
    }
    if ((found->iface != chosen) || (found->failure != UCS_OK)) {
        ep_destroy(found); /* replies go over the new one */
        return nullptr;
    }
    found->implicit = false;
    return found;
}

}  // namespace proto
}  // namespace uct_tm
