/* fi_getinfo and the control objects: fabric, domain, AV, CQ, MR, endpoint. */
#include "fabric_fixture.h"

#include <rdma/fi_rma.h>
#include <rdma/providers/fi_prov.h>

#include <dlfcn.h>
#include <poll.h>

#include <chrono>
#include <cstring>
#include <set>
#include <string>

using namespace fabric_test;

namespace {

/* A blocking read that should return at once gets this long before the test
 * fails, and must return within kSreadPrompt. */
constexpr int                       kSreadTimeoutMs = 5000;
constexpr std::chrono::milliseconds kSreadPrompt{1000};

int getinfo_rc(fi_info *hints) {
    fi_info  *info = nullptr;
    const int ret  = fi_getinfo(fi_version(), nullptr, nullptr, 0, hints, &info);
    fi_freeinfo(info);
    fi_freeinfo(hints);
    return ret;
}

}  // namespace

TEST(FabricInfo, ListsRdmTaggedAndMsgDomains) {
    fi_info *info = tm_info(nullptr, FI_TAGGED | FI_MSG);
    ASSERT_NE(nullptr, info);
    std::set<std::string> domains;
    for (fi_info *i = info; i != nullptr; i = i->next) {
        domains.insert(i->domain_attr->name);
        EXPECT_STREQ("tm", i->fabric_attr->prov_name);
        EXPECT_STREQ("tm", i->fabric_attr->name);
        EXPECT_EQ(FI_EP_RDM, i->ep_attr->type);
        EXPECT_EQ(FI_TAGGED | FI_MSG, i->caps & (FI_TAGGED | FI_MSG));
        EXPECT_EQ(0u, i->mode);
        EXPECT_EQ(0, i->domain_attr->mr_mode);
        EXPECT_EQ(FI_THREAD_DOMAIN, i->domain_attr->threading);
        EXPECT_EQ(FI_PROGRESS_MANUAL, i->domain_attr->data_progress);
        EXPECT_EQ(8u, i->domain_attr->cq_data_size);
        EXPECT_EQ(64u, i->tx_attr->iov_limit);
    }
    EXPECT_EQ(1u, domains.count("tm_sm"));
    /* posix and tcp alone only when named (FabricInfo.OneDomainForMpiHints) */
    EXPECT_EQ(0u, domains.count("posix"));
    EXPECT_EQ(0u, domains.count("tcp"));
    fi_info *dup = fi_dupinfo(info);
    ASSERT_NE(nullptr, dup);
    EXPECT_STREQ(info->domain_attr->name, dup->domain_attr->name);
    fi_freeinfo(dup);
    fi_freeinfo(info);
}

/* Open MPI's mtl ofi asks for FI_LOCAL_COMM and FI_REMOTE_COMM and spreads
 * its ranks over the entries it gets as over NICs: it gets one, "tm_sm,tcp"
 * (tm_sm on this host, tcp to others). posix and tcp come when named. */
TEST(FabricInfo, OneDomainForMpiHints) {
    fi_info *tcp = tm_info("tcp");
    if (tcp == nullptr) {
        GTEST_SKIP() << "UCX's tcp does not open here";
    }
    EXPECT_EQ(FI_REMOTE_COMM, tcp->caps & FI_REMOTE_COMM);
    fi_freeinfo(tcp);
    fi_info *posix = tm_info("posix");
    ASSERT_NE(nullptr, posix);
    EXPECT_EQ(0u, posix->caps & FI_REMOTE_COMM);
    fi_freeinfo(posix);
    fi_info *mpi = tm_info(nullptr, FI_TAGGED | FI_LOCAL_COMM | FI_REMOTE_COMM | FI_DIRECTED_RECV);
    ASSERT_NE(nullptr, mpi);
    EXPECT_STREQ("tm_sm,tcp", mpi->domain_attr->name);
    EXPECT_EQ(nullptr, mpi->next);
    EXPECT_EQ(FI_LOCAL_COMM | FI_REMOTE_COMM,
              mpi->domain_attr->caps & (FI_LOCAL_COMM | FI_REMOTE_COMM));
    fi_freeinfo(mpi);
}

/* Names fit FI_NAME_MAX, the buffer MPI libraries give fi_getname. */
TEST(FabricInfo, NamesFitNameMax) {
    for (const char *domain : {"tm_sm", "posix", "tcp", "tm_sm,tcp"}) {
        fi_info *info = tm_info(domain);
        if (info == nullptr) {
            continue;
        }
        fi_freeinfo(info);
        Fabric f;
        ASSERT_EQ(0, f.open(domain));
        Ep e;
        ASSERT_EQ(0, e.open(f, FI_CQ_FORMAT_TAGGED, FI_AV_MAP)) << domain;
        char   name[FI_NAME_MAX];
        size_t len = sizeof(name);
        EXPECT_EQ(0, fi_getname(&e.ep->fid, name, &len)) << domain;
        EXPECT_EQ(size_t{FI_NAME_MAX}, len) << domain;
        len = FI_NAME_MAX - 1;
        EXPECT_EQ(-FI_ETOOSMALL, fi_getname(&e.ep->fid, name, &len)) << domain;
        EXPECT_EQ(size_t{FI_NAME_MAX}, len) << domain;
        e.close();
        f.close();
    }
}

TEST(FabricInfo, HonoursHints) {
    fi_info *one = tm_info("tm_sm");
    ASSERT_NE(nullptr, one);
    EXPECT_EQ(nullptr, one->next);
    fi_freeinfo(one);
    EXPECT_EQ(-FI_ENODATA, getinfo_rc(tm_hints("no_such_domain")));
    EXPECT_EQ(-FI_ENODATA, getinfo_rc(tm_hints("tm_sm", FI_TAGGED | FI_RMA)));
    EXPECT_EQ(-FI_ENODATA, getinfo_rc(tm_hints("tm_sm", FI_TAGGED | FI_REMOTE_COMM)));
    fi_info *h       = tm_hints();
    h->ep_attr->type = FI_EP_MSG;
    EXPECT_EQ(-FI_ENODATA, getinfo_rc(h));
    h                         = tm_hints();
    h->domain_attr->threading = static_cast<fi_threading>(77); /* no level fi_domain(3) knows */
    EXPECT_EQ(-FI_ENODATA, getinfo_rc(h));
    h                             = tm_hints();
    h->domain_attr->data_progress = FI_PROGRESS_AUTO;
    EXPECT_EQ(-FI_ENODATA, getinfo_rc(h));
    h              = tm_hints();
    h->addr_format = FI_SOCKADDR_IN;
    EXPECT_EQ(-FI_ENODATA, getinfo_rc(h));
    h                       = tm_hints();
    h->tx_attr->inject_size = 1 << 20;
    EXPECT_EQ(-FI_ENODATA, getinfo_rc(h));
    h                       = tm_hints();
    h->mode                 = FI_CONTEXT | FI_CONTEXT2; /* modes the application supports: fine */
    h->domain_attr->mr_mode = FI_MR_LOCAL;
    h->domain_attr->av_type = FI_AV_MAP;
    fi_info *info           = nullptr;
    ASSERT_EQ(0, fi_getinfo(fi_version(), nullptr, nullptr, 0, h, &info));
    EXPECT_EQ(0u, info->mode);
    EXPECT_EQ(FI_AV_MAP, info->domain_attr->av_type);
    fi_freeinfo(info);
    fi_freeinfo(h);
}

/* libfabric's core skips a provider whose fi_version is below the version
 * asked for, and applications ask for the library's own. */
TEST(FabricInfo, ListedAtTheLibraryVersion) {
    fi_info *hints = tm_hints(nullptr);
    fi_info *info  = nullptr;
    ASSERT_EQ(0, fi_getinfo(fi_version(), nullptr, nullptr, 0, hints, &info));
    ASSERT_NE(nullptr, info);
    EXPECT_STREQ("tm", info->fabric_attr->prov_name);
    fi_freeinfo(info);
    fi_freeinfo(hints);
}

/* The provider itself, past the core's check: any API from 1.5 on, newer
 * ones included. */
TEST(FabricInfo, ProviderTakesNewerApiVersions) {
    const std::string path = std::string(TM_FI_PROVIDER_PATH) + "/libtm-fi.so";
    void             *lib  = dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL);
    ASSERT_NE(nullptr, lib) << dlerror();
    using Ini = fi_provider *(*)();
    auto ini  = reinterpret_cast<Ini>(dlsym(lib, "fi_prov_ini"));
    ASSERT_NE(nullptr, ini);
    fi_provider *prov = ini();
    EXPECT_FALSE(FI_VERSION_LT(prov->fi_version, fi_version()));
    fi_info *hints = tm_hints();
    fi_info *info  = nullptr;
    EXPECT_EQ(0, prov->getinfo(FI_VERSION(FI_MAJOR_VERSION, FI_MINOR_VERSION + 1), nullptr, nullptr,
                               0, hints, &info));
    EXPECT_NE(nullptr, info);
    fi_freeinfo(info);
    info = nullptr;
    EXPECT_EQ(0, prov->getinfo(FI_VERSION(1, 5), nullptr, nullptr, 0, hints, &info));
    fi_freeinfo(info);
    info = nullptr;
    EXPECT_EQ(-FI_ENODATA, prov->getinfo(FI_VERSION(1, 4), nullptr, nullptr, 0, hints, &info));
    EXPECT_EQ(nullptr, info);
    fi_freeinfo(hints);
    dlclose(lib);
}

TEST(FabricObjects, OpenCloseInOrder) {
    Fabric f;
    ASSERT_EQ(0, f.open());
    Ep e;
    ASSERT_EQ(0, e.open(f, FI_CQ_FORMAT_TAGGED, FI_AV_TABLE));
    EXPECT_EQ(-FI_EBUSY, fi_close(&f.domain->fid));
    EXPECT_EQ(-FI_EBUSY, fi_close(&f.fabric->fid));
    EXPECT_EQ(-FI_EBUSY, fi_close(&e.cq->fid)); /* bound to the endpoint */
    EXPECT_EQ(-FI_EBUSY, fi_close(&e.av->fid));
    e.close();
    f.close();
}

TEST(FabricObjects, EnableNeedsCqAndAv) {
    Fabric f;
    ASSERT_EQ(0, f.open());
    fid_ep *ep = nullptr;
    ASSERT_EQ(0, fi_endpoint(f.domain, f.info, &ep, nullptr));
    EXPECT_EQ(-FI_ENOCQ, fi_enable(ep));
    char buf[8] = {};
    EXPECT_EQ(-FI_EOPBADSTATE, fi_tsend(ep, buf, 8, nullptr, 0, 1, nullptr));
    EXPECT_EQ(-FI_EOPBADSTATE, fi_recv(ep, buf, 8, nullptr, FI_ADDR_UNSPEC, nullptr));
    EXPECT_EQ(-FI_EINVAL, fi_ep_bind(ep, nullptr, 0));
    EXPECT_EQ(-FI_EINVAL, fi_ep_bind(ep, &f.domain->fid, 0));
    fid_cq    *cq = nullptr;
    fi_cq_attr attr{};
    ASSERT_EQ(0, fi_cq_open(f.domain, &attr, &cq, nullptr));
    EXPECT_EQ(-FI_EBADFLAGS, fi_ep_bind(ep, &cq->fid, 0));
    EXPECT_EQ(-FI_EBADFLAGS, fi_ep_bind(ep, &cq->fid, FI_TRANSMIT | FI_WRITE));
    EXPECT_EQ(0, fi_ep_bind(ep, &cq->fid, FI_TRANSMIT));
    EXPECT_EQ(-FI_EINVAL, fi_ep_bind(ep, &cq->fid, FI_TRANSMIT)); /* one per direction */
    EXPECT_EQ(-FI_ENOCQ, fi_enable(ep));
    EXPECT_EQ(0, fi_ep_bind(ep, &cq->fid, FI_RECV));
    EXPECT_EQ(-FI_ENOAV, fi_enable(ep)); /* both CQs, no AV */
    fid_av    *av = nullptr;
    fi_av_attr av_attr{};
    av_attr.type = FI_AV_TABLE;
    ASSERT_EQ(0, fi_av_open(f.domain, &av_attr, &av, nullptr));
    EXPECT_EQ(0, fi_ep_bind(ep, &av->fid, 0));
    EXPECT_EQ(0, fi_enable(ep));
    EXPECT_EQ(0, fi_close(&ep->fid));
    EXPECT_EQ(0, fi_close(&av->fid));
    EXPECT_EQ(0, fi_close(&cq->fid));
    f.close();
}

TEST(FabricObjects, CqFormatsAndAttributes) {
    Fabric f;
    ASSERT_EQ(0, f.open());
    for (fi_cq_format format : {FI_CQ_FORMAT_UNSPEC, FI_CQ_FORMAT_CONTEXT, FI_CQ_FORMAT_MSG,
                                FI_CQ_FORMAT_DATA, FI_CQ_FORMAT_TAGGED}) {
        fi_cq_attr attr{};
        attr.format = format;
        fid_cq *cq  = nullptr;
        ASSERT_EQ(0, fi_cq_open(f.domain, &attr, &cq, nullptr)) << format;
        fi_cq_tagged_entry e;
        EXPECT_EQ(-FI_EAGAIN, fi_cq_read(cq, &e, 1));
        fi_cq_err_entry err{};
        EXPECT_EQ(-FI_EAGAIN, fi_cq_readerr(cq, &err, 0));
        EXPECT_EQ(-FI_EINVAL, fi_cq_read(cq, nullptr, 1));
        EXPECT_EQ(-FI_ENOSYS, fi_cq_sread(cq, &e, 1, nullptr, 0));
        EXPECT_EQ(0, fi_close(&cq->fid));
    }
    fi_cq_attr attr{};
    fid_cq    *cq = nullptr;
    attr.format   = static_cast<fi_cq_format>(99);
    EXPECT_EQ(-FI_EINVAL, fi_cq_open(f.domain, &attr, &cq, nullptr));
    attr.format   = FI_CQ_FORMAT_TAGGED;
    attr.wait_obj = FI_WAIT_FD;
    EXPECT_EQ(-FI_ENOSYS, fi_cq_open(f.domain, &attr, &cq, nullptr));
    EXPECT_EQ(-FI_EINVAL, fi_cq_open(f.domain, nullptr, &cq, nullptr));
    EXPECT_EQ(nullptr, cq);
    f.close();
}

TEST(FabricObjects, MemoryRegistration) {
    Fabric f;
    ASSERT_EQ(0, f.open());
    std::vector<char> buf(1 << 16);
    fid_mr           *mr = nullptr;
    ASSERT_EQ(0, fi_mr_reg(f.domain, buf.data(), buf.size(), FI_SEND | FI_RECV, 0, 7, 0, &mr,
                           nullptr));
    EXPECT_EQ(7u, fi_mr_key(mr));
    EXPECT_NE(nullptr, fi_mr_desc(mr));
    EXPECT_EQ(-FI_EBUSY, fi_close(&f.domain->fid));
    EXPECT_EQ(0, fi_close(&mr->fid));
    fid_mr *bad = nullptr;
    EXPECT_EQ(-FI_EINVAL, fi_mr_reg(f.domain, nullptr, 8, FI_SEND, 0, 0, 0, &bad, nullptr));
    EXPECT_EQ(-FI_EINVAL,
              fi_mr_reg(f.domain, buf.data(), 8, FI_REMOTE_WRITE, 0, 0, 0, &bad, nullptr));
    EXPECT_EQ(-FI_EBADFLAGS, fi_mr_reg(f.domain, buf.data(), 8, FI_SEND, 0, 0, 1, &bad, nullptr));
    iovec      one = {buf.data(), 64};
    fi_mr_attr attr{};
    attr.mr_iov    = &one;
    attr.iov_count = 1;
    attr.access    = FI_RECV;
    ASSERT_EQ(0, fi_mr_regattr(f.domain, &attr, 0, &mr));
    EXPECT_EQ(0, fi_close(&mr->fid));
    iovec two[2] = {{buf.data(), 8}, {buf.data() + 64, 8}};
    EXPECT_EQ(-FI_EINVAL, fi_mr_regv(f.domain, two, 2, FI_SEND, 0, 0, 0, &bad, nullptr));
    EXPECT_EQ(nullptr, bad);
    f.close();
}

TEST(FabricObjects, AddressVector) {
    Fabric f;
    ASSERT_EQ(0, f.open());
    Ep a, b;
    ASSERT_EQ(0, a.open(f, FI_CQ_FORMAT_TAGGED, FI_AV_TABLE));
    ASSERT_EQ(0, b.open(f, FI_CQ_FORMAT_TAGGED, FI_AV_MAP));
    const std::vector<char> name = b.name();
    size_t                  len  = 4;
    char                    small[4];
    EXPECT_EQ(-FI_ETOOSMALL, fi_getname(&b.ep->fid, small, &len));
    EXPECT_EQ(name.size(), len);
    const fi_addr_t addr = a.insert(name);
    ASSERT_EQ(0u, addr); /* a table hands out indices from 0 */
    std::vector<char> got(name.size());
    len = got.size();
    EXPECT_EQ(0, fi_av_lookup(a.av, addr, got.data(), &len));
    EXPECT_EQ(name, got);
    char   text[1024];
    size_t text_len = sizeof(text);
    EXPECT_EQ(text, fi_av_straddr(a.av, name.data(), text, &text_len));
    EXPECT_EQ(0, strncmp(text, "fi_tm://", 8));
    EXPECT_EQ(strlen(text) + 1, text_len);
    /* bad input: nothing changes */
    fi_addr_t         out = 0;
    std::vector<char> junk(name.size(), 'x');
    EXPECT_EQ(0, fi_av_insert(a.av, junk.data(), 1, &out, 0, nullptr));
    EXPECT_EQ(FI_ADDR_NOTAVAIL, out);
    EXPECT_EQ(-FI_EBADFLAGS, fi_av_insert(a.av, name.data(), 1, &out, FI_TRANSMIT, nullptr));
    EXPECT_EQ(-FI_EINVAL, fi_av_insert(a.av, nullptr, 1, &out, 0, nullptr));
    EXPECT_EQ(-FI_EINVAL, fi_av_insert(b.av, name.data(), 1, nullptr, 0, nullptr)); /* a map */
    fi_addr_t bogus = 99;
    EXPECT_EQ(-FI_EINVAL, fi_av_remove(a.av, &bogus, 1, 0));
    EXPECT_EQ(-FI_ENOENT, fi_av_lookup(a.av, bogus, got.data(), &len));
    EXPECT_EQ(-FI_ENOSYS, fi_av_insertsvc(a.av, "localhost", "1", &out, 0, nullptr));
    EXPECT_EQ(0, fi_av_remove(a.av, const_cast<fi_addr_t *>(&addr), 1, 0));
    EXPECT_EQ(-FI_ENOENT, fi_av_lookup(a.av, addr, got.data(), &len));
    char buf[8] = {};
    EXPECT_EQ(-FI_EINVAL, fi_tsend(a.ep, buf, 8, nullptr, addr, 1, nullptr)); /* removed */
    const fi_addr_t again = a.insert(name);
    EXPECT_EQ(1u, again); /* a table does not reuse a removed index */
    a.close();
    b.close();
    f.close();
}

TEST(FabricObjects, UnofferedOpsAreEnosys) {
    Fabric f;
    ASSERT_EQ(0, f.open());
    Ep e;
    ASSERT_EQ(0, e.open(f, FI_CQ_FORMAT_TAGGED, FI_AV_TABLE));
    char buf[8] = {};
    EXPECT_EQ(-FI_ENOSYS, fi_read(e.ep, buf, 8, nullptr, 0, 0, 0, nullptr));
    EXPECT_EQ(-FI_ENOSYS, fi_write(e.ep, buf, 8, nullptr, 0, 0, 0, nullptr));
    EXPECT_EQ(-FI_ENOSYS, fi_connect(e.ep, buf, nullptr, 0));
    fid_eq    *eq = nullptr;
    fi_eq_attr eattr{};
    eattr.wait_obj = FI_WAIT_SET;
    EXPECT_EQ(-FI_ENOSYS, fi_eq_open(f.fabric, &eattr, &eq, nullptr));
    fid_ep *sep = nullptr;
    EXPECT_EQ(-FI_ENOSYS, fi_scalable_ep(f.domain, f.info, &sep, nullptr));
    size_t value = 0, len = sizeof(value);
    EXPECT_EQ(-FI_ENOPROTOOPT,
              fi_getopt(&e.ep->fid, FI_OPT_ENDPOINT, FI_OPT_CM_DATA_SIZE, &value, &len));
    e.close();
    f.close();
}

TEST(FabricObjects, SendToSelf) {
    Fabric f;
    ASSERT_EQ(0, f.open());
    Ep e;
    ASSERT_EQ(0, e.open(f, FI_CQ_FORMAT_TAGGED, FI_AV_TABLE));
    const fi_addr_t self = e.insert(e.name());
    ASSERT_NE(FI_ADDR_NOTAVAIL, self);
    const std::vector<char> msg = pattern(1000, 2);
    std::vector<char>       buf(1000);
    fid_mr                 *mr = nullptr; /* mapped into the endpoint, which goes first */
    ASSERT_EQ(0, fi_mr_reg(f.domain, buf.data(), buf.size(), FI_RECV, 0, 0, 0, &mr, nullptr));
    ASSERT_EQ(0, fi_trecv(e.ep, buf.data(), buf.size(), fi_mr_desc(mr), self, 4, 0, nullptr));
    ASSERT_EQ(0, fi_tsend(e.ep, msg.data(), msg.size(), nullptr, self, 4, nullptr));
    fi_cq_tagged_entry c[2];
    ASSERT_EQ(1, wait_cq(e.cq, &c[0], nullptr));
    ASSERT_EQ(1, wait_cq(e.cq, &c[1], nullptr));
    EXPECT_EQ(msg, buf);
    e.close();
    EXPECT_EQ(0, fi_close(&mr->fid));
    f.close();
}

TEST(FabricObjects, BlockingCqReadAndEventQueue) {
    Fabric f;
    ASSERT_EQ(0, f.open());
    fi_cq_attr attr{};
    attr.format   = FI_CQ_FORMAT_TAGGED;
    attr.wait_obj = FI_WAIT_UNSPEC;
    fid_cq *cq    = nullptr;
    ASSERT_EQ(0, fi_cq_open(f.domain, &attr, &cq, nullptr));
    fi_cq_tagged_entry e;
    EXPECT_EQ(-FI_EAGAIN, fi_cq_sread(cq, &e, 1, nullptr, 20)); /* times out */
    EXPECT_EQ(0, fi_cq_signal(cq));
    /* Signalled: returns at once. A finite timeout, so that a regression
     * fails the test rather than hanging it. */
    auto start = std::chrono::steady_clock::now();
    EXPECT_EQ(-FI_EAGAIN, fi_cq_sread(cq, &e, 1, nullptr, kSreadTimeoutMs));
    EXPECT_LT(std::chrono::steady_clock::now() - start, kSreadPrompt);
    EXPECT_EQ(0, fi_close(&cq->fid));
    fi_eq_attr eattr{};
    eattr.wait_obj = FI_WAIT_UNSPEC;
    fid_eq *eq     = nullptr;
    ASSERT_EQ(0, fi_eq_open(f.fabric, &eattr, &eq, nullptr));
    EXPECT_EQ(-FI_EBUSY, fi_close(&f.fabric->fid));
    uint32_t    event = 0;
    fi_eq_entry entry{};
    fi_eq_entry out{};
    entry.data = 99;
    EXPECT_EQ(-FI_EAGAIN, fi_eq_read(eq, &event, &out, sizeof(out), 0));
    EXPECT_EQ(-FI_EAGAIN, fi_eq_sread(eq, &event, &out, sizeof(out), 10, 0));
    EXPECT_EQ(static_cast<ssize_t>(sizeof(entry)),
              fi_eq_write(eq, FI_NOTIFY, &entry, sizeof(entry), 0));
    EXPECT_EQ(-FI_ETOOSMALL, fi_eq_read(eq, &event, &out, 4, 0));
    EXPECT_EQ(static_cast<ssize_t>(sizeof(out)),
              fi_eq_read(eq, &event, &out, sizeof(out), FI_PEEK));
    start = std::chrono::steady_clock::now(); /* an entry is queued: returns at once */
    EXPECT_EQ(static_cast<ssize_t>(sizeof(out)),
              fi_eq_sread(eq, &event, &out, sizeof(out), kSreadTimeoutMs, 0));
    EXPECT_LT(std::chrono::steady_clock::now() - start, kSreadPrompt);
    EXPECT_EQ(static_cast<uint32_t>(FI_NOTIFY), event);
    EXPECT_EQ(99u, out.data);
    EXPECT_EQ(-FI_EAGAIN, fi_eq_read(eq, &event, &out, sizeof(out), 0));
    fi_eq_err_entry err{};
    EXPECT_EQ(-FI_EAGAIN, fi_eq_readerr(eq, &err, 0));
    EXPECT_EQ(0, fi_close(&eq->fid));
    f.close();
}

TEST(FabricObjects, NamesInsertedBeforeEnableConnectAtEnable) {
    Fabric f;
    ASSERT_EQ(0, f.open());
    Ep b;
    ASSERT_EQ(0, b.open(f, FI_CQ_FORMAT_TAGGED, FI_AV_TABLE));
    fid_av    *av = nullptr;
    fid_cq    *cq = nullptr;
    fid_ep    *ep = nullptr;
    fi_av_attr av_attr{};
    fi_cq_attr cq_attr{};
    cq_attr.format = FI_CQ_FORMAT_TAGGED;
    ASSERT_EQ(0, fi_av_open(f.domain, &av_attr, &av, nullptr));
    ASSERT_EQ(0, fi_cq_open(f.domain, &cq_attr, &cq, nullptr));
    ASSERT_EQ(0, fi_endpoint(f.domain, f.info, &ep, nullptr));
    const std::vector<char> name = b.name();
    fi_addr_t               ab   = FI_ADDR_NOTAVAIL;
    ASSERT_EQ(1, fi_av_insert(av, name.data(), 1, &ab, 0, nullptr)); /* before the bind */
    ASSERT_EQ(0, fi_ep_bind(ep, &cq->fid, FI_TRANSMIT | FI_RECV));
    ASSERT_EQ(0, fi_ep_bind(ep, &av->fid, 0));
    size_t            len = 256;
    std::vector<char> mine(len);
    ASSERT_EQ(0, fi_getname(&ep->fid, mine.data(), &len)); /* before enable */
    ASSERT_EQ(0, fi_enable(ep));
    ASSERT_NE(FI_ADDR_NOTAVAIL, b.insert(mine));
    const std::vector<char> msg = pattern(200, 3);
    std::vector<char>       buf(200);
    ASSERT_EQ(0, fi_trecv(b.ep, buf.data(), buf.size(), nullptr, FI_ADDR_UNSPEC, 2, 0, nullptr));
    ASSERT_EQ(0, fi_tsend(ep, msg.data(), msg.size(), nullptr, ab, 2, nullptr));
    fi_cq_tagged_entry e;
    ASSERT_EQ(1, wait_cq(b.cq, &e, nullptr, {cq}));
    EXPECT_EQ(msg, buf);
    EXPECT_EQ(0, fi_close(&ep->fid));
    EXPECT_EQ(0, fi_close(&cq->fid));
    EXPECT_EQ(0, fi_close(&av->fid));
    b.close();
    f.close();
}

/* FI_WAIT_FD: the fd is readable exactly while events wait; fi_trywait
 * says the same. FI_WRITE (the application writes events) is accepted. */
TEST(FabricObjects, EventQueueWaitFd) {
    Fabric f;
    ASSERT_EQ(0, f.open());
    fi_eq_attr attr{};
    attr.wait_obj = FI_WAIT_FD;
    attr.flags    = FI_WRITE | FI_READ;
    fid_eq *eq    = nullptr;
    EXPECT_EQ(-FI_EBADFLAGS, fi_eq_open(f.fabric, &attr, &eq, nullptr));
    attr.flags = FI_WRITE;
    ASSERT_EQ(0, fi_eq_open(f.fabric, &attr, &eq, nullptr));
    int fd = -1;
    EXPECT_EQ(-FI_EINVAL, fi_control(&eq->fid, FI_GETWAIT, nullptr));
    ASSERT_EQ(0, fi_control(&eq->fid, FI_GETWAIT, &fd));
    ASSERT_GE(fd, 0);
    auto readable = [fd] {
        pollfd p{fd, POLLIN, 0};
        return poll(&p, 1, 0) == 1;
    };
    fid *fids[1] = {&eq->fid};
    EXPECT_FALSE(readable());
    EXPECT_EQ(0, fi_trywait(f.fabric, fids, 1));
    fi_eq_entry entry{};
    for (int i = 0; i < 2; ++i) {
        EXPECT_EQ(static_cast<ssize_t>(sizeof(entry)),
                  fi_eq_write(eq, FI_NOTIFY, &entry, sizeof(entry), 0));
    }
    EXPECT_TRUE(readable());
    EXPECT_EQ(-FI_EAGAIN, fi_trywait(f.fabric, fids, 1));
    uint32_t event = 0;
    EXPECT_EQ(static_cast<ssize_t>(sizeof(entry)),
              fi_eq_read(eq, &event, &entry, sizeof(entry), 0));
    EXPECT_TRUE(readable()) << "one event still waits";
    EXPECT_EQ(static_cast<ssize_t>(sizeof(entry)),
              fi_eq_sread(eq, &event, &entry, sizeof(entry), 1000, 0));
    EXPECT_FALSE(readable());
    EXPECT_EQ(0, fi_trywait(f.fabric, fids, 1));

    fid_eq *plain = nullptr;
    attr.wait_obj = FI_WAIT_NONE;
    ASSERT_EQ(0, fi_eq_open(f.fabric, &attr, &plain, nullptr));
    EXPECT_EQ(-FI_ENODATA, fi_control(&plain->fid, FI_GETWAIT, &fd)) << "no fd to wait on";
    fid *bad[2] = {&eq->fid, &plain->fid};
    EXPECT_EQ(-FI_EINVAL, fi_trywait(f.fabric, bad, 2));
    EXPECT_EQ(-FI_EINVAL, fi_trywait(f.fabric, nullptr, 1));
    EXPECT_EQ(0, fi_close(&plain->fid));
    EXPECT_EQ(0, fi_close(&eq->fid));
    f.close();
}

/* The source address is "any" (a worker's own exists only once the
 * endpoint does): present, but no AV takes it. Domain caps stay off the
 * tx and rx attributes. */
TEST(FabricInfo, SourceAddressAndAttributeCaps) {
    fi_info *info = tm_info();
    ASSERT_NE(nullptr, info);
    ASSERT_NE(nullptr, info->src_addr);
    EXPECT_EQ(size_t{FI_NAME_MAX}, info->src_addrlen);
    EXPECT_EQ(0u, info->tx_attr->caps & (FI_LOCAL_COMM | FI_REMOTE_COMM | FI_RECV));
    EXPECT_EQ(0u, info->rx_attr->caps & (FI_LOCAL_COMM | FI_REMOTE_COMM | FI_SEND));
    EXPECT_TRUE(info->rx_attr->caps & FI_MULTI_RECV);
    EXPECT_GT(info->domain_attr->cntr_cnt, 0u);
    Fabric f;
    ASSERT_EQ(0, f.open());
    Ep e;
    ASSERT_EQ(0, e.open(f, FI_CQ_FORMAT_TAGGED, FI_AV_TABLE));
    fi_addr_t addr = 0;
    EXPECT_EQ(0, fi_av_insert(e.av, info->src_addr, 1, &addr, 0, nullptr));
    EXPECT_EQ(FI_ADDR_NOTAVAIL, addr);
    e.close();
    f.close();
    fi_freeinfo(info);
}
