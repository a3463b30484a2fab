#include "fabric_fixture.h"

#include <chrono>
#include <cstdlib>
#include <cstring>

namespace fabric_test {

namespace {

/* The build's provider, unless the environment names another directory
 * (libfabric reads FI_PROVIDER_PATH once, at its first call). */
const bool g_path_set = [] {
    setenv("FI_PROVIDER_PATH", TM_FI_PROVIDER_PATH, 0);
    return true;
}();

double now() {
    using namespace std::chrono;
    return duration<double>(steady_clock::now().time_since_epoch()).count();
}

}  // namespace

const char *test_domain() {
    const char *domain = getenv("TEST_FABRIC_DOMAIN");
    return ((domain != nullptr) && (*domain != '\0')) ? domain : "tm_sm";
}

fi_info *tm_hints(const char *domain, uint64_t caps, fi_threading threading) {
    fi_info *hints                    = fi_allocinfo();
    hints->caps                       = caps;
    hints->ep_attr->type              = FI_EP_RDM;
    hints->fabric_attr->prov_name     = strdup("tm");
    hints->domain_attr->name          = (domain != nullptr) ? strdup(domain) : nullptr;
    hints->domain_attr->threading     = threading;
    hints->domain_attr->data_progress = FI_PROGRESS_MANUAL;
    return hints;
}

fi_info *tm_info(const char *domain, uint64_t caps, fi_threading threading) {
    (void)g_path_set;
    fi_info  *hints = tm_hints(domain, caps, threading);
    fi_info  *info  = nullptr;
    const int ret   = fi_getinfo(fi_version(), nullptr, nullptr, 0, hints, &info);
    fi_freeinfo(hints);
    return (ret == 0) ? info : nullptr;
}

int Fabric::open(const char *domain_name, uint64_t caps, fi_threading threading) {
    info = tm_info(domain_name, caps, threading);
    if (info == nullptr) {
        return -FI_ENODATA;
    }
    int ret = fi_fabric(info->fabric_attr, &fabric, nullptr);
    if (ret == 0) {
        ret = fi_domain(fabric, info, &domain, nullptr);
    }
    return ret;
}

void Fabric::close() {
    if (domain != nullptr) {
        EXPECT_EQ(0, fi_close(&domain->fid));
    }
    if (fabric != nullptr) {
        EXPECT_EQ(0, fi_close(&fabric->fid));
    }
    fi_freeinfo(info);
    *this = Fabric{};
}

int Ep::open(Fabric &f, fi_cq_format format, fi_av_type av_type, uint64_t bind_flags,
             fi_wait_obj wait_obj) {
    fi_av_attr av_attr{};
    av_attr.type = av_type;
    fi_cq_attr cq_attr{};
    cq_attr.format   = format;
    cq_attr.wait_obj = wait_obj;
    int ret        = fi_av_open(f.domain, &av_attr, &av, nullptr);
    ret            = ret ? ret : fi_cq_open(f.domain, &cq_attr, &cq, nullptr);
    ret            = ret ? ret : fi_endpoint(f.domain, f.info, &ep, nullptr);
    ret            = ret ? ret : fi_ep_bind(ep, &cq->fid, FI_TRANSMIT | FI_RECV | bind_flags);
    ret            = ret ? ret : fi_ep_bind(ep, &av->fid, 0);
    return ret ? ret : fi_enable(ep);
}

void Ep::close() {
    for (fid *f : {ep ? &ep->fid : nullptr, cq ? &cq->fid : nullptr, av ? &av->fid : nullptr}) {
        if (f != nullptr) {
            EXPECT_EQ(0, fi_close(f));
        }
    }
    *this = Ep{};
}

std::vector<char> Ep::name() const {
    size_t len = 0;
    EXPECT_EQ(-FI_ETOOSMALL, fi_getname(&ep->fid, nullptr, &len));
    std::vector<char> name(len);
    EXPECT_EQ(0, fi_getname(&ep->fid, name.data(), &len));
    return name;
}

fi_addr_t Ep::insert(const std::vector<char> &name) {
    fi_addr_t addr = FI_ADDR_NOTAVAIL;
    return (fi_av_insert(av, name.data(), 1, &addr, 0, nullptr) == 1) ? addr : FI_ADDR_NOTAVAIL;
}

ssize_t wait_cq(fid_cq *cq, void *entry, fi_addr_t *src, std::vector<fid_cq *> others) {
    const double deadline = now() + kWaitSeconds;
    for (;;) {
        const ssize_t ret = (src != nullptr) ? fi_cq_readfrom(cq, entry, 1, src)
                                             : fi_cq_read(cq, entry, 1);
        if (ret != -FI_EAGAIN) {
            return ret;
        }
        for (fid_cq *other : others) {
            (void)fi_cq_read(other, nullptr, 0); /* progress only */
        }
        if (now() > deadline) {
            return -FI_ETIMEDOUT;
        }
    }
}

fi_cq_err_entry read_err(fid_cq *cq) {
    fi_cq_err_entry err{};
    EXPECT_EQ(1, fi_cq_readerr(cq, &err, 0));
    return err;
}

bool any_completion(std::vector<fid_cq *> cqs, double seconds) {
    const double deadline = now() + seconds;
    while (now() < deadline) {
        for (fid_cq *cq : cqs) {
            fi_cq_tagged_entry e;
            const ssize_t      ret = fi_cq_read(cq, &e, 0);
            if (ret != -FI_EAGAIN) {
                return true;
            }
        }
    }
    return false;
}

std::vector<char> pattern(size_t len, unsigned seed) {
    std::vector<char> v(len);
    for (size_t i = 0; i < len; ++i) {
        v[i] = static_cast<char>((i * 131 + seed * 7 + (i >> 8)) & 0xff);
    }
    return v;
}

}  // namespace fabric_test
