/*
 * RcRendezvous: a tm_rc iface's tag rendezvous in software, both ends.
 *
 * It holds our rendezvous sends waiting for their FIN (RndvSend: the
 * buffer's registration, the keepalive of their QPs) and the matched
 * receives whose RDMA READs are due or in flight (RndvRecv), with the
 * FIN, cancel and failure messages that end them. Under hardware tag
 * matching the engine reads and RcHwTags calls the acknowledgements here.
 */
#ifndef UCT_TM_IB_RC_RNDV_H_
#define UCT_TM_IB_RC_RNDV_H_

#include "rc_link.h"

#include "tag/tag_engine.h"

#include <infiniband/verbs.h>
#include <uct/api/uct.h>

#include <vector>

namespace uct_tm {
namespace ib {

struct RcConfig;

/* A tag_rndv_zcopy send waiting for the receiver's FIN: free, active, or
 * "retired" (cancelled: its completion is gone, but its buffer stays
 * readable until the receiver acknowledges the cancel with a FIN). */
struct RndvSend {
    uct_completion_t *comp    = nullptr;
    RcEp             *ep      = nullptr;
    struct ibv_mr    *temp_mr = nullptr; /* the buffer had no memh */
    uint32_t          gen     = 1;
    bool              active  = false;
    bool              retired = false;
};

/* A matched rendezvous receive: active once matched, started once its
 * RDMA READs are posted (after the arrival batch), finished when the last
 * one is back. */
struct RndvRecv {
    TagEngine::Recv *recv     = nullptr;
    RcEp            *ep       = nullptr; /* the QP the message came on: FIN goes back on it */
    uct_tag_t        tag      = 0;
    size_t           length   = 0; /* the sender's full length */
    uint32_t         op       = 0; /* the sender's app_ctx */
    uint64_t         va       = 0; /* the sender's buffer */
    uint32_t         rkey     = 0;
    uint32_t         reads    = 0; /* READ work requests outstanding */
    ucs_status_t     status   = UCS_OK;
    bool             active   = false;
    bool             started  = false; /* READs posted (they start after the arrival batch) */
};

class RcRendezvous {
  public:
    explicit RcRendezvous(RcIfaceLink iface) : iface_(iface) {}
    ~RcRendezvous();
    RcRendezvous(const RcRendezvous &)            = delete;
    RcRendezvous &operator=(const RcRendezvous &) = delete;
    ucs_status_t init(const RcConfig &config);

    /* ---- sender ---- */
    ucs_status_ptr_t send(RcEp *ep, uct_tag_t tag, const void *header, unsigned header_length,
                          const uct_iov_t *iov, size_t iovcnt, uct_completion_t *comp);
    ucs_status_t     cancel(void *op);
    void             receive_fin(uint32_t op);
    /* The receiver could not read our rendezvous `op`: the connection fails. */
    void             receive_failed(RcEp *ep, uint32_t op);
    /* Sends are waiting for their FIN. */
    bool             sending() const { return free_sends_.size() != sends_.size(); }
    /* A QP the device moved to the error state (e.g. after rejecting the
     * peer's READ) sends no completion and, on rxe, no async event: while
     * sends wait, progress looks at their QPs' state now and then. */
    void             check_qps();
    /* `ep` failed: its sends complete with `status`. */
    void             fail_ep(RcEp *ep, ucs_status_t status);
    /* flush with CANCEL: `ep`'s sends complete with UCS_ERR_CANCELED. */
    void             cancel_ep(RcEp *ep);
    /* `ep` goes: its sends are released without a callback, its receives
     * owe it no FIN. */
    void             forget_ep(RcEp *ep);

    /* ---- receiver ---- */
    void             receive_rts(RcEp *ep, char *data, size_t length, uct_tag_t tag, uint32_t op);
    void             receive_cancel(RcEp *ep, uint32_t op);
    /* READs of the receives matched in this batch of arrivals. */
    void             start_reads() {
        if (!deferred_reads_.empty()) {
            start_deferred_reads();
        }
    }
    /* Receive `index`'s READ came back with `status`. */
    void             read_done(uint32_t index, ucs_status_t status);
    /* A receive force-cancelled while an RDMA READ writes into it: waits
     * for the READ (the buffer is the user's once cancel returns). */
    void             wait_reads(const TagEngine::Recv *recv);

    /* ---- acknowledgements (also the hardware engine's) ---- */
    ucs_status_t     send_fin(RcEp *ep, uint32_t op);
    /* After the READ of the peer's rendezvous `op`: a FIN, or, if the READ
     * failed (UCS_ERR_IO_ERROR), fail_recv(). */
    void             acknowledge_read(RcEp *ep, uint32_t op, ucs_status_t read_status);
    /* A rendezvous READ from `ep` failed: tells the sender (op) while the QP
     * still carries messages, then fails the connection, as a remote access
     * error fails an rc_mlx5 QP. */
    void             fail_recv(RcEp *ep, uint32_t op);
    /* FAIL_READ (testing only): whether the READ starting now is to fail. */
    bool             fail_this_read();

  private:
    void release_send(uint32_t index);
    /* Releases send `index` and completes it (if not retired) with `status`. */
    void end_send(uint32_t index, ucs_status_t status);
    void start_deferred_reads();
    void start_read(uint32_t index);
    void finish_recv(uint32_t index);
    /* Keepalive of an endpoint whose rendezvous sends wait for a FIN: after
     * KEEPALIVE_INTERVAL without one, a probe (post_probe) makes a dead peer
     * fail the endpoint through the transport's retries. */
    void keepalive(RcEp *ep, uint64_t now);

    RcIfaceLink iface_;

    /* settings */
    unsigned fail_read_          = 0; /* FAIL_READ */
    unsigned corrupt_rkey_       = 0; /* CORRUPT_RKEY */
    uint64_t keepalive_interval_ = 0; /* ns */

    std::vector<RndvSend> sends_;
    std::vector<uint32_t> free_sends_;
    std::vector<RndvRecv> recvs_;
    std::vector<uint32_t> free_recvs_;
    std::vector<uint32_t> deferred_reads_;  /* matched in this batch of arrivals */
    uint64_t              next_qp_check_ns_ = 0;
    unsigned              reads_started_    = 0; /* for FAIL_READ */
    unsigned              sends_started_    = 0; /* for CORRUPT_RKEY */
};

}  // namespace ib
}  // namespace uct_tm

#endif
