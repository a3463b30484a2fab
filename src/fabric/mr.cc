/*
 * Memory registration: regions mapped into the layer's workers on first
 * use (objects.h, Mr). mr_mode 0: the layer registers the buffers of
 * operations without a desc itself (its registration cache).
 */
#include "endpoint.h"

#include <algorithm>

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
    const int ret = mr->unmap_all();
    if (ret != 0) {
        return ret;
    }
    mr->domain().mrs.erase(mr);
    --mr->domain().children;
    delete mr;
    return 0;
}

fi_ops g_fid_ops        = make_fid_ops(mr_close);
fi_ops g_fid_ops_serial = make_fid_ops(Serial<mr_close>::fn);

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
    domain->mrs.insert(m);
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

template <template <auto> class W> fi_ops_mr make_mr_ops() {
    fi_ops_mr o{};
    o.size    = sizeof(o);
    o.reg     = W<mr_reg>::fn;
    o.regv    = W<mr_regv>::fn;
    o.regattr = W<mr_regattr>::fn;
    return o;
}

}  // namespace

fi_ops_mr g_mr_ops        = make_mr_ops<Direct>();
fi_ops_mr g_mr_ops_serial = make_mr_ops<Serial>();

Mr::Mr(Domain &domain, const void *buf, size_t len, uint64_t key, void *context)
    : h_{}, domain_(domain), buf_(static_cast<const uint8_t *>(buf)), len_(len) {
    h_.self            = this;
    h_.fid.fid.fclass  = FI_CLASS_MR;
    h_.fid.fid.context = context;
    h_.fid.fid.ops     = domain.ops(g_fid_ops, g_fid_ops_serial);
    h_.fid.mem_desc    = this;
    h_.fid.key         = key;
}

uct_tm_proto_mem_h Mr::map_for(Endpoint *ep, uct_tm_proto_worker_h worker, const void *buf,
                               size_t len) {
    const auto *p = static_cast<const uint8_t *>(buf);
    if ((len_ == 0) || (p < buf_) || (len > len_) || (static_cast<size_t>(p - buf_) > len_ - len)) {
        return 0;
    }
    for (const Mapping &m : mappings_) {
        if (m.ep == ep) {
            return m.memh;
        }
    }
    uct_tm_proto_mem_map_params_t params{};
    params.field_mask = UCT_TM_PROTO_MEM_MAP_FIELD_ADDRESS | UCT_TM_PROTO_MEM_MAP_FIELD_LENGTH;
    params.address    = const_cast<uint8_t *>(buf_);
    params.length     = len_;
    uct_tm_proto_mem_h memh = 0;
    if (uct_tm_proto_mem_map(worker, &params, &memh) != UCS_OK) {
        return 0; /* the layer registers the buffer itself, as without a desc */
    }
    mappings_.push_back(Mapping{ep, worker, memh});
    ep->mapped(this);
    return memh;
}

int Mr::unmap_all() {
    while (!mappings_.empty()) {
        const Mapping &m = mappings_.back();
        if (uct_tm_proto_mem_unmap(m.worker, m.memh) == UCS_ERR_BUSY) {
            return -FI_EBUSY;
        }
        m.ep->unmapped(this);
        mappings_.pop_back();
    }
    return 0;
}

void Mr::forget(Endpoint *ep) {
    mappings_.erase(std::remove_if(mappings_.begin(), mappings_.end(),
                                   [ep](const Mapping &m) { return m.ep == ep; }),
                    mappings_.end());
}

Mr *mr_of_desc(Domain &domain, void *desc) {
    return ((desc != nullptr) && (domain.mrs.count(desc) != 0)) ? static_cast<Mr *>(desc) : nullptr;
}

}  // namespace fabric
}  // namespace uct_tm
