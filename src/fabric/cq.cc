/*
 * Completion queues: entries written by the endpoints' completion
 * callbacks, returned in the format chosen at fi_cq_open. Reading
 * progresses the bound endpoints (FI_PROGRESS_MANUAL).
 */
#include "deadline.h"
#include "endpoint.h"

#include <algorithm>
#include <cstring>
#include <new>

namespace uct_tm {
namespace fabric {

/* Inlined into the trampolines: a read that finds nothing -- each turn of
 * an application's wait loop -- costs the progress and one compare. */
[[gnu::always_inline]] inline ssize_t Cq::read(void *buf, size_t count,
                                               fi_addr_t *sources) noexcept {
    if ((buf == nullptr) && (count > 0)) {
        return -FI_EINVAL;
    }
    progress_each(endpoints_);
    return queue_.empty() ? -FI_EAGAIN : read_entries(buf, count, sources);
}

namespace {

Cq *cq_of(fid_cq *f) { return object_of<Cq>(f); }

ssize_t cq_read(fid_cq *f, void *buf, size_t count) {
    Cq *cq = cq_of(f);
    return (cq == nullptr) ? -FI_EINVAL : cq->read(buf, count, nullptr);
}

ssize_t cq_readfrom(fid_cq *f, void *buf, size_t count, fi_addr_t *src_addr) {
    Cq *cq = cq_of(f);
    return (cq == nullptr) ? -FI_EINVAL : cq->read(buf, count, src_addr);
}

ssize_t cq_readerr(fid_cq *f, fi_cq_err_entry *buf, uint64_t flags) {
    Cq *cq = cq_of(f);
    return (cq == nullptr) ? -FI_EINVAL : cq->read_error(buf, flags);
}

ssize_t cq_sread(fid_cq *f, void *buf, size_t count, const void *cond, int timeout) {
    Cq *cq = cq_of(f);
    return ((cq == nullptr) || (cond != nullptr)) ? -FI_EINVAL
                                                  : cq->wait_read(buf, count, nullptr, timeout);
}

ssize_t cq_sreadfrom(fid_cq *f, void *buf, size_t count, fi_addr_t *src_addr, const void *cond,
                     int timeout) {
    Cq *cq = cq_of(f);
    return ((cq == nullptr) || (cond != nullptr)) ? -FI_EINVAL
                                                  : cq->wait_read(buf, count, src_addr, timeout);
}

int cq_signal(fid_cq *f) {
    Cq *cq = cq_of(f);
    return (cq == nullptr) ? -FI_EINVAL : cq->signal();
}

/* prov_errno is the layer's status. */
const char *cq_strerror(fid_cq *, int prov_errno, const void *, char *buf, size_t len) {
    const char *text = ucs_status_string(static_cast<ucs_status_t>(prov_errno));
    if ((buf == nullptr) || (len == 0)) {
        return text;
    }
    snprintf(buf, len, "%s", text);
    return buf;
}

/* The blocking reads poll (FI_PROGRESS_MANUAL: they progress as they
 * wait), taking a serialized domain's lock per attempt (Cq::wait_read). */
template <template <auto> class W> fi_ops_cq make_cq_ops() {
    fi_ops_cq o{};
    o.size      = sizeof(o);
    o.read      = W<cq_read>::fn;
    o.readfrom  = W<cq_readfrom>::fn;
    o.readerr   = W<cq_readerr>::fn;
    o.sread     = cq_sread;
    o.sreadfrom = cq_sreadfrom;
    o.signal    = cq_signal;
    o.strerror  = cq_strerror;
    return o;
}

fi_ops    g_fid_ops        = make_fid_ops(close_bound<Cq>);
fi_ops    g_fid_ops_serial = make_fid_ops(Serial<close_bound<Cq>>::fn);
fi_ops_cq g_cq_ops         = make_cq_ops<Direct>();
fi_ops_cq g_cq_ops_serial  = make_cq_ops<Serial>();

size_t entry_size(fi_cq_format format) {
    switch (format) {
    case FI_CQ_FORMAT_CONTEXT: return sizeof(fi_cq_entry);
    case FI_CQ_FORMAT_MSG: return sizeof(fi_cq_msg_entry);
    case FI_CQ_FORMAT_DATA: return sizeof(fi_cq_data_entry);
    default: return sizeof(fi_cq_tagged_entry);
    }
}

}  // namespace

Cq::Cq(Domain &domain, fi_cq_format format, bool waitable, void *context)
    : h_{}, domain_(domain), entry_size_(entry_size(format)), waitable_(waitable) {
    h_.self            = this;
    h_.fid.fid.fclass  = FI_CLASS_CQ;
    h_.fid.fid.context = context;
    h_.fid.fid.ops     = domain.ops(g_fid_ops, g_fid_ops_serial);
    h_.fid.ops         = domain.ops(g_cq_ops, g_cq_ops_serial);
}

/* Doubles the ring (false if memory ran out, nothing changed); out of
 * line: hold_room() stays small where it is inlined. */
bool Cq::make_room() noexcept {
    const size_t before = queue_.capacity();
    try {
        queue_.reserve(std::max<size_t>(2 * before, 64));
    } catch (const std::bad_alloc &) {
        return false;
    }
    free_ += queue_.capacity() - before;
    return true;
}

void Cq::pop() {
    queue_.pop_front();
    ++free_;
}

/* The formats are prefixes of one another (fi_cq(3)): write the prefix,
 * a copy of constant size per format (inline moves, not a memcpy call). */
inline void Cq::write(const Completion &c, void *slot) const {
    switch (entry_size_) {
    case sizeof(fi_cq_tagged_entry): memcpy(slot, &c.entry, sizeof(fi_cq_tagged_entry)); break;
    case sizeof(fi_cq_data_entry): memcpy(slot, &c.entry, sizeof(fi_cq_data_entry)); break;
    case sizeof(fi_cq_msg_entry): memcpy(slot, &c.entry, sizeof(fi_cq_msg_entry)); break;
    default: memcpy(slot, &c.entry, sizeof(fi_cq_entry)); break;
    }
}

/* The entries waiting, copied out (at least one waits). */
ssize_t Cq::read_entries(void *buf, size_t count, fi_addr_t *sources) noexcept {
    size_t n    = 0;
    auto  *slot = static_cast<uint8_t *>(buf);
    while ((n < count) && !queue_.empty() && (queue_.front().err == 0)) {
        write(queue_.front(), slot + n * entry_size_);
        if (sources != nullptr) {
            sources[n] = queue_.front().source;
        }
        pop();
        ++n;
    }
    if ((n > 0) || ((count == 0) && (queue_.front().err == 0))) {
        return static_cast<ssize_t>(n); /* count 0: 0 says entries wait */
    }
    return (queue_.front().err != 0) ? -FI_EAVAIL : -FI_EAGAIN;
}

ssize_t Cq::wait_read(void *buf, size_t count, fi_addr_t *sources, int timeout) noexcept {
    if (!waitable_) {
        return -FI_ENOSYS; /* FI_WAIT_NONE: no blocking reads */
    }
    const Deadline deadline(timeout);
    std::mutex    *lock = domain_.serial_lock();
    for (;;) {
        const ssize_t ret = holding(lock, [&] { return read(buf, count, sources); });
        if (ret != -FI_EAGAIN) {
            return ret;
        }
        if (signaled_.exchange(false) || deadline.passed()) {
            return -FI_EAGAIN;
        }
    }
}

int Cq::signal() {
    signaled_ = true;
    return 0;
}

ssize_t Cq::read_error(fi_cq_err_entry *buf, uint64_t flags) {
    if ((buf == nullptr) || (flags != 0)) {
        return -FI_EINVAL;
    }
    if (queue_.empty() || (queue_.front().err == 0)) {
        return -FI_EAGAIN;
    }
    const Completion &c = queue_.front();
    buf->op_context     = c.entry.op_context;
    buf->flags          = c.entry.flags;
    buf->len            = c.entry.len;
    buf->buf            = c.entry.buf;
    buf->data           = c.entry.data;
    buf->tag            = c.entry.tag;
    buf->olen           = c.olen;
    buf->err            = c.err;
    buf->prov_errno     = c.prov_errno;
    /* No provider error data. err_data_size exists from API 1.5 on. */
    if (FI_VERSION_GE(domain_.fabric().api_version(), FI_VERSION(1, 5))) {
        buf->err_data_size = 0;
    } else {
        buf->err_data = nullptr;
    }
    pop();
    return 1;
}

int open_cq(fid_domain *domain_fid, fi_cq_attr *attr, fid_cq **cq, void *context) {
    Domain *domain = object_of<Domain>(domain_fid);
    if ((domain == nullptr) || (attr == nullptr) || (cq == nullptr)) {
        return -FI_EINVAL;
    }
    fi_cq_format format = attr->format;
    if (format == FI_CQ_FORMAT_UNSPEC) {
        format = FI_CQ_FORMAT_CONTEXT;
    }
    if ((format != FI_CQ_FORMAT_CONTEXT) && (format != FI_CQ_FORMAT_MSG) &&
        (format != FI_CQ_FORMAT_DATA) && (format != FI_CQ_FORMAT_TAGGED)) {
        return -FI_EINVAL;
    }
    const bool waitable = (attr->wait_obj == FI_WAIT_UNSPEC) || (attr->wait_obj == FI_WAIT_YIELD);
    if ((attr->wait_obj != FI_WAIT_NONE) && !waitable) {
        return -FI_ENOSYS; /* no fds or wait sets */
    }
    if (waitable && (attr->wait_cond != FI_CQ_COND_NONE)) {
        return -FI_ENOSYS; /* no threshold */
    }
    if ((attr->flags & ~FI_AFFINITY) != 0) {
        return -FI_EBADFLAGS;
    }
    Cq *c = new (std::nothrow) Cq(*domain, format, waitable, context);
    if (c == nullptr) {
        return -FI_ENOMEM;
    }
    ++domain->children;
    *cq = c->fid();
    return 0;
}

}  // namespace fabric
}  // namespace uct_tm
