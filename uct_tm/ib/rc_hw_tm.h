/*
 * RcHwTags: a tm_rc iface's receive side when a hardware tag list matches
 * (docs/tm_hw_list.md): HwTagEngine over the device model of a TM NIC
 * (UCX_TM_RC_TM_MODEL=y: fed from the iface's plain SRQ, stepped from
 * progress) or over a verbs TM SRQ (hardware-untested).
 *
 * It holds the list and its engine, and what the engine hands back to be
 * done after its own progress: software rendezvous reads (sw_rndvs),
 * acknowledgements of cancelled rendezvous, failed reads; and the send
 * completions polled while the model waited for its READ.
 */
#ifndef UCT_TM_IB_RC_HW_TM_H_
#define UCT_TM_IB_RC_HW_TM_H_

#include "rc_link.h"

#include "tag/hw_tag_engine.h"
#include "tm_model.h"
#include "tm_verbs_list.h"

#include <infiniband/verbs.h>

#include <cstdio>
#include <memory>
#include <random>
#include <string>
#include <utility>
#include <vector>

namespace uct_tm {
namespace ib {

class RcRendezvous;
struct IbMd;
struct RcConfig;

class RcHwTags {
  public:
    RcHwTags(RcIfaceLink iface, RcRendezvous &rndv) : iface_(iface), rndv_(rndv) {}
    ~RcHwTags();
    RcHwTags(const RcHwTags &)            = delete;
    RcHwTags &operator=(const RcHwTags &) = delete;

    /* The device model, with ports of `mtu` bytes. */
    ucs_status_t init_model(const RcConfig &config, const HwTagEngineConfig &engine,
                            uint32_t mtu, const std::string &device);
    /* TmVerbsList on a TM SRQ of `md`; UCS_ERR_UNSUPPORTED: the device refuses. */
    ucs_status_t init_verbs_tm(const RcConfig &config, const HwTagEngineConfig &engine,
                               const IbMd &md, uint32_t srq_len);

    /* Tags are matched by a hardware tag list (the model or a TM SRQ). */
    bool         active() const { return (model_tags_ != nullptr) || (verbs_tags_ != nullptr); }
    bool         model() const { return model_ != nullptr; }
    /* The QPs receive into a TM SRQ, whose CQ the engine polls. */
    bool         verbs_srq() const { return verbs_tags_ != nullptr; }
    /* The TM SRQ, when the QPs receive into it (its CQ is the engine's). */
    const TmVerbsList *verbs_list() const { return verbs_list_.get(); }
    /* f(engine) on whichever HwTagEngine runs (active() only). */
    template <typename F> decltype(auto) with(F &&f) {
        return (model_tags_ != nullptr) ? f(*model_tags_) : f(*verbs_tags_);
    }
    template <typename F> decltype(auto) with(F &&f) const {
        return (model_tags_ != nullptr) ? f(*model_tags_) : f(*verbs_tags_);
    }
    /* Largest tag_rndv_zcopy header the list takes with TMH and RVH. */
    size_t       max_rndv_hdr() const;

    /* A message polled from the SRQ goes to the model, as to a TM NIC. */
    void         model_receive(const struct ibv_wc &wc);
    /* QP `qp_num` was connected just now (the model's ordering rule 7). */
    void         model_connected(uint32_t qp_num) {
        if (model_) {
            model_->connected_now(qp_num);
        }
    }
    unsigned     progress();

    /* Send completions polled while the model waited for its READ, for
     * the iface's poll_tx(). */
    bool         has_stashed_tx() const { return !stashed_tx_.empty(); }
    std::vector<struct ibv_wc> take_stashed_tx() { return std::move(stashed_tx_); }

    void         print_counters(FILE *stream, const char *tl, const std::string &device, unsigned port) const;

  private:
    using ModelTagEngine = HwTagEngine<TmModel>;
    using VerbsTagEngine = HwTagEngine<TmVerbsList>;

    void         model_step();
    void         run_sw_rndvs();
    void         send_cancel_acks();
    /* RDMA READ on `ep`, waited for here; other send completions polled
     * meanwhile are kept for the iface's poll_tx(). */
    bool         read_sync(RcEp *ep, uint64_t va, uint32_t rkey, void *dst, size_t length);
    static HwTagTransport  transport(RcHwTags *self);
    static TmModel::Fabric model_fabric(RcHwTags *self);

    RcIfaceLink   iface_;
    RcRendezvous &rndv_;

    /* each engine is destroyed before its list */
    std::unique_ptr<TmModel>        model_;
    std::unique_ptr<ModelTagEngine> model_tags_;
    std::unique_ptr<TmVerbsList>    verbs_list_; /* owns the iface's SRQ and receive CQ then */
    std::unique_ptr<VerbsTagEngine> verbs_tags_;
    struct ibv_mr                  *tm_rx_mr_ = nullptr; /* verbs_tags_'s untagged buffers */
    std::mt19937_64                 model_rng_;
    bool                            model_random_ = false;
    std::vector<SwRndv>             sw_rndvs_;     /* to finish after the engine's progress */
    std::vector<std::pair<uint32_t, uint32_t>> cancel_acks_; /* {qp, op}: FIN once no READ is due */
    std::vector<std::pair<uint32_t, uint32_t>> failed_rndvs_; /* {qp, op}: the engine's READ failed */
    std::vector<struct ibv_wc>      stashed_tx_;   /* polled during read_sync() */
};

}  // namespace ib
}  // namespace uct_tm

#endif
