/*
 * What the libfabric provider adds per 8 B message: one loop through
 * libfabric (fi_trecv from a source, fi_tinjectdata, fi_cq_read until the
 * receive's entry) and the same loop through the protocol layer's C API
 * (uct_tm_proto_recv from that peer's endpoint, uct_tm_proto_send with
 * INJECT | REMOTE_DATA, progress until the receive's callback), each with
 * two endpoints in one process over the domain BENCH_FABRIC_DOMAIN names
 * (default tm_sm). These are the calls Open MPI's mtl ofi makes per
 * MPI_Send / MPI_Recv of 8 B. The difference of the two is the provider's
 * cost; contrib/bench_fabric.sh runs both under callgrind for instructions.
 */
#include "proto/api/uct_tm_proto.h"

#include <rdma/fabric.h>
#include <rdma/fi_cm.h>
#include <rdma/fi_domain.h>
#include <rdma/fi_endpoint.h>
#include <rdma/fi_errno.h>
#include <rdma/fi_tagged.h>

#include <benchmark/benchmark.h>

#include <cstdlib>
#include <cstring>
#include <stdexcept>
#include <string>
#include <vector>

namespace {

constexpr size_t   kSize = 8;
constexpr uint64_t kTag  = 0x1234;

std::string domain_name() {
    const char *env = getenv("BENCH_FABRIC_DOMAIN");
    return (env != nullptr) ? env : "tm_sm";
}

void check(bool ok, const char *what) {
    if (!ok) {
        throw std::runtime_error(what);
    }
}

/* Open MPI's mtl ofi asks for this: tagged messages, directed receives,
 * remote CQ data (the source rank), tagged CQ entries. */
struct FabricSide {
    fid_av *av = nullptr;
    fid_cq *cq = nullptr;
    fid_ep *ep = nullptr;

    void open(fid_domain *domain, fi_info *info) {
        fi_av_attr av_attr{};
        av_attr.type = FI_AV_TABLE;
        fi_cq_attr cq_attr{};
        cq_attr.format = FI_CQ_FORMAT_TAGGED;
        check(fi_av_open(domain, &av_attr, &av, nullptr) == 0, "fi_av_open");
        check(fi_cq_open(domain, &cq_attr, &cq, nullptr) == 0, "fi_cq_open");
        check(fi_endpoint(domain, info, &ep, nullptr) == 0, "fi_endpoint");
        check(fi_ep_bind(ep, &cq->fid, FI_TRANSMIT | FI_RECV) == 0, "fi_ep_bind cq");
        check(fi_ep_bind(ep, &av->fid, 0) == 0, "fi_ep_bind av");
        check(fi_enable(ep) == 0, "fi_enable");
    }
    std::vector<char> name() const {
        std::vector<char> buf(FI_NAME_MAX);
        size_t            len = buf.size();
        check(fi_getname(&ep->fid, buf.data(), &len) == 0, "fi_getname");
        buf.resize(len);
        return buf;
    }
    fi_addr_t insert(const std::vector<char> &name) {
        fi_addr_t addr = FI_ADDR_NOTAVAIL;
        check(fi_av_insert(av, name.data(), 1, &addr, 0, nullptr) == 1, "fi_av_insert");
        return addr;
    }
    void close() {
        fi_close(&ep->fid);
        fi_close(&cq->fid);
        fi_close(&av->fid);
    }
};

struct FabricPair {
    fi_info    *info   = nullptr;
    fid_fabric *fabric = nullptr;
    fid_domain *domain = nullptr;
    FabricSide  a, b;
    fi_addr_t   ab = 0, ba = 0; /* b in a's AV, a in b's */

    FabricPair() {
        fi_info *hints                    = fi_allocinfo();
        hints->caps                       = FI_TAGGED | FI_DIRECTED_RECV;
        hints->mode                       = FI_CONTEXT;
        hints->ep_attr->type              = FI_EP_RDM;
        hints->fabric_attr->prov_name     = strdup("tm");
        hints->domain_attr->name          = strdup(domain_name().c_str());
        hints->domain_attr->threading     = FI_THREAD_DOMAIN;
        hints->domain_attr->data_progress = FI_PROGRESS_MANUAL;
        hints->domain_attr->cq_data_size  = 4;
        const int ret = fi_getinfo(FI_VERSION(1, 5), nullptr, nullptr, 0, hints, &info);
        fi_freeinfo(hints);
        check(ret == 0, "fi_getinfo: no tm domain (FI_PROVIDER_PATH?)");
        check(fi_fabric(info->fabric_attr, &fabric, nullptr) == 0, "fi_fabric");
        check(fi_domain(fabric, info, &domain, nullptr) == 0, "fi_domain");
        a.open(domain, info);
        b.open(domain, info);
        ab = a.insert(b.name());
        ba = b.insert(a.name());
    }
    ~FabricPair() {
        a.close();
        b.close();
        fi_close(&domain->fid);
        fi_close(&fabric->fid);
        fi_freeinfo(info);
    }
};

void BM_FabricTaggedInject(benchmark::State &state) {
    FabricPair         p;
    char               msg[kSize] = {1, 2, 3, 4, 5, 6, 7, 8};
    char               buf[kSize];
    fi_context         ctx{};
    fi_cq_tagged_entry e{};
    for (auto _ : state) {
        if ((fi_trecv(p.b.ep, buf, kSize, nullptr, p.ba, kTag, 0, &ctx) != 0) ||
            (fi_tinjectdata(p.a.ep, msg, kSize, 7, p.ab, kTag) != 0)) {
            state.SkipWithError("post refused");
            break;
        }
        while (fi_cq_read(p.b.cq, &e, 1) != 1) {
        }
        fi_cq_read(p.a.cq, &e, 1); /* the sender progresses too (credits) */
    }
    benchmark::DoNotOptimize(buf);
}

/* An fi_cq_read that finds nothing: one turn of the loop an application
 * (Open MPI's progress, fabtests) spins in while it waits, so its cost
 * adds to the latency of whatever arrives during the turn. */
void BM_FabricEmptyRead(benchmark::State &state) {
    FabricPair         p;
    fi_cq_tagged_entry e{};
    for (auto _ : state) {
        if (fi_cq_read(p.b.cq, &e, 1) != -FI_EAGAIN) {
            state.SkipWithError("an entry where none was expected");
            break;
        }
    }
}

/* The layer's completion, as the provider's callback sees it. */
struct Done {
    bool                done = false;
    uct_tm_proto_info_t info{};
};

void on_done(void *arg, uct_tm_proto_request_t, const uct_tm_proto_info_t *info) {
    auto *d = static_cast<Done *>(arg);
    d->info = *info;
    d->done = true;
}

struct LayerPair {
    uct_tm_proto_worker_h wa = nullptr, wb = nullptr;
    uct_tm_proto_ep_h     ab = nullptr, ba = nullptr;

    LayerPair() {
        const std::string            tl = domain_name();
        uct_tm_proto_worker_params_t params{};
        params.field_mask = UCT_TM_PROTO_WORKER_FIELD_TRANSPORTS;
        params.transports = tl.c_str();
        check(uct_tm_proto_worker_create(&params, &wa) == UCS_OK, "worker a");
        check(uct_tm_proto_worker_create(&params, &wb) == UCS_OK, "worker b");
        ab = connect(wa, wb);
        ba = connect(wb, wa);
    }
    ~LayerPair() {
        uct_tm_proto_worker_destroy(wa);
        uct_tm_proto_worker_destroy(wb);
    }
    static uct_tm_proto_ep_h connect(uct_tm_proto_worker_h from, uct_tm_proto_worker_h to) {
        char              addr[512];
        size_t            len = sizeof(addr);
        uct_tm_proto_ep_h ep  = nullptr;
        check(uct_tm_proto_worker_address(to, addr, &len) == UCS_OK, "worker address");
        check(uct_tm_proto_ep_create(from, addr, len, &ep) == UCS_OK, "ep_create");
        return ep;
    }
};

/* The layer's loop with state.range(0) receives from the same peer (other
 * tags, never matched) held before each iteration's: MPI's deep queue of
 * receives from one rank, which an arrival must not walk. */
void BM_LayerTaggedInject(benchmark::State &state) {
    LayerPair                           p;
    char                                msg[kSize] = {1, 2, 3, 4, 5, 6, 7, 8};
    char                                buf[kSize];
    Done                                send_done, recv_done;
    std::vector<uct_tm_proto_request_t> held(static_cast<size_t>(state.range(0)));
    for (size_t i = 0; i < held.size(); ++i) {
        check(uct_tm_proto_recv(p.wb, buf, kSize, kTag + 1 + i, ~uint64_t{0}, p.ba, nullptr,
                                &held[i]) == UCS_INPROGRESS,
              "held receive");
    }
    for (auto _ : state) {
        uct_tm_proto_op_params_t rp{};
        rp.cb                       = on_done;
        rp.arg                      = &recv_done;
        uct_tm_proto_request_t rreq = 0;
        recv_done.done              = false;
        const ucs_status_t posted   = uct_tm_proto_recv(p.wb, buf, kSize, kTag, ~uint64_t{0}, p.ba,
                                                        &rp, &rreq);
        uct_tm_proto_op_params_t sp{};
        sp.flags                    = UCT_TM_PROTO_SEND_INJECT | UCT_TM_PROTO_SEND_REMOTE_DATA;
        sp.data                     = 7;
        sp.cb                       = on_done;
        sp.arg                      = &send_done;
        uct_tm_proto_request_t sreq = 0;
        const ucs_status_t     sent = uct_tm_proto_send(p.ab, msg, kSize, kTag, &sp, &sreq);
        if ((posted != UCS_INPROGRESS) || (sent != UCS_OK)) {
            state.SkipWithError("post refused or the send did not leave at once");
            break;
        }
        while (!recv_done.done) {
            uct_tm_proto_worker_progress(p.wb);
        }
        uct_tm_proto_request_release(p.wb, rreq);
        uct_tm_proto_worker_progress(p.wa); /* the sender progresses too (credits) */
    }
    for (uct_tm_proto_request_t r : held) {
        uct_tm_proto_request_cancel(p.wb, r);
        uct_tm_proto_request_release(p.wb, r);
    }
    benchmark::DoNotOptimize(buf);
}

}  // namespace

/* BENCH_FABRIC_ITERS=N: exactly N iterations per benchmark (callgrind runs
 * two lengths and subtracts). */
int main(int argc, char **argv) {
    const char *iters = getenv("BENCH_FABRIC_ITERS");
    struct Case {
        const char *name;
        void (*fn)(benchmark::State &);
    };
    for (const Case &c : {Case{"FabricTaggedInject", BM_FabricTaggedInject},
                          Case{"LayerTaggedInject", BM_LayerTaggedInject},
                          Case{"FabricEmptyRead", BM_FabricEmptyRead}}) {
        auto *b = benchmark::RegisterBenchmark(c.name, c.fn);
        if (c.fn == BM_LayerTaggedInject) {
            b->Arg(0)->Arg(
                1000); /* LayerTaggedInject/0: the loop the provider's is compared with */
        }
        if (iters != nullptr) {
            b->Iterations(std::strtoll(iters, nullptr, 10));
        }
    }
    benchmark::Initialize(&argc, argv);
    benchmark::RunSpecifiedBenchmarks();
    benchmark::Shutdown();
    return 0;
}
