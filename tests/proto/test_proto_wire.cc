/*
 * Malformed wire messages: a raw UCT endpoint (UCX's posix transport, or
 * tm_sm for tagged messages, opened here without the layer) sends the
 * layer's AM ids random bytes and headers with forged kinds, lengths,
 * offsets and request handles, and tagged messages larger than any
 * conforming sender may send. The worker must log and drop every one of
 * them -- no crash, no completion of anything -- and still deliver a real
 * message afterwards.
 */
#include "proto_fixture.h"
#include "wire.h"

#include <ucs/async/async_fwd.h>
#include <uct/api/uct.h>

#include <cstring>
#include <random>

namespace uct_tm_test {
namespace {

using uct_tm::proto::AddressHeader;

/* A bare iface of transport `tl` (component and MD `md`, device `dev`) and an
 * endpoint to the first iface of a worker address. */
struct RawIface {
    ucs_async_context_t *async  = nullptr;
    uct_worker_h         worker = nullptr;
    uct_component_h      comp   = nullptr;
    uct_md_h             md     = nullptr;
    uct_iface_h          iface  = nullptr;
    uct_ep_h             ep     = nullptr;

    ucs_status_t open(const std::vector<char> &addr, const char *md_name = "posix",
                      const char *tl = "posix", const char *dev_name = "memory") {
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
        /* the worker address: header, then tl name, device address, iface address */
        const char *q = addr.data() + sizeof(AddressHeader);
        const size_t tl_len = static_cast<unsigned char>(*q++);
        q += tl_len;
        uint16_t dev_len, iface_len;
        memcpy(&dev_len, q, 2);
        q += 2;
        const char *dev = q;
        q += dev_len;
        memcpy(&iface_len, q, 2);
        q += 2;
        uct_ep_params_t ep = {};
        ep.field_mask = UCT_EP_PARAM_FIELD_IFACE | UCT_EP_PARAM_FIELD_DEV_ADDR |
                        UCT_EP_PARAM_FIELD_IFACE_ADDR;
        ep.iface      = iface;
        ep.dev_addr   = reinterpret_cast<const uct_device_addr_t *>(dev);
        ep.iface_addr = reinterpret_cast<const uct_iface_addr_t *>(q);
        return uct_ep_create(&ep, &this->ep);
    }
    ~RawIface() {
        if (ep != nullptr) uct_ep_destroy(ep);
        if (iface != nullptr) uct_iface_close(iface);
        if (md != nullptr) uct_md_close(md);
        if (worker != nullptr) uct_worker_destroy(worker);
        if (async != nullptr) ucs_async_context_destroy(async);
    }
};

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

TEST(ProtoWire, MalformedMessagesAreDropped) {
    Pair pair;
    ASSERT_EQ(UCS_OK, make_pair("posix", &pair));
    size_t len = 0;
    uct_tm_proto_worker_address(pair.b, nullptr, &len);
    std::vector<char> addr(len);
    ASSERT_EQ(UCS_OK, uct_tm_proto_worker_address(pair.b, addr.data(), &len));
    RawIface raw;
    ASSERT_EQ(UCS_OK, raw.open(addr));

    /* a receive that a forged message must not complete */
    uint64_t               victim_buf[8] = {};
    uct_tm_proto_request_t victim;
    ASSERT_EQ(UCS_INPROGRESS, uct_tm_proto_recv(pair.b, victim_buf, sizeof(victim_buf), 0, 0,
                                                pair.ba, nullptr, &victim));
    std::mt19937_64 rng(7);
    for (int i = 0; i < 3000; ++i) {
        std::vector<char> msg(rng() % 120);
        for (auto &c : msg) {
            c = static_cast<char>(rng());
        }
        if (!msg.empty()) {
            /* a valid kind most of the time, so the field checks are reached */
            msg[0] = static_cast<char>(1 + rng() % 13);
        }
        if ((i % 3 == 0) && (msg.size() >= 24)) {
            /* request handles that look plausible: small index, small generation */
            const uint64_t h = (uint64_t{1 + rng() % 3} << 32) | (1 + rng() % 4);
            memcpy(&msg[8], &h, 8);
            memcpy(&msg[16], &h, 8);
        }
        Bytes         b{&msg};
        const uint8_t id = (rng() % 2) ? uct_tm::proto::kAmId : uct_tm::proto::kAmShortId;
        while (uct_ep_am_bcopy(raw.ep, id, pack_bytes, &b, 0) == UCS_ERR_NO_RESOURCE) {
            uct_worker_progress(raw.worker);
            uct_tm_proto_worker_progress(pair.b);
        }
        uct_tm_proto_worker_progress(pair.b);
    }
    for (int i = 0; i < 1000; ++i) {
        uct_tm_proto_worker_progress(pair.b);
    }
    /* a source-filtered receive ignores messages from elsewhere: still pending */
    EXPECT_EQ(UCS_INPROGRESS, uct_tm_proto_request_test(pair.b, victim, nullptr));
    ASSERT_EQ(UCS_OK, uct_tm_proto_request_cancel(pair.b, victim));
    EXPECT_EQ(UCS_ERR_CANCELED, wait_request(pair, pair.b, victim));
    /* drop what the garbage left as unexpected messages, then the real thing works */
    uct_tm_proto_info_t info;
    while (uct_tm_proto_probe(pair.b, 0, 0, nullptr,
                              UCT_TM_PROTO_PROBE_PEEK | UCT_TM_PROTO_PROBE_DISCARD, &info,
                              nullptr) == UCS_OK) {
    }
    for (size_t n : {size_t(8), size_t(20000), size_t(300000)}) {
        const auto             data = pattern(n, 9);
        std::vector<char>      buf(n);
        uct_tm_proto_request_t r, s;
        ASSERT_EQ(UCS_INPROGRESS, uct_tm_proto_recv(pair.b, buf.data(), n, 42, ~uint64_t{0},
                                                    nullptr, nullptr, &r));
        const ucs_status_t st = uct_tm_proto_send(pair.ab, data.data(), n, 42, nullptr, &s);
        ASSERT_TRUE((st == UCS_OK) || (st == UCS_INPROGRESS));
        ASSERT_EQ(UCS_OK, wait_request(pair, pair.b, r, &info));
        if (st == UCS_INPROGRESS) {
            ASSERT_EQ(UCS_OK, wait_request(pair, pair.a, s));
        }
        EXPECT_EQ(buf, data);
    }
    destroy_pair(&pair);
}

/* Tagged eager messages arrive in transport fragments; an unexpected one is
 * gathered until its last fragment. One larger than the credit the worker
 * gives a peer (which no conforming sender exceeds) is dropped whole, and
 * a fragmented one within it is delivered intact. */
TEST(ProtoWire, OversizedTaggedMessageIsDropped) {
    uct_tm_proto_worker_params_t extra = {};
    extra.field_mask     = UCT_TM_PROTO_WORKER_FIELD_UNEXPECTED_CAP | UCT_TM_PROTO_WORKER_FIELD_MAX_PEERS;
    extra.unexpected_cap = 64 << 10;
    extra.max_peers      = 4; /* 16 KiB of credit per peer */
    Pair pair;
    ASSERT_EQ(UCS_OK, make_pair("tm_sm", &pair, &extra));
    size_t len = 0;
    uct_tm_proto_worker_address(pair.b, nullptr, &len);
    std::vector<char> addr(len);
    ASSERT_EQ(UCS_OK, uct_tm_proto_worker_address(pair.b, addr.data(), &len));
    RawIface raw;
    ASSERT_EQ(UCS_OK, raw.open(addr, "tm", "tm_sm", "tm_shm"));
    uct_iface_attr_t attr;
    ASSERT_EQ(UCS_OK, uct_iface_query(raw.iface, &attr));
    ASSERT_GE(attr.cap.tag.eager.max_zcopy, size_t(40000));
    ASSERT_LT(attr.cap.tag.eager.max_bcopy, size_t(12000)) << "the small message must be fragmented too";

    const uint64_t source = uint64_t{uct_tm_proto_worker_id(pair.a)} << 32;
    const auto     big    = pattern(40000, 3);
    const auto     small  = pattern(12000, 4);
    for (const auto *m : {&big, &small}) {
        uct_iov_t iov = {const_cast<char *>(m->data()), m->size(), UCT_MEM_HANDLE_NULL, 0, 1};
        const uct_tag_t tag = (m == &big) ? 77 : 78;
        ucs_status_t st;
        while ((st = uct_ep_tag_eager_zcopy(raw.ep, tag, source | 5, &iov, 1, 0, nullptr)) ==
               UCS_ERR_NO_RESOURCE) {
            uct_worker_progress(raw.worker);
            uct_tm_proto_worker_progress(pair.b);
        }
        ASSERT_EQ(UCS_OK, st);
    }
    for (int i = 0; i < 1000; ++i) {
        uct_tm_proto_worker_progress(pair.b);
    }
    uct_tm_proto_info_t info;
    EXPECT_EQ(UCS_ERR_NO_ELEM, uct_tm_proto_probe(pair.b, 77, ~uint64_t{0}, nullptr,
                                                  UCT_TM_PROTO_PROBE_PEEK, &info, nullptr))
            << "a tagged message above the per-peer credit was buffered";
    ASSERT_EQ(UCS_OK, uct_tm_proto_probe(pair.b, 78, ~uint64_t{0}, nullptr, UCT_TM_PROTO_PROBE_PEEK,
                                         &info, nullptr));
    EXPECT_EQ(info.length, small.size());
    EXPECT_EQ(info.imm, 5u);
    std::vector<char>      buf(small.size());
    uct_tm_proto_request_t r;
    ASSERT_EQ(UCS_INPROGRESS, uct_tm_proto_recv(pair.b, buf.data(), buf.size(), 78, ~uint64_t{0},
                                                nullptr, nullptr, &r));
    ASSERT_EQ(UCS_OK, wait_request(pair, pair.b, r, &info));
    EXPECT_EQ(info.length, small.size());
    EXPECT_EQ(buf, small);
    destroy_pair(&pair);
}

}  // namespace
}  // namespace uct_tm_test
