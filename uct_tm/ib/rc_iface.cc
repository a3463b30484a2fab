/*
 * tm_rc iface: verbs resources, the receive path and software tag matching.
 */
#include "rc_iface.h"

#include "ib_device.h"
#include "rc_transport.h"
#include "base/clock.h"
#include "common/alloc_status.h"
#include "tag/eager_delivery.h"

#include <ucs/debug/log_def.h>

#include <algorithm>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <random>

#include <unistd.h>
#include <ctime>
#include <new>

namespace uct_tm {
namespace ib {


namespace {

constexpr size_t kAlign = 64;

size_t align_up(size_t n, size_t a) { return (n + a - 1) / a * a; }


}  // namespace

RcIface::RcIface(const RcConfig &config)
    : config_(config), tags_(config.tag_list.limits()), rndv_(RcIfaceLink(*this)),
      hw_(RcIfaceLink(*this), rndv_) {}

ucs_status_t RcIface::init(uct_md_h md, uct_worker_h, const uct_iface_params_t *iface_params,
                           const RcConfig &) {
    if (connect_ == nullptr) {
        return UCS_ERR_NO_MEMORY;
    }
    md_                    = ib_md(md);
    const PortInfo *port   = nullptr;
    ucs_status_t    status = find_port(iface_params, &port);
    if (status != UCS_OK) {
        return status;
    }
    status = check_config();
    if (status != UCS_OK) {
        return status;
    }
    size_queues(*port);
    if (alloc_tx_state() != UCS_OK) {
        return UCS_ERR_NO_MEMORY;
    }
    const ucs_status_t rndv_status = rndv_.init(config_);
    if (rndv_status != UCS_OK) {
        return rndv_status;
    }
    const ucs_status_t verbs_status = init_verbs(config_);
    return (verbs_status != UCS_OK) ? verbs_status : connect_->init();
}

ucs_status_t RcIface::find_port(const uct_iface_params_t *iface_params, const PortInfo **port_p) {
    /* Device name "tm_<dev>:<port>": the port comes after the colon. */
    const char *dev_name = iface_params->mode.device.dev_name;
    const char *colon    = (dev_name != nullptr) ? strrchr(dev_name, ':') : nullptr;
    const std::string expected_prefix = std::string(kMdPrefix) + md_->device + ":";
    if ((colon == nullptr) || (strncmp(dev_name, expected_prefix.c_str(), expected_prefix.size()) != 0)) {
        ucs_error("tm_rc: device \"%s\" is not a port of %s", dev_name ? dev_name : "(null)",
                  md_->device.c_str());
        return UCS_ERR_NO_DEVICE;
    }
    port_ = static_cast<uint8_t>(atoi(colon + 1));
    const DeviceInfo *info = find_device(md_->device);
    const PortInfo   *port = nullptr;
    for (const PortInfo &p : info->ports) {
        if (p.num == port_) {
            port = &p;
        }
    }
    if (port == nullptr) {
        ucs_error("tm_rc: %s has no active port %u", md_->device.c_str(), port_);
        return UCS_ERR_NO_DEVICE;
    }
    *port_p = port;
    return UCS_OK;
}

ucs_status_t RcIface::check_config() const {
    const ucs_status_t status = config_.tag_list.check("tm_rc");
    if (status != UCS_OK) {
        return status;
    }
    if ((config_.seg_size < kMinSegSize) || (config_.seg_size > (1u << 30)) || (config_.rx_queue_len == 0) ||
        (config_.tx_queue_len == 0) || (config_.tx_bufs == 0) || (config_.tx_cq_len == 0) ||
        (config_.rndv_ops == 0)) {
        ucs_error("tm_rc: SEG_SIZE must be 256..1g and the queue/buffer counts non-zero");
        return UCS_ERR_INVALID_PARAM;
    }
    return UCS_OK;
}

void RcIface::size_queues(const PortInfo &port) {
    seg_size_    = config_.seg_size;
    rx_offset_   = align_up(sizeof(uct_recv_desc_t *) + params().rx_headroom, 8);
    rx_stride_   = align_up(rx_offset_ + seg_size_, kAlign);
    rx_queue_len_ = std::min<uint32_t>(config_.rx_queue_len, md_->attr.orig_attr.max_srq_wr);
    tx_queue_len_ = std::min<uint32_t>(config_.tx_queue_len, md_->attr.orig_attr.max_qp_wr);
    tx_cq_len_    = std::min<uint32_t>(config_.tx_cq_len, md_->attr.orig_attr.max_cqe);
    budget_       = std::max(config_.progress_budget, 1u);
    print_stats_  = config_.print_stats != 0;
    roce_         = port.roce();
    tags_.set_orphan_hook(
        [](void *arg, const TagEngine::Recv *recv) { static_cast<RcIface *>(arg)->wait_reads(recv); },
        this);
}

ucs_status_t RcIface::alloc_tx_state() {
    return alloc_status([&] {
        rx_held_.assign(rx_queue_len_, 0);
        rx_repost_.reserve(rx_queue_len_);
        free_tx_bufs_.reserve(config_.tx_bufs);
        for (int32_t i = static_cast<int32_t>(config_.tx_bufs) - 1; i >= 0; --i) {
            free_tx_bufs_.push_back(i);
        }
        tx_ops_.resize(tx_cq_len_);
        for (uint32_t i = 0; i < tx_cq_len_; ++i) {
            tx_ops_[i].next_free = i + 1;
        }
        free_tx_op_ = 0;
    });
}

ucs_status_t RcIface::init_verbs(const RcConfig &config) {
    const ucs_status_t status = init_tag_list(config);
    if (status != UCS_OK) {
        return status;
    }
    const ucs_status_t queue_status = create_queues();
    if (queue_status != UCS_OK) {
        return queue_status;
    }
    const ucs_status_t buf_status = alloc_buffers(config);
    if (buf_status != UCS_OK) {
        return buf_status;
    }
    const ucs_status_t addr_status = query_address(config);
    if (addr_status != UCS_OK) {
        return addr_status;
    }
    if (hw_.verbs_list() != nullptr) {
        return UCS_OK; /* the TM SRQ's untagged buffers are the engine's */
    }
    for (uint32_t i = 0; i < rx_queue_len_; ++i) {
        rx_repost_.push_back(i);
    }
    post_rx(rx_queue_len_);
    if (rx_posted_ != rx_queue_len_) {
        return UCS_ERR_IO_ERROR;
    }
    if (!config.tm_model || !tag_enabled()) {
        return UCS_OK;
    }
    return hw_.init_model(config, hw_engine_config(),
                          mtu_bytes(static_cast<enum ibv_mtu>(dev_addr_.mtu)), md_->device);
}

ucs_status_t RcIface::init_tag_list(const RcConfig &config) {
    const auto &tm = md_->attr.tm_caps;
    hw_tm_capable_ = tm.max_num_tags > 0;
    if (config.tm_model) {
        /* init_model() in init_verbs(), once the port's MTU is known */
    } else if (hw_tm_capable_ && config.hw_tm && tag_enabled()) {
        const ucs_status_t status = hw_.init_verbs_tm(config, hw_engine_config(), *md_, rx_queue_len_);
        if (status == UCS_ERR_UNSUPPORTED) {
            ucs_diag("tm_rc: %s reports tag matching (max_num_tags %u) but refuses a TM SRQ: "
                     "matching in software", md_->device.c_str(), tm.max_num_tags);
        } else if (status != UCS_OK) {
            return status;
        }
    } else {
        ucs_debug("tm_rc: %s: %s, tags matched in software over a plain SRQ", md_->device.c_str(),
                  hw_tm_capable_ ? "hardware tag matching disabled (UCX_TM_RC_HW_TM=n)"
                                 : "no hardware tag matching (tm_caps.max_num_tags == 0)");
    }
    return UCS_OK;
}

ucs_status_t RcIface::create_queues() {
    struct ibv_context *ctx = md_->ctx;
    tx_cq_ = ibv_create_cq(ctx, static_cast<int>(tx_cq_len_), nullptr, nullptr, 0);
    if (hw_.verbs_list() != nullptr) {
        /* QPs receive into the TM SRQ; its CQ is polled by the tag engine. */
        rx_cq_ = hw_.verbs_list()->cq();
        srq_   = hw_.verbs_list()->srq();
    } else {
        rx_cq_ = ibv_create_cq(ctx, static_cast<int>(rx_queue_len_), nullptr, nullptr, 0);
    }
    if ((tx_cq_ == nullptr) || (rx_cq_ == nullptr)) {
        ucs_error("tm_rc: ibv_create_cq on %s: %s", md_->device.c_str(), strerror(errno));
        return UCS_ERR_IO_ERROR;
    }
    struct ibv_srq_init_attr srq_attr = {};
    srq_attr.attr.max_wr  = rx_queue_len_;
    srq_attr.attr.max_sge = 1;
    if (srq_ == nullptr) {
        srq_ = ibv_create_srq(md_->pd, &srq_attr);
    }
    if (srq_ == nullptr) {
        ucs_error("tm_rc: ibv_create_srq on %s: %s", md_->device.c_str(), strerror(errno));
        return UCS_ERR_IO_ERROR;
    }
    return UCS_OK;
}

ucs_status_t RcIface::alloc_buffers(const RcConfig &config) {
    const size_t rx_bytes = rx_stride_ * rx_queue_len_;
    /* One spare segment after the last buffer: a pack callback that writes
     * past max_bcopy (its send is refused) scribbles on our memory only. */
    const size_t tx_bytes = seg_size_ * (config.tx_bufs + 1);
    if ((posix_memalign(reinterpret_cast<void **>(&rx_pool_), 4096, rx_bytes) != 0) ||
        (posix_memalign(reinterpret_cast<void **>(&tx_pool_), 4096, tx_bytes) != 0)) {
        return UCS_ERR_NO_MEMORY;
    }
    rx_mr_ = ibv_reg_mr(md_->pd, rx_pool_, rx_bytes, IBV_ACCESS_LOCAL_WRITE);
    tx_mr_ = ibv_reg_mr(md_->pd, tx_pool_, tx_bytes, IBV_ACCESS_LOCAL_WRITE);
    if ((rx_mr_ == nullptr) || (tx_mr_ == nullptr)) {
        ucs_error("tm_rc: registering %zu + %zu bytes of buffers on %s: %s", rx_bytes, tx_bytes,
                  md_->device.c_str(), strerror(errno));
        return UCS_ERR_IO_ERROR;
    }
    return UCS_OK;
}

ucs_status_t RcIface::query_address(const RcConfig &config) {
    struct ibv_context *ctx = md_->ctx;
    union ibv_gid       gid = {};
    if (roce_) {
        const ucs_status_t status = select_gid(ctx, port_, config.gid_index, &gid_index_, &gid);
        if (status != UCS_OK) {
            ucs_error("tm_rc: no usable GID on %s port %u", md_->device.c_str(), port_);
            return status;
        }
    }
    struct ibv_port_attr pa;
    if (ibv_query_port(ctx, port_, &pa) != 0) {
        return UCS_ERR_IO_ERROR;
    }
    dev_addr_.roce = roce_ ? 1 : 0;
    dev_addr_.mtu  = static_cast<uint8_t>(pa.active_mtu);
    dev_addr_.lid  = pa.lid;
    memcpy(dev_addr_.gid, gid.raw, sizeof(dev_addr_.gid));
    return UCS_OK;
}

HwTagEngineConfig RcIface::hw_engine_config() const {
    HwTagEngineConfig ec;
    ec.list_size      = config_.tag_list.list_size;
    ec.rx_buffers     = rx_queue_len_;
    ec.rx_buffer_size = static_cast<uint32_t>(seg_size_);
    ec.poll_budget    = std::max(budget_, 16u);
    ec.rx_headroom    = static_cast<uint32_t>(rx_offset_);
    ec.max_length     = kMaxZcopy;
    return ec;
}

size_t RcIface::max_rndv_hdr() const {
    return hw_mode() ? hw_.max_rndv_hdr() : seg_size_ - sizeof(WireHeader) - sizeof(struct ibv_rvh);
}

RcIface::~RcIface() {
    if (print_stats_ && hw_mode()) {
        hw_.print_counters(stderr, opened_as().name, md_->device, port_);
    } else if (print_stats_) {
        fprintf(stderr,
                "%s %s:%u: posted %lu matched %lu unexpected %lu rndv_reads %lu temp_regs %lu "
                "tx_errors %lu keepalives %lu dropped %lu\n",
                opened_as().name, md_ ? md_->device.c_str() : "?", port_, (unsigned long)tags_.counters().posts,
                (unsigned long)tags_.counters().matches, (unsigned long)counters_.unexpected,
                (unsigned long)counters_.rndv_reads, (unsigned long)counters_.temp_regs,
                (unsigned long)counters_.tx_errors, (unsigned long)counters_.keepalives,
                (unsigned long)counters_.dropped);
    }
    if (print_stats_ && (connect_ != nullptr)) {
        connect_->print_stats(stderr);
    }
    if (base_initialized()) {
        /* Before the QPs go: nothing may progress them any more. */
        abi::progress_disable(to_uct(), UCT_PROGRESS_SEND | UCT_PROGRESS_RECV);
    }
    for (RcEp *ep : eps_) {
        if (ep->qp != nullptr) {
            ibv_destroy_qp(ep->qp);
        }
        delete ep;
    }
    for (TxOp &op : tx_ops_) {
        if (op.temp_mr != nullptr) {
            ibv_dereg_mr(op.temp_mr);
        }
    }
    if ((srq_ != nullptr) && (hw_.verbs_list() == nullptr)) {
        ibv_destroy_srq(srq_);
    }
    if ((rx_cq_ != nullptr) && (hw_.verbs_list() == nullptr)) {
        ibv_destroy_cq(rx_cq_);
    }
    if (tx_cq_ != nullptr) {
        ibv_destroy_cq(tx_cq_);
    }
    if (rx_mr_ != nullptr) {
        ibv_dereg_mr(rx_mr_);
    }
    if (tx_mr_ != nullptr) {
        ibv_dereg_mr(tx_mr_);
    }
    free(rx_pool_);
    free(tx_pool_);
}

/* ---- queries ------------------------------------------------------------------------- */

ucs_status_t RcIface::query(uct_iface_attr_t *attr) const {
    memset(attr, 0, sizeof(*attr));
    const size_t hdr      = sizeof(WireHeader);
    const size_t one_msg  = seg_size_ - hdr;
    const size_t max_iov  = std::min<size_t>(md_->attr.orig_attr.max_sge, 8) - 1; /* + header */
    attr->cap.flags = UCT_IFACE_FLAG_AM_SHORT | UCT_IFACE_FLAG_AM_BCOPY | UCT_IFACE_FLAG_AM_ZCOPY |
                      UCT_IFACE_FLAG_GET_ZCOPY | UCT_IFACE_FLAG_PUT_ZCOPY | UCT_IFACE_FLAG_PENDING |
                      UCT_IFACE_FLAG_CB_SYNC | UCT_IFACE_FLAG_ERRHANDLE_PEER_FAILURE |
                      UCT_IFACE_FLAG_EP_CHECK;
    if (tag_enabled()) {
        attr->cap.flags |= UCT_IFACE_FLAG_TAG_EAGER_SHORT | UCT_IFACE_FLAG_TAG_EAGER_BCOPY |
                           UCT_IFACE_FLAG_TAG_EAGER_ZCOPY | UCT_IFACE_FLAG_TAG_RNDV_ZCOPY;
    }
    attr->cap.event_flags = 0;

    attr->cap.am.max_short  = one_msg; /* the 64-bit header included */
    attr->cap.am.max_bcopy  = one_msg;
    attr->cap.am.min_zcopy  = 0;
    attr->cap.am.max_zcopy  = one_msg;
    attr->cap.am.max_hdr    = 128;
    attr->cap.am.max_iov    = max_iov;
    attr->cap.am.opt_zcopy_align = 1;
    attr->cap.am.align_mtu  = 1;

    attr->cap.get.max_zcopy = md_->attr.orig_attr.max_mr_size ? kMaxZcopy : 0;
    attr->cap.get.max_iov   = max_iov;
    attr->cap.get.opt_zcopy_align = 1;
    attr->cap.get.align_mtu = 1;
    attr->cap.put.max_zcopy = attr->cap.get.max_zcopy;
    attr->cap.put.max_iov   = max_iov;
    attr->cap.put.opt_zcopy_align = 1;
    attr->cap.put.align_mtu = 1;

    if (tag_enabled()) {
        /* A NIC's list writes TMH and RVH into a buffer too small for a
         * rendezvous (RNDV_INCOMPLETE): it must hold them. */
        attr->cap.tag.recv.min_recv =
            hw_mode() ? sizeof(WireHeader) + sizeof(struct ibv_rvh) : 0;
        /* Software matching writes at most what arrives; a NIC's list takes
         * one sge. */
        attr->cap.tag.recv.max_zcopy        = hw_mode() ? kMaxZcopy : SIZE_MAX;
        /* The hardware list takes one buffer per receive, as many as it holds. */
        attr->cap.tag.recv.max_iov          = hw_mode() ? 1 : tags_.limits().max_iov;
        attr->cap.tag.recv.max_outstanding =
            hw_mode() ? with_hw_tags([](auto &e) { return e.list_size(); })
                      : tags_.limits().list_size;
        attr->cap.tag.eager.max_short       = one_msg;
        attr->cap.tag.eager.max_bcopy       = one_msg;
        attr->cap.tag.eager.max_zcopy       = one_msg;
        attr->cap.tag.eager.max_iov         = max_iov;
        attr->cap.tag.rndv.max_zcopy        = kMaxZcopy;
        attr->cap.tag.rndv.max_hdr          = max_rndv_hdr();
        attr->cap.tag.rndv.max_iov          = 1;
    }

    attr->device_addr_len     = sizeof(DeviceAddress);
    attr->max_conn_priv   = 0;
    attr->overhead        = 75e-9;
    attr->latency.c       = 1.5e-6;
    attr->latency.m       = 0;
    attr->bandwidth.dedicated = 0;
    attr->bandwidth.shared    = 10e9;
    attr->priority        = 0;
    attr->dev_num_paths   = 1;
    attr->max_num_eps     = static_cast<size_t>(md_->attr.orig_attr.max_qp);
    connect_->query(attr); /* CONNECT_TO_EP or _IFACE, the address lengths */
    return UCS_OK;
}

ucs_status_t RcIface::get_device_address(uct_device_addr_t *addr) const {
    memcpy(addr, &dev_addr_, sizeof(dev_addr_));
    return UCS_OK;
}

ucs_status_t RcIface::get_address(uct_iface_addr_t *addr) const {
    return connect_->get_address(addr);
}

int RcIface::is_reachable(const uct_device_addr_t *dev_addr, const uct_iface_addr_t *iface_addr) const {
    if ((dev_addr == nullptr) || !connect_->reachable(iface_addr)) {
        return 0;
    }
    DeviceAddress remote;
    memcpy(&remote, dev_addr, sizeof(remote));
    /* RoCE reaches RoCE through IP routing; InfiniBand needs a LID. */
    return (remote.roce == dev_addr_.roce) && (remote.roce || (remote.lid != 0));
}

/* ---- progress ------------------------------------------------------------------------ */

unsigned RcIface::progress() {
    unsigned count = poll_tx() + poll_rx();
    count += connect_->progress(); /* tm_dc: its connection channel */
    count += hw_mode() ? hw_.progress() : tags_.progress();
    if (ucs_unlikely(rndv_.sending())) {
        rndv_.check_qps();
    }
    if (!pending_eps_.empty()) {
        count += dispatch_pending();
    }
    if (!flush_waiters_.empty()) {
        complete_flushes();
    }
    return count;
}

unsigned RcIface::poll_tx() {
    unsigned count = 0;
    if (ucs_unlikely(hw_.has_stashed_tx())) {
        /* polled while the model waited for its READ */
        const std::vector<struct ibv_wc> stashed = hw_.take_stashed_tx();
        for (const struct ibv_wc &wc : stashed) {
            handle_tx(wc);
        }
        count += static_cast<unsigned>(stashed.size());
    }
    struct ibv_wc wcs[16];
    const int     max = static_cast<int>(std::min<unsigned>(budget_, 16));
    const int     n   = ibv_poll_cq(tx_cq_, max, wcs);
    for (int i = 0; i < n; ++i) {
        handle_tx(wcs[i]);
    }
    return count + ((n > 0) ? static_cast<unsigned>(n) : 0);
}

unsigned RcIface::poll_rx() {
    if (hw_.verbs_srq()) {
        return 0; /* the TM SRQ's CQ: HwTagEngine polls it */
    }
    struct ibv_wc wcs[16];
    const int     max = static_cast<int>(std::min<unsigned>(budget_, 16));
    const int     n   = ibv_poll_cq(rx_cq_, max, wcs);
    for (int i = 0; i < n; ++i) {
        if (hw_.model()) {
            hw_.model_receive(wcs[i]);
        } else {
            handle_rx(wcs[i]);
        }
    }
    rndv_.start_reads();
    if (!rx_repost_.empty()) {
        post_rx(static_cast<uint32_t>(rx_repost_.size()));
    }
    return (n > 0) ? static_cast<unsigned>(n) : 0;
}

void RcIface::post_rx(uint32_t) {
    struct ibv_recv_wr  wrs[32];
    struct ibv_sge      sges[32];
    while (!rx_repost_.empty()) {
        const size_t n = std::min<size_t>(rx_repost_.size(), 32);
        for (size_t i = 0; i < n; ++i) {
            const uint32_t buf = rx_repost_[rx_repost_.size() - n + i];
            sges[i].addr   = reinterpret_cast<uintptr_t>(rx_buf(buf) + rx_offset_);
            sges[i].length = static_cast<uint32_t>(seg_size_);
            sges[i].lkey   = rx_mr_->lkey;
            wrs[i].wr_id   = buf;
            wrs[i].sg_list = &sges[i];
            wrs[i].num_sge = 1;
            wrs[i].next    = (i + 1 < n) ? &wrs[i + 1] : nullptr;
        }
        struct ibv_recv_wr *bad = nullptr;
        const int           rc  = ibv_post_srq_recv(srq_, wrs, &bad);
        const size_t posted = (rc == 0) ? n : static_cast<size_t>(bad - wrs);
        rx_posted_ += static_cast<uint32_t>(posted);
        if (rc != 0) {
            ucs_error("tm_rc: ibv_post_srq_recv: %s", strerror(rc));
            rx_repost_.resize(rx_repost_.size() - posted);
            return;
        }
        rx_repost_.resize(rx_repost_.size() - n);
    }
}

void RcIface::repost(uint32_t buf) { rx_repost_.push_back(buf); }

RcEp *RcIface::ep_by_qp(uint32_t qp_num) const {
    const auto it = qp_eps_.find(qp_num);
    return (it != qp_eps_.end()) ? it->second : nullptr;
}

bool RcIface::rx_completed(const struct ibv_wc &wc, uint32_t *buf) {
    *buf = static_cast<uint32_t>(wc.wr_id);
    --rx_posted_;
    ++counters_.received;
    if (ucs_unlikely(*buf >= rx_queue_len_)) {
        ucs_error("tm_rc: receive completion for unknown buffer %u", *buf);
        return false;
    }
    if (ucs_unlikely(wc.status != IBV_WC_SUCCESS)) {
        if (wc.status != IBV_WC_WR_FLUSH_ERR) {
            ucs_diag("tm_rc: receive completion error: %s", ibv_wc_status_str(wc.status));
        }
        repost(*buf);
        return false;
    }
    return true;
}

void RcIface::handle_rx(const struct ibv_wc &wc) {
    uint32_t buf;
    if (!rx_completed(wc, &buf)) {
        return;
    }
    char *msg = rx_buf(buf) + rx_offset_;
    if (ucs_unlikely(wc.byte_len < sizeof(WireHeader))) {
        ++counters_.dropped;
        repost(buf);
        return;
    }
    WireHeader hdr;
    memcpy(&hdr, msg, sizeof(hdr));
    char        *data   = msg + sizeof(WireHeader);
    const size_t length = wc.byte_len - sizeof(WireHeader);
    bool         keep   = false;
    switch (hdr.opcode) {
    case IBV_TMH_EAGER: {
        if (ucs_unlikely(hdr.kind == static_cast<uint8_t>(Kind::kRndvRequest))) {
            receive_rndv_request(be64toh(hdr.tag), data, length);
            break;
        }
        /* app_ctx is the high half; the low half travels as immediate
         * data when it is not 0 (rc_send.cc with_immediate()). */
        uint64_t imm = uint64_t{be32toh(hdr.app_ctx)} << 32;
        if (wc.wc_flags & IBV_WC_WITH_IMM) {
            imm |= be32toh(wc.imm_data);
        }
        keep = receive_eager(data, length, be64toh(hdr.tag), imm);
        break;
    }
    case IBV_TMH_RNDV:
        rndv_.receive_rts(ep_by_qp(wc.qp_num), data, length, be64toh(hdr.tag),
                          be32toh(hdr.app_ctx));
        break;
    case IBV_TMH_FIN:
        rndv_.receive_fin(be32toh(hdr.app_ctx));
        break;
    case IBV_TMH_NO_TAG:
        if (hdr.kind == static_cast<uint8_t>(Kind::kAm)) {
            keep = receive_am(hdr.am_id, data, length);
        } else if (hdr.kind == static_cast<uint8_t>(Kind::kRndvCancel)) {
            rndv_.receive_cancel(ep_by_qp(wc.qp_num), be32toh(hdr.app_ctx));
        } else if (hdr.kind == static_cast<uint8_t>(Kind::kRndvFailed)) {
            rndv_.receive_failed(ep_by_qp(wc.qp_num), be32toh(hdr.app_ctx));
        } else if (hdr.kind != static_cast<uint8_t>(Kind::kProbe)) {
            ++counters_.dropped;
        }
        break;
    default:
        ++counters_.dropped;
        break;
    }
    if (keep) {
        rx_held_[buf] = 1;
    } else {
        repost(buf);
    }
}

void RcIface::receive_rndv_request(uct_tag_t tag, char *data, size_t length) {
    if (ucs_unlikely(!tag_enabled())) {
        ++counters_.dropped;
        return;
    }
    TagEngine::Recv *recv = tags_.match(tag);
    if (recv != nullptr) {
        tags_.complete_rndv(recv, tag, data, static_cast<unsigned>(length));
    } else {
        unexpected_rndv(tag, data, static_cast<unsigned>(length), 0, 0, nullptr);
    }
}

void RcIface::unexpected_rndv(uct_tag_t tag, const void *header, unsigned header_length,
                              uint64_t va, size_t length, const PackedRkey *rkey) {
    if (params().rndv_cb == nullptr) {
        ++counters_.dropped;
        return;
    }
    ++counters_.unexpected;
    params().rndv_cb(params().rndv_arg, 0, tag, header, header_length, va, length, rkey);
}

template <typename Invoke>
bool RcIface::deliver(char *data, const Invoke &invoke) {
    /* uct_iface_release_desc() finds us through the pointer before the headroom. */
    stamp_desc(data - params().rx_headroom);
    return invoke(UCT_CB_PARAM_FLAG_DESC) == UCS_INPROGRESS;
}

bool RcIface::receive_eager(char *data, size_t length, uct_tag_t tag, uint64_t imm) {
    if (ucs_unlikely(!tag_enabled())) {
        ++counters_.dropped;
        return false;
    }
    if (EagerDelivery::whole(tags_, tag, imm, data, length)) {
        return false;
    }
    return unexpected_eager(data, length, tag, imm);
}

bool RcIface::unexpected_eager(char *data, size_t length, uct_tag_t tag, uint64_t imm) {
    if (ucs_unlikely(params().eager_cb == nullptr)) {
        ++counters_.dropped;
        return false;
    }
    ++counters_.unexpected;
    return deliver(data, [&](unsigned flags) {
        void *context = nullptr;
        return params().eager_cb(params().eager_arg, data, length, flags | UCT_CB_PARAM_FLAG_FIRST, tag, imm,
                         &context);
    });
}

bool RcIface::receive_am(uint8_t id, char *data, size_t length) {
    if (ucs_unlikely(id >= UCT_AM_ID_MAX)) {
        ++counters_.dropped;
        return false;
    }
    return deliver(data, [&](unsigned flags) {
        return abi::invoke_am(&base, id, data, static_cast<unsigned>(length), flags);
    });
}

void RcIface::release_desc(void *desc) {
    const char  *data   = static_cast<char *>(desc) + params().rx_headroom;
    if (hw_mode() && with_hw_tags([&](auto &e) { return e.owns_rx(data); })) {
        with_hw_tags([&](auto &e) { e.release_rx(const_cast<char *>(data)); });
        return;
    }
    const size_t offset = static_cast<size_t>(data - rx_pool_);
    const uint32_t buf  = static_cast<uint32_t>(offset / rx_stride_);
    if ((data < rx_pool_) || (buf >= rx_queue_len_) || !rx_held_[buf]) {
        ucs_error("tm_rc: uct_iface_release_desc(%p) is not a descriptor held from this iface",
                  desc);
        return;
    }
    rx_held_[buf] = 0;
    repost(buf);
    post_rx(1);
}

/* ---- tag list ------------------------------------------------------------------------- */

ucs_status_t RcIface::tag_recv_zcopy(uct_tag_t tag, uct_tag_t mask, const uct_iov_t *iov,
                                     size_t iovcnt, uct_tag_context_t *ctx) {
    if (ucs_unlikely(!tag_enabled())) {
        return UCS_ERR_UNSUPPORTED;
    }
    if (hw_mode()) {
        return with_hw_tags([&](auto &e) { return e.post(tag, mask, iov, iovcnt, ctx); });
    }
    return tags_.post(tag, mask, iov, iovcnt, ctx);
}

ucs_status_t RcIface::tag_recv_cancel(uct_tag_context_t *ctx, int force) {
    if (ucs_unlikely(!tag_enabled())) {
        return UCS_ERR_UNSUPPORTED;
    }
    if (hw_mode()) {
        return with_hw_tags([&](auto &e) { return e.cancel(ctx, force); });
    }
    return tags_.cancel(ctx, force);
}

/* ---- flush ---------------------------------------------------------------------------- */

ucs_status_t RcIface::flush(unsigned flags, uct_completion_t *comp) {
    if (flags & UCT_FLUSH_FLAG_CANCEL) {
        return UCS_ERR_UNSUPPORTED;
    }
    if (flush_done(nullptr)) {
        return UCS_OK;
    }
    return flush_waiters_.wait(nullptr, comp);
}


}  // namespace ib
}  // namespace uct_tm
