/*
 * Address vectors: names (fi_getname's Name) by fi_addr_t. FI_AV_TABLE
 * and FI_AV_MAP both hand out the entry's index, which a map may (any
 * value is the provider's to choose) and a table must. Every bound
 * endpoint gets a layer endpoint per entry at insertion.
 */
#include "endpoint.h"

#include <algorithm>
#include <cstring>
#include <new>

namespace uct_tm {
namespace fabric {

namespace {

Av *av_of(fid_av *f) { return object_of<Av>(f); }

int av_insert(fid_av *f, const void *addr, size_t count, fi_addr_t *fi_addr, uint64_t flags,
              void *) {
    Av *av = av_of(f);
    return (av == nullptr) ? -FI_EINVAL
                           : guarded([&] { return av->insert(addr, count, fi_addr, flags); });
}

int av_remove(fid_av *f, fi_addr_t *fi_addr, size_t count, uint64_t flags) {
    Av *av = av_of(f);
    return (av == nullptr) ? -FI_EINVAL : av->remove(fi_addr, count, flags);
}

int av_lookup(fid_av *f, fi_addr_t fi_addr, void *addr, size_t *addrlen) {
    Av *av = av_of(f);
    if ((av == nullptr) || (addrlen == nullptr)) {
        return -FI_EINVAL;
    }
    const Name *name = av->lookup(fi_addr);
    if (name == nullptr) {
        return -FI_ENOENT;
    }
    const size_t room = *addrlen;
    *addrlen          = kAddrLen;
    if ((addr == nullptr) || (room < kAddrLen)) {
        if ((addr != nullptr) && (room > 0)) {
            memcpy(addr, name, room);
        }
        return -FI_ETOOSMALL;
    }
    memcpy(addr, name, kAddrLen);
    return 0;
}

/* "fi_tm://" and the worker address in hex; *len in: room, out: needed. */
const char *av_straddr(fid_av *, const void *addr, char *buf, size_t *len) {
    if ((addr == nullptr) || (len == nullptr)) {
        return nullptr;
    }
    Name name;
    memcpy(&name, addr, sizeof(name));
    std::string text = "fi_tm://";
    if (!name_valid(name)) {
        text += "invalid";
    }
    for (size_t i = 0; name_valid(name) && (i < name.length); ++i) {
        static const char kHex[] = "0123456789abcdef";
        text += kHex[name.address[i] >> 4];
        text += kHex[name.address[i] & 15];
    }
    if ((buf != nullptr) && (*len > 0)) {
        snprintf(buf, *len, "%s", text.c_str());
    }
    *len = text.size() + 1;
    return buf;
}

template <template <auto> class W> fi_ops_av make_av_ops() {
    fi_ops_av o{};
    o.size      = sizeof(o);
    o.insert    = W<av_insert>::fn;
    o.insertsvc = TM_FI_NOSYS(fi_ops_av, insertsvc);
    o.insertsym = TM_FI_NOSYS(fi_ops_av, insertsym);
    o.remove    = W<av_remove>::fn;
    o.lookup    = W<av_lookup>::fn;
    o.straddr   = av_straddr; /* reads only its arguments */
    o.av_set    = TM_FI_NOSYS(fi_ops_av, av_set);
    return o;
}

fi_ops    g_fid_ops        = make_fid_ops(close_bound<Av>);
fi_ops    g_fid_ops_serial = make_fid_ops(Serial<close_bound<Av>>::fn);
fi_ops_av g_av_ops         = make_av_ops<Direct>();
fi_ops_av g_av_ops_serial  = make_av_ops<Serial>();

}  // namespace

Av::Av(Domain &domain, fi_av_type type, void *context) : h_{}, domain_(domain), type_(type) {
    h_.self            = this;
    h_.fid.fid.fclass  = FI_CLASS_AV;
    h_.fid.fid.context = context;
    h_.fid.fid.ops     = domain.ops(g_fid_ops, g_fid_ops_serial);
    h_.fid.ops         = domain.ops(g_av_ops, g_av_ops_serial);
}

const Name *Av::lookup(fi_addr_t addr) const {
    if ((addr >= entries_.size()) || !entries_[addr].has_value()) {
        return nullptr;
    }
    return &*entries_[addr];
}

/* A name every bound endpoint could connect to, or none of them keeps it. */
int Av::insert_one(const Name &name, fi_addr_t *fi_addr) {
    const fi_addr_t addr = entries_.size();
    entries_.emplace_back(name);
    for (size_t i = 0; i < endpoints_.size(); ++i) {
        const int ret = endpoints_[i]->connect(addr, name);
        if (ret != 0) {
            while (i-- > 0) {
                endpoints_[i]->disconnect(addr);
            }
            entries_.back().reset(); /* the index is not reused */
            *fi_addr = FI_ADDR_NOTAVAIL;
            return ret;
        }
    }
    *fi_addr = addr;
    return 0;
}

/* The number of names inserted; a name that is not one of this provider's
 * or that no bound endpoint can reach gets FI_ADDR_NOTAVAIL. */
int Av::insert(const void *addr, size_t count, fi_addr_t *fi_addr, uint64_t flags) {
    if ((flags & ~FI_MORE) != 0) {
        return -FI_EBADFLAGS;
    }
    if (((addr == nullptr) && (count > 0)) || ((fi_addr == nullptr) && (type_ == FI_AV_MAP))) {
        return -FI_EINVAL;
    }
    int inserted = 0;
    for (size_t i = 0; i < count; ++i) {
        Name name;
        memcpy(&name, static_cast<const uint8_t *>(addr) + i * kAddrLen, sizeof(name));
        fi_addr_t out = FI_ADDR_NOTAVAIL;
        if (name_valid(name) && (insert_one(name, &out) == 0)) {
            ++inserted;
        }
        if (fi_addr != nullptr) {
            fi_addr[i] = out;
        }
    }
    return inserted;
}

/* All or nothing: an address that names no entry fails the call unchanged. */
int Av::remove(const fi_addr_t *fi_addr, size_t count, uint64_t flags) {
    if (flags != 0) {
        return -FI_EBADFLAGS;
    }
    if ((fi_addr == nullptr) && (count > 0)) {
        return -FI_EINVAL;
    }
    for (size_t i = 0; i < count; ++i) {
        if (lookup(fi_addr[i]) == nullptr) {
            return -FI_EINVAL;
        }
    }
    for (size_t i = 0; i < count; ++i) {
        for (Endpoint *ep : endpoints_) {
            ep->disconnect(fi_addr[i]);
        }
        entries_[fi_addr[i]].reset();
    }
    return 0;
}

int open_av(fid_domain *domain_fid, fi_av_attr *attr, fid_av **av, void *context) {
    Domain *domain = object_of<Domain>(domain_fid);
    if ((domain == nullptr) || (attr == nullptr) || (av == nullptr)) {
        return -FI_EINVAL;
    }
    fi_av_type type = (attr->type == FI_AV_UNSPEC) ? FI_AV_TABLE : attr->type;
    if (((type != FI_AV_TABLE) && (type != FI_AV_MAP)) || (attr->rx_ctx_bits != 0)) {
        return -FI_EINVAL;
    }
    if ((attr->name != nullptr) || ((attr->flags & (FI_EVENT | FI_READ)) != 0)) {
        return -FI_ENOSYS; /* no shared (named) AVs, no AV events */
    }
    if ((attr->flags & ~FI_SYMMETRIC) != 0) {
        return -FI_EBADFLAGS;
    }
    Av *a = new (std::nothrow) Av(*domain, type, context);
    if (a == nullptr) {
        return -FI_ENOMEM;
    }
    ++domain->children;
    *av = a->fid();
    return 0;
}

}  // namespace fabric
}  // namespace uct_tm
