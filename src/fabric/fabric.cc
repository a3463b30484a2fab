/* The fabric: the provider's one fabric, "tm", opening its domains. */
#include "objects.h"

#include <new>
#include <strings.h>

namespace uct_tm {
namespace fabric {

namespace {

int fabric_close(fid *f) {
    Fabric *fabric = object_of<Fabric>(f);
    if (fabric == nullptr) {
        return -FI_EINVAL;
    }
    if (fabric->domains > 0) {
        return -FI_EBUSY;
    }
    delete fabric;
    return 0;
}

/* fi_trywait: -FI_EAGAIN while an EQ holds events (its fd is readable);
 * only EQs have wait fds. */
int fabric_trywait(fid_fabric *f, fid **fids, int count) {
    if ((object_of<Fabric>(f) == nullptr) || (count < 0) || ((fids == nullptr) && (count > 0))) {
        return -FI_EINVAL;
    }
    for (int i = 0; i < count; ++i) {
        Eq *eq = object_of<Eq>(fids[i]);
        if ((eq == nullptr) || (eq->wait_fd() < 0)) {
            return -FI_EINVAL;
        }
    }
    for (int i = 0; i < count; ++i) {
        if (!object_of<Eq>(fids[i])->empty()) {
            return -FI_EAGAIN;
        }
    }
    return 0;
}

fi_ops_fabric make_fabric_ops() {
    fi_ops_fabric o{};
    o.size       = sizeof(o);
    o.domain     = open_domain;
    o.passive_ep = TM_FI_NOSYS(fi_ops_fabric, passive_ep);
    o.eq_open    = open_eq;
    o.wait_open  = TM_FI_NOSYS(fi_ops_fabric, wait_open);
    o.trywait    = fabric_trywait;
    o.domain2    = TM_FI_NOSYS(fi_ops_fabric, domain2);
    return o;
}

fi_ops        g_fid_ops    = make_fid_ops(fabric_close);
fi_ops_fabric g_fabric_ops = make_fabric_ops();

}  // namespace

Fabric::Fabric(void *context) : h_{} {
    h_.self            = this;
    h_.fid.fid.fclass  = FI_CLASS_FABRIC;
    h_.fid.fid.context = context;
    h_.fid.fid.ops     = &g_fid_ops;
    h_.fid.ops         = &g_fabric_ops;
}

int open_fabric(fi_fabric_attr *attr, fid_fabric **fabric, void *context) {
    if ((attr == nullptr) || (fabric == nullptr)) {
        return -FI_EINVAL;
    }
    if ((attr->name != nullptr) && (strcasecmp(attr->name, kFabricName) != 0)) {
        return -FI_ENODATA;
    }
    Fabric *f = new (std::nothrow) Fabric(context);
    if (f == nullptr) {
        return -FI_ENOMEM;
    }
    *fabric = f->fid();
    return 0;
}

}  // namespace fabric
}  // namespace uct_tm
