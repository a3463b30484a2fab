/*
 * tm_rc rendezvous in software: tag_rndv_zcopy advertises the sender's
 * buffer (ibv_rvh: address, rkey, length) in a RNDV message; a receiver that
 * matches it reads the buffer with RDMA READ after the arrival batch and
 * answers with a FIN that completes the send. A cancelled send tells the
 * receiver and keeps its buffer registered until that FIN. The keepalive
 * and the QP state checks find peers that fail while sends wait.
 */
#include "rc_rndv.h"

#include "rc_config.h"
#include "rc_iface.h"

#include "common/alloc_status.h"
#include "base/clock.h"
#include "base/completion.h"
#include "common/ucs_assert.h"
#include "tag/uct_iov.h"

#include <ucs/debug/log_def.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <ctime>
#include <new>

namespace uct_tm {
namespace ib {
namespace {

/* check_qps(): how often a QP's state is queried (a system call) while
 * rendezvous sends wait on it; the bound on noticing a QP the device failed. */
constexpr uint64_t kQpCheckIntervalNs = 100 * 1000 * 1000;

/* Rendezvous operation ids travel in app_ctx: slot index and a generation. */
constexpr uint32_t kRndvIndexBits = 20;
constexpr uint32_t kRndvIndexMask = (1u << kRndvIndexBits) - 1;

uint32_t rndv_id(uint32_t index, uint32_t gen) { return (gen << kRndvIndexBits) | index; }

}  // namespace

ucs_status_t RcRendezvous::init(const RcConfig &config) {
    fail_read_          = config.fail_read;
    corrupt_rkey_       = config.corrupt_rkey;
    keepalive_interval_       = seconds_to_ns(config.keepalive_interval);
    const ucs_status_t status = alloc_status([&] {
        deferred_reads_.reserve(config.rndv_ops);
        sends_.resize(config.rndv_ops);
        recvs_.resize(config.rndv_ops);
        free_sends_.reserve(config.rndv_ops);
        free_recvs_.reserve(config.rndv_ops);
    });
    if (status != UCS_OK) {
        return status;
    }
    for (uint32_t i = config.rndv_ops; i-- > 0;) {
        free_sends_.push_back(i);
        free_recvs_.push_back(i);
    }
    return UCS_OK;
}

RcRendezvous::~RcRendezvous() {
    for (RndvSend &s : sends_) {
        if (s.temp_mr != nullptr) {
            ibv_dereg_mr(s.temp_mr);
        }
    }
}

/* ---- sender ------------------------------------------------------------------------------- */

ucs_status_ptr_t RcRendezvous::send(RcEp *ep, uct_tag_t tag, const void *header,
                                    unsigned header_length, const uct_iov_t *iov, size_t iovcnt,
                                    uct_completion_t *comp) {
    size_t       length;
    ucs_status_t status = check_iov(iov, iovcnt, IovLimits{1, kMaxZcopy}, &length);
    if (status != UCS_OK) {
        return UCS_STATUS_PTR(status);
    }
    if ((header_length > 0) && (header == nullptr)) {
        return UCS_STATUS_PTR(UCS_ERR_INVALID_PARAM);
    }
    if (header_length > iface_.max_rndv_hdr()) {
        return UCS_STATUS_PTR(UCS_ERR_EXCEEDS_LIMIT);
    }
    /* No entry: a message of no bytes. */
    void *const     buffer = (iovcnt > 0) ? iov->buffer : nullptr;
    const uct_mem_h memh   = (iovcnt > 0) ? iov->memh : UCT_MEM_HANDLE_NULL;
    status = iface_.tx_ready(ep, true);
    if (status != UCS_OK) {
        return UCS_STATUS_PTR(status);
    }
    if (free_sends_.empty()) {
        return UCS_STATUS_PTR(UCS_ERR_NO_RESOURCE);
    }
    struct ibv_mr *mr      = mr_of(memh);
    struct ibv_mr *temp_mr = nullptr;
    if ((mr == nullptr) && (length > 0)) {
        temp_mr = ibv_reg_mr(iface_.pd(), buffer, length, IBV_ACCESS_REMOTE_READ);
        if (temp_mr == nullptr) {
            ucs_error("tm_rc: registering a rendezvous buffer of %zu bytes: %s", length,
                      strerror(errno));
            return UCS_STATUS_PTR(UCS_ERR_IO_ERROR);
        }
        ++iface_.counters().temp_regs;
        mr = temp_mr;
    }
    const uint32_t index = free_sends_.back();
    RndvSend      &s     = sends_[index];
    ucs_assertv(!s.active && !s.retired, "rendezvous send %u on the free list is in use", index);
    struct ibv_rvh rvh;
    rvh.va   = htobe64(reinterpret_cast<uintptr_t>(buffer));
    uint32_t rkey = (mr != nullptr) ? mr->rkey : 0;
    if (ucs_unlikely(corrupt_rkey_ != 0) && (++sends_started_ == corrupt_rkey_)) {
        /* The key byte of the rkey (rxe and mlx5 alike): same MR index, a
         * key the device refuses. */
        rkey ^= 0xffu;
        ucs_diag("tm_rc: rendezvous send %u advertises a corrupted rkey (UCX_TM_RC_CORRUPT_RKEY)",
                 sends_started_);
    }
    rvh.rkey = htobe32(rkey);
    rvh.len  = htobe32(static_cast<uint32_t>(length));
    char prefix[sizeof(rvh) + 0];
    memcpy(prefix, &rvh, sizeof(rvh));
    /* header + rvh + the layer above's header, copied */
    const uct_iov_t hdr_iov = {const_cast<void *>(header), header_length, UCT_MEM_HANDLE_NULL, 0, 1};
    status = iface_.send(ep, tag_header(IBV_TMH_RNDV, tag, rndv_id(index, s.gen)), prefix,
                         sizeof(prefix), &hdr_iov, 1);
    if (status != UCS_OK) {
        if (temp_mr != nullptr) {
            ibv_dereg_mr(temp_mr);
        }
        return UCS_STATUS_PTR(status);
    }
    free_sends_.pop_back();
    ++ep->rndv_sends;
    s.active  = true;
    s.comp    = comp;
    s.ep      = ep;
    s.temp_mr = temp_mr;
    return &s;
}

ucs_status_t RcRendezvous::cancel(void *op) {
    auto *s = static_cast<RndvSend *>(op);
    if ((sends_.empty()) || (s < sends_.data()) ||
        (s >= sends_.data() + sends_.size()) || !s->active) {
        return UCS_ERR_INVALID_PARAM;
    }
    const uint32_t index = static_cast<uint32_t>(s - sends_.data());
    RcEp          *ep    = s->ep;
    s->active            = false;
    s->comp              = nullptr;
    /* Tell the receiver; until it acknowledges, a READ it already started
     * must still find the buffer registered. */
    const ucs_status_t status =
        ep->failed ? UCS_ERR_CONNECTION_RESET
                   : iface_.send_urgent(ep, rndv_cancel_header(rndv_id(index, s->gen)));
    if (status == UCS_OK) {
        s->retired = true;
    } else {
        /* No receiver will read it any more (failed endpoint), or the queue is
         * full: keep the registration until the endpoint goes. */
        s->retired = s->temp_mr != nullptr;
        if (!s->retired) {
            release_send(index);
        }
    }
    return UCS_OK;
}

void RcRendezvous::receive_fin(uint32_t op) {
    const uint32_t index = op & kRndvIndexMask;
    if (index >= sends_.size()) {
        ++iface_.counters().dropped;
        return;
    }
    RndvSend &s = sends_[index];
    if (!(s.active || s.retired) || (rndv_id(index, s.gen) != op)) {
        return; /* a second acknowledgement of a cancel */
    }
    if (s.ep != nullptr) {
        s.ep->probe_due_ns = 0; /* heard from: the keepalive starts over */
    }
    end_send(index, UCS_OK);
}

void RcRendezvous::release_send(uint32_t index) {
    RndvSend &s = sends_[index];
    ucs_assertv((s.active || s.retired) && !(s.active && s.retired),
                "releasing rendezvous send %u: active %d retired %d", index, s.active, s.retired);
    if (s.temp_mr != nullptr) {
        ibv_dereg_mr(s.temp_mr);
        s.temp_mr = nullptr;
    }
    if ((s.ep != nullptr) && (--s.ep->rndv_sends == 0)) {
        s.ep->probe_due_ns = 0;
    }
    s.active  = false;
    s.retired = false;
    s.comp    = nullptr;
    s.ep      = nullptr;
    ++s.gen;
    free_sends_.push_back(index);
}

void RcRendezvous::end_send(uint32_t index, ucs_status_t status) {
    uct_completion_t *comp = sends_[index].active ? sends_[index].comp : nullptr;
    release_send(index);
    complete(comp, status);
}

void RcRendezvous::fail_ep(RcEp *ep, ucs_status_t status) {
    for (uint32_t i = 0; i < sends_.size(); ++i) {
        if ((sends_[i].active || sends_[i].retired) && (sends_[i].ep == ep)) {
            end_send(i, status);
        }
    }
}

void RcRendezvous::cancel_ep(RcEp *ep) { fail_ep(ep, UCS_ERR_CANCELED); }

void RcRendezvous::forget_ep(RcEp *ep) {
    for (uint32_t i = 0; i < sends_.size(); ++i) {
        if ((sends_[i].active || sends_[i].retired) && (sends_[i].ep == ep)) {
            release_send(i);
        }
    }
    for (RndvRecv &r : recvs_) {
        if (r.active && (r.ep == ep)) {
            r.ep = nullptr; /* no FIN to send */
        }
    }
}

/* ---- receiver ----------------------------------------------------------------------------- */

void RcRendezvous::receive_rts(RcEp *ep, char *data, size_t length, uct_tag_t tag, uint32_t op) {
    if (ucs_unlikely(!iface_.tag_enabled() || (length < sizeof(struct ibv_rvh)))) {
        ++iface_.counters().dropped;
        return;
    }
    struct ibv_rvh rvh;
    memcpy(&rvh, data, sizeof(rvh));
    const uint64_t va       = be64toh(rvh.va);
    const uint32_t rkey     = be32toh(rvh.rkey);
    const size_t   msg_len  = be32toh(rvh.len);
    const char    *hdr      = data + sizeof(rvh);
    const unsigned hdr_len  = static_cast<unsigned>(length - sizeof(rvh));
    TagEngine::Recv *recv   = iface_.tags().match(tag);
    if (recv == nullptr) {
        const PackedRkey packed = pack_rkey(rkey, va, msg_len);
        iface_.unexpected_rndv(tag, hdr, hdr_len, va, msg_len, &packed);
        return;
    }
    if ((ep == nullptr) || ep->failed || free_recvs_.empty()) {
        iface_.tags().complete(recv, tag, 0, msg_len,
                               free_recvs_.empty() ? UCS_ERR_NO_RESOURCE
                                                   : UCS_ERR_CONNECTION_RESET);
        return;
    }
    const uint32_t index = free_recvs_.back();
    free_recvs_.pop_back();
    RndvRecv &r = recvs_[index];
    ucs_assertv(!r.active, "rendezvous receive %u on the free list is active", index);
    r        = RndvRecv{};
    r.active = true;
    r.recv   = recv;
    r.ep     = ep;
    r.tag    = tag;
    r.length = msg_len;
    r.op     = op;
    r.va     = va;
    r.rkey   = rkey;
    /* READs start after this batch of arrivals: a cancel that came in the
     * same batch withdraws the receive before anything is read. */
    deferred_reads_.push_back(index);
}

void RcRendezvous::start_deferred_reads() {
    for (size_t i = 0; i < deferred_reads_.size(); ++i) {
        const uint32_t index = deferred_reads_[i];
        if (recvs_[index].active && !recvs_[index].started) {
            start_read(index);
        }
    }
    deferred_reads_.clear();
}

void RcRendezvous::start_read(uint32_t index) {
    RndvRecv &r = recvs_[index];
    ucs_assertv(r.active && !r.started, "rendezvous receive %u: active %d started %d", index,
                r.active, r.started);
    r.started   = true;
    RcEp *ep    = r.ep;
    if ((ep == nullptr) || ep->failed || !iface_.tags().wanted(r.recv)) {
        r.status = UCS_ERR_CONNECTION_RESET;
        finish_recv(index);
        return;
    }
    ++iface_.counters().rndv_reads;
    if (fail_this_read()) {
        r.status = UCS_ERR_IO_ERROR;
        finish_recv(index);
        return;
    }
    struct iovec local[kMaxRecvIov];
    const size_t n      = iface_.tags().iovecs(r.recv, r.length, local);
    uint64_t     remote = r.va;
    for (size_t i = 0; i < n; ++i) {
        if (local[i].iov_len == 0) {
            continue;
        }
        if (!iface_.tx_room(ep)) {
            r.status = UCS_ERR_NO_RESOURCE;
            break;
        }
        /* The posted buffers came without their memh: register for this read. */
        struct ibv_mr *mr = ibv_reg_mr(iface_.pd(), local[i].iov_base, local[i].iov_len,
                                       IBV_ACCESS_LOCAL_WRITE);
        if (mr == nullptr) {
            r.status = UCS_ERR_IO_ERROR;
            break;
        }
        ++iface_.counters().temp_regs;
        struct ibv_sge     sge = {reinterpret_cast<uintptr_t>(local[i].iov_base),
                                  static_cast<uint32_t>(local[i].iov_len), mr->lkey};
        struct ibv_send_wr wr  = {};
        wr.sg_list             = &sge;
        wr.num_sge             = 1;
        wr.opcode              = IBV_WR_RDMA_READ;
        wr.wr.rdma.remote_addr = remote;
        wr.wr.rdma.rkey        = r.rkey;
        TxOp read;
        read.type    = TxOp::Type::kRndvRead;
        read.rndv    = index;
        read.temp_mr = mr;
        if (iface_.post_send(ep, &wr, read) != UCS_OK) {
            r.status = UCS_ERR_IO_ERROR;
            break;
        }
        ++r.reads;
        remote += local[i].iov_len;
    }
    if (r.reads == 0) {
        finish_recv(index);
    }
}

void RcRendezvous::receive_cancel(RcEp *ep, uint32_t op) {
    for (uint32_t i = 0; i < recvs_.size(); ++i) {
        RndvRecv &r = recvs_[i];
        if (!r.active || (r.ep != ep) || (r.op != op)) {
            continue;
        }
        if (r.started) {
            return; /* reading: its FIN acknowledges the cancel */
        }
        r.status = UCS_ERR_CANCELED;
        r.length = 0;
        finish_recv(i); /* sends the FIN */
        return;
    }
    /* Not matched here (delivered to rndv_cb, or already finished): just
     * acknowledge, so the sender may release the buffer. */
    if ((ep != nullptr) && !ep->failed) {
        send_fin(ep, op);
    }
}

void RcRendezvous::read_done(uint32_t index, ucs_status_t status) {
    RndvRecv &r = recvs_[index];
    ucs_assertv(r.active && r.started && (r.reads > 0), "READ of rendezvous receive %u done: "
                "active %d started %d, %u READs due", index, r.active, r.started, r.reads);
    if (status != UCS_OK) {
        r.status = status;
    }
    if (--r.reads == 0) {
        finish_recv(index);
    }
}

void RcRendezvous::finish_recv(uint32_t index) {
    RndvRecv &r = recvs_[index];
    ucs_assertv(r.active && (r.reads == 0), "finishing rendezvous receive %u: active %d, %u "
                "READs due", index, r.active, r.reads);
    if ((r.ep != nullptr) && !r.ep->failed) {
        acknowledge_read(r.ep, r.op, r.status);
    }
    r.active = false;
    free_recvs_.push_back(index);
    iface_.tags().complete(r.recv, r.tag, 0, r.length, r.status);
}

void RcRendezvous::wait_reads(const TagEngine::Recv *recv) {
    for (uint32_t i = 0; i < recvs_.size(); ++i) {
        const RndvRecv &r = recvs_[i];
        if (!r.active || (r.recv != recv)) {
            continue;
        }
        if (!r.started) {
            recvs_[i].status = UCS_ERR_CANCELED; /* nothing read yet */
            recvs_[i].length = 0;
            finish_recv(i);
            return;
        }
        /* Bounded: a READ ends with data or with an error within the QP's
         * retry timeout. */
        const time_t deadline = time(nullptr) + 60;
        while (r.active && (r.recv == recv) && (time(nullptr) < deadline)) {
            iface_.poll_tx();
        }
        if (r.active && (r.recv == recv)) {
            ucs_error("tm_rc: a rendezvous READ into a cancelled receive did not finish");
        }
        return;
    }
}

/* ---- acknowledgements ---------------------------------------------------------------------- */

ucs_status_t RcRendezvous::send_fin(RcEp *ep, uint32_t op) {
    /* The FIN must go even when the queue is short: it may take the slot
     * the layer above would have used next (it then gets NO_RESOURCE). */
    const ucs_status_t status = iface_.send_urgent(ep, tag_header(IBV_TMH_FIN, 0, op));
    if (status != UCS_OK) {
        ucs_error("tm_rc: cannot send a rendezvous FIN: %s (the sender's operation stays pending)",
                  ucs_status_string(status));
    }
    return status;
}

void RcRendezvous::acknowledge_read(RcEp *ep, uint32_t op, ucs_status_t read_status) {
    if (read_status == UCS_ERR_IO_ERROR) {
        fail_recv(ep, op); /* a FIN would complete the sender's op OK */
    } else {
        send_fin(ep, op); /* read, truncated or cancelled: the sender's buffer is free */
    }
}

void RcRendezvous::receive_failed(RcEp *ep, uint32_t op) {
    /* As rc_mlx5 after a remote access error on its rendezvous: the
     * operation and every other on this connection complete with the error. */
    ucs_diag("tm_rc: the receiver of rendezvous 0x%x could not read it: endpoint failed", op);
    if ((ep != nullptr) && !ep->failed) {
        iface_.fail_ep(ep, UCS_ERR_IO_ERROR);
    }
}

void RcRendezvous::fail_recv(RcEp *ep, uint32_t op) {
    if ((ep == nullptr) || ep->failed) {
        return; /* the QP is in error already (a real READ error fails it) */
    }
    const ucs_status_t status = iface_.send_urgent(ep, rndv_failed_header(op));
    if (status != UCS_OK) {
        ucs_error("tm_rc: cannot tell the sender its rendezvous failed: %s",
                  ucs_status_string(status));
    }
    iface_.fail_ep(ep, UCS_ERR_IO_ERROR);
}

bool RcRendezvous::fail_this_read() {
    if (ucs_likely(fail_read_ == 0) || (++reads_started_ != fail_read_)) {
        return false;
    }
    ucs_diag("tm_rc: rendezvous READ %u fails (UCX_TM_RC_FAIL_READ)", reads_started_);
    return true;
}

/* ---- failures of the peer's QP ------------------------------------------------------------ */

void RcRendezvous::check_qps() {
    const uint64_t now = monotonic_ns();
    if (now < next_qp_check_ns_) {
        return;
    }
    next_qp_check_ns_ = now + kQpCheckIntervalNs;
    RcEp *in_error[16];
    size_t n = 0;
    const std::vector<RcEp *> &eps = iface_.eps();
    for (RcEp *ep : eps) {
        if ((ep->rndv_sends == 0) || ep->failed || !ep->connected || (n == 16)) {
            continue;
        }
        keepalive(ep, now);
        struct ibv_qp_attr      attr = {};
        struct ibv_qp_init_attr init = {};
        if ((ibv_query_qp(ep->qp, &attr, IBV_QP_STATE, &init) == 0) &&
            (attr.qp_state == IBV_QPS_ERR)) {
            in_error[n++] = ep;
        }
    }
    /* The error handler may destroy endpoints: failed after the scan. */
    for (size_t i = 0; i < n; ++i) {
        if (std::find(eps.begin(), eps.end(), in_error[i]) != eps.end() &&
            !in_error[i]->failed) {
            ucs_diag("tm_rc: QP 0x%x went to the error state with rendezvous sends outstanding: "
                     "endpoint failed", in_error[i]->qp->qp_num);
            iface_.fail_ep(in_error[i], UCS_ERR_IO_ERROR);
        }
    }
}

void RcRendezvous::keepalive(RcEp *ep, uint64_t now) {
    if (ep->probe_due_ns == 0) { /* waiting since the last check at most */
        ep->probe_due_ns = deadline_after(now, keepalive_interval_);
        return;
    }
    if ((now < ep->probe_due_ns) || (ep->outstanding > 0)) {
        return; /* heard from recently, or a send in flight fails if the peer is gone */
    }
    ep->probe_due_ns = deadline_after(now, keepalive_interval_);
    (void)iface_.post_probe(ep);
}

}  // namespace ib
}  // namespace uct_tm
