/*
 * post_wr_ex() (uct_tm/ib/wr_post.h): one ibv_send_wr turned into ibv_wr_*
 * calls, checked against a queue pair whose ibv_wr_* entries record what
 * they were given -- the order of the calls, the request's id and flags at
 * its opcode, the destination between the opcode and the data, every
 * scatter entry and inline byte -- and requests this path does not carry
 * refused before anything starts. On a device the same calls run on
 * tm_dc's queue pairs (tests/ib).
 */
#include "ib/wr_post.h"
#ifdef UCT_TM_HAVE_MLX5DV
#include "ib/dc_mlx5_verbs.h"
#endif

#include <gtest/gtest.h>

#include <cstring>
#include <string>
#include <vector>

namespace uct_tm {
namespace ib {
namespace {

/* A queue pair that records; qpx first, so the entries find their recorder. */
struct RecordingQp {
    struct ibv_qp_ex          qpx = {};
    std::vector<std::string>  calls;
    uint64_t                  wr_id    = 0; /* at the opcode */
    unsigned                  wr_flags = 0;
    uint32_t                  rkey     = 0;
    uint64_t                  raddr    = 0;
    __be32                    imm      = 0;
    std::vector<struct ibv_sge> sges;
    std::string               inline_bytes;
    int                       complete_rc = 0;

    RecordingQp() {
        qpx.wr_start = [](struct ibv_qp_ex *q) { of(q).calls.push_back("start"); };
        qpx.wr_send  = [](struct ibv_qp_ex *q) { of(q).opcode("send"); };
        qpx.wr_send_imm = [](struct ibv_qp_ex *q, __be32 imm) {
            of(q).opcode("send_imm");
            of(q).imm = imm;
        };
        qpx.wr_rdma_write = [](struct ibv_qp_ex *q, uint32_t rkey, uint64_t addr) {
            of(q).opcode("write");
            of(q).rkey  = rkey;
            of(q).raddr = addr;
        };
        qpx.wr_rdma_read = [](struct ibv_qp_ex *q, uint32_t rkey, uint64_t addr) {
            of(q).opcode("read");
            of(q).rkey  = rkey;
            of(q).raddr = addr;
        };
        qpx.wr_set_sge_list = [](struct ibv_qp_ex *q, size_t n, const struct ibv_sge *list) {
            of(q).calls.push_back("sge_list");
            of(q).sges.assign(list, list + n);
        };
        qpx.wr_set_inline_data_list = [](struct ibv_qp_ex *q, size_t n,
                                         const struct ibv_data_buf *list) {
            of(q).calls.push_back("inline_list");
            for (size_t i = 0; i < n; ++i) {
                of(q).inline_bytes.append(static_cast<const char *>(list[i].addr), list[i].length);
            }
        };
        qpx.wr_complete = [](struct ibv_qp_ex *q) {
            of(q).calls.push_back("complete");
            return of(q).complete_rc;
        };
    }

    static RecordingQp &of(struct ibv_qp_ex *q) { return *reinterpret_cast<RecordingQp *>(q); }

    void opcode(const char *name) {
        calls.push_back(name);
        wr_id    = qpx.wr_id;
        wr_flags = qpx.wr_flags;
    }
};
static_assert(offsetof(RecordingQp, qpx) == 0, "the entries find the recorder at the qpx");

std::vector<std::string> seq(std::initializer_list<const char *> names) {
    return std::vector<std::string>(names.begin(), names.end());
}

struct ibv_send_wr make_wr(enum ibv_wr_opcode opcode, struct ibv_sge *sge, int num_sge) {
    struct ibv_send_wr wr = {};
    wr.wr_id              = 0x1234567890abcdefULL;
    wr.opcode             = opcode;
    wr.sg_list            = sge;
    wr.num_sge            = num_sge;
    wr.send_flags         = IBV_SEND_SIGNALED;
    return wr;
}

TEST(WrPost, SendCarriesIdFlagsAndEveryScatterEntry) {
    RecordingQp    qp;
    struct ibv_sge sge[3] = {{0x1000, 64, 11}, {0x2000, 4096, 22}, {0x3000, 1, 33}};
    const auto     wr     = make_wr(IBV_WR_SEND, sge, 3);
    ASSERT_EQ(0, post_wr_ex(&qp.qpx, wr));
    EXPECT_EQ(seq({"start", "send", "sge_list", "complete"}), qp.calls);
    EXPECT_EQ(wr.wr_id, qp.wr_id);
    EXPECT_EQ(static_cast<unsigned>(IBV_SEND_SIGNALED), qp.wr_flags);
    ASSERT_EQ(3u, qp.sges.size());
    for (int i = 0; i < 3; ++i) {
        EXPECT_EQ(sge[i].addr, qp.sges[i].addr);
        EXPECT_EQ(sge[i].length, qp.sges[i].length);
        EXPECT_EQ(sge[i].lkey, qp.sges[i].lkey);
    }
}

TEST(WrPost, ImmediateDataPassesAsItIs) {
    RecordingQp    qp;
    struct ibv_sge sge = {0x1000, 8, 1};
    auto           wr  = make_wr(IBV_WR_SEND_WITH_IMM, &sge, 1);
    wr.imm_data        = htobe32(0xa1b2c3d4u); /* already in wire order */
    ASSERT_EQ(0, post_wr_ex(&qp.qpx, wr));
    EXPECT_EQ(seq({"start", "send_imm", "sge_list", "complete"}), qp.calls);
    EXPECT_EQ(wr.imm_data, qp.imm);
}

TEST(WrPost, RdmaWriteAndReadNameTheRemoteBuffer) {
    for (const auto opcode : {IBV_WR_RDMA_WRITE, IBV_WR_RDMA_READ}) {
        RecordingQp    qp;
        struct ibv_sge sge[2] = {{0x1000, 100, 5}, {0x9000, 200, 6}};
        auto           wr     = make_wr(opcode, sge, 2);
        wr.wr.rdma.remote_addr = 0x7fff00001000ULL;
        wr.wr.rdma.rkey        = 0xbeef;
        wr.send_flags          = 0; /* unsignalled stays unsignalled */
        ASSERT_EQ(0, post_wr_ex(&qp.qpx, wr));
        EXPECT_EQ(seq({"start", (opcode == IBV_WR_RDMA_WRITE) ? "write" : "read", "sge_list",
                       "complete"}),
                  qp.calls);
        EXPECT_EQ(0xbeefu, qp.rkey);
        EXPECT_EQ(0x7fff00001000ULL, qp.raddr);
        EXPECT_EQ(0u, qp.wr_flags);
        EXPECT_EQ(2u, qp.sges.size());
    }
}

TEST(WrPost, InlineDataIsCopiedNotFlagged) {
    RecordingQp    qp;
    char           a[] = "header:";
    char           b[] = "payload";
    struct ibv_sge sge[2] = {{reinterpret_cast<uintptr_t>(a), 7, 0},
                             {reinterpret_cast<uintptr_t>(b), 7, 0}};
    auto           wr     = make_wr(IBV_WR_SEND, sge, 2);
    wr.send_flags |= IBV_SEND_INLINE;
    ASSERT_EQ(0, post_wr_ex(&qp.qpx, wr));
    EXPECT_EQ(seq({"start", "send", "inline_list", "complete"}), qp.calls);
    EXPECT_EQ("header:payload", qp.inline_bytes);
    EXPECT_EQ(static_cast<unsigned>(IBV_SEND_SIGNALED), qp.wr_flags)
            << "IBV_SEND_INLINE is no flag of the extended API";
}

TEST(WrPost, DestinationGoesBetweenOpcodeAndData) {
    RecordingQp    qp;
    struct ibv_sge sge = {0x1000, 8, 1};
    const auto     wr  = make_wr(IBV_WR_SEND, &sge, 1);
    ASSERT_EQ(0, post_wr_ex(&qp.qpx, wr, [&](struct ibv_qp_ex *q) {
                  EXPECT_EQ(&qp.qpx, q);
                  qp.calls.push_back("destination");
              }));
    EXPECT_EQ(seq({"start", "send", "destination", "sge_list", "complete"}), qp.calls);
}

#ifdef UCT_TM_HAVE_MLX5DV
/* A DCI's post: the same calls, its destination set between the opcode and
 * the data with the address handle, DCT number and key it was given. */
struct RecordingDv {
    struct mlx5dv_qp_ex dv = {};
    RecordingQp        *qp = nullptr;
    struct ibv_ah      *ah = nullptr;
    uint32_t            dct_num = 0;
    uint64_t            dc_key  = 0;
};
static_assert(offsetof(RecordingDv, dv) == 0, "the entry finds the recorder at the dv");

TEST(WrPost, DciPostNamesItsTargetBetweenOpcodeAndData) {
    RecordingQp qp;
    RecordingDv dv;
    dv.qp                = &qp;
    dv.dv.wr_set_dc_addr = [](struct mlx5dv_qp_ex *d, struct ibv_ah *ah, uint32_t dctn,
                              uint64_t key) {
        auto &r = *reinterpret_cast<RecordingDv *>(d);
        r.qp->calls.push_back("dc_addr");
        r.ah      = ah;
        r.dct_num = dctn;
        r.dc_key  = key;
    };
    struct ibv_sge      sge = {0x1000, 8, 1};
    auto                wr  = make_wr(IBV_WR_RDMA_WRITE, &sge, 1);
    DcDestination       to;
    alignas(8) char     ah_storage[64] = {};
    to.ah      = reinterpret_cast<struct ibv_ah *>(ah_storage);
    to.dct_num = 0xabcdef;
    to.dc_key  = 0x0123456789abcdefULL;
    ASSERT_EQ(0, post_dci(&qp.qpx, &dv.dv, wr, to));
    EXPECT_EQ(seq({"start", "write", "dc_addr", "sge_list", "complete"}), qp.calls);
    EXPECT_EQ(to.ah, dv.ah);
    EXPECT_EQ(0xabcdefu, dv.dct_num);
    EXPECT_EQ(0x0123456789abcdefULL, dv.dc_key);
}
#endif

TEST(WrPost, WhatCompleteSaysIsReturned) {
    RecordingQp qp;
    qp.complete_rc     = ENOMEM;
    struct ibv_sge sge = {0x1000, 8, 1};
    EXPECT_EQ(ENOMEM, post_wr_ex(&qp.qpx, make_wr(IBV_WR_SEND, &sge, 1)));
}

TEST(WrPost, RequestsThisPathDoesNotCarryStartNothing) {
    struct ibv_sge sge[kMaxWrSge + 1] = {};
    struct Case {
        const char        *what;
        struct ibv_send_wr wr;
    };
    std::vector<Case> cases;
    cases.push_back({"an atomic", make_wr(IBV_WR_ATOMIC_FETCH_AND_ADD, sge, 1)});
    cases.push_back({"a write with immediate", make_wr(IBV_WR_RDMA_WRITE_WITH_IMM, sge, 1)});
    cases.push_back({"more scatter entries than the iface uses",
                     make_wr(IBV_WR_SEND, sge, kMaxWrSge + 1)});
    cases.push_back({"a negative count", make_wr(IBV_WR_SEND, sge, -1)});
    cases.push_back({"entries without a list", make_wr(IBV_WR_SEND, nullptr, 1)});
    auto inline_read = make_wr(IBV_WR_RDMA_READ, sge, 1);
    inline_read.send_flags |= IBV_SEND_INLINE;
    cases.push_back({"an inline read", inline_read});
    for (const auto &c : cases) {
        RecordingQp qp;
        EXPECT_EQ(EINVAL, post_wr_ex(&qp.qpx, c.wr)) << c.what;
        EXPECT_TRUE(qp.calls.empty()) << c.what;
    }
}

TEST(WrPost, TheMostScatterEntriesGoThrough) {
    RecordingQp    qp;
    struct ibv_sge sge[kMaxWrSge];
    for (int i = 0; i < kMaxWrSge; ++i) {
        sge[i] = {static_cast<uint64_t>(0x1000 * (i + 1)), static_cast<uint32_t>(i + 1),
                  static_cast<uint32_t>(i)};
    }
    ASSERT_EQ(0, post_wr_ex(&qp.qpx, make_wr(IBV_WR_SEND, sge, kMaxWrSge)));
    ASSERT_EQ(static_cast<size_t>(kMaxWrSge), qp.sges.size());
    EXPECT_EQ(sge[kMaxWrSge - 1].addr, qp.sges[kMaxWrSge - 1].addr);
}

}  // namespace
}  // namespace ib
}  // namespace uct_tm
