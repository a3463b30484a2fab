/*
 * Endpoint lifecycle: fi_endpoint opens a worker over the domain's
 * transport; fi_ep_bind to CQs and an AV; fi_enable connects a layer
 * endpoint to every AV entry; fi_getname; fi_cancel; fi_close.
 */
#include "endpoint.h"

#include <rdma/fi_atomic.h>
#include <rdma/fi_rma.h>
#include <ucs/debug/log_def.h>

#include <algorithm>
#include <cstring>
#include <new>

namespace uct_tm {
namespace fabric {

namespace {

Endpoint *ep_of(const fid *f) { return object_of<Endpoint>(f); }

int ep_close(fid *f) {
    Endpoint *ep = ep_of(f);
    if (ep == nullptr) {
        return -FI_EINVAL;
    }
    delete ep;
    return 0;
}

int ep_bind(fid *f, fid *bfid, uint64_t flags) {
    Endpoint *ep = ep_of(f);
    return (ep == nullptr) ? -FI_EINVAL : guarded([&] { return ep->bind(bfid, flags); });
}

/* FI_ENABLE, and the op flags of fi_tsend & co (FI_GETOPSFLAG / FI_SETOPSFLAG). */
int ep_control(fid *f, int command, void *arg) {
    Endpoint *ep = ep_of(f);
    if (ep == nullptr) {
        return -FI_EINVAL;
    }
    switch (command) {
    case FI_ENABLE: return guarded([&] { return ep->enable(); });
    case FI_GETOPSFLAG:
    case FI_SETOPSFLAG:
        return ep->ops_flags(command == FI_SETOPSFLAG, static_cast<uint64_t *>(arg));
    default: return -FI_ENOSYS;
    }
}

int ep_getname(fid *f, void *addr, size_t *addrlen) {
    Endpoint *ep = ep_of(f);
    return (ep == nullptr) ? -FI_EINVAL : ep->getname(addr, addrlen);
}

ssize_t ep_cancel(fid *f, void *context) {
    Endpoint *ep = ep_of(f);
    return (ep == nullptr) ? -FI_EINVAL : ep->cancel(context);
}

int ep_getopt(fid *f, int level, int name, void *value, size_t *len) {
    Endpoint *ep = ep_of(f);
    return (ep == nullptr) ? -FI_EINVAL : ep->getopt(level, name, value, len);
}

int ep_setopt(fid *f, int level, int name, const void *value, size_t len) {
    Endpoint *ep = ep_of(f);
    return (ep == nullptr) ? -FI_EINVAL : ep->setopt(level, name, value, len);
}

template <template <auto> class W> fi_ops_ep make_ep_ops() {
    fi_ops_ep o{};
    o.size         = sizeof(o);
    o.cancel       = W<ep_cancel>::fn;
    o.getopt       = W<ep_getopt>::fn;
    o.setopt       = W<ep_setopt>::fn;
    o.tx_ctx       = TM_FI_NOSYS(fi_ops_ep, tx_ctx);
    o.rx_ctx       = TM_FI_NOSYS(fi_ops_ep, rx_ctx);
    o.rx_size_left = TM_FI_NOSYS(fi_ops_ep, rx_size_left);
    o.tx_size_left = TM_FI_NOSYS(fi_ops_ep, tx_size_left);
    return o;
}

template <template <auto> class W> fi_ops_cm make_cm_ops() {
    fi_ops_cm o{};
    o.size     = sizeof(o);
    o.setname  = TM_FI_NOSYS(fi_ops_cm, setname);
    o.getname  = W<ep_getname>::fn;
    o.getpeer  = TM_FI_NOSYS(fi_ops_cm, getpeer);
    o.connect  = TM_FI_NOSYS(fi_ops_cm, connect);
    o.listen   = TM_FI_NOSYS(fi_ops_cm, listen);
    o.accept   = TM_FI_NOSYS(fi_ops_cm, accept);
    o.reject   = TM_FI_NOSYS(fi_ops_cm, reject);
    o.shutdown = TM_FI_NOSYS(fi_ops_cm, shutdown);
    o.join     = TM_FI_NOSYS(fi_ops_cm, join);
    return o;
}

/* RMA, atomics and collectives are not offered (not in the caps): every
 * op of their tables is -FI_ENOSYS. */
fi_ops_rma make_rma_ops() {
    fi_ops_rma o{};
    o.size       = sizeof(o);
    o.read       = TM_FI_NOSYS(fi_ops_rma, read);
    o.readv      = TM_FI_NOSYS(fi_ops_rma, readv);
    o.readmsg    = TM_FI_NOSYS(fi_ops_rma, readmsg);
    o.write      = TM_FI_NOSYS(fi_ops_rma, write);
    o.writev     = TM_FI_NOSYS(fi_ops_rma, writev);
    o.writemsg   = TM_FI_NOSYS(fi_ops_rma, writemsg);
    o.inject     = TM_FI_NOSYS(fi_ops_rma, inject);
    o.writedata  = TM_FI_NOSYS(fi_ops_rma, writedata);
    o.injectdata = TM_FI_NOSYS(fi_ops_rma, injectdata);
    return o;
}

fi_ops_atomic make_atomic_ops() {
    fi_ops_atomic o{};
    o.size           = sizeof(o);
    o.write          = TM_FI_NOSYS(fi_ops_atomic, write);
    o.writev         = TM_FI_NOSYS(fi_ops_atomic, writev);
    o.writemsg       = TM_FI_NOSYS(fi_ops_atomic, writemsg);
    o.inject         = TM_FI_NOSYS(fi_ops_atomic, inject);
    o.readwrite      = TM_FI_NOSYS(fi_ops_atomic, readwrite);
    o.readwritev     = TM_FI_NOSYS(fi_ops_atomic, readwritev);
    o.readwritemsg   = TM_FI_NOSYS(fi_ops_atomic, readwritemsg);
    o.compwrite      = TM_FI_NOSYS(fi_ops_atomic, compwrite);
    o.compwritev     = TM_FI_NOSYS(fi_ops_atomic, compwritev);
    o.compwritemsg   = TM_FI_NOSYS(fi_ops_atomic, compwritemsg);
    o.writevalid     = TM_FI_NOSYS(fi_ops_atomic, writevalid);
    o.readwritevalid = TM_FI_NOSYS(fi_ops_atomic, readwritevalid);
    o.compwritevalid = TM_FI_NOSYS(fi_ops_atomic, compwritevalid);
    return o;
}

fi_ops        g_fid_ops        = make_fid_ops(ep_close, ep_bind, ep_control);
fi_ops        g_fid_ops_serial = make_fid_ops(Serial<ep_close>::fn, Serial<ep_bind>::fn,
                                              Serial<ep_control>::fn);
fi_ops_ep     g_ep_ops         = make_ep_ops<Direct>();
fi_ops_ep     g_ep_ops_serial  = make_ep_ops<Serial>();
fi_ops_cm     g_cm_ops         = make_cm_ops<Direct>();
fi_ops_cm     g_cm_ops_serial  = make_cm_ops<Serial>();
fi_ops_rma    g_rma_ops    = make_rma_ops();
fi_ops_atomic g_atomic_ops = make_atomic_ops();

}  // namespace

Endpoint::Endpoint(Domain &domain, const fi_info &info, uct_tm_proto_worker_h worker, void *context)
    : h_{}, domain_(domain), caps_(info.caps ? info.caps : kCaps),
      tx_op_flags_(info.tx_attr->op_flags & kTxOpFlags),
      rx_op_flags_(info.rx_attr->op_flags & kRxOpFlags), worker_(worker) {
    h_.self            = this;
    h_.fid.fid.fclass  = FI_CLASS_EP;
    h_.fid.fid.context = context;
    h_.fid.fid.ops     = domain.ops(g_fid_ops, g_fid_ops_serial);
    h_.fid.ops         = domain.ops(g_ep_ops, g_ep_ops_serial);
    h_.fid.cm          = domain.ops(g_cm_ops, g_cm_ops_serial);
    h_.fid.msg         = domain.ops(g_msg_ops, g_msg_ops_serial);
    h_.fid.tagged      = domain.ops(g_tagged_ops, g_tagged_ops_serial);
    h_.fid.rma         = &g_rma_ops;
    h_.fid.atomic      = &g_atomic_ops;
    h_.fid.collective  = nullptr; /* FI_COLLECTIVE is not offered */
    ++domain_.children;
}

/* Destroying the worker drops what is in flight without callbacks. */
Endpoint::~Endpoint() {
    for (Mr *mr : mrs_) {
        mr->forget(this);
    }
    uct_tm_proto_worker_destroy(worker_);
    for (Cq *cq : {tx_cq_, rx_cq_}) {
        if (cq != nullptr) {
            cq->detach(this);
        }
    }
    for (Cntr *cntr : {tx_cntr_, rx_cntr_}) {
        if (cntr != nullptr) {
            cntr->detach(this);
        }
    }
    if (av_ != nullptr) {
        av_->detach(this);
    }
    --domain_.children;
}

int Endpoint::bind(struct fid *bfid, uint64_t flags) {
    if (enabled_) {
        return -FI_EOPBADSTATE;
    }
    if (bfid == nullptr) {
        return -FI_EINVAL;
    }
    if (Cq *cq = object_of<Cq>(bfid)) {
        return bind_cq(cq, flags);
    }
    if (Av *av = object_of<Av>(bfid)) {
        return (flags == 0) ? bind_av(av) : -FI_EBADFLAGS;
    }
    if (Cntr *cntr = object_of<Cntr>(bfid)) {
        return bind_cntr(cntr, flags);
    }
    return -FI_EINVAL; /* EQs and others are not offered */
}

int Endpoint::bind_cq(Cq *cq, uint64_t flags) {
    if ((&cq->domain() != &domain_) ||
        ((flags & ~(FI_TRANSMIT | FI_RECV | FI_SELECTIVE_COMPLETION)) != 0)) {
        return (&cq->domain() != &domain_) ? -FI_EINVAL : -FI_EBADFLAGS;
    }
    if ((flags & (FI_TRANSMIT | FI_RECV)) == 0) {
        return -FI_EBADFLAGS;
    }
    if (((flags & FI_TRANSMIT) && tx_cq_) || ((flags & FI_RECV) && rx_cq_)) {
        return -FI_EINVAL; /* one CQ per direction */
    }
    const bool selective = (flags & FI_SELECTIVE_COMPLETION) != 0;
    if (flags & FI_TRANSMIT) {
        tx_cq_        = cq;
        tx_selective_ = selective;
        cq->attach(this);
    }
    if (flags & FI_RECV) {
        rx_cq_        = cq;
        rx_selective_ = selective;
        cq->attach(this);
    }
    return 0;
}

int Endpoint::bind_av(Av *av) {
    if ((&av->domain() != &domain_) || (av_ != nullptr)) {
        return -FI_EINVAL;
    }
    av_ = av;
    av->attach(this);
    return 0;
}

/* Sends (FI_SEND) and receives (FI_RECV); no RMA, so no FI_READ,
 * FI_WRITE, FI_REMOTE_*. */
int Endpoint::bind_cntr(Cntr *cntr, uint64_t flags) {
    if (&cntr->domain() != &domain_) {
        return -FI_EINVAL;
    }
    if (((flags & ~(FI_SEND | FI_RECV)) != 0) || (flags == 0)) {
        return -FI_EBADFLAGS;
    }
    if (((flags & FI_SEND) && tx_cntr_) || ((flags & FI_RECV) && rx_cntr_)) {
        return -FI_EINVAL; /* one counter per direction */
    }
    if (flags & FI_SEND) {
        tx_cntr_ = cntr;
        cntr->attach(this);
    }
    if (flags & FI_RECV) {
        rx_cntr_ = cntr;
        cntr->attach(this);
    }
    return 0;
}

/* FI_GETOPSFLAG / FI_SETOPSFLAG: *flags names one direction (FI_TRANSMIT
 * or FI_RECV) and carries, or takes, the op flags of its calls without a
 * flags argument. */
int Endpoint::ops_flags(bool set, uint64_t *flags) {
    if (flags == nullptr) {
        return -FI_EINVAL;
    }
    const uint64_t dir = *flags & (FI_TRANSMIT | FI_RECV);
    if ((dir != FI_TRANSMIT) && (dir != FI_RECV)) {
        return -FI_EINVAL; /* exactly one direction */
    }
    uint64_t      &mine    = (dir == FI_TRANSMIT) ? tx_op_flags_ : rx_op_flags_;
    const uint64_t allowed = (dir == FI_TRANSMIT) ? kTxOpFlags : kRxOpFlags;
    if (!set) {
        *flags = dir | mine;
        return 0;
    }
    if ((*flags & ~dir & ~allowed) != 0) {
        return -FI_EBADFLAGS;
    }
    mine = *flags & allowed;
    return 0;
}

/* FI_OPT_MIN_MULTI_RECV (a size_t) is the only option: the layer's. */
int Endpoint::getopt(int level, int name, void *value, size_t *len) {
    if (level != FI_OPT_ENDPOINT) {
        return -FI_ENOSYS;
    }
    if (name != FI_OPT_MIN_MULTI_RECV) {
        return -FI_ENOPROTOOPT;
    }
    if ((value == nullptr) || (len == nullptr) || (*len < sizeof(size_t))) {
        return -FI_EINVAL;
    }
    *static_cast<size_t *>(value) = uct_tm_proto_worker_min_multi_recv(worker_);
    *len                          = sizeof(size_t);
    return 0;
}

int Endpoint::setopt(int level, int name, const void *value, size_t len) {
    if (level != FI_OPT_ENDPOINT) {
        return -FI_ENOSYS;
    }
    if (name != FI_OPT_MIN_MULTI_RECV) {
        return -FI_ENOPROTOOPT;
    }
    if ((value == nullptr) || (len != sizeof(size_t))) {
        return -FI_EINVAL;
    }
    /* 0 is refused by the layer: a buffer with no room left stays posted */
    return fi_error(
        uct_tm_proto_worker_set_min_multi_recv(worker_, *static_cast<const size_t *>(value)));
}

/* Connects to every name already in the AV; later ones connect at insert. */
int Endpoint::enable() {
    if (enabled_) {
        return 0;
    }
    /* An RDM endpoint needs both CQs and an AV: the error names what lacks. */
    if ((tx_cq_ == nullptr) || (rx_cq_ == nullptr)) {
        return -FI_ENOCQ;
    }
    if (av_ == nullptr) {
        return -FI_ENOAV;
    }
    for (fi_addr_t addr = 0; addr < av_->size(); ++addr) {
        const Name *name = av_->lookup(addr);
        const int   ret  = (name != nullptr) ? connect(addr, *name) : 0;
        if (ret != 0) {
            return ret;
        }
    }
    enabled_     = true;
    ready_kinds_ = caps_ & (FI_TAGGED | FI_MSG);
    return 0;
}

int Endpoint::getname(void *addr, size_t *addrlen) {
    if (addrlen == nullptr) {
        return -FI_EINVAL;
    }
    Name               name{};
    size_t             length = sizeof(name.address);
    const ucs_status_t status = uct_tm_proto_worker_address_compact(worker_, name.address, &length);
    if (status != UCS_OK) {
        return -FI_EOTHER; /* getinfo lists only transports whose address fits */
    }
    name.magic        = kNameMagic;
    name.length       = static_cast<uint8_t>(length);
    const size_t room = *addrlen;
    *addrlen          = kAddrLen;
    if ((addr == nullptr) || (room < kAddrLen)) {
        return -FI_ETOOSMALL;
    }
    memcpy(addr, &name, kAddrLen);
    return 0;
}

/* Inserted while bound but not enabled: connected at insert already. */
int Endpoint::connect(fi_addr_t addr, const Name &name) {
    if (peers_.size() <= addr) {
        peers_.resize(addr + 1, nullptr);
    }
    if (peers_[addr] != nullptr) {
        return 0;
    }
    uct_tm_proto_ep_h  ep     = nullptr;
    const ucs_status_t status = uct_tm_proto_ep_create(worker_, name.address, name.length, &ep);
    if ((status == UCS_ERR_UNREACHABLE) || (status == UCS_ERR_SHMEM_SEGMENT)) {
        /* the entry stays: RDM names are inserted without the peer's
         * consent, and one may be gone by then (its messages still count;
         * a shared-memory peer that is gone left no segment to attach) */
        unreachable_.insert(addr);
        return 0;
    }
    if (status != UCS_OK) {
        return fi_error((status == UCS_INPROGRESS) ? UCS_ERR_UNSUPPORTED : status);
    }
    peers_[addr] = ep;
    sources_[ep] = addr;
    last_source_ = {}; /* it may hold this handle's earlier "not found" */
    return 0;
}

/* The layer completes what still uses the endpoint with UCS_ERR_CANCELED. */
void Endpoint::disconnect(fi_addr_t addr) {
    unreachable_.erase(addr);
    if ((addr < peers_.size()) && (peers_[addr] != nullptr)) {
        sources_.erase(peers_[addr]);
        last_source_ = {};
        uct_tm_proto_ep_destroy(peers_[addr]);
        peers_[addr] = nullptr;
    }
}

void Endpoint::unmapped(Mr *mr) {
    mrs_.erase(std::remove(mrs_.begin(), mrs_.end(), mr), mrs_.end());
}

/* What an operation to or from `addr` gets when there is no peer there. */
ssize_t Endpoint::no_peer(fi_addr_t addr) const {
    return (unreachable_.count(addr) != 0) ? -FI_EHOSTUNREACH : -FI_EINVAL;
}

fi_addr_t Endpoint::look_up_source(uct_tm_proto_ep_h ep) const {
    const auto it = sources_.find(ep);
    last_source_  = {ep, (it != sources_.end()) ? it->second : FI_ADDR_NOTAVAIL};
    return last_source_.addr;
}

/* The earliest operation posted with `context`. The layer completes it
 * with UCS_ERR_CANCELED if the cancel won, normally if it lost. */
ssize_t Endpoint::cancel(void *context) {
    const Op *op = ops_.earliest(
        [&](const Op &o) { return (o.context == context) && (o.req != 0); });
    if (op == nullptr) {
        return -FI_ENOENT;
    }
    const ucs_status_t status = uct_tm_proto_request_cancel(worker_, op->req);
    return ((status == UCS_OK) || (status == UCS_ERR_BUSY) || (status == UCS_ERR_NO_ELEM))
               ? 0
               : fi_error(status);
}

int open_endpoint(fid_domain *domain_fid, fi_info *info, fid_ep **ep, void *context) {
    Domain *domain = object_of<Domain>(domain_fid);
    if ((domain == nullptr) || (info == nullptr) || (ep == nullptr) || (info->ep_attr == nullptr) ||
        (info->tx_attr == nullptr) || (info->rx_attr == nullptr)) {
        return -FI_EINVAL;
    }
    if ((info->ep_attr->type != FI_EP_RDM) || ((info->caps & ~kCaps) != 0)) {
        return -FI_EINVAL;
    }
    uct_tm_proto_worker_params_t params{};
    params.field_mask            = UCT_TM_PROTO_WORKER_FIELD_TRANSPORTS;
    params.transports            = domain->transport().c_str();
    uct_tm_proto_worker_h worker = nullptr;
    const ucs_status_t    status = uct_tm_proto_worker_create(&params, &worker);
    if (status != UCS_OK) {
        ucs_warn("tm fabric: no endpoint over %s: %s", params.transports,
                 ucs_status_string(status));
        return fi_error(status);
    }
    Endpoint *e = new (std::nothrow) Endpoint(*domain, *info, worker, context);
    if (e == nullptr) {
        uct_tm_proto_worker_destroy(worker);
        return -FI_ENOMEM;
    }
    *ep = e->fid();
    return 0;
}

}  // namespace fabric
}  // namespace uct_tm
