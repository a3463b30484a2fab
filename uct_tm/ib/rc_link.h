/*
 * RcIfaceLink: what the parts of a tm_rc iface (RcRendezvous, RcHwTags) use
 * of the iface that owns them: its send paths and send resources, its
 * endpoints, its receive buffers, the tag engine, the layer above's
 * callbacks and the counters. Plain forwarding calls, defined inline at the
 * end of rc_iface.h: no virtual call and no cost over calling the iface.
 */
#ifndef UCT_TM_IB_RC_LINK_H_
#define UCT_TM_IB_RC_LINK_H_

#include <infiniband/verbs.h>
#include <uct/api/uct.h>

#include <cstddef>
#include <cstdint>
#include <vector>

namespace uct_tm {

class TagEngine;

namespace ib {

class RcIface;
struct PackedRkey;
struct RcEp;
struct TxOp;
struct WireHeader;

/* What crossed a tm_rc iface (PRINT_STATS). */
struct RcCounters {
    uint64_t received    = 0; /* receive completions */
    uint64_t unexpected  = 0; /* tagged messages handed to eager_cb / rndv_cb */
    uint64_t rndv_reads  = 0; /* rendezvous receives read with RDMA READ */
    uint64_t temp_regs   = 0; /* buffers registered for one operation (no memh) */
    uint64_t tx_errors   = 0; /* send completions with an error */
    uint64_t keepalives  = 0; /* probes posted (uct_ep_check; rendezvous sends waiting) */
    uint64_t dropped     = 0; /* malformed or unwanted messages */
    /* tm_dc */
    uint64_t connects    = 0; /* connection requests started (initiator) */
    uint64_t accepts     = 0; /* queue pairs made for peers' requests (target) */
    uint64_t evictions   = 0; /* idle connections closed for another endpoint */
    uint64_t max_qps     = 0; /* most RC queue pairs open at once */
};

class RcIfaceLink {
  public:
    explicit RcIfaceLink(RcIface &iface) : iface_(&iface) {}

    /* ---- sending (rc_send.cc) ---- */
    /* One message: `header`, `prefix`, then the iov list, copied. */
    inline ucs_status_t send(RcEp *ep, const WireHeader &header, const void *prefix,
                             size_t prefix_length, const uct_iov_t *iov, size_t iovcnt);
    /* A message the peer waits for (FIN, cancel, failure notice): it may
     * take the send slot the layer above would have used next. */
    inline ucs_status_t send_urgent(RcEp *ep, const WireHeader &header);
    inline ucs_status_t tx_ready(RcEp *ep, bool needs_buf) const;
    /* A work request and a send operation are free for `ep`. */
    inline bool         tx_room(const RcEp *ep) const;
    inline ucs_status_t post_send(RcEp *ep, struct ibv_send_wr *wr, const TxOp &op);
    /* One work request outside the send operations (the model's blocking READ). */
    inline int          post_wr(RcEp *ep, struct ibv_send_wr *wr);
    inline ucs_status_t post_probe(RcEp *ep);
    inline unsigned     poll_tx();
    inline struct ibv_cq *tx_cq() const;
    inline struct ibv_pd *pd() const;

    /* ---- endpoints ---- */
    inline void                       fail_ep(RcEp *ep, ucs_status_t status);
    inline RcEp                      *ep_by_qp(uint32_t qp_num) const;
    inline const std::vector<RcEp *> &eps() const;

    /* ---- receiving ---- */
    inline bool   rx_completed(const struct ibv_wc &wc, uint32_t *buf);
    /* Where the message of receive buffer `buf` starts. */
    inline char  *rx_message(uint32_t buf) const;
    inline void   repost(uint32_t buf);
    inline TagEngine &tags();
    inline bool   tag_enabled() const;
    inline size_t max_rndv_hdr() const;
    /* The layer above's callbacks for what no receive matched (counted;
     * dropped without one); true: it kept the buffer. */
    inline bool   unexpected_eager(char *data, size_t length, uct_tag_t tag, uint64_t imm);
    inline void   unexpected_rndv(uct_tag_t tag, const void *header, unsigned header_length,
                                  uint64_t va, size_t length, const PackedRkey *rkey);
    inline bool   receive_am(uint8_t id, char *data, size_t length);

    inline RcCounters &counters();

  private:
    RcIface *iface_;
};

}  // namespace ib
}  // namespace uct_tm

#endif
