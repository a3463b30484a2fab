/* FI_MULTI_RECV: untagged receives into one buffer, a completion per
 * message and one for the buffer's release; FI_OPT_MIN_MULTI_RECV. */
#include "fabric_fixture.h"

#include <cstring>

using namespace fabric_test;

namespace {

class FabricMultiRecv : public ::testing::Test {
  protected:
    void SetUp() override {
        ASSERT_EQ(0, f_.open());
        ASSERT_TRUE(f_.info->caps & FI_MULTI_RECV);
        ASSERT_TRUE(f_.info->rx_attr->caps & FI_MULTI_RECV);
        ASSERT_EQ(0, a_.open(f_, FI_CQ_FORMAT_TAGGED, FI_AV_TABLE));
        ASSERT_EQ(0, b_.open(f_, FI_CQ_FORMAT_TAGGED, FI_AV_TABLE));
        ab_ = a_.insert(b_.name());
        ASSERT_NE(FI_ADDR_NOTAVAIL, b_.insert(a_.name()));
    }
    void TearDown() override {
        a_.close();
        b_.close();
        f_.close();
    }

    int set_min(size_t bytes) {
        return fi_setopt(&b_.ep->fid, FI_OPT_ENDPOINT, FI_OPT_MIN_MULTI_RECV, &bytes,
                         sizeof(bytes));
    }
    size_t get_min() {
        size_t value = 0, len = sizeof(value);
        EXPECT_EQ(0, fi_getopt(&b_.ep->fid, FI_OPT_ENDPOINT, FI_OPT_MIN_MULTI_RECV, &value, &len));
        EXPECT_EQ(sizeof(value), len);
        return value;
    }
    ssize_t post_multi(std::vector<char> &buf, uint64_t flags = FI_MULTI_RECV) {
        iovec  iov = {buf.data(), buf.size()};
        fi_msg m{};
        m.msg_iov   = &iov;
        m.iov_count = 1;
        m.addr      = FI_ADDR_UNSPEC;
        m.context   = &ctx_;
        return fi_recvmsg(b_.ep, &m, flags);
    }
    ssize_t next_b(fi_cq_tagged_entry *e) { return wait_cq(b_.cq, e, nullptr, {a_.cq}); }

    Fabric     f_;
    Ep         a_, b_;
    fi_addr_t  ab_{};
    fi_context ctx_{};
};

}  // namespace

TEST_F(FabricMultiRecv, MinMultiRecvOption) {
    ASSERT_EQ(0, set_min(100));
    EXPECT_EQ(100u, get_min());
    size_t value = 7, len = sizeof(value);
    EXPECT_EQ(-FI_EINVAL, set_min(0)) << "a buffer with no room left would stay posted";
    EXPECT_EQ(-FI_EINVAL,
              fi_setopt(&b_.ep->fid, FI_OPT_ENDPOINT, FI_OPT_MIN_MULTI_RECV, &value, 4));
    EXPECT_EQ(-FI_EINVAL,
              fi_setopt(&b_.ep->fid, FI_OPT_ENDPOINT, FI_OPT_MIN_MULTI_RECV, nullptr, len));
    EXPECT_EQ(-FI_ENOPROTOOPT,
              fi_setopt(&b_.ep->fid, FI_OPT_ENDPOINT, FI_OPT_CM_DATA_SIZE, &value, len));
    EXPECT_EQ(-FI_ENOSYS,
              fi_setopt(&b_.ep->fid, FI_OPT_ENDPOINT + 1, FI_OPT_MIN_MULTI_RECV, &value, len));
    EXPECT_EQ(100u, get_min()) << "refused settings changed nothing";
    len = 4;
    EXPECT_EQ(-FI_EINVAL,
              fi_getopt(&b_.ep->fid, FI_OPT_ENDPOINT, FI_OPT_MIN_MULTI_RECV, &value, &len));
    EXPECT_EQ(-FI_EINVAL,
              fi_getopt(&b_.ep->fid, FI_OPT_ENDPOINT, FI_OPT_MIN_MULTI_RECV, &value, nullptr));
    EXPECT_EQ(-FI_ENOPROTOOPT,
              fi_getopt(&b_.ep->fid, FI_OPT_ENDPOINT, FI_OPT_CM_DATA_SIZE, &value, &len));
}

/* Messages land one after another; once fewer than the minimum bytes are
 * left the buffer is released (FI_MULTI_RECV alone), and the next message
 * waits for another receive. */
TEST_F(FabricMultiRecv, MessagesFillTheBufferThenItIsReleased) {
    ASSERT_EQ(0, set_min(300));
    std::vector<char> buf(1024, 'g');
    ASSERT_EQ(0, post_multi(buf));
    std::vector<std::vector<char>> msgs;
    for (unsigned i = 0; i < 4; ++i) {
        msgs.push_back(pattern(300, i));
        ASSERT_EQ(0, fi_senddata(a_.ep, msgs[i].data(), msgs[i].size(), nullptr, 40 + i, ab_,
                                 nullptr));
    }
    fi_cq_tagged_entry e{};
    for (unsigned i = 0; i < 3; ++i) {
        ASSERT_EQ(1, next_b(&e)) << i;
        EXPECT_EQ(FI_RECV | FI_MSG | FI_REMOTE_CQ_DATA, e.flags);
        EXPECT_EQ(&ctx_, e.op_context);
        EXPECT_EQ(buf.data() + 300 * i, e.buf);
        EXPECT_EQ(300u, e.len);
        EXPECT_EQ(40u + i, e.data);
        EXPECT_EQ(0, memcmp(e.buf, msgs[i].data(), 300)) << i;
    }
    ASSERT_EQ(1, next_b(&e));
    EXPECT_EQ(FI_MULTI_RECV, e.flags);
    EXPECT_EQ(&ctx_, e.op_context);
    EXPECT_EQ(buf.data(), e.buf);
    EXPECT_EQ(std::string(124, 'g'), std::string(buf.data() + 900, 124)) << "nothing past";
    std::vector<char> last(300);
    ASSERT_EQ(0, fi_recv(b_.ep, last.data(), last.size(), nullptr, FI_ADDR_UNSPEC, nullptr));
    ASSERT_EQ(1, next_b(&e));
    EXPECT_EQ(msgs[3], last);
}

/* A message longer than what is left is cut there (FI_ETRUNC), and the
 * buffer is released after it. */
TEST_F(FabricMultiRecv, TruncatesAtTheEndOfTheBuffer) {
    ASSERT_EQ(0, set_min(16));
    std::vector<char> buf(400);
    ASSERT_EQ(0, post_multi(buf));
    const std::vector<char> m1 = pattern(300, 1), m2 = pattern(300, 2);
    ASSERT_EQ(0, fi_send(a_.ep, m1.data(), m1.size(), nullptr, ab_, nullptr));
    ASSERT_EQ(0, fi_send(a_.ep, m2.data(), m2.size(), nullptr, ab_, nullptr));
    fi_cq_tagged_entry e{};
    ASSERT_EQ(1, next_b(&e));
    EXPECT_EQ(300u, e.len);
    ASSERT_EQ(-FI_EAVAIL, next_b(&e));
    fi_cq_err_entry err = read_err(b_.cq);
    EXPECT_EQ(FI_ETRUNC, err.err);
    EXPECT_EQ(buf.data() + 300, err.buf);
    EXPECT_EQ(100u, err.len);
    EXPECT_EQ(200u, err.olen);
    EXPECT_EQ(0, memcmp(buf.data() + 300, m2.data(), 100));
    ASSERT_EQ(1, next_b(&e));
    EXPECT_EQ(FI_MULTI_RECV, e.flags);
}

TEST_F(FabricMultiRecv, CancelReleasesTheBuffer) {
    std::vector<char> buf(256);
    ASSERT_EQ(0, post_multi(buf));
    ASSERT_EQ(0, fi_cancel(&b_.ep->fid, &ctx_));
    fi_cq_tagged_entry e{};
    ASSERT_EQ(-FI_EAVAIL, next_b(&e));
    fi_cq_err_entry err = read_err(b_.cq);
    EXPECT_EQ(FI_ECANCELED, err.err);
    EXPECT_EQ(FI_MULTI_RECV, err.flags);
    EXPECT_EQ(&ctx_, err.op_context);
}

/* The op flag from FI_SETOPSFLAG makes fi_recv a multi-receive; tagged
 * receives ignore it there and refuse it as a flag. */
TEST_F(FabricMultiRecv, OpFlagAndRefusedUses) {
    std::vector<char> buf(256);
    iovec             iov[2] = {{buf.data(), 128}, {buf.data() + 128, 128}};
    fi_msg            m{};
    m.msg_iov   = iov;
    m.iov_count = 2;
    m.addr      = FI_ADDR_UNSPEC;
    EXPECT_EQ(-FI_EINVAL, fi_recvmsg(b_.ep, &m, FI_MULTI_RECV)) << "one buffer only";
    iov[0].iov_len = 0;
    m.iov_count    = 1;
    EXPECT_EQ(-FI_EINVAL, fi_recvmsg(b_.ep, &m, FI_MULTI_RECV)) << "an empty buffer";
    EXPECT_FALSE(any_completion({b_.cq}, 0.05));

    uint64_t flags = FI_RECV | FI_MULTI_RECV;
    ASSERT_EQ(0, fi_control(&b_.ep->fid, FI_SETOPSFLAG, &flags));
    ASSERT_EQ(0, set_min(200));
    ASSERT_EQ(0, fi_recv(b_.ep, buf.data(), buf.size(), nullptr, FI_ADDR_UNSPEC, &ctx_));
    char tag_buf[8];
    ASSERT_EQ(0, fi_trecv(b_.ep, tag_buf, sizeof(tag_buf), nullptr, FI_ADDR_UNSPEC, 3, 0, nullptr));
    const std::vector<char> msg = pattern(100, 4);
    ASSERT_EQ(0, fi_send(a_.ep, msg.data(), msg.size(), nullptr, ab_, nullptr));
    ASSERT_EQ(0, fi_tsend(a_.ep, msg.data(), 8, nullptr, ab_, 3, nullptr));
    fi_cq_tagged_entry e{};
    int                multi = 0, tagged = 0, parts = 0;
    for (int i = 0; i < 3; ++i) {
        ASSERT_EQ(1, next_b(&e));
        multi += (e.flags == FI_MULTI_RECV);
        tagged += ((e.flags & FI_TAGGED) != 0);
        parts += ((e.flags & FI_MSG) != 0) && (e.buf == buf.data()) && (e.len == 100);
    }
    EXPECT_EQ(1, multi) << "100 of 256 bytes taken: fewer than 200 left";
    EXPECT_EQ(1, tagged);
    EXPECT_EQ(1, parts);
}
