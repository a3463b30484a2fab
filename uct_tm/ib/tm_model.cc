#include "tm_model.h"

#include <ucs/debug/log_def.h>

#include <algorithm>
#include <cstring>

namespace uct_tm {
namespace ib {

TmModel::TmModel(const Config &config) : config_(config) {
    config_.caps.max_sge = 1;
    entries_.resize(config_.caps.max_num_tags);
    for (uint32_t i = 0; i < config_.caps.max_num_tags; ++i) {
        free_handles_.push_back(i);
    }
}

uint32_t TmModel::allocate_handle() {
    const uint32_t h = free_handles_.front();
    free_handles_.pop_front();
    ++held_;
    return h;
}

void TmModel::release_refs(int64_t entry, int32_t n) {
    if ((entry < 0) || (n == 0)) {
        return;
    }
    Entry &e = entries_[static_cast<size_t>(entry)];
    if ((e.state == EntryState::kFree) || (e.refs < n)) {
        ++violations_; /* the provider would corrupt its tag list here */
        ucs_error("tm model: handle %ld released past its references", static_cast<long>(entry));
        return;
    }
    e.refs -= n;
    if (e.refs == 0) {
        if ((e.state == EntryState::kListed) || (e.state == EntryState::kPosted)) {
            /* Software let go of a tag the engine still holds (unsignaled DEL
             * not yet executed, then the handle reused): a provider bug class. */
            ++violations_;
            unlist(static_cast<uint32_t>(entry));
        }
        e = Entry();
        free_handles_.push_back(static_cast<uint32_t>(entry));
        --held_;
    }
}

ucs_status_t TmModel::post_op(TmOp &op) {
    if (op_posted_ - op_retired_ >= config_.caps.max_ops) {
        return UCS_ERR_NO_RESOURCE;
    }
    const bool signaled = (op.flags & kTmOpSignaled) != 0;
    switch (op.opcode) {
    case TmOpcode::kAdd: {
        if (op.has_sge && (op.sge.addr == nullptr) && (op.sge.length > 0)) {
            return UCS_ERR_INVALID_PARAM;
        }
        if (free_handles_.empty()) {
            return UCS_ERR_EXCEEDS_LIMIT;
        }
        const uint32_t h = allocate_handle();
        Entry         &e = entries_[h];
        e.state          = EntryState::kPosted;
        e.refs           = 1 + (signaled ? 1 : 0);
        e.recv_wr_id     = op.recv_wr_id;
        e.tag            = op.tag;
        e.mask           = op.mask;
        e.sge            = op.has_sge ? op.sge : TmSge();
        op.handle        = h;
        break;
    }
    case TmOpcode::kDel: {
        if ((op.handle >= entries_.size()) || (entries_[op.handle].state == EntryState::kFree) ||
            entries_[op.handle].del_posted) {
            return UCS_ERR_INVALID_PARAM;
        }
        Entry &e     = entries_[op.handle];
        e.del_posted = true;
        if (signaled) {
            ++e.refs;
        } else {
            /* The mlx5 provider drops the consume reference at once. */
            release_refs(op.handle, 1);
        }
        break;
    }
    case TmOpcode::kSync:
        break;
    default:
        return UCS_ERR_INVALID_PARAM;
    }
    commands_.push_back(Command{op, op_posted_++});
    return UCS_OK;
}

ucs_status_t TmModel::post_recv(uint64_t wr_id, const TmSge &sge) {
    if ((sge.addr == nullptr) && (sge.length > 0)) {
        return UCS_ERR_INVALID_PARAM;
    }
    untagged_.emplace_back(wr_id, sge);
    return UCS_OK;
}

unsigned TmModel::poll(TmCompletion *out, unsigned max) {
    unsigned n = 0;
    while ((n < max) && !cq_.empty()) {
        const Cqe cqe = cq_.front();
        cq_.pop_front();
        if (cqe.op_seq >= 0) {
            op_retired_ = std::max(op_retired_, static_cast<uint64_t>(cqe.op_seq) + 1);
        }
        release_refs(cqe.entry, cqe.release);
        out[n++] = cqe.c;
    }
    return n;
}

void TmModel::deliver(uint32_t src_qp, const void *msg, size_t len, bool with_imm, uint32_t imm) {
    const uint8_t *p = static_cast<const uint8_t *>(msg);
    arrivals_[src_qp].push_back(Message{std::vector<uint8_t>(p, p + len), with_imm, imm, msg_seq_++});
}

void TmModel::unlist(uint32_t entry) {
    auto it = std::find(list_.begin(), list_.end(), entry);
    if (it != list_.end()) {
        list_.erase(it);
    }
}

bool TmModel::step_command() {
    if (commands_.empty()) {
        return false;
    }
    const Command cmd = commands_.front();
    commands_.pop_front();
    const TmOp &op = cmd.op;

    Cqe cqe;
    cqe.c.wr_id = op.wr_id;
    switch (op.opcode) {
    case TmOpcode::kAdd: {
        Entry &e = entries_[op.handle];
        if (e.state == EntryState::kPosted) {
            e.state = EntryState::kListed;
            list_.push_back(op.handle);
        }
        cqe.c.opcode = TmCqeOpcode::kAdd;
        cqe.entry    = op.handle;
        cqe.release  = 1;
        break;
    }
    case TmOpcode::kDel: {
        Entry &e     = entries_[op.handle];
        cqe.c.opcode = TmCqeOpcode::kDel;
        cqe.entry    = op.handle;
        if (e.state == EntryState::kListed) {
            unlist(op.handle);
            e.state      = EntryState::kGone;
            cqe.c.status = TmCqeStatus::kSuccess;
            cqe.release  = 2; /* the DEL's own and the consume reference */
        } else {
            cqe.c.status = TmCqeStatus::kTmErr;
            cqe.release  = 1;
            ++counters_.del_failed;
        }
        break;
    }
    case TmOpcode::kSync:
        cqe.c.opcode = TmCqeOpcode::kSync;
        break;
    }
    if (op.flags & kTmOpSyncCount) {
        sw_count_ = op.unexpected_cnt;
    }
    if (!in_sync()) {
        cqe.c.flags |= kTmCqeSyncReq;
    }
    if (op.flags & kTmOpSignaled) {
        cqe.op_seq = static_cast<int64_t>(cmd.seq);
        (config_.defer_op_completions ? op_cqes_ : cq_).push_back(cqe);
    }
    /* (unsignaled DEL: its consume reference was dropped at post time) */
    return true;
}

bool TmModel::step_op_completion() {
    if (op_cqes_.empty()) {
        return false;
    }
    cq_.push_back(op_cqes_.front());
    op_cqes_.pop_front();
    return true;
}

int64_t TmModel::find_match(uint64_t tag) const {
    if (!in_sync()) {
        return -1;
    }
    for (uint32_t h : list_) {
        const Entry &e = entries_[h];
        if (((tag ^ e.tag) & e.mask) == 0) {
            return h;
        }
    }
    return -1;
}

bool TmModel::arrival_ready(uint32_t src_qp) const {
    auto it = arrivals_.find(src_qp);
    if ((it == arrivals_.end()) || it->second.empty()) {
        return false;
    }
    if (auto bar = barriers_.find(src_qp); bar != barriers_.end()) {
        for (const auto &[qp, queue] : arrivals_) {
            if ((qp != src_qp) && !queue.empty() && (queue.front().seq < bar->second)) {
                return false; /* rule 7: delivered before src_qp was connected */
            }
        }
    }
    auto b = blocked_.find(src_qp);
    if ((b != blocked_.end()) && b->second) {
        return false;
    }
    if (!untagged_.empty()) {
        return true;
    }
    const Message &m = it->second.front();
    if (m.bytes.size() < sizeof(TmHeader)) {
        return false;
    }
    TmHeader tmh;
    memcpy(&tmh, m.bytes.data(), sizeof(tmh));
    const auto op = static_cast<TmhOp>(tmh.opcode);
    if ((op != TmhOp::kEager) && (op != TmhOp::kRndv)) {
        return false;
    }
    return find_match(tmh_tag(tmh)) >= 0;
}

void TmModel::deliver_untagged(uint32_t src_qp, const Message &msg, TmCqeOpcode opcode,
                               bool count) {
    const auto [wr_id, sge] = untagged_.front();
    untagged_.pop_front();
    Cqe cqe;
    cqe.c.wr_id    = wr_id;
    cqe.c.opcode   = opcode;
    cqe.c.src_qp   = src_qp;
    cqe.c.byte_len = static_cast<uint32_t>(msg.bytes.size());
    if (msg.with_imm) {
        cqe.c.flags |= kTmCqeWithImm;
        cqe.c.imm = msg.imm;
    }
    const size_t n = std::min<size_t>(msg.bytes.size(), sge.length);
    if (n > 0) {
        memcpy(sge.addr, msg.bytes.data(), n);
    }
    if (msg.bytes.size() > sge.length) {
        cqe.c.status = TmCqeStatus::kLengthError;
    }
    if (count) {
        ++hw_count_;
        ++counters_.unexpected;
        if (hw_count_ - sw_count_ > config_.sync_req_diff) {
            cqe.c.flags |= kTmCqeSyncReq;
        }
    } else {
        ++counters_.no_tag;
    }
    cq_.push_back(cqe);
}

void TmModel::complete_entry(uint32_t entry, TmCompletion c) {
    Entry &e = entries_[entry];
    e.state  = EntryState::kGone;
    Cqe cqe;
    cqe.c       = c;
    cqe.c.wr_id = e.recv_wr_id;
    cqe.entry   = entry;
    cqe.release = 1; /* the consume reference */
    cq_.push_back(cqe);
}

void TmModel::report_match(uint32_t entry, const TmCompletion &c) {
    Cqe cqe;
    cqe.c       = c;
    cqe.c.wr_id = entries_[entry].recv_wr_id;
    cq_.push_back(cqe);
}

void TmModel::place_eager(uint32_t entry, const std::vector<uint8_t> &message, bool with_imm,
                          uint32_t imm, TmCompletion *c) {
    const Entry &e       = entries_[entry];
    const size_t payload = message.size() - sizeof(TmHeader);
    const size_t n       = std::min<size_t>(payload, e.sge.length);
    if (n > 0) {
        memcpy(e.sge.addr, message.data() + sizeof(TmHeader), n);
    }
    c->flags |= kTmCqeDataValid;
    c->byte_len = static_cast<uint32_t>(payload);
    if (payload > e.sge.length) {
        c->status = TmCqeStatus::kLengthError; /* the data that fits is written */
    }
    if (with_imm) {
        c->flags |= kTmCqeWithImm;
        c->imm = imm;
    }
}

TmModel::Message TmModel::pop_arrival(uint32_t src_qp) {
    const auto it  = arrivals_.find(src_qp);
    Message    msg = std::move(it->second.front());
    it->second.pop_front();
    if (it->second.empty()) {
        /* Every step walks the senders with messages: a sender's entry goes
         * with its last message, or the walk grows with every QP ever seen
         * (thousands where connections come and go). */
        arrivals_.erase(it);
    }
    barriers_.erase(src_qp); /* what came before it has been processed */
    if (arrivals_.empty()) {
        barriers_.clear(); /* nothing is left to overtake: also those of QPs that sent nothing */
    }
    return msg;
}

void TmModel::match_rndv(uint32_t h, uint32_t src_qp, const Message &msg, TmCompletion c) {
    const Entry &e = entries_[h];
    c.flags |= kTmCqeRndv;
    RndvHeader rvh;
    memcpy(&rvh, msg.bytes.data() + sizeof(TmHeader), sizeof(rvh));
    if (rvh_len(rvh) > e.sge.length) {
        /* The tagged buffer cannot take the data: the headers go there
         * instead and software finishes the rendezvous. */
        const size_t n = std::min<size_t>(msg.bytes.size(), e.sge.length);
        if (n > 0) {
            memcpy(e.sge.addr, msg.bytes.data(), n);
        }
        c.flags |= kTmCqeDataValid;
        c.status   = TmCqeStatus::kRndvIncomplete;
        c.byte_len = static_cast<uint32_t>(n);
        ++counters_.rndv_incomplete;
        complete_entry(h, c);
        return;
    }
    report_match(h, c);
    transfers_.push_back(Transfer{h, src_qp, true, msg.bytes, false, 0});
}

bool TmModel::process_arrival(uint32_t src_qp) {
    const Message msg = pop_arrival(src_qp);
    TmHeader      tmh{};
    if (msg.bytes.size() >= sizeof(tmh)) {
        memcpy(&tmh, msg.bytes.data(), sizeof(tmh));
    }
    const auto op = static_cast<TmhOp>(tmh.opcode);
    const bool tagged =
        (msg.bytes.size() >= sizeof(TmHeader)) && ((op == TmhOp::kEager) || (op == TmhOp::kRndv));
    if (!tagged) {
        deliver_untagged(src_qp, msg, TmCqeOpcode::kNoTag, false);
        return true;
    }
    const bool rndv = (op == TmhOp::kRndv);
    if (rndv && (msg.bytes.size() < sizeof(TmHeader) + sizeof(RndvHeader))) {
        deliver_untagged(src_qp, msg, TmCqeOpcode::kRecv, true); /* malformed: software judges */
        return true;
    }
    const int64_t match = find_match(tmh_tag(tmh));
    if (match < 0) {
        deliver_untagged(src_qp, msg, TmCqeOpcode::kRecv, true);
        return true;
    }

    const uint32_t h = static_cast<uint32_t>(match);
    unlist(h);
    entries_[h].state = EntryState::kConsumed;
    ++counters_.matches;

    TmCompletion c;
    c.opcode = TmCqeOpcode::kTmRecv;
    c.src_qp = src_qp;
    c.tag    = tmh_tag(tmh);
    c.priv   = tmh_app_ctx(tmh);
    c.flags  = kTmCqeMatch;

    if (rndv) {
        match_rndv(h, src_qp, msg, c);
        return true;
    }

    if (msg.bytes.size() <= config_.mtu) {
        place_eager(h, msg.bytes, msg.with_imm, msg.imm, &c);
        complete_entry(h, c);
        return true;
    }
    /* Multi-packet: the match is reported with the first packet. */
    report_match(h, c);
    transfers_.push_back(Transfer{h, src_qp, false, msg.bytes, msg.with_imm, msg.imm});
    blocked_[src_qp] = true;
    return true;
}

bool TmModel::step_arrival(uint32_t src_qp) {
    if (!arrival_ready(src_qp)) {
        auto it = arrivals_.find(src_qp);
        if ((it != arrivals_.end()) && !it->second.empty() && untagged_.empty()) {
            ++counters_.rnr_waits;
        }
        return false;
    }
    return process_arrival(src_qp);
}

bool TmModel::step_arrival() {
    uint32_t best     = 0;
    uint64_t best_seq = UINT64_MAX;
    for (const auto &[src, queue] : arrivals_) {
        if (!queue.empty() && (queue.front().seq < best_seq) && arrival_ready(src)) {
            best     = src;
            best_seq = queue.front().seq;
        }
    }
    return (best_seq != UINT64_MAX) && process_arrival(best);
}

bool TmModel::step_transfer(size_t index) {
    if (index >= transfers_.size()) {
        return false;
    }
    const Transfer t = transfers_[index];
    transfers_.erase(transfers_.begin() + static_cast<std::ptrdiff_t>(index));
    Entry   &e = entries_[t.entry];
    TmHeader tmh;
    memcpy(&tmh, t.message.data(), sizeof(tmh));

    TmCompletion c;
    c.opcode = TmCqeOpcode::kTmRecv;
    c.src_qp = t.src_qp;
    c.tag    = tmh_tag(tmh);
    c.priv   = tmh_app_ctx(tmh);
    c.flags  = kTmCqeDataValid;
    if (t.rndv) {
        c.flags |= kTmCqeRndv;
        RndvHeader rvh;
        memcpy(&rvh, t.message.data() + sizeof(TmHeader), sizeof(rvh));
        const uint32_t len = rvh_len(rvh);
        bool           ok  = !fail_next_read_ && (fabric_.read != nullptr);
        fail_next_read_    = false;
        if (ok && (len > 0)) {
            ok = fabric_.read(fabric_.arg, t.src_qp, rvh_va(rvh), rvh_rkey(rvh), e.sge.addr, len);
        }
        ++counters_.rndv_reads;
        c.byte_len = len;
        if (!ok) {
            c.status = TmCqeStatus::kError;
            failed_reads_.push_back(FailedRead{t.src_qp, rvh_rkey(rvh), rvh_va(rvh), e.sge.addr});
        } else if (fabric_.send != nullptr) {
            /* FIN: the request's TMH and RVH, opcode changed. */
            uint8_t  fin[sizeof(TmHeader) + sizeof(RndvHeader)];
            TmHeader fh = tmh;
            fh.opcode   = static_cast<uint8_t>(TmhOp::kFin);
            memcpy(fin, &fh, sizeof(fh));
            memcpy(fin + sizeof(fh), &rvh, sizeof(rvh));
            fabric_.send(fabric_.arg, t.src_qp, fin, sizeof(fin));
            ++counters_.fins_sent;
        }
    } else {
        place_eager(t.entry, t.message, t.with_imm, t.imm, &c);
        blocked_.erase(t.src_qp); /* absent: not blocked */
    }
    complete_entry(t.entry, c);
    return true;
}

size_t TmModel::pending_arrivals() const {
    size_t n = 0;
    for (const auto &[src, queue] : arrivals_) {
        n += queue.size();
    }
    return n;
}

bool TmModel::idle() const {
    if (!commands_.empty() || !transfers_.empty() || !op_cqes_.empty()) {
        return false;
    }
    for (const auto &[src, queue] : arrivals_) {
        if (arrival_ready(src)) {
            return false;
        }
    }
    return true;
}

size_t TmModel::run_until_idle(size_t max_steps) {
    size_t steps = 0;
    while (steps < max_steps) {
        if (step_command() || step_op_completion() || step_arrival() || step_transfer(0)) {
            ++steps;
            continue;
        }
        break;
    }
    return steps;
}

bool TmModel::step_random(std::mt19937_64 &rng) {
    /* Enabled events: the command queue head, each ready sender, each transfer. */
    std::vector<int64_t> events;
    if (!commands_.empty()) {
        events.push_back(-1);
    }
    if (!op_cqes_.empty()) {
        events.push_back(INT64_MIN);
    }
    for (const auto &[src, queue] : arrivals_) {
        if (arrival_ready(src)) {
            events.push_back(-2 - static_cast<int64_t>(src));
        }
    }
    for (size_t i = 0; i < transfers_.size(); ++i) {
        events.push_back(static_cast<int64_t>(i));
    }
    if (events.empty()) {
        return false;
    }
    const int64_t ev = events[std::uniform_int_distribution<size_t>(0, events.size() - 1)(rng)];
    if (ev == -1) {
        return step_command();
    }
    if (ev == INT64_MIN) {
        return step_op_completion();
    }
    if (ev < -1) {
        return process_arrival(static_cast<uint32_t>(-2 - ev));
    }
    return step_transfer(static_cast<size_t>(ev));
}

}  // namespace ib
}  // namespace uct_tm
