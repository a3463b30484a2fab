/*
 * tm_rc's receive side over the hardware tag list, driven by the device model
 * (UCX_TM_RC_TM_MODEL=y): the NIC tag-matching engine tm_rc would use on a TM
 * SRQ, modelled where no such NIC exists.
 *
 * The verbs data path is real: messages arrive on the iface's plain SRQ from
 * rxe (or any device). Each one is handed, whole and with its immediate, to
 * TmModel::deliver() for the QP it came on, exactly what a TM NIC would see.
 * The model places matched data into posted receives, performs rendezvous
 * reads with a real RDMA READ on that QP and sends the FIN on it (its Fabric),
 * and reports the completions that HwTagEngine handles as hardware CQEs. The
 * model's scheduler is stepped from iface progress: in a fixed order, or with
 * TM_MODEL_SEED in a seeded random order with list-op completions deferred,
 * so that the engine's races happen inside the transport.
 */
#include "rc_hw_tm.h"

#include "common/alloc_status.h"

#include "ib_device.h"
#include "rc_iface.h"
#include "rc_rndv.h"

#include <ucs/debug/log_def.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <ctime>
#include <new>

namespace uct_tm {
namespace ib {
namespace {

constexpr uint64_t kSyncReadWrId = UINT64_MAX; /* read_sync()'s own work request */
/* The model's list-op budget: one ADD and one DEL per tag, and a SYNC
 * (HwTagEngine's reservation), as a real device's max_ops would allow. */
uint32_t model_max_ops(uint32_t tags) { return 2 * tags + 2; }
/* TMH + RVH + the user header the modelled engine takes (ConnectX: 128). */
constexpr uint32_t kModelMaxRndvHdr = 128;

}  // namespace

RcHwTags::~RcHwTags() {
    if (tm_rx_mr_ != nullptr) {
        ibv_dereg_mr(tm_rx_mr_);
    }
}

size_t RcHwTags::max_rndv_hdr() const {
    const size_t headers = sizeof(WireHeader) + sizeof(struct ibv_rvh);
    if (model_) {
        return kModelMaxRndvHdr - headers;
    }
    const size_t max = verbs_list_->caps().max_rndv_hdr;
    return (max > headers) ? max - headers : 0;
}

HwTagTransport RcHwTags::transport(RcHwTags *self) {
    HwTagTransport t;
    t.arg              = self;
    t.unexpected_eager = [](void *arg, uint32_t, uint64_t stag, uint64_t imm, void *data,
                            size_t length) -> ucs_status_t {
        auto      *hw   = static_cast<RcHwTags *>(arg);
        const bool kept = hw->iface_.unexpected_eager(static_cast<char *>(data), length, stag, imm);
        return kept ? UCS_INPROGRESS : UCS_OK;
    };
    t.unexpected_rndv = [](void *arg, uint32_t, uint64_t stag, const void *header,
                           unsigned header_length, uint64_t remote_va, uint32_t rkey,
                           size_t length) {
        auto *hw = static_cast<RcHwTags *>(arg);
        /* All zero: a software rendezvous request (no rkey for the layer above). */
        const bool       request = (remote_va == 0) && (length == 0) && (rkey == 0);
        const PackedRkey packed  = pack_rkey(rkey, remote_va, length);
        hw->iface_.unexpected_rndv(stag, header, header_length, remote_va, length,
                                   request ? nullptr : &packed);
    };
    t.no_tag = [](void *arg, uint32_t src_qp, void *data, size_t length) -> ucs_status_t {
        auto      *hw = static_cast<RcHwTags *>(arg);
        WireHeader hdr;
        if (length < sizeof(hdr)) {
            ++hw->iface_.counters().dropped;
            return UCS_OK;
        }
        memcpy(&hdr, data, sizeof(hdr));
        char *payload = static_cast<char *>(data) + sizeof(hdr);
        if (hdr.kind == static_cast<uint8_t>(Kind::kAm)) {
            return hw->iface_.receive_am(hdr.am_id, payload, length - sizeof(hdr)) ? UCS_INPROGRESS
                                                                                   : UCS_OK;
        }
        if (hdr.kind == static_cast<uint8_t>(Kind::kRndvFailed)) {
            hw->rndv_.receive_failed(hw->iface_.ep_by_qp(src_qp), be32toh(hdr.app_ctx));
            return UCS_OK;
        }
        if (hdr.kind == static_cast<uint8_t>(Kind::kRndvCancel)) {
            /* The engine reads a matched rendezvous whatever the sender says
             * (as a NIC does): acknowledge once no READ of ours can follow. */
            hw->cancel_acks_.emplace_back(src_qp, be32toh(hdr.app_ctx));
            return UCS_OK;
        }
        if (hdr.kind != static_cast<uint8_t>(Kind::kProbe)) {
            ++hw->iface_.counters().dropped;
        }
        return UCS_OK;
    };
    t.fin = [](void *arg, uint32_t, uint32_t app_ctx) {
        static_cast<RcHwTags *>(arg)->rndv_.receive_fin(app_ctx);
    };
    t.rndv_failed = [](void *arg, uint32_t src_qp, uint32_t app_ctx) {
        /* Handled after the engine's progress, like sw_rndv. */
        static_cast<RcHwTags *>(arg)->failed_rndvs_.emplace_back(src_qp, app_ctx);
    };
    t.sw_rndv = [](void *arg, const SwRndv &op) {
        /* Finished after the engine's progress returns: sw_rndv_done() must
         * not run inside the engine's own completion handling. */
        static_cast<RcHwTags *>(arg)->sw_rndvs_.push_back(op);
    };
    t.lkey = [](void *, uct_mem_h memh, void *) -> uint32_t {
        /* A TM SRQ writes posted receives with their registration. */
        const struct ibv_mr *mr = mr_of(memh);
        return (mr != nullptr) ? mr->lkey : 0;
    };
    t.orphan = [](void *arg, uint64_t token) {
        for (SwRndv &op : static_cast<RcHwTags *>(arg)->sw_rndvs_) {
            if (op.token == token) {
                op.length = 0; /* the buffer is the user's again: only the FIN is due */
            }
        }
    };
    return t;
}

TmModel::Fabric RcHwTags::model_fabric(RcHwTags *self) {
    TmModel::Fabric f;
    f.arg  = self;
    f.read = [](void *arg, uint32_t src_qp, uint64_t va, uint32_t rkey, void *dst,
                size_t len) {
        auto *hw = static_cast<RcHwTags *>(arg);
        ++hw->iface_.counters().rndv_reads;
        return hw->read_sync(hw->iface_.ep_by_qp(src_qp), va, rkey, dst, len);
    };
    f.send = [](void *arg, uint32_t dst_qp, const void *msg, size_t len) {
        /* The engine's FIN: the request's TMH with opcode FIN (+ RVH). */
        auto *hw = static_cast<RcHwTags *>(arg);
        RcEp *ep = hw->iface_.ep_by_qp(dst_qp);
        if ((len < sizeof(TmHeader)) || (ep == nullptr) || ep->failed) {
            return;
        }
        TmHeader tmh;
        memcpy(&tmh, msg, sizeof(tmh));
        hw->rndv_.send_fin(ep, tmh_app_ctx(tmh));
    };
    return f;
}

ucs_status_t RcHwTags::init_model(const RcConfig &config, const HwTagEngineConfig &engine,
                                  uint32_t mtu, const std::string &device) {
    TmModelConfig mc;
    mc.caps.max_num_tags = std::max(config.tm_model_tags, 1u);
    mc.caps.max_ops      = model_max_ops(mc.caps.max_num_tags);
    mc.caps.max_sge      = 1;
    mc.caps.max_rndv_hdr = kModelMaxRndvHdr;
    /* Eager messages longer than the path MTU arrive as several packets:
     * MATCH first, DATA_VALID when the last one lands. */
    mc.mtu                  = mtu;
    model_random_           = config.tm_model_seed != 0;
    mc.defer_op_completions = model_random_;
    model_rng_.seed(config.tm_model_seed);

    if (alloc_status([&] {
            model_.reset(new TmModel(mc));
            model_tags_.reset(new ModelTagEngine(*model_, engine, transport(this)));
            sw_rndvs_.reserve(64);
            cancel_acks_.reserve(64);
        }) != UCS_OK) {
        return UCS_ERR_NO_MEMORY;
    }
    model_->set_fabric(model_fabric(this));
    ucs_diag("tm_rc: %s: tags matched by the device model of a TM NIC (UCX_TM_RC_TM_MODEL): "
             "list %u of %u tags, %s order (seed %lu)",
             device.c_str(), model_tags_->list_size(), mc.caps.max_num_tags,
             model_random_ ? "random" : "fixed", config.tm_model_seed);
    return model_tags_->start();
}

/* Hardware-untested (no TM NIC here): TmVerbsList's own caveats apply
 * (docs/tm_hw_list.md). */
ucs_status_t RcHwTags::init_verbs_tm(const RcConfig &config, const HwTagEngineConfig &engine,
                                     const IbMd &md, uint32_t srq_len) {
    TmVerbsList::Config vc;
    vc.max_num_tags = std::max(config.tag_list.list_size, 1u);
    vc.srq_len      = srq_len;
    vc.cq_len       = 4 * srq_len + 2 * vc.max_num_tags; /* untagged, tagged, list ops */
    ucs_status_t status = TmVerbsList::create(md.ctx, md.pd, vc, &verbs_list_);
    if (status != UCS_OK) {
        return status;
    }
    if (alloc_status([&] {
            verbs_tags_.reset(new VerbsTagEngine(*verbs_list_, engine, transport(this)));
        }) != UCS_OK) {
        return UCS_ERR_NO_MEMORY;
    }
    tm_rx_mr_ = ibv_reg_mr(md.pd, verbs_tags_->rx_memory(), verbs_tags_->rx_memory_size(),
                           IBV_ACCESS_LOCAL_WRITE);
    if (tm_rx_mr_ == nullptr) {
        ucs_error("tm_rc: registering the TM SRQ's untagged buffers on %s: %s",
                  md.device.c_str(), strerror(errno));
        return UCS_ERR_IO_ERROR;
    }
    ucs_diag("tm_rc: %s: tags matched by the NIC (TM SRQ, list %u of %u tags)",
             md.device.c_str(), verbs_tags_->list_size(), verbs_list_->caps().max_num_tags);
    return verbs_tags_->start(tm_rx_mr_->lkey);
}

void RcHwTags::model_receive(const struct ibv_wc &wc) {
    uint32_t buf;
    if (!iface_.rx_completed(wc, &buf)) {
        return;
    }
    const bool with_imm = (wc.wc_flags & IBV_WC_WITH_IMM) != 0;
    model_->deliver(wc.qp_num, iface_.rx_message(buf), wc.byte_len, with_imm,
                    with_imm ? be32toh(wc.imm_data) : 0);
    iface_.repost(buf); /* the model copied the message */
}

void RcHwTags::model_step() {
    if (!model_random_) {
        model_->run_until_idle();
        return;
    }
    /* A few events per progress call, in a random order. */
    const unsigned steps = static_cast<unsigned>(model_rng_() % 4);
    for (unsigned i = 0; i < steps; ++i) {
        if (!model_->step_random(model_rng_)) {
            break;
        }
    }
}

unsigned RcHwTags::progress() {
    if (model_) {
        model_step();
    }
    unsigned count = with([](auto &e) { return e.progress(); });
    run_sw_rndvs();
    if (ucs_unlikely(!failed_rndvs_.empty())) {
        for (const auto &[qp, op] : failed_rndvs_) {
            rndv_.fail_recv(iface_.ep_by_qp(qp), op);
        }
        failed_rndvs_.clear();
    }
    if (model_ && !model_random_) {
        model_->run_until_idle(); /* the DELs and SYNC the engine just posted */
    }
    if (!cancel_acks_.empty()) {
        send_cancel_acks();
    }
    return count;
}

void RcHwTags::run_sw_rndvs() {
    while (!sw_rndvs_.empty()) {
        const SwRndv op = sw_rndvs_.front();
        sw_rndvs_.erase(sw_rndvs_.begin());
        RcEp        *ep     = iface_.ep_by_qp(op.src_qp);
        ucs_status_t status = UCS_OK;
        if ((ep == nullptr) || ep->failed) {
            status = UCS_ERR_CONNECTION_RESET;
        } else {
            if ((op.length > 0) &&
                !read_sync(ep, op.remote_va, op.rkey, op.buffer, op.length)) {
                status = UCS_ERR_IO_ERROR;
            }
            ++iface_.counters().rndv_reads;
            rndv_.acknowledge_read(ep, op.app_ctx, status);
        }
        with([&](auto &e) { e.sw_rndv_done(op.token, status); });
    }
}

void RcHwTags::send_cancel_acks() {
    /* A matched rendezvous still to be read keeps the sender's buffer
     * registered: its FIN (after the READ) is the acknowledgement. A real
     * NIC does not tell: no acknowledgement, the sender keeps a temporary
     * registration until the endpoint goes. */
    if (model_ == nullptr) {
        cancel_acks_.clear();
        return;
    }
    if ((model_->pending_transfers() > 0) || !sw_rndvs_.empty()) {
        return;
    }
    for (const auto &[qp, op] : cancel_acks_) {
        RcEp *ep = iface_.ep_by_qp(qp);
        if ((ep != nullptr) && !ep->failed) {
            rndv_.send_fin(ep, op);
        }
    }
    cancel_acks_.clear();
}

bool RcHwTags::read_sync(RcEp *ep, uint64_t va, uint32_t rkey, void *dst, size_t length) {
    if ((ep == nullptr) || ep->failed || (ep->sq_avail == 0)) {
        return false;
    }
    if (length == 0) {
        return true;
    }
    if (rndv_.fail_this_read()) {
        return false;
    }
    struct ibv_mr *mr = ibv_reg_mr(iface_.pd(), dst, length, IBV_ACCESS_LOCAL_WRITE);
    if (mr == nullptr) {
        ucs_error("tm_rc: registering a %zu-byte receive for the model's READ: %s", length,
                  strerror(errno));
        return false;
    }
    ++iface_.counters().temp_regs;
    struct ibv_sge     sge = {reinterpret_cast<uintptr_t>(dst), static_cast<uint32_t>(length),
                              mr->lkey};
    struct ibv_send_wr wr  = {};
    wr.wr_id               = kSyncReadWrId;
    wr.sg_list             = &sge;
    wr.num_sge             = 1;
    wr.opcode              = IBV_WR_RDMA_READ;
    wr.send_flags          = IBV_SEND_SIGNALED;
    wr.wr.rdma.remote_addr = va;
    wr.wr.rdma.rkey        = rkey;
    if (iface_.post_wr(ep, &wr) != 0) {
        ibv_dereg_mr(mr);
        return false;
    }
    --ep->sq_avail;
    bool          done   = false;
    bool          ok     = false;
    /* Bounded: a READ ends with data or an error within the QP's retry timeout. */
    const time_t deadline = time(nullptr) + 60;
    while (!done && (time(nullptr) < deadline)) {
        struct ibv_wc wcs[16];
        const int     n = ibv_poll_cq(iface_.tx_cq(), 16, wcs);
        for (int i = 0; i < n; ++i) {
            if (wcs[i].wr_id == kSyncReadWrId) {
                done = true;
                ok   = wcs[i].status == IBV_WC_SUCCESS;
                if (!ok) {
                    ucs_diag("tm_rc: the model's rendezvous READ on QP 0x%x: %s", wcs[i].qp_num,
                             ibv_wc_status_str(wcs[i].status));
                }
            } else {
                stashed_tx_.push_back(wcs[i]);
            }
        }
    }
    if (!done) {
        /* The READ may still land: keep the registration (leaked, logged). */
        ucs_error("tm_rc: the model's rendezvous READ on QP 0x%x did not complete",
                  ep->qp->qp_num);
        return false;
    }
    ++ep->sq_avail;
    ibv_dereg_mr(mr);
    if (!ok && !ep->failed) {
        iface_.fail_ep(ep, UCS_ERR_CONNECTION_RESET);
    }
    return ok;
}

void RcHwTags::print_counters(FILE *stream, const char *tl, const std::string &device,
                              unsigned port) const {
    with([&](const auto &e) {
        const auto &hc = e.counters();
        fprintf(stream,
                "%s %s:%u (tag matching %s): posted %lu hw_matches %lu sw_claims %lu "
                "unexpected %lu syncs %lu sync_requests %lu sw_rndv %lu anomalies %lu",
                tl, device.c_str(), port, model_ ? "model" : "TM SRQ",
                (unsigned long)hc.posts, (unsigned long)hc.hw_matches,
                (unsigned long)hc.sw_claims, (unsigned long)hc.unexpected,
                (unsigned long)hc.syncs, (unsigned long)hc.sync_requests,
                (unsigned long)hc.sw_rndv, (unsigned long)hc.anomalies);
    });
    if (model_) {
        fprintf(stream, " model: del_failed %lu rndv_incomplete %lu violations %lu",
                (unsigned long)model_->counters().del_failed,
                (unsigned long)model_->counters().rndv_incomplete,
                (unsigned long)model_->violations());
    }
    fprintf(stream, "\n");
}

}  // namespace ib
}  // namespace uct_tm
