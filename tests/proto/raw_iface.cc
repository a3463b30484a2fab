#include "raw_iface.h"

#include <gtest/gtest.h>

#include <chrono>
#include <cstring>
#include <string>

namespace uct_tm_test {

using uct_tm::proto::AddressHeader;
using uct_tm::proto::Kind;
using uct_tm::proto::MsgHeader;

ucs_status_t RawIface::open(uct_tm_proto_worker_h w, const char *md_name, const char *tl,
                            const char *dev_name) {
    size_t len = 0;
    uct_tm_proto_worker_address(w, nullptr, &len);
    std::vector<char>  addr(len);
    const ucs_status_t st = uct_tm_proto_worker_address(w, addr.data(), &len);
    return (st == UCS_OK) ? open(addr, md_name, tl, dev_name) : st;
}

ucs_status_t RawIface::open(const std::vector<char> &addr, const char *md_name, const char *tl,
                            const char *dev_name) {
    ucs_status_t st = ucs_async_context_create(UCS_ASYNC_MODE_THREAD_SPINLOCK, &async);
    if (st == UCS_OK) {
        st = uct_worker_create(async, UCS_THREAD_MODE_SINGLE, &worker);
    }
    uct_component_h *comps;
    unsigned         n;
    if ((st != UCS_OK) || (uct_query_components(&comps, &n) != UCS_OK)) {
        return UCS_ERR_NO_DEVICE;
    }
    for (unsigned i = 0; i < n; ++i) {
        uct_component_attr_t a = {};
        a.field_mask           = UCT_COMPONENT_ATTR_FIELD_NAME;
        if ((uct_component_query(comps[i], &a) == UCS_OK) && (strcmp(a.name, md_name) == 0)) {
            comp = comps[i];
        }
    }
    uct_release_component_list(comps);
    uct_md_config_t *mdc;
    if ((comp == nullptr) || (uct_md_config_read(comp, nullptr, nullptr, &mdc) != UCS_OK)) {
        return UCS_ERR_NO_DEVICE;
    }
    st = uct_md_open(comp, md_name, mdc, &md);
    uct_config_release(mdc);
    uct_iface_config_t *ic;
    if ((st != UCS_OK) || (uct_md_iface_config_read(md, tl, nullptr, nullptr, &ic) != UCS_OK)) {
        return UCS_ERR_NO_DEVICE;
    }
    uct_iface_params_t p = {};
    p.field_mask = UCT_IFACE_PARAM_FIELD_OPEN_MODE | UCT_IFACE_PARAM_FIELD_DEVICE;
    p.open_mode  = UCT_IFACE_OPEN_MODE_DEVICE;
    p.mode.device.tl_name  = tl;
    p.mode.device.dev_name = dev_name;
    st = uct_iface_open(md, worker, &p, ic, &iface);
    uct_config_release(ic);
    if (st != UCS_OK) {
        return st;
    }
    /* the worker address: header, then per iface tl name, device
     * address, iface address; the entry of transport `tl` */
    AddressHeader h;
    memcpy(&h, addr.data(), sizeof(h));
    const char *q   = addr.data() + sizeof(AddressHeader);
    const char *dev = nullptr;
    for (unsigned n = 0; (n < h.ifaces) && (dev == nullptr); ++n) {
        const size_t      tl_len = static_cast<unsigned char>(*q++);
        const std::string name(q, tl_len);
        q += tl_len;
        uint16_t dev_len, iface_len;
        memcpy(&dev_len, q, 2);
        q += 2;
        const char *d = q;
        q += dev_len;
        memcpy(&iface_len, q, 2);
        q += 2;
        if (name == tl) {
            dev = d;
        } else {
            q += iface_len;
        }
    }
    if (dev == nullptr) {
        return UCS_ERR_UNREACHABLE;
    }
    uct_ep_params_t ep = {};
    ep.field_mask = UCT_EP_PARAM_FIELD_IFACE | UCT_EP_PARAM_FIELD_DEV_ADDR |
                    UCT_EP_PARAM_FIELD_IFACE_ADDR;
    ep.iface      = iface;
    ep.dev_addr   = reinterpret_cast<const uct_device_addr_t *>(dev);
    ep.iface_addr = reinterpret_cast<const uct_iface_addr_t *>(q);
    return uct_ep_create(&ep, &this->ep);
}

namespace {
struct Bytes {
    const std::vector<char> *v;
};
size_t pack_bytes(void *dest, void *arg) {
    const auto *b = static_cast<const Bytes *>(arg);
    if (!b->v->empty()) { /* an empty vector's data() may be null: no memcpy from it */
        memcpy(dest, b->v->data(), b->v->size());
    }
    return b->v->size();
}

}  // namespace

void RawIface::send(uint8_t id, const std::vector<char> &msg, uct_tm_proto_worker_h w) {
    Bytes        b{&msg};
    ssize_t      st;
    const auto   deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
    while ((st = uct_ep_am_bcopy(ep, id, pack_bytes, &b, 0)) == UCS_ERR_NO_RESOURCE) {
        if (std::chrono::steady_clock::now() > deadline) {
            ADD_FAILURE() << "the transport did not take a message in time";
            return;
        }
        uct_worker_progress(worker);
        uct_tm_proto_worker_progress(w);
    }
    EXPECT_GE(st, 0) << ucs_status_string(static_cast<ucs_status_t>(st));
    uct_tm_proto_worker_progress(w); /* posix: the receiver must keep polling to free elements */
}

size_t discard_unexpected(uct_tm_proto_worker_h w, uint64_t tag) {
    size_t              n = 0;
    uct_tm_proto_info_t info;
    while (uct_tm_proto_probe(w, tag, ~uint64_t{0}, nullptr,
                              UCT_TM_PROTO_PROBE_PEEK | UCT_TM_PROTO_PROBE_DISCARD, &info,
                              nullptr) == UCS_OK) {
        ++n;
    }
    return n;
}

void progress(uct_tm_proto_worker_h w, int times) {
    for (int i = 0; i < times; ++i) {
        uct_tm_proto_worker_progress(w);
    }
}

std::vector<char> eager_message(uint32_t source, uint64_t tag, size_t payload, Kind kind,
                                uint64_t length, uint32_t msg_id) {
    MsgHeader h = {};
    h.kind   = kind;
    h.source = source;
    h.tag    = tag;
    h.length = (kind == Kind::kEager) ? payload : length;
    h.msg_id = msg_id;
    std::vector<char> m(sizeof(h) + payload, 'S');
    memcpy(m.data(), &h, sizeof(h));
    return m;
}

}  // namespace uct_tm_test
