#include "tm_model_harness.h"

#include <cstddef>

namespace uct_tm {
namespace ib {
namespace test {

namespace {
Recv *recv_of(uct_tag_context_t *ctx) { return reinterpret_cast<Recv *>(ctx); }
static_assert(offsetof(Recv, ctx) == 0, "the context is the Recv's first member");
}  // namespace

Harness::Harness(TmModel::Config mc, HwTagEngineConfig ec) : mtu_(mc.mtu) {
    model_.reset(new TmModel(mc));
    TmModel::Fabric fabric;
    fabric.read = f_read;
    fabric.send = f_send;
    fabric.arg  = this;
    model_->set_fabric(fabric);
    HwTagTransport t;
    t.arg              = this;
    t.unexpected_eager = t_eager;
    t.unexpected_rndv  = t_rndv;
    t.no_tag           = t_no_tag;
    t.fin              = t_fin;
    t.rndv_failed      = t_rndv_failed;
    t.sw_rndv          = t_sw_rndv;
    t.orphan           = t_orphan;
    engine_.reset(new HwTagEngine<TmModel>(*model_, ec, t));
    engine_->start();
}

Harness::~Harness() { destroy(); }

void Harness::destroy() {
    engine_.reset();
    model_.reset();
}

std::vector<uint8_t> Harness::pattern(uint64_t seed, size_t n) {
    std::vector<uint8_t> v(n);
    for (size_t i = 0; i < n; ++i) {
        v[i] = static_cast<uint8_t>((seed * 131 + i * 7 + (i >> 8)) & 0xff);
    }
    return v;
}

Recv *Harness::make_recv(size_t size) {
    recvs_.emplace_back(new Recv());
    Recv *r                = recvs_.back().get();
    r->id                  = static_cast<int>(recvs_.size() - 1);
    r->harness             = this;
    r->buffer.assign(size, 0xee);
    r->ctx.tag_consumed_cb = on_consumed;
    r->ctx.completed_cb    = on_completed;
    r->ctx.rndv_cb         = on_rndv;
    return r;
}

ucs_status_t Harness::post(Recv *r, uct_tag_t tag, uct_tag_t mask) {
    uct_iov_t iov{};
    iov.buffer = r->buffer.empty() ? nullptr : r->buffer.data();
    iov.length = r->buffer.size();
    iov.count  = 1;
    return engine_->post(tag, mask, &iov, 1, &r->ctx);
}

void Harness::on_consumed(uct_tag_context_t *ctx) {
    Recv *r = recv_of(ctx);
    ++r->consumed;
    r->harness->events.push_back(r->id);
    if (r->on_consumed != nullptr) {
        (*r->on_consumed)(*r);
    }
}

void Harness::on_completed(uct_tag_context_t *ctx, uct_tag_t stag, uint64_t imm, size_t length,
                           void *, ucs_status_t status) {
    Recv *r = recv_of(ctx);
    if ((r->consumed == 0) && (status != UCS_ERR_CANCELED)) {
        r->consumed_first = false;
    }
    ++r->completed;
    r->stag   = stag;
    r->imm    = imm;
    r->length = length;
    r->status = status;
}

void Harness::on_rndv(uct_tag_context_t *ctx, uct_tag_t stag, const void *header,
                      unsigned header_length, ucs_status_t status, unsigned) {
    Recv *r = recv_of(ctx);
    if (r->consumed == 0) {
        r->consumed_first = false;
    }
    ++r->rndv;
    r->stag   = stag;
    r->status = status;
    r->header.assign(static_cast<const uint8_t *>(header),
                     static_cast<const uint8_t *>(header) + header_length);
}

ucs_status_t Harness::t_eager(void *arg, uint32_t src_qp, uint64_t stag, uint64_t imm, void *data,
                              size_t length) {
    Harness *h = static_cast<Harness *>(arg);
    const uint8_t *p = static_cast<const uint8_t *>(data);
    h->unexpected.push_back(
        Unexpected{Unexpected::kEager, src_qp, stag, imm, {p, p + length}, 0, 0, length, 0});
    h->events.push_back(-1 - static_cast<long>(h->unexpected.size() - 1));
    if (h->eager_return == UCS_INPROGRESS) {
        h->kept_rx.push_back(data);
    }
    return h->eager_return;
}

void Harness::t_rndv(void *arg, uint32_t src_qp, uint64_t stag, const void *header,
                     unsigned header_length, uint64_t remote_va, uint32_t rkey, size_t length) {
    Harness       *h = static_cast<Harness *>(arg);
    const uint8_t *p = static_cast<const uint8_t *>(header);
    h->unexpected.push_back(Unexpected{Unexpected::kRndv, src_qp, stag, 0, {p, p + header_length},
                                       remote_va, rkey, length, 0});
    h->events.push_back(-1 - static_cast<long>(h->unexpected.size() - 1));
}

ucs_status_t Harness::t_no_tag(void *arg, uint32_t src_qp, void *data, size_t length) {
    Harness       *h = static_cast<Harness *>(arg);
    const uint8_t *p = static_cast<const uint8_t *>(data);
    h->unexpected.push_back(
        Unexpected{Unexpected::kNoTag, src_qp, 0, 0, {p, p + length}, 0, 0, length, 0});
    return UCS_OK;
}

void Harness::t_fin(void *arg, uint32_t src_qp, uint32_t app_ctx) {
    Harness *h = static_cast<Harness *>(arg);
    h->unexpected.push_back(Unexpected{Unexpected::kFin, src_qp, 0, 0, {}, 0, 0, 0, app_ctx});
}

void Harness::t_rndv_failed(void *arg, uint32_t src_qp, uint32_t app_ctx) {
    static_cast<Harness *>(arg)->failed_rndvs.emplace_back(src_qp, app_ctx);
}

void Harness::t_sw_rndv(void *arg, const SwRndv &op) {
    static_cast<Harness *>(arg)->sw_rndv_running.push_back(op);
}

void Harness::t_orphan(void *arg, uint64_t token) {
    Harness *h = static_cast<Harness *>(arg);
    h->orphaned.push_back(token);
    for (SwRndv &op : h->sw_rndv_running) {
        if (op.token == token) {
            op.length = 0; /* stop writing into the user's buffer */
        }
    }
}

bool Harness::finish_sw_rndv(ucs_status_t status) {
    if (sw_rndv_running.empty()) {
        return false;
    }
    const SwRndv op = sw_rndv_running.front();
    sw_rndv_running.erase(sw_rndv_running.begin());
    if ((status == UCS_OK) && (op.length > 0) &&
        !f_read(this, op.src_qp, op.remote_va, op.rkey, op.buffer, op.length)) {
        status = UCS_ERR_IO_ERROR;
    }
    if (status != UCS_OK) {
        sw_failed[op.buffer] = op.rkey;
    }
    sw_fins.emplace_back(op.src_qp, op.app_ctx);
    engine_->sw_rndv_done(op.token, status);
    return true;
}

uint64_t Harness::remote_id(uint32_t rkey) const {
    auto     it = remote_.find(rkey);
    uint64_t id = UINT64_MAX;
    if ((it != remote_.end()) && (it->second.size() >= sizeof(id))) {
        memcpy(&id, it->second.data(), sizeof(id));
    }
    return id;
}

bool Harness::f_read(void *arg, uint32_t, uint64_t va, uint32_t rkey, void *dst, size_t len) {
    Harness *h  = static_cast<Harness *>(arg);
    auto     it = h->remote_.find(rkey);
    if (it == h->remote_.end()) {
        return false;
    }
    const uint64_t base = reinterpret_cast<uintptr_t>(it->second.data());
    if ((va < base) || (va + len > base + it->second.size())) {
        return false;
    }
    memcpy(dst, reinterpret_cast<const void *>(static_cast<uintptr_t>(va)), len);
    return true;
}

void Harness::f_send(void *arg, uint32_t dst_qp, const void *msg, size_t len) {
    Harness *h = static_cast<Harness *>(arg);
    TmHeader tmh;
    if (len >= sizeof(tmh)) {
        memcpy(&tmh, msg, sizeof(tmh));
        h->hw_fins.emplace_back(dst_qp, tmh_app_ctx(tmh));
    }
}

void Harness::send_eager(uint32_t src, uint64_t tag, const std::vector<uint8_t> &payload,
                         uint64_t imm) {
    const TmHeader       tmh = make_tmh(TmhOp::kEager, tag, static_cast<uint32_t>(imm >> 32));
    std::vector<uint8_t> msg(sizeof(tmh) + payload.size());
    memcpy(msg.data(), &tmh, sizeof(tmh));
    if (!payload.empty()) {
        memcpy(msg.data() + sizeof(tmh), payload.data(), payload.size());
    }
    /* The sender convention (tm_list.h): multi-packet eagers always carry
     * the immediate. */
    const uint32_t imm32 = static_cast<uint32_t>(imm);
    model_->deliver(src, msg.data(), msg.size(), (imm32 != 0) || (msg.size() > mtu_), imm32);
}

void Harness::send_sw_rndv_request(uint32_t src, uint64_t tag, const std::vector<uint8_t> &header) {
    const TmHeader       tmh = make_rndv_request_tmh(tag);
    std::vector<uint8_t> msg(sizeof(tmh) + header.size());
    memcpy(msg.data(), &tmh, sizeof(tmh));
    if (!header.empty()) {
        memcpy(msg.data() + sizeof(tmh), header.data(), header.size());
    }
    model_->deliver(src, msg.data(), msg.size(), true, 0);
}

void Harness::send_rndv(uint32_t src, uint64_t tag, uint32_t app_ctx,
                        const std::vector<uint8_t> &data, const std::vector<uint8_t> &header) {
    const uint32_t rkey = next_rkey_++;
    remote_[rkey]       = data;
    const uint64_t va   = reinterpret_cast<uintptr_t>(remote_[rkey].data());
    const TmHeader tmh  = make_tmh(TmhOp::kRndv, tag, app_ctx);
    const RndvHeader rvh = make_rvh(va, rkey, static_cast<uint32_t>(data.size()));
    std::vector<uint8_t> msg(sizeof(tmh) + sizeof(rvh) + header.size());
    memcpy(msg.data(), &tmh, sizeof(tmh));
    memcpy(msg.data() + sizeof(tmh), &rvh, sizeof(rvh));
    if (!header.empty()) {
        memcpy(msg.data() + sizeof(tmh) + sizeof(rvh), header.data(), header.size());
    }
    model_->deliver(src, msg.data(), msg.size());
}

void Harness::send_no_tag(uint32_t src, const std::vector<uint8_t> &body) {
    std::vector<uint8_t> msg(1 + body.size());
    msg[0] = static_cast<uint8_t>(TmhOp::kNoTag);
    if (!body.empty()) {
        memcpy(msg.data() + 1, body.data(), body.size());
    }
    model_->deliver(src, msg.data(), msg.size());
}

bool Harness::drain(size_t max_rounds) {
    for (size_t round = 0; round < max_rounds; ++round) {
        const size_t   steps = model_->run_until_idle();
        const unsigned polled = engine_->progress();
        const bool     sw     = finish_sw_rndv();
        if ((steps == 0) && (polled == 0) && !sw && model_->idle() &&
            (model_->pending_completions() == 0)) {
            return true;
        }
    }
    return false;
}

}  // namespace test
}  // namespace ib
}  // namespace uct_tm
