/*
 * An FI_EP_RDM endpoint: one protocol-layer worker, its endpoints to the
 * peers of the bound AV (one per AV entry), and the operations in flight.
 */
#ifndef UCT_TM_FABRIC_ENDPOINT_H_
#define UCT_TM_FABRIC_ENDPOINT_H_

#include "iov.h"
#include "objects.h"
#include "op_pool.h"

#include <unordered_map>
#include <unordered_set>
#include <vector>

namespace uct_tm {
namespace fabric {

class Endpoint;

/* One data call, tagged or not, normalized: what tagged.cc and msg.cc hand
 * to the endpoint. */
struct Xfer {
    const iovec *iov;
    size_t       count;
    fi_addr_t    addr;
    uint64_t     tag;
    uint64_t     ignore;
    uint64_t     data;
    void        *context;
    void        *desc;  /* the first element's (fi_mr_desc), or nullptr */
    uint64_t     flags; /* FI_* operation flags */
    bool         tagged;
    bool         quiet; /* fi_inject & co: no completion (errors still reported) */

    uint64_t kind() const { return tagged ? FI_TAGGED : FI_MSG; }
    /* One buffer, no MR: what the common posts carry. */
    bool one_plain_buffer() const {
        return (count == 1) && (iov != nullptr) && (desc == nullptr) &&
               ((iov[0].iov_base != nullptr) || (iov[0].iov_len == 0));
    }
};

/* `flag` (a layer enum) if `on`. */
inline unsigned bit(bool on, unsigned flag) { return on ? flag : 0u; }

/* The layer's send flags for libfabric's op flags. */
inline unsigned send_flags(uint64_t flags, bool tagged) {
    unsigned f = bit(!tagged, UCT_TM_PROTO_OP_UNTAGGED);
    f |= bit(flags & FI_INJECT, UCT_TM_PROTO_SEND_INJECT);
    f |= bit(flags & FI_REMOTE_CQ_DATA, UCT_TM_PROTO_SEND_REMOTE_DATA);
    f |= bit(flags & FI_FENCE, UCT_TM_PROTO_SEND_FENCE);
    f |= bit(flags & FI_MORE, UCT_TM_PROTO_SEND_MORE);
    /* the strongest level asked for; FI_INJECT_COMPLETE is the default (one
     * test for the common send, which asks for none) */
    if (flags & (FI_MATCH_COMPLETE | FI_DELIVERY_COMPLETE | FI_TRANSMIT_COMPLETE)) {
        f |= (flags & FI_MATCH_COMPLETE)      ? unsigned{UCT_TM_PROTO_SEND_SYNC}
             : (flags & FI_DELIVERY_COMPLETE) ? unsigned{UCT_TM_PROTO_SEND_DELIVERY_COMPLETE}
                                              : unsigned{UCT_TM_PROTO_SEND_TRANSMIT_COMPLETE};
    }
    return f;
}

class Endpoint {
  public:
    static constexpr size_t kClass = FI_CLASS_EP;
    using Fid                      = fid_ep;

    Endpoint(Domain &domain, const fi_info &info, uct_tm_proto_worker_h worker, void *context);
    ~Endpoint();
    Endpoint(const Endpoint &)            = delete;
    Endpoint &operator=(const Endpoint &) = delete;

    fid_ep *fid() { return &h_.fid; }
    Domain &domain() { return domain_; }

    int     bind(struct fid *bfid, uint64_t flags);
    int     enable();
    int     ops_flags(bool set, uint64_t *flags);
    int     getopt(int level, int name, void *value, size_t *len);
    int     setopt(int level, int name, const void *value, size_t len);
    int     getname(void *addr, size_t *addrlen);
    ssize_t cancel(void *context);
    void    progress() { uct_tm_proto_worker_progress(worker_); }

    /* AV changes while bound: a proto endpoint per entry. */
    int  connect(fi_addr_t addr, const Name &name);
    void disconnect(fi_addr_t addr);

    /* What the trampolines call: the common single-buffer post inline (the
     * calls Open MPI's mtl ofi makes per message), the rest through
     * send() / recv(), which check everything and report what is wrong. */
    ssize_t post_send(const Xfer &x);
    ssize_t post_recv(const Xfer &x);
    ssize_t send(const Xfer &x);
    ssize_t recv(const Xfer &x);

    /* MRs mapped into this endpoint's worker (forgotten at close). */
    void mapped(Mr *mr) { mrs_.push_back(mr); }
    void unmapped(Mr *mr);

    uint64_t tx_op_flags() const { return tx_op_flags_; }
    uint64_t rx_op_flags() const { return rx_op_flags_; }

  private:
    int               bind_cq(Cq *cq, uint64_t flags);
    int               bind_av(Av *av);
    int               bind_cntr(Cntr *cntr, uint64_t flags);
    ssize_t           check_send(const Xfer &x, uct_tm_proto_ep_h *ep) const;
    ssize_t           check_recv(const Xfer &x, uct_tm_proto_ep_h *source) const;
    ssize_t           check_recv_flags(const Xfer &x) const;
    ssize_t           peek(const Xfer &x, uct_tm_proto_ep_h source);
    ssize_t           claimed(const Xfer &x);
    Op               &new_op(const Xfer &x, uint64_t flags, size_t len, bool report);
    Op               &take_op(void *context, uint64_t flags, size_t len, bool report);
    /* The CQ and counter of an operation with these completion flags (FI_SEND or FI_RECV). */
    Cq               *cq_for(uint64_t flags) const { return (flags & FI_SEND) ? tx_cq_ : rx_cq_; }
    Cntr *cntr_for(uint64_t flags) const { return (flags & FI_SEND) ? tx_cntr_ : rx_cntr_; }
    void              use_desc(const Xfer &x, const Vector &v, uct_tm_proto_op_params_t *params);
    ssize_t           started(Op &op, ucs_status_t status, uct_tm_proto_request_t req);
    void              complete(Op &op, uct_tm_proto_request_t req, const uct_tm_proto_info_t &info);
    void              release(Op &op, uct_tm_proto_request_t req);
    void              complete_part(Op &op, const uct_tm_proto_info_t &info);
    void              complete_multi(Op &op, const uct_tm_proto_info_t &info);
    void              finish(Op &op, Completion &c, const uct_tm_proto_info_t &info, size_t room);
    static void       set_status(Completion *c, const uct_tm_proto_info_t &info, size_t room);
    void              report_recv(Op &op, const uct_tm_proto_info_t &info, Completion *c) const;
    /* The last answer is kept: a receiver mostly hears the peer it heard last. */
    fi_addr_t source_of(uct_tm_proto_ep_h ep) const {
        return (ep == last_source_.ep) ? last_source_.addr : look_up_source(ep);
    }
    fi_addr_t         look_up_source(uct_tm_proto_ep_h ep) const;
    uct_tm_proto_ep_h peer(fi_addr_t addr) const;
    ssize_t           no_peer(fi_addr_t addr) const;

    static void on_complete(void *arg, uct_tm_proto_request_t req, const uct_tm_proto_info_t *info);
    template <bool kTagged>
    static void on_quiet_error(void *arg, uct_tm_proto_request_t req,
                               const uct_tm_proto_info_t *info);
    void        quiet_failed(uint64_t kind, const uct_tm_proto_info_t &info);

    Handle<fid_ep, Endpoint>                         h_;
    Domain                                          &domain_;
    uint64_t                                         caps_;
    uint64_t                                         tx_op_flags_;
    uint64_t                                         rx_op_flags_;
    uct_tm_proto_worker_h                            worker_;
    Cq                                              *tx_cq_        = nullptr;
    Cq                                              *rx_cq_        = nullptr;
    bool                                             tx_selective_ = false;
    bool                                             rx_selective_ = false;
    Cntr                                            *tx_cntr_      = nullptr;
    Cntr                                            *rx_cntr_      = nullptr;
    Av                                              *av_           = nullptr;
    bool                                             enabled_      = false;
    std::vector<uct_tm_proto_ep_h>                   peers_; /* by fi_addr_t */
    std::unordered_map<uct_tm_proto_ep_h, fi_addr_t> sources_;
    struct SourceCache {
        uct_tm_proto_ep_h ep   = nullptr;
        fi_addr_t         addr = FI_ADDR_NOTAVAIL;
    };
    mutable SourceCache                              last_source_;
    std::unordered_set<fi_addr_t>                    unreachable_; /* AV entries with no peer */
    OpPool                                           ops_;
    std::vector<Mr *>                                mrs_;
};

inline ssize_t Endpoint::post_send(const Xfer &x) {
    constexpr uint64_t kPlain = FI_INJECT | FI_REMOTE_CQ_DATA | FI_COMPLETION | FI_INJECT_COMPLETE;
    uct_tm_proto_ep_h  ep     = peer(x.addr);
    if (!enabled_ || !x.one_plain_buffer() || ((x.flags & ~kPlain) != 0) ||
        ((caps_ & x.kind()) == 0) || (ep == nullptr) || (x.iov[0].iov_len > kInjectSize)) {
        return send(x);
    }
    const bool report = !x.quiet && (!tx_selective_ || (x.flags & FI_COMPLETION));
    uct_tm_proto_op_params_t params;
    params.flags = send_flags(x.flags, x.tagged);
    params.data  = x.data;
    if (x.quiet && (tx_cntr_ == nullptr)) {
        /* fi_inject & co, no counter: no op to keep (no context to cancel
         * or report); the layer calls back only with an error */
        params.flags |= UCT_TM_PROTO_OP_NO_COMPLETION;
        params.cb                 = x.tagged ? on_quiet_error<true> : on_quiet_error<false>;
        params.arg                = this;
        const ucs_status_t status = uct_tm_proto_send(ep, x.iov[0].iov_base, x.iov[0].iov_len,
                                                      x.tag, &params, nullptr);
        return ((status == UCS_OK) || (status == UCS_INPROGRESS)) ? 0 : fi_error(status);
    }
    Op &op                     = take_op(x.context, FI_SEND | x.kind(), x.iov[0].iov_len, report);
    params.cb                  = on_complete;
    params.arg                 = &op;
    uct_tm_proto_request_t req = 0;
    const ucs_status_t status  = uct_tm_proto_send(ep, x.iov[0].iov_base, x.iov[0].iov_len, x.tag,
                                                   &params, &req);
    return started(op, status, req);
}

inline ssize_t Endpoint::post_recv(const Xfer &x) {
    const bool        directed = (caps_ & FI_DIRECTED_RECV) && (x.addr != FI_ADDR_UNSPEC);
    uct_tm_proto_ep_h source   = directed ? peer(x.addr) : nullptr;
    if (!enabled_ || !x.one_plain_buffer() || ((x.flags & ~FI_COMPLETION) != 0) ||
        ((caps_ & x.kind()) == 0) || (directed && (source == nullptr))) {
        return recv(x);
    }
    const bool report = !rx_selective_ || (x.flags & FI_COMPLETION);
    Op        &op     = take_op(x.context, FI_RECV | x.kind(), x.iov[0].iov_len, report);
    op.buf            = x.iov[0].iov_base;
    uct_tm_proto_op_params_t params;
    params.flags                  = bit(!x.tagged, UCT_TM_PROTO_OP_UNTAGGED);
    params.cb                  = on_complete;
    params.arg                 = &op;
    uct_tm_proto_request_t req = 0;
    const ucs_status_t status = uct_tm_proto_recv(worker_, op.buf, op.len, x.tag, ~x.ignore, source,
                                                  &params, &req);
    if (status == UCS_INPROGRESS) {
        op.req = req;
        return 0;
    }
    return started(op, status, req);
}

/* An op, with room held in its CQ for its entry; throws std::bad_alloc
 * (nothing taken). */
inline Op &Endpoint::take_op(void *context, uint64_t flags, size_t len, bool report) {
    Cq *cq = cq_for(flags);
    cq->hold_room();
    try {
        return ops_.take(this, context, flags, len, report);
    } catch (...) {
        cq->drop_room();
        throw;
    }
}

inline uct_tm_proto_ep_h Endpoint::peer(fi_addr_t addr) const {
    return (addr < peers_.size()) ? peers_[addr] : nullptr;
}

template <bool kTagged>
void Endpoint::on_quiet_error(void *arg, uct_tm_proto_request_t, const uct_tm_proto_info_t *info) {
    static_cast<Endpoint *>(arg)->quiet_failed(kTagged ? FI_TAGGED : FI_MSG, *info);
}

int open_endpoint(fid_domain *domain, fi_info *info, fid_ep **ep, void *context);

/* Progresses each endpoint (Bindings keep each once): what reading a CQ or
 * a counter does. */
void progress_each(const std::vector<Endpoint *> &eps);

/* For the trampolines of tagged.cc and msg.cc: the op flags of the calls
 * without a flags argument (0 for a bad fid, which the call then refuses),
 * and a single buffer as a one-element vector. */
inline uint64_t tx_op_flags(fid_ep *f) {
    Endpoint *ep = object_of<Endpoint>(f);
    return (ep != nullptr) ? ep->tx_op_flags() : 0;
}
inline uint64_t rx_op_flags(fid_ep *f) {
    Endpoint *ep = object_of<Endpoint>(f);
    return (ep != nullptr) ? ep->rx_op_flags() : 0;
}
inline iovec one(const void *buf, size_t len) { return iovec{const_cast<void *>(buf), len}; }
/* A message's desc for the layer: its single element's (vectors take none). */
inline void *first_desc(void *const *desc, size_t count) {
    return ((desc != nullptr) && (count == 1)) ? desc[0] : nullptr;
}

extern fi_ops_tagged g_tagged_ops;
extern fi_ops_msg    g_msg_ops;

}  // namespace fabric
}  // namespace uct_tm

#endif
