/* Bad input to the data calls: the right -FI_E*, and nothing changed (no
 * completion appears, and the endpoint works afterwards). */
#include "fabric_fixture.h"

#include <cstring>

using namespace fabric_test;

namespace {

class FabricErrors : public ::testing::Test {
  protected:
    void SetUp() override {
        ASSERT_EQ(0, f_.open());
        ASSERT_EQ(0, a_.open(f_, FI_CQ_FORMAT_TAGGED, FI_AV_TABLE));
        ASSERT_EQ(0, b_.open(f_, FI_CQ_FORMAT_TAGGED, FI_AV_TABLE));
        ab_ = a_.insert(b_.name());
        ba_ = b_.insert(a_.name());
        ASSERT_NE(FI_ADDR_NOTAVAIL, ba_);
    }
    void TearDown() override {
        /* nothing the bad calls did shows, and a message still goes through */
        EXPECT_FALSE(any_completion({a_.cq, b_.cq}, 0.05));
        const std::vector<char> msg = pattern(100, 1);
        std::vector<char>       buf(100);
        ASSERT_EQ(0, fi_trecv(b_.ep, buf.data(), 100, nullptr, FI_ADDR_UNSPEC, 3, 0, nullptr));
        ASSERT_EQ(0, fi_tsend(a_.ep, msg.data(), 100, nullptr, ab_, 3, nullptr));
        fi_cq_tagged_entry e;
        ASSERT_EQ(1, wait_cq(b_.cq, &e, nullptr, {a_.cq}));
        EXPECT_EQ(msg, buf);
        a_.close();
        b_.close();
        f_.close();
    }

    Fabric    f_;
    Ep        a_, b_;
    fi_addr_t ab_{}, ba_{};
    char      buf_[64] = {};
};

}  // namespace

TEST_F(FabricErrors, BadAddresses) {
    EXPECT_EQ(-FI_EINVAL, fi_tsend(a_.ep, buf_, 8, nullptr, 17, 1, nullptr));
    EXPECT_EQ(-FI_EINVAL, fi_send(a_.ep, buf_, 8, nullptr, FI_ADDR_UNSPEC, nullptr));
    EXPECT_EQ(-FI_EINVAL, fi_tinject(a_.ep, buf_, 8, 17, 1));
    EXPECT_EQ(-FI_EINVAL, fi_trecv(b_.ep, buf_, 8, nullptr, 17, 1, 0, nullptr)); /* directed */
    EXPECT_EQ(-FI_EINVAL, fi_recv(b_.ep, buf_, 8, nullptr, 17, nullptr));
}

TEST_F(FabricErrors, BadFlags) {
    iovec         iov = {buf_, 8};
    fi_msg_tagged tm{};
    tm.msg_iov   = &iov;
    tm.iov_count = 1;
    tm.addr      = ab_;
    EXPECT_EQ(-FI_EBADFLAGS, fi_tsendmsg(a_.ep, &tm, FI_PEEK));
    EXPECT_EQ(-FI_EBADFLAGS, fi_tsendmsg(a_.ep, &tm, FI_MULTI_RECV));
    tm.addr = FI_ADDR_UNSPEC;
    EXPECT_EQ(-FI_EBADFLAGS, fi_trecvmsg(b_.ep, &tm, FI_INJECT));
    EXPECT_EQ(-FI_EBADFLAGS, fi_trecvmsg(b_.ep, &tm, FI_MULTI_RECV));
    EXPECT_EQ(-FI_EINVAL, fi_trecvmsg(b_.ep, &tm, FI_DISCARD)); /* discard needs peek or claim */
    EXPECT_EQ(-FI_EINVAL, fi_trecvmsg(b_.ep, &tm, FI_CLAIM));   /* no context, nothing claimed */
    EXPECT_EQ(-FI_EINVAL, fi_trecvmsg(b_.ep, &tm, FI_PEEK | FI_CLAIM)); /* no fi_context */
    fi_msg m{};
    m.msg_iov   = &iov;
    m.iov_count = 1;
    m.addr      = FI_ADDR_UNSPEC;
    EXPECT_EQ(-FI_EBADFLAGS, fi_recvmsg(b_.ep, &m, FI_PEEK)); /* untagged: no probes */
    EXPECT_EQ(-FI_EBADFLAGS, fi_recvmsg(b_.ep, &m, FI_CLAIM));
    m.addr = ab_;
    EXPECT_EQ(-FI_EBADFLAGS, fi_sendmsg(a_.ep, &m, FI_DISCARD));
}

TEST_F(FabricErrors, BadLengthsAndVectors) {
    std::vector<char> big(8192);
    EXPECT_EQ(-FI_EMSGSIZE, fi_tinject(a_.ep, big.data(), big.size(), ab_, 1));
    EXPECT_EQ(-FI_EMSGSIZE, fi_inject(a_.ep, big.data(), big.size(), ab_));
    EXPECT_EQ(-FI_EINVAL, fi_tsend(a_.ep, nullptr, 8, nullptr, ab_, 1, nullptr));
    EXPECT_EQ(-FI_EINVAL, fi_trecv(b_.ep, nullptr, 8, nullptr, FI_ADDR_UNSPEC, 1, 0, nullptr));
    std::vector<iovec> many(65, iovec{buf_, 1});
    EXPECT_EQ(-FI_EINVAL, fi_tsendv(a_.ep, many.data(), nullptr, 65, ab_, 1, nullptr));
    EXPECT_EQ(-FI_EINVAL, fi_recvv(b_.ep, many.data(), nullptr, 65, FI_ADDR_UNSPEC, nullptr));
    EXPECT_EQ(-FI_EINVAL, fi_sendv(a_.ep, nullptr, nullptr, 2, ab_, nullptr));
    iovec hole[2] = {{buf_, 8}, {nullptr, 8}};
    EXPECT_EQ(-FI_EINVAL, fi_trecvv(b_.ep, hole, nullptr, 2, FI_ADDR_UNSPEC, 1, 0, nullptr));
    iovec wrap[2] = {{buf_, SIZE_MAX}, {buf_, 2}};
    EXPECT_EQ(-FI_EINVAL, fi_tsendv(a_.ep, wrap, nullptr, 2, ab_, 1, nullptr));
    EXPECT_EQ(-FI_EMSGSIZE, fi_tsend(a_.ep, buf_, size_t{1} << 31, nullptr, ab_, 1, nullptr));
    EXPECT_EQ(-FI_EINVAL, fi_tsendmsg(a_.ep, nullptr, 0));
    EXPECT_EQ(-FI_EINVAL, fi_recvmsg(b_.ep, nullptr, 0));
}

TEST_F(FabricErrors, NullAndWrongObjects) {
    fi_cq_tagged_entry e;
    EXPECT_EQ(-FI_EINVAL, fi_cq_readfrom(a_.cq, nullptr, 1, nullptr));
    fi_cq_err_entry err{};
    EXPECT_EQ(-FI_EAGAIN, fi_cq_readerr(a_.cq, &err, 0));
    EXPECT_EQ(-FI_EINVAL, fi_cq_readerr(a_.cq, nullptr, 0));
    EXPECT_EQ(-FI_EINVAL, fi_cq_readerr(a_.cq, &err, FI_PEEK));
    EXPECT_EQ(-FI_EAGAIN, fi_cq_read(a_.cq, &e, 1));
    EXPECT_EQ(-FI_EINVAL, fi_getname(&a_.ep->fid, buf_, nullptr));
    size_t len = 0;
    EXPECT_EQ(-FI_EINVAL, fi_av_lookup(a_.av, ab_, buf_, nullptr));
    EXPECT_EQ(-FI_ETOOSMALL, fi_av_lookup(a_.av, ab_, buf_, &len));
    EXPECT_EQ(-FI_EINVAL, fi_av_remove(a_.av, nullptr, 1, 0));
    EXPECT_EQ(-FI_EBADFLAGS, fi_av_remove(a_.av, &ab_, 1, FI_MORE));
    EXPECT_EQ(-FI_EOPBADSTATE, fi_ep_bind(a_.ep, &a_.cq->fid, FI_TRANSMIT)); /* enabled */
    EXPECT_EQ(-FI_ENOENT, fi_cancel(&a_.ep->fid, buf_));
    fid_ep *ep = nullptr;
    EXPECT_EQ(-FI_EINVAL, fi_endpoint(f_.domain, nullptr, &ep, nullptr));
    fid_av    *av = nullptr;
    fi_av_attr attr{};
    attr.type = static_cast<fi_av_type>(42);
    EXPECT_EQ(-FI_EINVAL, fi_av_open(f_.domain, &attr, &av, nullptr));
    attr.type = FI_AV_TABLE;
    attr.name = "shared";
    EXPECT_EQ(-FI_ENOSYS, fi_av_open(f_.domain, &attr, &av, nullptr));
    EXPECT_EQ(nullptr, av);
    EXPECT_EQ(nullptr, ep);
}

/* A name whose worker is gone is still inserted (RDM peers are named
 * without their consent): operations to or from it fail with
 * -FI_EHOSTUNREACH, posting nothing (over a transport that connects on
 * first use, tm_dc, the first send completes with an error instead), and
 * the endpoint works on. */
TEST(FabricAv, GonePeerIsInsertedButUnreachable) {
    Fabric f;
    ASSERT_EQ(0, f.open());
    Ep a, b, gone;
    ASSERT_EQ(0, a.open(f, FI_CQ_FORMAT_TAGGED, FI_AV_TABLE));
    ASSERT_EQ(0, b.open(f, FI_CQ_FORMAT_TAGGED, FI_AV_TABLE));
    ASSERT_EQ(0, gone.open(f, FI_CQ_FORMAT_TAGGED, FI_AV_TABLE));
    const std::vector<char> name = gone.name();
    gone.close();
    const fi_addr_t dead = a.insert(name);
    ASSERT_NE(FI_ADDR_NOTAVAIL, dead);
    char          buf[8] = {};
    int           ctx    = 0;
    const ssize_t sent   = fi_send(a.ep, buf, sizeof(buf), nullptr, dead, &ctx);
    if (sent == 0) {
        /* a transport that connects on first use (tm_dc): the send fails
         * there, as an error completion */
        fi_cq_tagged_entry e;
        ASSERT_EQ(-FI_EAVAIL, wait_cq(a.cq, &e, nullptr)) << "a send to a gone peer";
        const fi_cq_err_entry err = read_err(a.cq);
        EXPECT_EQ(&ctx, err.op_context);
        EXPECT_NE(0, err.err);
    } else {
        EXPECT_EQ(-FI_EHOSTUNREACH, sent);
        EXPECT_EQ(-FI_EHOSTUNREACH, fi_tsend(a.ep, buf, sizeof(buf), nullptr, dead, 1, nullptr));
        EXPECT_EQ(-FI_EHOSTUNREACH, fi_trecv(a.ep, buf, sizeof(buf), nullptr, dead, 1, 0, nullptr));
    }
    EXPECT_EQ(-FI_EINVAL, fi_send(a.ep, buf, sizeof(buf), nullptr, dead + 1, nullptr));
    EXPECT_FALSE(any_completion({a.cq}, 0.05));
    ASSERT_EQ(0, fi_av_remove(a.av, const_cast<fi_addr_t *>(&dead), 1, 0));
    EXPECT_EQ(-FI_EINVAL, fi_send(a.ep, buf, sizeof(buf), nullptr, dead, nullptr)) << "removed";
    const fi_addr_t ab = a.insert(b.name());
    ASSERT_NE(FI_ADDR_NOTAVAIL, b.insert(a.name()));
    ASSERT_EQ(0, fi_recv(b.ep, buf, sizeof(buf), nullptr, FI_ADDR_UNSPEC, nullptr));
    ASSERT_EQ(0, fi_send(a.ep, "alive", 6, nullptr, ab, nullptr));
    fi_cq_tagged_entry e;
    ASSERT_EQ(1, wait_cq(b.cq, &e, nullptr, {a.cq}));
    EXPECT_STREQ("alive", buf);
    a.close();
    b.close();
    f.close();
}
