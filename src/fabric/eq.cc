/*
 * Event queues: the events the application writes, read back in order.
 * The provider itself raises none (RDM endpoints need no connection
 * events; AVs are synchronous). fi_eq_sread polls until its timeout.
 */
#include "deadline.h"
#include "objects.h"

#include <sys/eventfd.h>
#include <unistd.h>

#include <chrono>
#include <cstring>
#include <new>
#include <thread>

namespace uct_tm {
namespace fabric {

namespace {

Eq *eq_of(fid_eq *f) { return object_of<Eq>(f); }

int eq_close(fid *f) {
    Eq *eq = object_of<Eq>(f);
    if (eq == nullptr) {
        return -FI_EINVAL;
    }
    --eq->fabric().domains;
    delete eq;
    return 0;
}

ssize_t eq_read(fid_eq *f, uint32_t *event, void *buf, size_t len, uint64_t flags) {
    Eq *eq = eq_of(f);
    return (eq == nullptr) ? -FI_EINVAL : eq->read(event, buf, len, flags);
}

/* No error events are ever queued. */
ssize_t eq_readerr(fid_eq *f, fi_eq_err_entry *buf, uint64_t) {
    return ((eq_of(f) == nullptr) || (buf == nullptr)) ? -FI_EINVAL : -FI_EAGAIN;
}

ssize_t eq_write(fid_eq *f, uint32_t event, const void *buf, size_t len, uint64_t flags) {
    Eq *eq = eq_of(f);
    return (eq == nullptr) ? -FI_EINVAL
                           : guarded([&] { return eq->write(event, buf, len, flags); });
}

/* timeout in ms, negative: forever. */
ssize_t eq_sread(fid_eq *f, uint32_t *event, void *buf, size_t len, int timeout, uint64_t flags) {
    Eq *eq = eq_of(f);
    if (eq == nullptr) {
        return -FI_EINVAL;
    }
    const Deadline deadline(timeout);
    for (;;) {
        const ssize_t ret = eq->read(event, buf, len, flags);
        if ((ret != -FI_EAGAIN) || deadline.passed()) {
            return ret;
        }
        std::this_thread::sleep_for(std::chrono::microseconds(100));
    }
}

const char *eq_strerror(fid_eq *, int prov_errno, const void *, char *buf, size_t len) {
    const char *text = fi_strerror(prov_errno);
    if ((buf == nullptr) || (len == 0)) {
        return text;
    }
    snprintf(buf, len, "%s", text);
    return buf;
}

/* FI_GETWAIT: the eventfd of an FI_WAIT_FD queue. */
int eq_control(fid *f, int command, void *arg) {
    Eq *eq = object_of<Eq>(f);
    if ((eq == nullptr) || (arg == nullptr)) {
        return -FI_EINVAL;
    }
    if (command != FI_GETWAIT) {
        return -FI_ENOSYS;
    }
    if (eq->wait_fd() < 0) {
        return -FI_ENODATA; /* no fd to wait on: FI_WAIT_NONE or FI_WAIT_UNSPEC */
    }
    *static_cast<int *>(arg) = eq->wait_fd();
    return 0;
}

fi_ops_eq make_eq_ops() {
    fi_ops_eq o{};
    o.size     = sizeof(o);
    o.read     = eq_read;
    o.readerr  = eq_readerr;
    o.write    = eq_write;
    o.sread    = eq_sread;
    o.strerror = eq_strerror;
    return o;
}

fi_ops    g_fid_ops = make_fid_ops(eq_close, nullptr, eq_control);
fi_ops_eq g_eq_ops  = make_eq_ops();

}  // namespace

Eq::Eq(Fabric &fabric, int wait_fd, void *context) : h_{}, fabric_(fabric), wait_fd_(wait_fd) {
    h_.self            = this;
    h_.fid.fid.fclass  = FI_CLASS_EQ;
    h_.fid.fid.context = context;
    h_.fid.fid.ops     = &g_fid_ops;
    h_.fid.ops         = &g_eq_ops;
}

Eq::~Eq() {
    if (wait_fd_ >= 0) {
        close(wait_fd_);
    }
}

bool Eq::empty() {
    std::lock_guard<std::mutex> guard(lock_);
    return events_.empty();
}

/* The oldest event; FI_PEEK leaves it queued. A buffer shorter than the
 * event: -FI_ETOOSMALL, nothing taken. */
ssize_t Eq::read(uint32_t *event, void *buf, size_t len, uint64_t flags) {
    if ((event == nullptr) || ((buf == nullptr) && (len > 0)) || ((flags & ~FI_PEEK) != 0)) {
        return -FI_EINVAL;
    }
    std::lock_guard<std::mutex> guard(lock_);
    if (events_.empty()) {
        return -FI_EAGAIN;
    }
    const Event &e = events_.front();
    if (len < e.data.size()) {
        return -FI_ETOOSMALL;
    }
    *event = e.event;
    if (!e.data.empty()) {
        memcpy(buf, e.data.data(), e.data.size());
    }
    const auto n = static_cast<ssize_t>(e.data.size());
    if ((flags & FI_PEEK) == 0) {
        events_.pop_front();
        uint64_t count = 0;
        if (events_.empty() && (wait_fd_ >= 0) && (::read(wait_fd_, &count, sizeof(count)) < 0)) {
            return -FI_EOTHER; /* the fd would stay readable with nothing queued */
        }
    }
    return n;
}

ssize_t Eq::write(uint32_t event, const void *buf, size_t len, uint64_t flags) {
    if (((buf == nullptr) && (len > 0)) || (flags != 0)) {
        return (flags != 0) ? -FI_EBADFLAGS : -FI_EINVAL;
    }
    const auto                 *bytes = static_cast<const uint8_t *>(buf);
    std::lock_guard<std::mutex> guard(lock_);
    events_.push_back(Event{event, std::vector<uint8_t>(bytes, bytes + len)});
    const uint64_t one = 1;
    if ((events_.size() == 1) && (wait_fd_ >= 0) && (::write(wait_fd_, &one, sizeof(one)) < 0)) {
        events_.pop_back(); /* a waiter would never see it */
        return -FI_EOTHER;
    }
    return static_cast<ssize_t>(len);
}

int open_eq(fid_fabric *fabric_fid, fi_eq_attr *attr, fid_eq **eq, void *context) {
    Fabric *fabric = object_of<Fabric>(fabric_fid);
    if ((fabric == nullptr) || (attr == nullptr) || (eq == nullptr)) {
        return -FI_EINVAL;
    }
    if ((attr->wait_obj != FI_WAIT_NONE) && (attr->wait_obj != FI_WAIT_UNSPEC) &&
        (attr->wait_obj != FI_WAIT_FD)) {
        return -FI_ENOSYS; /* no wait sets: fi_eq_sread polls */
    }
    if ((attr->flags & ~FI_WRITE) != 0) {
        return -FI_EBADFLAGS; /* FI_WRITE: the application writes events (it always may) */
    }
    const int fd = (attr->wait_obj == FI_WAIT_FD) ? eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC) : -1;
    if ((attr->wait_obj == FI_WAIT_FD) && (fd < 0)) {
        return -FI_EMFILE;
    }
    Eq *e = new (std::nothrow) Eq(*fabric, fd, context);
    if (e == nullptr) {
        if (fd >= 0) {
            close(fd);
        }
        return -FI_ENOMEM;
    }
    ++fabric->domains;
    *eq = e->fid();
    return 0;
}

}  // namespace fabric
}  // namespace uct_tm
