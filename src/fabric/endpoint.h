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
};

/* A single buffer as a one-element vector. */
inline iovec one(const void *buf, size_t len) { return iovec{const_cast<void *>(buf), len}; }

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

    /* The single-buffer calls (those Open MPI's mtl ofi makes per message)
     * post inline when the endpoint's state and the arguments allow the
     * plain post; anything else goes to send_any() / recv_any(), which check
     * everything and say what is wrong. None throws. */
    template <bool kTagged>
    [[gnu::always_inline]] ssize_t recv_one(void *buf, size_t len, void *desc, fi_addr_t src,
                                            uint64_t tag, uint64_t ignore, void *context,
                                            uint64_t flags);
    template <bool kTagged, bool kQuiet>
    [[gnu::always_inline]] ssize_t send_one(const void *buf, size_t len, void *desc, fi_addr_t dest,
                                            uint64_t tag, uint64_t data, void *context,
                                            uint64_t flags);
    ssize_t                        send_any(const Xfer &x) noexcept;
    ssize_t                        recv_any(const Xfer &x) noexcept;

    /* MRs mapped into this endpoint's worker (forgotten at close). */
    void mapped(Mr *mr) { mrs_.push_back(mr); }
    void unmapped(Mr *mr);

    uint64_t tx_op_flags() const { return tx_op_flags_; }
    uint64_t rx_op_flags() const { return rx_op_flags_; }

  private:
    int               bind_cq(Cq *cq, uint64_t flags);
    int               bind_av(Av *av);
    int               bind_cntr(Cntr *cntr, uint64_t flags);
    ssize_t           send(const Xfer &x);
    ssize_t           recv(const Xfer &x);
    /* A send that keeps an op; send_counted(): a counted inject's, out of line. */
    ssize_t           send_op(uct_tm_proto_ep_h ep, const void *buf, size_t len, uint64_t tag,
                              uct_tm_proto_op_params_t *params, void *context, uint64_t flags, bool report);
    ssize_t           send_counted(uct_tm_proto_ep_h ep, const void *buf, size_t len, uint64_t tag,
                                   uct_tm_proto_op_params_t *params, uint64_t flags);
    ssize_t           check_send(const Xfer &x, uct_tm_proto_ep_h *ep) const;
    ssize_t           check_recv(const Xfer &x, uct_tm_proto_ep_h *source) const;
    ssize_t           check_recv_flags(const Xfer &x) const;
    ssize_t           peek(const Xfer &x, uct_tm_proto_ep_h source);
    ssize_t           claimed(const Xfer &x);
    Op               &new_op(const Xfer &x, uint64_t flags, size_t len, bool report);
    Op *take_op(void *context, uint64_t flags, void *buf, size_t len, bool report) noexcept;
    /* The CQ and counter of an operation with these completion flags (FI_SEND or FI_RECV). */
    Cq               *cq_for(uint64_t flags) const { return (flags & FI_SEND) ? tx_cq_ : rx_cq_; }
    Cntr *cntr_for(uint64_t flags) const { return (flags & FI_SEND) ? tx_cntr_ : rx_cntr_; }
    void              use_desc(const Xfer &x, const Vector &v, uct_tm_proto_op_params_t *params);
    ssize_t           started(Op &op, ucs_status_t status, uct_tm_proto_request_t req);
    void              complete(Op &op, uct_tm_proto_request_t req, const uct_tm_proto_info_t &info);
    void              release(Op &op, uct_tm_proto_request_t req);
    void              complete_part(Op &op, const uct_tm_proto_info_t &info);
    void              complete_multi(Op &op, const uct_tm_proto_info_t &info);
    void complete_any_multi(Op &op, uct_tm_proto_request_t req, const uct_tm_proto_info_t &info);
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
    uint64_t ready_kinds_ = 0; /* enabled: the caps' FI_TAGGED and FI_MSG */
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

template <bool kTagged, bool kQuiet>
inline ssize_t Endpoint::send_one(const void *buf, size_t len, void *desc, fi_addr_t dest,
                                  uint64_t tag, uint64_t data, void *context, uint64_t flags) {
    constexpr uint64_t kKind  = kTagged ? FI_TAGGED : FI_MSG;
    constexpr uint64_t kPlain = FI_INJECT | FI_REMOTE_CQ_DATA | FI_COMPLETION | FI_INJECT_COMPLETE;
    uct_tm_proto_ep_h  ep     = peer(dest);
    if (((ready_kinds_ & kKind) == 0) || ((flags & ~kPlain) != 0) || (desc != nullptr) ||
        ((buf == nullptr) && (len != 0)) || (ep == nullptr) || (len > kInjectSize)) {
        const iovec v = one(buf, len);
        return send_any(Xfer{&v, 1, dest, tag, 0, data, context, desc, flags, kTagged, kQuiet});
    }
    uct_tm_proto_op_params_t params;
    params.flags = send_flags(flags, kTagged);
    params.data  = data;
    if (!kQuiet) {
        const bool report = !tx_selective_ || (flags & FI_COMPLETION);
        return send_op(ep, buf, len, tag, &params, context, FI_SEND | kKind, report);
    }
    if (tx_cntr_ != nullptr) { /* a counted inject keeps an op (out of line: rare) */
        return send_counted(ep, buf, len, tag, &params, FI_SEND | kKind);
    }
    /* fi_inject & co, no counter: no op to keep (no context to cancel or
     * report); the layer calls back only with an error */
    params.flags |= UCT_TM_PROTO_OP_NO_COMPLETION;
    params.cb                 = on_quiet_error<kTagged>;
    params.arg                = this;
    const ucs_status_t status = uct_tm_proto_send(ep, buf, len, tag, &params, nullptr);
    return ((status == UCS_OK) || (status == UCS_INPROGRESS)) ? 0 : fi_error(status);
}

/* A send that keeps an op until the layer completes it. */
inline ssize_t Endpoint::send_op(uct_tm_proto_ep_h ep, const void *buf, size_t len, uint64_t tag,
                                 uct_tm_proto_op_params_t *params, void *context, uint64_t flags,
                                 bool report) {
    Op *op = take_op(context, flags, nullptr, len, report);
    if (op == nullptr) {
        return -FI_ENOMEM;
    }
    params->cb                    = on_complete;
    params->arg                   = op;
    uct_tm_proto_request_t req = 0;
    const ucs_status_t     status = uct_tm_proto_send(ep, buf, len, tag, params, &req);
    return started(*op, status, req);
}

template <bool kTagged>
inline ssize_t Endpoint::recv_one(void *buf, size_t len, void *desc, fi_addr_t src, uint64_t tag,
                                  uint64_t ignore, void *context, uint64_t flags) {
    constexpr uint64_t kKind    = kTagged ? FI_TAGGED : FI_MSG;
    const bool         directed = (caps_ & FI_DIRECTED_RECV) && (src != FI_ADDR_UNSPEC);
    uct_tm_proto_ep_h  source   = directed ? peer(src) : nullptr;
    if (((ready_kinds_ & kKind) == 0) || ((flags & ~FI_COMPLETION) != 0) || (desc != nullptr) ||
        ((buf == nullptr) && (len != 0)) || (directed && (source == nullptr))) {
        const iovec v = one(buf, len);
        return recv_any(Xfer{&v, 1, src, tag, ignore, 0, context, desc, flags, kTagged, false});
    }
    const bool report = !rx_selective_ || (flags & FI_COMPLETION);
    Op        *op     = take_op(context, FI_RECV | kKind, buf, len, report);
    if (op == nullptr) {
        return -FI_ENOMEM;
    }
    uct_tm_proto_op_params_t params;
    params.flags               = kTagged ? 0u : unsigned{UCT_TM_PROTO_OP_UNTAGGED};
    params.cb                  = on_complete;
    params.arg                 = op;
    uct_tm_proto_request_t req = 0;
    const ucs_status_t status  = uct_tm_proto_recv(worker_, buf, len, tag, ~ignore, source, &params,
                                                   &req);
    if (status == UCS_INPROGRESS) {
        op->req = req;
        return 0;
    }
    return started(*op, status, req);
}

/* An op, with room held in its CQ for its entry; null if memory ran out
 * (nothing taken). */
inline Op *Endpoint::take_op(void *context, uint64_t flags, void *buf, size_t len,
                             bool report) noexcept {
    Cq *cq = cq_for(flags);
    if (!cq->hold_room()) {
        return nullptr;
    }
    Op *op = ops_.take(this, context, flags, buf, len, report);
    if (op == nullptr) {
        cq->drop_room();
    }
    return op;
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
inline void progress_each(const std::vector<Endpoint *> &eps) {
    for (Endpoint *ep : eps) { /* attach() keeps each once */
        ep->progress();
    }
}

/* A message's desc for the layer: its single element's (vectors take none). */
inline void *first_desc(void *const *desc, size_t count) {
    return ((desc != nullptr) && (count == 1)) ? desc[0] : nullptr;
}

extern fi_ops_tagged g_tagged_ops;
extern fi_ops_tagged g_tagged_ops_serial;
extern fi_ops_msg    g_msg_ops;
extern fi_ops_msg    g_msg_ops_serial;

}  // namespace fabric
}  // namespace uct_tm

#endif
