/*
 * Memory registration. The domain runs with mr_mode 0: the layer registers
 * the buffers its rendezvous reads or writes itself (a registration cache,
 * docs/proto.md), so fi_mr_reg only checks and records the region, and the
 * desc operations carry is accepted and not used. No RMA: no remote access.
 */
#include "objects.h"

#include <new>

namespace uct_tm {
namespace fabric {

namespace {

constexpr uint64_t kAccess = FI_SEND | FI_RECV;

int mr_close(fid *f) {
    Mr *mr = object_of<Mr>(f);
    if (mr == nullptr) {
        return -FI_EINVAL;
    }
    --mr->domain().children;
    delete mr;
    return 0;
}

fi_ops g_fid_ops = make_fid_ops(mr_close);

int mr_reg(fid *f, const void *buf, size_t len, uint64_t access, uint64_t offset,
           uint64_t requested_key, uint64_t flags, fid_mr **mr, void *context) {
    Domain *domain = object_of<Domain>(f);
    if ((domain == nullptr) || (mr == nullptr) || ((buf == nullptr) && (len > 0)) ||
        (offset != 0)) {
        return -FI_EINVAL;
    }
    if ((access & ~kAccess) != 0) {
        return -FI_EINVAL; /* remote access needs FI_RMA, which is not offered */
    }
    if (flags != 0) {
        return -FI_EBADFLAGS;
    }
    Mr *m = new (std::nothrow) Mr(*domain, buf, len, requested_key, context);
    if (m == nullptr) {
        return -FI_ENOMEM;
    }
    ++domain->children;
    *mr = m->fid();
    return 0;
}

int mr_regv(fid *f, const iovec *iov, size_t count, uint64_t access, uint64_t offset,
            uint64_t requested_key, uint64_t flags, fid_mr **mr, void *context) {
    if ((iov == nullptr) || (count != 1)) {
        return -FI_EINVAL; /* mr_iov_limit is 1 */
    }
    return mr_reg(f, iov[0].iov_base, iov[0].iov_len, access, offset, requested_key, flags, mr,
                  context);
}

int mr_regattr(fid *f, const fi_mr_attr *attr, uint64_t flags, fid_mr **mr) {
    if (attr == nullptr) {
        return -FI_EINVAL;
    }
    return mr_regv(f, attr->mr_iov, attr->iov_count, attr->access, attr->offset,
                   attr->requested_key, flags, mr, attr->context);
}

fi_ops_mr make_mr_ops() {
    fi_ops_mr o{};
    o.size    = sizeof(o);
    o.reg     = mr_reg;
    o.regv    = mr_regv;
    o.regattr = mr_regattr;
    return o;
}

}  // namespace

fi_ops_mr g_mr_ops = make_mr_ops();

Mr::Mr(Domain &domain, const void *buf, size_t len, uint64_t key, void *context)
    : h_{}, domain_(domain) {
    (void)buf; /* recorded by the caller's registration only: nothing uses it */
    (void)len;
    h_.self            = this;
    h_.fid.fid.fclass  = FI_CLASS_MR;
    h_.fid.fid.context = context;
    h_.fid.fid.ops     = &g_fid_ops;
    h_.fid.mem_desc    = this;
    h_.fid.key         = key;
}

}  // namespace fabric
}  // namespace uct_tm
