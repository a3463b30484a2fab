/* FI_PEEK / FI_CLAIM / FI_DISCARD, directed receives, selective completion,
 * completion levels: endpoints in one process over tm_sm. */
#include "fabric_fixture.h"

#include <cstring>

using namespace fabric_test;

namespace {

class FabricTrio : public ::testing::Test {
  protected:
    void SetUp() override {
        ASSERT_EQ(0, f_.open());
        ASSERT_EQ(0, a_.open(f_, FI_CQ_FORMAT_TAGGED, FI_AV_TABLE));
        ASSERT_EQ(0, b_.open(f_, FI_CQ_FORMAT_TAGGED, FI_AV_TABLE));
        ASSERT_EQ(0, c_.open(f_, FI_CQ_FORMAT_TAGGED, FI_AV_TABLE, FI_SELECTIVE_COMPLETION));
        ab_ = a_.insert(b_.name());
        ba_ = b_.insert(a_.name());
        cb_ = c_.insert(b_.name());
        bc_ = b_.insert(c_.name());
        ASSERT_NE(FI_ADDR_NOTAVAIL, bc_);
    }
    void TearDown() override {
        a_.close();
        b_.close();
        c_.close();
        f_.close();
    }

    /* Progress everybody until b's CQ has an entry: 1 or -FI_EAVAIL. */
    ssize_t next_b(fi_cq_tagged_entry *e, fi_addr_t *src = nullptr) {
        return wait_cq(b_.cq, e, src, {a_.cq, c_.cq});
    }

    /* Lets a's (eager) message reach b: progress until a's send completed. */
    void deliver_from_a() {
        fi_cq_tagged_entry e;
        ASSERT_EQ(1, wait_cq(a_.cq, &e, nullptr, {b_.cq}));
        EXPECT_FALSE(any_completion({b_.cq}, 0.05)) << "nothing was posted at b";
    }

    Fabric     f_;
    Ep         a_, b_, c_; /* c binds its CQ with FI_SELECTIVE_COMPLETION */
    fi_addr_t  ab_{}, ba_{}, cb_{}, bc_{};
    fi_context ctx_{};
};

fi_msg_tagged tmsg(iovec *iov, size_t count, fi_addr_t addr, uint64_t tag, uint64_t ignore,
                   void *context) {
    fi_msg_tagged m{};
    m.msg_iov   = iov;
    m.iov_count = count;
    m.addr      = addr;
    m.tag       = tag;
    m.ignore    = ignore;
    m.context   = context;
    return m;
}

}  // namespace

TEST_F(FabricTrio, PeekFindsWithoutTakingAndCopiesData) {
    const std::vector<char> msg = pattern(500, 1);
    ASSERT_EQ(0, fi_tsenddata(a_.ep, msg.data(), msg.size(), nullptr, 42, ab_, 0x77, nullptr));
    deliver_from_a();
    std::vector<char>  peeked(100);
    iovec              iov = {peeked.data(), peeked.size()};
    fi_msg_tagged      m   = tmsg(&iov, 1, FI_ADDR_UNSPEC, 0x78, 0, &ctx_);
    fi_cq_tagged_entry e{};
    ASSERT_EQ(0, fi_trecvmsg(b_.ep, &m, FI_PEEK)); /* another tag: FI_ENOMSG */
    ASSERT_EQ(-FI_EAVAIL, next_b(&e));
    fi_cq_err_entry err = read_err(b_.cq);
    EXPECT_EQ(FI_ENOMSG, err.err);
    EXPECT_EQ(&ctx_, err.op_context);
    m.tag = 0x77;
    ASSERT_EQ(0, fi_trecvmsg(b_.ep, &m, FI_PEEK));
    fi_addr_t src = 0;
    ASSERT_EQ(1, next_b(&e, &src));
    EXPECT_EQ(&ctx_, e.op_context);
    EXPECT_EQ(500u, e.len);
    EXPECT_EQ(0x77u, e.tag);
    EXPECT_EQ(42u, e.data);
    EXPECT_EQ(ba_, src);
    EXPECT_EQ(FI_RECV | FI_TAGGED | FI_REMOTE_CQ_DATA, e.flags);
    EXPECT_EQ(peeked.data(), e.buf); /* the data came along */
    EXPECT_EQ(0, memcmp(peeked.data(), msg.data(), 100));
    std::vector<char> buf(500);
    ASSERT_EQ(0, fi_trecv(b_.ep, buf.data(), buf.size(), nullptr, FI_ADDR_UNSPEC, 0x77, 0, &ctx_));
    ASSERT_EQ(1, next_b(&e));
    EXPECT_EQ(msg, buf);
}

TEST_F(FabricTrio, PeekClaimThenReceiveOrDiscard) {
    const std::vector<char> one = pattern(64, 2), two = pattern(200000, 3);
    ASSERT_EQ(0, fi_tsend(a_.ep, one.data(), one.size(), nullptr, ab_, 5, nullptr));
    deliver_from_a();
    ASSERT_EQ(0, fi_tsend(a_.ep, two.data(), two.size(), nullptr, ab_, 6, nullptr));
    EXPECT_FALSE(any_completion({a_.cq, b_.cq}, 0.05)); /* a rendezvous waits for a receive */
    fi_context         c1{}, c2{};
    fi_msg_tagged      m = tmsg(nullptr, 0, FI_ADDR_UNSPEC, 5, 0, &c1);
    fi_cq_tagged_entry e{};
    EXPECT_EQ(-FI_EINVAL, fi_trecvmsg(b_.ep, &m, FI_CLAIM)); /* nothing claimed yet */
    ASSERT_EQ(0, fi_trecvmsg(b_.ep, &m, FI_PEEK | FI_CLAIM));
    ASSERT_EQ(1, next_b(&e));
    EXPECT_EQ(64u, e.len);
    ASSERT_EQ(0, fi_trecvmsg(b_.ep, &m, FI_PEEK)); /* claimed: no longer matchable */
    ASSERT_EQ(-FI_EAVAIL, next_b(&e));
    EXPECT_EQ(FI_ENOMSG, read_err(b_.cq).err);
    std::vector<char> buf(64);
    iovec             iov = {buf.data(), buf.size()};
    m                     = tmsg(&iov, 1, FI_ADDR_UNSPEC, 5, 0, &c1);
    ASSERT_EQ(0, fi_trecvmsg(b_.ep, &m, FI_CLAIM));
    ASSERT_EQ(1, next_b(&e));
    EXPECT_EQ(&c1, e.op_context);
    EXPECT_EQ(one, buf);
    /* the rendezvous: claim, then discard; the sender completes normally */
    m = tmsg(nullptr, 0, FI_ADDR_UNSPEC, 6, 0, &c2);
    ASSERT_EQ(0, fi_trecvmsg(b_.ep, &m, FI_PEEK | FI_CLAIM));
    ASSERT_EQ(1, next_b(&e));
    EXPECT_EQ(200000u, e.len);
    EXPECT_EQ(nullptr, e.buf);
    ASSERT_EQ(0, fi_trecvmsg(b_.ep, &m, FI_CLAIM | FI_DISCARD));
    ASSERT_EQ(1, next_b(&e));
    EXPECT_EQ(&c2, e.op_context);
    EXPECT_EQ(0u, e.len);
    ASSERT_EQ(1, wait_cq(a_.cq, &e, nullptr, {b_.cq}));
}

TEST_F(FabricTrio, PeekDiscardDropsTheMessage) {
    const std::vector<char> msg = pattern(32, 4);
    ASSERT_EQ(0, fi_tsend(a_.ep, msg.data(), msg.size(), nullptr, ab_, 8, nullptr));
    deliver_from_a();
    fi_msg_tagged      m = tmsg(nullptr, 0, FI_ADDR_UNSPEC, 8, 0, &ctx_);
    fi_cq_tagged_entry e{};
    ASSERT_EQ(0, fi_trecvmsg(b_.ep, &m, FI_PEEK | FI_DISCARD));
    ASSERT_EQ(1, next_b(&e));
    EXPECT_EQ(8u, e.tag);
    ASSERT_EQ(0, fi_trecvmsg(b_.ep, &m, FI_PEEK));
    ASSERT_EQ(-FI_EAVAIL, next_b(&e));
    EXPECT_EQ(FI_ENOMSG, read_err(b_.cq).err);
}

TEST_F(FabricTrio, DirectedReceiveTakesOnlyItsSource) {
    const std::vector<char> from_a = pattern(16, 5), from_c = pattern(16, 6);
    std::vector<char>       buf(16), other(16);
    for (bool tagged : {true, false}) {
        if (tagged) {
            ASSERT_EQ(0, fi_trecv(b_.ep, buf.data(), 16, nullptr, bc_, 1, 0, &ctx_));
            ASSERT_EQ(0, fi_tsend(a_.ep, from_a.data(), 16, nullptr, ab_, 1, nullptr));
        } else {
            ASSERT_EQ(0, fi_recv(b_.ep, buf.data(), 16, nullptr, bc_, &ctx_));
            ASSERT_EQ(0, fi_send(a_.ep, from_a.data(), 16, nullptr, ab_, nullptr));
        }
        deliver_from_a(); /* a's message is unexpected at b: the receive waits for c */
        if (tagged) {
            EXPECT_EQ(-FI_EINVAL, fi_tsendmsg(c_.ep, nullptr, 0));
            ASSERT_EQ(0, fi_tsend(c_.ep, from_c.data(), 16, nullptr, cb_, 1, nullptr));
        } else {
            ASSERT_EQ(0, fi_send(c_.ep, from_c.data(), 16, nullptr, cb_, nullptr));
        }
        fi_cq_tagged_entry e{};
        fi_addr_t          src = 0;
        ASSERT_EQ(1, next_b(&e, &src));
        EXPECT_EQ(bc_, src);
        EXPECT_EQ(from_c, buf);
        if (tagged) {
            ASSERT_EQ(0, fi_trecv(b_.ep, other.data(), 16, nullptr, ba_, 1, 0, &ctx_));
        } else {
            ASSERT_EQ(0, fi_recv(b_.ep, other.data(), 16, nullptr, ba_, &ctx_));
        }
        ASSERT_EQ(1, next_b(&e, &src));
        EXPECT_EQ(ba_, src);
        EXPECT_EQ(from_a, other);
    }
}

TEST_F(FabricTrio, SelectiveCompletion) {
    /* c's CQ is selective: a send without FI_COMPLETION reports nothing */
    const std::vector<char> msg = pattern(64, 7);
    std::vector<char>       buf(64);
    int                     quiet = 0, loud = 0;
    ASSERT_EQ(0, fi_trecv(b_.ep, buf.data(), 64, nullptr, FI_ADDR_UNSPEC, 1, 0, &ctx_));
    ASSERT_EQ(0, fi_tsend(c_.ep, msg.data(), 64, nullptr, cb_, 1, &quiet));
    fi_cq_tagged_entry e{};
    ASSERT_EQ(1, next_b(&e));
    EXPECT_FALSE(any_completion({c_.cq}, 0.1));
    iovec         iov = {const_cast<char *>(msg.data()), msg.size()};
    fi_msg_tagged m   = tmsg(&iov, 1, cb_, 2, 0, &loud);
    ASSERT_EQ(0, fi_trecv(b_.ep, buf.data(), 64, nullptr, FI_ADDR_UNSPEC, 2, 0, &ctx_));
    ASSERT_EQ(0, fi_tsendmsg(c_.ep, &m, FI_COMPLETION));
    ASSERT_EQ(1, next_b(&e));
    ASSERT_EQ(1, wait_cq(c_.cq, &e, nullptr, {b_.cq}));
    EXPECT_EQ(&loud, e.op_context);
    /* a selective receive without FI_COMPLETION: data lands, no entry */
    ASSERT_EQ(0, fi_tsend(b_.ep, msg.data(), 64, nullptr, bc_, 3, nullptr));
    iovec         riov = {buf.data(), buf.size()};
    fi_msg_tagged rm   = tmsg(&riov, 1, FI_ADDR_UNSPEC, 3, 0, &quiet);
    buf.assign(64, 0);
    ASSERT_EQ(0, fi_trecvmsg(c_.ep, &rm, 0));
    ASSERT_EQ(1, wait_cq(b_.cq, &e, nullptr, {c_.cq}));
    EXPECT_FALSE(any_completion({c_.cq}, 0.2));
    EXPECT_EQ(msg, buf);
}

TEST_F(FabricTrio, CompletionLevels) {
    const std::vector<char> msg = pattern(3000, 8);
    for (uint64_t level :
         {FI_INJECT_COMPLETE, FI_TRANSMIT_COMPLETE, FI_DELIVERY_COMPLETE, FI_MATCH_COMPLETE}) {
        iovec         iov = {const_cast<char *>(msg.data()), msg.size()};
        fi_msg_tagged m   = tmsg(&iov, 1, ab_, 4, 0, &ctx_);
        ASSERT_EQ(0, fi_tsendmsg(a_.ep, &m, FI_COMPLETION | level));
        fi_cq_tagged_entry e{};
        if (level == FI_MATCH_COMPLETE) {
            EXPECT_FALSE(any_completion({a_.cq, b_.cq}, 0.1)) << "complete before a match";
        } else {
            ASSERT_EQ(1, wait_cq(a_.cq, &e, nullptr, {b_.cq}));
        }
        std::vector<char> buf(3000);
        ASSERT_EQ(0, fi_trecv(b_.ep, buf.data(), buf.size(), nullptr, ba_, 4, 0, nullptr));
        ASSERT_EQ(1, next_b(&e));
        EXPECT_EQ(msg, buf);
        if (level == FI_MATCH_COMPLETE) {
            ASSERT_EQ(1, wait_cq(a_.cq, &e, nullptr, {b_.cq}));
        }
    }
}

TEST_F(FabricTrio, CancelledRendezvousSendIsNeverDelivered) {
    const std::vector<char> big = pattern(300000, 9), small = pattern(32, 10);
    int                     big_ctx = 0;
    ASSERT_EQ(0, fi_tsend(a_.ep, big.data(), big.size(), nullptr, ab_, 1, &big_ctx));
    EXPECT_FALSE(any_completion({a_.cq, b_.cq}, 0.05)); /* the request waits at b */
    ASSERT_EQ(0, fi_cancel(&a_.ep->fid, &big_ctx));
    fi_cq_tagged_entry e{};
    ASSERT_EQ(-FI_EAVAIL, wait_cq(a_.cq, &e, nullptr, {b_.cq}));
    const fi_cq_err_entry err = read_err(a_.cq);
    EXPECT_EQ(FI_ECANCELED, err.err);
    EXPECT_EQ(&big_ctx, err.op_context);
    EXPECT_EQ(FI_SEND | FI_TAGGED, err.flags & (FI_SEND | FI_TAGGED));
    std::vector<char> buf(300000);
    ASSERT_EQ(0, fi_trecv(b_.ep, buf.data(), buf.size(), nullptr, FI_ADDR_UNSPEC, 1, 0, &ctx_));
    ASSERT_EQ(0, fi_tsend(a_.ep, small.data(), small.size(), nullptr, ab_, 1, nullptr));
    ASSERT_EQ(1, next_b(&e));
    EXPECT_EQ(small.size(), e.len); /* the cancelled message never arrived */
    EXPECT_EQ(0, memcmp(buf.data(), small.data(), small.size()));
}

TEST_F(FabricTrio, FenceWaitsForEarlierSends) {
    const std::vector<char> big = pattern(300000, 11), small = pattern(64, 12);
    int                     big_ctx = 0, fence_ctx = 0;
    ASSERT_EQ(0, fi_tsend(a_.ep, big.data(), big.size(), nullptr, ab_, 1, &big_ctx));
    iovec         iov = {const_cast<char *>(small.data()), small.size()};
    fi_msg_tagged m   = tmsg(&iov, 1, ab_, 2, 0, &fence_ctx);
    ASSERT_EQ(0, fi_tsendmsg(a_.ep, &m, FI_COMPLETION | FI_FENCE));
    std::vector<char> sbuf(64), bbuf(300000);
    ASSERT_EQ(0, fi_trecv(b_.ep, sbuf.data(), sbuf.size(), nullptr, FI_ADDR_UNSPEC, 2, 0, &ctx_));
    EXPECT_FALSE(any_completion({a_.cq, b_.cq}, 0.1)) << "the fenced send went ahead";
    ASSERT_EQ(0, fi_trecv(b_.ep, bbuf.data(), bbuf.size(), nullptr, FI_ADDR_UNSPEC, 1, 0, &ctx_));
    fi_cq_tagged_entry e{};
    ASSERT_EQ(1, next_b(&e));
    ASSERT_EQ(1, next_b(&e));
    EXPECT_EQ(big, bbuf);
    EXPECT_EQ(small, sbuf);
    ASSERT_EQ(1, wait_cq(a_.cq, &e, nullptr, {b_.cq}));
    EXPECT_EQ(&big_ctx, e.op_context);
    ASSERT_EQ(1, wait_cq(a_.cq, &e, nullptr, {b_.cq}));
    EXPECT_EQ(&fence_ctx, e.op_context);
}

TEST_F(FabricTrio, MoreKeepsSendingOrder) {
    for (bool tagged : {true, false}) {
        std::vector<std::vector<char>> bufs(4, std::vector<char>(16));
        for (auto &b : bufs) {
            ASSERT_EQ(0, tagged
                             ? fi_trecv(b_.ep, b.data(), 16, nullptr, FI_ADDR_UNSPEC, 3, 0, nullptr)
                             : fi_recv(b_.ep, b.data(), 16, nullptr, FI_ADDR_UNSPEC, nullptr));
        }
        /* in use until each send completes (a transport may queue them) */
        std::vector<std::vector<char>> msgs;
        for (unsigned i = 0; i < 4; ++i) {
            msgs.push_back(pattern(16, i));
        }
        for (unsigned i = 0; i < 4; ++i) {
            iovec         iov = {msgs[i].data(), 16};
            fi_msg_tagged tm  = tmsg(&iov, 1, ab_, 3, 0, nullptr);
            fi_msg        m{};
            m.msg_iov            = &iov;
            m.iov_count          = 1;
            m.addr               = ab_;
            const uint64_t flags = (i < 3) ? FI_MORE : 0;
            ASSERT_EQ(0, tagged ? fi_tsendmsg(a_.ep, &tm, flags) : fi_sendmsg(a_.ep, &m, flags));
        }
        fi_cq_tagged_entry e{};
        for (unsigned i = 0; i < 4; ++i) {
            ASSERT_EQ(1, next_b(&e));
        }
        for (unsigned i = 0; i < 4; ++i) {
            EXPECT_EQ(pattern(16, i), bufs[i]) << i;
        }
        for (unsigned i = 0; i < 4; ++i) {
            ASSERT_EQ(1, wait_cq(a_.cq, &e, nullptr, {b_.cq})); /* every send completes */
        }
        EXPECT_FALSE(any_completion({a_.cq}, 0.01));
    }
}

TEST_F(FabricTrio, RegisteredBuffersCarryTheirDesc) {
    const size_t      size = 1 << 20;
    std::vector<char> sbuf = pattern(size, 13), rbuf(size);
    fid_mr           *smr = nullptr, *rmr = nullptr;
    ASSERT_EQ(0, fi_mr_reg(f_.domain, sbuf.data(), size, FI_SEND, 0, 0, 0, &smr, nullptr));
    ASSERT_EQ(0, fi_mr_reg(f_.domain, rbuf.data(), size, FI_RECV, 0, 0, 0, &rmr, nullptr));
    int sctx = 0;
    ASSERT_EQ(0, fi_tsend(a_.ep, sbuf.data(), size, fi_mr_desc(smr), ab_, 1, &sctx));
    EXPECT_FALSE(any_completion({a_.cq, b_.cq}, 0.05));
    /* a rendezvous the receiver reads holds the mapping: the region stays
     * until it completes (tcp and posix push the data: nothing held) */
    const std::string domain = test_domain();
    if ((domain.find("tcp") == std::string::npos) && (domain.find("posix") == std::string::npos)) {
        EXPECT_EQ(-FI_EBUSY, fi_close(&smr->fid));
    }
    ASSERT_EQ(0, fi_trecv(b_.ep, rbuf.data(), size, fi_mr_desc(rmr), FI_ADDR_UNSPEC, 1, 0, &ctx_));
    fi_cq_tagged_entry e{};
    ASSERT_EQ(1, next_b(&e));
    ASSERT_EQ(1, wait_cq(a_.cq, &e, nullptr, {b_.cq}));
    EXPECT_EQ(sbuf, rbuf);
    /* a desc that is no MR, or an MR that does not hold the buffer: ignored */
    int               bogus = 0;
    std::vector<char> other = pattern(size, 14);
    ASSERT_EQ(0, fi_trecv(b_.ep, rbuf.data(), size, &bogus, FI_ADDR_UNSPEC, 2, 0, &ctx_));
    ASSERT_EQ(0, fi_tsend(a_.ep, other.data(), size, fi_mr_desc(smr), ab_, 2, &sctx));
    ASSERT_EQ(1, next_b(&e));
    ASSERT_EQ(1, wait_cq(a_.cq, &e, nullptr, {b_.cq}));
    EXPECT_EQ(other, rbuf);
    EXPECT_EQ(0, fi_close(&smr->fid));
    EXPECT_EQ(0, fi_close(&rmr->fid));
}

TEST_F(FabricTrio, OpsFlagsGiveCallsWithoutFlagsTheirCompletion) {
    /* c's CQ is selective: FI_COMPLETION in its tx op flags makes fi_tsend report */
    uint64_t flags = FI_TRANSMIT;
    ASSERT_EQ(0, fi_control(&c_.ep->fid, FI_GETOPSFLAG, &flags));
    EXPECT_EQ(FI_TRANSMIT, flags);
    flags = FI_TRANSMIT | FI_COMPLETION;
    ASSERT_EQ(0, fi_control(&c_.ep->fid, FI_SETOPSFLAG, &flags));
    flags = FI_TRANSMIT;
    ASSERT_EQ(0, fi_control(&c_.ep->fid, FI_GETOPSFLAG, &flags));
    EXPECT_EQ(FI_TRANSMIT | FI_COMPLETION, flags);
    flags = FI_TRANSMIT | FI_RECV;
    EXPECT_EQ(-FI_EINVAL, fi_control(&c_.ep->fid, FI_GETOPSFLAG, &flags));
    flags = FI_RECV | FI_INJECT;
    EXPECT_EQ(-FI_EBADFLAGS, fi_control(&c_.ep->fid, FI_SETOPSFLAG, &flags));
    EXPECT_EQ(-FI_EINVAL, fi_control(&c_.ep->fid, FI_SETOPSFLAG, nullptr));
    const std::vector<char> msg = pattern(64, 15);
    std::vector<char>       buf(64);
    int                     sctx = 0;
    ASSERT_EQ(0, fi_trecv(b_.ep, buf.data(), 64, nullptr, FI_ADDR_UNSPEC, 1, 0, &ctx_));
    ASSERT_EQ(0, fi_tsend(c_.ep, msg.data(), 64, nullptr, cb_, 1, &sctx));
    fi_cq_tagged_entry e{};
    ASSERT_EQ(1, next_b(&e));
    ASSERT_EQ(1, wait_cq(c_.cq, &e, nullptr, {b_.cq}));
    EXPECT_EQ(&sctx, e.op_context);
}
