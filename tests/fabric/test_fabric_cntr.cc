/* Counters: fi_cntr_open and its attributes, the value and error count,
 * fi_cntr_wait, binding to endpoints (FI_SEND, FI_RECV) and what they count. */
#include "fabric_fixture.h"

using namespace fabric_test;

namespace {

fid_cntr *open_cntr(fid_domain *domain, fi_wait_obj wait_obj = FI_WAIT_NONE) {
    fi_cntr_attr attr{};
    attr.events    = FI_CNTR_EVENTS_COMP;
    attr.wait_obj  = wait_obj;
    fid_cntr *cntr = nullptr;
    EXPECT_EQ(0, fi_cntr_open(domain, &attr, &cntr, nullptr));
    return cntr;
}

/* An endpoint like Ep, with counters bound before fi_enable. */
struct CountedEp : Ep {
    int open(Fabric &f, fid_cntr *tx, fid_cntr *rx) {
        fi_av_attr av_attr{};
        fi_cq_attr cq_attr{};
        cq_attr.format = FI_CQ_FORMAT_TAGGED;
        int ret        = fi_av_open(f.domain, &av_attr, &av, nullptr);
        ret            = ret ? ret : fi_cq_open(f.domain, &cq_attr, &cq, nullptr);
        ret            = ret ? ret : fi_endpoint(f.domain, f.info, &ep, nullptr);
        ret            = ret ? ret : fi_ep_bind(ep, &cq->fid, FI_TRANSMIT | FI_RECV);
        ret            = ret ? ret : fi_ep_bind(ep, &av->fid, 0);
        ret            = (ret || !tx) ? ret : fi_ep_bind(ep, &tx->fid, FI_SEND);
        ret            = (ret || !rx) ? ret : fi_ep_bind(ep, &rx->fid, FI_RECV);
        return ret ? ret : fi_enable(ep);
    }
};

/* Reads `cntr` (progressing its endpoints) until it reaches `value`,
 * progressing `others` too; false after kWaitSeconds. */
bool reach(fid_cntr *cntr, uint64_t value, std::vector<fid_cq *> others) {
    for (int i = 0; i < 2000000; ++i) {
        if (fi_cntr_read(cntr) >= value) {
            return true;
        }
        for (fid_cq *cq : others) {
            (void)fi_cq_read(cq, nullptr, 0);
        }
    }
    return false;
}

}  // namespace

TEST(FabricCntr, OpenRefusesBadAttributes) {
    Fabric f;
    ASSERT_EQ(0, f.open());
    ASSERT_GT(f.info->domain_attr->cntr_cnt, 0u);
    fi_cntr_attr attr{};
    fid_cntr    *cntr = nullptr;
    EXPECT_EQ(-FI_EINVAL, fi_cntr_open(f.domain, nullptr, &cntr, nullptr));
    EXPECT_EQ(-FI_EINVAL, fi_cntr_open(f.domain, &attr, nullptr, nullptr));
    attr.events = static_cast<fi_cntr_events>(1);
    EXPECT_EQ(-FI_EINVAL, fi_cntr_open(f.domain, &attr, &cntr, nullptr));
    attr.events   = FI_CNTR_EVENTS_COMP;
    attr.wait_obj = FI_WAIT_FD;
    EXPECT_EQ(-FI_ENOSYS, fi_cntr_open(f.domain, &attr, &cntr, nullptr));
    attr.wait_obj = FI_WAIT_NONE;
    attr.flags    = 1;
    EXPECT_EQ(-FI_EBADFLAGS, fi_cntr_open(f.domain, &attr, &cntr, nullptr));
    EXPECT_EQ(nullptr, cntr);
    EXPECT_EQ(0, fi_close(&f.domain->fid)) << "a refused counter holds the domain";
    f.domain = nullptr;
    f.close();
}

TEST(FabricCntr, SetAddReadAndWait) {
    Fabric f;
    ASSERT_EQ(0, f.open());
    fid_cntr *c = open_cntr(f.domain);
    ASSERT_NE(nullptr, c);
    EXPECT_EQ(0u, fi_cntr_read(c));
    EXPECT_EQ(0u, fi_cntr_readerr(c));
    EXPECT_EQ(0, fi_cntr_set(c, 5));
    EXPECT_EQ(0, fi_cntr_add(c, 3));
    EXPECT_EQ(0, fi_cntr_seterr(c, 2));
    EXPECT_EQ(0, fi_cntr_adderr(c, 1));
    EXPECT_EQ(8u, fi_cntr_read(c));
    EXPECT_EQ(3u, fi_cntr_readerr(c));
    EXPECT_EQ(-FI_ENOSYS, fi_cntr_wait(c, 8, 0)) << "FI_WAIT_NONE: no blocking wait";
    EXPECT_EQ(-FI_EBUSY, fi_close(&f.domain->fid));
    EXPECT_EQ(0, fi_close(&c->fid));

    fid_cntr *w = open_cntr(f.domain, FI_WAIT_UNSPEC);
    ASSERT_NE(nullptr, w);
    EXPECT_EQ(0, fi_cntr_set(w, 4));
    EXPECT_EQ(0, fi_cntr_wait(w, 4, 0));
    EXPECT_EQ(-FI_ETIMEDOUT, fi_cntr_wait(w, 5, 10));
    EXPECT_EQ(0, fi_close(&w->fid));
    f.close();
}

TEST(FabricCntr, BindRefusesBadFlagsAndSecondCounters) {
    Fabric f;
    ASSERT_EQ(0, f.open());
    fid_cntr *c1 = open_cntr(f.domain);
    fid_cntr *c2 = open_cntr(f.domain);
    fid_ep   *ep = nullptr;
    ASSERT_EQ(0, fi_endpoint(f.domain, f.info, &ep, nullptr));
    EXPECT_EQ(-FI_EBADFLAGS, fi_ep_bind(ep, &c1->fid, 0));
    EXPECT_EQ(-FI_EBADFLAGS, fi_ep_bind(ep, &c1->fid, FI_SEND | FI_WRITE)); /* no RMA */
    EXPECT_EQ(-FI_EBADFLAGS, fi_ep_bind(ep, &c1->fid, FI_REMOTE_READ));
    EXPECT_EQ(0, fi_close(&c1->fid)) << "a refused bind holds the counter";
    c1 = open_cntr(f.domain);
    EXPECT_EQ(0, fi_ep_bind(ep, &c1->fid, FI_SEND | FI_RECV));
    EXPECT_EQ(-FI_EINVAL, fi_ep_bind(ep, &c2->fid, FI_SEND)); /* one per direction */
    EXPECT_EQ(-FI_EINVAL, fi_ep_bind(ep, &c2->fid, FI_RECV));
    EXPECT_EQ(-FI_EBUSY, fi_close(&c1->fid));
    EXPECT_EQ(0, fi_close(&ep->fid));
    EXPECT_EQ(0, fi_close(&c1->fid)) << "the endpoint let go of it";
    EXPECT_EQ(0, fi_close(&c2->fid));
    f.close();
}

/* Every completed operation counts, with or without a CQ entry (an
 * inject writes none); a failed one counts as an error instead. */
TEST(FabricCntr, CountsSendsReceivesAndErrors) {
    Fabric f;
    ASSERT_EQ(0, f.open());
    fid_cntr *tx = open_cntr(f.domain);
    fid_cntr *rx = open_cntr(f.domain, FI_WAIT_UNSPEC);
    CountedEp a, b;
    ASSERT_EQ(0, a.open(f, tx, nullptr));
    ASSERT_EQ(0, b.open(f, nullptr, rx));
    EXPECT_EQ(-FI_EOPBADSTATE, fi_ep_bind(a.ep, &rx->fid, FI_RECV)); /* enabled */
    const fi_addr_t ab = a.insert(b.name());
    ASSERT_NE(FI_ADDR_NOTAVAIL, b.insert(a.name()));
    char in[3][64] = {};
    char out[64]   = "counted";
    for (auto &buf : in) {
        ASSERT_EQ(0, fi_recv(b.ep, buf, sizeof(buf), nullptr, FI_ADDR_UNSPEC, nullptr));
    }
    ASSERT_EQ(0, fi_send(a.ep, out, sizeof(out), nullptr, ab, nullptr));
    ASSERT_EQ(0, fi_inject(a.ep, out, sizeof(out), ab));
    ASSERT_EQ(0, fi_tsend(a.ep, out, sizeof(out), nullptr, ab, 1, nullptr)); /* no receive */
    ASSERT_EQ(0, fi_send(a.ep, out, sizeof(out), nullptr, ab, nullptr));
    EXPECT_TRUE(reach(tx, 4, {b.cq}));
    EXPECT_EQ(0, fi_cntr_wait(rx, 3, 20000));
    EXPECT_EQ(3u, fi_cntr_read(rx));
    EXPECT_STREQ("counted", in[2]);
    EXPECT_EQ(0u, fi_cntr_readerr(tx));
    EXPECT_EQ(0u, fi_cntr_readerr(rx));
    fi_cq_tagged_entry e;
    for (int i = 0; i < 3; ++i) {
        ASSERT_EQ(1, wait_cq(b.cq, &e, nullptr)) << "counted and written to the CQ";
    }

    char small[8];
    ASSERT_EQ(0, fi_trecv(b.ep, small, sizeof(small), nullptr, FI_ADDR_UNSPEC, 1, 0, nullptr));
    ASSERT_EQ(-FI_EAVAIL, wait_cq(b.cq, &e, nullptr));
    EXPECT_EQ(FI_ETRUNC, read_err(b.cq).err);
    EXPECT_EQ(3u, fi_cntr_read(rx)) << "truncated: an error, not a success";
    EXPECT_EQ(1u, fi_cntr_readerr(rx));

    /* an error while fi_cntr_wait waits ends the wait */
    ASSERT_EQ(0, fi_trecv(b.ep, small, sizeof(small), nullptr, FI_ADDR_UNSPEC, 2, 0, nullptr));
    ASSERT_EQ(0, fi_tsend(a.ep, out, sizeof(out), nullptr, ab, 2, nullptr));
    EXPECT_EQ(-FI_EAVAIL, fi_cntr_wait(rx, 4, 20000));
    EXPECT_EQ(2u, fi_cntr_readerr(rx));
    a.close();
    b.close();
    EXPECT_EQ(0, fi_close(&tx->fid));
    EXPECT_EQ(0, fi_close(&rx->fid));
    f.close();
}
