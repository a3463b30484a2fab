/*
 * tm_proto_perf: two-process benchmark of the protocol layer
 * (libuct_tm_proto) over any transport it opens (tm_sm by default).
 *
 *   tag_lat   ping-pong with receives posted ahead; one-way latency = round trip / 2
 *             (median over batches of up to 100 round trips, as tm_perftest
 *             reports, and the average over all)
 *   tag_bw    the sender streams windows of messages to receives posted ahead
 *             (buffers 64 bytes apart in one area, as tm_perftest and ucx_perftest
 *             use), the receiver answers each window with a zero-byte message;
 *             bandwidth and message rate at the sender
 *   -U        untagged messages (fi_msg: UCT_TM_PROTO_OP_UNTAGGED): both tests,
 *             one receive posted per message as tagged
 *   -M BYTES  tag_bw with untagged messages into multi-receive buffers
 *             (UCT_TM_PROTO_RECV_MULTI, FI_MULTI_RECV): the receiver keeps two
 *             buffers of BYTES posted, each taking message after message and
 *             posted again when the layer releases it; min_multi_recv is the
 *             largest size, so no message is cut. Against -U: one multi-receive
 *             per many messages instead of one receive per message.
 *   -V N      every message sent and received as a vector of N elements
 *             (uct_tm_proto_sendv / uct_tm_proto_recvv) of near-equal length,
 *             each 64 bytes past the previous one's end in the buffer that
 *             would hold the message whole (not with -M); -V N:send or
 *             -V N:recv vectors on that side only, one buffer on the other
 *
 * The process forks: the child receives ("server"), the parent sends
 * ("client"); worker addresses travel over a socketpair. Between two hosts,
 * `tm_proto_perf -p PORT` receives and `tm_proto_perf [options] -p PORT HOST`
 * sends: they meet over TCP and the receiver takes the sender's options. --check verifies
 * every payload byte. Output: one row per size.
 *
 * A peer that dies or stops makes the other process exit with status 2 and a
 * "peer lost" line (peer_watch.h): a request failing with the peer, the
 * control socket closing, or -T seconds without the awaited event.
 */
#include "api/uct_tm_proto.h"
#include "fd_io.h"
#include "peer_watch.h"
#include "size_list.h"
#include "tcp_link.h"

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <getopt.h>
#include <memory>
#include <sched.h>
#include <signal.h>
#include <string>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>
#include <vector>

namespace {

struct Options {
    std::string         test       = "tag_lat";
    std::string         transports = "tm_sm";
    std::vector<size_t> sizes      = {8};
    size_t              iters      = 0; /* 0: chosen per size */
    size_t              window     = 32;
    bool                check      = false;
    bool                stats      = false; /* -v: each side's protocol counters at the end */
    bool                user       = false; /* -u: requests in our memory, not handles */
    bool                more       = false; /* -m: tag_bw sends all but a window's last with MORE */
    bool                untagged   = false; /* -U: untagged sends and receives (fi_send / fi_recv) */
    size_t              multi      = 0;     /* -M: tag_bw receives into multi-receives of this size */
    size_t              iovcnt     = 0;     /* -V: messages as vectors of this many elements (0: no) */
    size_t              send_iov   = 0;     /* -V N[:send]: the sends' elements (0: one buffer) */
    size_t              recv_iov   = 0;     /* -V N[:recv]: the receives' elements */
    int                 cpu_client = -1, cpu_server = -1;
    double              timeout    = 60; /* -T: longest wait for one event of the peer */
    uint16_t            port       = 0;  /* -p: two hosts, meet over TCP on this port */
    std::string         host;            /* two hosts: the receiver's host (we send) */
};

void usage() {
    fprintf(stderr,
            "usage: tm_proto_perf [-t tag_lat|tag_bw] [-x transports] [-s size,size,...] [-n iters]\n"
            "                     [-w window] [-c client_cpu,server_cpu] [--check] [-v] [-u] [-m]\n"
            "                     [-U] [-M bytes] [-V N[:send|:recv]] [-T|--timeout seconds]\n"
            "                     [-p port [host]]\n"
            "  -u  build requests in this program's memory (UCT_TM_PROTO_OP_USER_REQUEST)\n"
            "  -m  tag_bw: every send but a window's last says more follow (UCT_TM_PROTO_SEND_MORE)\n"
            "  -U  untagged messages (UCT_TM_PROTO_OP_UNTAGGED), one receive posted per message\n"
            "  -M  tag_bw, untagged: the receiver takes the messages into multi-receive buffers of\n"
            "      this many bytes (UCT_TM_PROTO_RECV_MULTI; at least the largest size), two posted,\n"
            "      each posted again once released\n"
            "  -V  N[:send|:recv]: send and receive every message as a vector of N elements\n"
            "      (uct_tm_proto_sendv / uct_tm_proto_recvv), 1 to %d, of near-equal length and\n"
            "      64 bytes apart in the buffer; :send or :recv: that side only; not with -M\n"
            "  -T  give up when the peer does not answer for that long (default 60)\n"
            "  -p  two hosts: without host, receive on this TCP port (the sender's options\n"
            "      apply); with host, send to the receiver listening there\n",
            UCT_TM_PROTO_IOV_MAX);
    exit(2);
}

Options parse(int argc, char **argv) {
    Options              o;
    static const option  longs[] = {{"check", no_argument, nullptr, 'C'},
                                     {"timeout", required_argument, nullptr, 'T'},
                                     {"port", required_argument, nullptr, 'p'},
                                     {nullptr, 0, nullptr, 0}};
    int                  c;
    optind = 0; /* parsed twice in the receiver of two hosts: start over */
    while ((c = getopt_long(argc, argv, "t:x:s:n:w:c:T:p:M:V:vumUh", longs, nullptr)) != -1) {
        switch (c) {
        case 't': o.test = optarg; break;
        case 'x': o.transports = optarg; break;
        case 's':
            if (!uct_tm::parse_sizes_option("tm_proto_perf", optarg, &o.sizes)) {
                usage();
            }
            break;
        case 'n': o.iters = strtoull(optarg, nullptr, 10); break;
        case 'w': o.window = strtoull(optarg, nullptr, 10); break;
        case 'c': if (sscanf(optarg, "%d,%d", &o.cpu_client, &o.cpu_server) != 2) usage(); break;
        case 'C': o.check = true; break;
        case 'v': o.stats = true; break;
        case 'u': o.user = true; break;
        case 'm': o.more = true; break;
        case 'U': o.untagged = true; break;
        case 'M': {
            std::string why;
            if (!uct_tm::parse_size(optarg, &o.multi, &why) || (o.multi == 0)) {
                fprintf(stderr, "tm_proto_perf: -M %s: %s\n", optarg,
                        why.empty() ? "must be more than 0" : why.c_str());
                usage();
            }
            o.untagged = true;
            break;
        }
        case 'V': {
            char *end = nullptr;
            o.iovcnt  = strtoull(optarg, &end, 10);
            const std::string side = (end != nullptr) ? end : "";
            if ((end == optarg) || ((side != "") && (side != ":send") && (side != ":recv")) ||
                (o.iovcnt == 0) || (o.iovcnt > UCT_TM_PROTO_IOV_MAX)) {
                fprintf(stderr, "tm_proto_perf: -V %s: from 1 to %d elements, then :send, "
                        ":recv or nothing (both)\n", optarg, UCT_TM_PROTO_IOV_MAX);
                usage();
            }
            o.send_iov = (side != ":recv") ? o.iovcnt : 0;
            o.recv_iov = (side != ":send") ? o.iovcnt : 0;
            break;
        }
        case 'T':
            o.timeout = strtod(optarg, nullptr);
            if (!(o.timeout > 0)) usage();
            break;
        case 'p':
            if (!uct_tm::parse_tcp_port(optarg, &o.port)) usage();
            break;
        default: usage();
        }
    }
    if (optind < argc) {
        if ((o.port == 0) || (optind + 1 != argc)) usage();
        o.host = argv[optind];
    }
    if (((o.test != "tag_lat") && (o.test != "tag_bw")) || o.sizes.empty() || (o.window == 0) ||
        (o.more && o.user)) {
        usage();
    }
    if ((o.multi != 0) &&
        ((o.test != "tag_bw") || (*std::max_element(o.sizes.begin(), o.sizes.end()) > o.multi))) {
        usage(); /* a multi-receive buffer holds at least one message of every size */
    }
    if ((o.multi != 0) && (o.iovcnt != 0)) {
        usage(); /* a multi-receive is one buffer */
    }
    return o;
}

/* This process's end of the peer: set once by main(). */
uct_tm::PeerLink g_link;

void die(const char *what, ucs_status_t status) {
    if ((status == UCS_ERR_CONNECTION_RESET) || (status == UCS_ERR_ENDPOINT_TIMEOUT)) {
        char why[160];
        snprintf(why, sizeof(why), "%s returned %s", what, ucs_status_string(status));
        g_link.lost(why, nullptr);
    }
    fprintf(stderr, "tm_proto_perf: %s: %s\n", what, ucs_status_string(status));
    uct_tm::exit_mid_run(1);
}

/* The layer's error handler: the peer failed (found by the transport, or by
 * the layer's keepalive when nothing was in flight to it). */
void on_peer_failed(void *, uct_tm_proto_ep_h, ucs_status_t status) {
    g_link.failure = status;
}

/* Control channel transfer; the peer's death or silence ends the process.
 * (SIGPIPE is ignored: writing to a closed channel fails with EPIPE.) */
void xfer(int fd, void *p, size_t n, bool out) {
    if (!out && !uct_tm::wait_readable(fd, g_link.timeout_s)) {
        char why[96];
        snprintf(why, sizeof(why), "no answer for %.0f s (peer stopped or hung?)", g_link.timeout_s);
        g_link.lost(why, "the control channel");
    }
    if (!uct_tm::fd_transfer(fd, p, n, out)) {
        g_link.lost("its process is gone (control channel closed)", "the control channel");
    }
}

struct Side {
    uct_tm_proto_worker_h worker = nullptr;
    uct_tm_proto_ep_h     ep     = nullptr;
};

/* Sends `mine` (length first) and returns what the peer sent likewise. */
std::vector<char> swap_blobs(int fd, const std::vector<char> &mine, const char *what) {
    uint64_t peer_len = 0, my_len = mine.size();
    xfer(fd, &my_len, 8, true);
    xfer(fd, const_cast<char *>(mine.data()), mine.size(), true);
    xfer(fd, &peer_len, 8, false);
    if (peer_len > (1u << 20)) {
        die(what, UCS_ERR_IO_ERROR);
    }
    std::vector<char> peer(peer_len);
    xfer(fd, peer.data(), peer_len, false);
    return peer;
}

/* Creates the worker and connects it to the peer over the socketpair:
 * worker addresses, then endpoint addresses (every transport; over a
 * connect-to-iface one connecting only checks the address). */
Side connect_side(const Options &o, int fd) {
    Side                         s;
    uct_tm_proto_worker_params_t wp = {};
    wp.field_mask  = UCT_TM_PROTO_WORKER_FIELD_TRANSPORTS | UCT_TM_PROTO_WORKER_FIELD_ERR_HANDLER;
    wp.transports  = o.transports.c_str();
    wp.err_handler = on_peer_failed; /* also while waiting for a receive */
    if (o.multi != 0) {
        /* FI_OPT_MIN_MULTI_RECV = the largest message: a buffer is released
         * before a message could be cut */
        wp.field_mask |= UCT_TM_PROTO_WORKER_FIELD_MIN_MULTI_RECV;
        wp.min_multi_recv = std::max<size_t>(1, *std::max_element(o.sizes.begin(), o.sizes.end()));
    }
    ucs_status_t st = uct_tm_proto_worker_create(&wp, &s.worker);
    if (st != UCS_OK) {
        die(("worker_create over " + o.transports).c_str(), st);
    }
    size_t len = 0;
    uct_tm_proto_worker_address(s.worker, nullptr, &len);
    std::vector<char> mine(len);
    if (uct_tm_proto_worker_address(s.worker, mine.data(), &len) != UCS_OK) {
        die("worker_address", UCS_ERR_IO_ERROR);
    }
    std::vector<char> peer = swap_blobs(fd, mine, "address exchange");
    st = uct_tm_proto_ep_create(s.worker, peer.data(), peer.size(), &s.ep);
    if ((st != UCS_OK) && (st != UCS_INPROGRESS)) {
        die("ep_create", st);
    }
    len = 0;
    uct_tm_proto_ep_address(s.ep, nullptr, &len);
    mine.resize(len);
    if (uct_tm_proto_ep_address(s.ep, mine.data(), &len) != UCS_OK) {
        die("ep_address", UCS_ERR_IO_ERROR);
    }
    peer = swap_blobs(fd, mine, "endpoint address exchange");
    st   = uct_tm_proto_ep_connect(s.ep, peer.data(), peer.size());
    if (st != UCS_OK) {
        die("ep_connect", st);
    }
    /* both endpoints are connected before anyone sends */
    char b = 0;
    xfer(fd, &b, 1, true);
    xfer(fd, &b, 1, false);
    return s;
}

/* -u: request memory and the params naming it, set up once (the params are
 * the same for every operation that uses this memory). */
struct UserRequest {
    alignas(UCT_TM_PROTO_REQUEST_ALIGN) unsigned char bytes[UCT_TM_PROTO_REQUEST_SIZE];
    uct_tm_proto_op_params_t params = {};

    UserRequest() {
        params.flags   = UCT_TM_PROTO_OP_USER_REQUEST;
        params.request = bytes;
    }
    UserRequest(const UserRequest &)            = delete; /* params point into this one */
    UserRequest &operator=(const UserRequest &) = delete;
};

/* An operation in progress: a handle, or (-u) a request in our memory. */
struct Pending {
    uct_tm_proto_request_t req  = 0;
    UserRequest           *user = nullptr;
};

void wait_req(const Side &s, const Pending &p) {
    ucs_status_t st;
    uct_tm::wait_until(
            g_link, "a request to complete",
            [&] {
                st = (p.user != nullptr) ? uct_tm_proto_request_user_test(p.user->bytes, nullptr)
                                         : uct_tm_proto_request_test(s.worker, p.req, nullptr);
                return st != UCS_INPROGRESS;
            },
            [&] { uct_tm_proto_worker_progress(s.worker); });
    if (st != UCS_OK) {
        die("request", st);
    }
    if (p.user == nullptr) { /* a request in our memory has no handle to release */
        uct_tm_proto_request_release(s.worker, p.req);
    }
}

/* -U: every send and receive untagged (set once by main()). */
bool g_untagged = false;

/* Params for an operation in `user` (null: a handle; no params unless -U).
 * With -U the user requests' params carry the flag too (run_size()). */
const uct_tm_proto_op_params_t *params_for(const UserRequest *user) {
    static const uct_tm_proto_op_params_t untagged = [] {
        uct_tm_proto_op_params_t q = {};
        q.flags                    = UCT_TM_PROTO_OP_UNTAGGED;
        return q;
    }();
    return (user != nullptr) ? &user->params : g_untagged ? &untagged : nullptr;
}

/* One message's data: `len` bytes at `buf`, or (-V, iov not null) the
 * `iovcnt` elements at `iov`, which sum to `len` bytes. */
struct Msg {
    char                     *buf    = nullptr;
    size_t                    len    = 0;
    const uct_tm_proto_iov_t *iov    = nullptr;
    size_t                    iovcnt = 0;

    Msg() = default;
    Msg(char *b, size_t l) : buf(b), len(l) {}
};

/* Starts a send; an empty Pending when it finished at once. `more`: more
 * sends follow (not with `user`). */
Pending start_send(const Side &s, const Msg &m, uint64_t tag, UserRequest *user,
                   bool more = false) {
    Pending                        p;
    uct_tm_proto_op_params_t       more_params = {};
    more_params.flags = UCT_TM_PROTO_SEND_MORE | (g_untagged ? unsigned{UCT_TM_PROTO_OP_UNTAGGED} : 0u);
    const uct_tm_proto_op_params_t *params     = more ? &more_params : params_for(user);
    const ucs_status_t st = (m.iov != nullptr)
                                    ? uct_tm_proto_sendv(s.ep, m.iov, m.iovcnt, tag, params, &p.req)
                                    : uct_tm_proto_send(s.ep, m.buf, m.len, tag, params, &p.req);
    if (st == UCS_INPROGRESS) {
        p.user = user;
        return p;
    }
    if (st != UCS_OK) {
        die("send", st);
    }
    return Pending();
}

void send_msg(const Side &s, const Msg &m, uint64_t tag, UserRequest *user) {
    const Pending p = start_send(s, m, tag, user);
    if ((p.req != 0) || (p.user != nullptr)) {
        wait_req(s, p);
    }
}

Pending post_recv(const Side &s, const Msg &m, uint64_t tag, UserRequest *user) {
    Pending p;
    p.user                = user;
    const ucs_status_t st = (m.iov != nullptr)
                                    ? uct_tm_proto_recvv(s.worker, m.iov, m.iovcnt, tag, ~uint64_t{0},
                                                         nullptr, params_for(user), &p.req)
                                    : uct_tm_proto_recv(s.worker, m.buf, m.len, tag, ~uint64_t{0},
                                                        nullptr, params_for(user), &p.req);
    if (st != UCS_INPROGRESS) {
        die("recv", st);
    }
    return p;
}

/* A page-aligned buffer, as tm_perftest's (the copies' alignment is then the
 * same in both tools). */
class PageBuffer {
  public:
    explicit PageBuffer(size_t size) : size_(size) {
        void *p = nullptr;
        if (posix_memalign(&p, 4096, std::max<size_t>(size, 1)) != 0) {
            fprintf(stderr, "tm_proto_perf: no memory for a %zu-byte buffer\n", size);
            exit(1);
        }
        memset(p, 0, std::max<size_t>(size, 1));
        data_.reset(static_cast<char *>(p));
    }
    char  *data() { return data_.get(); }
    size_t size() const { return size_; }

  private:
    struct Free {
        void operator()(char *p) const { free(p); }
    };
    std::unique_ptr<char, Free> data_;
    size_t                      size_;
};

/* -V: the gap after each element (MsgArea) holds this byte until the layer
 * writes past an element, which it must not. */
constexpr unsigned char kGapByte = 0xa5;

/* `count` messages of `size` bytes in one page-aligned area, message k at
 * k * stride (the area is stride * count bytes longer than one message's
 * span, as tag_bw's receive area always was). With -V (iovcnt > 0) each
 * message is iovcnt elements of near-equal length (the first size % iovcnt
 * one byte longer; some 0 bytes long when size < iovcnt), element e starting
 * e * kGap bytes past where its first byte would be in the message laid out
 * whole: every element is followed by kGap bytes of gap (kGapByte), the
 * last one included. The elements are built here, once per size. */
class MsgArea {
  public:
    static constexpr size_t kGap = 64;

    /* The bytes one message spans. */
    static size_t span(size_t size, size_t iovcnt) { return size + iovcnt * kGap; }

    MsgArea(size_t size, size_t iovcnt, size_t count = 1, size_t stride = 0)
        : buf_((count == 0) ? 0 : span(size, iovcnt) + stride * count),
          size_(size),
          iovcnt_(iovcnt),
          stride_(stride),
          iov_(iovcnt * count) {
        if ((iovcnt == 0) || (count == 0)) {
            return;
        }
        memset(buf_.data(), kGapByte, buf_.size());
        for (size_t k = 0; k < count; ++k) {
            char  *base  = buf_.data() + stride * k;
            size_t start = 0;
            for (size_t e = 0; e < iovcnt; ++e) {
                const size_t len            = size / iovcnt + ((e < size % iovcnt) ? 1 : 0);
                iov_[k * iovcnt + e].buffer = base + e * kGap + start;
                iov_[k * iovcnt + e].length = len;
                start += len;
            }
        }
    }

    /* Message k. */
    Msg at(size_t k = 0) {
        Msg m(buf_.data() + stride_ * k, size_);
        if (iovcnt_ != 0) {
            m.iov    = &iov_[k * iovcnt_];
            m.iovcnt = iovcnt_;
        }
        return m;
    }

  private:
    PageBuffer                      buf_;
    size_t                          size_, iovcnt_, stride_;
    std::vector<uct_tm_proto_iov_t> iov_;
};

/* Message byte i of iteration `it` is (char)(i * 31 + it). */
void fill(const Msg &m, size_t it) {
    if (m.iov == nullptr) {
        for (size_t i = 0; i < m.len; ++i) {
            m.buf[i] = static_cast<char>(i * 31 + it);
        }
        return;
    }
    size_t i = 0;
    for (size_t e = 0; e < m.iovcnt; ++e) {
        char *p = static_cast<char *>(m.iov[e].buffer);
        for (size_t j = 0; j < m.iov[e].length; ++j, ++i) {
            p[j] = static_cast<char>(i * 31 + it);
        }
    }
}

void verify(const char *buf, size_t size, size_t it) {
    for (size_t i = 0; i < size; ++i) {
        if (buf[i] != static_cast<char>(i * 31 + it)) {
            fprintf(stderr, "tm_proto_perf: payload mismatch at byte %zu of iteration %zu\n", i, it);
            uct_tm::exit_mid_run(1);
        }
    }
}

/* The message's bytes through its elements, and (-V) the gaps after them untouched. */
void verify(const Msg &m, size_t it) {
    if (m.iov == nullptr) {
        verify(m.buf, m.len, it);
        return;
    }
    size_t i = 0;
    for (size_t e = 0; e < m.iovcnt; ++e) {
        const char *p = static_cast<const char *>(m.iov[e].buffer);
        for (size_t j = 0; j < m.iov[e].length; ++j, ++i) {
            if (p[j] != static_cast<char>(i * 31 + it)) {
                fprintf(stderr,
                        "tm_proto_perf: payload mismatch at byte %zu (element %zu, byte %zu) of "
                        "iteration %zu\n", i, e, j, it);
                uct_tm::exit_mid_run(1);
            }
        }
        for (size_t j = 0; j < MsgArea::kGap; ++j) {
            if (static_cast<unsigned char>(p[m.iov[e].length + j]) != kGapByte) {
                fprintf(stderr,
                        "tm_proto_perf: byte %zu after element %zu (of %zu bytes) written in "
                        "iteration %zu\n", j, e, m.iov[e].length, it);
                uct_tm::exit_mid_run(1);
            }
        }
    }
}

/* -M: the receiver's multi-receive buffers. Each reports every message
 * through on_message() and its release through a last completion
 * (UCT_TM_PROTO_INFO_MULTI_RECV); repost() posts the released ones again
 * outside the callbacks. Kept across sizes: every message of a size is
 * counted before the receiver acknowledges the size's last window. */
class MultiReceiver {
  public:
    static constexpr int kBuffers = 2; /* one takes messages while the other is posted again */

    MultiReceiver(const Side &s, size_t bytes, bool check) : s_(s), check_(check) {
        for (int i = 0; i < kBuffers; ++i) {
            slots_.emplace_back(new Slot(this, bytes));
            post(*slots_.back());
        }
    }
    MultiReceiver(const MultiReceiver &)            = delete;
    MultiReceiver &operator=(const MultiReceiver &) = delete;

    /* The size of the messages now arriving. */
    void   expect(size_t size) { size_ = size; }
    size_t messages() const { return messages_; }
    /* Posts the buffers the layer released again; dies on an error reported. */
    void repost() {
        if (error_ != UCS_OK) {
            die("multi-receive", error_);
        }
        for (auto &slot : slots_) {
            if (!slot->released) {
                continue;
            }
            const ucs_status_t st = uct_tm_proto_request_test(s_.worker, slot->req, nullptr);
            if (st != UCS_OK) {
                die("multi-receive", st);
            }
            uct_tm_proto_request_release(s_.worker, slot->req);
            post(*slot);
            ++reposts_;
        }
    }
    uint64_t reposts() const { return reposts_; }

  private:
    struct Slot {
        Slot(MultiReceiver *o, size_t bytes) : owner(o), buf(bytes) {}
        MultiReceiver         *owner;
        PageBuffer             buf;
        uct_tm_proto_request_t req      = 0;
        bool                   released = false;
    };

    static void on_message(void *arg, uct_tm_proto_request_t, const uct_tm_proto_info_t *info) {
        Slot          *slot = static_cast<Slot *>(arg);
        MultiReceiver *self = slot->owner;
        if (info->flags & UCT_TM_PROTO_INFO_MULTI_RECV) {
            slot->released = true; /* the buffer is ours again */
            if (info->status != UCS_OK) {
                self->error_ = info->status;
            }
            return;
        }
        if (info->status != UCS_OK) {
            self->error_ = info->status; /* a cut message: min_multi_recv should prevent it */
            return;
        }
        if (info->length != self->size_) {
            self->error_ = UCS_ERR_MESSAGE_TRUNCATED;
            return;
        }
        if (self->check_) {
            verify(static_cast<const char *>(info->buffer), info->length, 0);
        }
        ++self->messages_;
    }

    void post(Slot &slot) {
        uct_tm_proto_op_params_t q = {};
        q.flags                    = UCT_TM_PROTO_OP_UNTAGGED | UCT_TM_PROTO_RECV_MULTI;
        q.cb                       = on_message;
        q.arg                      = &slot;
        slot.released              = false;
        const ucs_status_t st = uct_tm_proto_recv(s_.worker, slot.buf.data(), slot.buf.size(), 0,
                                                  0, nullptr, &q, &slot.req);
        if (st != UCS_INPROGRESS) {
            die("multi-receive recv", st);
        }
    }

    const Side                        &s_;
    const bool                         check_;
    std::vector<std::unique_ptr<Slot>> slots_;
    size_t                             size_     = 0;
    size_t                             messages_ = 0;
    uint64_t                           reposts_  = 0;
    ucs_status_t                       error_    = UCS_OK;
};

size_t iterations(const Options &o, size_t size) {
    if (o.iters != 0) {
        return o.iters;
    }
    return (size <= 4096) ? 20000 : (size <= (256u << 10)) ? 2000 : 200;
}

void pin(int cpu) {
    if (cpu >= 0) {
        cpu_set_t set;
        CPU_ZERO(&set);
        CPU_SET(cpu, &set);
        sched_setaffinity(0, sizeof(set), &set);
    }
}

struct Result {
    double seconds = 0; /* all measured iterations */
    double median  = 0; /* tag_lat: median batch's mean round trip, seconds */
};

using Clock = std::chrono::steady_clock;

/* tag_lat at one size: `iters` round trips after `warmup` ones; at the
 * client *start is when the measured ones began and *rtt gets each batch's
 * mean round trip. */
template <typename UserFn>
void run_lat(const Options &o, const Side &s, bool client, size_t iters, size_t warmup,
             const Msg &sbuf, const Msg &rbuf, const UserFn &user, Clock::time_point *start,
             std::vector<double> *rtt_p) {
    std::vector<double> &rtt = *rtt_p;
    /* The clock is read once per batch, not per iteration (a read on the
     * client's path would count in every round trip): the median over
     * batches of their mean round trip, tm_perftest's statistic. */
    const size_t batch = std::max<size_t>(1, std::min<size_t>(100, iters / 50));
    rtt.reserve(iters / batch + 1);
    auto    t0 = *start;
    Pending next; /* server: the receive for the coming message */
    if (!client) {
        next = post_recv(s, rbuf, 1, user(0));
    }
    for (size_t it = 0; it < warmup + iters; ++it) {
        if (client && (it >= warmup) && ((it - warmup) % batch == 0)) {
            const auto now = std::chrono::steady_clock::now();
            if (it == warmup) {
                *start = now;
            } else {
                rtt.push_back(std::chrono::duration<double>(now - t0).count() / batch);
            }
            t0 = now;
        }
        if (o.check) {
            fill(sbuf, it);
        }
        if (client) {
            const Pending r = post_recv(s, rbuf, 1, user(0));
            send_msg(s, sbuf, 1, user(1));
            wait_req(s, r);
        } else {
            /* tm_perftest's order: the next receive is posted before the
             * reply goes out (raw UCT must; here it keeps the two tools'
             * round trips alike) */
            wait_req(s, next);
            if (o.check) {
                verify(rbuf, it); /* before the buffer is posted again */
            }
            if (it + 1 < warmup + iters) {
                next = post_recv(s, rbuf, 1, user(0));
            }
            send_msg(s, sbuf, 1, user(1));
        }
        if (client && o.check) {
            verify(rbuf, it);
        }
    }
    if (client && (iters % batch == 0)) {
        rtt.push_back(std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count() /
                      batch);
    }
}

/* tag_bw at one size: `iters` messages in windows of
 * o.window, each acknowledged, after a tenth as many windows of warm-up;
 * *start is when the measured windows began. */
template <typename UserFn>
void run_bw(const Options &o, const Side &s, bool client, size_t size, size_t iters,
            const Msg &sbuf, const UserFn &user, MultiReceiver *multi, Clock::time_point *start) {
    const size_t         windows = (iters + o.window - 1) / o.window;
    const size_t         wu      = windows / 10 + 1;
    std::vector<Pending> reqs(o.window);
    /* The window's receive buffers are slots 64 bytes apart in one area, as
     * in tm_perftest and ucx_perftest (one message's working set, like a
     * protocol reusing one user buffer); --check needs them disjoint
     * (with -V, each message's elements and the gaps after them). */
    const size_t stride = o.check ? MsgArea::span(size, o.recv_iov) : 64;
    MsgArea      area(size, o.recv_iov, (client || (multi != nullptr)) ? 0 : o.window, stride);
    if (multi != nullptr) {
        multi->expect(size);
    }
    char      ack;
    const Msg ack_msg(&ack, 0); /* the acknowledgements stay one buffer of 0 bytes */
    for (size_t w = 0; w < wu + windows; ++w) {
        if (w == wu) {
            *start = std::chrono::steady_clock::now();
        }
        if (client) {
            const Pending a = post_recv(s, ack_msg, 2, user(o.window));
            for (size_t i = 0; i < o.window; ++i) {
                reqs[i] = start_send(s, sbuf, 1, user(i), o.more && (i + 1 < o.window));
            }
            for (const Pending &r : reqs) {
                if ((r.req != 0) || (r.user != nullptr)) {
                    wait_req(s, r);
                }
            }
            wait_req(s, a);
        } else if (multi != nullptr) {
            /* -M: the window's messages land in the posted multi-receives */
            const size_t      target = multi->messages() + o.window;
            uct_tm::WaitBound bound(g_link, "a window of messages");
            while (multi->messages() < target) {
                uct_tm_proto_worker_progress(s.worker);
                multi->repost();
                bound.tick();
            }
            send_msg(s, ack_msg, 2, user(o.window + 1));
        } else {
            for (size_t i = 0; i < o.window; ++i) {
                reqs[i] = post_recv(s, area.at(i), 1, user(i));
            }
            for (size_t i = 0; i < o.window; ++i) {
                wait_req(s, reqs[i]);
                if (o.check) {
                    verify(area.at(i), 0);
                }
            }
            send_msg(s, ack_msg, 2, user(o.window + 1));
        }
    }
}

/* One size at the client: total time of `iters` iterations (after a
 * warm-up), and for tag_lat the median batch's round trip. */
Result run_size(const Options &o, const Side &s, bool client, size_t size, MultiReceiver *multi) {
    const size_t      iters  = iterations(o, size);
    const size_t      warmup = iters / 10 + 1;
    /* the messages' buffers and (-V) their elements, built before the clock starts */
    MsgArea           sbuf_area(size, o.send_iov), rbuf_area(size, o.recv_iov);
    const Msg         sbuf = sbuf_area.at(), rbuf = rbuf_area.at();
    std::vector<double> rtt;
    /* -u: one request memory per operation in flight (a window of sends or
     * receives, and one more of each kind) */
    std::vector<UserRequest> mem(o.user ? o.window + 2 : 0);
    for (UserRequest &m : mem) {
        m.params.flags |= o.untagged ? unsigned{UCT_TM_PROTO_OP_UNTAGGED} : 0u;
    }
    const auto user = [&](size_t i) { return o.user ? &mem[i] : nullptr; };
    fill(sbuf, 0);
    auto start = std::chrono::steady_clock::now();
    if (o.test == "tag_lat") {
        run_lat(o, s, client, iters, warmup, sbuf, rbuf, user, &start, &rtt);
    } else {
        run_bw(o, s, client, size, iters, sbuf, user, multi, &start);
    }
    Result res;
    res.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    if (!rtt.empty()) {
        std::nth_element(rtt.begin(), rtt.begin() + rtt.size() / 2, rtt.end());
        res.median = rtt[rtt.size() / 2];
    }
    return res;
}

}  // namespace

/* Between two hosts: the control channel to the peer (the receiver takes
 * the sender's options into *o); -1 when there is none. */
int meet_over_tcp(Options *o, int argc, char **argv) {
    const bool               sender = !o->host.empty();
    std::vector<std::string> args;
    const int fd = uct_tm::tcp_link_meet("tm_proto_perf", sender ? o->host.c_str() : nullptr, o->port,
                                         o->timeout, argc, argv, &args);
    if ((fd >= 0) && !sender) {
        std::vector<char *> peer_argv = uct_tm::argv_of(args);
        *o = parse(static_cast<int>(args.size()), peer_argv.data());
    }
    return fd;
}

int main(int argc, char **argv) {
    Options o = parse(argc, argv);
    signal(SIGPIPE, SIG_IGN); /* a dead peer's channel: EPIPE, reported as such */
    pid_t child  = -1;
    bool  client = false;
    int   fd     = -1;
    if (o.port != 0) {
        client = !o.host.empty();
        fd     = meet_over_tcp(&o, argc, argv);
        if (fd < 0) return 1;
    } else {
        int sv[2];
        if (socketpair(AF_UNIX, SOCK_STREAM, 0, sv) != 0) {
            perror("socketpair");
            return 1;
        }
        child = fork();
        if (child < 0) {
            perror("fork");
            return 1;
        }
        client = child != 0;
        /* The peer's end closed here: its death then closes the channel, which
         * every wait watches (no PR_SET_PDEATHSIG: it would kill the receiver
         * without a word). */
        close(client ? sv[1] : sv[0]);
        fd = client ? sv[0] : sv[1];
    }
    g_link.tool      = "tm_proto_perf";
    g_link.role      = client ? "sender" : "receiver";
    g_link.fd        = fd;
    g_link.timeout_s = o.timeout;
    pin(client ? o.cpu_client : o.cpu_server);
    const Side s = connect_side(o, g_link.fd);
    g_untagged   = o.untagged;
    std::unique_ptr<MultiReceiver> multi;
    if ((o.multi != 0) && !client) {
        multi.reset(new MultiReceiver(s, o.multi, o.check));
    }
    if (client) {
        char mode[96] = "";
        if (o.multi != 0) {
            snprintf(mode, sizeof(mode), " (untagged, multi-receive buffers of %zu B)", o.multi);
        } else if (o.untagged) {
            snprintf(mode, sizeof(mode), " (untagged)");
        }
        char vec[64] = "";
        if (o.iovcnt != 0) {
            snprintf(vec, sizeof(vec), " (%s vectors of %zu elements)",
                     (o.send_iov == 0) ? "received as" : (o.recv_iov == 0) ? "sent as" : "as",
                     o.iovcnt);
        }
        printf("# tm_proto_perf %s over %s%s%s%s\n", o.test.c_str(), o.transports.c_str(), mode,
               vec, o.check ? " (payload checked)" : "");
        if (o.test == "tag_lat") {
            printf("%12s %12s %12s %12s %12s\n", "size", "iters", "lat_us(med)", "lat_us(avg)",
                   "msg_per_s");
        } else {
            printf("%12s %12s %12s %12s\n", "size", "iters", "MB/s", "msg_per_s");
        }
        fflush(stdout); /* "connected": scripts watching the output wait for it */
    }
    for (size_t size : o.sizes) {
        const Result res   = run_size(o, s, client, size, multi.get());
        const double secs  = res.seconds;
        const size_t iters = (o.test == "tag_lat")
                                     ? iterations(o, size)
                                     : ((iterations(o, size) + o.window - 1) / o.window) * o.window;
        if (client) {
            if (o.test == "tag_lat") {
                printf("%12zu %12zu %12.3f %12.3f %12.0f\n", size, iters, res.median * 1e6 / 2,
                       secs * 1e6 / iters / 2, iters / secs);
            } else {
                printf("%12zu %12zu %12.1f %12.0f\n", size, iters, size * iters / secs / 1e6,
                       iters / secs);
            }
            fflush(stdout);
        }
    }
    /* let the last replies drain before tearing down */
    char b = 0;
    xfer(fd, &b, 1, true);
    xfer(fd, &b, 1, false);
    if (o.stats) {
        /* which protocols the run took, e.g. eager sends pushed to rendezvous for lack of credit */
        uct_tm_proto_stats_t st;
        uct_tm_proto_worker_stats(s.worker, &st);
        fprintf(stderr,
                "# %s: eager_sends %lu rndv_sends %lu rndv_gets %lu backpressure %lu offloaded_recvs %lu "
                "software_recvs %lu expected %lu unexpected %lu unexpected_peak %zu "
                "registrations %lu rcache_hits %lu rndv_puts %lu\n",
                client ? "sender" : "receiver", (unsigned long)st.eager_sends,
                (unsigned long)st.rndv_sends, (unsigned long)st.rndv_gets,
                (unsigned long)st.backpressure, (unsigned long)st.offloaded_recvs,
                (unsigned long)st.software_recvs, (unsigned long)st.expected,
                (unsigned long)st.unexpected, st.unexpected_peak,
                (unsigned long)st.registrations, (unsigned long)st.rcache_hits,
                (unsigned long)st.rndv_puts);
        if (multi != nullptr) {
            fprintf(stderr, "# receiver: multi-receive buffers posted again %lu\n",
                    (unsigned long)multi->reposts());
        }
    }
    uct_tm_proto_worker_destroy(s.worker); /* drops the open multi-receives */
    multi.reset();                          /* then their buffers */
    if (child > 0) {
        int status = 0;
        waitpid(child, &status, 0);
        return (WIFEXITED(status) && WEXITSTATUS(status) == 0) ? 0 : 1;
    }
    return 0;
}
