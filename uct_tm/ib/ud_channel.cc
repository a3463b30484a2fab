#include "ud_channel.h"

#include <ucs/debug/log_def.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>

namespace uct_tm {
namespace ib {

UdChannel::~UdChannel() {
    for (const Ah &a : ahs_) {
        ibv_destroy_ah(a.ah);
    }
    if (qp_ != nullptr) {
        ibv_destroy_qp(qp_);
    }
    if (cq_ != nullptr) {
        ibv_destroy_cq(cq_);
    }
    if (mr_ != nullptr) {
        ibv_dereg_mr(mr_);
    }
    free(bufs_);
}

ucs_status_t UdChannel::open(struct ibv_pd *pd, uint8_t port, int gid_index, unsigned depth) {
    pd_        = pd;
    port_      = port;
    gid_index_ = gid_index;
    depth_     = depth;
    const size_t bytes = size_t{2} * depth * kSlot;
    bufs_ = static_cast<char *>(calloc(1, bytes));
    if (bufs_ == nullptr) {
        return UCS_ERR_NO_MEMORY;
    }
    mr_ = ibv_reg_mr(pd, bufs_, bytes, IBV_ACCESS_LOCAL_WRITE);
    cq_ = ibv_create_cq(pd->context, static_cast<int>(2 * depth), nullptr, nullptr, 0);
    if ((mr_ == nullptr) || (cq_ == nullptr)) {
        ucs_error("tm_dc: connection channel buffers or CQ: %s", strerror(errno));
        return UCS_ERR_IO_ERROR;
    }
    struct ibv_qp_init_attr qa = {};
    qa.send_cq          = cq_;
    qa.recv_cq          = cq_;
    qa.qp_type          = IBV_QPT_UD;
    qa.cap.max_send_wr  = depth;
    qa.cap.max_recv_wr  = depth;
    qa.cap.max_send_sge = 1;
    qa.cap.max_recv_sge = 1;
    qp_ = ibv_create_qp(pd, &qa);
    if (qp_ == nullptr) {
        ucs_error("tm_dc: UD QP for connections: %s", strerror(errno));
        return UCS_ERR_IO_ERROR;
    }
    struct ibv_qp_attr attr = {};
    attr.qp_state   = IBV_QPS_INIT;
    attr.pkey_index = 0;
    attr.port_num   = port;
    attr.qkey       = kQkey;
    if (ibv_modify_qp(qp_, &attr, IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT | IBV_QP_QKEY) != 0) {
        ucs_error("tm_dc: UD QP to INIT: %s", strerror(errno));
        return UCS_ERR_IO_ERROR;
    }
    for (uint32_t i = 0; i < depth; ++i) {
        post_recv(i);
        free_tx_.push_back(i);
    }
    attr          = {};
    attr.qp_state = IBV_QPS_RTR;
    if (ibv_modify_qp(qp_, &attr, IBV_QP_STATE) != 0) {
        ucs_error("tm_dc: UD QP to RTR: %s", strerror(errno));
        return UCS_ERR_IO_ERROR;
    }
    attr          = {};
    attr.qp_state = IBV_QPS_RTS;
    attr.sq_psn   = 0;
    if (ibv_modify_qp(qp_, &attr, IBV_QP_STATE | IBV_QP_SQ_PSN) != 0) {
        ucs_error("tm_dc: UD QP to RTS: %s", strerror(errno));
        return UCS_ERR_IO_ERROR;
    }
    return UCS_OK;
}

void UdChannel::post_recv(uint32_t i) {
    struct ibv_sge     sge = {reinterpret_cast<uintptr_t>(rx_slot(i)), static_cast<uint32_t>(kSlot),
                              mr_->lkey};
    struct ibv_recv_wr wr  = {};
    wr.wr_id   = i;
    wr.sg_list = &sge;
    wr.num_sge = 1;
    struct ibv_recv_wr *bad = nullptr;
    if (ibv_post_recv(qp_, &wr, &bad) != 0) {
        ucs_error("tm_dc: reposting a connection-channel receive: %s", strerror(errno));
    }
}

struct ibv_ah *UdChannel::ah_for(const DeviceAddress &to) {
    for (const Ah &a : ahs_) {
        if (memcmp(&a.to, &to, sizeof(to)) == 0) {
            return a.ah;
        }
    }
    struct ibv_ah_attr attr = peer_ah_attr(to, port_, gid_index_);
    struct ibv_ah     *ah   = ibv_create_ah(pd_, &attr);
    if (ah == nullptr) {
        ucs_error("tm_dc: address handle for a peer: %s", strerror(errno));
        return nullptr;
    }
    ahs_.push_back(Ah{to, ah});
    return ah;
}

ucs_status_t UdChannel::send(const DeviceAddress &to, uint32_t qpn, const void *msg, size_t len) {
    if (len > kMaxDatagram) {
        return UCS_ERR_EXCEEDS_LIMIT;
    }
    if (free_tx_.empty()) {
        return UCS_ERR_NO_RESOURCE;
    }
    struct ibv_ah *ah = ah_for(to);
    if (ah == nullptr) {
        return UCS_ERR_UNREACHABLE;
    }
    const uint32_t slot = free_tx_.back();
    memcpy(tx_slot(slot), msg, len);
    struct ibv_sge     sge = {reinterpret_cast<uintptr_t>(tx_slot(slot)), static_cast<uint32_t>(len),
                              mr_->lkey};
    struct ibv_send_wr wr  = {};
    wr.wr_id             = slot;
    wr.sg_list           = &sge;
    wr.num_sge           = 1;
    wr.opcode            = IBV_WR_SEND;
    wr.send_flags        = IBV_SEND_SIGNALED;
    wr.wr.ud.ah          = ah;
    wr.wr.ud.remote_qpn  = qpn;
    wr.wr.ud.remote_qkey = kQkey;
    struct ibv_send_wr *bad = nullptr;
    const int           rc  = ibv_post_send(qp_, &wr, &bad);
    if (rc != 0) {
        ucs_error("tm_dc: connection datagram: %s", strerror(rc));
        return UCS_ERR_IO_ERROR;
    }
    free_tx_.pop_back();
    return UCS_OK;
}

}  // namespace ib
}  // namespace uct_tm
