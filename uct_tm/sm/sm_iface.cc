/*
 * tm_sm iface: lifetime, capabilities, addresses, progress and the receive
 * side. Sending is in sm_send.cc, endpoints in sm_endpoint.cc, rendezvous and CMA
 * in sm_rndv.cc, pipelined copies in sm_staging.cc.
 */
#include "sm_iface.h"

#include "sm_transport.h"
#include "common/alloc_status.h"
#include "tag/eager_delivery.h"

#include <ucs/debug/log_def.h>
#include <ucs/sys/string.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <new>
#include <sched.h>
#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>

namespace uct_tm {
namespace sm {
namespace {

std::atomic<uint32_t> iface_serials{0};

/* A bandwidth (B/s) whose per-byte time is nil next to any copy: for bytes
 * an estimate counts elsewhere. */
constexpr double kBytesUncounted = 1e12;

/* Host identity shared by peers that can reach each other: same boot, same
 * PID namespace (CMA and /proc/<pid>/fd name processes by PID). */
uint64_t host_id() {
    static const uint64_t id = [] {
        struct stat st;
        const uint64_t ns = (stat("/proc/self/ns/pid", &st) == 0) ? st.st_ino : 0;
        return boot_id() ^ (ns * 0x9e3779b97f4a7c15ull);
    }();
    return id;
}


}  // namespace

/* ---- lifetime ---------------------------------------------------------------- */

SmIface::SmIface(const SmConfig &config)
    : tags_(config.tag_list.limits()),
      rndv_(SmIfaceLink(*this), staging_),
      staging_(SmIfaceLink(*this), rndv_) {}

/* Checks the settings and takes what the iface keeps of them. */
ucs_status_t SmIface::apply_config(const SmConfig &config) {
    const ucs_status_t status = config.tag_list.check("tm_sm");
    if (status != UCS_OK) {
        return status;
    }
    if ((config.fifo_elem_size > 4096) || (config.seg_size > (64u << 20)) ||
        (config.eager_max < config.seg_size) || (config.progress_budget == 0)) {
        ucs_error("tm_sm: invalid configuration (FIFO_ELEM_SIZE %zu, SEG_SIZE %zu, EAGER_MAX %zu, "
                  "PROGRESS_BUDGET %u)", config.fifo_elem_size, config.seg_size, config.eager_max,
                  config.progress_budget);
        return UCS_ERR_INVALID_PARAM;
    }
    /* Peers that pack beyond a descriptor (as we would) get windows onto ours. */
    bcopy_in_place_ = config.bcopy_in_place && ((config.bcopy_max == UCS_MEMUNITS_AUTO)
                                                    ? kBcopyBeyondSegByDefault
                                                    : (config.bcopy_max > config.seg_size));
    if ((config.staging_chunk_size > (16u << 20)) ||
        !make_geometry(config.fifo_size, static_cast<uint32_t>(config.fifo_elem_size),
                       config.spare_descs, static_cast<uint32_t>(config.seg_size),
                       params().rx_headroom, config.max_peers, config.rndv_slots,
                       config.staging_chunks, static_cast<uint32_t>(config.staging_chunk_size),
                       bcopy_in_place_, &geometry_)) {
        ucs_error("tm_sm: FIFO_SIZE %u (power of two, >= 2), FIFO_ELEM_SIZE %zu (multiple of 64, "
                  ">= 128), SEG_SIZE %zu, MAX_PEERS %u, RNDV_SLOTS %u, STAGING_CHUNKS %u or "
                  "STAGING_CHUNK_SIZE %zu (multiple of 4k) out of range",
                  config.fifo_size, config.fifo_elem_size, config.seg_size, config.max_peers,
                  config.rndv_slots, config.staging_chunks, config.staging_chunk_size);
        return UCS_ERR_INVALID_PARAM;
    }
    /* UCX's parser refuses 0 and negative bandwidths except "auto", which it
     * stores as a negative value: the default bound */
    const double slow_bw = (config.copy_slow_bw > 0) ? config.copy_slow_bw
                                                      : CopyMode::kDefaultSlowBw;
    if (!(slow_bw < 1e15)) { /* "inf": every copy would count as slow */
        ucs_error("tm_sm: COPY_SLOW_BW must be a finite bandwidth (got %g B/s)", slow_bw);
        return UCS_ERR_INVALID_PARAM;
    }
    copy_mode_ = CopyMode(static_cast<CopyMode::Setting>(config.copy), slow_bw);
    inline_cap_     = geometry_.elem_size - sizeof(ElemHeader);
    eager_max_      = std::min<size_t>(config.eager_max, size_t{geometry_.seg_size} * (geometry_.fifo_elems / 2));
    if (!choose_bcopy_max(config.bcopy_max)) {
        return UCS_ERR_INVALID_PARAM;
    }
    bcopy_in_place_  = bcopy_in_place_ && (bcopy_max_ > geometry_.seg_size);
    recv_min_        = (config.recv_min == UCS_MEMUNITS_AUTO) ? size_t{geometry_.seg_size} + 1
                                                              : config.recv_min;
    budget_         = config.progress_budget;
    print_stats_    = config.print_stats;
    check_interval_ = seconds_to_ns(config.peer_check_interval);
    stall_timeout_  = seconds_to_ns(config.stall_timeout);
    stopped_timeout_ = seconds_to_ns(config.stopped_timeout);
    close_timeout_   = seconds_to_ns(config.close_timeout);
    iface_serial_   = iface_serials.fetch_add(1) + 1;
    return UCS_OK;
}

/* Our segment, laid out by geometry_, and what lives in it. */
ucs_status_t SmIface::create_segment(uct_md_h md, const SmConfig &config) {
    const ShmBacking backing = config.named_segments ? ShmBacking::kNamed : ShmBacking::kMemfd;
    if (backing == ShmBacking::kNamed) {
        ShmSegment::reap_stale_named();
    }
    ucs_status_t status = ShmSegment::create(geometry_.total_size, backing, config.numa_bind,
                                             &segment_);
    if (status != UCS_OK) {
        return status;
    }
    segment_.prefault(prefault_length(geometry_));
    char *seg = static_cast<char *>(segment_.address());
    header_   = new (seg) SegmentHeader();
    descs_       = seg + geometry_.descs_offset;
    peer_slots_  = reinterpret_cast<PeerSlot *>(seg + geometry_.peers_offset);
    rndv_slots_  = reinterpret_cast<RndvSlot *>(seg + geometry_.rndv_offset);
    fifo_.init(header_, geometry_);
    am_handlers_ = abi::am_handlers(&base);
    if (alloc_status([&] {
            elem_desc_.resize(geometry_.fifo_elems);
            spare_descs_.reset(geometry_.num_descs);
            peer_views_.resize(geometry_.max_peers);
            pending_eps_.reserve(16);
            bounce_.resize(bcopy_max_); /* bcopy packs here when streamed or fragmented */
        }) != UCS_OK) {
        return UCS_ERR_NO_MEMORY;
    }
    if (bcopy_in_place_ &&
        (ShmSegment::create(bcopy_max_, ShmBacking::kMemfd, false, &spill_) != UCS_OK)) {
        bcopy_in_place_ = false; /* logged: bcopies are packed aside */
    }
    for (uint32_t i = 0; i < geometry_.fifo_elems; ++i) {
        elem_desc_[i]        = i;
        fifo_.elem(i)->desc  = i;
    }
    for (uint32_t d = geometry_.fifo_elems; d < geometry_.num_descs; ++d) {
        spare_descs_.push(d);
    }
    status = rndv_.init(config, md, rndv_slots_, geometry_.rndv_slots);
    if (status == UCS_OK) {
        status = staging_.init(md, geometry_, seg);
    }
    if (status != UCS_OK) {
        return status;
    }
    tags_.set_orphan_hook(
        [](void *arg, const TagEngine::Recv *recv) { static_cast<SmIface *>(arg)->orphan_receive(recv); },
        this);
    return UCS_OK;
}

ucs_status_t SmIface::init(uct_md_h md, uct_worker_h, const uct_iface_params_t *,
                           const SmConfig &config) {
    ucs_status_t status = apply_config(config);
    if (status == UCS_OK) {
        status = create_segment(md, config);
    }
    if (status != UCS_OK) {
        return status;
    }
    /* Publish the geometry last: peers validate the header before use. */
    header_->pid          = getpid();
    header_->uid          = getuid();
    header_->iface_serial = iface_serial_;
    header_->boot_id      = boot_id();
    header_->geometry     = geometry_;
    header_->version      = kLayoutVersion;
    header_->closed.store(0, std::memory_order_relaxed);
    std::atomic_thread_fence(std::memory_order_release);
    header_->magic = kSegmentMagic;

    next_check_ = deadline_after(monotonic_ns(), check_interval_);
    ucs_debug("tm_sm: iface %u of process %d: %u x %u B FIFO, %u descriptors of %u B, %s",
              iface_serial_, getpid(), geometry_.fifo_elems, geometry_.elem_size,
              geometry_.num_descs, geometry_.seg_size, tag_enabled() ? "tag offload" : "no tags");
    return UCS_OK;
}

void SmIface::print_counters(FILE *stream) const {
    const TagEngine::Counters &t = tags_.counters();
    fprintf(
        stream,
        "tm_sm iface %u (pid %d): %lu messages received; tag list: %lu posted, %lu matched, "
        "%lu cancelled, %lu refused; %lu unexpected; rendezvous received: %lu direct, %lu cma, "
        "%lu split, %lu pipelined; %lu gets split with their sender, %lu pipelined (%lu finished "
        "by CMA: their owner kept them waiting); %lu gets "
        "of ours split with their reader; the other side wrote %lu of our splits' %lu pieces; "
        "copies timed for RNDV_COPY: %lu by CMA, %lu pipelined; %lu dropped; "
        "%lu eager messages sent with streaming stores (auto turned them on %lu times); "
        "%lu bcopy sends waited for FIFO room; bcopies that may exceed a descriptor: %lu "
        "packed in place, %lu aside\n",
        iface_serial_, static_cast<int>(getpid()), (unsigned long)counters_.received,
        (unsigned long)t.posts, (unsigned long)t.matches, (unsigned long)t.cancels,
        (unsigned long)t.refused, (unsigned long)counters_.unexpected,
        (unsigned long)rndv_.counters().direct, (unsigned long)rndv_.counters().cma,
        (unsigned long)rndv_.counters().split, (unsigned long)rndv_.counters().pipelined,
        (unsigned long)rndv_.counters().get_split, (unsigned long)rndv_.counters().pipelined_gets,
        (unsigned long)staging_.taken_over(), (unsigned long)rndv_.counters().get_served,
        (unsigned long)rndv_.counters().pieces_theirs, (unsigned long)rndv_.counters().pieces,
        (unsigned long)rndv_.copy_choice().chosen(CopyChoice::kCma),
        (unsigned long)rndv_.copy_choice().chosen(CopyChoice::kPipelined), (unsigned long)dropped_,
        (unsigned long)copy_mode_.streamed(), (unsigned long)copy_mode_.switches(),
        (unsigned long)counters_.backlogged, (unsigned long)counters_.packed_in_place,
        (unsigned long)counters_.packed_aside);
}

SmIface::~SmIface() {
    if (base_initialized()) {
        if (print_stats_) {
            print_counters(stderr);
        }
        if (ucs_log_is_enabled(UCS_LOG_LEVEL_DEBUG)) {
            char  *text = nullptr;
            size_t len  = 0;
            FILE  *mem  = open_memstream(&text, &len);
            if (mem != nullptr) {
                print_counters(mem);
                fclose(mem);
                ucs_debug("%s", text);
                free(text);
            }
        }
    }
    drain_outboxes();
    if (header_ != nullptr) {
        header_->closed.store(1, std::memory_order_release);
    }
    if (num_eps_ > 0) {
        ucs_warn("tm_sm: iface %u closed with %zu endpoints still open", iface_serial_, num_eps_);
    }
    for (PeerView &view : peer_views_) {
        view.peer = nullptr;
    }
    peers_.clear(); /* frees our slots in the peers' tables */
}

/* UCP's protocols before 1.16 (v1) put the rendezvous threshold of a
 * tag-offload lane at most at its max_bcopy (ucp_ep_config_init caps the
 * active-message threshold there, and its estimate never below am.max_bcopy):
 * with one descriptor's worth, every message from 8 KiB on would be a
 * rendezvous, although the fragmented eager path is 2-4x faster up to
 * EAGER_MAX (docs/perf.md). From 1.16 UCP chooses eager zero-copy by its
 * estimates, and a bcopy no larger than a descriptor is packed in place. */
bool SmIface::choose_bcopy_max(size_t configured) {
    if (configured == UCS_MEMUNITS_AUTO) {
        bcopy_max_ = kBcopyBeyondSegByDefault ? eager_max_ : geometry_.seg_size;
        return true;
    }
    if ((configured < geometry_.seg_size) || (configured > eager_max_)) {
        ucs_error("tm_sm: BCOPY_MAX %zu out of range: from SEG_SIZE (%u) to EAGER_MAX (%zu, "
                  "at most SEG_SIZE x FIFO_SIZE / 2)", configured, geometry_.seg_size, eager_max_);
        return false;
    }
    bcopy_max_ = configured;
    return true;
}

/* ---- capabilities and addresses ------------------------------------------------ */

ucs_status_t SmIface::query(uct_iface_attr_t *attr) const {
    if (attr == nullptr) {
        return UCS_ERR_INVALID_PARAM;
    }
    memset(attr, 0, sizeof(*attr));
    attr->cap.put.max_zcopy       = SIZE_MAX;
    attr->cap.put.max_iov         = kMaxSendIov;
    attr->cap.put.opt_zcopy_align = 1;
    attr->cap.put.align_mtu       = 1;
    attr->cap.get.max_zcopy       = SIZE_MAX;
    attr->cap.get.max_iov         = kMaxSendIov;
    attr->cap.get.opt_zcopy_align = 1;
    attr->cap.get.align_mtu       = 1;

    attr->cap.am.max_short       = inline_cap_;
    attr->cap.am.max_bcopy       = bcopy_max_;
    attr->cap.am.max_zcopy       = geometry_.seg_size;
    attr->cap.am.max_hdr         = inline_cap_;
    attr->cap.am.max_iov         = kMaxSendIov;
    attr->cap.am.opt_zcopy_align = 1;
    attr->cap.am.align_mtu       = 1;

    attr->cap.flags = UCT_IFACE_FLAG_AM_SHORT | UCT_IFACE_FLAG_AM_BCOPY | UCT_IFACE_FLAG_AM_ZCOPY |
                      UCT_IFACE_FLAG_PENDING | UCT_IFACE_FLAG_GET_ZCOPY | UCT_IFACE_FLAG_PUT_ZCOPY |
                      UCT_IFACE_FLAG_CONNECT_TO_IFACE | UCT_IFACE_FLAG_CB_SYNC |
                      UCT_IFACE_FLAG_ERRHANDLE_PEER_FAILURE | UCT_IFACE_FLAG_EP_CHECK;
    if (tag_enabled()) {
        attr->cap.flags |= UCT_IFACE_FLAG_TAG_EAGER_SHORT | UCT_IFACE_FLAG_TAG_EAGER_BCOPY |
                           UCT_IFACE_FLAG_TAG_EAGER_ZCOPY | UCT_IFACE_FLAG_TAG_RNDV_ZCOPY;
        attr->cap.tag.recv.min_recv        = recv_min_;
        attr->cap.tag.recv.max_zcopy       = SIZE_MAX;
        attr->cap.tag.recv.max_iov         = tags_.limits().max_iov;
        attr->cap.tag.recv.max_outstanding = tags_.limits().list_size;
        attr->cap.tag.eager.max_short      = inline_cap_;
        attr->cap.tag.eager.max_bcopy      = bcopy_max_;
        attr->cap.tag.eager.max_zcopy      = eager_max_;
        attr->cap.tag.eager.max_iov        = kMaxSendIov;
        attr->cap.tag.rndv.max_zcopy       = kRndvMaxZcopy;
        attr->cap.tag.rndv.max_hdr         = geometry_.seg_size - sizeof(RndvInfo);
        attr->cap.tag.rndv.max_iov         = 1;
    }
    attr->device_addr_len = sizeof(DeviceAddress);
    attr->iface_addr_len  = sizeof(IfaceAddress);
    attr->ep_addr_len     = 0;
    attr->max_conn_priv   = 0;
    /* Measured on the reference machine (docs/perf.md): one FIFO element
     * crosses in 60-200 ns depending on where the host places the vCPUs.
     * Bandwidth is each process's own copy rate, "dedicated" as UCX's own
     * shared-memory transports report it (UCP divides "shared" by the
     * processes per node it assumes). */
    attr->latency.c             = 80e-9;
    attr->latency.m             = 0;
    attr->bandwidth.dedicated   = 12e9;
    attr->bandwidth.shared      = 0;
    attr->overhead              = 10e-9;
    attr->priority              = 0;
    attr->max_num_eps           = SIZE_MAX;
    attr->dev_num_paths         = 1;
    return UCS_OK;
}

void SmIface::estimate(abi::EpOperation op, abi::PerfEstimate *perf) {
    switch (op) {
    case abi::EpOperation::kEagerZcopy:
        /* UCP's v2 engine prices an offloaded eager send as this transfer
         * plus a "remote copy" at its own memcpy estimate (7 GB/s), one after
         * the other. tm_sm's transfer is that copy: the receiver copies each
         * descriptor into the posted buffer while the sender fills the next,
         * so the bytes are counted once, there; the transfer's own part is
         * per message (the overhead). Counted twice, UCP would prefer its
         * rendezvous from ~9 KiB, where eager is 1.7-2.7x faster (16-32 KiB,
         * docs/using-with-ucx.md). */
        perf->bandwidth = {kBytesUncounted, 0};
        [[fallthrough]];
    case abi::EpOperation::kAmZcopy:
        /* A zero-copy send is a gather copy into the FIFO element or a
         * descriptor plus a completion: ~20 ns over a short one at 8 B and
         * as much as a bcopy at 4-8 KiB (measured with ucx_perftest over UCP
         * 1.22). Without it UCP's v2 engine sees it as the one send with no
         * copy and prefers it to short and bcopy from 1 byte on. */
        perf->send_pre_overhead += 20e-9;
        break;
    case abi::EpOperation::kGetZcopy:
    case abi::EpOperation::kPutZcopy:
        /* One process_vm_readv/writev: a system call pinning the peer's
         * pages (3.0-3.5 us up to 32 KiB on host E, a paravirtualized guest
         * where any system call costs ~1 us), then one core's copy rate. */
        perf->send_pre_overhead = 3e-6;
        break;
    case abi::EpOperation::kRndvZcopy:
        /* A tag rendezvous: the RTS, CMA calls and the FIN (~2.5 us over an
         * eager send), then a copy split between sender and receiver, two
         * cores at once (measured 23-24 GB/s at 1 MiB with tm_perftest).
         * So UCP keeps eager sends up to tm_sm's eager limit and prefers
         * tm_sm's rendezvous to its own software one, whose get_zcopy is
         * one core's copy. */
        perf->send_pre_overhead += 2.5e-6;
        perf->bandwidth = {2 * perf->bandwidth.dedicated, perf->bandwidth.shared};
        break;
    default:
        break;
    }
}

ucs_status_t SmIface::get_device_address(uct_device_addr_t *addr) const {
    if (addr == nullptr) {
        return UCS_ERR_INVALID_PARAM;
    }
    const DeviceAddress device{host_id()};
    memcpy(addr, &device, sizeof(device));
    return UCS_OK;
}

ucs_status_t SmIface::get_address(uct_iface_addr_t *addr) const {
    if (addr == nullptr) {
        return UCS_ERR_INVALID_PARAM;
    }
    const IfaceAddress self = self_address();
    memcpy(addr, &self, sizeof(self));
    return UCS_OK;
}

int SmIface::is_reachable(const uct_device_addr_t *dev_addr, const uct_iface_addr_t *iface_addr) const {
    if (dev_addr != nullptr) {
        DeviceAddress device;
        memcpy(&device, dev_addr, sizeof(device));
        if (device.host_id != host_id()) {
            return 0;
        }
    }
    if (iface_addr != nullptr) {
        IfaceAddress remote;
        memcpy(&remote, iface_addr, sizeof(remote));
        if ((remote.segment.uid != getuid()) || (remote.segment.pid <= 0)) {
            return 0;
        }
    }
    return 1;
}

IfaceAddress SmIface::self_address() const { return IfaceAddress{segment_.id(), iface_serial_, 0}; }

/* ---- progress ------------------------------------------------------------------- */

namespace {

/* Every field of `e` read once: the sender could still scribble on them.
 * The payload is left to the caller (inline or in a descriptor). */
Message read_message(ElemHeader *e) {
    Message m;
    m.kind    = e->kind;
    m.flags   = e->flags;
    m.length  = e->length;
    m.tag     = e->tag;
    m.imm     = e->imm;
    m.peer    = e->peer;
    m.aux     = e->aux;
    m.elem    = e;
    m.desc    = (m.flags & kFlagDesc) != 0;
    m.payload = nullptr;
    return m;
}

}  // namespace

/* Inline into progress_work() (docs/perf.md, "Code shape of the hot paths"):
 * the two messages a streaming receiver gets each time -- a whole tagged
 * message inline in its element, an inline active message -- handled here
 * without building a Message; everything else in dispatch_general(), out of
 * line, so the loop keeps few registers and no Message on its stack. */
[[gnu::always_inline]] inline void SmIface::dispatch(ElemHeader *e) {
    /* Each field read once: the sender could still scribble on them. */
    const Kind     kind   = e->kind;
    const uint8_t  flags  = e->flags;
    const uint32_t length = e->length;
    if (ucs_likely(!FifoReader::skipped(e) && ((flags & kFlagDesc) == 0) &&
                   (length <= inline_cap_))) {
        if ((kind == Kind::kTagEager) && ((flags & (kFlagFirst | kFlagMore)) == kFlagFirst) &&
            !assembly_.active && tag_enabled()) {
            const uct_tag_t tag = e->tag;
            const uint64_t  imm = e->imm;
            if (ucs_unlikely(!EagerDelivery::whole(tags_, tag, imm, inline_payload(e), length))) {
                receive_unexpected_inline(e, tag, imm, length);
            }
            return;
        }
        if (kind == Kind::kAm) {
            const uint32_t id = e->aux;
            if (ucs_likely(id < UCT_AM_ID_MAX)) {
                const abi::AmHandler &h = am_handlers_[id];
                if (ucs_unlikely(h.cb(h.arg, inline_payload(e), length, 0) == UCS_INPROGRESS)) {
                    ucs_error("tm_sm: callback kept data delivered without UCT_CB_PARAM_FLAG_DESC");
                }
                return;
            }
        }
    }
    dispatch_general(e);
}

/* Whole and inline: no assembly to start, no descriptor to lend -- straight
 * to eager_cb. It queues no background work itself; a callback that does
 * goes through an operation that says so (MayQueueWork). */
void SmIface::receive_unexpected_inline(ElemHeader *e, uct_tag_t tag, uint64_t imm,
                                        uint32_t length) {
    const auto &p = params();
    if (ucs_unlikely(p.eager_cb == nullptr)) {
        Message m = read_message(e); /* for the log: what the element holds */
        m.desc    = false;
        m.payload = inline_payload(e);
        drop(m, "unexpected tagged message but no eager callback");
        return;
    }
    ++counters_.unexpected;
    void *context = nullptr;
    if (ucs_unlikely(p.eager_cb(p.eager_arg, inline_payload(e), length, UCT_CB_PARAM_FLAG_FIRST,
                                tag, imm, &context) == UCS_INPROGRESS)) {
        ucs_error("tm_sm: callback kept data delivered without UCT_CB_PARAM_FLAG_DESC");
    }
}

void SmIface::dispatch_general(ElemHeader *e) {
    const MayQueueWork mark{this}; /* any of these messages may queue work */
    if (ucs_unlikely(FifoReader::skipped(e))) {
        abort_assembly(UCS_ERR_CONNECTION_RESET);
        return;
    }
    Message m = read_message(e);
    if (ucs_unlikely(m.kind == Kind::kDropped)) {
        return; /* a sender gave up on a claimed element: its other fields are stale */
    }
    if (m.desc) {
        if (ucs_unlikely(m.length > geometry_.seg_size)) {
            drop(m, "descriptor payload too long");
            return;
        }
        m.payload = desc_payload(elem_desc_[fifo_.head_index()]);
    } else {
        if (ucs_unlikely(m.length > inline_cap_)) {
            drop(m, "inline payload too long");
            return;
        }
        m.payload = inline_payload(e);
    }
    switch (m.kind) {
    case Kind::kTagEager:
        /* A whole message in a descriptor: matched here too. */
        if (((m.flags & (kFlagFirst | kFlagMore)) == kFlagFirst) && !assembly_.active &&
            tag_enabled()) {
            if (!EagerDelivery::whole(tags_, m.tag, m.imm, m.payload, m.length)) {
                receive_unexpected_eager(m);
            }
            break;
        }
        receive_eager(m);
        break;
    case Kind::kAm:
        receive_am(m);
        break;
    case Kind::kTagRndv:
        rndv_.receive_rts(m);
        break;
    case Kind::kTagRndvReq:
        receive_rndv_request(m);
        break;
    case Kind::kRndvFin:
        rndv_.receive_fin(m);
        break;
    case Kind::kRndvRtr:
        rndv_.receive_rtr(m);
        break;
    case Kind::kGetRtr: rndv_.receive_get_rtr(m); break;
    case Kind::kPullReq:
        staging_.receive_request(m);
        break;
    case Kind::kPullNack:
        staging_.receive_nack(m);
        break;
    default:
        drop(m, "unknown kind");
        return;
    }
    if (m.desc && (m.length >= kRotateMinBytes)) {
        rotate_desc(e);
    }
}

void SmIface::rotate_desc(ElemHeader *e) {
    if (spare_descs_.empty() || !fifo_.backlog()) {
        /* The layer above holds every spare one, or nothing is queued: a
         * sender waits for each answer, and the descriptor just read is
         * the one still in both caches. */
        return;
    }
    const uint32_t index = fifo_.head_index();
    const uint32_t used  = elem_desc_[index];
    const uint32_t fresh = spare_descs_.pop();
    elem_desc_[index]    = fresh;
    e->desc              = fresh; /* before release(): the sender reads it after claiming */
    spare_descs_.push(used);      /* room: one was just taken */
}

unsigned SmIface::progress_work(ElemHeader *e) {
    const InProgress inside{this};
    unsigned         count = 0;
    while (e != nullptr) {
        consume(e);
        if (++count >= budget_) {
            break;
        }
        e = fifo_.poll();
    }
    if (ucs_unlikely(maybe_background_)) {
        count += background_progress();
    } else if (ucs_unlikely(--slow_countdown_ == 0)) {
        count += slow_progress();
    }
    return count;
}

unsigned SmIface::background_progress() {
    const InProgress inside{this};
    unsigned count = tags_.progress();
    if (rndv_.has_splits()) {
        count += rndv_.progress_splits();
    }
    if (staging_.busy()) {
        count += staging_.progress();
    }
    if (has_deferred_work() || (--slow_countdown_ == 0)) {
        count += slow_progress();
    }
    /* Anything the calls above queued (their callbacks included) shows here. */
    maybe_background_ = has_background_work();
    return count;
}

unsigned SmIface::send_outboxes() {
    unsigned count = 0;
    has_outbox_    = false;
    for (const auto &peer : peers_) {
        while (!peer->outbox.empty() && !peer->dead()) {
            if (send_control_now(peer.get(), peer->outbox.front()) != UCS_OK) {
                has_outbox_ = true;
                break;
            }
            peer->outbox.erase(peer->outbox.begin());
            ++count;
        }
    }
    return count;
}

/* A receiver that took more rendezvous sends than its peer's FIFO holds
 * FINs for keeps the rest in outboxes; and a peer drops a control message it
 * reads after our slot in its table is gone. Closed before both are taken,
 * senders whose data we have would complete with UCS_ERR_CONNECTION_RESET. */
void SmIface::drain_outboxes() {
    const uint64_t deadline = deadline_after(monotonic_ns(), close_timeout_);
    for (unsigned round = 0;; ++round) {
        send_outboxes();
        size_t owed = 0; /* control messages our live peers have not taken */
        for (const auto &peer : peers_) {
            if (!peer->dead()) {
                owed += peer->outbox.size() + !peer->fifo().taken(peer->last_control);
            }
        }
        if (owed == 0) {
            return;
        }
        if (monotonic_ns() >= deadline) {
            ucs_warn("tm_sm: iface %u closed before its peers took %zu or more rendezvous "
                     "completions (CLOSE_TIMEOUT): those senders see UCS_ERR_CONNECTION_RESET",
                     iface_serial_, owed);
            return;
        }
        if ((round % 64) == 63) {
            for (const auto &peer : peers_) {
                peer->check_alive(); /* a closed or exited peer is not waited for */
            }
        }
        sched_yield(); /* the peers read their FIFOs */
    }
}

unsigned SmIface::slow_progress() {
    const InProgress   inside{this};
    const MayQueueWork mark{this}; /* peer checks and retries may queue work */
    slow_countdown_ = kSlowProgressPeriod;
    unsigned count  = 0;
    if (rndv_.has_deferred_gets()) {
        count += rndv_.progress_deferred_gets();
    }
    if (has_outbox_) {
        count += send_outboxes();
    }
    for (size_t i = 0; i < backlogged_.size();) { /* a sent backlog leaves the list */
        if (send_backlog(backlogged_[i])) {
            ++count;
        } else {
            ++i;
        }
    }
    if (!pending_eps_.empty()) {
        count += dispatch_pending();
    }
    const uint64_t now = monotonic_ns();
    if (now >= next_check_) {
        next_check_ = deadline_after(now, check_interval_);
        rndv_.check();
        check_peers();
        sweep_peer_table(now);
        recover_stall(now);
    } else if (ucs_unlikely(dead_until_ != 0)) {
        recover_stall(now); /* more elements a dead process claimed may follow */
    }
    if (!flush_waiters_.empty()) {
        complete_flushes();
    }
    return count;
}

/* Everything published in our FIFO now (one lap at most: live senders go on
 * publishing), as progress would take it. */
void SmIface::take_published() {
    for (uint32_t n = 0; n < geometry_.fifo_elems; ++n) {
        ElemHeader *e = fifo_.poll();
        if (e == nullptr) {
            return;
        }
        consume(e);
    }
}

void SmIface::check_peers() {
    if (ucs_unlikely(segment_.truncated()) && !segment_lost_) {
        /* Our FIFO, peer table and rendezvous slots are gone for every peer. */
        ucs_error("tm_sm: this iface's segment was truncated by another process: all its "
                  "endpoints fail");
        segment_lost_ = true;
    }
    /* fail_peer() runs callbacks that may destroy endpoints and peers. */
    for (size_t i = 0; i < peers_.size(); ++i) {
        RemotePeer *peer = peers_[i].get();
        if (!peer->reported() && (segment_lost_ || !peer->check_alive())) {
            peer->set_reported();
            take_published(); /* what it sent before it went, its FINs included, counts */
            fail_peer(peer);
            i = static_cast<size_t>(-1); /* the list may have changed: rescan */
        }
    }
}

/* A sender that died between claiming an element and publishing it would
 * stop the FIFO forever. After STALL_TIMEOUT, if a process in our peer table
 * is gone, free its slot and remember the tail: all its claims are below it
 * (a dead process claims nothing more), possibly several and not adjacent.
 * Until the head passes that tail, an unpublished element at the head is
 * skipped once it was stalled for STALL_TIMEOUT or STALL_TIMEOUT has passed
 * since the death was seen (it was claimed before, so it is that late).
 * A sender that is alive but stopped (SIGSTOP, a debugger) is treated the
 * same once the same element has waited STOPPED_TIMEOUT: a running sender
 * publishes within microseconds of its claim, so a stopped one is the
 * claimant. It is dropped as UCX's keepalive drops a silent peer, and
 * learns it when it resumes (RemotePeer::check_alive). */
void SmIface::recover_stall(uint64_t now) {
    if (dead_until_ <= fifo_.head()) {
        dead_until_ = 0;
    }
    if (!fifo_.stalled()) {
        stall_since_ = 0;
        stall_began_ = 0;
        return;
    }
    if (stall_since_ == 0) {
        stall_since_ = now;
    }
    if ((stall_began_ == 0) || (stall_head_ != fifo_.head())) {
        stall_began_ = now;
        stall_head_  = fifo_.head();
    }
    const bool stalled_long = (now - stall_since_ >= stall_timeout_);
    const bool stopped_long = (now - stall_began_ >= stopped_timeout_);
    if (stalled_long) {
        for (uint32_t i = 0; i < geometry_.max_peers; ++i) {
            const uint32_t word = peer_slots_[i].state.load(std::memory_order_acquire);
            if ((word & 3) != kPeerUsed) {
                continue;
            }
            const int32_t pid  = peer_slots_[i].segment.pid;
            const bool    gone = (pid > 0) && process_exited(pid);
            if (!gone && !(stopped_long && (pid > 0) && process_stopped(pid))) {
                continue;
            }
            if (!gone) {
                ucs_warn("tm_sm: process %d stopped for more than STOPPED_TIMEOUT (%.3f s) "
                         "holding this FIFO: dropped from iface %u's peers", pid,
                         static_cast<double>(stopped_timeout_) / 1e9, iface_serial_);
                declare_failed(pid);
            }
            free_peer_slot(i, word, now);
        }
    }
    if ((fifo_.head() >= dead_until_) ||
        !(stalled_long || (now - dead_seen_at_ >= stall_timeout_))) {
        if (stalled_long) {
            stall_since_ = 0; /* nobody died: look again after another timeout */
        }
        return;
    }
    if (fifo_.skip_stalled()) {
        ucs_warn("tm_sm: skipped FIFO element %lu claimed by a process that died or was dropped",
                 static_cast<unsigned long>(fifo_.head()));
    }
    stall_since_ = 0;
}

void SmIface::free_peer_slot(uint32_t slot, uint32_t word, uint64_t now) {
    if (!peer_slots_[slot].state.compare_exchange_strong(word, (word & ~3u) + 4,
                                                         std::memory_order_release)) {
        return; /* changed meanwhile */
    }
    /* Every claim it made is below the tail now: stall recovery skips them. */
    dead_until_   = std::max(dead_until_, fifo_.tail());
    dead_seen_at_ = now;
    drop_view(slot);
}

void SmIface::drop_view(uint32_t slot) {
    PeerView &view = peer_views_[slot];
    if (view.peer != nullptr) {
        RemotePeer *peer = view.peer;
        view             = PeerView{};
        put_peer(peer); /* its pidfd and mapping go with the last reference */
    }
}

/* A few entries of our peer table per peer check, for what nothing else
 * gives back:
 *  - a sender that died without stalling the FIFO still holds its entry
 *    (MAX_PEERS such deaths and no sender can connect) and our attachment
 *    back to it;
 *  - an entry its sender left (it destroyed its endpoints, or closed) or
 *    that another sender took since: our view of it still holds the
 *    attachment to the one that left, a pidfd and a mapping of its segment,
 *    until a message names that entry again, which may be never. */
void SmIface::sweep_peer_table(uint64_t now) {
    const uint32_t budget = std::min<uint32_t>(kSweepPerCheck, geometry_.max_peers);
    for (uint32_t n = 0; n < budget; ++n) {
        const uint32_t i    = sweep_cursor_;
        sweep_cursor_       = (sweep_cursor_ + 1) % geometry_.max_peers;
        const uint32_t word = peer_slots_[i].state.load(std::memory_order_acquire);
        if (((word & 3) == kPeerUsed) && process_exited(peer_slots_[i].segment.pid)) {
            free_peer_slot(i, word, now);
        } else if (word != peer_views_[i].word) {
            drop_view(i);
        }
    }
}

void SmIface::declare_failed(int32_t pid) {
    for (const auto &peer : peers_) {
        if (peer->pid() == pid) {
            peer->declare_dead();
            next_check_ = 0; /* report it from the next progress */
        }
    }
}

/* ---- receiving -------------------------------------------------------------------- */

void SmIface::drop(const Message &m, const char *why) {
    ++dropped_;
    /* Rate-limit: a misbehaving peer must not flood the log. */
    if ((dropped_ & (dropped_ - 1)) == 0) {
        ucs_error("tm_sm: iface %u dropped a malformed message from peer slot %u (kind %u, "
                  "flags 0x%x, length %u): %s [%lu dropped so far]", iface_serial_, m.peer,
                  static_cast<unsigned>(m.kind), m.flags, m.length, why,
                  static_cast<unsigned long>(dropped_));
    }
}

template <typename Invoke>
void SmIface::deliver(const Message &m, const Invoke &invoke) {
    unsigned flags = 0;
    if (m.desc && !spare_descs_.empty()) {
        flags = UCT_CB_PARAM_FLAG_DESC;
        /* uct_iface_release_desc() finds us through this pointer. */
        stamp_desc(static_cast<char *>(m.payload) - params().rx_headroom);
    }
    const ucs_status_t status = invoke(m.payload, flags);
    if (status == UCS_INPROGRESS) {
        if (flags & UCT_CB_PARAM_FLAG_DESC) {
            /* The layer above keeps the descriptor: give the element another. */
            const uint32_t spare = spare_descs_.pop();
            const uint32_t index = fifo_.index(m.elem);
            elem_desc_[index]    = spare;
            m.elem->desc         = spare;
        } else {
            ucs_error("tm_sm: callback kept data delivered without UCT_CB_PARAM_FLAG_DESC");
        }
    }
}

void SmIface::release_desc(void *desc) {
    const char  *payload = static_cast<char *>(desc) + params().rx_headroom;
    const size_t offset  = static_cast<size_t>(payload - descs_) - geometry_.desc_payload;
    const uint32_t d     = static_cast<uint32_t>(offset / geometry_.desc_stride);
    if ((payload < descs_) || (offset % geometry_.desc_stride != 0) || (d >= geometry_.num_descs)) {
        if (!release_held(payload)) {
            ucs_error("tm_sm: uct_iface_release_desc(%p) is not a descriptor of iface %u", desc,
                      iface_serial_);
        }
        return;
    }
    if (!spare_descs_.push(d)) {
        ucs_error("tm_sm: uct_iface_release_desc(%p): descriptor %u released twice", desc, d);
    }
}

/* ---- messages held until whole (Assembly) ---- */

/* held_ keeps a descriptor's front (the release pointer and the layer
 * above's headroom) before the data, so that a held message goes up with
 * UCT_CB_PARAM_FLAG_DESC like any other: UCP copies a message without it
 * into buffers of its largest active-message size, or onto its stack for a
 * synchronous send, which is no place for up to EAGER_MAX bytes. */
bool SmIface::hold_first(const Message &m) {
    return alloc_status([&] {
               held_.resize(geometry_.desc_payload);
               held_.insert(held_.end(), static_cast<const char *>(m.payload),
                            static_cast<const char *>(m.payload) + m.length);
           }) == UCS_OK;
}

template <typename Invoke>
void SmIface::deliver_held(const Invoke &invoke) {
    char        *payload = held_.data() + geometry_.desc_payload;
    const size_t length  = held_.size() - geometry_.desc_payload;
    /* Room to track it first: a callback may keep it. */
    const bool   lendable =
        alloc_status([&] { lent_held_.reserve(lent_held_.size() + 1); }) == UCS_OK;
    stamp_desc(payload - params().rx_headroom);
    if (invoke(payload, length, lendable ? UCT_CB_PARAM_FLAG_DESC : 0) != UCS_INPROGRESS) {
        return;
    }
    if (!lendable) {
        ucs_error("tm_sm: callback kept data delivered without UCT_CB_PARAM_FLAG_DESC");
        return;
    }
    /* Kept by the layer above until uct_iface_release_desc (release_held). */
    lent_held_.push_back(std::move(held_));
    held_.clear();
    if (!spare_held_.empty()) {
        held_ = std::move(spare_held_.back());
        spare_held_.pop_back();
    }
}

bool SmIface::release_held(const char *payload) {
    for (size_t i = 0; i < lent_held_.size(); ++i) {
        if (lent_held_[i].data() + geometry_.desc_payload != payload) {
            continue;
        }
        std::vector<char> buffer = std::move(lent_held_[i]);
        lent_held_[i]            = std::move(lent_held_.back());
        lent_held_.pop_back();
        buffer.clear();
        alloc_status([&] { spare_held_.push_back(std::move(buffer)); }); /* else freed */
        return true;
    }
    return false;
}

void SmIface::receive_am(const Message &m) {
    if (m.aux >= UCT_AM_ID_MAX) {
        drop(m, "active message id out of range");
        return;
    }
    const uint8_t id = static_cast<uint8_t>(m.aux);
    if (ucs_unlikely((m.flags & (kFlagFirst | kFlagMore)) != kFlagFirst)) {
        receive_am_fragment(m, id);
        return;
    }
    deliver(m, [&](void *data, unsigned flags) {
        return abi::invoke_am(&base, id, data, m.length, flags);
    });
}

/* A bcopy active message above one descriptor (BCOPY_MAX): its fragments are
 * gathered in held_ and handed up whole, as am_cb takes one buffer. */
void SmIface::receive_am_fragment(const Message &m, uint8_t id) {
    if (m.flags & kFlagFirst) {
        touch_descriptors();
        if (ucs_unlikely(assembly_.active)) {
            abort_assembly(UCS_ERR_CONNECTION_RESET);
        }
        assembly_       = Assembly{true, m.peer, nullptr, 0, m.length};
        assembly_.held  = true;
        assembly_.am    = true;
        assembly_.am_id = id;
        assembly_.lost  = !hold_first(m);
        return;
    }
    if (!assembly_.active || (assembly_.peer != m.peer) || !assembly_.am ||
        (assembly_.am_id != id)) {
        drop(m, "active message fragment outside a message");
        return;
    }
    receive_held_fragment(m);
}

void SmIface::receive_eager(const Message &m) {
    const bool more = (m.flags & kFlagMore) != 0;
    if (m.flags & kFlagFirst) {
        if (more) {
            touch_descriptors();
        }
        if (ucs_unlikely(assembly_.active)) {
            abort_assembly(UCS_ERR_CONNECTION_RESET);
        }
        if (ucs_unlikely(!tag_enabled())) {
            drop(m, "tagged message but tag offload is off");
            return;
        }
        TagEngine::Recv *recv;
        EagerDelivery::piece(tags_, &recv, m.tag, m.imm, 0, m.payload, m.length, true, !more);
        if (recv == nullptr) {
            receive_unexpected_eager(m);
        } else if (more) {
            assembly_ = Assembly{true, m.peer, recv, m.tag, m.length};
        }
        return;
    }
    if (!assembly_.active || (assembly_.peer != m.peer) || assembly_.am) {
        drop(m, "fragment outside a message");
        return;
    }
    if (assembly_.held) {
        receive_held_fragment(m);
        return;
    }
    const size_t offset = assembly_.offset;
    assembly_.offset += m.length;
    assembly_.active = more; /* before the completion: it may start another message */
    EagerDelivery::piece(tags_, &assembly_.recv, assembly_.tag, m.imm, offset, m.payload, m.length,
                         false, !more);
}

void SmIface::receive_unexpected_eager(const Message &m) {
    if (ucs_unlikely(params().eager_cb == nullptr)) {
        drop(m, "unexpected tagged message but no eager callback");
        return;
    }
    ++counters_.unexpected;
    if (m.flags & kFlagMore) {
        /* Held here until whole and handed up in one call, with its imm, as
         * the layer above gets a bcopy or zcopy message from UCX's RC (UCX's
         * own test_tag reads imm from the first call), and so that a sender
         * dying midway leaves it no half message. */
        assembly_      = Assembly{true, m.peer, nullptr, m.tag, m.length};
        assembly_.held = true;
        assembly_.lost = !hold_first(m);
        return;
    }
    void *context = nullptr;
    deliver(m, [&](void *data, unsigned flags) {
        return params().eager_cb(params().eager_arg, data, m.length,
                                 flags | UCT_CB_PARAM_FLAG_FIRST, m.tag, m.imm, &context);
    });
}

/* A later fragment of an unexpected message held until whole; the last one
 * hands it up in one piece. */
void SmIface::receive_held_fragment(const Message &m) {
    const bool more   = (m.flags & kFlagMore) != 0;
    assembly_.offset += m.length;
    if (assembly_.offset > size_t{geometry_.seg_size} * (geometry_.fifo_elems / 2)) {
        assembly_.lost = true; /* longer than any sender may send: not held */
        held_.resize(geometry_.desc_payload);
    }
    if (!assembly_.lost) {
        assembly_.lost = alloc_status([&] {
                             held_.insert(held_.end(), static_cast<const char *>(m.payload),
                                            static_cast<const char *>(m.payload) + m.length);
                         }) != UCS_OK;
    }
    if (more) {
        return;
    }
    assembly_.active = false;
    if (assembly_.lost) {
        ucs_error("tm_sm: a %zu-byte %s %lu could not be held (out of memory, or longer than "
                  "a sender may send): dropped", assembly_.offset,
                  assembly_.am ? "active message, id" : "unexpected message, tag",
                  static_cast<unsigned long>(assembly_.am ? assembly_.am_id : assembly_.tag));
        return;
    }
    if (assembly_.am) {
        const uint8_t id = assembly_.am_id;
        deliver_held([&](void *data, size_t length, unsigned flags) {
            return abi::invoke_am(&base, id, data, length, flags);
        });
        return;
    }
    const uct_tag_t tag = assembly_.tag;
    deliver_held([&](void *data, size_t length, unsigned flags) {
        void *context = nullptr;
        return params().eager_cb(params().eager_arg, data, length, flags | UCT_CB_PARAM_FLAG_FIRST,
                                 tag, m.imm, &context);
    });
}

void SmIface::abort_assembly(ucs_status_t status) {
    if (!assembly_.active) {
        return;
    }
    assembly_.active = false;
    if (assembly_.held) {
        ucs_error("tm_sm: %s 0x%lx lost its last fragments (sender failed): dropped, none of "
                  "it delivered", assembly_.am ? "active message with id" : "unexpected message with tag",
                  static_cast<unsigned long>(assembly_.am ? assembly_.am_id : assembly_.tag));
        return;
    }
    if (assembly_.recv != nullptr) {
        tags_.complete(assembly_.recv, assembly_.tag, 0, assembly_.offset, status);
    } else {
        ucs_error("tm_sm: unexpected message with tag 0x%lx lost its last fragments (sender "
                  "failed)", static_cast<unsigned long>(assembly_.tag));
    }
}

void SmIface::receive_rndv_request(const Message &m) {
    if (ucs_unlikely(!tag_enabled())) {
        drop(m, "tagged message but tag offload is off");
        return;
    }
    TagEngine::Recv *recv = tags_.match(m.tag);
    if (recv != nullptr) {
        tags_.complete_rndv(recv, m.tag, m.payload, m.length);
        return;
    }
    if (ucs_unlikely(!unexpected_rndv(m.tag, m.payload, m.length, 0, 0, nullptr))) {
        drop(m, "unexpected rendezvous request but no rndv callback");
    }
}

bool SmIface::unexpected_rndv(uct_tag_t tag, const void *header, unsigned header_length,
                              uint64_t address, size_t length, const PackedRkey *rkey) {
    if (params().rndv_cb == nullptr) {
        return false;
    }
    ++counters_.unexpected;
    params().rndv_cb(params().rndv_arg, 0, tag, header, header_length, address, length, rkey);
    return true;
}

/* ---- peers --------------------------------------------------------------------------- */

RemotePeer *SmIface::peer_of(uint16_t slot) {
    if (slot >= geometry_.max_peers) {
        return nullptr;
    }
    PeerView      &view = peer_views_[slot];
    const uint32_t word = peer_slots_[slot].state.load(std::memory_order_acquire);
    if ((word == view.word) && (view.peer != nullptr)) {
        return view.peer;
    }
    if ((word & 3) != kPeerUsed) {
        return nullptr;
    }
    IfaceAddress remote;
    if (!peer_address(slot, &remote) ||
        (peer_slots_[slot].state.load(std::memory_order_acquire) != word)) {
        return nullptr; /* changed while we read it */
    }
    RemotePeer *peer;
    if (find_or_attach(remote, &peer) != UCS_OK) {
        return nullptr;
    }
    drop_view(slot);
    view = PeerView{word, peer};
    return peer;
}

ucs_status_t SmIface::unattached_peer_status(uint16_t slot) const {
    if (slot >= geometry_.max_peers) {
        return UCS_ERR_UNREACHABLE;
    }
    const uint32_t word = peer_slots_[slot].state.load(std::memory_order_acquire);
    return (((word & 3) != kPeerUsed) || process_exited(peer_slots_[slot].segment.pid))
               ? UCS_ERR_CONNECTION_RESET
               : UCS_ERR_UNREACHABLE;
}

bool SmIface::peer_address(uint16_t slot, IfaceAddress *out) const {
    if (slot >= geometry_.max_peers) {
        return false;
    }
    const uint32_t word = peer_slots_[slot].state.load(std::memory_order_acquire);
    if ((word & 3) != kPeerUsed) {
        return false;
    }
    *out = IfaceAddress{peer_slots_[slot].segment, peer_slots_[slot].iface_serial, 0};
    return peer_slots_[slot].state.load(std::memory_order_acquire) == word; /* not changed meanwhile */
}

ucs_status_t SmIface::find_or_attach(const IfaceAddress &remote, RemotePeer **out) {
    for (const auto &peer : peers_) {
        if (!peer->dead() && same_iface(peer->address(), remote)) {
            ++peer->refs;
            *out = peer.get();
            return UCS_OK;
        }
    }
    RemotePeer  *peer;
    ucs_status_t status = RemotePeer::attach(remote, self_address(), &peer);
    if (status != UCS_OK) {
        return status;
    }
    if (alloc_status([&] {
            peers_.emplace_back(peer);
        }) != UCS_OK) {
        delete peer;
        return UCS_ERR_NO_MEMORY;
    }
    if (bcopy_in_place_) {
        peer->enable_pack_windows(spill_);
    }
    peer->refs = 1;
    *out       = peer;
    return UCS_OK;
}

void SmIface::put_peer(RemotePeer *peer) {
    if (--peer->refs > 0) {
        return;
    }
    for (PeerView &view : peer_views_) {
        if (view.peer == peer) {
            view = PeerView{};
        }
    }
    auto it = std::find_if(peers_.begin(), peers_.end(),
                           [peer](const std::unique_ptr<RemotePeer> &p) { return p.get() == peer; });
    if (it != peers_.end()) {
        peers_.erase(it);
    }
}

void SmIface::fail_peer(RemotePeer *peer) {
    ++peer->refs; /* keep it while callbacks destroy endpoints */
    peer->outbox.clear();
    for (SmEp *ep : peer->eps) {
        ep->failed = true;
        drop_backlog(ep);
    }
    rndv_.fail_peer(peer);
    if (assembly_.active && (peer_views_[assembly_.peer].peer == peer)) {
        abort_assembly(UCS_ERR_CONNECTION_RESET);
    }
    /* The error handler may destroy any endpoint: rescan after each call. */
    for (;;) {
        auto it = std::find_if(peer->eps.begin(), peer->eps.end(),
                               [](const SmEp *ep) { return !ep->notified; });
        if (it == peer->eps.end()) {
            break;
        }
        SmEp *ep     = *it;
        ep->notified = true;
        abi::handle_ep_error(&base, &ep->super, UCS_ERR_CONNECTION_RESET);
    }
    /* A dead sender we attached back to: its entries in our table go now,
     * with the attachment, not when the sweep comes by (MAX_PEERS /
     * kSweepPerCheck checks later, after the iface may have closed). */
    if (peer->process_exited()) {
        const uint64_t now = monotonic_ns();
        for (uint32_t i = 0; i < geometry_.max_peers; ++i) {
            if (peer_views_[i].peer != peer) {
                continue;
            }
            const uint32_t word = peer_slots_[i].state.load(std::memory_order_acquire);
            if (word == peer_views_[i].word) {
                free_peer_slot(i, word, now);
            } else {
                drop_view(i);
            }
        }
    }
    put_peer(peer);
}

ucs_status_t SmIface::tag_recv_cancel(uct_tag_context_t *ctx, int force) {
    const MayQueueWork mark{this};
    if (ucs_unlikely(!tag_enabled())) {
        return UCS_ERR_UNSUPPORTED;
    }
    return tags_.cancel(ctx, force);
}

}  // namespace sm
}  // namespace uct_tm
