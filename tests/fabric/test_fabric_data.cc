/* Data through the provider: two endpoints in one process over tm_sm. */
#include "fabric_fixture.h"

#include <cstring>
#include <set>
#include <tuple>

using namespace fabric_test;

namespace {

/* What a completion of `format` carries, widened (fields beyond it zero). */
fi_cq_tagged_entry widen(const fi_cq_tagged_entry &raw, fi_cq_format format) {
    fi_cq_tagged_entry e{};
    const size_t       size = (format == FI_CQ_FORMAT_CONTEXT) ? sizeof(fi_cq_entry)
                              : (format == FI_CQ_FORMAT_MSG)   ? sizeof(fi_cq_msg_entry)
                              : (format == FI_CQ_FORMAT_DATA)  ? sizeof(fi_cq_data_entry)
                                                               : sizeof(fi_cq_tagged_entry);
    memcpy(&e, &raw, size);
    return e;
}

class FabricPair : public ::testing::TestWithParam<std::tuple<fi_cq_format, fi_av_type>> {
  protected:
    void SetUp() override {
        format_ = std::get<0>(GetParam());
        ASSERT_EQ(0, f_.open());
        ASSERT_EQ(0, a_.open(f_, format_, std::get<1>(GetParam())));
        ASSERT_EQ(0, b_.open(f_, format_, std::get<1>(GetParam())));
        ab_ = a_.insert(b_.name());
        ba_ = b_.insert(a_.name());
        ASSERT_NE(FI_ADDR_NOTAVAIL, ab_);
        ASSERT_NE(FI_ADDR_NOTAVAIL, ba_);
    }
    void TearDown() override {
        a_.close();
        b_.close();
        f_.close();
    }

    bool has(fi_cq_format least) const { return format_ >= least; }

    /* The next completion on `who`, the other side progressing. */
    fi_cq_tagged_entry next(Ep &who, Ep &other, fi_addr_t *src = nullptr) {
        fi_cq_tagged_entry raw{};
        EXPECT_EQ(1, wait_cq(who.cq, &raw, src, {other.cq}));
        return widen(raw, format_);
    }

    /* A receive on b that completes with `expect` bytes from a. */
    void check_recv(void *ctx, const std::vector<char> &buf, const std::vector<char> &expect,
                    uint64_t flags, uint64_t tag) {
        fi_addr_t                src = 0;
        const fi_cq_tagged_entry e   = next(b_, a_, &src);
        EXPECT_EQ(ctx, e.op_context);
        EXPECT_EQ(ba_, src);
        if (has(FI_CQ_FORMAT_MSG)) {
            EXPECT_EQ(flags, e.flags & (FI_RECV | FI_TAGGED | FI_MSG | FI_REMOTE_CQ_DATA));
            EXPECT_EQ(expect.size(), e.len);
        }
        if (has(FI_CQ_FORMAT_TAGGED)) {
            EXPECT_EQ(tag, e.tag);
        }
        EXPECT_EQ(0, memcmp(buf.data(), expect.data(), expect.size()));
    }

    void check_send(void *ctx, uint64_t flags) {
        const fi_cq_tagged_entry e = next(a_, b_);
        EXPECT_EQ(ctx, e.op_context);
        if (has(FI_CQ_FORMAT_MSG)) {
            EXPECT_EQ(flags, e.flags & (FI_SEND | FI_TAGGED | FI_MSG));
        }
    }

    fi_cq_format format_{};
    Fabric       f_;
    Ep           a_, b_;
    fi_addr_t    ab_ = FI_ADDR_NOTAVAIL, ba_ = FI_ADDR_NOTAVAIL;
    int          sctx_ = 0, rctx_ = 0;
};

const size_t kSizes[] = {0, 1, 64, 4096, 65536, 200000, 1 << 20};

}  // namespace

TEST_P(FabricPair, TaggedEverySizeExpectedAndUnexpected) {
    for (size_t size : kSizes) {
        for (bool expected : {true, false}) {
            const std::vector<char> msg = pattern(size, static_cast<unsigned>(size));
            std::vector<char>       buf(size + 1, 0);
            const uint64_t          tag = 0x1234000000 + size;
            if (expected) {
                ASSERT_EQ(0, fi_trecv(b_.ep, buf.data(), buf.size(), nullptr, FI_ADDR_UNSPEC, tag,
                                      0, &rctx_));
            }
            ASSERT_EQ(0, fi_tsend(a_.ep, msg.data(), size, nullptr, ab_, tag, &sctx_));
            if (!expected) {
                ASSERT_EQ(0, fi_trecv(b_.ep, buf.data(), buf.size(), nullptr, FI_ADDR_UNSPEC, tag,
                                      0, &rctx_));
            }
            check_recv(&rctx_, buf, msg, FI_RECV | FI_TAGGED, tag);
            check_send(&sctx_, FI_SEND | FI_TAGGED);
        }
    }
}

TEST_P(FabricPair, UntaggedEverySize) {
    for (size_t size : kSizes) {
        const std::vector<char> msg = pattern(size, 3);
        std::vector<char>       buf(size, 0);
        ASSERT_EQ(0, fi_recv(b_.ep, buf.data(), buf.size(), nullptr, FI_ADDR_UNSPEC, &rctx_));
        ASSERT_EQ(0, fi_send(a_.ep, msg.data(), size, nullptr, ab_, &sctx_));
        check_recv(&rctx_, buf, msg, FI_RECV | FI_MSG, 0);
        check_send(&sctx_, FI_SEND | FI_MSG);
    }
}

TEST_P(FabricPair, VectorsBothKinds) {
    const std::vector<char> msg = pattern(150000, 5);
    for (bool tagged : {true, false}) {
        std::vector<char> r1(1000), r2(0), r3(msg.size() - 1000);
        iovec             siov[3] = {{const_cast<char *>(msg.data()), 10},
                                     {nullptr, 0},
                                     {const_cast<char *>(msg.data()) + 10, msg.size() - 10}};
        iovec             riov[3] = {{r1.data(), r1.size()}, {nullptr, 0}, {r3.data(), r3.size()}};
        if (tagged) {
            ASSERT_EQ(0, fi_trecvv(b_.ep, riov, nullptr, 3, FI_ADDR_UNSPEC, 9, 0, &rctx_));
            ASSERT_EQ(0, fi_tsendv(a_.ep, siov, nullptr, 3, ab_, 9, &sctx_));
        } else {
            ASSERT_EQ(0, fi_recvv(b_.ep, riov, nullptr, 3, FI_ADDR_UNSPEC, &rctx_));
            ASSERT_EQ(0, fi_sendv(a_.ep, siov, nullptr, 3, ab_, &sctx_));
        }
        fi_addr_t                src = 0;
        const fi_cq_tagged_entry e   = next(b_, a_, &src);
        EXPECT_EQ(&rctx_, e.op_context);
        EXPECT_EQ(ba_, src);
        if (has(FI_CQ_FORMAT_MSG)) {
            EXPECT_EQ(msg.size(), e.len);
        }
        std::vector<char> got = r1;
        got.insert(got.end(), r3.begin(), r3.end());
        EXPECT_EQ(msg, got);
        check_send(&sctx_, FI_SEND | (tagged ? FI_TAGGED : FI_MSG));
    }
}

TEST_P(FabricPair, MsgCallsAndRemoteData) {
    const std::vector<char> msg = pattern(300, 7);
    std::vector<char>       buf(300);
    iovec                   iov  = {const_cast<char *>(msg.data()), msg.size()};
    iovec                   riov = {buf.data(), buf.size()};
    fi_msg                  m{};
    m.msg_iov   = &iov;
    m.iov_count = 1;
    m.addr      = ab_;
    m.context   = &sctx_;
    m.data      = 0xfeedbeefcafe;
    fi_msg rm{};
    rm.msg_iov   = &riov;
    rm.iov_count = 1;
    rm.addr      = FI_ADDR_UNSPEC;
    rm.context   = &rctx_;
    ASSERT_EQ(0, fi_recvmsg(b_.ep, &rm, FI_COMPLETION));
    ASSERT_EQ(0, fi_sendmsg(a_.ep, &m, FI_COMPLETION | FI_REMOTE_CQ_DATA));
    fi_addr_t                src = 0;
    const fi_cq_tagged_entry e   = next(b_, a_, &src);
    EXPECT_EQ(&rctx_, e.op_context);
    if (has(FI_CQ_FORMAT_DATA)) {
        EXPECT_EQ(0xfeedbeefcafeu, e.data);
        EXPECT_EQ(FI_REMOTE_CQ_DATA, e.flags & FI_REMOTE_CQ_DATA);
        EXPECT_EQ(buf.data(), e.buf);
    }
    EXPECT_EQ(msg, buf);
    check_send(&sctx_, FI_SEND | FI_MSG);
    /* senddata, inject, injectdata: the inject buffer is reusable at return */
    std::vector<char> inj  = pattern(100, 8);
    const auto        want = inj;
    ASSERT_EQ(0, fi_recv(b_.ep, buf.data(), buf.size(), nullptr, FI_ADDR_UNSPEC, &rctx_));
    ASSERT_EQ(0, fi_inject(a_.ep, inj.data(), inj.size(), ab_));
    inj.assign(inj.size(), 0);
    check_recv(&rctx_, buf, want, FI_RECV | FI_MSG, 0);
    ASSERT_EQ(0, fi_recv(b_.ep, buf.data(), buf.size(), nullptr, FI_ADDR_UNSPEC, &rctx_));
    ASSERT_EQ(0, fi_injectdata(a_.ep, want.data(), 10, 77, ab_));
    fi_cq_tagged_entry d = next(b_, a_);
    if (has(FI_CQ_FORMAT_DATA)) {
        EXPECT_EQ(77u, d.data);
    }
    ASSERT_EQ(0, fi_recv(b_.ep, buf.data(), buf.size(), nullptr, FI_ADDR_UNSPEC, &rctx_));
    ASSERT_EQ(0, fi_senddata(a_.ep, want.data(), 10, nullptr, 78, ab_, &sctx_));
    d = next(b_, a_);
    if (has(FI_CQ_FORMAT_DATA)) {
        EXPECT_EQ(78u, d.data);
    }
    check_send(&sctx_, FI_SEND | FI_MSG);
    EXPECT_FALSE(any_completion({a_.cq}, 0.1)); /* injects complete quietly */
}

TEST_P(FabricPair, TaggedMsgCallsAndRemoteData) {
    const std::vector<char> msg = pattern(5000, 9);
    std::vector<char>       buf(5000);
    iovec                   iov  = {const_cast<char *>(msg.data()), msg.size()};
    iovec                   riov = {buf.data(), buf.size()};
    fi_msg_tagged           m{};
    m.msg_iov   = &iov;
    m.iov_count = 1;
    m.addr      = ab_;
    m.tag       = 0xabc;
    m.context   = &sctx_;
    m.data      = 1ull << 63;
    fi_msg_tagged rm{};
    rm.msg_iov   = &riov;
    rm.iov_count = 1;
    rm.addr      = ba_;
    rm.tag       = 0xa00;
    rm.ignore    = 0xff;
    rm.context   = &rctx_;
    ASSERT_EQ(0, fi_trecvmsg(b_.ep, &rm, FI_COMPLETION));
    ASSERT_EQ(0, fi_tsendmsg(a_.ep, &m, FI_COMPLETION | FI_REMOTE_CQ_DATA));
    const fi_cq_tagged_entry e = next(b_, a_);
    EXPECT_EQ(&rctx_, e.op_context);
    if (has(FI_CQ_FORMAT_DATA)) {
        EXPECT_EQ(1ull << 63, e.data);
    }
    if (has(FI_CQ_FORMAT_TAGGED)) {
        EXPECT_EQ(0xabcu, e.tag);
    }
    EXPECT_EQ(msg, buf);
    check_send(&sctx_, FI_SEND | FI_TAGGED);
    ASSERT_EQ(0, fi_trecv(b_.ep, buf.data(), buf.size(), nullptr, FI_ADDR_UNSPEC, 5, 0, &rctx_));
    ASSERT_EQ(0, fi_tsenddata(a_.ep, msg.data(), 64, nullptr, 55, ab_, 5, &sctx_));
    fi_cq_tagged_entry d = next(b_, a_);
    if (has(FI_CQ_FORMAT_DATA)) {
        EXPECT_EQ(55u, d.data);
    }
    check_send(&sctx_, FI_SEND | FI_TAGGED);
    std::vector<char> inj  = pattern(64, 10);
    const auto        want = inj;
    ASSERT_EQ(0, fi_trecv(b_.ep, buf.data(), buf.size(), nullptr, FI_ADDR_UNSPEC, 6, 0, &rctx_));
    ASSERT_EQ(0, fi_tinject(a_.ep, inj.data(), inj.size(), ab_, 6));
    inj.assign(inj.size(), 0);
    check_recv(&rctx_, buf, want, FI_RECV | FI_TAGGED, 6);
    ASSERT_EQ(0, fi_trecv(b_.ep, buf.data(), buf.size(), nullptr, FI_ADDR_UNSPEC, 7, 0, &rctx_));
    ASSERT_EQ(0, fi_tinjectdata(a_.ep, want.data(), 8, 66, ab_, 7));
    d = next(b_, a_);
    if (has(FI_CQ_FORMAT_DATA)) {
        EXPECT_EQ(66u, d.data);
    }
    EXPECT_FALSE(any_completion({a_.cq}, 0.1));
}

TEST_P(FabricPair, TruncationIsAnErrorWithOlen) {
    for (size_t size : {100, 100000, 300000}) {
        const std::vector<char> msg = pattern(size, 11);
        std::vector<char>       buf(40 + 8, 'g');
        ASSERT_EQ(0, fi_trecv(b_.ep, buf.data(), 40, nullptr, FI_ADDR_UNSPEC, 1, 0, &rctx_));
        ASSERT_EQ(0, fi_tsend(a_.ep, msg.data(), size, nullptr, ab_, 1, &sctx_));
        fi_cq_tagged_entry e;
        ASSERT_EQ(-FI_EAVAIL, wait_cq(b_.cq, &e, nullptr, {a_.cq}));
        const fi_cq_err_entry err = read_err(b_.cq);
        EXPECT_EQ(FI_ETRUNC, err.err);
        EXPECT_EQ(&rctx_, err.op_context);
        EXPECT_EQ(40u, err.len);
        EXPECT_EQ(size - 40, err.olen);
        EXPECT_EQ(1u, err.tag);
        EXPECT_NE(nullptr, fi_cq_strerror(b_.cq, err.prov_errno, err.err_data, nullptr, 0));
        EXPECT_EQ(0, memcmp(buf.data(), msg.data(), 40));
        EXPECT_EQ(std::string(8, 'g'), std::string(buf.data() + 40, 8));
        check_send(&sctx_, FI_SEND | FI_TAGGED);
    }
}

TEST_P(FabricPair, CancelledReceiveCompletesWithEcanceled) {
    std::vector<char> buf(64);
    ASSERT_EQ(0, fi_trecv(b_.ep, buf.data(), buf.size(), nullptr, FI_ADDR_UNSPEC, 1, 0, &rctx_));
    ASSERT_EQ(0, fi_recv(b_.ep, buf.data(), buf.size(), nullptr, FI_ADDR_UNSPEC, &sctx_));
    EXPECT_EQ(-FI_ENOENT, fi_cancel(&b_.ep->fid, &f_));
    EXPECT_EQ(0, fi_cancel(&b_.ep->fid, &rctx_));
    EXPECT_EQ(0, fi_cancel(&b_.ep->fid, &sctx_));
    std::set<void *> cancelled; /* tagged and untagged: in either order */
    for (int i = 0; i < 2; ++i) {
        fi_cq_tagged_entry e;
        ASSERT_EQ(-FI_EAVAIL, wait_cq(b_.cq, &e, nullptr, {a_.cq}));
        const fi_cq_err_entry err = read_err(b_.cq);
        EXPECT_EQ(FI_ECANCELED, err.err);
        cancelled.insert(err.op_context);
    }
    EXPECT_EQ((std::set<void *>{&rctx_, &sctx_}), cancelled);
    EXPECT_EQ(-FI_ENOENT, fi_cancel(&b_.ep->fid, &rctx_)); /* gone */
}

/* Hundreds of operations in flight and of entries waiting in a CQ, twice
 * (the second round reuses the first's slots and wraps the queue): each
 * completes once, in order, with its own context. */
TEST_P(FabricPair, DeepBacklogCompletesEachOnceInOrder) {
    constexpr size_t      kDepth = 300;
    std::vector<int>      rctx(kDepth), sctx(kDepth);
    std::vector<char>     bufs(kDepth * 8);
    std::vector<uint64_t> words(kDepth); /* a send's buffer is in use until it completes */
    for (uint64_t round = 0; round < 2; ++round) {
        const uint64_t base = 0x7700 + round * kDepth;
        for (size_t i = 0; i < kDepth; ++i) {
            ASSERT_EQ(0, fi_trecv(b_.ep, &bufs[i * 8], 8, nullptr, ba_, base + i, 0, &rctx[i]));
        }
        for (size_t i = 0; i < kDepth; ++i) {
            words[i] = base + i;
            ASSERT_EQ(0, fi_tsenddata(a_.ep, &words[i], sizeof(uint64_t), nullptr, i, ab_, base + i,
                                      &sctx[i]));
        }
        for (size_t i = 0; i < kDepth; ++i) { /* all waiting in a's CQ, in sending order */
            const fi_cq_tagged_entry e = next(a_, b_);
            ASSERT_EQ(&sctx[i], e.op_context) << "send " << i;
        }
        for (size_t i = 0; i < kDepth; ++i) {
            const fi_cq_tagged_entry e = next(b_, a_);
            ASSERT_EQ(&rctx[i], e.op_context) << "receive " << i;
            if (has(FI_CQ_FORMAT_DATA)) {
                EXPECT_EQ(i, e.data);
            }
            if (has(FI_CQ_FORMAT_TAGGED)) {
                EXPECT_EQ(base + i, e.tag);
            }
            uint64_t word = 0;
            memcpy(&word, &bufs[i * 8], sizeof(word));
            EXPECT_EQ(base + i, word);
        }
        EXPECT_FALSE(any_completion({a_.cq, b_.cq}, 0.05)) << "an operation completed twice";
    }
}

/* fi_cancel(3) names an operation by its context; of several posted with
 * the same one, the earliest goes. */
TEST_P(FabricPair, CancelTakesTheEarliestPostedWithTheContext) {
    /* Two receives completed in posting order first: their slots are reused
     * last-freed first, so the earlier post below does not get the lower one. */
    std::vector<char> warm(16, 0);
    for (uint64_t tag : {10, 11}) {
        ASSERT_EQ(0, fi_trecv(b_.ep, warm.data(), warm.size(), nullptr, FI_ADDR_UNSPEC, tag, 0,
                              &rctx_));
    }
    for (uint64_t tag : {10, 11}) {
        ASSERT_EQ(0, fi_tsend(a_.ep, warm.data(), warm.size(), nullptr, ab_, tag, &sctx_));
        check_send(&sctx_, FI_SEND | FI_TAGGED);
        check_recv(&rctx_, warm, warm, FI_RECV | FI_TAGGED, tag);
    }
    std::vector<char> first(16, 0), second(16, 0);
    ASSERT_EQ(0,
              fi_trecv(b_.ep, first.data(), first.size(), nullptr, FI_ADDR_UNSPEC, 1, 0, &rctx_));
    ASSERT_EQ(0,
              fi_trecv(b_.ep, second.data(), second.size(), nullptr, FI_ADDR_UNSPEC, 2, 0, &rctx_));
    ASSERT_EQ(0, fi_cancel(&b_.ep->fid, &rctx_));
    fi_cq_tagged_entry e;
    ASSERT_EQ(-FI_EAVAIL, wait_cq(b_.cq, &e, nullptr, {a_.cq}));
    const fi_cq_err_entry err = read_err(b_.cq);
    EXPECT_EQ(FI_ECANCELED, err.err);
    EXPECT_EQ(first.data(), err.buf) << "the later receive was cancelled";
    const std::vector<char> msg = pattern(16, 9);
    ASSERT_EQ(0, fi_tsend(a_.ep, msg.data(), msg.size(), nullptr, ab_, 2, &sctx_));
    check_recv(&rctx_, second, msg, FI_RECV | FI_TAGGED, 2);
    check_send(&sctx_, FI_SEND | FI_TAGGED);
}

INSTANTIATE_TEST_SUITE_P(formats, FabricPair,
                         ::testing::Combine(::testing::Values(FI_CQ_FORMAT_CONTEXT,
                                                              FI_CQ_FORMAT_MSG, FI_CQ_FORMAT_DATA,
                                                              FI_CQ_FORMAT_TAGGED),
                                            ::testing::Values(FI_AV_TABLE, FI_AV_MAP)));
