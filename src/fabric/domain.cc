/*
 * A domain: one transport of the layer ("tm_sm", "posix", "tcp"); its
 * endpoints open workers over it.
 */
#include "endpoint.h"
#include "getinfo.h"

#include <algorithm>
#include <new>

namespace uct_tm {
namespace fabric {

namespace {

int domain_close(fid *f) {
    Domain *domain = object_of<Domain>(f);
    if (domain == nullptr) {
        return -FI_EINVAL;
    }
    if (domain->children > 0) {
        return -FI_EBUSY;
    }
    --domain->fabric().domains;
    delete domain;
    return 0;
}

template <template <auto> class W> fi_ops_domain make_domain_ops() {
    fi_ops_domain o{};
    o.size             = sizeof(o);
    o.av_open          = W<open_av>::fn;
    o.cq_open          = W<open_cq>::fn;
    o.endpoint         = W<open_endpoint>::fn;
    o.scalable_ep      = TM_FI_NOSYS(fi_ops_domain, scalable_ep);
    o.cntr_open        = W<open_cntr>::fn;
    o.poll_open        = TM_FI_NOSYS(fi_ops_domain, poll_open);
    o.stx_ctx          = TM_FI_NOSYS(fi_ops_domain, stx_ctx);
    o.srx_ctx          = TM_FI_NOSYS(fi_ops_domain, srx_ctx);
    o.query_atomic     = TM_FI_NOSYS(fi_ops_domain, query_atomic);
    o.query_collective = TM_FI_NOSYS(fi_ops_domain, query_collective);
    o.endpoint2        = TM_FI_NOSYS(fi_ops_domain, endpoint2);
    return o;
}

/* Closing is not serialized: the lock is the domain's own. */
fi_ops        g_fid_ops           = make_fid_ops(domain_close);
fi_ops_domain g_domain_ops        = make_domain_ops<Direct>();
fi_ops_domain g_domain_ops_serial = make_domain_ops<Serial>();

/* The domain of a child object of class Obj, or null. */
template <typename Obj> Domain *domain_of(const fid *f) {
    Obj *obj = object_of<Obj>(f);
    return (obj == nullptr) ? nullptr : &obj->domain();
}

Domain *domain_of_fid(const fid *f) {
    switch ((f == nullptr) ? 0 : f->fclass) {
    case FI_CLASS_DOMAIN: return object_of<Domain>(f);
    case FI_CLASS_EP: return domain_of<Endpoint>(f);
    case FI_CLASS_CQ: return domain_of<Cq>(f);
    case FI_CLASS_CNTR: return domain_of<Cntr>(f);
    case FI_CLASS_AV: return domain_of<Av>(f);
    case FI_CLASS_MR: return domain_of<Mr>(f);
    default: return nullptr;
    }
}

}  // namespace

std::mutex *serial_lock(const fid *f) {
    Domain *domain = domain_of_fid(f);
    return (domain == nullptr) ? nullptr : domain->serial_lock();
}

Domain::Domain(Fabric &fabric, std::string transport, bool serialized, void *context)
    : h_{}, fabric_(fabric), transport_(std::move(transport)), serialized_(serialized) {
    h_.self            = this;
    h_.fid.fid.fclass  = FI_CLASS_DOMAIN;
    h_.fid.fid.context = context;
    h_.fid.fid.ops     = &g_fid_ops;
    h_.fid.ops         = ops(g_domain_ops, g_domain_ops_serial);
    h_.fid.mr          = ops(g_mr_ops, g_mr_ops_serial);
}

int open_domain(fid_fabric *fabric_fid, fi_info *info, fid_domain **domain, void *context) {
    Fabric *fabric = object_of<Fabric>(fabric_fid);
    if ((fabric == nullptr) || (info == nullptr) || (domain == nullptr) ||
        (info->domain_attr == nullptr) || (info->domain_attr->name == nullptr)) {
        return -FI_EINVAL;
    }
    const std::string name = info->domain_attr->name;
    if (!offered(name)) {
        return -FI_ENODATA; /* not a transport of this provider */
    }
    const fi_threading threading = info->domain_attr->threading;
    if (!threading_known(threading)) {
        return -FI_EINVAL;
    }
    /* FI_THREAD_UNSPEC in an info the application built: the safe level */
    Domain *d = new (std::nothrow) Domain(*fabric, name, threading != FI_THREAD_DOMAIN, context);
    if (d == nullptr) {
        return -FI_ENOMEM;
    }
    ++fabric->domains;
    *domain = d->fid();
    return 0;
}

}  // namespace fabric
}  // namespace uct_tm
