/*
 * TmVerbsList: the tag list seam (tm_list.h) over a real TM SRQ through
 * rdma-core: ibv_create_srq_ex(IBV_SRQT_TM), ibv_post_srq_ops for
 * ADD / DEL / SYNC, ibv_post_srq_recv for untagged buffers, and an extended
 * CQ (IBV_WC_EX_WITH_TM_INFO) read with ibv_wc_read_tm_info.
 *
 * HARDWARE-UNTESTED: no machine of this project has a NIC with tag matching
 * (ConnectX-5 or later). It is built, its detection path runs in the tests
 * (no device, no TM capability, EOPNOTSUPP from the SRQ creation), and the
 * device model (tm_model.h) reproduces the behaviour it exposes; the rest
 * is written from the rdma-core documentation and the mlx5 provider's
 * behaviour (docs/tm_hw_list.md).
 *
 * Completions report src_qp as the local QP number the message arrived on
 * (RC: one QP per peer); the transport maps it to its endpoint.
 */
#ifndef UCT_TM_IB_TM_VERBS_LIST_H_
#define UCT_TM_IB_TM_VERBS_LIST_H_

#include "tag/tm_list.h"

#include <infiniband/verbs.h>

#include <cstdint>
#include <memory>
#include <vector>

namespace uct_tm {
namespace ib {

/* errno of a TM verb -> status: EOPNOTSUPP / ENOSYS / EPROTONOSUPPORT (no
 * tag matching in the provider or device) -> UCS_ERR_UNSUPPORTED. */
ucs_status_t tm_verbs_status(int err);

class TmVerbsList {
  public:
    struct Config {
        uint32_t max_num_tags = 1024; /* capped by the device */
        uint32_t srq_len      = 1024; /* untagged buffers */
        uint32_t cq_len       = 8192;
    };

    /* The device's tag matching capabilities; UCS_ERR_UNSUPPORTED when it
     * has none (max_num_tags == 0, e.g. rxe), UCS_ERR_INVALID_PARAM for a
     * null context. */
    static ucs_status_t query(ibv_context *context, TmCaps *caps);

    /* Creates the CQ and the TM SRQ. UCS_ERR_UNSUPPORTED when the device or
     * provider has no tag matching: the caller falls back to the software
     * tag list over a plain SRQ. */
    static ucs_status_t create(ibv_context *context, ibv_pd *pd, const Config &config,
                               std::unique_ptr<TmVerbsList> *out);

    ~TmVerbsList();
    TmVerbsList(const TmVerbsList &)            = delete;
    TmVerbsList &operator=(const TmVerbsList &) = delete;

    /* RC QPs attach to srq() and use cq() as their receive CQ. */
    ibv_srq *srq() const { return srq_; }
    ibv_cq  *cq() const { return ibv_cq_ex_to_cq(cq_); }

    /* ---- the seam ---- */
    const TmCaps &caps() const { return caps_; }
    ucs_status_t  post_op(TmOp &op);
    ucs_status_t  post_recv(uint64_t wr_id, const TmSge &sge);
    unsigned      poll(TmCompletion *out, unsigned max);

  private:
    TmVerbsList() = default;

    TmCaps      caps_;
    ibv_cq_ex  *cq_  = nullptr;
    ibv_srq    *srq_ = nullptr;
    uint64_t    ops_posted_  = 0;
    uint64_t    ops_retired_ = 0;
    /* Sequence numbers of signaled ops not yet completed, in posting order:
     * ops execute in order, so a list-op completion retires up to the head. */
    std::vector<uint64_t> signaled_;
    size_t                signaled_head_  = 0;
    size_t                signaled_count_ = 0;
};

static_assert(is_tm_list<TmVerbsList>::value, "TmVerbsList implements the tag list seam");

}  // namespace ib
}  // namespace uct_tm

#endif
