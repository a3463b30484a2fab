#include "worker.h"

#include "compact_address.h"

#include <ucs/async/async_fwd.h>
#include <ucs/debug/log_def.h>

#include <algorithm>
#include <cstring>
#include <new>
#include <random>

#include <ifaddrs.h>
#include <net/if.h>
#include <unistd.h>

namespace uct_tm {
namespace proto {

/* One iface entry of a peer's worker address (pointing into the address). */
struct PeerIface {
    std::string tl;
    const char *dev;
    size_t      dev_len;
    const char *ifa;
    size_t      iface_len;
};

namespace {

/* The ifaces' error handler: the transport reports a failed peer. */
ucs_status_t ep_error_cb(void *arg, uct_ep_h ep, ucs_status_t status) {
    guarded("an endpoint failure", [&]() __attribute__((always_inline)) {
        static_cast<Worker *>(arg)->ep_failed(ep, status);
    });
    return UCS_OK;
}

/* Splits "a,b:dev" into (tl, dev) pairs. */
std::vector<std::pair<std::string, std::string>> parse_transports(const std::string &spec) {
    std::vector<std::pair<std::string, std::string>> out;
    size_t pos = 0;
    while (pos <= spec.size()) {
        size_t end = spec.find(',', pos);
        if (end == std::string::npos) {
            end = spec.size();
        }
        const std::string item  = spec.substr(pos, end - pos);
        const size_t      colon = item.find(':');
        if (!item.empty()) {
            out.emplace_back(item.substr(0, colon),
                             colon == std::string::npos ? std::string() : item.substr(colon + 1));
        }
        pos = end + 1;
    }
    return out;
}

/* The MD resources of `component`; none when it cannot tell. */
std::vector<uct_md_resource_desc_t> md_resources(uct_component_h component) {
    uct_component_attr_t cattr = {};
    cattr.field_mask = UCT_COMPONENT_ATTR_FIELD_NAME | UCT_COMPONENT_ATTR_FIELD_MD_RESOURCE_COUNT;
    if (uct_component_query(component, &cattr) != UCS_OK) {
        return {};
    }
    std::vector<uct_md_resource_desc_t> mds(cattr.md_resource_count);
    cattr.field_mask   = UCT_COMPONENT_ATTR_FIELD_MD_RESOURCES;
    cattr.md_resources = mds.data();
    if ((cattr.md_resource_count == 0) || (uct_component_query(component, &cattr) != UCS_OK)) {
        return {};
    }
    return mds;
}

/* The MD `name` of `component`, opened with its default configuration;
 * null when it does not open. */
uct_md_h open_md(uct_component_h component, const char *name) {
    uct_md_config_t *mdc;
    if (uct_md_config_read(component, nullptr, nullptr, &mdc) != UCS_OK) {
        return nullptr;
    }
    uct_md_h           md;
    const ucs_status_t status = uct_md_open(component, name, mdc, &md);
    uct_config_release(mdc);
    return (status == UCS_OK) ? md : nullptr;
}

/* Whether `dev` names a loopback network interface (tcp's "lo"). */
bool is_loopback(const char *dev) {
    ifaddrs *list = nullptr;
    if (getifaddrs(&list) != 0) {
        return false;
    }
    bool loopback = false;
    for (const ifaddrs *a = list; a != nullptr; a = a->ifa_next) {
        loopback |= (a->ifa_name != nullptr) && (strcmp(a->ifa_name, dev) == 0) &&
                    ((a->ifa_flags & IFF_LOOPBACK) != 0);
    }
    freeifaddrs(list);
    return loopback;
}

/* The device of `md` that offers `tl`: `dev`; with `dev` empty the first
 * that is not a loopback interface (which reaches this host only, and
 * comes first on some hosts), or the loopback if it is the only one;
 * empty when there is none. */
std::string tl_device(uct_md_h md, const std::string &tl, const std::string &dev) {
    uct_tl_resource_desc_t *res;
    unsigned                nres;
    std::string             device, loopback;
    if (uct_md_query_tl_resources(md, &res, &nres) == UCS_OK) {
        for (unsigned r = 0; (r < nres) && device.empty(); ++r) {
            if ((tl != res[r].tl_name) || (!dev.empty() && (dev != res[r].dev_name))) {
                continue;
            }
            if (dev.empty() && is_loopback(res[r].dev_name)) {
                loopback = res[r].dev_name;
            } else {
                device = res[r].dev_name;
            }
        }
        uct_release_tl_resource_list(res);
    }
    return device.empty() ? loopback : device;
}

/* tm_sm asks UCP to keep receives that fit one of its descriptors off its
 * tag list (RECV_MIN, reported as min_recv): UCP's offloaded receive costs
 * more than its own matching. The layer's receives cost it nothing more
 * offloaded, and it matches in the transport: it asks for every receive.
 * The setting's name carries the transport's prefix from UCX 1.17 on. */
void take_every_receive(uct_iface_config_t *ic, const std::string &tl) {
    if ((tl == "tm_sm") && (uct_config_modify(ic, "RECV_MIN", "0") == UCS_ERR_NO_ELEM)) {
        uct_config_modify(ic, "TM_SM_RECV_MIN", "0");
    }
}

/* Opens iface.tl on `device` of `md` into iface.iface. */
ucs_status_t open_on(Iface &iface, uct_md_h md, const std::string &device, uct_worker_h uworker) {
    uct_iface_config_t *ic;
    ucs_status_t status = uct_md_iface_config_read(md, iface.tl.c_str(), nullptr, nullptr, &ic);
    if (status != UCS_OK) {
        return status;
    }
    take_every_receive(ic, iface.tl);
    uct_iface_params_t params = {};
    params.field_mask         = UCT_IFACE_PARAM_FIELD_OPEN_MODE | UCT_IFACE_PARAM_FIELD_DEVICE |
                        UCT_IFACE_PARAM_FIELD_STATS_ROOT | UCT_IFACE_PARAM_FIELD_RX_HEADROOM;
    params.open_mode            = UCT_IFACE_OPEN_MODE_DEVICE;
    params.mode.device.tl_name  = iface.tl.c_str();
    params.mode.device.dev_name = device.c_str();
    params.stats_root           = nullptr;
    params.rx_headroom          = 0;
    /* a failed peer fails its endpoint's sends instead of leaving them waiting */
    params.field_mask |= UCT_IFACE_PARAM_FIELD_ERR_HANDLER | UCT_IFACE_PARAM_FIELD_ERR_HANDLER_ARG |
                         UCT_IFACE_PARAM_FIELD_ERR_HANDLER_FLAGS;
    params.err_handler       = ep_error_cb;
    params.err_handler_arg   = iface.worker;
    params.err_handler_flags = 0; /* called from progress */
    set_tag_callbacks(&params, &iface);
    status = uct_iface_open(md, uworker, &params, ic, &iface.iface);
    uct_config_release(ic);
    return status;
}

/* Tries the MDs of `component` in turn: the first that offers the device
 * opens the iface (and the iface keeps it), or says in *status why not,
 * which ends the search in this component. */
void open_in_component(Iface &iface, uct_component_h component, const std::string &dev,
                       uct_worker_h uworker, ucs_status_t *status) {
    for (const uct_md_resource_desc_t &mdr : md_resources(component)) {
        uct_md_h md = open_md(component, mdr.md_name);
        if (md == nullptr) {
            continue;
        }
        const std::string device = tl_device(md, iface.tl, dev);
        if (device.empty()) {
            uct_md_close(md);
            continue;
        }
        *status = open_on(iface, md, device, uworker);
        if (*status != UCS_OK) {
            uct_md_close(md);
            return;
        }
        iface.component = component;
        iface.md        = md;
        iface.dev       = device;
        return;
    }
}

/* Reads the iface's attributes; UCS_ERR_UNSUPPORTED when it lacks what the
 * protocols need. */
ucs_status_t read_iface_attr(Iface &i) {
    const ucs_status_t status = uct_iface_query(i.iface, &i.attr);
    if (status != UCS_OK) {
        return status;
    }
    const uint64_t flags = i.attr.cap.flags;
    /* connect-to-iface is preferred when a transport offers both: no
     * endpoint address to exchange */
    i.to_ep = !(flags & UCT_IFACE_FLAG_CONNECT_TO_IFACE) &&
              (flags & UCT_IFACE_FLAG_CONNECT_TO_EP) && (i.attr.ep_addr_len > 0) &&
              (i.attr.ep_addr_len <= UINT16_MAX);
    if (!(flags & UCT_IFACE_FLAG_AM_BCOPY) ||
        (!(flags & UCT_IFACE_FLAG_CONNECT_TO_IFACE) && !i.to_ep) ||
        (i.attr.cap.am.max_bcopy < sizeof(MsgHeader) + 64) || (i.tl.size() > UINT8_MAX)) {
        ucs_error("tm_proto: transport %s lacks am_bcopy or a way to connect (to an iface or "
                  "to an endpoint)",
                  i.tl.c_str());
        return UCS_ERR_UNSUPPORTED;
    }
    i.max_bcopy             = i.attr.cap.am.max_bcopy;
    const uint64_t tag_caps = UCT_IFACE_FLAG_TAG_EAGER_BCOPY | UCT_IFACE_FLAG_TAG_RNDV_ZCOPY;
    i.tag_send              = ((flags & tag_caps) == tag_caps) &&
                 (i.attr.cap.tag.rndv.max_hdr >= sizeof(MsgHeader));
    i.tag_eager_max = i.tag_send ? i.attr.cap.tag.eager.max_bcopy : 0;
    return UCS_OK;
}

/* Eager tagged messages by zcopy, where the MD needs no memh for it. */
void set_tag_zcopy(Iface &i, const uct_md_attr_t &md_attr) {
    if (!i.tag_send || !(i.attr.cap.flags & UCT_IFACE_FLAG_TAG_EAGER_ZCOPY) ||
        (md_attr.cap.flags & UCT_MD_FLAG_NEED_MEMH) || (i.attr.cap.tag.eager.max_iov < 1)) {
        return;
    }
    i.tag_zcopy_max    = i.attr.cap.tag.eager.max_zcopy;
    i.tag_inline_limit = std::min(i.attr.cap.tag.eager.max_short, i.attr.cap.tag.eager.max_zcopy) +
                         1;
    i.tag_bcopy_max = i.attr.cap.tag.eager.max_bcopy;
    i.tag_eager_max = std::max(i.tag_eager_max, i.tag_zcopy_max);
}

/* The iface's addresses, AM handlers and progress (`first`: by the worker's). */
ucs_status_t enable_iface(Iface &i, bool first) {
    i.dev_addr.resize(i.attr.device_addr_len);
    i.iface_addr.resize(i.attr.iface_addr_len);
    ucs_status_t status = uct_iface_get_device_address(i.iface,
                                                       reinterpret_cast<uct_device_addr_t *>(
                                                           i.dev_addr.data()));
    if (status == UCS_OK) {
        status = uct_iface_get_address(i.iface,
                                       reinterpret_cast<uct_iface_addr_t *>(i.iface_addr.data()));
    }
    if ((i.dev_addr.size() > UINT16_MAX) || (i.iface_addr.size() > UINT16_MAX)) {
        status = UCS_ERR_UNSUPPORTED;
    }
    if (status == UCS_OK) {
        status = set_am_handlers(&i);
    }
    if ((status == UCS_OK) && first) {
        /* the worker's progress polls the first; the others poll_secondary() */
        uct_iface_progress_enable(i.iface, UCT_PROGRESS_SEND | UCT_PROGRESS_RECV);
    }
    return status;
}

/* Reads `count` iface entries of a worker address from [p, end); false
 * when they do not fit (the address comes from the peer). */
bool read_peer_ifaces(const char *p, const char *end, unsigned count,
                      std::vector<PeerIface> *peer) {
    auto get16 = [&p, end](size_t *v) {
        if (end - p < 2) {
            return false;
        }
        uint16_t x;
        memcpy(&x, p, 2);
        p += 2;
        *v = x;
        return true;
    };
    for (unsigned n = 0; n < count; ++n) {
        if (p >= end) {
            return false;
        }
        const size_t tl_len = static_cast<unsigned char>(*p++);
        if (static_cast<size_t>(end - p) < tl_len) {
            return false;
        }
        PeerIface e;
        e.tl.assign(p, tl_len);
        p += tl_len;
        if (!get16(&e.dev_len) || (static_cast<size_t>(end - p) < e.dev_len)) {
            return false;
        }
        e.dev = p;
        p += e.dev_len;
        if (!get16(&e.iface_len) || (static_cast<size_t>(end - p) < e.iface_len)) {
            return false;
        }
        e.ifa = p;
        p += e.iface_len;
        peer->push_back(std::move(e));
    }
    return true;
}

/* Whether our iface `i` reaches the peer's iface `e`. */
bool usable(const Iface &i, const PeerIface &e) {
    return (i.tl == e.tl) && (e.dev_len == i.dev_addr.size()) &&
           (e.iface_len == i.iface_addr.size()) &&
           uct_iface_is_reachable(i.iface, reinterpret_cast<const uct_device_addr_t *>(e.dev),
                                  reinterpret_cast<const uct_iface_addr_t *>(e.ifa));
}

/* The first usable pair in the iface order of the worker with the lower id
 * (ours when `ours_first`): the peer's endpoint to us picks the same
 * transport, so messages from it arrive over this endpoint's iface (bound()
 * checks that). Null when no pair is usable; the peer's iface in *remote. */
Iface *choose_iface(const std::vector<std::unique_ptr<Iface>> &ifaces,
                    const std::vector<PeerIface> &peer, bool ours_first, const PeerIface **remote) {
    if (ours_first) {
        for (const auto &i : ifaces) {
            for (const PeerIface &e : peer) {
                if (usable(*i, e)) {
                    *remote = &e;
                    return i.get();
                }
            }
        }
        return nullptr;
    }
    for (const PeerIface &e : peer) {
        for (const auto &i : ifaces) {
            if (usable(*i, e)) {
                *remote = &e;
                return i.get();
            }
        }
    }
    return nullptr;
}

/* The endpoint's payload limits: one am_short, and one transport call. */
void set_send_limits(Endpoint &ep, const Iface &i, size_t rndv_thresh) {
    /* on the tag path too: untagged messages go as AM */
    if ((i.attr.cap.flags & UCT_IFACE_FLAG_AM_SHORT) &&
        (i.attr.cap.am.max_short > sizeof(ShortHeader) + sizeof(uint64_t))) {
        ep.short_max = std::min<size_t>(i.attr.cap.am.max_short - sizeof(ShortHeader) -
                                            sizeof(uint64_t),
                                        kShortMax);
    }
    /* below the rendezvous threshold and within what Sender::send_single() sends in
     * one transport call: the tag path's eager limit, or one AM */
    ep.eager_now_limit = std::min(ep.tag_path ? i.tag_eager_max + 1
                                              : i.max_bcopy - sizeof(MsgHeader) + 1,
                                  rndv_thresh);
}

uint32_t random_id() {
    std::random_device rd;
    uint32_t id;
    do {
        id = (static_cast<uint32_t>(rd()) ^ static_cast<uint32_t>(getpid())) & kMaxWorkerId;
    } while (id == 0);
    return id;
}

}  // namespace

Worker::Worker(const Config &config) : Owner(config) {
    if (config_.id == 0) {
        config_.id = random_id();
    }
    /* a gather per sender with an endpoint and one for those without */
    rx_.gathers().limit(config_.max_peers + 1, window_);
}

Worker::~Worker() {
    peers_.for_each([this](Endpoint *ep) { send_batch_before_close(ep); });
    /* requests in the caller's memory complete (CANCELED): the caller may be
     * waiting on their status word */
    rx_.tag_list().cancel_directs();
    reqs_.for_each_user([this](Request &r) {
        rx_.tag_list().forget(r);
        if (!r.done) {
            completions_.complete(r, UCS_ERR_CANCELED);
        }
        reqs_.retire(r, true);
    });
    peers_.clear();
    /* dropped requests' cache entries go back: UCX's rcache refuses (fatal)
     * to be destroyed with an entry in use */
    reqs_.for_each_live([](Request &r) {
        if (r.cached != nullptr) {
            RegistrationCache::put(r.cached);
            r.cached = nullptr;
        }
    });
    maps_.clear(); /* while the MDs are open */
    for (auto &i : ifaces_) {
        i->rcache.reset();
        if (i->iface != nullptr) {
            uct_iface_close(i->iface);
        }
        if (i->md != nullptr) {
            uct_md_close(i->md);
        }
    }
    if (uworker_ != nullptr) {
        uct_worker_destroy(uworker_);
    }
    if (async_ != nullptr) {
        ucs_async_context_destroy(async_);
    }
}

ucs_status_t Worker::open() {
    ucs_status_t status = ucs_async_context_create(UCS_ASYNC_MODE_THREAD_SPINLOCK, &async_);
    if (status != UCS_OK) {
        return status;
    }
    status = uct_worker_create(async_, UCS_THREAD_MODE_SINGLE, &uworker_);
    if (status != UCS_OK) {
        return status;
    }
    for (const auto &tl : parse_transports(config_.transports)) {
        status = open_iface(tl.first, tl.second);
        if (status != UCS_OK) {
            /* the caller reports it: a probe expects some transports not to open */
            ucs_diag("tm_proto: cannot open transport '%s%s%s': %s", tl.first.c_str(),
                     tl.second.empty() ? "" : ":", tl.second.c_str(), ucs_status_string(status));
            return status;
        }
    }
    if (ifaces_.empty() || (ifaces_.size() > UINT8_MAX)) {
        return UCS_ERR_INVALID_PARAM;
    }
    has_secondary_ = ifaces_.size() > 1;
    /* one iface only: an arrival over another could not see its tag list */
    ifaces_.front()->offload = config_.offload && (ifaces_.size() == 1) &&
                               ifaces_.front()->tag_send;
    if (ifaces_.front()->offload) {
        rx_.tag_list().enable(ifaces_.front().get(), this);
    }
    return UCS_OK;
}

/* Finds the component and MD offering `tl` (on `dev`, or its first device)
 * and opens the iface there; then reads what the protocols need off it. */
ucs_status_t Worker::open_iface(const std::string &tl, const std::string &dev) {
    uct_component_h *components;
    unsigned         ncomp;
    ucs_status_t     status = uct_query_components(&components, &ncomp);
    if (status != UCS_OK) {
        return status;
    }
    auto iface     = std::make_unique<Iface>();
    iface->worker  = this;
    iface->tl      = tl;
    status         = UCS_ERR_NO_DEVICE;
    for (unsigned c = 0; (c < ncomp) && (iface->iface == nullptr); ++c) {
        open_in_component(*iface, components[c], dev, uworker_, &status);
    }
    uct_release_component_list(components);
    if (iface->iface == nullptr) {
        return status;
    }
    Iface *i = iface.get();
    ifaces_.push_back(std::move(iface));
    status = read_iface_attr(*i);
    if (status != UCS_OK) {
        return status;
    }
    uct_md_attr_t md_attr;
    status = uct_md_query(i->md, &md_attr);
    if (status != UCS_OK) {
        return status;
    }
    set_tag_zcopy(*i, md_attr);
    set_rndv_get(*i, md_attr);
    return enable_iface(*i, ifaces_.size() == 1);
}

/* Rendezvous data read by the receiver, when the transport gets and the MD
 * registers with an rkey that fits the rendezvous request. */
void Worker::set_rndv_get(Iface &i, const uct_md_attr_t &md_attr) {
    i.rts_max = sizeof(MsgHeader);
    if (!(i.attr.cap.flags & UCT_IFACE_FLAG_GET_ZCOPY) || !(md_attr.cap.flags & UCT_MD_FLAG_REG) ||
        (md_attr.rkey_packed_size > kMaxRkey)) {
        return;
    }
    const size_t rts = sizeof(MsgHeader) + sizeof(RndvGet) + md_attr.rkey_packed_size;
    i.rkey_size      = md_attr.rkey_packed_size;
    i.rndv_get = (rts <= i.max_bcopy) && (!i.tag_send || (rts <= i.attr.cap.tag.rndv.max_hdr));
    if (i.rndv_get) {
        i.rts_max = rts;
    }
    if (i.rndv_get && config_.rcache) {
        i.rcache = std::make_unique<RegistrationCache>(i.md, &stats_.registrations,
                                                       &stats_.rcache_hits);
        if (i.rcache->status() != UCS_OK) {
            ucs_debug("tm_proto: no registration cache over %s: %s", i.tl.c_str(),
                      ucs_status_string(i.rcache->status()));
            i.rcache.reset(); /* registers per operation */
        }
    }
}

ucs_status_t Worker::address(void *buffer, size_t *length, bool compact) const {
    if (length == nullptr) {
        return UCS_ERR_INVALID_PARAM;
    }
    std::vector<char> out(sizeof(AddressHeader));
    AddressHeader     h = {};
    h.magic   = kAddressMagic;
    h.version = kAddressVersion;
    h.ifaces  = static_cast<uint8_t>(ifaces_.size());
    h.flags   = ifaces_.front()->offload ? kAddrOffload : 0;
    h.id      = config_.id;
    h.window  = static_cast<uint32_t>(window_);
    memcpy(out.data(), &h, sizeof(h));
    auto put16 = [&out](size_t v) {
        const uint16_t x = static_cast<uint16_t>(v);
        out.insert(out.end(), reinterpret_cast<const char *>(&x),
                   reinterpret_cast<const char *>(&x) + 2);
    };
    for (const auto &i : ifaces_) {
        out.push_back(static_cast<char>(i->tl.size()));
        out.insert(out.end(), i->tl.begin(), i->tl.end());
        put16(i->dev_addr.size());
        out.insert(out.end(), i->dev_addr.begin(), i->dev_addr.end());
        put16(i->iface_addr.size());
        out.insert(out.end(), i->iface_addr.begin(), i->iface_addr.end());
    }
    std::vector<uint8_t> packed;
    if (compact && !compact_address(out, &packed)) {
        return UCS_ERR_UNSUPPORTED; /* transport addresses beyond the compact form's limits */
    }
    const char  *bytes = compact ? reinterpret_cast<const char *>(packed.data()) : out.data();
    const size_t size  = compact ? packed.size() : out.size();
    const size_t room  = *length;
    *length            = size;
    if ((buffer == nullptr) || (room < size)) {
        return UCS_ERR_BUFFER_TOO_SMALL;
    }
    memcpy(buffer, bytes, size);
    return UCS_OK;
}

ucs_status_t Worker::ep_create(const void *address, size_t length, Endpoint **ep_p) {
    return create_endpoint(address, length, ep_p, nullptr);
}

ucs_status_t Worker::create_endpoint(const void *address, size_t length, Endpoint **ep_p,
                                     const Hello *implicit) {
    if ((address != nullptr) && is_compact_address(address, length)) {
        std::vector<char> full;
        if (!expand_address(static_cast<const uint8_t *>(address), length, &full)) {
            ucs_error("tm_proto: malformed compact worker address");
            return UCS_ERR_INVALID_PARAM;
        }
        return create_endpoint(full.data(), full.size(), ep_p, implicit);
    }
    if ((address == nullptr) || (ep_p == nullptr) || (length < sizeof(AddressHeader))) {
        return UCS_ERR_INVALID_PARAM;
    }
    const char   *p = static_cast<const char *>(address);
    AddressHeader h;
    memcpy(&h, p, sizeof(h));
    if ((h.magic != kAddressMagic) || (h.version != kAddressVersion) || (h.id == 0) ||
        (h.id > kMaxWorkerId)) {
        ucs_error("tm_proto: malformed worker address (or of another version of the layer)");
        return UCS_ERR_INVALID_PARAM;
    }
    if ((peers_.size() >= config_.max_peers) && !peers_.has(h.id)) {
        /* each peer is granted cap / MAX_PEERS of credit: one more would
         * let the senders together exceed the cap */
        ucs_error("tm_proto: endpoints to %zu peers already: raise UCX_TM_PROTO_MAX_PEERS",
                  peers_.size());
        return UCS_ERR_EXCEEDS_LIMIT;
    }
    std::vector<PeerIface> peer;
    if (!read_peer_ifaces(p + sizeof(h), p + length, h.ifaces, &peer)) {
        return UCS_ERR_INVALID_PARAM;
    }
    const PeerIface *remote = nullptr;
    Iface *const     chosen = choose_iface(ifaces_, peer, config_.id < h.id, &remote);
    if (chosen == nullptr) {
        return UCS_ERR_UNREACHABLE;
    }
    if (implicit != nullptr) {
        /* only an endpoint to the worker that sent it, over the iface it came by */
        if ((h.id != implicit->source) || (chosen != implicit->iface) || chosen->to_ep) {
            return UCS_ERR_INVALID_PARAM;
        }
    } else if (Endpoint *adopted = adopt(h.id, chosen)) {
        *ep_p = adopted;
        return UCS_OK;
    }
    const ucs_status_t status = new_endpoint(chosen, *remote, h, ep_p, implicit != nullptr);
    if ((status == UCS_OK) && (implicit == nullptr) && (h.id != config_.id)) {
        send_hello(*ep_p); /* connected to the peer's iface: it may reply over ours */
    }
    return status;
}

/* Our endpoint over `i` to the peer whose address header is `h`, to its
 * iface `remote`; UCS_INPROGRESS until ep_connect() when the transport
 * connects endpoint to endpoint. */
ucs_status_t Worker::new_endpoint(Iface *i, const PeerIface &remote, const AddressHeader &h,
                                  Endpoint **ep_p, bool implicit) {
    uct_ep_params_t ep_params = {};
    ep_params.field_mask      = UCT_EP_PARAM_FIELD_IFACE;
    ep_params.iface           = i->iface;
    if (!i->to_ep) {
        ep_params.field_mask |= UCT_EP_PARAM_FIELD_DEV_ADDR | UCT_EP_PARAM_FIELD_IFACE_ADDR;
        ep_params.dev_addr   = reinterpret_cast<const uct_device_addr_t *>(remote.dev);
        ep_params.iface_addr = reinterpret_cast<const uct_iface_addr_t *>(remote.ifa);
    }
    /* allocated before the UCT endpoint: nothing to undo if this throws */
    auto ep = std::make_unique<Endpoint>();
    if (i->to_ep) {
        ep->peer_dev.assign(remote.dev, remote.dev + remote.dev_len);
        ep->peer_ep.reserve(i->attr.ep_addr_len);
        ep->connected = false;
    }
    uct_ep_h           uep;
    const ucs_status_t status = uct_ep_create(&ep_params, &uep);
    if (status != UCS_OK) {
        return status;
    }
    /* destroys the UCT endpoint if taking it into the table throws */
    std::unique_ptr<uct_ep, void (*)(uct_ep_h)> guard(uep, uct_ep_destroy);
    ep->worker      = this;
    ep->iface       = i;
    ep->uct_ep      = uep;
    ep->peer_id     = h.id;
    ep->peer_window = h.window;
    ep->credits     = h.window;
    ep->tag_path    = i->tag_send && (h.flags & kAddrOffload);
    ep->implicit    = implicit;
    set_send_limits(*ep, *i, config_.rndv_thresh);
    const bool connected = ep->connected;
    *ep_p                = peers_.add(std::move(ep));
    guard.release(); /* the table owns it now (Peers::remove, clear) */
    if (!connected) {
        return UCS_INPROGRESS;
    }
    control_.unpark(*ep_p);
    return UCS_OK;
}

ucs_status_t Worker::ep_address(const Endpoint *ep, void *buffer, size_t *length) const {
    if (length == nullptr) {
        return UCS_ERR_INVALID_PARAM;
    }
    const Iface    *i      = ep->iface;
    const size_t    uct_len = i->to_ep ? i->attr.ep_addr_len : 0;
    const size_t    total   = sizeof(EpAddressHeader) + i->tl.size() + uct_len;
    const size_t    room    = *length;
    *length                 = total;
    if ((buffer == nullptr) || (room < total)) {
        return UCS_ERR_BUFFER_TOO_SMALL;
    }
    EpAddressHeader h = {};
    h.magic           = kEpAddressMagic;
    h.version         = kAddressVersion;
    h.ep_addr_len     = static_cast<uint16_t>(uct_len);
    h.source          = config_.id;
    h.target          = ep->peer_id;
    h.tl_len          = static_cast<uint8_t>(i->tl.size());
    char *out         = static_cast<char *>(buffer);
    memcpy(out, &h, sizeof(h));
    memcpy(out + sizeof(h), i->tl.data(), i->tl.size());
    if (uct_len > 0) {
        return uct_ep_get_address(ep->uct_ep,
                                  reinterpret_cast<uct_ep_addr_t *>(out + sizeof(h) + i->tl.size()));
    }
    return UCS_OK;
}

ucs_status_t Worker::ep_connect(Endpoint *ep, const void *address, size_t length) {
    if ((address == nullptr) || (length < sizeof(EpAddressHeader))) {
        return UCS_ERR_INVALID_PARAM;
    }
    const Iface    *i = ep->iface;
    EpAddressHeader h;
    memcpy(&h, address, sizeof(h));
    const char  *tl      = static_cast<const char *>(address) + sizeof(h);
    const size_t uct_len = i->to_ep ? i->attr.ep_addr_len : 0;
    /* everything the peer wrote is checked before any of it is used */
    if ((h.magic != kEpAddressMagic) || (h.version != kAddressVersion)) {
        ucs_diag("tm_proto: malformed endpoint address (or of another version of the layer)");
        return UCS_ERR_INVALID_PARAM;
    }
    if ((h.source != ep->peer_id) || (h.target != config_.id)) {
        ucs_diag("tm_proto: endpoint address of worker %u's endpoint to %u given to the "
                  "endpoint of %u to %u", h.source, h.target, config_.id, ep->peer_id);
        return UCS_ERR_INVALID_PARAM;
    }
    if ((length != sizeof(h) + h.tl_len + h.ep_addr_len) || (h.tl_len != i->tl.size()) ||
        (memcmp(tl, i->tl.data(), h.tl_len) != 0) || (h.ep_addr_len != uct_len)) {
        ucs_diag("tm_proto: endpoint address of %zu bytes does not match this endpoint's "
                  "transport %s (%zu address bytes)", length, i->tl.c_str(), uct_len);
        return UCS_ERR_INVALID_PARAM;
    }
    const char *uct_addr = tl + h.tl_len;
    if (ep->connected) {
        /* connect-to-iface, or connected already: the same peer endpoint again is fine */
        return ((uct_len == 0) || ((ep->peer_ep.size() == uct_len) &&
                                   (memcmp(ep->peer_ep.data(), uct_addr, uct_len) == 0)))
                       ? UCS_OK
                       : UCS_ERR_ALREADY_EXISTS;
    }
    peers_.listen(ep); /* may throw: before anything is done (nothing arrives in between) */
    const ucs_status_t status =
            uct_ep_connect_to_ep(ep->uct_ep,
                                 reinterpret_cast<const uct_device_addr_t *>(ep->peer_dev.data()),
                                 reinterpret_cast<const uct_ep_addr_t *>(uct_addr));
    if (status != UCS_OK) {
        peers_.unlisten(ep);
        return status;
    }
    ep->peer_ep.assign(uct_addr, uct_addr + uct_len); /* reserved at ep_create: no allocation */
    ep->connected = true;
    control_.unpark(ep);
    return UCS_OK;
}

void Worker::end_sends(Endpoint *ep, ucs_status_t status, bool keep_writes) {
    ep->ctrl.clear();
    ep->sends.clear(); /* the walk below completes them */
    for (uint32_t i = 0; i < reqs_.issued(); ++i) {
        Request &r = reqs_.at(i);
        if ((r.kind == ReqKind::kSend) && !r.done && (r.ep == ep) &&
            !(keep_writes && (r.sstate == SendState::kPutting))) {
            completions_.complete(r, status);
        }
    }
}

void Worker::end_arrivals(const Endpoint *ep, ucs_status_t status) {
    rx_.partials().erase_if([&](Partial &part) {
        if (part.source != ep->peer_id) {
            return false;
        }
        if (part.unex != UINT32_MAX) {
            return false; /* still unexpected: fails the receive that takes it */
        }
        if (Request *r = (part.req != 0) ? reqs_.lookup(part.req) : nullptr) {
            completions_.complete(*r, status);
        }
        if (part.charged != nullptr) {
            part.charged->fragmented -= std::min<uint32_t>(part.charged->fragmented, 1);
        }
        return true;
    });
    for (uint32_t i = 0; i < reqs_.issued(); ++i) {
        Request &r = reqs_.at(i);
        if ((r.kind == ReqKind::kRecv) && !r.done && r.peer_part && (r.info.source == ep->peer_id)) {
            /* a read of ours still running completes through the transport */
            r.peer_part = false;
            rndv_.part_done(r, status);
        }
    }
}

void Worker::end_directed(const Endpoint *ep, ucs_status_t status) {
    bool reachable = false;
    peers_.for_each([&](const Endpoint *e) {
        reachable |= (e != ep) && (e->peer_id == ep->peer_id) && e->connected &&
                     (e->failure == UCS_OK);
    });
    if (reachable) {
        return;
    }
    for (uint32_t i = 0; i < reqs_.issued(); ++i) {
        Request &r = reqs_.at(i);
        if ((r.kind == ReqKind::kRecv) && !r.done && (r.rstate == RecvState::kPosted) &&
            r.has_source && (r.src_filter == ep->peer_id)) {
            withdraw_recv(r, status);
        }
    }
}

/* Sends the control messages the transport refused, then the batch; false
 * while either still waits for room. */
bool Worker::send_queued_now(Endpoint *ep) {
    while (!ep->ctrl.empty()) {
        if (tx_.am_send(ep, &ep->ctrl.front(), sizeof(CtrlHeader), nullptr, 0) ==
            UCS_ERR_NO_RESOURCE) {
            return false;
        }
        ep->ctrl.pop_front();
    }
    return tx_.flush_batch(ep) != UCS_ERR_NO_RESOURCE;
}

/* MORE messages have completed, and a kAck may tell a sender its message
 * was delivered: they leave before their endpoint closes, as far as the
 * transport takes them within a bounded wait. */
void Worker::send_batch_before_close(Endpoint *ep) {
    if (ep->batch.empty() && ep->ctrl.empty()) {
        return;
    }
    int i = 0;
    for (; (i < kCloseFlushTries) && (ep->failure == UCS_OK) && !send_queued_now(ep); ++i) {
        progress_transports();
    }
    if (!ep->batch.empty() || !ep->ctrl.empty()) {
        ucs_error("tm_proto: %zu bytes of batched messages and %zu control messages to worker "
                  "%u not sent before the endpoint closed",
                  ep->batch.size(), ep->ctrl.size(), ep->peer_id);
        ep->batch.clear();
        ep->ctrl.clear();
        return;
    }
    /* handed over is not yet sent: a transport may drop what its endpoint
     * still holds when it is destroyed (an RC queue pair) */
    ucs_status_t status;
    while ((i++ < kCloseFlushTries) && (ep->failure == UCS_OK) &&
           (((status = uct_ep_flush(ep->uct_ep, 0, nullptr)) == UCS_INPROGRESS) ||
            (status == UCS_ERR_NO_RESOURCE))) {
        progress_transports();
    }
}

void Worker::ep_destroy(Endpoint *ep) {
    send_batch_before_close(ep);
    end_sends(ep, UCS_ERR_CANCELED, false);
    for (uint32_t i = 0; i < reqs_.issued(); ++i) {
        Request &r = reqs_.at(i);
        if ((r.kind == ReqKind::kRecv) && (r.info.ep == reinterpret_cast<uct_tm_proto_ep_h>(ep))) {
            r.info.ep = nullptr;
        }
    }
    for (auto it = busy_.begin(); it != busy_.end(); ++it) {
        if (*it == ep) {
            busy_.erase(it);
            break;
        }
    }
    /* what the peer holds here stays, counted against the sources without
     * endpoint: its messages stay buffered, and a new endpoint to it starts
     * with its whole window */
    unbound_.bytes      += ep->held.bytes;
    unbound_.fragmented += ep->held.fragmented;
    rx_.unexpected().for_each_live([this, ep](Unexpected &u) {
        if (u.charged == &ep->held) {
            u.charged = &unbound_;
        }
    });
    rx_.partials().for_each([this, ep](Partial &part) {
        if (part.charged == &ep->held) {
            part.charged = &unbound_;
        }
    });
    peers_.remove(ep);
}

/* The ifaces after the first (tcp beside tm_sm): a tcp poll is a system
 * call, several times the cost of a tm_sm poll, so an idle one is polled
 * every kSecondaryIdle only (progress() asks every 16th call), and on every
 * call again for kSecondaryLinger after it last had events. */
unsigned Worker::poll_secondary() {
    if (!secondary_busy_ && (Clock::now() < secondary_next_)) {
        return 0;
    }
    unsigned n = 0;
    for (size_t k = 1; k < ifaces_.size(); ++k) {
        n += uct_iface_progress(ifaces_[k]->iface);
    }
    const Clock::time_point now = Clock::now();
    if (n > 0) {
        secondary_quiet_ = now + kSecondaryLinger;
    }
    secondary_busy_ = now < secondary_quiet_;
    secondary_next_ = now + kSecondaryIdle;
    return n;
}

unsigned Worker::progress_rest(unsigned n) {
    if ((progress_calls_ % kKeepaliveEvery) == 0) {
        keepalive();
    }
    if (!busy_.empty()) {
        n += progress_queues();
    }
    if (!later_.empty()) {
        n += progress_later();
    }
    if (!completions_.empty()) {
        n += completions_.deliver([this](Request &child) { rx_.child_done(child); });
    }
    return n;
}

void Worker::keepalive() {
    if (config_.keepalive_s <= 0) {
        return;
    }
    const auto now = std::chrono::steady_clock::now();
    if (now < keepalive_next_) {
        return;
    }
    keepalive_next_ = now + std::chrono::duration_cast<std::chrono::steady_clock::duration>(
                                    std::chrono::duration<double>(config_.keepalive_s));
    peers_.for_each([](Endpoint *ep) {
        if (ep->connected && (ep->failure == UCS_OK) &&
            (ep->iface->attr.cap.flags & UCT_IFACE_FLAG_EP_CHECK)) {
            /* a failure comes back through the error handler, from a later progress */
            (void)uct_ep_check(ep->uct_ep, 0, nullptr);
        }
    });
}

void Worker::ep_failed(uct_ep_h uep, ucs_status_t status) {
    Endpoint *ep = nullptr;
    peers_.for_each([&](Endpoint *e) {
        if (e->uct_ep == uep) {
            ep = e;
        }
    });
    if ((ep == nullptr) || (ep->failure != UCS_OK)) {
        return;
    }
    ucs_diag("tm_proto: the peer of worker %u's endpoint to worker %u failed: %s", config_.id,
             ep->peer_id, ucs_status_string(status));
    ep->failure = (status == UCS_OK) ? UCS_ERR_CONNECTION_RESET : status;
    /* One writing into the receiver (kPutting) completes when the transport
     * fails that write. */
    end_sends(ep, ep->failure, true);
    end_arrivals(ep, ep->failure);
    end_directed(ep, ep->failure);                           /* nothing more can come from it */
    if ((config_.err_handler != nullptr) && !ep->implicit) { /* a handle the application knows */
        config_.err_handler(config_.err_handler_arg, static_cast<uct_tm_proto_ep_h>(ep), ep->failure);
    }
}

void Worker::stats(uct_tm_proto_stats_t *out) const {
    *out          = stats_;
    out->requests = reqs_.live();
}

ucs_status_t Worker::mem_map(const uct_tm_proto_mem_map_params_t *params, uint64_t *memh) {
    const uint64_t needed = UCT_TM_PROTO_MEM_MAP_FIELD_ADDRESS | UCT_TM_PROTO_MEM_MAP_FIELD_LENGTH;
    if ((params == nullptr) || ((params->field_mask & needed) != needed)) {
        return UCS_ERR_INVALID_PARAM;
    }
    return maps_.map(ifaces_, params->address, params->length, memh, &stats_.registrations);
}

/* The work queued for progress: sends waiting for a flush, held messages to
 * report. A callback may queue more: it waits for the next call. */
unsigned Worker::progress_later() {
    later_work_.swap(later_);
    unsigned n = 0;
    for (const Later &l : later_work_) {
        if (l.kind == Later::Kind::kHello) {
            accept_hellos();
            continue;
        }
        if (l.kind == Later::Kind::kBuffered) {
            rx_.report_buffered(l.handle);
            ++n;
            continue;
        }
        Request *r = reqs_.lookup(l.handle);
        if ((r == nullptr) || r->done) {
            continue;
        }
        if (tx_.flush_done(*r)) {
            ++n;
        } else if (alloc_status([&] { later_.push_back(l); }) != UCS_OK) {
            completions_.complete(*r, UCS_ERR_NO_MEMORY);
        }
    }
    later_work_.clear();
    return n;
}

unsigned Worker::progress_queues() {
    unsigned n = 0;
    for (size_t i = 0; i < busy_.size();) {
        Endpoint *ep = busy_[i];
        if (ep->hello_due && (hello_now(ep) == UCS_ERR_NO_RESOURCE)) {
            ++i; /* the hello first: it lets the peer reply to what follows */
            continue;
        }
        /* control messages, then MORE messages, before the sends queued after them */
        const size_t ctrl_before = ep->ctrl.size();
        const bool   batch_waits = !send_queued_now(ep);
        n += static_cast<unsigned>(ctrl_before - ep->ctrl.size());
        while (!batch_waits && !ep->sends.empty()) {
            Request *r = reqs_.lookup(ep->sends.front());
            if ((r == nullptr) || r->done) {
                ep->sends.pop_front();
                continue;
            }
            if (tx_.fence_holds(*r)) {
                break; /* a completion ends the wait, in a later progress */
            }
            const ucs_status_t status = tx_.start_send(*r);
            if (status == UCS_ERR_NO_RESOURCE) {
                break;
            }
            if (status != UCS_OK) {
                completions_.complete(*r, status);
            } else {
                tx_.left_queue(*r);
            }
            ep->sends.pop_front();
            ++n;
        }
        if (ep->ctrl.empty() && ep->sends.empty() && ep->batch.empty() && !ep->hello_due) {
            ep->busy = false;
            busy_[i] = busy_.back();
            busy_.pop_back();
        } else {
            ++i;
        }
    }
    return n;
}

}  // namespace proto
}  // namespace uct_tm
