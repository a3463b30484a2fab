/*
 * Counters: the bound endpoints count their completed operations into
 * them. Reading and waiting progress those endpoints (FI_PROGRESS_MANUAL).
 */
#include "deadline.h"
#include "endpoint.h"

#include <algorithm>
#include <new>

namespace uct_tm {
namespace fabric {

namespace {

Cntr *cntr_of(fid_cntr *f) { return object_of<Cntr>(f); }

/* fi_cntr_read and fi_cntr_readerr return the value itself: a bad fid
 * reads 0, the only answer the signature allows. */
uint64_t cntr_read(fid_cntr *f) {
    Cntr *cntr = cntr_of(f);
    return (cntr == nullptr) ? 0 : cntr->read();
}

uint64_t cntr_readerr(fid_cntr *f) {
    Cntr *cntr = cntr_of(f);
    return (cntr == nullptr) ? 0 : cntr->read_error();
}

/* `fn` on the counter behind `f`, or -FI_EINVAL. */
template <typename Fn> int with_cntr(fid_cntr *f, Fn &&fn) {
    Cntr *cntr = cntr_of(f);
    if (cntr == nullptr) {
        return -FI_EINVAL;
    }
    fn(*cntr);
    return 0;
}

int cntr_add(fid_cntr *f, uint64_t value) {
    return with_cntr(f, [&](Cntr &c) { c.add(value); });
}

int cntr_set(fid_cntr *f, uint64_t value) {
    return with_cntr(f, [&](Cntr &c) { c.set(value); });
}

int cntr_adderr(fid_cntr *f, uint64_t value) {
    return with_cntr(f, [&](Cntr &c) { c.add_error(value); });
}

int cntr_seterr(fid_cntr *f, uint64_t value) {
    return with_cntr(f, [&](Cntr &c) { c.set_error(value); });
}

int cntr_wait(fid_cntr *f, uint64_t threshold, int timeout) {
    Cntr *cntr = cntr_of(f);
    return (cntr == nullptr) ? -FI_EINVAL : cntr->wait(threshold, timeout);
}

/* fi_cntr_wait takes a serialized domain's lock per attempt (Cntr::wait). */
template <template <auto> class W> fi_ops_cntr make_cntr_ops() {
    fi_ops_cntr o{};
    o.size    = sizeof(o);
    o.read    = W<cntr_read>::fn;
    o.readerr = W<cntr_readerr>::fn;
    o.add     = W<cntr_add>::fn;
    o.set     = W<cntr_set>::fn;
    o.wait    = cntr_wait;
    o.adderr  = W<cntr_adderr>::fn;
    o.seterr  = W<cntr_seterr>::fn;
    return o;
}

fi_ops      g_fid_ops         = make_fid_ops(close_bound<Cntr>);
fi_ops      g_fid_ops_serial  = make_fid_ops(Serial<close_bound<Cntr>>::fn);
fi_ops_cntr g_cntr_ops        = make_cntr_ops<Direct>();
fi_ops_cntr g_cntr_ops_serial = make_cntr_ops<Serial>();

}  // namespace

Cntr::Cntr(Domain &domain, bool waitable, void *context)
    : h_{}, domain_(domain), waitable_(waitable) {
    h_.self            = this;
    h_.fid.fid.fclass  = FI_CLASS_CNTR;
    h_.fid.fid.context = context;
    h_.fid.fid.ops     = domain.ops(g_fid_ops, g_fid_ops_serial);
    h_.fid.ops         = domain.ops(g_cntr_ops, g_cntr_ops_serial);
}

uint64_t Cntr::read() {
    progress_each(endpoints_);
    return value_;
}

uint64_t Cntr::read_error() {
    progress_each(endpoints_);
    return errors_;
}

int Cntr::wait(uint64_t threshold, int timeout) {
    if (!waitable_) {
        return -FI_ENOSYS; /* FI_WAIT_NONE: no blocking waits */
    }
    const Deadline deadline(timeout);
    const uint64_t error = errors_;
    std::mutex    *lock  = domain_.serial_lock();
    for (;;) {
        if (holding(lock, [&] { return read(); }) >= threshold) {
            return 0;
        }
        if (errors_ != error) {
            return -FI_EAVAIL;
        }
        if (deadline.passed()) {
            return -FI_ETIMEDOUT;
        }
    }
}

int open_cntr(fid_domain *domain_fid, fi_cntr_attr *attr, fid_cntr **cntr, void *context) {
    Domain *domain = object_of<Domain>(domain_fid);
    if ((domain == nullptr) || (attr == nullptr) || (cntr == nullptr)) {
        return -FI_EINVAL;
    }
    if (attr->events != FI_CNTR_EVENTS_COMP) {
        return -FI_EINVAL; /* the only kind there is */
    }
    const bool waitable = (attr->wait_obj == FI_WAIT_UNSPEC) || (attr->wait_obj == FI_WAIT_YIELD);
    if ((attr->wait_obj != FI_WAIT_NONE) && !waitable) {
        return -FI_ENOSYS; /* no fds or wait sets */
    }
    if (attr->flags != 0) {
        return -FI_EBADFLAGS;
    }
    Cntr *c = new (std::nothrow) Cntr(*domain, waitable, context);
    if (c == nullptr) {
        return -FI_ENOMEM;
    }
    ++domain->children;
    *cntr = c->fid();
    return 0;
}

}  // namespace fabric
}  // namespace uct_tm
