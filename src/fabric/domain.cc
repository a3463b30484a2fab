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

fi_ops_domain make_domain_ops() {
    fi_ops_domain o{};
    o.size             = sizeof(o);
    o.av_open          = open_av;
    o.cq_open          = open_cq;
    o.endpoint         = open_endpoint;
    o.scalable_ep      = TM_FI_NOSYS(fi_ops_domain, scalable_ep);
    o.cntr_open        = open_cntr;
    o.poll_open        = TM_FI_NOSYS(fi_ops_domain, poll_open);
    o.stx_ctx          = TM_FI_NOSYS(fi_ops_domain, stx_ctx);
    o.srx_ctx          = TM_FI_NOSYS(fi_ops_domain, srx_ctx);
    o.query_atomic     = TM_FI_NOSYS(fi_ops_domain, query_atomic);
    o.query_collective = TM_FI_NOSYS(fi_ops_domain, query_collective);
    o.endpoint2        = TM_FI_NOSYS(fi_ops_domain, endpoint2);
    return o;
}

fi_ops        g_fid_ops    = make_fid_ops(domain_close);
fi_ops_domain g_domain_ops = make_domain_ops();

}  // namespace

Domain::Domain(Fabric &fabric, std::string transport, void *context)
    : h_{}, fabric_(fabric), transport_(std::move(transport)) {
    h_.self            = this;
    h_.fid.fid.fclass  = FI_CLASS_DOMAIN;
    h_.fid.fid.context = context;
    h_.fid.fid.ops     = &g_fid_ops;
    h_.fid.ops         = &g_domain_ops;
    h_.fid.mr          = &g_mr_ops;
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
    if ((info->domain_attr->threading != FI_THREAD_UNSPEC) &&
        (info->domain_attr->threading != FI_THREAD_DOMAIN)) {
        return -FI_EINVAL;
    }
    Domain *d = new (std::nothrow) Domain(*fabric, name, context);
    if (d == nullptr) {
        return -FI_ENOMEM;
    }
    ++fabric->domains;
    *domain = d->fid();
    return 0;
}

}  // namespace fabric
}  // namespace uct_tm
