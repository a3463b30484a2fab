/*
 * The provider's fid objects: fabric, domain, address vector, completion
 * queue, memory region. The endpoint, which carries the data path, is in
 * endpoint.h.
 */
#ifndef UCT_TM_FABRIC_OBJECTS_H_
#define UCT_TM_FABRIC_OBJECTS_H_

#include "provider.h"

#include <rdma/fi_eq.h>

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

class Fabric {
  public:
    static constexpr size_t kClass = FI_CLASS_FABRIC;
    using Fid                      = fid_fabric;

    explicit Fabric(void *context);
    fid_fabric *fid() { return &h_.fid; }
    uint32_t    api_version() const { return h_.fid.api_version; }

    int domains = 0; /* open domains and EQs: the fabric cannot close before them */

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

    Eq(Fabric &fabric, void *context);
    fid_eq *fid() { return &h_.fid; }
    Fabric &fabric() { return fabric_; }

    ssize_t read(uint32_t *event, void *buf, size_t len, uint64_t flags);
    ssize_t write(uint32_t event, const void *buf, size_t len, uint64_t flags);

  private:
    struct Event {
        uint32_t             event;
        std::vector<uint8_t> data;
    };

    Handle<fid_eq, Eq> h_;
    Fabric            &fabric_;
    std::mutex         lock_; /* fi_eq_write may come from another thread */
    std::deque<Event>  events_;
};

int open_eq(fid_fabric *fabric, fi_eq_attr *attr, fid_eq **eq, void *context);

class Domain {
  public:
    static constexpr size_t kClass = FI_CLASS_DOMAIN;
    using Fid                      = fid_domain;

    Domain(Fabric &fabric, std::string transport, void *context);
    fid_domain        *fid() { return &h_.fid; }
    Fabric            &fabric() { return fabric_; }
    const std::string &transport() const { return transport_; }

    int                              children = 0; /* open endpoints, AVs, CQs and MRs */
    std::unordered_set<const void *> mrs;          /* the live MRs' descs */

  private:
    Handle<fid_domain, Domain> h_;
    Fabric                    &fabric_;
    std::string                transport_; /* the layer's "tl[:device]" */
};

int open_domain(fid_fabric *fabric, fi_info *info, fid_domain **domain, void *context);

/* One entry of a completion queue, in the widest format plus what the
 * error entry and fi_cq_readfrom need. */
struct Completion {
    fi_cq_tagged_entry entry{};
    fi_addr_t          source     = FI_ADDR_NOTAVAIL;
    int                err        = 0; /* FI_E* (positive); 0: a success */
    size_t             olen       = 0;
    int                prov_errno = 0; /* the layer's ucs_status_t */
};

class Cq {
  public:
    static constexpr size_t kClass = FI_CLASS_CQ;
    using Fid                      = fid_cq;

    Cq(Domain &domain, fi_cq_format format, bool waitable, void *context);
    fid_cq *fid() { return &h_.fid; }
    Domain &domain() { return domain_; }

    void    push(const Completion &completion) { queue_.push_back(completion); }
    ssize_t read(void *buf, size_t count, fi_addr_t *sources);
    ssize_t read_error(fi_cq_err_entry *buf, uint64_t flags);
    /* fi_cq_sread: reads (progressing) until an entry, the timeout (ms,
     * negative: none) or fi_cq_signal. */
    ssize_t wait_read(void *buf, size_t count, fi_addr_t *sources, int timeout);
    int     signal();
    void    attach(Endpoint *ep);
    void    detach(Endpoint *ep);
    bool    in_use() const { return !endpoints_.empty(); }

  private:
    void progress();
    void write(const Completion &c, void *slot) const;

    Handle<fid_cq, Cq>      h_;
    Domain                 &domain_;
    fi_cq_format            format_;
    bool                    waitable_; /* FI_WAIT_UNSPEC or FI_WAIT_YIELD: sread polls */
    std::atomic<bool>       signaled_{false};
    std::deque<Completion>  queue_;
    std::vector<Endpoint *> endpoints_; /* bound endpoints: reading progresses them */
};

int open_cq(fid_domain *domain, fi_cq_attr *attr, fid_cq **cq, void *context);

class Av {
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
    void        attach(Endpoint *ep);
    void        detach(Endpoint *ep);
    bool        in_use() const { return !endpoints_.empty(); }

  private:
    int insert_one(const Name &name, fi_addr_t *fi_addr);

    Handle<fid_av, Av>               h_;
    Domain                          &domain_;
    fi_av_type                       type_;
    std::vector<std::optional<Name>> entries_; /* fi_addr_t is the index */
    std::vector<Endpoint *>          endpoints_;
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
    /* Unmaps from every worker: -FI_EBUSY (nothing undone) while an
     * operation that carried it is in flight. */
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

}  // namespace fabric
}  // namespace uct_tm

#endif
