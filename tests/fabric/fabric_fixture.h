/*
 * The provider "tm" through libfabric's public API only: fi_getinfo with
 * prov_name "tm" (found through FI_PROVIDER_PATH), endpoints with their own
 * CQ and AV, and bounded waits (a hang fails the test instead of blocking).
 */
#ifndef UCT_TM_TESTS_FABRIC_FIXTURE_H_
#define UCT_TM_TESTS_FABRIC_FIXTURE_H_

#include <rdma/fabric.h>
#include <rdma/fi_cm.h>
#include <rdma/fi_domain.h>
#include <rdma/fi_endpoint.h>
#include <rdma/fi_errno.h>
#include <rdma/fi_tagged.h>

#include <gtest/gtest.h>

#include <string>
#include <vector>

namespace fabric_test {

inline constexpr double   kWaitSeconds = 20;
inline constexpr uint64_t kCaps        = FI_TAGGED | FI_MSG | FI_SOURCE | FI_DIRECTED_RECV;

/* The domain the tests run over unless they name one: TEST_FABRIC_DOMAIN
 * (tests/ib/test_rxe.sh: tm_dc in the Soft-RoCE guest), else tm_sm. */
const char *test_domain();

/* Hints for the provider "tm" (caller frees with fi_freeinfo). */
fi_info *tm_hints(const char *domain = test_domain(), uint64_t caps = kCaps,
                  fi_threading threading = FI_THREAD_DOMAIN);
/* fi_getinfo with those hints; nullptr if none matched. */
fi_info *tm_info(const char *domain = test_domain(), uint64_t caps = kCaps,
                 fi_threading threading = FI_THREAD_DOMAIN);

/* The fabric and domain the endpoints of a test share. */
struct Fabric {
    fi_info    *info   = nullptr;
    fid_fabric *fabric = nullptr;
    fid_domain *domain = nullptr;

    /* 0 or a libfabric error. */
    int  open(const char *domain_name = test_domain(), uint64_t caps = kCaps,
              fi_threading threading = FI_THREAD_DOMAIN);
    void close();
};

/* One endpoint with its CQ (both directions) and AV. */
struct Ep {
    fid_av *av = nullptr;
    fid_cq *cq = nullptr;
    fid_ep *ep = nullptr;

    int  open(Fabric &f, fi_cq_format format, fi_av_type av_type, uint64_t bind_flags = 0,
              fi_wait_obj wait_obj = FI_WAIT_NONE);
    void close();
    std::vector<char> name() const;
    /* Inserts a peer's name; its fi_addr_t (FI_ADDR_NOTAVAIL on failure). */
    fi_addr_t insert(const std::vector<char> &name);
};

/* Reads one completion from `cq` in the widest format (progressing the
 * others meanwhile: a peer must progress for rendezvous and credits).
 * Returns 1, or the error fi_cq_read gave (-FI_EAVAIL: an error entry
 * waits), or -FI_ETIMEDOUT after kWaitSeconds. */
ssize_t wait_cq(fid_cq *cq, void *entry, fi_addr_t *src, std::vector<fid_cq *> others = {});
/* The error entry waiting on `cq` (wait_cq returned -FI_EAVAIL). */
fi_cq_err_entry read_err(fid_cq *cq);
/* Progresses `cqs` for `seconds` and says whether any completion showed. */
bool any_completion(std::vector<fid_cq *> cqs, double seconds);

std::vector<char> pattern(size_t len, unsigned seed);

}  // namespace fabric_test

#endif
