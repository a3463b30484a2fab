/*
 * Bad input on every entry point a UCT client reaches: each call returns a
 * ucs_status_t error (never UCS_OK, never UCS_ERR_NO_RESOURCE, which would
 * make a caller retry forever), nothing reaches the receiver, and the iface
 * keeps working afterwards.
 */
#include "tag_fixture.h"

#include <gtest/gtest.h>

#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstring>
#include <functional>

#include "sm/sm_rkey.h"
#include "sm/sm_peer.h"

namespace uct_tm_test {
namespace {

constexpr uct_tag_t kFullMask = ~uct_tag_t{0};

bool is_error(ucs_status_t status) {
    return (status < 0) && (status != UCS_ERR_NO_RESOURCE);
}

::testing::AssertionResult IsError(const char *expr, ucs_status_t status) {
    if (is_error(status)) {
        return ::testing::AssertionSuccess();
    }
    return ::testing::AssertionFailure() << expr << " returned " << ucs_status_string(status);
}

#define EXPECT_ERROR(expr) EXPECT_PRED_FORMAT1(IsError, expr)

class TagBadInput : public TagTest {
  protected:
    /* Endpoints connected when first used (tm_dc): an address is only
     * proven good or bad by the connection handshake. */
    bool on_demand() const { return GetParam() == "tm_dc"; }

    /* The receiver got nothing and still delivers a valid message. */
    void expect_still_working() {
        drain(200);
        EXPECT_TRUE(rx_->unexp.messages.empty()) << "a rejected send reached the receiver";
        EXPECT_TRUE(rx_->unexp.rndvs.empty()) << "a rejected send reached the receiver";
        const Path path = lacks(Path::kBcopy) ? Path::kZcopy : Path::kBcopy;
        RecvCtx     r;
        RecvBuffers b(100);
        ASSERT_EQ(post(r, 0xfeed, kFullMask, b), UCS_OK);
        Send s(path, 0xfeed, 3, 77, 100);
        ASSERT_EQ(send(s), UCS_OK);
        ASSERT_TRUE(wait([&] { return r.done(); }));
        ASSERT_TRUE(finish(s));
        EXPECT_EQ(check_delivery(r, b, s, UCS_OK), "");
    }

    std::string iface_address(uct_iface_h iface) const {
        std::string a(rx_->attr.iface_addr_len, '\0');
        uct_iface_get_address(iface, reinterpret_cast<uct_iface_addr_t *>(&a[0]));
        return a;
    }

    /* From `from` (default: the sender iface) to a raw iface address. */
    /* uct_ep_create's status; the endpoint is destroyed again unless `keep`. */
    ucs_status_t connect_raw(const void *iface_addr, const void *dev_addr, uct_ep_h *ep,
                             uct_iface_h from = nullptr, bool keep = false) {
        uct_ep_params_t p = {};
        p.field_mask      = UCT_EP_PARAM_FIELD_IFACE | UCT_EP_PARAM_FIELD_IFACE_ADDR;
        p.iface           = (from != nullptr) ? from : tx_->iface;
        p.iface_addr      = static_cast<const uct_iface_addr_t *>(iface_addr);
        if (dev_addr != nullptr) {
            p.field_mask |= UCT_EP_PARAM_FIELD_DEV_ADDR;
            p.dev_addr = static_cast<const uct_device_addr_t *>(dev_addr);
        }
        *ep = nullptr;
        const ucs_status_t status = uct_ep_create(&p, ep);
        if ((status == UCS_OK) && !keep) {
            uct_ep_destroy(*ep);
        }
        return status;
    }
};

struct Pack {
    size_t claim;  /* what the callback returns */
    size_t write;  /* what it really writes */
    static size_t cb(void *dest, void *arg) {
        auto *p = static_cast<Pack *>(arg);
        memset(dest, 'p', p->write);
        return p->claim;
    }
};

TEST_P(TagBadInput, TagRecvZcopy) {
    const Caps  &c = rx_->caps;
    RecvCtx      r;
    RecvBuffers  b(64, c.recv_max_iov + 1);
    EXPECT_ERROR(uct_iface_tag_recv_zcopy(rx_->iface, 1, kFullMask, nullptr, 1, &r.ctx));
    EXPECT_ERROR(uct_iface_tag_recv_zcopy(rx_->iface, 1, kFullMask, b.iov.data(),
                                          c.recv_max_iov + 1, &r.ctx));
    EXPECT_ERROR(uct_iface_tag_recv_zcopy(rx_->iface, 1, kFullMask, b.iov.data(), SIZE_MAX,
                                          &r.ctx));
    EXPECT_ERROR(uct_iface_tag_recv_zcopy(rx_->iface, 1, kFullMask, b.iov.data(), 1, nullptr));
    uct_iov_t bad = b.iov[0];
    bad.buffer    = nullptr;
    bad.length    = 100;
    EXPECT_ERROR(uct_iface_tag_recv_zcopy(rx_->iface, 1, kFullMask, &bad, 1, &r.ctx));
    if (c.recv_max_iov >= 2) {
        /* Lengths that overflow size_t when added. */
        uct_iov_t two[2] = {b.iov[0], b.iov[1]};
        two[0].length = two[1].length = SIZE_MAX / 2 + 2;
        EXPECT_ERROR(uct_iface_tag_recv_zcopy(rx_->iface, 1, kFullMask, two, 2, &r.ctx));
    }
    EXPECT_TRUE(r.events.empty());
    expect_still_working();
}

TEST_P(TagBadInput, EagerShort) {
    if (lacks(Path::kShort)) {
        GTEST_SKIP();
    }
    std::vector<char> big(tx_->caps.max_short + 1, 'x');
    EXPECT_ERROR(uct_ep_tag_eager_short(ep_, 1, big.data(), big.size()));
    EXPECT_ERROR(uct_ep_tag_eager_short(ep_, 1, big.data(), SIZE_MAX));
    EXPECT_ERROR(uct_ep_tag_eager_short(ep_, 1, nullptr, 8));
    expect_still_working();
}

TEST_P(TagBadInput, EagerBcopy) {
    if (lacks(Path::kBcopy)) {
        GTEST_SKIP();
    }
    const size_t max = tx_->caps.max_bcopy;
    /* The pack callback claims more than max_bcopy (it writes max_bcopy). */
    Pack over = {max + 1, max};
    ssize_t n = uct_ep_tag_eager_bcopy(ep_, 1, 0, Pack::cb, &over, 0);
    EXPECT_TRUE(is_error(static_cast<ucs_status_t>(n < 0 ? n : 0))) << n;
    Pack huge = {SIZE_MAX / 2, 0};
    n = uct_ep_tag_eager_bcopy(ep_, 1, 0, Pack::cb, &huge, 0);
    EXPECT_TRUE(is_error(static_cast<ucs_status_t>(n < 0 ? n : 0))) << n;
    n = uct_ep_tag_eager_bcopy(ep_, 1, 0, nullptr, &huge, 0);
    EXPECT_TRUE(is_error(static_cast<ucs_status_t>(n < 0 ? n : 0))) << n;
    expect_still_working();
}

TEST_P(TagBadInput, EagerZcopy) {
    if (lacks(Path::kZcopy)) {
        GTEST_SKIP();
    }
    const Caps       &c = tx_->caps;
    std::vector<char> data(c.max_zcopy + 1, 'z');
    Completion        comp;
    auto              iov = split_iov(data.data(), data.size(), 1);
    EXPECT_ERROR(uct_ep_tag_eager_zcopy(ep_, 1, 0, iov.data(), 1, 0, &comp.comp));
    EXPECT_ERROR(uct_ep_tag_eager_zcopy(ep_, 1, 0, nullptr, 1, 0, &comp.comp));
    auto many = split_iov(data.data(), 64, c.eager_max_iov + 1);
    EXPECT_ERROR(uct_ep_tag_eager_zcopy(ep_, 1, 0, many.data(), many.size(), 0, &comp.comp));
    EXPECT_ERROR(uct_ep_tag_eager_zcopy(ep_, 1, 0, many.data(), SIZE_MAX, 0, &comp.comp));
    uct_iov_t null_buf = {nullptr, 10, nullptr, 0, 1};
    EXPECT_ERROR(uct_ep_tag_eager_zcopy(ep_, 1, 0, &null_buf, 1, 0, &comp.comp));
    if (c.eager_max_iov >= 2) {
        uct_iov_t two[2] = {{data.data(), SIZE_MAX / 2 + 2, nullptr, 0, 1},
                            {data.data(), SIZE_MAX / 2 + 2, nullptr, 0, 1}};
        EXPECT_ERROR(uct_ep_tag_eager_zcopy(ep_, 1, 0, two, 2, 0, &comp.comp));
    }
    EXPECT_EQ(comp.calls, 0);
    expect_still_working();
}

TEST_P(TagBadInput, RndvZcopy) {
    if (lacks(Path::kRndv)) {
        GTEST_SKIP();
    }
    const Caps       &c = tx_->caps;
    std::vector<char> data(4096, 'r');
    std::string       hdr(c.rndv_max_hdr + 1, 'h');
    Completion        comp;
    uct_iov_t         iov[2] = {{data.data(), 2048, nullptr, 0, 1},
                                {data.data() + 2048, 2048, nullptr, 0, 1}};
    auto rndv = [&](const void *h, unsigned hl, const uct_iov_t *v, size_t n) {
        const ucs_status_ptr_t op = uct_ep_tag_rndv_zcopy(ep_, 1, h, hl, v, n, 0, &comp.comp);
        if (!UCS_PTR_IS_ERR(op)) {
            uct_ep_tag_rndv_cancel(ep_, op);
            return UCS_OK;
        }
        return UCS_PTR_STATUS(op);
    };
    EXPECT_ERROR(rndv(hdr.data(), static_cast<unsigned>(hdr.size()), iov, 1));
    EXPECT_ERROR(rndv(hdr.data(), UINT32_MAX, iov, 1));
    EXPECT_ERROR(rndv(nullptr, 8, iov, 1));
    EXPECT_ERROR(rndv(hdr.data(), 8, nullptr, 1));
    if (c.rndv_max_iov < 2) {
        EXPECT_ERROR(rndv(hdr.data(), 8, iov, 2));
    }
    EXPECT_ERROR(rndv(hdr.data(), 8, iov, SIZE_MAX));
    uct_iov_t null_buf = {nullptr, 10, nullptr, 0, 1};
    EXPECT_ERROR(rndv(hdr.data(), 8, &null_buf, 1));
    /* One byte past rndv.max_zcopy: refused before a byte is read. */
    uct_iov_t over = {data.data(), c.rndv_max_zcopy + 1, nullptr, 0, 1};
    if (c.rndv_max_zcopy < SIZE_MAX) {
        EXPECT_EQ(rndv(hdr.data(), 8, &over, 1), UCS_ERR_EXCEEDS_LIMIT);
    }
    /* Cancel of operations that do not exist. */
    Rng rng(test_seed() ^ 20);
    for (int i = 0; i < 100; ++i) {
        void *op = reinterpret_cast<void *>(static_cast<uintptr_t>(rng.next() >> (i % 64)));
        EXPECT_ERROR(uct_ep_tag_rndv_cancel(ep_, op));
    }
    EXPECT_EQ(comp.calls, 0);
    expect_still_working();
}

TEST_P(TagBadInput, RndvRequest) {
    if (lacks(Path::kRndv)) {
        GTEST_SKIP();
    }
    std::vector<char> hdr(1 << 20, 'q');
    EXPECT_ERROR(uct_ep_tag_rndv_request(ep_, 1, hdr.data(), static_cast<unsigned>(hdr.size()), 0));
    EXPECT_ERROR(uct_ep_tag_rndv_request(ep_, 1, hdr.data(), UINT32_MAX, 0));
    EXPECT_ERROR(uct_ep_tag_rndv_request(ep_, 1, nullptr, 10, 0));
    expect_still_working();
}

TEST_P(TagBadInput, ActiveMessages) {
    std::vector<std::string> log;
    ASSERT_EQ(rx_->set_am_log(1, &log), UCS_OK);
    const Caps       &c = tx_->caps;
    std::vector<char> data(rx_->attr.cap.am.max_bcopy + 1, 'a');
    const uint8_t     bad_ids[] = {UCT_AM_ID_MAX, UCT_AM_ID_MAX + 1, 255};
    for (uint8_t id : bad_ids) {
        SCOPED_TRACE("am id " + std::to_string(id));
        EXPECT_ERROR(uct_ep_am_short(ep_, id, 0, data.data(), 8));
        Pack    p = {8, 8};
        ssize_t n = uct_ep_am_bcopy(ep_, id, Pack::cb, &p, 0);
        EXPECT_TRUE(is_error(static_cast<ucs_status_t>(n < 0 ? n : 0))) << n;
        uct_iov_t iov = {data.data(), 8, nullptr, 0, 1};
        EXPECT_ERROR(uct_ep_am_zcopy(ep_, id, nullptr, 0, &iov, 1, 0, nullptr));
    }
    EXPECT_ERROR(uct_ep_am_short(ep_, 1, 0, data.data(),
                                 static_cast<unsigned>(rx_->attr.cap.am.max_short)));
    Pack over = {rx_->attr.cap.am.max_bcopy + 1, rx_->attr.cap.am.max_bcopy};
    ssize_t n = uct_ep_am_bcopy(ep_, 1, Pack::cb, &over, 0);
    EXPECT_TRUE(is_error(static_cast<ucs_status_t>(n < 0 ? n : 0))) << n;
    uct_iov_t big = {data.data(), data.size(), nullptr, 0, 1};
    EXPECT_ERROR(uct_ep_am_zcopy(ep_, 1, nullptr, 0, &big, 1, 0, nullptr));
    std::string hdr(rx_->attr.cap.am.max_hdr + 1, 'h');
    uct_iov_t   small = {data.data(), 8, nullptr, 0, 1};
    EXPECT_ERROR(uct_ep_am_zcopy(ep_, 1, hdr.data(), static_cast<unsigned>(hdr.size()), &small, 1,
                                 0, nullptr));
    auto many = split_iov(data.data(), 64, rx_->attr.cap.am.max_iov + 1);
    EXPECT_ERROR(uct_ep_am_zcopy(ep_, 1, nullptr, 0, many.data(), many.size(), 0, nullptr));
    drain(200);
    EXPECT_TRUE(log.empty());
    (void)c;
    expect_still_working();
}

/* CONNECT_TO_EP transports: endpoint addresses from nowhere. */
TEST_P(TagBadInput, EpConnectWithGarbageAddresses) {
    if (!(tx_->attr.cap.flags & UCT_IFACE_FLAG_CONNECT_TO_EP) ||
        (tx_->attr.cap.flags & UCT_IFACE_FLAG_CONNECT_TO_IFACE)) {
        GTEST_SKIP() << GetParam() << " connects to iface addresses";
    }
    uct_ep_params_t p = {};
    p.field_mask      = UCT_EP_PARAM_FIELD_IFACE;
    p.iface           = tx_->iface;
    uct_ep_h ep;
    ASSERT_EQ(uct_ep_create(&p, &ep), UCS_OK);
    std::string dev(tx_->attr.device_addr_len, '\0'), epa(tx_->attr.ep_addr_len, '\0');
    ASSERT_EQ(uct_iface_get_device_address(rx_->iface, reinterpret_cast<uct_device_addr_t *>(&dev[0])),
              UCS_OK);
    EXPECT_ERROR(uct_ep_connect_to_ep(ep, nullptr, reinterpret_cast<const uct_ep_addr_t *>(epa.data())));
    EXPECT_ERROR(uct_ep_connect_to_ep(ep, reinterpret_cast<const uct_device_addr_t *>(dev.data()), nullptr));
    /* A device address of another link layer is unreachable. */
    std::string other_dev = dev;
    for (char &ch : other_dev) {
        ch = static_cast<char>(~ch);
    }
    EXPECT_FALSE(uct_iface_is_reachable(tx_->iface,
                                        reinterpret_cast<const uct_device_addr_t *>(other_dev.data()),
                                        nullptr));
    EXPECT_ERROR(uct_ep_connect_to_ep(ep, reinterpret_cast<const uct_device_addr_t *>(other_dev.data()),
                                      reinterpret_cast<const uct_ep_addr_t *>(epa.data())));
    uct_ep_destroy(ep);
    /* The connected endpoint cannot be connected again. */
    std::string back(tx_->attr.ep_addr_len, '\0');
    ASSERT_EQ(uct_ep_get_address(rx_ep_, reinterpret_cast<uct_ep_addr_t *>(&back[0])), UCS_OK);
    EXPECT_ERROR(uct_ep_connect_to_ep(ep_, reinterpret_cast<const uct_device_addr_t *>(dev.data()),
                                      reinterpret_cast<const uct_ep_addr_t *>(back.data())));
    expect_still_working();
}

TEST_P(TagBadInput, EpCreateWithGarbageAddresses) {
    if (!(tx_->attr.cap.flags & UCT_IFACE_FLAG_CONNECT_TO_IFACE)) {
        GTEST_SKIP() << GetParam() << " connects endpoint to endpoint";
    }
    const std::string good = iface_address(rx_->iface);
    std::string       dev(rx_->attr.device_addr_len, '\0');
    ASSERT_EQ(uct_iface_get_device_address(rx_->iface,
                                           reinterpret_cast<uct_device_addr_t *>(&dev[0])),
              UCS_OK);
    uct_ep_h ep;
    ASSERT_EQ(connect_raw(good.data(), dev.data(), &ep), UCS_OK);

    /* Missing the iface address. */
    uct_ep_params_t p = {};
    p.field_mask      = UCT_EP_PARAM_FIELD_IFACE;
    p.iface           = tx_->iface;
    EXPECT_ERROR(uct_ep_create(&p, &ep));
    p.field_mask |= UCT_EP_PARAM_FIELD_IFACE_ADDR;
    p.iface_addr = nullptr;
    EXPECT_ERROR(uct_ep_create(&p, &ep));

    /* Random bytes. Where the bytes name a process, it is one that does not
     * exist: opening another process's descriptors is not this test's business. */
    Rng rng(test_seed() ^ 21);
    for (int i = 0; i < 300; ++i) {
        std::string junk(good.size(), '\0');
        for (char &ch : junk) {
            ch = static_cast<char>(rng.next());
        }
        if (GetParam() == "tm_sm") {
            uct_tm::sm::IfaceAddress a;
            memcpy(&a, junk.data(), sizeof(a));
            if (i % 3 == 0) {
                a.segment.uid = getuid();
            }
            if ((a.segment.pid > 0) && (kill(a.segment.pid, 0) == 0)) {
                a.segment.pid = 0x7ffffff0;
            }
            memcpy(&junk[0], &a, sizeof(a));
        }
        EXPECT_ERROR(connect_raw(junk.data(), nullptr, &ep)) << "attempt " << i;
    }
    /* Another host's device address. */
    std::string other_dev = dev;
    for (char &ch : other_dev) {
        ch = static_cast<char>(~ch);
    }
    EXPECT_ERROR(connect_raw(good.data(), other_dev.data(), &ep));
    EXPECT_FALSE(uct_iface_is_reachable(tx_->iface,
                                        reinterpret_cast<const uct_device_addr_t *>(other_dev.data()),
                                        reinterpret_cast<const uct_iface_addr_t *>(good.data())));

    /* A closed iface. */
    std::string closed;
    {
        Node gone(*env_, GetParam());
        ASSERT_EQ(gone.status, UCS_OK);
        closed = iface_address(gone.iface);
    }
    const ucs_status_t to_closed = connect_raw(closed.data(), dev.data(), &ep, nullptr, on_demand());
    if (on_demand()) {
        /* Its endpoints connect when first used: a closed iface never
         * answers, and the endpoint fails through the error handler. */
        ASSERT_EQ(to_closed, UCS_OK);
        EXPECT_EQ(uct_ep_tag_eager_short(ep, 1, "x", 1), UCS_ERR_NO_RESOURCE); /* connecting */
        EXPECT_TRUE(wait([&] { return tx_->errors.count(ep) > 0; }, 30))
                << "an endpoint to a closed iface did not fail";
        EXPECT_EQ(tx_->errors.count(ep), 1);
        uct_ep_destroy(ep);
    } else {
        EXPECT_ERROR(to_closed);
    }

    if (GetParam() == "tm_sm") {
        /* The real address with one field wrong at a time, from an iface
         * that has not attached to the receiver yet (an existing attachment
         * to the same iface would be reused without mapping it again). */
        Node fresh(*env_, GetParam());
        ASSERT_EQ(fresh.status, UCS_OK);
        uct_tm::sm::IfaceAddress a;
        auto                     mutate = [&](const std::function<void(uct_tm::sm::IfaceAddress &)> &f) {
            memcpy(&a, good.data(), sizeof(a));
            f(a);
            return connect_raw(&a, dev.data(), &ep, fresh.iface);
        };
        pid_t dead = fork();
        if (dead == 0) {
            _exit(0);
        }
        ASSERT_GT(dead, 0);
        waitpid(dead, nullptr, 0);
        EXPECT_ERROR(mutate([&](uct_tm::sm::IfaceAddress &x) { x.segment.pid = dead; }));
        EXPECT_ERROR(mutate([](uct_tm::sm::IfaceAddress &x) { x.segment.pid = -5; }));
        EXPECT_ERROR(mutate([](uct_tm::sm::IfaceAddress &x) { x.segment.uid += 1; }));
        EXPECT_ERROR(mutate([](uct_tm::sm::IfaceAddress &x) { x.segment.size *= 2; }));
        EXPECT_ERROR(mutate([](uct_tm::sm::IfaceAddress &x) { x.segment.size = 8; }));
        EXPECT_ERROR(mutate([](uct_tm::sm::IfaceAddress &x) { x.segment.size = 4096; }));
        EXPECT_ERROR(mutate([](uct_tm::sm::IfaceAddress &x) { x.segment.size = ~0ull; }));
        EXPECT_ERROR(mutate([](uct_tm::sm::IfaceAddress &x) { x.iface_serial += 1000; }));
        EXPECT_ERROR(mutate([](uct_tm::sm::IfaceAddress &x) { x.iface_serial = 0; }));
        EXPECT_ERROR(mutate([](uct_tm::sm::IfaceAddress &x) { x.segment.fd = -1; }));
        EXPECT_ERROR(mutate([](uct_tm::sm::IfaceAddress &x) { x.segment.fd = 1 << 20; }));
        EXPECT_ERROR(mutate([](uct_tm::sm::IfaceAddress &x) { x.segment.serial = 12345; }));
        /* Descriptors of ours that are not segments: a pipe (private
         * mode, size 0), and a private memfd full of junk. */
        int pipefd[2];
        ASSERT_EQ(pipe(pipefd), 0);
        EXPECT_ERROR(mutate([&](uct_tm::sm::IfaceAddress &x) { x.segment.fd = pipefd[0]; }));
        const int junkfd = memfd_create("junk", MFD_CLOEXEC);
        ASSERT_GE(junkfd, 0);
        ASSERT_EQ(fchmod(junkfd, 0600), 0);
        std::vector<char> junk(good.size() > 0 ? (1 << 20) : 0);
        for (char &ch : junk) {
            ch = static_cast<char>(rng.next());
        }
        ASSERT_EQ(write(junkfd, junk.data(), junk.size()), static_cast<ssize_t>(junk.size()));
        EXPECT_ERROR(mutate([&](uct_tm::sm::IfaceAddress &x) {
            x.segment.fd   = junkfd;
            x.segment.size = junk.size();
        }));
        ::close(pipefd[0]);
        ::close(pipefd[1]);
        ::close(junkfd);
    }
    expect_still_working();
}

TEST_P(TagBadInput, RkeysAndOneSidedCopies) {
    if (!(rx_->caps.flags & UCT_IFACE_FLAG_GET_ZCOPY)) {
        GTEST_SKIP();
    }
    uct_md_attr_t md_attr;
    ASSERT_EQ(uct_md_query(env_->md(), &md_attr), UCS_OK);
    uct_rkey_bundle_t rkey;
    Rng               rng(test_seed() ^ 22);
    std::string       junk(md_attr.rkey_packed_size, '\0');
    for (int i = 0; i < 16; ++i) {
        for (char &ch : junk) {
            ch = static_cast<char>(rng.next());
        }
        const ucs_status_t status = uct_rkey_unpack(env_->component(), junk.data(), &rkey);
        if (status == UCS_OK) {
            uct_rkey_release(env_->component(), &rkey);
        }
        EXPECT_ERROR(status);
    }
    /* A registered buffer: copies outside its range, too many iovs. */
    std::vector<char> target(4096, 't');
    uct_mem_h         memh;
    ASSERT_EQ(uct_md_mem_reg(env_->md(), target.data(), target.size(), UCT_MD_MEM_ACCESS_ALL, &memh), UCS_OK);
    std::string packed(md_attr.rkey_packed_size, '\0');
    ASSERT_EQ(uct_md_mkey_pack(env_->md(), memh, &packed[0]), UCS_OK);
    ASSERT_EQ(uct_rkey_unpack(env_->component(), packed.data(), &rkey), UCS_OK);
    const uint64_t    base = reinterpret_cast<uintptr_t>(target.data());
    std::vector<char> local(8192);
    uct_iov_t         iov  = {local.data(), 100, nullptr, 0, 1};
    uct_iov_t         over = {local.data(), 4097, nullptr, 0, 1};
    EXPECT_ERROR(uct_ep_get_zcopy(ep_, &over, 1, base, rkey.rkey, nullptr));
    EXPECT_ERROR(uct_ep_get_zcopy(ep_, &iov, 1, base + 4000, rkey.rkey, nullptr));
    EXPECT_ERROR(uct_ep_get_zcopy(ep_, &iov, 1, base - 1, rkey.rkey, nullptr));
    EXPECT_ERROR(uct_ep_get_zcopy(ep_, &iov, 1, ~0ull - 10, rkey.rkey, nullptr));
    EXPECT_ERROR(uct_ep_put_zcopy(ep_, &iov, 1, base + 4090, rkey.rkey, nullptr));
    EXPECT_ERROR(uct_ep_get_zcopy(ep_, nullptr, 1, base, rkey.rkey, nullptr));
    auto many = split_iov(local.data(), 64, rx_->attr.cap.get.max_iov + 1);
    EXPECT_ERROR(uct_ep_get_zcopy(ep_, many.data(), many.size(), base, rkey.rkey, nullptr));
    /* The good one works. */
    ucs_status_t status = uct_ep_get_zcopy(ep_, &iov, 1, base + 10, rkey.rkey, nullptr);
    EXPECT_TRUE((status == UCS_OK) || (status == UCS_INPROGRESS));
    uct_rkey_release(env_->component(), &rkey);
    EXPECT_EQ(uct_md_mem_dereg(env_->md(), memh), UCS_OK);

    if (GetParam() == "tm_sm") {
        /* A forged rkey naming this very process and memory that is not
         * mapped: an error, not a crash. */
        char *hole = static_cast<char *>(mmap(nullptr, 1 << 16, PROT_NONE,
                                              MAP_PRIVATE | MAP_ANONYMOUS, -1, 0));
        ASSERT_NE(hole, MAP_FAILED);
        ASSERT_EQ(uct_md_mem_reg(env_->md(), hole, 1 << 16, UCT_MD_MEM_ACCESS_ALL, &memh), UCS_OK);
        ASSERT_EQ(uct_md_mkey_pack(env_->md(), memh, &packed[0]), UCS_OK);
        ASSERT_EQ(uct_rkey_unpack(env_->component(), packed.data(), &rkey), UCS_OK);
        uct_iov_t small = {local.data(), 4096, nullptr, 0, 1};
        EXPECT_ERROR(uct_ep_get_zcopy(ep_, &small, 1, reinterpret_cast<uintptr_t>(hole),
                                      rkey.rkey, nullptr));
        EXPECT_ERROR(uct_ep_put_zcopy(ep_, &small, 1, reinterpret_cast<uintptr_t>(hole),
                                      rkey.rkey, nullptr));
        uct_rkey_release(env_->component(), &rkey);
        EXPECT_EQ(uct_md_mem_dereg(env_->md(), memh), UCS_OK);
        munmap(hole, 1 << 16);
    }
    expect_still_working();
}

/* Keys of memory the MD allocated (a shared-memory segment peers map): a
 * forged one whose offset into the segment wraps (offset + length passes
 * "<= size" modulo 2^64), whose segment is another process's, or whose range
 * wraps the address space, is refused at unpack; rkey_ptr never hands out an
 * address outside the segment. */
TEST_P(TagBadInput, ForgedSegmentRkeys) {
    if (GetParam() != "tm_sm") {
        GTEST_SKIP() << "rkeys of MD-allocated shared memory are tm_sm's";
    }
    uct_md_attr_t md_attr;
    ASSERT_EQ(uct_md_query(env_->md(), &md_attr), UCS_OK);
    ASSERT_EQ(md_attr.rkey_packed_size, sizeof(uct_tm::sm::PackedRkey));
    ucs_status_t           status;
    uct_allocated_memory_t mem = md_alloc(env_->md(), 8192, &status);
    ASSERT_EQ(status, UCS_OK);
    void                  *address = mem.address;
    uct_tm::sm::PackedRkey good;
    ASSERT_EQ(uct_md_mkey_pack(env_->md(), mem.memh, &good), UCS_OK);
    ASSERT_TRUE(good.flags & uct_tm::sm::kRkeyHasShm);

    /* The genuine key maps the segment, at the right place. */
    uct_rkey_bundle_t rkey;
    ASSERT_EQ(uct_rkey_unpack(env_->component(), &good, &rkey), UCS_OK);
    void *local = nullptr;
    ASSERT_EQ(uct_rkey_ptr(env_->component(), &rkey, good.address + 100, &local), UCS_OK);
    static_cast<char *>(address)[100] = 'g';
    EXPECT_EQ(*static_cast<char *>(local), 'g');
    uct_rkey_release(env_->component(), &rkey);

    auto refused = [&](const char *what, const std::function<void(uct_tm::sm::PackedRkey &)> &forge) {
        uct_tm::sm::PackedRkey forged = good;
        forge(forged);
        uct_rkey_bundle_t b;
        const ucs_status_t status = uct_rkey_unpack(env_->component(), &forged, &b);
        EXPECT_EQ(status, UCS_ERR_INVALID_PARAM) << what;
        if (status == UCS_OK) {
            void *p = nullptr;
            if (uct_rkey_ptr(env_->component(), &b, forged.address, &p) == UCS_OK) {
                ADD_FAILURE() << what << ": rkey_ptr gave " << p << ", the segment is at "
                              << address;
            }
            uct_rkey_release(env_->component(), &b);
        }
    };
    refused("offset wrapping past 2^64", [&](uct_tm::sm::PackedRkey &k) {
        k.shm_offset = ~uint64_t{0} - 4095;
        k.length     = 4096;
    });
    refused("offset past the segment", [&](uct_tm::sm::PackedRkey &k) { k.shm_offset = good.shm.size; });
    refused("length past the segment", [&](uct_tm::sm::PackedRkey &k) { k.length = good.shm.size + 1; });
    refused("segment of another process", [&](uct_tm::sm::PackedRkey &k) { k.shm.pid = k.pid + 1; });
    refused("range wrapping the address space", [&](uct_tm::sm::PackedRkey &k) {
        k.flags   = 0;
        k.address = ~uint64_t{0} - 100;
        k.length  = 4096;
    });
    EXPECT_EQ(uct_mem_free(&mem), UCS_OK);
    expect_still_working();
}

/* One rule for a uct_iov_t list (uct_tm/tag/uct_iov.h), the same on every
 * transport and every operation that takes one: a null list with entries,
 * more entries than the operation's max_iov, or an entry without a buffer
 * but with bytes is UCS_ERR_INVALID_PARAM; an entry whose count is not 1 is
 * UCS_ERR_UNSUPPORTED; more bytes than the operation's max_zcopy (or a sum
 * that wraps) is UCS_ERR_EXCEEDS_LIMIT. Nothing is sent or posted. */
TEST_P(TagBadInput, SameBadIovSameStatusOnEveryPath) {
    const uct_iface_attr_t &a = rx_->attr;
    uct_md_attr_t           md_attr;
    ASSERT_EQ(uct_md_query(env_->md(), &md_attr), UCS_OK);
    std::vector<char> target(4096, 't');
    uct_mem_h         memh;
    ASSERT_EQ(uct_md_mem_reg(env_->md(), target.data(), target.size(), UCT_MD_MEM_ACCESS_ALL,
                             &memh), UCS_OK);
    std::string packed(md_attr.rkey_packed_size, '\0');
    ASSERT_EQ(uct_md_mkey_pack(env_->md(), memh, &packed[0]), UCS_OK);
    uct_rkey_bundle_t rkey;
    ASSERT_EQ(uct_rkey_unpack(env_->component(), packed.data(), &rkey), UCS_OK);
    const uint64_t remote = reinterpret_cast<uintptr_t>(target.data());

    using Call = std::function<ucs_status_t(const uct_iov_t *, size_t)>;
    struct Op {
        const char *name;
        size_t      max_iov;
        size_t      max_total;
        Call        call;
    };
    std::vector<Op> ops = {
        {"tag_recv_zcopy", a.cap.tag.recv.max_iov, a.cap.tag.recv.max_zcopy,
         [&](const uct_iov_t *iov, size_t n) {
             RecvCtx            r;
             const ucs_status_t status =
                 uct_iface_tag_recv_zcopy(rx_->iface, 0x77, kFullMask, iov, n, &r.ctx);
             if (status == UCS_OK) {
                 uct_iface_tag_recv_cancel(rx_->iface, &r.ctx, 1);
             }
             return status;
         }},
        {"tag_eager_zcopy", a.cap.tag.eager.max_iov, a.cap.tag.eager.max_zcopy,
         [&](const uct_iov_t *iov, size_t n) {
             return uct_ep_tag_eager_zcopy(ep_, 0x78, 0, iov, n, 0, nullptr);
         }},
        {"tag_rndv_zcopy", a.cap.tag.rndv.max_iov, a.cap.tag.rndv.max_zcopy,
         [&](const uct_iov_t *iov, size_t n) {
             const uint64_t         header = 0;
             const ucs_status_ptr_t op =
                 uct_ep_tag_rndv_zcopy(ep_, 0x79, &header, sizeof(header), iov, n, 0, nullptr);
             if (!UCS_PTR_IS_ERR(op)) {
                 uct_ep_tag_rndv_cancel(ep_, op);
                 return UCS_OK;
             }
             return UCS_PTR_STATUS(op);
         }},
        {"am_zcopy", a.cap.am.max_iov, a.cap.am.max_zcopy,
         [&](const uct_iov_t *iov, size_t n) {
             return uct_ep_am_zcopy(ep_, 5, nullptr, 0, iov, n, 0, nullptr);
         }},
        {"get_zcopy", a.cap.get.max_iov, a.cap.get.max_zcopy,
         [&](const uct_iov_t *iov, size_t n) {
             return uct_ep_get_zcopy(ep_, iov, n, remote, rkey.rkey, nullptr);
         }},
        {"put_zcopy", a.cap.put.max_iov, a.cap.put.max_zcopy,
         [&](const uct_iov_t *iov, size_t n) {
             return uct_ep_put_zcopy(ep_, iov, n, remote, rkey.rkey, nullptr);
         }},
    };

    std::vector<char> buf(256);
    const uct_iov_t   one = {buf.data(), 8, nullptr, 0, 1};
    for (const Op &op : ops) {
        if (op.max_iov == 0) {
            continue; /* the transport does not offer it */
        }
        SCOPED_TRACE(op.name);
        std::vector<uct_iov_t> too_many(op.max_iov + 1, one);
        const uct_iov_t        count0    = {buf.data(), 8, nullptr, 0, 0};
        const uct_iov_t        count2    = {buf.data(), 8, nullptr, 8, 2};
        const uct_iov_t        no_buffer = {nullptr, 8, nullptr, 0, 1};
        EXPECT_EQ(op.call(nullptr, 1), UCS_ERR_INVALID_PARAM) << "null list";
        EXPECT_EQ(op.call(too_many.data(), too_many.size()), UCS_ERR_INVALID_PARAM)
            << op.max_iov + 1 << " entries";
        EXPECT_EQ(op.call(&one, SIZE_MAX), UCS_ERR_INVALID_PARAM) << "SIZE_MAX entries";
        EXPECT_EQ(op.call(&count0, 1), UCS_ERR_UNSUPPORTED) << "count 0";
        EXPECT_EQ(op.call(&count2, 1), UCS_ERR_UNSUPPORTED) << "count 2";
        EXPECT_EQ(op.call(&no_buffer, 1), UCS_ERR_INVALID_PARAM) << "no buffer";
        if (op.max_total < SIZE_MAX) {
            const uct_iov_t big = {buf.data(), op.max_total + 1, nullptr, 0, 1};
            EXPECT_EQ(op.call(&big, 1), UCS_ERR_EXCEEDS_LIMIT) << "max_zcopy + 1 bytes";
        }
        if (op.max_iov >= 2) {
            const uct_iov_t wrap[2] = {{buf.data(), SIZE_MAX / 2 + 2, nullptr, 0, 1},
                                       {buf.data(), SIZE_MAX / 2 + 2, nullptr, 0, 1}};
            EXPECT_EQ(op.call(wrap, 2), UCS_ERR_EXCEEDS_LIMIT) << "a sum that wraps";
        }
    }
    uct_rkey_release(env_->component(), &rkey);
    EXPECT_EQ(uct_md_mem_dereg(env_->md(), memh), UCS_OK);
    expect_still_working();
}

TEST_P(TagBadInput, PendingAndFlush) {
    EXPECT_ERROR(uct_ep_pending_add(ep_, nullptr, 0));
    expect_still_working();
}

}  // namespace

INSTANTIATE_TEST_SUITE_P(tm, TagBadInput, ::testing::ValuesIn(tag_transports()),
                         transport_param_name);
GTEST_ALLOW_UNINSTANTIATED_PARAMETERIZED_TEST(TagBadInput);

}  // namespace uct_tm_test
