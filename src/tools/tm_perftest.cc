/*
 * tm_perftest: two-process benchmark of UCT tagged messaging over any
 * tag-capable UCT transport (tm_sm by default).
 *
 *   tag_lat   ping-pong; one-way latency = round trip / 2
 *   tag_bw    streaming with a window of posted receives; message rate and
 *             bandwidth at the sender
 *
 * The process forks: the child is the receiver ("server"), the parent the
 * sender ("client"); addresses travel over a socketpair. Between two hosts,
 * `tm_perftest -p PORT` is the receiver and `tm_perftest [options] -p PORT HOST`
 * the sender: they meet over TCP and the receiver takes the sender's options. Each message size
 * picks the path a protocol layer would: eager short / bcopy / zcopy within
 * the iface's eager limits, tag_rndv_zcopy above. Receives are posted before
 * the message arrives (expected; tag_lat posts the next one right after each
 * send, one ahead, as an MPI ping-pong does -- --post-on-path posts it before
 * the send instead) unless --unexpected, where the receiver takes
 * every message through the iface's unexpected callbacks (and answers an
 * unexpected rendezvous with get_zcopy and an AM acknowledgement, as UCP does).
 * --depth N keeps N extra non-matching receives posted all along, spread over
 * --mask-classes mask patterns, to measure matching against deep queues.
 *
 * Output: one table row per size, and CSV with --csv FILE.
 *
 * A peer that dies or stops makes the other process exit with status 2 and a
 * "peer lost" line (peer_watch.h): the iface error handler, the control
 * socket closing, or --timeout seconds without the awaited event.
 */
#include "peer_watch.h"
#include "size_list.h"
#include "tcp_link.h"
#include "transport_iface.h"

#include <uct/api/uct.h>
#include <ucs/async/async_fwd.h>

#include <algorithm>
#include <atomic>
#include <new>
#include <cerrno>
#include <chrono>
#include <cinttypes>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <getopt.h>
#include <sched.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <signal.h>
#include <string>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>
#include <vector>

namespace {

/* ---- options ------------------------------------------------------------------ */

struct Options {
    std::string         test      = "tag_lat";
    std::string         transport = "tm_sm";
    std::vector<size_t> sizes     = {8};
    size_t              iters     = 0; /* 0: chosen per size */
    size_t              warmup    = 0;
    size_t              window    = 127; /* ucx_perftest's UCT flow-control window */
    size_t              depth     = 0;
    unsigned            mask_classes = 1;
    bool                unexpected   = false;
    bool                md_memory    = false;
    bool                check        = false;
    bool                no_ptrace    = false;
    bool                post_on_path = false; /* tag_lat: post each receive just before it is due */
    std::string         csv;
    int                 cpu_client = -1, cpu_server = -1;
    bool                header     = true;
    double              timeout    = 60; /* longest wait for one event of the peer */
    double              keepalive  = 1;  /* check the endpoint every this long in a wait */
    uint16_t            port       = 0;  /* two hosts: meet over TCP on this port */
    std::string         host;            /* two hosts: the receiver's host (we send) */
};

void usage() {
    printf("usage: tm_perftest [options]                  both processes on this host\n"
           "       tm_perftest -p PORT                      receiver, on one host\n"
           "       tm_perftest [options] -p PORT HOST       sender, on another host\n"
           "  -t, --test tag_lat|tag_bw|line_lat\n"
           "                              benchmark (default tag_lat); line_lat: no transport,\n"
           "                              a flag line passed back and forth (the floor), above\n"
           "                              8 B after two plain copies through shared memory\n"
           "  -x, --transport NAME        UCT transport (default tm_sm)\n"
           "  -s, --sizes LIST            message sizes, e.g. 8,1k,64k,1m (default 8)\n"
           "  -n, --iters N               measured iterations per size (default: by size)\n"
           "  -w, --window N              tag_bw: messages in flight, receives posted ahead\n"
           "                              (default 127, ucx_perftest's UCT window; at most\n"
           "                              the transport's posted-receive limit)\n"
           "  -D, --depth N               extra non-matching receives kept posted\n"
           "      --mask-classes K        spread them over K mask patterns (default 1: exact)\n"
           "  -U, --unexpected            receiver posts nothing: unexpected callbacks\n"
           "      --md-memory             buffers from the MD (shared memory) instead of malloc\n"
           "      --check                 tag_lat: fill and verify every payload byte (slow)\n"
           "      --post-on-path          tag_lat: post each receive right before the send it\n"
           "                              answers (its cost on the one-way path) instead of\n"
           "                              right after the send, one receive ahead\n"
           "      --no-ptrace             make both processes non-dumpable: the kernel then denies\n"
           "                              CMA and /proc/<pid>/fd between them (tm_sm needs\n"
           "                              UCX_TM_SM_NAMED_SEGMENTS=y and copies through staging)\n"
           "  -c, --cpus C,S              pin client (sender) and server to CPUs\n"
           "      --csv FILE              append results as CSV\n"
           "      --no-header             no table/CSV header\n"
           "      --timeout SEC           give up when the peer does not answer for SEC s (default 60)\n"
           "      --keepalive SEC         in a wait, check the endpoint to the peer (uct_ep_check)\n"
           "                              every SEC s, as UCP's keepalive does (default 1, 0: off)\n"
           "  -p, --port PORT             two hosts: the receiver listens on PORT, the sender\n"
           "                              connects to HOST:PORT; the receiver runs the sender's\n"
           "                              options\n");
}

bool parse(int argc, char **argv, Options *o) {
    enum { kMaskClasses = 256, kCsv, kNoHeader, kMdMemory, kCheck, kNoPtrace, kTimeout, kKeepalive,
           kPostOnPath };
    static const struct option longopts[] = {
        {"test", required_argument, nullptr, 't'},      {"transport", required_argument, nullptr, 'x'},
        {"sizes", required_argument, nullptr, 's'},     {"iters", required_argument, nullptr, 'n'},
        {"window", required_argument, nullptr, 'w'},    {"depth", required_argument, nullptr, 'D'},
        {"mask-classes", required_argument, nullptr, kMaskClasses},
        {"unexpected", no_argument, nullptr, 'U'},      {"md-memory", no_argument, nullptr, kMdMemory},
        {"check", no_argument, nullptr, kCheck},
        {"no-ptrace", no_argument, nullptr, kNoPtrace},
        {"post-on-path", no_argument, nullptr, kPostOnPath},
        {"cpus", required_argument, nullptr, 'c'},      {"csv", required_argument, nullptr, kCsv},
        {"no-header", no_argument, nullptr, kNoHeader}, {"help", no_argument, nullptr, 'h'},
        {"timeout", required_argument, nullptr, kTimeout},
        {"port", required_argument, nullptr, 'p'},
        {"keepalive", required_argument, nullptr, kKeepalive},
        {nullptr, 0, nullptr, 0}};
    int c;
    optind = 0; /* parsed twice in the receiver of two hosts: start over */
    while ((c = getopt_long(argc, argv, "t:x:s:n:w:D:Uc:hp:", longopts, nullptr)) != -1) {
        switch (c) {
        case 't': o->test = optarg; break;
        case 'x': o->transport = optarg; break;
        case 's':
            if (!uct_tm::parse_sizes_option("tm_perftest", optarg, &o->sizes)) {
                return false;
            }
            break;
        case 'n': o->iters = strtoull(optarg, nullptr, 0); break;
        case 'w': o->window = std::max<size_t>(1, strtoull(optarg, nullptr, 0)); break;
        case 'D': o->depth = strtoull(optarg, nullptr, 0); break;
        case kMaskClasses: o->mask_classes = std::max(1u, unsigned(strtoul(optarg, nullptr, 0))); break;
        case 'U': o->unexpected = true; break;
        case kMdMemory: o->md_memory = true; break;
        case kCheck: o->check = true; break;
        case kNoPtrace: o->no_ptrace = true; break;
        case kPostOnPath: o->post_on_path = true; break;
        case 'c':
            if (sscanf(optarg, "%d,%d", &o->cpu_client, &o->cpu_server) != 2) {
                return false;
            }
            break;
        case kCsv: o->csv = optarg; break;
        case kNoHeader: o->header = false; break;
        case kTimeout:
            o->timeout = strtod(optarg, nullptr);
            if (!(o->timeout > 0)) return false;
            break;
        case 'p':
            if (!uct_tm::parse_tcp_port(optarg, &o->port)) return false;
            break;
        case kKeepalive:
            o->keepalive = strtod(optarg, nullptr);
            if (!(o->keepalive >= 0)) return false;
            break;
        default: return false;
        }
    }
    if (optind < argc) {
        if ((o->port == 0) || (optind + 1 != argc)) return false;
        o->host = argv[optind];
    }
    return ((o->test == "tag_lat") || (o->test == "tag_bw") || (o->test == "line_lat")) &&
           !o->sizes.empty();
}

/* This process's end of the peer: set once by run(). */
uct_tm::PeerLink g_link;

[[noreturn]] void die(const char *what, ucs_status_t status) {
    if ((status == UCS_ERR_CONNECTION_RESET) || (status == UCS_ERR_ENDPOINT_TIMEOUT)) {
        char why[160];
        snprintf(why, sizeof(why), "%s returned %s", what, ucs_status_string(status));
        g_link.lost(why, nullptr);
    }
    fprintf(stderr, "tm_perftest: %s: %s\n", what, ucs_status_string(status));
    uct_tm::exit_mid_run(2);
}

#define CHECK(expr)                                           \
    do {                                                      \
        ucs_status_t _s = (expr);                             \
        if (_s != UCS_OK) {                                   \
            die(#expr, _s);                                   \
        }                                                     \
    } while (0)

/* ---- control channel ------------------------------------------------------------ */

/* (SIGPIPE is ignored: writing to a closed channel fails with EPIPE) */
void send_all(int fd, const void *buf, size_t len) {
    const char *p = static_cast<const char *>(buf);
    while (len > 0) {
        ssize_t n = write(fd, p, len);
        if (n <= 0) {
            if (errno == EINTR) continue;
            if (errno == EPIPE) g_link.lost("its process is gone (control channel closed)", "the control channel");
            perror("tm_perftest: control channel write");
            exit(2);
        }
        p += n;
        len -= static_cast<size_t>(n);
    }
}

void recv_all(int fd, void *buf, size_t len) {
    char *p = static_cast<char *>(buf);
    while (len > 0) {
        if (!uct_tm::wait_readable(fd, g_link.timeout_s)) {
            char why[96];
            snprintf(why, sizeof(why), "no answer for %.0f s (peer stopped or hung?)", g_link.timeout_s);
            g_link.lost(why, "the control channel");
        }
        ssize_t n = read(fd, p, len);
        if (n <= 0) {
            if ((n < 0) && (errno == EINTR)) continue;
            g_link.lost("its process is gone (control channel closed)", "the control channel");
        }
        p += n;
        len -= static_cast<size_t>(n);
    }
}

void send_blob(int fd, const std::vector<char> &blob) {
    const uint64_t n = blob.size();
    send_all(fd, &n, sizeof(n));
    send_all(fd, blob.data(), blob.size());
}

std::vector<char> recv_blob(int fd) {
    uint64_t n;
    recv_all(fd, &n, sizeof(n));
    std::vector<char> blob(n);
    recv_all(fd, blob.data(), n);
    return blob;
}

void barrier(int fd) {
    char c = 0;
    send_all(fd, &c, 1);
    recv_all(fd, &c, 1);
}

/* The median of per-batch latencies, or `fallback` when there are none. */
double median_or(std::vector<double> batches, double fallback) {
    if (batches.empty()) return fallback;
    std::sort(batches.begin(), batches.end());
    return batches[batches.size() / 2];
}

double now_sec() {
    return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

/* ---- the UCT side ----------------------------------------------------------------- */

constexpr uct_tag_t kDataTag    = 0x5aa5000000000001ull;
constexpr uct_tag_t kReplyTag   = 0x5aa5000000000002ull;
constexpr uint8_t   kAmCredit   = 1; /* tag_bw: the receiver returns credits */
constexpr uint8_t   kAmRndvDone = 2; /* unexpected rndv fetched: the sender may release */

struct Peer;

struct Recv {
    uct_tag_context_t ctx;
    bool              done   = false;
    ucs_status_t      status = UCS_OK;
};

/* One in-flight send that completes asynchronously (zcopy, rendezvous). */
struct SendOp {
    uct_completion_t comp;
    Peer            *peer;
};

/* The transport opened (transport_iface.h), and the benchmark's state. */
struct Peer : uct_tm::TransportIface {
    const Options       *opt    = nullptr;
    bool                 server = false;
    uct_ep_h             ep     = nullptr;

    /* send buffer, and the receive area: window slots 64 bytes apart (posted
     * buffers must differ, and overlapping them keeps the working set of one
     * message, like a protocol reusing one user buffer) */
    struct Buffer {
        char                  *ptr  = nullptr;
        size_t                 len  = 0;
        uct_mem_h              memh = UCT_MEM_HANDLE_NULL;
        uct_allocated_memory_t alloc{};
        bool                   from_md = false;
    } sbuf, rbuf;

    size_t unexpected_done = 0; /* messages received through the unexpected callbacks */
    size_t credits         = 0; /* tag_bw: sends the receiver allows */
    size_t sends_started   = 0; /* asynchronous sends issued */
    size_t sends_done      = 0; /* ... and completed */
    std::vector<SendOp> ops;    /* ring of completions, one per outstanding send */
    std::vector<void *> rndv_pending; /* --unexpected: rndv ops awaiting the receiver's ack */

    std::vector<Recv> deep;     /* --depth: receives that never match */
    std::vector<char> deep_buf;
};

void progress(Peer &p) { uct_worker_progress(p.worker); }

/* The transport reports a failed peer here (tm_sm: its process died or closed
 * its iface); the wait loops see it in g_link and exit. */
extern "C" ucs_status_t ep_failed(void *, uct_ep_h, ucs_status_t status) {
    g_link.failure = status;
    return UCS_OK;
}

extern "C" void recv_consumed(uct_tag_context_t *) {}

extern "C" void recv_completed(uct_tag_context_t *ctx, uct_tag_t, uint64_t, size_t, void *,
                               ucs_status_t status) {
    Recv *r   = reinterpret_cast<Recv *>(ctx);
    r->done   = true;
    r->status = status;
}

extern "C" void recv_rndv(uct_tag_context_t *ctx, uct_tag_t, const void *, unsigned,
                          ucs_status_t status, unsigned) {
    /* tm_perftest never sends software rendezvous requests. */
    Recv *r   = reinterpret_cast<Recv *>(ctx);
    r->done   = true;
    r->status = (status == UCS_OK) ? UCS_ERR_UNSUPPORTED : status;
}

extern "C" void send_completed(uct_completion_t *comp) {
    SendOp *op = reinterpret_cast<SendOp *>(comp);
    if (comp->status != UCS_OK) die("send completion", comp->status);
    ++op->peer->sends_done;
}

/* Unexpected eager: count whole messages (the last fragment has no MORE). */
extern "C" ucs_status_t unexp_eager(void *arg, void *data, size_t length, unsigned flags,
                                    uct_tag_t, uint64_t, void **context) {
    Peer  *p      = static_cast<Peer *>(arg);
    size_t offset = (flags & UCT_CB_PARAM_FLAG_FIRST) ? 0 : reinterpret_cast<uintptr_t>(*context);
    /* Copy out, as a receiver matching it later would. */
    if (offset < p->rbuf.len) {
        memcpy(p->rbuf.ptr + offset, data, std::min(length, p->rbuf.len - offset));
    }
    *context = reinterpret_cast<void *>(offset + length);
    if (!(flags & UCT_CB_PARAM_FLAG_MORE)) {
        ++p->unexpected_done;
    }
    return UCS_OK;
}

/* An unexpected rendezvous fetched with get_zcopy, possibly asynchronously. */
struct Fetch {
    uct_completion_t  comp;
    Peer             *peer;
    uct_rkey_bundle_t rkey;
};

void fetched(Fetch *f) {
    Peer *p = f->peer;
    uct_rkey_release(p->component, &f->rkey);
    ucs_status_t status;
    uct_tm::WaitBound bound(g_link, "room to acknowledge a rendezvous");
    while ((status = uct_ep_am_short(p->ep, kAmRndvDone, 0, nullptr, 0)) == UCS_ERR_NO_RESOURCE) {
        progress(*p);
        bound.tick();
    }
    CHECK(status);
    ++p->unexpected_done;
    delete f;
}

extern "C" void fetch_completed(uct_completion_t *comp) {
    if (comp->status != UCS_OK) die("get_zcopy completion", comp->status);
    fetched(reinterpret_cast<Fetch *>(comp));
}

/* Unexpected rendezvous: fetch with get_zcopy, then tell the sender. */
extern "C" ucs_status_t unexp_rndv(void *arg, unsigned, uint64_t, const void *, unsigned,
                                   uint64_t remote_addr, size_t length, const void *rkey_buf) {
    Peer *p = static_cast<Peer *>(arg);
    if (rkey_buf == nullptr) {
        return UCS_OK;
    }
    Fetch *f       = new Fetch;
    f->comp.func   = fetch_completed;
    f->comp.count  = 1;
    f->comp.status = UCS_OK;
    f->peer        = p;
    CHECK(uct_rkey_unpack(p->component, rkey_buf, &f->rkey));
    uct_iov_t    iov = {p->rbuf.ptr, std::min(length, p->rbuf.len), p->rbuf.memh, 0, 1};
    ucs_status_t      status;
    uct_tm::WaitBound bound(g_link, "room to fetch a rendezvous");
    while ((status = uct_ep_get_zcopy(p->ep, &iov, 1, remote_addr, f->rkey.rkey, &f->comp)) ==
           UCS_ERR_NO_RESOURCE) {
        progress(*p);
        bound.tick();
    }
    if (status == UCS_OK) {
        fetched(f);
    } else if (status != UCS_INPROGRESS) {
        die("get_zcopy", status);
    }
    return UCS_OK;
}

extern "C" ucs_status_t am_credit(void *arg, void *data, size_t, unsigned) {
    Peer    *p = static_cast<Peer *>(arg);
    uint64_t n;
    memcpy(&n, data, sizeof(n));
    p->credits += n;
    return UCS_OK;
}

extern "C" ucs_status_t am_rndv_done(void *arg, void *, size_t, unsigned) {
    Peer *p = static_cast<Peer *>(arg);
    if (p->rndv_pending.empty()) {
        die("rendezvous acknowledgement without a pending send", UCS_ERR_INVALID_PARAM);
    }
    /* The receiver fetched the data itself: withdraw the transport's op. */
    CHECK(uct_ep_tag_rndv_cancel(p->ep, p->rndv_pending.front()));
    p->rndv_pending.erase(p->rndv_pending.begin());
    ++p->sends_done;
    return UCS_OK;
}

/* Opens `transport` (its MD and iface), connects to the peer over the
 * control channel. */
void open_peer(Peer &p, int fd) {
    uct_tm::TransportCallbacks cb;
    cb.eager_cb    = unexp_eager;
    cb.rndv_cb     = unexp_rndv;
    cb.arg         = &p;
    cb.err_handler = ep_failed;
    uct_tm::open_transport("tm_perftest", p.opt->transport, cb, &p);
    const uint64_t need = UCT_IFACE_FLAG_TAG_EAGER_SHORT | UCT_IFACE_FLAG_TAG_EAGER_BCOPY |
                          UCT_IFACE_FLAG_TAG_EAGER_ZCOPY | UCT_IFACE_FLAG_TAG_RNDV_ZCOPY;
    if ((p.attr.cap.flags & need) != need) {
        fprintf(stderr, "tm_perftest: %s has no tag offload\n", p.opt->transport.c_str());
        exit(2);
    }
    CHECK(uct_iface_set_am_handler(p.iface, kAmCredit, am_credit, &p, 0));
    CHECK(uct_iface_set_am_handler(p.iface, kAmRndvDone, am_rndv_done, &p, 0));

    std::vector<char> dev(p.attr.device_addr_len), ifa(p.attr.iface_addr_len);
    CHECK(uct_iface_get_device_address(p.iface, reinterpret_cast<uct_device_addr_t *>(dev.data())));
    CHECK(uct_iface_get_address(p.iface, reinterpret_cast<uct_iface_addr_t *>(ifa.data())));
    send_blob(fd, dev);
    send_blob(fd, ifa);
    std::vector<char> rdev = recv_blob(fd), rifa = recv_blob(fd);
    if (!uct_iface_is_reachable(p.iface, reinterpret_cast<uct_device_addr_t *>(rdev.data()),
                                reinterpret_cast<uct_iface_addr_t *>(rifa.data()))) {
        fprintf(stderr, "tm_perftest: peer not reachable over %s\n", p.opt->transport.c_str());
        exit(2);
    }
    uct_ep_params_t ep_params = {};
    ep_params.field_mask = UCT_EP_PARAM_FIELD_IFACE;
    ep_params.iface      = p.iface;
    if (p.attr.cap.flags & UCT_IFACE_FLAG_CONNECT_TO_IFACE) {
        ep_params.field_mask |= UCT_EP_PARAM_FIELD_DEV_ADDR | UCT_EP_PARAM_FIELD_IFACE_ADDR;
        ep_params.dev_addr   = reinterpret_cast<uct_device_addr_t *>(rdev.data());
        ep_params.iface_addr = reinterpret_cast<uct_iface_addr_t *>(rifa.data());
        CHECK(uct_ep_create(&ep_params, &p.ep));
    } else {
        /* CONNECT_TO_EP (tm_rc): the two endpoints are bound to each other. */
        CHECK(uct_ep_create(&ep_params, &p.ep));
        std::vector<char> epa(p.attr.ep_addr_len);
        CHECK(uct_ep_get_address(p.ep, reinterpret_cast<uct_ep_addr_t *>(epa.data())));
        send_blob(fd, epa);
        std::vector<char> repa = recv_blob(fd);
        CHECK(uct_ep_connect_to_ep(p.ep, reinterpret_cast<uct_device_addr_t *>(rdev.data()),
                                   reinterpret_cast<uct_ep_addr_t *>(repa.data())));
    }
    p.ops.resize(std::max<size_t>(p.opt->window, 1) + 1);
    barrier(fd);
}

void close_peer(Peer &p) {
    g_link.ep = nullptr;
    uct_ep_destroy(p.ep);
    uct_tm::close_transport_iface(&p);
    uct_tm::close_transport_worker(&p);
}

void alloc_buffer(Peer &p, Peer::Buffer &b, size_t len, int fill) {
    len = std::max<size_t>(len, 64);
    if (p.opt->md_memory && (p.md_attr.cap.flags & UCT_MD_FLAG_ALLOC)) {
        uct_alloc_method_t     method = UCT_ALLOC_METHOD_MD;
        uct_mem_alloc_params_t params = {};
        params.field_mask = UCT_MEM_ALLOC_PARAM_FIELD_FLAGS | UCT_MEM_ALLOC_PARAM_FIELD_MDS |
                            UCT_MEM_ALLOC_PARAM_FIELD_MEM_TYPE | UCT_MEM_ALLOC_PARAM_FIELD_NAME;
        params.flags     = UCT_MD_MEM_ACCESS_ALL;
        params.mds.mds   = &p.md;
        params.mds.count = 1;
        params.mem_type  = UCS_MEMORY_TYPE_HOST;
        params.name      = "tm_perftest";
        CHECK(uct_mem_alloc(len, &method, 1, &params, &b.alloc));
        b.ptr     = static_cast<char *>(b.alloc.address);
        b.memh    = b.alloc.memh;
        b.from_md = true;
    } else {
        void *ptr;
        if (posix_memalign(&ptr, 4096, len) != 0) die("posix_memalign", UCS_ERR_NO_MEMORY);
        b.ptr = static_cast<char *>(ptr);
        if (p.md_attr.cap.flags & UCT_MD_FLAG_REG) {
            CHECK(uct_md_mem_reg(p.md, b.ptr, len, UCT_MD_MEM_ACCESS_ALL, &b.memh));
        }
    }
    b.len = len;
    memset(b.ptr, fill, len);
}

void free_buffer(Peer &p, Peer::Buffer &b) {
    if (b.from_md) {
        uct_mem_free(&b.alloc);
    } else {
        if (b.memh != UCT_MEM_HANDLE_NULL) uct_md_mem_dereg(p.md, b.memh);
        free(b.ptr);
    }
    b = Peer::Buffer{};
}

/* --depth: receives that never match the data tags, round-robin over masks
 * that all keep the data tags' distinguishing high bits. */
void post_deep(Peer &p) {
    static const uct_tag_t masks[] = {~0ull,
                                      0xffffffff00000000ull,
                                      0xffff0000ffffffffull,
                                      0xffffffffffff0000ull,
                                      0xff00ffffffffffffull,
                                      0xffffff00ffffffffull,
                                      0xfffffffffffff000ull,
                                      0xf0ffffffffffffffull};
    const size_t   n = p.opt->depth;
    const unsigned k = std::min<unsigned>(p.opt->mask_classes, sizeof(masks) / sizeof(masks[0]));
    p.deep.assign(n, Recv{});
    p.deep_buf.resize(n * 8 + 8);
    for (size_t i = 0; i < n; ++i) {
        Recv &r              = p.deep[i];
        r.ctx.tag_consumed_cb = recv_consumed;
        r.ctx.completed_cb    = recv_completed;
        r.ctx.rndv_cb         = recv_rndv;
        const uct_tag_t tag   = 0x1000000000000000ull | (uint64_t{i} << 16) | (i & 0xffff);
        uct_iov_t       iov   = {&p.deep_buf[i * 8], 8, UCT_MEM_HANDLE_NULL, 0, 1};
        CHECK(uct_iface_tag_recv_zcopy(p.iface, tag, masks[i % k], &iov, 1, &r.ctx));
    }
}

void cancel_deep(Peer &p) {
    for (Recv &r : p.deep) {
        CHECK(uct_iface_tag_recv_cancel(p.iface, &r.ctx, 1));
    }
    p.deep.clear();
}

void post_recv(Peer &p, Recv &r, uct_tag_t tag, size_t len, size_t slot) {
    r.done                = false;
    r.ctx.tag_consumed_cb = recv_consumed;
    r.ctx.completed_cb    = recv_completed;
    r.ctx.rndv_cb         = recv_rndv;
    uct_iov_t    iov = {p.rbuf.ptr + slot * 64, len, p.rbuf.memh, 0, 1};
    ucs_status_t s;
    uct_tm::wait_until(
            g_link, "room to post a receive",
            [&] {
                s = uct_iface_tag_recv_zcopy(p.iface, tag, ~0ull, &iov, 1, &r.ctx);
                return s != UCS_ERR_NO_RESOURCE;
            },
            [&] { progress(p); });
    CHECK(s);
}

void wait_recv(Peer &p, Recv &r) {
    uct_tm::wait_until(g_link, "a message", [&] { return r.done; }, [&] { progress(p); });
    if (r.status != UCS_OK) die("receive", r.status);
}

SendOp *next_op(Peer &p) {
    SendOp *op      = &p.ops[p.sends_started % p.ops.size()];
    op->comp.func   = send_completed;
    op->comp.count  = 1;
    op->comp.status = UCS_OK;
    op->peer        = &p;
    return op;
}

/* Sends one tagged message of `len` bytes by the path a protocol would pick:
 * eager short, bcopy, zcopy, or rendezvous. Asynchronous completions are
 * counted in sends_done. */
void send_msg(Peer &p, uct_tag_t tag, size_t len) {
    const auto  &cap = p.attr.cap.tag;
    uct_iov_t    iov = {p.sbuf.ptr, len, p.sbuf.memh, 0, 1};
    /* one try by the path a protocol would pick */
    const auto try_send = [&]() -> ucs_status_t {
        ucs_status_t s;
        if (len <= cap.eager.max_short) {
            s = uct_ep_tag_eager_short(p.ep, tag, p.sbuf.ptr, len);
        } else if (len <= cap.eager.max_bcopy) {
            struct Arg {
                const char *src;
                size_t      len;
            } arg = {p.sbuf.ptr, len};
            const ssize_t n = uct_ep_tag_eager_bcopy(
                p.ep, tag, 0,
                [](void *dest, void *a) -> size_t {
                    const Arg *x = static_cast<const Arg *>(a);
                    memcpy(dest, x->src, x->len);
                    return x->len;
                },
                &arg, 0);
            s = (n >= 0) ? UCS_OK : static_cast<ucs_status_t>(n);
        } else if (len <= cap.eager.max_zcopy) {
            SendOp *op = next_op(p);
            s = uct_ep_tag_eager_zcopy(p.ep, tag, 0, &iov, 1, 0, &op->comp);
            if (s == UCS_INPROGRESS) {
                ++p.sends_started;
                s = UCS_OK;
            }
        } else {
            SendOp          *op  = next_op(p);
            const uint64_t   hdr = len;
            ucs_status_ptr_t h   = uct_ep_tag_rndv_zcopy(p.ep, tag, &hdr, sizeof(hdr), &iov, 1, 0,
                                                         &op->comp);
            if (!UCS_PTR_IS_ERR(h)) {
                ++p.sends_started;
                if (p.opt->unexpected) p.rndv_pending.push_back(h);
                s = UCS_OK;
            } else {
                s = UCS_PTR_STATUS(h);
            }
        }
        return s;
    };
    ucs_status_t s;
    uct_tm::wait_until(
            g_link, "room to send", [&] { return (s = try_send()) != UCS_ERR_NO_RESOURCE; },
            [&] { progress(p); });
    CHECK(s);
    /* Bound the sends in flight by the completion ring. */
    uct_tm::wait_until(
            g_link, "a send to complete",
            [&] { return p.sends_started - p.sends_done < p.ops.size() - 1; },
            [&] { progress(p); });
}

void wait_sends(Peer &p) {
    uct_tm::WaitBound bound(g_link, "the sends to complete");
    while (p.sends_done < p.sends_started) {
        progress(p);
        bound.tick();
    }
}

/* ---- benchmarks ---------------------------------------------------------------------- */

struct Result {
    double lat_us_median = 0, lat_us_avg = 0, msg_rate = 0, bw_mbs = 0;
    size_t iters = 0;
};

size_t default_iters(const Options &o, size_t size) {
    if (o.iters) return o.iters;
    const size_t base  = (o.test == "tag_lat") ? 100000 : 1000000;
    const size_t bytes = size_t{4} << 30; /* about 4 GiB moved per size */
    return std::max<size_t>(500, std::min<size_t>(base, bytes / std::max<size_t>(size, 1)));
}

void wait_unexpected(Peer &p, size_t count) {
    uct_tm::WaitBound bound(g_link, "an unexpected message");
    while (p.unexpected_done < count) {
        progress(p);
        bound.tick();
    }
}

/* --check: every message carries a pattern derived from its number. */
void fill_pattern(char *buf, size_t len, uint64_t seq) {
    for (size_t i = 0; i < len; ++i) {
        buf[i] = static_cast<char>((seq * 131 + i * 7 + (i >> 12)) & 0xff);
    }
}

void verify_pattern(const char *buf, size_t len, uint64_t seq, const char *who) {
    for (size_t i = 0; i < len; ++i) {
        if (buf[i] != static_cast<char>((seq * 131 + i * 7 + (i >> 12)) & 0xff)) {
            fprintf(stderr, "tm_perftest: %s: message %" PRIu64 " of %zu bytes differs at byte %zu\n",
                    who, seq, len, i);
            uct_tm::exit_mid_run(3);
        }
    }
}

/* tag_lat's receives. By default each side keeps the receive for the next
 * message posted before it sends (so no message can come unexpected) and
 * posts the one after right after its send, while the message travels: the
 * order of an MPI ping-pong (send, then post the next receive) and of
 * ucx_perftest's, which keeps the post off the one-way path. Two receives
 * alternate between two buffer slots. --post-on-path posts each receive
 * right before the send it answers, one at a time. */
class LatRecvs {
  public:
    LatRecvs(Peer &p, uct_tag_t tag, size_t size, size_t total)
        : p_(p), tag_(tag), size_(size), total_(total),
          ahead_(!p.opt->unexpected && !p.opt->post_on_path) {}

    /* Before the first message: what must be posted before anything is sent. */
    void start() {
        if (p_.opt->unexpected) return;
        post(0);
        if (ahead_ && (total_ > 1)) post(1);
    }
    /* Message `i` arrived (an unexpected one through the callbacks). */
    void wait(size_t i, size_t *got) {
        if (p_.opt->unexpected) {
            wait_unexpected(p_, ++*got);
        } else {
            wait_recv(p_, r_[slot(i)]);
        }
    }
    /* Where message `i` landed. */
    const char *data(size_t i) const { return p_.rbuf.ptr + slot(i) * 64; }
    /* Message `i` was taken; this side sends next. --post-on-path: the
     * receive for message i + 1 now, before the send. */
    void before_send(size_t i) {
        if (!ahead_ && !p_.opt->unexpected && (i + 1 < total_)) post(i + 1);
    }
    /* After that send, while it travels: the receive for message i + 2
     * (the one for i + 1 is posted already). */
    void after_send(size_t i) {
        if (ahead_ && (i + 2 < total_)) post(i + 2);
    }

  private:
    /* the receive (and 64-byte buffer slot) of message `i` */
    size_t slot(size_t i) const { return ahead_ ? i % 2 : 0; }
    void   post(size_t i) { post_recv(p_, r_[slot(i)], tag_, size_, slot(i)); }

    Peer     &p_;
    uct_tag_t tag_;
    size_t    size_, total_;
    bool      ahead_;
    Recv      r_[2];
};

Result run_lat(Peer &p, size_t size, int fd) {
    const size_t iters  = default_iters(*p.opt, size);
    const size_t warmup = p.opt->warmup ? p.opt->warmup : std::max<size_t>(iters / 10, 10);
    const size_t total  = warmup + iters;
    const size_t batch  = std::max<size_t>(1, std::min<size_t>(100, iters / 50));
    LatRecvs     recvs(p, p.server ? kDataTag : kReplyTag, size, total);
    std::vector<double> batches;
    double       start = 0, t0 = 0;
    size_t       got   = 0;
    p.unexpected_done  = 0;
    barrier(fd);
    recvs.start();
    /* message i goes to the server (pattern 2i), reply i comes back (2i + 1) */
    const bool server = p.server;
    if (!server) {
        if (p.opt->check) fill_pattern(p.sbuf.ptr, size, 0);
        send_msg(p, kDataTag, size);
    }
    for (size_t i = 0; i < total; ++i) {
        if (!server && (i == warmup)) start = t0 = now_sec();
        recvs.wait(i, &got);
        if (p.opt->check) {
            verify_pattern(recvs.data(i), size, 2 * i + (server ? 0 : 1),
                           server ? "receiver" : "sender");
        }
        if (server || (i + 1 < total)) { /* reply i, or message i + 1 */
            if (p.opt->check) fill_pattern(p.sbuf.ptr, size, server ? 2 * i + 1 : 2 * (i + 1));
            recvs.before_send(i);
            send_msg(p, server ? kReplyTag : kDataTag, size);
            recvs.after_send(i);
        }
        if (!server && (i >= warmup) && ((i - warmup + 1) % batch == 0)) {
            const double t = now_sec();
            batches.push_back((t - t0) / batch / 2 * 1e6);
            t0 = t;
        }
    }
    const double end = now_sec();
    wait_sends(p);
    Result res;
    res.iters = iters;
    if (!p.server) {
        res.lat_us_avg = (end - start) / iters / 2 * 1e6;
        res.lat_us_median = median_or(batches, res.lat_us_avg);
        res.msg_rate      = 1e6 / (2 * res.lat_us_avg);
        res.bw_mbs        = size * res.msg_rate / 1e6;
    }
    barrier(fd);
    return res;
}

Result run_bw(Peer &p, size_t size, int fd) {
    const size_t iters  = default_iters(*p.opt, size);
    const bool   unexp  = p.opt->unexpected;
    const size_t limit  = p.attr.cap.tag.recv.max_outstanding;
    const size_t window = std::min({p.opt->window, iters, (unexp || (limit == 0)) ? SIZE_MAX : limit});
    Result       res;
    res.iters = iters;
    barrier(fd);
    auto return_credits = [&](size_t n) {
        ucs_status_t      s;
        uct_tm::WaitBound bound(g_link, "room to return credits");
        while ((s = uct_ep_am_short(p.ep, kAmCredit, n, nullptr, 0)) == UCS_ERR_NO_RESOURCE) {
            progress(p);
            bound.tick();
        }
        CHECK(s);
    };
    if (p.server) {
        /* Keep `window` receives posted; hand back credits every half window. */
        std::vector<Recv> recvs(window);
        size_t            posted = 0, done = 0, unreturned = 0;
        if (!unexp) {
            for (; posted < window; ++posted) post_recv(p, recvs[posted], kDataTag, size, posted);
        }
        return_credits(window);
        while (done < iters) {
            if (unexp) {
                uct_tm::WaitBound bound(g_link, "an unexpected message");
                while (p.unexpected_done == done) {
                    progress(p);
                    bound.tick();
                }
                unreturned += p.unexpected_done - done;
                done = p.unexpected_done;
            } else {
                Recv &r = recvs[done % window];
                wait_recv(p, r);
                ++done;
                ++unreturned;
                if (posted < iters) {
                    post_recv(p, recvs[posted % window], kDataTag, size, posted % window);
                    ++posted;
                }
            }
            if ((unreturned > 0) && ((unreturned >= (window + 1) / 2) || (done == iters))) {
                return_credits(unreturned);
                unreturned = 0;
            }
        }
        p.unexpected_done = 0;
    } else {
        const auto wait_credits = [&](size_t n) {
            uct_tm::wait_until(g_link, "credits from the receiver", [&] { return p.credits >= n; },
                               [&] { progress(p); });
        };
        wait_credits(1);
        const double start = now_sec();
        for (size_t sent = 0; sent < iters; ++sent) {
            wait_credits(1);
            send_msg(p, kDataTag, size);
            --p.credits;
        }
        /* Done when the receiver has consumed everything: all credits back. */
        wait_credits(window);
        wait_sends(p);
        const double total = now_sec() - start;
        res.msg_rate       = iters / total;
        res.bw_mbs         = size * res.msg_rate / 1e6;
        res.lat_us_avg = res.lat_us_median = total / iters * 1e6;
    }
    p.credits = 0;
    barrier(fd);
    return res;
}

void pin(int cpu) {
    if (cpu < 0) return;
    cpu_set_t set;
    CPU_ZERO(&set);
    CPU_SET(cpu, &set);
    if (sched_setaffinity(0, sizeof(set), &set) != 0) perror("tm_perftest: sched_setaffinity");
}

int run(const Options &opt, bool server, int fd) {
    Peer p;
    p.opt    = &opt;
    p.server = server;
    g_link.tool      = "tm_perftest";
    g_link.role      = server ? "receiver" : "sender";
    g_link.fd        = fd;
    g_link.timeout_s = opt.timeout;
    pin(server ? opt.cpu_server : opt.cpu_client);
    if (opt.no_ptrace && (prctl(PR_SET_DUMPABLE, 0) != 0)) {
        perror("tm_perftest: prctl(PR_SET_DUMPABLE)");
        return 2;
    }
    open_peer(p, fd);
    g_link.ep          = p.ep;
    g_link.keepalive_s = opt.keepalive;
    if (server) post_deep(p);
    FILE *csv = nullptr;
    if (!server && !opt.csv.empty()) {
        csv = fopen(opt.csv.c_str(), "a");
        if (csv == nullptr) {
            perror("tm_perftest: --csv");
            return 2;
        }
        if (opt.header && (ftell(csv) == 0)) {
            fprintf(csv, "test,transport,mode,depth,mask_classes,size,iters,lat_us_median,"
                         "lat_us_avg,msg_rate,bw_MBps\n");
        }
    }
    if (!server && opt.header) {
        const char *mode = opt.unexpected         ? "unexpected"
                           : (opt.test != "tag_lat") ? "posted"
                           : opt.post_on_path        ? "posted (on the path)"
                                                     : "posted (one ahead)";
        printf("# tm_perftest %s over %s, %s receives, depth %zu (%u mask classes)\n",
               opt.test.c_str(), opt.transport.c_str(), mode, opt.depth, opt.mask_classes);
        printf("%10s %10s %14s %12s %14s %12s\n", "size", "iters",
               opt.test == "tag_lat" ? "lat_us(med)" : "us/msg", "lat_us(avg)", "msg/s", "MB/s");
        fflush(stdout); /* "connected": scripts watching the output wait for it */
    }
    for (size_t size : opt.sizes) {
        alloc_buffer(p, p.sbuf, size, server ? 0x5b : 0xa5);
        alloc_buffer(p, p.rbuf, size + 64 * (opt.window + 1), 0);
        const Result r = (opt.test == "tag_lat") ? run_lat(p, size, fd) : run_bw(p, size, fd);
        if (!server) {
            printf("%10zu %10zu %14.3f %12.3f %14.0f %12.1f\n", size, r.iters, r.lat_us_median,
                   r.lat_us_avg, r.msg_rate, r.bw_mbs);
            fflush(stdout);
            if (csv != nullptr) {
                fprintf(csv, "%s,%s,%s,%zu,%u,%zu,%zu,%.4f,%.4f,%.0f,%.1f\n", opt.test.c_str(),
                        opt.transport.c_str(), opt.unexpected ? "unexpected" : "expected",
                        opt.depth, opt.mask_classes, size, r.iters, r.lat_us_median, r.lat_us_avg,
                        r.msg_rate, r.bw_mbs);
            }
        }
        free_buffer(p, p.sbuf);
        free_buffer(p, p.rbuf);
    }
    if (csv != nullptr) fclose(csv);
    if (server) cancel_deep(p);
    barrier(fd);
    close_peer(p);
    return 0;
}

}  // namespace

/* -t line_lat: the floor under every shared-memory ping-pong (docs/perf.md,
 * "Where the 8 B time goes"). Each process stores into its own cache line
 * and spins on the other's, as a FIFO's sender writes and its reader only
 * reads: at 8 B a one-way trip is one store, its line's transfer and a load;
 * no transport, no FIFO, no tag. Above 8 B the sender first copies the whole
 * message into a shared buffer of its own and the receiver copies it out
 * after the flag: two plain copies through shared memory, one after the
 * other -- a reference for how the host moves copied data between the two
 * cores, not a floor (a transport that overlaps the copies beats it).
 * Printed as tag_lat prints. */
int run_line_lat(const Options &opt) {
    size_t max_size = 0;
    for (size_t size : opt.sizes) max_size = std::max(max_size, size);
    const size_t area = (max_size + 4095) / 4096 * 4096;
    const size_t len  = 4096 + 2 * area; /* flags, then one buffer per direction */
    void *mem = mmap(nullptr, len, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
    if (mem == MAP_FAILED) {
        perror("tm_perftest: mmap");
        return 2;
    }
    char *base = static_cast<char *>(mem);
    /* 256 bytes apart: not even a neighbouring line is shared */
    auto *ping = new (base) std::atomic<uint64_t>(0);
    auto *pong = new (base + 256) std::atomic<uint64_t>(0);
    char *to_server = base + 4096, *to_client = base + 4096 + area;
    std::vector<char> src(std::max<size_t>(max_size, 1), 0x5a), dst(std::max<size_t>(max_size, 1));
    fflush(stdout);
    const pid_t parent = getpid();
    const pid_t child  = fork();
    if (child < 0) {
        perror("tm_perftest: fork");
        return 2;
    }
    const bool  server = (child == 0);
    const pid_t peer   = server ? parent : child;
    pin(server ? opt.cpu_server : opt.cpu_client);
    /* The other process is gone: the parent reaps a dead child (kill(pid, 0)
     * would still find it as a zombie); the child sees itself reparented. */
    const auto peer_gone = [&] {
        int status;
        return server ? (getppid() != parent) : (waitpid(child, &status, WNOHANG) == child);
    };
    /* Waits for `value`; a peer that is gone ends the run (checked every 2^20 spins). */
    auto wait_for = [&](const std::atomic<uint64_t> *line, uint64_t value) {
        for (uint64_t spins = 1; line->load(std::memory_order_acquire) != value; ++spins) {
            if (((spins & ((1u << 20) - 1)) == 0) && peer_gone()) {
                fprintf(stderr, "tm_perftest: line_lat: peer %d is gone\n", static_cast<int>(peer));
                _exit(2);
            }
        }
    };
    if (!server && opt.header) {
        printf("# tm_perftest line_lat: a flag line between two processes, above 8 B after the "
               "message is copied into shared memory, and out after it (no transport)\n");
        printf("%10s %10s %14s %12s %14s %12s\n", "size", "iters", "lat_us(med)", "lat_us(avg)",
               "msg/s", "MB/s");
    }
    uint64_t seq = 0; /* continues across sizes: the flags never go back */
    for (size_t size : opt.sizes) {
        const size_t iters  = default_iters(opt, size);
        const size_t warmup = opt.warmup ? opt.warmup : std::max<size_t>(iters / 10, 10);
        const size_t total  = warmup + iters;
        const size_t batch  = std::max<size_t>(1, std::min<size_t>(100, iters / 50));
        const bool   copy   = (size > 8);
        std::vector<double> batches;
        double              start = 0, t0 = 0;
        for (size_t i = 0; i < total; ++i) {
            ++seq;
            if (server) {
                wait_for(ping, seq);
                if (copy) {
                    memcpy(dst.data(), to_server, size);
                    memcpy(to_client, src.data(), size);
                }
                pong->store(seq, std::memory_order_release);
                continue;
            }
            if (i == warmup) start = t0 = now_sec();
            if (copy) memcpy(to_server, src.data(), size);
            ping->store(seq, std::memory_order_release);
            wait_for(pong, seq);
            if (copy) memcpy(dst.data(), to_client, size);
            if ((i >= warmup) && ((i - warmup + 1) % batch == 0)) {
                const double t = now_sec();
                batches.push_back((t - t0) / batch / 2 * 1e6);
                t0 = t;
            }
        }
        if (server) continue;
        const double avg = (now_sec() - start) / iters / 2 * 1e6;
        const double med = median_or(batches, avg);
        printf("%10zu %10zu %14.3f %12.3f %14.0f %12.1f\n", size, iters, med, avg, 1e6 / (2 * avg),
               static_cast<double>(size) / (2 * avg));
        fflush(stdout);
    }
    if (server) _exit(0);
    int status;
    waitpid(child, &status, 0);
    munmap(mem, len);
    if (!WIFEXITED(status) || (WEXITSTATUS(status) != 0)) {
        fprintf(stderr, "tm_perftest: line_lat: the other process failed (status 0x%x)\n", status);
        return 2;
    }
    return 0;
}

/* One side of a run between two hosts (-p). */
int run_two_hosts(const Options &opt, int argc, char **argv) {
    const bool               sender = !opt.host.empty();
    std::vector<std::string> args;
    const int fd = uct_tm::tcp_link_meet("tm_perftest", sender ? opt.host.c_str() : nullptr,
                                         opt.port, opt.timeout, argc, argv, &args);
    if (fd < 0) {
        return 2;
    }
    if (sender) {
        return run(opt, false, fd);
    }
    std::vector<char *> peer_argv = uct_tm::argv_of(args);
    Options             peer;
    if (!parse(static_cast<int>(args.size()), peer_argv.data(), &peer)) {
        fprintf(stderr, "tm_perftest: the sender's options do not parse\n");
        return 2;
    }
    return run(peer, true, fd);
}

int main(int argc, char **argv) {
    Options opt;
    if (!parse(argc, argv, &opt)) {
        usage();
        return 1;
    }
    signal(SIGPIPE, SIG_IGN); /* a dead peer's channel: EPIPE, reported as such */
    if (opt.test == "line_lat") {
        if (opt.port != 0) {
            fprintf(stderr, "tm_perftest: line_lat runs on one host only\n");
            return 1;
        }
        return run_line_lat(opt);
    }
    if (opt.port != 0) {
        return run_two_hosts(opt, argc, argv);
    }
    int fds[2];
    if (socketpair(AF_UNIX, SOCK_STREAM, 0, fds) != 0) {
        perror("tm_perftest: socketpair");
        return 2;
    }
    fflush(stdout);
    const pid_t child = fork();
    if (child < 0) {
        perror("tm_perftest: fork");
        return 2;
    }
    if (child == 0) {
        close(fds[0]);
        _exit(run(opt, true, fds[1]));
    }
    close(fds[1]);
    const int rc = run(opt, false, fds[0]);
    int       status;
    waitpid(child, &status, 0);
    if (!WIFEXITED(status) || (WEXITSTATUS(status) != 0)) {
        fprintf(stderr, "tm_perftest: receiver process failed (status 0x%x)\n", status);
        return 2;
    }
    return rc;
}
