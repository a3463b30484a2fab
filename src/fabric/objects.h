/*
 * The provider's fid objects: fabric, domain, address vector, completion
 * queue, counter, memory region. The endpoint, which carries the data path, is in
 * endpoint.h.
 */
#ifndef UCT_TM_FABRIC_OBJECTS_H_
#define UCT_TM_FABRIC_OBJECTS_H_

#include "provider.h"
#include "ring.h"
#include "serial.h"

#include <rdma/fi_eq.h>

#include <algorithm>
#include <atomic>
#include <deque>
#include <mutex>
#include <optional>
#include <string>
#include <unordered_set>
#include <vector>

namespace uct_tm {
namespace fabric {

class Endpoint;

/* What CQs, counters and AVs share: the endpoints bound to them. One that
 * is bound cannot close (close_bound). */
class Bindings {
  public:
    /* Once per endpoint, though it binds both directions: progress walks
     * the list on every read. */
    void attach(Endpoint *ep) {
        if (std::find(endpoints_.begin(), endpoints_.end(), ep) == endpoints_.end()) {
            endpoints_.push_back(ep);
        }
    }
    void detach(Endpoint *ep) {
        endpoints_.erase(std::remove(endpoints_.begin(), endpoints_.end(), ep), endpoints_.end());
    }
    bool in_use() const { return !endpoints_.empty(); }

  protected:
    std::vector<Endpoint *> endpoints_;
};

/* fi_close of a domain's child endpoints bind to: -FI_EBUSY while bound. */
template <typename Obj> int close_bound(fid *f) {
    Obj *obj = object_of<Obj>(f);
    if (obj == nullptr) {
        return -FI_EINVAL;
    }
    if (obj->in_use()) {
        return -FI_EBUSY;
    }
    --obj->domain().children;
    delete obj;
    return 0;
}

class Fabric {
  public:
    static constexpr size_t kClass = FI_CLASS_FABRIC;
    using Fid                      = fid_fabric;

    explicit Fabric(void *context);
    fid_fabric *fid() { return &h_.fid; }
    uint32_t    api_version() const { return h_.fid.api_version; }

    std::atomic<int> domains{0}; /* open domains and EQs: the fabric cannot close before them */

  private:
    Handle<fid_fabric, Fabric> h_;
};

int open_fabric(fi_fabric_attr *attr, fid_fabric **fabric, void *context);

/* An event queue. RDM endpoints and AVs without FI_EVENT raise no events,
 * so it holds what the application writes (fi_eq_write); fabtests and
 * others open one per fabric whatever the endpoint type. */
class Eq {
  public:
    static constexpr size_t kClass = FI_CLASS_EQ;
    using Fid                      = fid_eq;

    /* wait_fd: an eventfd (FI_WAIT_FD), readable while events wait; -1: none. */
    Eq(Fabric &fabric, int wait_fd, void *context);
    ~Eq();
    Eq(const Eq &)                = delete;
    Eq     &operator=(const Eq &) = delete;
    fid_eq *fid() { return &h_.fid; }
    Fabric &fabric() { return fabric_; }
    int     wait_fd() const { return wait_fd_; }
    bool    empty();

    ssize_t read(uint32_t *event, void *buf, size_t len, uint64_t flags);
    ssize_t write(uint32_t event, const void *buf, size_t len, uint64_t flags);

  private:
    struct Event {
        uint32_t             event;
        std::vector<uint8_t> data;
    };

    Handle<fid_eq, Eq> h_;
    Fabric            &fabric_;
    int                wait_fd_;
    std::mutex         lock_; /* fi_eq_write may come from another thread */
    std::deque<Event>  events_;
};

int open_eq(fid_fabric *fabric, fi_eq_attr *attr, fid_eq **eq, void *context);

class Domain {
  public:
    static constexpr size_t kClass = FI_CLASS_DOMAIN;
    using Fid                      = fid_domain;

    /* serialized: every call on its objects takes the domain's lock (serial.h) */
    Domain(Fabric &fabric, std::string transport, bool serialized, void *context);
    fid_domain        *fid() { return &h_.fid; }
    Fabric            &fabric() { return fabric_; }
    const std::string &transport() const { return transport_; }
    std::mutex        *serial_lock() { return serialized_ ? &lock_ : nullptr; }
    /* The ops table its objects use: the plain one or the serialized one. */
    template <typename T> T *ops(T &plain, T &serial) const {
        return serialized_ ? &serial : &plain;
    }

    std::atomic<int>                 children{0}; /* open endpoints, AVs, CQs and MRs */
    std::unordered_set<const void *> mrs;         /* the live MRs' descs */

  private:
    Handle<fid_domain, Domain> h_;
    Fabric                    &fabric_;
    std::string                transport_; /* the layer's "tl[:device]" */
    bool                       serialized_;
    std::mutex                 lock_;
};

int open_domain(fid_fabric *fabric, fi_info *info, fid_domain **domain, void *context);

/* One entry of a completion queue, in the widest format plus what the
 * error entry and fi_cq_readfrom need. */
struct Completion {
    fi_cq_tagged_entry entry{};
    fi_addr_t          source     = FI_ADDR_NOTAVAIL;
    int                err        = 0; /* FI_E* (positive); 0: a success */
    size_t             olen       = 0; /* olen and prov_errno: read with an error only */
    int                prov_errno = 0; /* the layer's ucs_status_t */
};

class Cq : public Bindings {
  public:
    static constexpr size_t kClass = FI_CLASS_CQ;
    using Fid                      = fid_cq;

    Cq(Domain &domain, fi_cq_format format, bool waitable, void *context);
    fid_cq *fid() { return &h_.fid; }
    Domain &domain() { return domain_; }

    /* Entries are written from the layer's callbacks, where a failed
     * allocation could not be reported: an operation holds room for its
     * entry from its post on (false there if memory ran out, nothing held). */
    bool hold_room() noexcept {
        if ((free_ == 0) && !make_room()) {
            return false;
        }
        --free_;
        return true;
    }
    void drop_room() { ++free_; }
    /* The entry of an operation that held room, for the caller to fill,
     * every field (it is not reset): no allocation. */
    Completion &emplace_held() { return queue_.emplace_back_in_room(); }
    /* An entry no operation held room for; throws std::bad_alloc. */
    void push(const Completion &completion) {
        if (!hold_room()) {
            throw std::bad_alloc();
        }
        queue_.push_back(completion);
    }
    ssize_t read(void *buf, size_t count, fi_addr_t *sources) noexcept;
    ssize_t read_error(fi_cq_err_entry *buf, uint64_t flags);
    /* fi_cq_sread: reads (progressing) until an entry, the timeout (ms,
     * negative: none) or fi_cq_signal. */
    ssize_t wait_read(void *buf, size_t count, fi_addr_t *sources, int timeout) noexcept;
    int     signal();

  private:
    ssize_t read_entries(void *buf, size_t count, fi_addr_t *sources) noexcept;
    void    write(const Completion &c, void *slot) const;
    bool make_room() noexcept;
    void pop();

    Handle<fid_cq, Cq> h_;
    Domain            &domain_;
    size_t             entry_size_; /* the format's (fi_cq_open) */
    bool               waitable_;   /* FI_WAIT_UNSPEC or FI_WAIT_YIELD: sread polls */
    std::atomic<bool>  signaled_{false};
    Ring<Completion>   queue_;
    size_t             free_ = 0; /* slots neither filled nor held by an operation */
};

int open_cq(fid_domain *domain, fi_cq_attr *attr, fid_cq **cq, void *context);

/* A counter: the endpoints bound to it count their completed operations
 * (FI_SEND: sends, FI_RECV: receives), successes and errors apart, whether
 * or not the operation also writes a CQ entry. Reading progresses the
 * bound endpoints (FI_PROGRESS_MANUAL). */
class Cntr : public Bindings {
  public:
    static constexpr size_t kClass = FI_CLASS_CNTR;
    using Fid                      = fid_cntr;

    Cntr(Domain &domain, bool waitable, void *context);
    fid_cntr *fid() { return &h_.fid; }
    Domain   &domain() { return domain_; }

    uint64_t read();
    uint64_t read_error();
    void     add(uint64_t value) { value_ += value; }
    void     set(uint64_t value) { value_ = value; }
    void     add_error(uint64_t value) { errors_ += value; }
    void     set_error(uint64_t value) { errors_ = value; }
    /* An operation of a bound endpoint completed. */
    void completed(bool error) { (error ? errors_ : value_) += 1; }
    /* fi_cntr_wait: progresses until the value reaches `threshold`, an
     * error is counted (-FI_EAVAIL) or the timeout (ms, negative: none). */
    int wait(uint64_t threshold, int timeout);

  private:
    Handle<fid_cntr, Cntr> h_;
    Domain                &domain_;
    bool                   waitable_; /* FI_WAIT_UNSPEC or FI_WAIT_YIELD */
    std::atomic<uint64_t>  value_{0}; /* fi_cntr_add may come from another thread */
    std::atomic<uint64_t>  errors_{0};
};

int open_cntr(fid_domain *domain, fi_cntr_attr *attr, fid_cntr **cntr, void *context);

class Av : public Bindings {
  public:
    static constexpr size_t kClass = FI_CLASS_AV;
    using Fid                      = fid_av;

    Av(Domain &domain, fi_av_type type, void *context);
    fid_av *fid() { return &h_.fid; }
    Domain &domain() { return domain_; }

    /* The name at `addr`, or nullptr if none was inserted there. */
    const Name *lookup(fi_addr_t addr) const;
    size_t      size() const { return entries_.size(); }
    int         insert(const void *addr, size_t count, fi_addr_t *fi_addr, uint64_t flags);
    int         remove(const fi_addr_t *fi_addr, size_t count, uint64_t flags);

  private:
    int insert_one(const Name &name, fi_addr_t *fi_addr);

    Handle<fid_av, Av>               h_;
    Domain                          &domain_;
    fi_av_type                       type_;
    std::vector<std::optional<Name>> entries_; /* fi_addr_t is the index */
};

int open_av(fid_domain *domain, fi_av_attr *attr, fid_av **av, void *context);

/* A registration: fi_mr_reg over uct_tm_proto_mem_map. The layer maps per
 * worker and an MR is per domain, so an MR is mapped into an endpoint's
 * worker the first time an operation of that endpoint carries its desc
 * (mr_mode 0: a desc is optional; without one the layer's registration
 * cache serves). No RMA: no remote access. */
class Mr {
  public:
    static constexpr size_t kClass = FI_CLASS_MR;
    using Fid                      = fid_mr;

    Mr(Domain &domain, const void *buf, size_t len, uint64_t key, void *context);
    fid_mr *fid() { return &h_.fid; }
    Domain &domain() { return domain_; }

    /* The worker's handle of this region if it holds [buf, buf + len)
     * (mapped now if need be), else 0: the operation goes without. */
    uct_tm_proto_mem_h map_for(Endpoint *ep, uct_tm_proto_worker_h worker, const void *buf,
                               size_t len);
    /* Unmaps from every worker: -FI_EBUSY while an operation that carried
     * it is in flight. The layer cannot ask without unmapping, so mappings
     * into other workers may be gone by then: the MR stays usable (mapped
     * again on use) and a later close unmaps the rest. */
    int  unmap_all();
    void forget(Endpoint *ep); /* its worker is gone, and its mappings with it */

  private:
    struct Mapping {
        Endpoint             *ep;
        uct_tm_proto_worker_h worker;
        uct_tm_proto_mem_h    memh;
    };

    Handle<fid_mr, Mr>   h_;
    Domain              &domain_;
    const uint8_t       *buf_;
    size_t               len_;
    std::vector<Mapping> mappings_;
};

/* The live MR behind an operation's desc, or nullptr (a desc that is no
 * MR of the domain is ignored, never dereferenced). */
Mr *mr_of_desc(Domain &domain, void *desc);

extern fi_ops_mr g_mr_ops;
extern fi_ops_mr g_mr_ops_serial;

}  // namespace fabric
}  // namespace uct_tm

#endif
