/*
 * tm_mesh: N processes on one host, each sending tagged messages to every
 * other one over a UCT transport, and what that costs each process: queue
 * pairs, connection setups, memory. It is the scale comparison of tm_rc
 * (one QP per peer, wired endpoint to endpoint) with tm_dc (a pool of
 * QP_POOL_SIZE initiator RC QPs, connected on demand, evicted least recently used).
 *
 *   tm_mesh -x tm_dc -n 16 -m 20 -s 64
 *
 * The parent forks the N ranks and routes their addresses (tm_rc: each
 * rank's endpoint address for each peer; tm_dc: iface addresses) over
 * socketpairs. Each rank sends -m eager messages of -s bytes to every peer,
 * round-robin over the peers starting after itself (-b: all -m to one peer,
 * then the next: a working set of one peer at a time), and receives all of its
 * peers' as unexpected messages; every payload byte, every tag and that each
 * message arrives exactly once are checked. When every rank has received all
 * and flushed its endpoints, the parent counts each rank's queue pairs
 * (`rdma resource show qp`, if the tool is there) while they are all still
 * open, then lets them close; each rank's transport counters come from its
 * PRINT_STATS line. Output: one row per rank and a summary row of medians.
 * Exit status 0 if every message arrived once and intact, 1 if not, 2 on a
 * setup failure or timeout (-t seconds, default 300).
 */
#include "fd_io.h"
#include "transport_iface.h"

#include <uct/api/uct.h>

#include <algorithm>
#include <cctype>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fcntl.h>
#include <poll.h>
#include <string>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>
#include <vector>

namespace uct_tm {
namespace {

constexpr const char *kTool = "tm_mesh";

struct Options {
    std::string transport = "tm_dc";
    int         ranks     = 16;
    unsigned    messages  = 20;
    size_t      size      = 64;
    int         timeout   = 300;
    bool        burst     = false; /* all messages to one peer, then the next */
};

[[noreturn]] void die(const char *what, ucs_status_t status = UCS_ERR_IO_ERROR) {
    fprintf(stderr, "%s: %s: %s\n", kTool, what, ucs_status_string(status));
    exit(2);
}

/* Byte i of message `seq` from rank `src`. */
uint8_t payload_byte(unsigned src, unsigned seq, size_t i) {
    return static_cast<uint8_t>((src * 131u) ^ (seq * 31u) ^ (i * 7u) ^ (i >> 8));
}

/* Length-prefixed blobs over a socket. */
void send_blob(int fd, const std::string &blob) {
    const uint32_t n = static_cast<uint32_t>(blob.size());
    if (!fd_transfer(fd, const_cast<uint32_t *>(&n), sizeof(n), true) ||
        !fd_transfer(fd, const_cast<char *>(blob.data()), blob.size(), true)) {
        die("lost the parent");
    }
}
std::string recv_blob(int fd) {
    uint32_t n = 0;
    if (!fd_transfer(fd, &n, sizeof(n), false) || (n > (1u << 24))) {
        die("lost the parent");
    }
    std::string blob(n, '\0');
    if (!fd_transfer(fd, &blob[0], n, false)) {
        die("lost the parent");
    }
    return blob;
}

/* ---- one rank ---------------------------------------------------------------------------- */

struct Rank {
    const Options        *opt  = nullptr;
    int                   me   = 0;
    std::vector<uint8_t>  seen;    /* [src * messages + seq] */
    size_t                received = 0;
    unsigned              bad      = 0;
    unsigned              failed   = 0; /* error handler calls */

    static ucs_status_t eager_cb(void *arg, void *data, size_t length, unsigned flags,
                                 uct_tag_t stag, uint64_t, void **) {
        auto          *r   = static_cast<Rank *>(arg);
        const unsigned src = static_cast<unsigned>(stag >> 32);
        const unsigned seq = static_cast<unsigned>(stag & 0xffffffffu);
        const bool whole = (flags & UCT_CB_PARAM_FLAG_FIRST) && !(flags & UCT_CB_PARAM_FLAG_MORE);
        if (!whole || (src >= static_cast<unsigned>(r->opt->ranks)) ||
            (static_cast<int>(src) == r->me) || (seq >= r->opt->messages) ||
            (length != r->opt->size)) {
            ++r->bad;
            return UCS_OK;
        }
        uint8_t &once = r->seen[size_t(src) * r->opt->messages + seq];
        if (once++ != 0) {
            ++r->bad; /* a second copy */
            return UCS_OK;
        }
        const auto *p = static_cast<const uint8_t *>(data);
        for (size_t i = 0; i < length; ++i) {
            if (p[i] != payload_byte(src, seq, i)) {
                ++r->bad;
                break;
            }
        }
        ++r->received;
        return UCS_OK;
    }
    static ucs_status_t rndv_cb(void *arg, unsigned, uint64_t, const void *, unsigned, uint64_t,
                                size_t, const void *) {
        ++static_cast<Rank *>(arg)->bad; /* eager only */
        return UCS_OK;
    }
    static ucs_status_t err_cb(void *arg, uct_ep_h, ucs_status_t status) {
        fprintf(stderr, "%s: rank %d: a peer failed: %s\n", kTool, static_cast<Rank *>(arg)->me,
                ucs_status_string(status));
        ++static_cast<Rank *>(arg)->failed;
        return UCS_OK;
    }
};

long vm_kib(const char *field) {
    FILE *f = fopen("/proc/self/status", "r");
    long  v = -1;
    if (f == nullptr) {
        return v;
    }
    char   line[256];
    size_t n = strlen(field);
    while (fgets(line, sizeof(line), f) != nullptr) {
        if (strncmp(line, field, n) == 0) {
            v = strtol(line + n + 1, nullptr, 10);
        }
    }
    fclose(f);
    return v;
}

struct PackCtx {
    unsigned src, seq;
    size_t   size;
};
size_t pack(void *dest, void *arg) {
    const auto *c = static_cast<const PackCtx *>(arg);
    auto       *p = static_cast<uint8_t *>(dest);
    for (size_t i = 0; i < c->size; ++i) {
        p[i] = payload_byte(c->src, c->seq, i);
    }
    return c->size;
}

/* To the parent: how this rank connects, its device address, then its iface
 * address (tm_dc) or its endpoint address for each peer (tm_rc, creating the
 * endpoints in eps). */
void send_addresses(const Options &opt, int me, int fd, const TransportIface &t, bool to_iface,
                    std::vector<uct_ep_h> *eps) {
    std::string dev(t.attr.device_addr_len, '\0');
    if (uct_iface_get_device_address(t.iface, reinterpret_cast<uct_device_addr_t *>(&dev[0])) != UCS_OK) {
        die("uct_iface_get_device_address");
    }
    send_blob(fd, to_iface ? "iface" : "ep");
    send_blob(fd, dev);
    if (to_iface) {
        std::string ia(t.attr.iface_addr_len, '\0');
        if (uct_iface_get_address(t.iface, reinterpret_cast<uct_iface_addr_t *>(&ia[0])) != UCS_OK) {
            die("uct_iface_get_address");
        }
        send_blob(fd, ia);
        return;
    }
    for (int j = 0; j < opt.ranks; ++j) {
        std::string ea(t.attr.ep_addr_len, '\0');
        if (j != me) {
            uct_ep_params_t p = {};
            p.field_mask      = UCT_EP_PARAM_FIELD_IFACE;
            p.iface           = t.iface;
            ucs_status_t st   = uct_ep_create(&p, &(*eps)[j]);
            if (st != UCS_OK) {
                die("uct_ep_create", st);
            }
            st = uct_ep_get_address((*eps)[j], reinterpret_cast<uct_ep_addr_t *>(&ea[0]));
            if (st != UCS_OK) {
                die("uct_ep_get_address", st);
            }
        }
        send_blob(fd, ea);
    }
}

/* From the parent: for each peer, its device address and its iface address
 * or its endpoint address for this rank; connects eps to them. */
void connect_peers(const Options &opt, int me, int fd, const TransportIface &t, bool to_iface,
                   std::vector<uct_ep_h> *eps) {
    for (int j = 0; j < opt.ranks; ++j) {
        const std::string pdev  = recv_blob(fd);
        const std::string paddr = recv_blob(fd);
        if (j == me) {
            continue;
        }
        ucs_status_t st;
        if (to_iface) {
            uct_ep_params_t p = {};
            p.field_mask = UCT_EP_PARAM_FIELD_IFACE | UCT_EP_PARAM_FIELD_DEV_ADDR |
                           UCT_EP_PARAM_FIELD_IFACE_ADDR;
            p.iface      = t.iface;
            p.dev_addr   = reinterpret_cast<const uct_device_addr_t *>(pdev.data());
            p.iface_addr = reinterpret_cast<const uct_iface_addr_t *>(paddr.data());
            st           = uct_ep_create(&p, &(*eps)[j]);
        } else {
            st = uct_ep_connect_to_ep((*eps)[j],
                                      reinterpret_cast<const uct_device_addr_t *>(pdev.data()),
                                      reinterpret_cast<const uct_ep_addr_t *>(paddr.data()));
        }
        if (st != UCS_OK) {
            die("connecting to a peer", st);
        }
    }
}

int run_rank(const Options &opt, int me, int fd) {
    Rank r;
    r.opt = &opt;
    r.me  = me;
    r.seen.assign(size_t(opt.ranks) * opt.messages, 0);
    TransportCallbacks cb;
    cb.eager_cb    = Rank::eager_cb;
    cb.rndv_cb     = Rank::rndv_cb;
    cb.arg         = &r;
    cb.err_handler = Rank::err_cb;
    cb.err_arg     = &r;
    TransportIface t;
    open_transport(kTool, opt.transport, cb, &t);
    if (opt.size > t.attr.cap.tag.eager.max_bcopy) {
        fprintf(stderr, "%s: -s %zu exceeds %s's eager bcopy limit %zu\n", kTool, opt.size,
                opt.transport.c_str(), t.attr.cap.tag.eager.max_bcopy);
        exit(2);
    }
    const bool            to_iface = (t.attr.cap.flags & UCT_IFACE_FLAG_CONNECT_TO_IFACE) != 0;
    std::vector<uct_ep_h> eps(opt.ranks, nullptr);
    send_addresses(opt, me, fd, t, to_iface, &eps);
    connect_peers(opt, me, fd, t, to_iface, &eps);

    /* all to all: message seq to every peer, then seq + 1 */
    const auto   start    = std::chrono::steady_clock::now();
    const auto   deadline = start + std::chrono::seconds(opt.timeout);
    const size_t expect   = size_t(opt.ranks - 1) * opt.messages;
    auto         progress = [&] {
        uct_worker_progress(t.worker);
        if (std::chrono::steady_clock::now() > deadline) {
            fprintf(stderr, "%s: rank %d: timed out (%zu of %zu received)\n", kTool, me, r.received,
                    expect);
            exit(2);
        }
    };
    /* send i of (N - 1) * messages: to peer k, message seq */
    const unsigned peers = static_cast<unsigned>(opt.ranks - 1);
    for (unsigned i = 0; i < peers * opt.messages; ++i) {
        const unsigned k   = opt.burst ? (i / opt.messages) : (i % peers);
        const unsigned seq = opt.burst ? (i % opt.messages) : (i / peers);
        const int      j   = (me + 1 + static_cast<int>(k)) % opt.ranks;
        PackCtx        ctx = {static_cast<unsigned>(me), seq, opt.size};
        const uct_tag_t tag = (uct_tag_t(me) << 32) | seq;
        ssize_t         n;
        while ((n = uct_ep_tag_eager_bcopy(eps[j], tag, 0, pack, &ctx, 0)) == UCS_ERR_NO_RESOURCE) {
            progress();
        }
        if (n < 0) {
            fprintf(stderr, "%s: rank %d: send to %d: %s\n", kTool, me, j,
                    ucs_status_string(static_cast<ucs_status_t>(n)));
            exit(1);
        }
        uct_worker_progress(t.worker);
    }
    while (r.received < expect) {
        progress();
    }
    for (int j = 0; j < opt.ranks; ++j) {
        if (eps[j] != nullptr) {
            while (uct_ep_flush(eps[j], 0, nullptr) == UCS_ERR_NO_RESOURCE) {
                progress();
            }
        }
    }
    const double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    /* done: report, then keep serving peers (their connection handshakes,
     * acknowledgements) until the parent says every rank is done */
    char line[256];
    snprintf(line, sizeof(line), "%zu %u %u %.3f %ld %ld", r.received, r.bad, r.failed, secs,
             vm_kib("VmRSS:"), vm_kib("VmHWM:"));
    send_blob(fd, line);
    fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) | O_NONBLOCK);
    char go;
    while (read(fd, &go, 1) != 1) {
        uct_worker_progress(t.worker);
    }
    for (uct_ep_h ep : eps) {
        if (ep != nullptr) {
            uct_ep_destroy(ep);
        }
    }
    close_transport_iface(&t); /* PRINT_STATS: the transport's counters */
    close_transport_worker(&t);
    return ((r.bad == 0) && (r.failed == 0)) ? 0 : 1;
}

/* ---- the parent ---------------------------------------------------------------------------- */

/* The word after " key " in `text`, or empty. */
std::string word_after(const std::string &text, const std::string &key) {
    const std::string k  = " " + key + " ";
    const size_t      at = text.find(k);
    if (at == std::string::npos) {
        return {};
    }
    const size_t from = at + k.size();
    const size_t end  = text.find_first_of(" \n", from);
    return text.substr(from, (end == std::string::npos) ? std::string::npos : end - from);
}

/* RC/UD queue pairs of each pid, from `rdma resource show qp`; empty if unavailable. */
std::vector<std::pair<long, std::string>> rdma_qps() {
    std::vector<std::pair<long, std::string>> out;
    FILE *p = popen("rdma resource show qp 2>/dev/null", "r");
    if (p == nullptr) {
        return out;
    }
    char line[512];
    while (fgets(line, sizeof(line), p) != nullptr) {
        const std::string pid  = word_after(line, "pid");
        const std::string type = word_after(line, "type");
        if (!pid.empty() && !type.empty()) {
            out.emplace_back(strtol(pid.c_str(), nullptr, 10), type);
        }
    }
    pclose(p);
    return out;
}

/* Counter `name` of a PRINT_STATS line, or -1. */
long counter(const std::string &stats, const char *name) {
    const std::string v = word_after(stats, name);
    return (!v.empty() && isdigit(static_cast<unsigned char>(v[0]))) ? strtol(v.c_str(), nullptr, 10) : -1;
}

template <typename T> T median(std::vector<T> v) {
    std::sort(v.begin(), v.end());
    return v.empty() ? T() : v[v.size() / 2];
}

/* Forks the ranks, each with its stderr in dir/rank<i> and a socket to
 * the parent (fds); false if one could not be started. */
bool spawn_ranks(const Options &opt, const char *dir, std::vector<int> *fds,
                 std::vector<pid_t> *pids) {
    for (int i = 0; i < opt.ranks; ++i) {
        int sv[2];
        if (socketpair(AF_UNIX, SOCK_STREAM, 0, sv) != 0) {
            perror("tm_mesh: socketpair");
            return false;
        }
        fflush(stdout);
        (*pids)[i] = fork();
        if ((*pids)[i] < 0) {
            perror("tm_mesh: fork");
            return false;
        }
        if ((*pids)[i] == 0) {
            close(sv[0]);
            for (int k = 0; k < i; ++k) {
                close((*fds)[k]);
            }
            const std::string err = std::string(dir) + "/rank" + std::to_string(i);
            const int         efd = open(err.c_str(), O_CREAT | O_WRONLY | O_TRUNC, 0600);
            if (efd >= 0) {
                dup2(efd, STDERR_FILENO);
                close(efd);
            }
            _exit(run_rank(opt, i, sv[1]));
        }
        close(sv[1]);
        (*fds)[i] = sv[0];
    }
    return true;
}

/* Each rank's addresses to every other one. */
void route_addresses(const Options &opt, const std::vector<int> &fds) {
    /* addresses: dev[i], and addr[i][j] = what j needs to reach i */
    std::vector<std::string>              dev(opt.ranks);
    std::vector<std::vector<std::string>> addr(opt.ranks, std::vector<std::string>(opt.ranks));
    bool by_ep = false;
    for (int i = 0; i < opt.ranks; ++i) {
        by_ep  = recv_blob(fds[i]) == "ep"; /* the same transport everywhere */
        dev[i] = recv_blob(fds[i]);
    }
    for (int i = 0; i < opt.ranks; ++i) {
        if (by_ep) {
            for (int j = 0; j < opt.ranks; ++j) {
                addr[i][j] = recv_blob(fds[i]); /* i's endpoint for j */
            }
        } else {
            const std::string ia = recv_blob(fds[i]);
            for (int j = 0; j < opt.ranks; ++j) {
                addr[i][j] = ia;
            }
        }
    }
    for (int j = 0; j < opt.ranks; ++j) {
        for (int i = 0; i < opt.ranks; ++i) {
            send_blob(fds[j], dev[i]);
            send_blob(fds[j], addr[i][j]);
        }
    }
}

int run(const Options &opt) {
    std::string upper = opt.transport;
    for (char &c : upper) {
        c = static_cast<char>(toupper(static_cast<unsigned char>(c)));
    }
    setenv(("UCX_" + upper + "_PRINT_STATS").c_str(), "y", 1);
    char dir[] = "/tmp/tm_mesh_XXXXXX";
    if (mkdtemp(dir) == nullptr) {
        perror("tm_mesh: mkdtemp");
        return 2;
    }
    std::vector<int>   fds(opt.ranks);
    std::vector<pid_t> pids(opt.ranks);
    if (!spawn_ranks(opt, dir, &fds, &pids)) {
        return 2;
    }
    route_addresses(opt, fds);
    std::vector<std::string> done(opt.ranks);
    for (int i = 0; i < opt.ranks; ++i) {
        done[i] = recv_blob(fds[i]);
    }
    const auto qps = rdma_qps(); /* every rank still open */
    for (int i = 0; i < opt.ranks; ++i) {
        const char go = 1;
        fd_transfer(fds[i], const_cast<char *>(&go), 1, true);
    }
    int status = 0;
    for (int i = 0; i < opt.ranks; ++i) {
        int ws = 0;
        waitpid(pids[i], &ws, 0);
        const int code = WIFEXITED(ws) ? WEXITSTATUS(ws) : 2;
        status         = std::max(status, code);
    }
    printf("# tm_mesh -x %s: %d ranks, %u messages of %zu B from each rank to each other one (%s)\n",
           opt.transport.c_str(), opt.ranks, opt.messages, opt.size,
           opt.burst ? "all to one peer, then the next" : "one to each peer in turn");
    printf("%6s %9s %4s %8s %6s %8s %8s %9s %7s %9s %9s\n", "rank", "received", "bad", "rc_qps",
           "ud_qps", "connects", "accepts", "evictions", "max_qps", "rss_kib", "seconds");
    /* -1: not counted (no `rdma` tool; tm_rc has no connection counters) */
    std::vector<long>   v_rc, v_ud, v_conn, v_acc, v_evict, v_max, v_rss;
    std::vector<double> v_secs;
    for (int i = 0; i < opt.ranks; ++i) {
        size_t   received = 0;
        unsigned bad = 0, failed = 0;
        double   secs = 0;
        long     rss = 0, hwm = 0;
        sscanf(done[i].c_str(), "%zu %u %u %lf %ld %ld", &received, &bad, &failed, &secs, &rss, &hwm);
        std::string stats;
        if (FILE *f = fopen((std::string(dir) + "/rank" + std::to_string(i)).c_str(), "r")) {
            char buf[4096];
            size_t n;
            while ((n = fread(buf, 1, sizeof(buf), f)) > 0) {
                stats.append(buf, n);
            }
            fclose(f);
        }
        long rcq = 0, udq = 0;
        for (const auto &q : qps) {
            if (q.first == pids[i]) {
                (q.second == "UD" ? udq : rcq) += 1;
            }
        }
        if (qps.empty()) {
            rcq = udq = -1;
        }
        const long conn = counter(stats, "connects"), acc = counter(stats, "accepts"),
                   evict = counter(stats, "evictions"), maxq = counter(stats, "max_qps");
        printf("%6d %9zu %4u %8ld %6ld %8ld %8ld %9ld %7ld %9ld %9.3f\n", i, received, bad + failed,
               rcq, udq, conn, acc, evict, maxq, hwm, secs);
        if ((bad != 0) || (failed != 0)) {
            fprintf(stderr, "%s: rank %d:\n%s", kTool, i, stats.c_str());
        }
        v_rc.push_back(rcq);
        v_ud.push_back(udq);
        v_conn.push_back(conn);
        v_acc.push_back(acc);
        v_evict.push_back(evict);
        v_max.push_back(maxq);
        v_rss.push_back(hwm);
        v_secs.push_back(secs);
        unlink((std::string(dir) + "/rank" + std::to_string(i)).c_str());
    }
    printf("%6s %9s %4s %8ld %6ld %8ld %8ld %9ld %7ld %9ld %9.3f\n", "median", "", "", median(v_rc),
           median(v_ud), median(v_conn), median(v_acc), median(v_evict), median(v_max),
           median(v_rss), median(v_secs));
    rmdir(dir);
    return status;
}

void usage() {
    fprintf(stderr,
            "usage: %s [-x tm_rc|tm_dc] [-n ranks] [-m messages] [-s bytes] [-b] [-t seconds]\n"
            "  N processes, each sending -m eager messages of -s bytes to every other one\n"
            "  (one to each peer in turn; -b: all of them to one peer, then the next);\n"
            "  prints each process's queue pairs, connection setups and memory.\n",
            kTool);
}

}  // namespace
}  // namespace uct_tm

int main(int argc, char **argv) {
    uct_tm::Options opt;
    for (int c; (c = getopt(argc, argv, "x:n:m:s:t:bh")) != -1;) {
        switch (c) {
        case 'b': opt.burst = true; break;
        case 'x': opt.transport = optarg; break;
        case 'n': opt.ranks = atoi(optarg); break;
        case 'm': opt.messages = static_cast<unsigned>(atoi(optarg)); break;
        case 's': opt.size = static_cast<size_t>(atol(optarg)); break;
        case 't': opt.timeout = atoi(optarg); break;
        default: uct_tm::usage(); return 2;
        }
    }
    if ((opt.ranks < 2) || (opt.ranks > 1024) || (opt.messages == 0) || (opt.messages > 100000) ||
        (opt.size == 0) || (opt.timeout <= 0)) {
        uct_tm::usage();
        return 2;
    }
    return uct_tm::run(opt);
}
