#include "tm_verbs_list.h"

#include <infiniband/tm_types.h>
#include <ucs/debug/log_def.h>

#include <cerrno>
#include <endian.h>
#include <cstddef>
#include <cstring>
#include <new>

namespace uct_tm {
namespace ib {

/* Our wire headers are the verbs ones. */
static_assert(sizeof(TmHeader) == sizeof(ibv_tmh), "TMH size");
static_assert(offsetof(TmHeader, app_ctx_be) == offsetof(ibv_tmh, app_ctx), "TMH app_ctx");
static_assert(offsetof(TmHeader, tag_be) == offsetof(ibv_tmh, tag), "TMH tag");
static_assert(sizeof(RndvHeader) == sizeof(ibv_rvh), "RVH size");
static_assert(offsetof(RndvHeader, rkey_be) == offsetof(ibv_rvh, rkey), "RVH rkey");
static_assert(offsetof(RndvHeader, len_be) == offsetof(ibv_rvh, len), "RVH len");
static_assert(static_cast<int>(TmhOp::kNoTag) == IBV_TMH_NO_TAG &&
                  static_cast<int>(TmhOp::kRndv) == IBV_TMH_RNDV &&
                  static_cast<int>(TmhOp::kFin) == IBV_TMH_FIN &&
                  static_cast<int>(TmhOp::kEager) == IBV_TMH_EAGER,
              "TMH opcodes");

ucs_status_t tm_verbs_status(int err) {
    switch (err) {
    case 0:
        return UCS_OK;
    case EOPNOTSUPP:
    case ENOSYS:
    case EPROTONOSUPPORT:
        return UCS_ERR_UNSUPPORTED;
    case ENOMEM:
        return UCS_ERR_NO_MEMORY;
    case EINVAL:
        return UCS_ERR_INVALID_PARAM;
    default:
        return UCS_ERR_IO_ERROR;
    }
}

ucs_status_t TmVerbsList::query(ibv_context *context, TmCaps *caps) {
    if ((context == nullptr) || (caps == nullptr)) {
        return UCS_ERR_INVALID_PARAM;
    }
    ibv_device_attr_ex attr;
    memset(&attr, 0, sizeof(attr));
    const int err = ibv_query_device_ex(context, nullptr, &attr);
    if (err != 0) {
        return tm_verbs_status(err);
    }
    if ((attr.tm_caps.max_num_tags == 0) || !(attr.tm_caps.flags & IBV_TM_CAP_RC)) {
        return UCS_ERR_UNSUPPORTED;
    }
    caps->max_num_tags = attr.tm_caps.max_num_tags;
    caps->max_ops      = attr.tm_caps.max_ops;
    caps->max_sge      = attr.tm_caps.max_sge;
    caps->max_rndv_hdr = attr.tm_caps.max_rndv_hdr_size;
    return UCS_OK;
}

ucs_status_t TmVerbsList::create(ibv_context *context, ibv_pd *pd, const Config &config,
                                 std::unique_ptr<TmVerbsList> *out) {
    if ((context == nullptr) || (pd == nullptr) || (out == nullptr)) {
        return UCS_ERR_INVALID_PARAM;
    }
    TmCaps       caps;
    ucs_status_t status = query(context, &caps);
    if (status != UCS_OK) {
        return status;
    }
    std::unique_ptr<TmVerbsList> list(new (std::nothrow) TmVerbsList());
    if (!list) {
        return UCS_ERR_NO_MEMORY;
    }

    ibv_cq_init_attr_ex cq_attr;
    memset(&cq_attr, 0, sizeof(cq_attr));
    cq_attr.cqe      = config.cq_len;
    cq_attr.wc_flags = IBV_WC_EX_WITH_BYTE_LEN | IBV_WC_EX_WITH_IMM | IBV_WC_EX_WITH_QP_NUM |
                       IBV_WC_EX_WITH_TM_INFO;
    list->cq_ = ibv_create_cq_ex(context, &cq_attr);
    if (list->cq_ == nullptr) {
        return tm_verbs_status(errno);
    }

    const uint32_t num_tags = (config.max_num_tags < caps.max_num_tags) ? config.max_num_tags
                                                                          : caps.max_num_tags;
    /* ADD and DEL for every tag, and a SYNC (as UCX sizes its command QP). */
    uint32_t max_ops = 2 * num_tags + 2;
    if ((caps.max_ops > 0) && (max_ops > caps.max_ops)) {
        max_ops = caps.max_ops;
    }
    ibv_srq_init_attr_ex srq_attr;
    memset(&srq_attr, 0, sizeof(srq_attr));
    srq_attr.attr.max_wr          = config.srq_len;
    srq_attr.attr.max_sge         = 1;
    srq_attr.srq_type             = IBV_SRQT_TM;
    srq_attr.pd                   = pd;
    srq_attr.cq                   = ibv_cq_ex_to_cq(list->cq_);
    srq_attr.tm_cap.max_num_tags  = num_tags;
    srq_attr.tm_cap.max_ops       = max_ops;
    srq_attr.comp_mask = IBV_SRQ_INIT_ATTR_TYPE | IBV_SRQ_INIT_ATTR_PD | IBV_SRQ_INIT_ATTR_CQ |
                         IBV_SRQ_INIT_ATTR_TM;
    list->srq_ = ibv_create_srq_ex(context, &srq_attr);
    if (list->srq_ == nullptr) {
        status = tm_verbs_status(errno);
        ucs_debug("tm verbs: TM SRQ not created: %s", ucs_status_string(status));
        return status; /* the destructor frees the CQ */
    }
    list->caps_              = caps;
    list->caps_.max_num_tags = srq_attr.tm_cap.max_num_tags;
    list->caps_.max_ops      = srq_attr.tm_cap.max_ops;
    list->caps_.max_sge      = 1;
    list->signaled_.assign(list->caps_.max_ops + 1, 0);
    *out = std::move(list);
    return UCS_OK;
}

TmVerbsList::~TmVerbsList() {
    if (srq_ != nullptr) {
        ibv_destroy_srq(srq_);
    }
    if (cq_ != nullptr) {
        ibv_destroy_cq(ibv_cq_ex_to_cq(cq_));
    }
}

ucs_status_t TmVerbsList::post_op(TmOp &op) {
    if (ops_posted_ - ops_retired_ >= caps_.max_ops) {
        return UCS_ERR_NO_RESOURCE;
    }
    ibv_ops_wr wr;
    ibv_sge    sge;
    memset(&wr, 0, sizeof(wr));
    wr.wr_id             = op.wr_id;
    wr.flags             = ((op.flags & kTmOpSignaled) ? IBV_OPS_SIGNALED : 0) |
                           ((op.flags & kTmOpSyncCount) ? IBV_OPS_TM_SYNC : 0);
    wr.tm.unexpected_cnt = op.unexpected_cnt;
    switch (op.opcode) {
    case TmOpcode::kAdd:
        wr.opcode            = IBV_WR_TAG_ADD;
        wr.tm.add.recv_wr_id = op.recv_wr_id;
        wr.tm.add.tag        = op.tag;
        wr.tm.add.mask       = op.mask;
        if (op.has_sge) {
            sge.addr             = reinterpret_cast<uintptr_t>(op.sge.addr);
            sge.length           = op.sge.length;
            sge.lkey             = op.sge.lkey;
            wr.tm.add.sg_list    = &sge;
            wr.tm.add.num_sge    = 1;
        }
        break;
    case TmOpcode::kDel:
        wr.opcode    = IBV_WR_TAG_DEL;
        wr.tm.handle = op.handle;
        break;
    case TmOpcode::kSync:
        wr.opcode = IBV_WR_TAG_SYNC;
        break;
    default:
        return UCS_ERR_INVALID_PARAM;
    }
    ibv_ops_wr *bad = nullptr;
    const int   err = ibv_post_srq_ops(srq_, &wr, &bad);
    if (err != 0) {
        /* ENOMEM on ADD: the provider's tag list is full. */
        return ((err == ENOMEM) && (op.opcode == TmOpcode::kAdd)) ? UCS_ERR_EXCEEDS_LIMIT
                                                                  : tm_verbs_status(err);
    }
    if (op.opcode == TmOpcode::kAdd) {
        op.handle = wr.tm.handle;
    }
    if (op.flags & kTmOpSignaled) {
        signaled_[(signaled_head_ + signaled_count_) % signaled_.size()] = ops_posted_;
        ++signaled_count_;
    }
    ++ops_posted_;
    return UCS_OK;
}

ucs_status_t TmVerbsList::post_recv(uint64_t wr_id, const TmSge &sge) {
    ibv_sge      s{reinterpret_cast<uintptr_t>(sge.addr), sge.length, sge.lkey};
    ibv_recv_wr  wr;
    ibv_recv_wr *bad = nullptr;
    memset(&wr, 0, sizeof(wr));
    wr.wr_id   = wr_id;
    wr.sg_list = &s;
    wr.num_sge = 1;
    return tm_verbs_status(ibv_post_srq_recv(srq_, &wr, &bad));
}

namespace {

TmCqeStatus map_status(ibv_wc_status status) {
    switch (status) {
    case IBV_WC_SUCCESS:
        return TmCqeStatus::kSuccess;
    case IBV_WC_TM_ERR:
        return TmCqeStatus::kTmErr;
    case IBV_WC_TM_RNDV_INCOMPLETE:
        return TmCqeStatus::kRndvIncomplete;
    case IBV_WC_LOC_LEN_ERR:
        return TmCqeStatus::kLengthError;
    default:
        return TmCqeStatus::kError;
    }
}

}  // namespace

unsigned TmVerbsList::poll(TmCompletion *out, unsigned max) {
    if (max == 0) {
        return 0;
    }
    ibv_poll_cq_attr attr;
    memset(&attr, 0, sizeof(attr));
    int err = ibv_start_poll(cq_, &attr);
    if (err != 0) {
        return 0; /* ENOENT: empty */
    }
    unsigned n = 0;
    do {
        TmCompletion &c = out[n];
        c               = TmCompletion();
        c.wr_id         = cq_->wr_id;
        c.status        = map_status(cq_->status);
        const unsigned flags = ibv_wc_read_wc_flags(cq_);
        switch (ibv_wc_read_opcode(cq_)) {
        case IBV_WC_TM_ADD:
            c.opcode = TmCqeOpcode::kAdd;
            break;
        case IBV_WC_TM_DEL:
            c.opcode = TmCqeOpcode::kDel;
            break;
        case IBV_WC_TM_SYNC:
            c.opcode = TmCqeOpcode::kSync;
            break;
        case IBV_WC_TM_NO_TAG:
            c.opcode = TmCqeOpcode::kNoTag;
            break;
        case IBV_WC_TM_RECV:
            c.opcode = (flags & (IBV_WC_TM_MATCH | IBV_WC_TM_DATA_VALID)) ? TmCqeOpcode::kTmRecv
                                                                          : TmCqeOpcode::kRecv;
            break;
        default: /* IBV_WC_RECV: unexpected, in an untagged buffer */
            c.opcode = TmCqeOpcode::kRecv;
            break;
        }
        if ((c.opcode == TmCqeOpcode::kAdd) || (c.opcode == TmCqeOpcode::kDel) ||
            (c.opcode == TmCqeOpcode::kSync)) {
            if (signaled_count_ > 0) {
                ops_retired_ = signaled_[signaled_head_] + 1;
                signaled_head_ = (signaled_head_ + 1) % signaled_.size();
                --signaled_count_;
            }
        } else {
            c.byte_len = ibv_wc_read_byte_len(cq_);
            c.src_qp   = ibv_wc_read_qp_num(cq_);
            if (flags & IBV_WC_WITH_IMM) {
                c.flags |= kTmCqeWithImm;
                c.imm = be32toh(ibv_wc_read_imm_data(cq_));
            }
        }
        if (flags & IBV_WC_TM_SYNC_REQ) {
            c.flags |= kTmCqeSyncReq;
        }
        if (flags & IBV_WC_TM_DATA_VALID) {
            c.flags |= kTmCqeDataValid;
        }
        if ((c.opcode == TmCqeOpcode::kTmRecv) && (flags & IBV_WC_TM_DATA_VALID) &&
            !(flags & (IBV_WC_TM_MATCH | IBV_WC_WITH_IMM))) {
            c.flags |= kTmCqeRndv; /* inferred: multi-packet eagers carry an immediate */
        }
        if (flags & IBV_WC_TM_MATCH) {
            c.flags |= kTmCqeMatch;
            ibv_wc_tm_info info;
            ibv_wc_read_tm_info(cq_, &info);
            c.tag  = info.tag;
            c.priv = info.priv;
        }
        ++n;
    } while ((n < max) && (ibv_next_poll(cq_) == 0));
    ibv_end_poll(cq_);
    return n;
}

}  // namespace ib
}  // namespace uct_tm
