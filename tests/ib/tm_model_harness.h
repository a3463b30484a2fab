/*
 * Test harness for the hardware tag list: a TmModel, an HwTagEngine over it,
 * a transport that records everything the engine hands up, the sender side
 * of the wire (eager, rendezvous, software rendezvous requests, NO_TAG) and
 * the senders' registered memory the model's RDMA reads come from.
 */
#ifndef UCT_TM_TESTS_IB_TM_MODEL_HARNESS_H_
#define UCT_TM_TESTS_IB_TM_MODEL_HARNESS_H_

#include "tag/hw_tag_engine.h"
#include "ib/tm_model.h"

#include <cstdint>
#include <cstring>
#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <vector>

namespace uct_tm {
namespace ib {
namespace test {

/* One posted receive and everything that happened to it. */
struct Recv {
    uct_tag_context_t    ctx; /* first: the callbacks find the Recv from it */
    int                  id = 0;
    std::vector<uint8_t> buffer;
    int                  consumed  = 0;
    int                  completed = 0;
    int                  rndv      = 0;
    bool                 consumed_first = true; /* consumed_cb came before the completion */
    uct_tag_t            stag   = 0;
    uint64_t             imm    = 0;
    size_t               length = 0;
    ucs_status_t         status = UCS_OK;
    std::vector<uint8_t> header; /* rndv_cb */
    class Harness       *harness = nullptr;
    /* Called at the end of tag_consumed_cb (may re-enter the engine); the
     * test owns it (a pointer keeps Recv standard-layout). */
    const std::function<void(Recv &)> *on_consumed = nullptr;
};

struct Unexpected {
    enum Kind { kEager, kRndv, kNoTag, kFin } kind;
    uint32_t             src_qp;
    uint64_t             stag;
    uint64_t             imm;
    std::vector<uint8_t> data; /* payload, rndv header, or the whole NO_TAG message */
    uint64_t             remote_va;
    uint32_t             rkey;
    size_t               length;
    uint32_t             app_ctx; /* FIN */
};

class Harness {
  public:
    explicit Harness(TmModel::Config mc = TmModel::Config(),
                     HwTagEngineConfig ec = HwTagEngineConfig());
    ~Harness();

    TmModel                                 &model() { return *model_; }
    HwTagEngine<TmModel>                    &engine() { return *engine_; }
    void                                     destroy(); /* teardown mid-flight */
    bool                                     alive() const { return engine_ != nullptr; }

    /* ---- receives ---- */
    Recv        *make_recv(size_t size);
    ucs_status_t post(Recv *r, uct_tag_t tag, uct_tag_t mask = ~uct_tag_t{0});
    ucs_status_t cancel(Recv *r, int force) { return engine_->cancel(&r->ctx, force); }

    /* ---- senders ---- */
    void send_eager(uint32_t src, uint64_t tag, const std::vector<uint8_t> &payload,
                    uint64_t imm = 0);
    void send_sw_rndv_request(uint32_t src, uint64_t tag, const std::vector<uint8_t> &header);
    /* Registers `data` as the sender's memory and sends TMH+RVH+header. */
    void send_rndv(uint32_t src, uint64_t tag, uint32_t app_ctx, const std::vector<uint8_t> &data,
                   const std::vector<uint8_t> &header = {});
    void send_no_tag(uint32_t src, const std::vector<uint8_t> &body);

    /* ---- driving ---- */
    unsigned progress() { return engine_->progress(); }
    /* Model steps in fixed order and progress until nothing moves; also
     * finishes software rendezvous. Returns false if still busy after the
     * bound (a hang). */
    bool drain(size_t max_rounds = 10000);
    /* Finishes the oldest software rendezvous: reads, sends FIN, reports. */
    bool finish_sw_rndv(ucs_status_t status = UCS_OK);

    /* ---- what the engine handed up ---- */
    std::vector<Unexpected>          unexpected;
    std::vector<SwRndv>              sw_rndv_running;
    std::vector<uint64_t>            orphaned;
    std::vector<std::pair<uint32_t, uint32_t>> hw_fins; /* (dst qp, app_ctx) by the model */
    std::vector<std::pair<uint32_t, uint32_t>> sw_fins; /* (dst qp, app_ctx) by software */
    std::vector<std::pair<uint32_t, uint32_t>> failed_rndvs; /* (src qp, app_ctx): READ failed */
    std::map<void *, uint32_t>       sw_failed; /* buffer -> rkey of a failed software read */
    /* The first 8 bytes of the sender memory registered under rkey. */
    uint64_t                         remote_id(uint32_t rkey) const;
    ucs_status_t                     eager_return = UCS_OK; /* what unexpected_eager returns */
    std::vector<void *>              kept_rx;               /* buffers kept (UCS_INPROGRESS) */
    /* Every consumed / unexpected event in order: receive id >= 0, or -1 - index
     * into `unexpected`. */
    std::vector<long>                events;

    static std::vector<uint8_t> pattern(uint64_t seed, size_t n);

  private:
    static void         on_consumed(uct_tag_context_t *ctx);
    static void         on_completed(uct_tag_context_t *ctx, uct_tag_t stag, uint64_t imm,
                                     size_t length, void *inline_data, ucs_status_t status);
    static void         on_rndv(uct_tag_context_t *ctx, uct_tag_t stag, const void *header,
                                unsigned header_length, ucs_status_t status, unsigned flags);
    static ucs_status_t t_eager(void *arg, uint32_t src_qp, uint64_t stag, uint64_t imm,
                                void *data, size_t length);
    static void         t_rndv(void *arg, uint32_t src_qp, uint64_t stag, const void *header,
                               unsigned header_length, uint64_t remote_va, uint32_t rkey,
                               size_t length);
    static ucs_status_t t_no_tag(void *arg, uint32_t src_qp, void *data, size_t length);
    static void         t_fin(void *arg, uint32_t src_qp, uint32_t app_ctx);
    static void         t_rndv_failed(void *arg, uint32_t src_qp, uint32_t app_ctx);
    static void         t_sw_rndv(void *arg, const SwRndv &op);
    static void         t_orphan(void *arg, uint64_t token);
    static bool         f_read(void *arg, uint32_t src_qp, uint64_t va, uint32_t rkey, void *dst,
                               size_t len);
    static void         f_send(void *arg, uint32_t dst_qp, const void *msg, size_t len);

    std::unique_ptr<TmModel>                          model_;
    std::unique_ptr<HwTagEngine<TmModel>>             engine_;
    std::deque<std::unique_ptr<Recv>>                 recvs_;
    std::map<uint32_t, std::vector<uint8_t>>          remote_; /* rkey -> sender memory */
    uint32_t                                          next_rkey_ = 100;
    uint32_t                                          mtu_;
};

}  // namespace test
}  // namespace ib
}  // namespace uct_tm

#endif
