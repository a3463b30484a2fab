/*
 * tm_soak: one process of a soak pair over the UCT tag API (tm_sm by default).
 * contrib/soak.sh starts pairs of them and kills, stops and resumes them at
 * random; this program moves checked traffic with its partner and counts.
 *
 * Each process is sender and receiver towards its partner (slot `--partner`).
 * Addresses go through files in --dir (addr.<slot>: pid, device and iface
 * address). A direction is a session between two incarnations (pids): the
 * sender announces itself with a HELLO active message, the receiver resets
 * its state for that sender, posts its window and answers HELLO_ACK; then
 * messages 0, 1, 2, ... flow under credits (CREDIT: the receiver's limit).
 * Tags carry the session and the sequence number, so a message of a dead
 * incarnation is recognised and dropped ("stale").
 *
 * Per message, from (session, seq) alone, both sides derive the length (eager
 * short, bcopy, zcopy and rendezvous sizes) and every payload byte; and the
 * receiver how to take it: posted before it can arrive (expected), not posted
 * (unexpected: eager_cb fragments, or rndv_cb and get_zcopy, acknowledged with
 * RNDV_ACK so the sender withdraws its op with tag_rndv_cancel), or posted and
 * cancelled at once (non-forced: either it completes with the data or with
 * UCS_ERR_CANCELED and then arrives unexpected). Decoy receives, whose tags
 * nobody sends, are posted and cancelled, forced or not: a non-forced cancel
 * must call completed_cb(CANCELED) exactly once, a forced one never.
 * Every message must be delivered exactly once: a second delivery is a
 * duplicate; at the end (SIGTERM) each side sends DONE(count) and the receiver
 * waits for every message below it: the missing ones are lost.
 *
 * Output: DIR/prog.<slot> every 0.5 s ("delivered sent errors", read by the
 * driver to detect stalls), and at the end one line on stdout:
 *   tm_soak slot=S pid=P delivered=... bytes=... sent=... errors_reported=...
 *           corrupt=... duplicates=... lost=... decoy_bad=... unfinished=...
 *           stale=... sessions=... fd_leak=...
 * corrupt, duplicates, lost, decoy_bad, unfinished and fd_leak must be 0.
 * With --attacked (a hostile neighbour spoils split copies) a transfer that
 * fails UCS_ERR_IO_ERROR or UCS_ERR_TIMED_OUT counts in attacked_recvs /
 * attacked_sends instead of corrupt, and the message as accounted for.
 * Exit status 0 unless a setup step failed.
 */
#include "transport_iface.h"

#include <uct/api/uct.h>
#include <ucs/async/async_fwd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cinttypes>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <dirent.h>
#include <fcntl.h>
#include <getopt.h>
#include <string>
#include <unistd.h>
#include <vector>

namespace {

/* ---- options ---------------------------------------------------------------------- */

struct Options {
    int         slot     = -1;
    int         partner  = -1;
    std::string dir;
    std::string transport = "tm_sm";
    unsigned    window    = 16;          /* messages in flight per direction */
    size_t      max_size  = 256 << 10;   /* largest rendezvous message */
    unsigned    decoys    = 8;           /* decoy receives in rotation */
    double      drain_s   = 10;          /* end: wait this long for the partner's messages */
    /* A hostile neighbour spoils split copies (claim storms, withheld
     * pieces): a transfer failing UCS_ERR_IO_ERROR or UCS_ERR_TIMED_OUT on
     * both sides is then its doing, reported, not lost. */
    bool attacked = false;
};

void usage() {
    fprintf(stderr,
            "usage: tm_soak --slot S --partner P --dir DIR [--window W] [--max-size BYTES]\n"
            "               [--decoys N] [--drain SEC] [--transport NAME] [--attacked]\n");
    exit(1);
}

Options parse(int argc, char **argv) {
    static const option longs[] = {{"slot", required_argument, nullptr, 's'},
                                   {"partner", required_argument, nullptr, 'p'},
                                   {"dir", required_argument, nullptr, 'd'},
                                   {"window", required_argument, nullptr, 'w'},
                                   {"max-size", required_argument, nullptr, 'm'},
                                   {"decoys", required_argument, nullptr, 'D'},
                                   {"drain", required_argument, nullptr, 'r'},
                                   {"transport", required_argument, nullptr, 'x'},
                                   {"attacked", no_argument, nullptr, 'a'},
                                   {nullptr, 0, nullptr, 0}};
    Options o;
    int     c;
    while ((c = getopt_long(argc, argv, "", longs, nullptr)) != -1) {
        switch (c) {
        case 's': o.slot = atoi(optarg); break;
        case 'p': o.partner = atoi(optarg); break;
        case 'd': o.dir = optarg; break;
        case 'w': o.window = static_cast<unsigned>(strtoul(optarg, nullptr, 0)); break;
        case 'm': o.max_size = strtoull(optarg, nullptr, 0); break;
        case 'D': o.decoys = static_cast<unsigned>(strtoul(optarg, nullptr, 0)); break;
        case 'r': o.drain_s = strtod(optarg, nullptr); break;
        case 'x': o.transport = optarg; break;
        case 'a': o.attacked = true; break;
        default: usage();
        }
    }
    if ((o.slot < 0) || (o.partner < 0) || o.dir.empty() || (o.window < 2) || (o.window > 1024) ||
        (o.max_size < (128u << 10)) || (o.max_size > (64u << 20)) || !(o.drain_s > 0)) {
        usage();
    }
    return o;
}

[[noreturn]] void die(const char *what, ucs_status_t status) {
    fprintf(stderr, "tm_soak: %s: %s\n", what, ucs_status_string(status));
    exit(2);
}

#define CHECK(expr)                                  \
    do {                                             \
        const ucs_status_t _s = (expr);              \
        if (_s != UCS_OK) die(#expr, _s);            \
    } while (0)

double now_s() {
    return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

volatile sig_atomic_t g_finish = 0;
extern "C" void on_term(int) { g_finish = 1; }

/* ---- what both sides derive from (session, seq) ------------------------------------ */

constexpr uint64_t kSeqBits    = 40;
constexpr uint64_t kSeqMask    = (uint64_t{1} << kSeqBits) - 1;
constexpr uint64_t kDecoyBit   = uint64_t{1} << 63;
constexpr uint32_t kSessionMax = (1u << 23) - 1;

uint64_t mix(uint64_t x) {
    x ^= x >> 33;
    x *= 0xff51afd7ed558ccdull;
    x ^= x >> 33;
    x *= 0xc4ceb9fe1a85ec53ull;
    return x ^ (x >> 33);
}

uint32_t session_of(uint64_t sender_pid, uint64_t receiver_pid) {
    return static_cast<uint32_t>(mix(sender_pid * 0x100000001b3ull + receiver_pid) % kSessionMax) + 1;
}

uint64_t make_tag(uint32_t session, uint64_t seq) { return (uint64_t{session} << kSeqBits) | (seq & kSeqMask); }
uint32_t tag_session(uint64_t tag) { return static_cast<uint32_t>((tag & ~kDecoyBit) >> kSeqBits); }
uint64_t tag_seq(uint64_t tag) { return tag & kSeqMask; }

/* Lengths by class: tm_sm's eager short (88 B inline), bcopy (8 KiB
 * descriptor), multi-fragment zcopy (64 KiB) and rendezvous. */
size_t msg_len(const Options &o, uint32_t session, uint64_t seq) {
    const uint64_t h = mix((uint64_t{session} << 40) ^ seq ^ 0x1234);
    const uint64_t r = h >> 8;
    switch (h % 8) {
    case 0: return r % 65;
    case 1: case 2: return 65 + r % (8000 - 65);
    case 3: case 4: return 8193 + r % (60000 - 8193);
    default: return 65537 + r % (o.max_size - 65537);
    }
}

uint8_t pattern(uint32_t session, uint64_t seq, size_t i) {
    return static_cast<uint8_t>(mix(seq + (uint64_t{session} << 40)) + i * 7 + (i >> 8) * 13);
}

enum class Mode { Expected, Unexpected, Cancel };

Mode mode_of(uint32_t session, uint64_t seq) {
    const uint64_t m = mix(seq * 31 + session) % 10;
    return (m < 2) ? Mode::Unexpected : (m == 2) ? Mode::Cancel : Mode::Expected;
}

/* ---- counters ----------------------------------------------------------------------- */

struct Counters {
    uint64_t delivered = 0, bytes = 0, sent = 0, errors = 0, corrupt = 0, duplicates = 0, lost = 0,
             decoy_bad = 0, unfinished = 0, stale = 0, sessions = 0;
    /* how they went: posted receives, unexpected eager, unexpected rendezvous
     * (fetched), receives cancelled (CANCELED), cancels too late (completed
     * with the data), decoys cancelled without and with force */
    uint64_t expected = 0, unexp_eager = 0, unexp_rndv = 0, cancelled = 0, cancel_late = 0,
             decoy_cancel = 0, decoy_force = 0;
    /* receives and sends that failed by the neighbour's attacks (--attacked) */
    uint64_t attacked_recvs = 0, attacked_sends = 0;
};

/* ---- the process ---------------------------------------------------------------------- */

constexpr uint8_t kAmHello    = 1; /* header: sender pid */
constexpr uint8_t kAmHelloAck = 2; /* header: the pid that said hello */
constexpr uint8_t kAmCredit   = 3; /* header: session << 40 | limit */
constexpr uint8_t kAmRndvAck  = 4; /* header: session << 40 | seq */
constexpr uint8_t kAmDone     = 5; /* header: session << 40 | count */

struct Soak;

struct RecvCtx {
    uct_tag_context_t ctx;
    Soak             *soak     = nullptr;
    uint32_t          session  = 0;
    uint64_t          seq      = 0;
    unsigned          slot     = 0;
    bool              decoy    = false;
    bool              forced   = false; /* decoy: cancelled with force */
    bool              cancelled = false;
    unsigned          callbacks = 0;
    uint64_t          cancel_at = 0; /* Mode::Cancel: cancel once prefix >= cancel_at - 1 */
};

struct RxSlot {
    enum State { Free, Posted, Fetching } state = Free;
    uint64_t seq = 0;
    RecvCtx  rctx;
};

struct Fetch {
    uct_completion_t  comp;
    enum State { Queued, Running, Done, Dropped } state = Queued;
    uint32_t          session;
    uint64_t          seq;
    size_t            len;
    uint64_t          remote_addr;
    uct_rkey_bundle_t rkey;
    unsigned          slot;
};

struct TxSlot {
    uct_completion_t comp;
    Soak            *soak   = nullptr;
    bool             busy   = false;
    uint64_t         seq    = 0;
    void            *rndv   = nullptr; /* tag_rndv_zcopy op */
    uct_ep_h         rndv_ep = nullptr; /* the endpoint it was sent on (may be retired since) */
    uint32_t         session = 0;
    uint64_t         filled  = ~uint64_t{0}; /* the tag whose pattern the buffer holds */
};

struct Buffer {
    char     *ptr  = nullptr;
    uct_mem_h memh = UCT_MEM_HANDLE_NULL;
};

/* The transport opened (transport_iface.h), and the soak's state. */
struct Soak : uct_tm::TransportIface {
    Options              opt;
    Counters             n;
    uint64_t             mypid = 0;

    /* the endpoint to the partner's current incarnation; retired ones wait
     * for their operations */
    uct_ep_h              ep = nullptr;
    uint64_t              ep_pid = 0;
    uint64_t              refused_pid = 0;
    bool                  ep_failed = false;
    std::vector<uct_ep_h> retired;

    /* transmit direction */
    enum class Tx { None, Hello, Open } tx = Tx::None;
    uint32_t              tx_session = 0;
    uint64_t              next_seq = 0, limit = 0;
    double                hello_at = 0;
    std::vector<TxSlot>   txs;
    Buffer                tx_buf;
    bool                  done_sent = false;

    /* receive direction */
    uint64_t              rx_pid = 0;
    uint32_t              rx_session = 0;
    uint64_t              prefix = 0, posted_upto = 0, credit_sent = 0;
    bool                  credit_dirty = false;
    std::vector<uint64_t> delivered_ring; /* seq + 1 when delivered */
    std::vector<RxSlot>   rxs;
    Buffer                rx_buf;
    std::vector<Fetch *>  fetches;
    bool                  done_seen = false;
    uint64_t              done_count = 0;
    std::vector<uint64_t> hello_from, acks_to_send, acked; /* queued by AM handlers */
    std::vector<std::pair<uint32_t, uint64_t>> rndv_acks_in, rndv_acks_out, credits_in;

    /* decoys */
    std::vector<RecvCtx>  decoys;
    std::vector<char>     decoy_buf;
    uint64_t              decoy_serial = 0;

    uint64_t              steps = 0;
    uint64_t              rng = 0;
    uint64_t rand() { return rng = mix(rng + 0x9e3779b97f4a7c15ull); }
};

void progress(Soak &s) { uct_worker_progress(s.worker); }

/* This process's open files: "fd -> target" (the listing's own fd left out). */
std::vector<std::string> open_fds() {
    std::vector<std::string> out;
    DIR                     *d = opendir("/proc/self/fd");
    if (d == nullptr) return out;
    const int own = dirfd(d);
    while (struct dirent *e = readdir(d)) {
        if ((e->d_name[0] == '.') || (atoi(e->d_name) == own)) continue;
        char        target[256] = {};
        std::string path        = std::string("/proc/self/fd/") + e->d_name;
        if (readlink(path.c_str(), target, sizeof(target) - 1) < 0) continue;
        out.push_back(std::string(e->d_name) + " -> " + target);
    }
    closedir(d);
    std::sort(out.begin(), out.end());
    return out;
}

/* For a pidfd, " (pid N)" from its fdinfo: which process's watch was kept. */
std::string fd_owner(int fd) {
    const std::string path = "/proc/self/fdinfo/" + std::to_string(fd);
    FILE             *f    = fopen(path.c_str(), "r");
    if (f == nullptr) return "";
    char        line[128];
    std::string owner;
    while (fgets(line, sizeof(line), f) != nullptr) {
        if (strncmp(line, "Pid:", 4) == 0) {
            owner = " (pid " + std::to_string(atol(line + 4)) + ")";
            break;
        }
    }
    fclose(f);
    return owner;
}

/* ---- delivery ------------------------------------------------------------------------ */

/* TM_SOAK_INJECT=lose|duplicate|corrupt: the checks' own test (the soak
 * must then fail): the 1000th delivery is dropped, repeated or its first byte
 * taken as wrong. */
enum class Inject { None, Lose, Duplicate, Corrupt };
Inject g_inject = Inject::None;

bool inject_now(Soak &s, Inject what) {
    return (g_inject == what) && (s.n.delivered == 999);
}

bool verify(Soak &s, uint32_t session, uint64_t seq, const char *data, size_t offset, size_t len,
            const char *path) {
    for (size_t i = 0; i < len; ++i) {
        if ((static_cast<uint8_t>(data[i]) != pattern(session, seq, offset + i)) ||
            ((i == 0) && inject_now(s, Inject::Corrupt) && ((g_inject = Inject::None), true))) {
            fprintf(stderr, "tm_soak %d: CORRUPT: %s message %" PRIu64 " differs at byte %zu\n",
                    s.opt.slot, path, seq, offset + i);
            ++s.n.corrupt;
            return false;
        }
    }
    return true;
}

/* `failed`: the transfer failed by an attack, both sides told: accounted for,
 * not delivered. */
void deliver(Soak &s, uint64_t seq, size_t len, const char *path, bool failed = false) {
    const unsigned W = s.opt.window;
    if (inject_now(s, Inject::Lose)) {
        g_inject = Inject::None;
        return;
    }
    if (inject_now(s, Inject::Duplicate)) {
        g_inject = Inject::None;
        deliver(s, seq, len, path);
    }
    if ((seq < s.prefix) || (s.delivered_ring[seq % W] == seq + 1)) {
        fprintf(stderr, "tm_soak %d: DUPLICATE: message %" PRIu64 " delivered again (%s)\n", s.opt.slot,
                seq, path);
        ++s.n.duplicates;
        return;
    }
    if (seq >= s.prefix + W) {
        fprintf(stderr, "tm_soak %d: CORRUPT: message %" PRIu64 " outside the window [%" PRIu64 ", +%u)\n",
                s.opt.slot, seq, s.prefix, W);
        ++s.n.corrupt;
        return;
    }
    s.delivered_ring[seq % W] = seq + 1;
    if (failed) {
        ++s.n.attacked_recvs;
    } else {
        ++s.n.delivered;
        s.n.bytes += len;
    }
    while (s.delivered_ring[s.prefix % W] == s.prefix + 1) {
        ++s.prefix;
        s.credit_dirty = true;
    }
}

/* A status the neighbour's attacks on split copies give (--attacked). */
bool attacked_status(const Soak &s, ucs_status_t status) {
    return s.opt.attacked && ((status == UCS_ERR_IO_ERROR) || (status == UCS_ERR_TIMED_OUT));
}

extern "C" void recv_consumed(uct_tag_context_t *) {}

extern "C" void recv_completed(uct_tag_context_t *ctx, uct_tag_t stag, uint64_t, size_t length,
                               void *inline_data, ucs_status_t status) {
    RecvCtx *r = reinterpret_cast<RecvCtx *>(ctx);
    Soak    &s = *r->soak;
    ++r->callbacks;
    if (r->decoy) {
        if ((status != UCS_ERR_CANCELED) || r->forced || (r->callbacks != 1) || !r->cancelled) {
            fprintf(stderr, "tm_soak %d: DECOY: receive for tag 0x%" PRIx64 " completed with %s (%s, %u callbacks)\n",
                    s.opt.slot, stag, ucs_status_string(status),
                    r->forced ? "force-cancelled" : r->cancelled ? "cancelled" : "not cancelled",
                    r->callbacks);
            ++s.n.decoy_bad;
        }
        return;
    }
    RxSlot &slot = s.rxs[r->slot];
    if (r->callbacks != 1) {
        fprintf(stderr, "tm_soak %d: DUPLICATE: receive of message %" PRIu64 " completed %u times\n",
                s.opt.slot, r->seq, r->callbacks);
        ++s.n.duplicates;
        return;
    }
    slot.state = RxSlot::Free;
    if (r->session != s.rx_session) {
        return; /* an old session's receive completing after the reset */
    }
    if (status == UCS_ERR_CANCELED) {
        if (!r->cancelled) {
            fprintf(stderr, "tm_soak %d: CANCEL: message %" PRIu64 "'s receive completed CANCELED uncancelled\n",
                    s.opt.slot, r->seq);
            ++s.n.decoy_bad;
        }
        ++s.n.cancelled;
        return; /* the message arrives unexpected */
    }
    if (status == UCS_ERR_CONNECTION_RESET) {
        ++s.n.errors;
        return;
    }
    if (attacked_status(s, status)) {
        deliver(s, r->seq, 0, "expected", true);
        return;
    }
    const size_t want = msg_len(s.opt, r->session, r->seq);
    if ((status != UCS_OK) || (length != want) || (stag != make_tag(r->session, r->seq))) {
        fprintf(stderr, "tm_soak %d: CORRUPT: message %" PRIu64 " completed with %s, %zu bytes (want %zu), "
                        "tag 0x%" PRIx64 "\n", s.opt.slot, r->seq, ucs_status_string(status), length,
                want, stag);
        ++s.n.corrupt;
        return;
    }
    const char *data = (inline_data != nullptr) ? static_cast<const char *>(inline_data)
                                                : s.rx_buf.ptr + r->slot * s.opt.max_size;
    if (verify(s, r->session, r->seq, data, 0, length, "expected")) {
        deliver(s, r->seq, length, "expected");
        ++(r->cancelled ? s.n.cancel_late : s.n.expected);
    }
}

extern "C" void recv_rndv(uct_tag_context_t *ctx, uct_tag_t, const void *, unsigned, ucs_status_t status,
                          unsigned) {
    RecvCtx *r = reinterpret_cast<RecvCtx *>(ctx);
    fprintf(stderr, "tm_soak %d: CORRUPT: software rendezvous request for message %" PRIu64 " (%s)\n",
            r->soak->opt.slot, r->seq, ucs_status_string(status));
    ++r->soak->n.corrupt;
    r->soak->rxs[r->slot].state = RxSlot::Free;
}

/* Unexpected eager: fragments checked where they lie, no copy. */
extern "C" ucs_status_t unexp_eager(void *arg, void *data, size_t length, unsigned flags, uct_tag_t stag,
                                    uint64_t, void **context) {
    Soak          &s       = *static_cast<Soak *>(arg);
    const uint32_t session = tag_session(stag);
    const uint64_t seq     = tag_seq(stag);
    if ((stag & kDecoyBit) || (session != s.rx_session) || (s.rx_session == 0)) {
        if (!(flags & UCT_CB_PARAM_FLAG_MORE)) ++s.n.stale;
        return UCS_OK;
    }
    const size_t offset = (flags & UCT_CB_PARAM_FLAG_FIRST) ? 0 : reinterpret_cast<uintptr_t>(*context);
    *context            = reinterpret_cast<void *>(offset + length);
    const size_t want   = msg_len(s.opt, session, seq);
    if (offset + length > want) {
        fprintf(stderr, "tm_soak %d: CORRUPT: unexpected message %" PRIu64 " longer than %zu\n", s.opt.slot,
                seq, want);
        ++s.n.corrupt;
        return UCS_OK;
    }
    verify(s, session, seq, static_cast<const char *>(data), offset, length, "unexpected eager");
    if (!(flags & UCT_CB_PARAM_FLAG_MORE)) {
        if (offset + length != want) {
            fprintf(stderr, "tm_soak %d: CORRUPT: unexpected message %" PRIu64 " of %zu bytes, want %zu\n",
                    s.opt.slot, seq, offset + length, want);
            ++s.n.corrupt;
            return UCS_OK;
        }
        const RxSlot &slot = s.rxs[seq % s.opt.window];
        if ((slot.state == RxSlot::Posted) && (slot.seq == seq) && !slot.rctx.cancelled) {
            fprintf(stderr, "tm_soak %d: MISSED MATCH: message %" PRIu64 " arrived unexpected while its "
                            "receive was posted\n", s.opt.slot, seq);
            ++s.n.corrupt;
        }
        deliver(s, seq, want, "unexpected eager");
        ++s.n.unexp_eager;
    }
    return UCS_OK;
}

/* Unexpected rendezvous: queued, fetched with get_zcopy from the main loop. */
extern "C" ucs_status_t unexp_rndv(void *arg, unsigned, uint64_t stag, const void *header,
                                   unsigned header_length, uint64_t remote_addr, size_t length,
                                   const void *rkey_buf) {
    Soak          &s       = *static_cast<Soak *>(arg);
    const uint32_t session = tag_session(stag);
    const uint64_t seq     = tag_seq(stag);
    if ((stag & kDecoyBit) || (session != s.rx_session) || (s.rx_session == 0)) {
        ++s.n.stale;
        return UCS_OK;
    }
    uint64_t hdr[2] = {0, 0};
    if ((rkey_buf == nullptr) || (header_length != sizeof(hdr)) ||
        (memcpy(hdr, header, sizeof(hdr)), (hdr[0] != seq) || (hdr[1] != length)) ||
        (length != msg_len(s.opt, session, seq))) {
        fprintf(stderr, "tm_soak %d: CORRUPT: unexpected rendezvous %" PRIu64 ": %zu bytes, header %u bytes\n",
                s.opt.slot, seq, length, header_length);
        ++s.n.corrupt;
        return UCS_OK;
    }
    Fetch *f = new Fetch{};
    f->session     = session;
    f->seq         = seq;
    f->len         = length;
    f->remote_addr = remote_addr;
    f->slot        = static_cast<unsigned>(seq % s.opt.window);
    if (uct_rkey_unpack(s.component, rkey_buf, &f->rkey) != UCS_OK) {
        ++s.n.corrupt;
        delete f;
        return UCS_OK;
    }
    s.fetches.push_back(f);
    return UCS_OK;
}

extern "C" void fetch_completed(uct_completion_t *comp) {
    reinterpret_cast<Fetch *>(comp)->state = Fetch::Done; /* the main loop finishes it */
}

extern "C" ucs_status_t am_handler(void *arg, void *data, size_t length, unsigned flags) {
    (void)flags;
    Soak    &s = *static_cast<Soak *>(arg);
    uint64_t h = 0;
    if (length < sizeof(h) + 1) return UCS_OK;
    const uint8_t id = static_cast<const uint8_t *>(data)[sizeof(h)];
    memcpy(&h, data, sizeof(h));
    const uint32_t session = static_cast<uint32_t>(h >> kSeqBits);
    switch (id) {
    case kAmHello: s.hello_from.push_back(h); break;
    case kAmHelloAck: s.acked.push_back(h); break;
    case kAmCredit: s.credits_in.emplace_back(session, h & kSeqMask); break;
    case kAmRndvAck: s.rndv_acks_in.emplace_back(session, h & kSeqMask); break;
    case kAmDone:
        if (session == s.rx_session) {
            s.done_seen  = true;
            s.done_count = h & kSeqMask;
        }
        break;
    }
    return UCS_OK;
}

extern "C" ucs_status_t ep_failed(void *arg, uct_ep_h ep, ucs_status_t) {
    Soak &s = *static_cast<Soak *>(arg);
    ++s.n.errors;
    if (ep == s.ep) {
        s.ep_failed = true;
    }
    return UCS_OK;
}

extern "C" void send_completed(uct_completion_t *comp) {
    TxSlot *t = reinterpret_cast<TxSlot *>(comp);
    Soak   &s = *t->soak;
    if ((comp->status == UCS_ERR_CONNECTION_RESET) || (comp->status == UCS_ERR_CANCELED)) {
        ++s.n.errors;
    } else if (attacked_status(s, comp->status)) {
        ++s.n.attacked_sends;
    } else if (comp->status != UCS_OK) {
        fprintf(stderr, "tm_soak %d: send of message %" PRIu64 " completed with %s\n", s.opt.slot, t->seq,
                ucs_status_string(comp->status));
        ++s.n.corrupt;
    }
    t->busy = false;
    t->rndv = nullptr;
}

/* ---- setup --------------------------------------------------------------------------- */

void open_iface(Soak &s) {
    uct_tm::TransportCallbacks cb;
    cb.eager_cb    = unexp_eager;
    cb.rndv_cb     = unexp_rndv;
    cb.arg         = &s;
    cb.err_handler = ep_failed;
    cb.err_arg     = &s;
    uct_tm::open_transport("tm_soak", s.opt.transport, cb, &s);
    for (uint8_t id : {kAmHello, kAmHelloAck, kAmCredit, kAmRndvAck, kAmDone}) {
        CHECK(uct_iface_set_am_handler(s.iface, id, am_handler, &s, 0));
    }
}

void alloc(Soak &s, Buffer &b, size_t len) {
    void *p;
    if (posix_memalign(&p, 4096, len) != 0) die("posix_memalign", UCS_ERR_NO_MEMORY);
    memset(p, 0, len);
    b.ptr = static_cast<char *>(p);
    if (s.md_attr.cap.flags & UCT_MD_FLAG_REG) {
        CHECK(uct_md_mem_reg(s.md, b.ptr, len, UCT_MD_MEM_ACCESS_ALL, &b.memh));
    }
}

/* addr.<slot>: pid, device address, iface address (written to a temporary
 * name and renamed: a reader sees a whole file or the previous one). */
void publish_address(Soak &s) {
    std::vector<char> dev(s.attr.device_addr_len), ifa(s.attr.iface_addr_len);
    CHECK(uct_iface_get_device_address(s.iface, reinterpret_cast<uct_device_addr_t *>(dev.data())));
    CHECK(uct_iface_get_address(s.iface, reinterpret_cast<uct_iface_addr_t *>(ifa.data())));
    const std::string path = s.opt.dir + "/addr." + std::to_string(s.opt.slot);
    const std::string tmp  = path + ".tmp";
    FILE             *f    = fopen(tmp.c_str(), "w");
    if (f == nullptr) die("address file", UCS_ERR_IO_ERROR);
    const uint64_t dl = dev.size(), il = ifa.size();
    fwrite(&s.mypid, 8, 1, f);
    fwrite(&dl, 8, 1, f);
    fwrite(dev.data(), 1, dl, f);
    fwrite(&il, 8, 1, f);
    fwrite(ifa.data(), 1, il, f);
    if ((fclose(f) != 0) || (rename(tmp.c_str(), path.c_str()) != 0)) die("address file", UCS_ERR_IO_ERROR);
}

/* The partner's published address, if any: pid, device and iface address. */
bool read_address(const Soak &s, uint64_t *pid, std::vector<char> *dev, std::vector<char> *ifa) {
    const std::string path = s.opt.dir + "/addr." + std::to_string(s.opt.partner);
    FILE             *f    = fopen(path.c_str(), "r");
    if (f == nullptr) return false;
    uint64_t dl = 0, il = 0;
    bool     ok = (fread(pid, 8, 1, f) == 1) && (fread(&dl, 8, 1, f) == 1) && (dl < 4096);
    if (ok) {
        dev->resize(dl);
        ok = (fread(dev->data(), 1, dl, f) == dl) && (fread(&il, 8, 1, f) == 1) && (il < 4096);
    }
    if (ok) {
        ifa->resize(il);
        ok = fread(ifa->data(), 1, il, f) == il;
    }
    fclose(f);
    return ok;
}

void write_progress(const Soak &s) {
    const std::string path = s.opt.dir + "/prog." + std::to_string(s.opt.slot);
    const std::string tmp  = path + ".tmp";
    FILE             *f    = fopen(tmp.c_str(), "w");
    if (f == nullptr) return;
    fprintf(f, "%" PRIu64 " %" PRIu64 " %" PRIu64 "\n", s.n.delivered, s.n.sent, s.n.errors);
    if (fclose(f) == 0) rename(tmp.c_str(), path.c_str());
}

/* ---- sessions -------------------------------------------------------------------------- */

bool am(Soak &s, uint8_t id, uint64_t header) {
    if ((s.ep == nullptr) || s.ep_failed) return false;
    /* The id travels in the payload too: the handler is shared. */
    const ucs_status_t st = uct_ep_am_short(s.ep, id, header, &id, 1);
    if ((st == UCS_ERR_CONNECTION_RESET) || (st == UCS_ERR_UNREACHABLE)) {
        s.ep_failed = true;
    }
    return st == UCS_OK;
}

/* Retires the endpoint: destroyed once no send of ours uses it. */
void drop_ep(Soak &s) {
    if (s.ep != nullptr) s.retired.push_back(s.ep);
    s.ep        = nullptr;
    s.ep_pid    = 0;
    s.ep_failed = false;
    s.tx        = Soak::Tx::None;
}

bool tx_idle(const Soak &s) {
    return std::none_of(s.txs.begin(), s.txs.end(), [](const TxSlot &t) { return t.busy; });
}

void reap_retired(Soak &s) {
    if (!s.retired.empty() && tx_idle(s)) {
        for (uct_ep_h ep : s.retired) uct_ep_destroy(ep);
        s.retired.clear();
    }
}

/* Connects to the partner's published incarnation when it is a new one. */
void connect_partner(Soak &s) {
    uint64_t          pid;
    std::vector<char> dev, ifa;
    if (!read_address(s, &pid, &dev, &ifa)) return;
    if ((pid == s.ep_pid) && !s.ep_failed) return;
    if ((pid == s.ep_pid) && s.ep_failed) return; /* that incarnation is gone: wait for the next */
    if (s.ep != nullptr) drop_ep(s);
    if (!uct_iface_is_reachable(s.iface, reinterpret_cast<uct_device_addr_t *>(dev.data()),
                                reinterpret_cast<uct_iface_addr_t *>(ifa.data()))) {
        return;
    }
    uct_ep_params_t p = {};
    p.field_mask      = UCT_EP_PARAM_FIELD_IFACE | UCT_EP_PARAM_FIELD_DEV_ADDR | UCT_EP_PARAM_FIELD_IFACE_ADDR;
    p.iface           = s.iface;
    p.dev_addr        = reinterpret_cast<uct_device_addr_t *>(dev.data());
    p.iface_addr      = reinterpret_cast<uct_iface_addr_t *>(ifa.data());
    const ucs_status_t st = uct_ep_create(&p, &s.ep);
    if (st != UCS_OK) {
        /* a dead incarnation's address: wait for the next (said once per pid) */
        if (pid != s.refused_pid) {
            fprintf(stderr, "tm_soak %d: CONNECT: endpoint to partner pid %" PRIu64 ": %s\n", s.opt.slot, pid,
                    ucs_status_string(st));
            s.refused_pid = pid;
        }
        s.ep = nullptr;
        return;
    }
    s.ep_pid   = pid;
    s.tx       = Soak::Tx::Hello;
    s.hello_at = 0;
}

void cancel_rx(Soak &s) {
    for (RxSlot &slot : s.rxs) {
        if (slot.state == RxSlot::Posted) {
            CHECK(uct_iface_tag_recv_cancel(s.iface, &slot.rctx.ctx, 1));
            slot.state = RxSlot::Free;
        }
    }
    for (Fetch *f : s.fetches) {
        if (f->state == Fetch::Queued) {
            uct_rkey_release(s.component, &f->rkey);
            f->state = Fetch::Dropped;
        }
    }
}

/* A HELLO from a new incarnation of the partner: a new receive session. */
void open_rx(Soak &s, uint64_t pid) {
    if (pid != s.rx_pid) {
        cancel_rx(s);
        s.rx_pid      = pid;
        s.rx_session  = session_of(pid, s.mypid);
        s.prefix      = 0;
        s.posted_upto = 0;
        s.credit_sent = 0;
        s.done_seen   = false;
        std::fill(s.delivered_ring.begin(), s.delivered_ring.end(), 0);
        ++s.n.sessions;
    }
}

/* Posts the receives of the window that are to be expected or cancelled. */
void post_window(Soak &s) {
    const unsigned W = s.opt.window;
    while ((s.rx_session != 0) && (s.posted_upto < s.prefix + W)) {
        const uint64_t seq  = s.posted_upto;
        RxSlot        &slot = s.rxs[seq % W];
        const Mode     mode = mode_of(s.rx_session, seq);
        if (mode != Mode::Unexpected) {
            if (slot.state != RxSlot::Free) break; /* an old receive or fetch still uses it */
            RecvCtx &r = slot.rctx;
            r          = RecvCtx{};
            r.ctx.tag_consumed_cb = recv_consumed;
            r.ctx.completed_cb    = recv_completed;
            r.ctx.rndv_cb         = recv_rndv;
            r.soak    = &s;
            r.session = s.rx_session;
            r.seq     = seq;
            r.slot    = static_cast<unsigned>(seq % W);
            uct_iov_t iov = {s.rx_buf.ptr + r.slot * s.opt.max_size, msg_len(s.opt, s.rx_session, seq),
                             s.rx_buf.memh, 0, 1};
            const ucs_status_t st =
                    uct_iface_tag_recv_zcopy(s.iface, make_tag(s.rx_session, seq), ~0ull, &iov, 1, &r.ctx);
            if (st == UCS_ERR_NO_RESOURCE) break;
            if (st != UCS_OK) die("tag_recv_zcopy", st);
            slot.state = RxSlot::Posted;
            slot.seq   = seq;
            if (mode == Mode::Cancel) {
                /* when the messages before it are (nearly) in: it is then on its
                 * way, arrived or matched, or not yet sent */
                r.cancel_at = seq + 1 - std::min<uint64_t>(seq, s.rand() % 4);
            }
        }
        ++s.posted_upto;
        s.credit_dirty = true;
    }
}

void run_fetches(Soak &s) {
    for (size_t i = 0; i < s.fetches.size();) {
        Fetch  *f    = s.fetches[i];
        RxSlot &slot = s.rxs[f->slot];
        if (f->state == Fetch::Queued) {
            if (slot.state != RxSlot::Free) { /* the cancelled receive's callback is due */
                ++i;
                continue;
            }
            if ((s.ep == nullptr) || s.ep_failed || (f->session != s.rx_session)) {
                uct_rkey_release(s.component, &f->rkey);
                f->state = Fetch::Dropped;
            } else {
                f->comp.func   = fetch_completed;
                f->comp.count  = 1;
                f->comp.status = UCS_OK;
                uct_iov_t iov  = {s.rx_buf.ptr + f->slot * s.opt.max_size, f->len, s.rx_buf.memh, 0, 1};
                const ucs_status_t st =
                        uct_ep_get_zcopy(s.ep, &iov, 1, f->remote_addr, f->rkey.rkey, &f->comp);
                if (st == UCS_ERR_NO_RESOURCE) {
                    ++i;
                    continue;
                }
                slot.state = RxSlot::Fetching;
                slot.seq   = f->seq;
                f->state   = (st == UCS_INPROGRESS) ? Fetch::Running : Fetch::Done;
                if (st != UCS_INPROGRESS) f->comp.status = st;
            }
        }
        if (f->state == Fetch::Running) {
            ++i;
            continue;
        }
        if (f->state == Fetch::Done) {
            const ucs_status_t st = f->comp.status;
            uct_rkey_release(s.component, &f->rkey);
            slot.state = RxSlot::Free;
            if (f->session == s.rx_session) {
                if (st == UCS_OK) {
                    if (verify(s, f->session, f->seq, s.rx_buf.ptr + f->slot * s.opt.max_size, 0, f->len,
                               "unexpected rendezvous")) {
                        deliver(s, f->seq, f->len, "unexpected rendezvous");
                        ++s.n.unexp_rndv;
                    }
                    s.rndv_acks_out.emplace_back(f->session, f->seq);
                } else if (attacked_status(s, st)) {
                    /* the sender withdraws its operation on the ack */
                    deliver(s, f->seq, 0, "unexpected rendezvous", true);
                    s.rndv_acks_out.emplace_back(f->session, f->seq);
                } else {
                    ++s.n.errors;
                }
            }
        }
        s.fetches.erase(s.fetches.begin() + static_cast<long>(i));
        delete f;
    }
}

/* ---- sending ---------------------------------------------------------------------------- */

void send_next(Soak &s) {
    const unsigned W   = s.opt.window;
    const uint64_t seq = s.next_seq;
    TxSlot        &t   = s.txs[seq % W];
    if (t.busy) return;
    const size_t len = msg_len(s.opt, s.tx_session, seq);
    char        *buf = s.tx_buf.ptr + (seq % W) * s.opt.max_size;
    const uint64_t tag = make_tag(s.tx_session, seq);
    if (t.filled != tag) { /* not again when the last attempt found no resource */
        for (size_t i = 0; i < len; ++i) buf[i] = static_cast<char>(pattern(s.tx_session, seq, i));
        t.filled = tag;
    }
    const auto    &cap = s.attr.cap.tag;
    uct_iov_t      iov = {buf, len, s.tx_buf.memh, 0, 1};
    ucs_status_t   st;
    t.soak         = &s;
    t.seq          = seq;
    t.session      = s.tx_session;
    t.comp.func    = send_completed;
    t.comp.count   = 1;
    t.comp.status  = UCS_OK;
    if (len <= cap.eager.max_short) {
        st = uct_ep_tag_eager_short(s.ep, tag, buf, len);
    } else if (len <= cap.eager.max_bcopy) {
        struct Arg {
            const char *src;
            size_t      len;
        } arg = {buf, len};
        const ssize_t r = uct_ep_tag_eager_bcopy(
                s.ep, tag, 0,
                [](void *dest, void *a) -> size_t {
                    const Arg *x = static_cast<const Arg *>(a);
                    memcpy(dest, x->src, x->len);
                    return x->len;
                },
                &arg, 0);
        st = (r >= 0) ? UCS_OK : static_cast<ucs_status_t>(r);
    } else if (len <= cap.eager.max_zcopy) {
        st = uct_ep_tag_eager_zcopy(s.ep, tag, 0, &iov, 1, 0, &t.comp);
        if (st == UCS_INPROGRESS) t.busy = true;
    } else {
        const uint64_t   hdr[2] = {seq, len};
        ucs_status_ptr_t h      = uct_ep_tag_rndv_zcopy(s.ep, tag, hdr, sizeof(hdr), &iov, 1, 0, &t.comp);
        if (UCS_PTR_IS_ERR(h)) {
            st = UCS_PTR_STATUS(h);
        } else {
            st        = UCS_INPROGRESS;
            t.busy    = true;
            t.rndv    = h;
            t.rndv_ep = s.ep;
        }
    }
    if (st == UCS_ERR_NO_RESOURCE) return;
    if ((st == UCS_ERR_CONNECTION_RESET) || (st == UCS_ERR_UNREACHABLE)) {
        ++s.n.errors;
        s.ep_failed = true;
        return;
    }
    if ((st != UCS_OK) && (st != UCS_INPROGRESS)) die("send", st);
    ++s.n.sent;
    ++s.next_seq;
}

/* The receiver fetched an unexpected rendezvous itself: withdraw our op. */
void handle_rndv_acks(Soak &s) {
    for (const auto &a : s.rndv_acks_in) {
        TxSlot &t = s.txs[a.second % s.opt.window];
        if (!t.busy || (a.first != t.session) || (t.seq != a.second) || (t.rndv == nullptr)) {
            continue; /* finished meanwhile (completion), or not this op */
        }
        /* On its own endpoint: an acknowledgement that waited in our FIFO
         * (we were stopped) may name an op of an endpoint retired since. */
        const ucs_status_t st = uct_ep_tag_rndv_cancel(t.rndv_ep, t.rndv);
        if ((st != UCS_OK) && (st != UCS_ERR_CONNECTION_RESET)) die("tag_rndv_cancel", st);
        t.busy = false;
        t.rndv = nullptr;
    }
    s.rndv_acks_in.clear();
}

/* ---- decoys --------------------------------------------------------------------------- */

void churn_decoys(Soak &s) {
    if (s.decoys.empty()) return;
    RecvCtx &r = s.decoys[s.rand() % s.decoys.size()];
    if ((r.soak != nullptr) && !r.cancelled) { /* posted: cancel it */
        r.forced    = (s.rand() & 1) != 0;
        r.cancelled = true;
        ++(r.forced ? s.n.decoy_force : s.n.decoy_cancel);
        const ucs_status_t st = uct_iface_tag_recv_cancel(s.iface, &r.ctx, r.forced);
        if (st != UCS_OK) {
            fprintf(stderr, "tm_soak %d: DECOY: cancel (force %d) returned %s\n", s.opt.slot, r.forced,
                    ucs_status_string(st));
            ++s.n.decoy_bad;
        }
        return;
    }
    if ((r.soak != nullptr) && !r.forced && (r.callbacks == 0)) return; /* its callback is due */
    const size_t i = static_cast<size_t>(&r - s.decoys.data());
    r              = RecvCtx{};
    r.ctx.tag_consumed_cb = recv_consumed;
    r.ctx.completed_cb    = recv_completed;
    r.ctx.rndv_cb         = recv_rndv;
    r.soak  = &s;
    r.decoy = true;
    uct_iov_t          iov = {&s.decoy_buf[i * 64], 64, UCT_MEM_HANDLE_NULL, 0, 1};
    const uint64_t     tag = kDecoyBit | (s.mypid << 24) | (++s.decoy_serial & 0xffffff);
    const ucs_status_t st  = uct_iface_tag_recv_zcopy(s.iface, tag, (s.rand() & 1) ? ~0ull : ~0xffull, &iov, 1,
                                                      &r.ctx);
    if (st != UCS_OK) {
        r.soak = nullptr;
    }
}

/* ---- the loop --------------------------------------------------------------------------- */

/* Mode::Cancel receives whose time has come: a non-forced cancel. */
void run_cancels(Soak &s) {
    for (RxSlot &slot : s.rxs) {
        RecvCtx &r = slot.rctx;
        if ((slot.state == RxSlot::Posted) && (r.cancel_at != 0) && (r.cancel_at <= s.prefix + 1) &&
            !r.cancelled && (r.callbacks == 0)) {
            r.cancelled = true;
            const ucs_status_t st = uct_iface_tag_recv_cancel(s.iface, &r.ctx, 0);
            if (st != UCS_OK) {
                fprintf(stderr, "tm_soak %d: CANCEL: message %" PRIu64 "'s receive: cancel returned %s\n",
                        s.opt.slot, r.seq, ucs_status_string(st));
                ++s.n.decoy_bad;
            }
        }
    }
}

void step(Soak &s, bool sending) {
    ++s.steps;
    progress(s);
    run_cancels(s);
    for (uint64_t pid : s.hello_from) {
        if ((s.ep_pid != pid) || s.ep_failed) connect_partner(s);
        open_rx(s, pid);
        post_window(s);
        s.acks_to_send.push_back(pid);
    }
    s.hello_from.clear();
    for (uint64_t pid : s.acked) {
        if ((pid == s.mypid) && (s.tx == Soak::Tx::Hello)) {
            s.tx         = Soak::Tx::Open;
            s.tx_session = session_of(s.mypid, s.ep_pid);
            s.next_seq   = 0;
            s.limit      = 0; /* the receiver's CREDIT opens the window */
            s.done_sent  = false;
        }
    }
    s.acked.clear();
    for (const auto &c : s.credits_in) { /* after the acks: a CREDIT follows its HELLO_ACK */
        if ((s.tx == Soak::Tx::Open) && (c.first == s.tx_session)) s.limit = std::max(s.limit, c.second);
    }
    s.credits_in.clear();
    if ((s.ep == nullptr) || s.ep_failed) connect_partner(s);
    reap_retired(s);
    const double t = now_s();
    if ((s.tx == Soak::Tx::Hello) && (t - s.hello_at > 0.5) && am(s, kAmHello, s.mypid)) {
        s.hello_at = t;
    }
    while (!s.acks_to_send.empty() && am(s, kAmHelloAck, s.acks_to_send.back())) {
        s.acks_to_send.pop_back();
    }
    if ((s.ep == nullptr) || s.ep_failed) s.acks_to_send.clear();
    handle_rndv_acks(s);
    run_fetches(s);
    while (!s.rndv_acks_out.empty() &&
           am(s, kAmRndvAck, (uint64_t{s.rndv_acks_out.back().first} << kSeqBits) | s.rndv_acks_out.back().second)) {
        s.rndv_acks_out.pop_back();
    }
    post_window(s);
    /* (after the HELLO_ACK: the sender takes credits only once it has it) */
    if (s.credit_dirty && (s.rx_session != 0) && (s.ep_pid == s.rx_pid) && s.acks_to_send.empty()) {
        const uint64_t lim = std::min(s.posted_upto, s.prefix + s.opt.window);
        if ((lim == s.credit_sent) || am(s, kAmCredit, (uint64_t{s.rx_session} << kSeqBits) | lim)) {
            s.credit_sent  = lim;
            s.credit_dirty = false;
        }
    }
    if (sending && (s.tx == Soak::Tx::Open) && !s.ep_failed && (s.next_seq < s.limit)) {
        send_next(s);
    }
    if ((s.rand() % 1024) == 0) churn_decoys(s);
}

/* Our sends complete, DONE(count) goes out, the partner's arrive; whatever
 * of the partner's did not is counted (unfinished, lost). */
void drain(Soak &s) {
    const unsigned W   = s.opt.window;
    const double end = now_s() + s.opt.drain_s;
    while ((now_s() < end) && (s.tx == Soak::Tx::Open) && !s.ep_failed && !tx_idle(s)) step(s, false);
    while ((now_s() < end) && (s.tx == Soak::Tx::Open) && !s.ep_failed && !s.done_sent) {
        s.done_sent = am(s, kAmDone, (uint64_t{s.tx_session} << kSeqBits) | s.next_seq);
        step(s, false);
    }
    const bool rx_live = (s.rx_session != 0) && (s.ep_pid == s.rx_pid) && !s.ep_failed;
    while ((now_s() < end) && rx_live && !s.ep_failed && !(s.done_seen && (s.prefix >= s.done_count))) {
        step(s, false);
    }
    if (rx_live && !s.ep_failed) {
        if (!s.done_seen) {
            fprintf(stderr, "tm_soak %d: UNFINISHED: no DONE from the partner (pid %" PRIu64 ") in %.0f s\n",
                    s.opt.slot, s.rx_pid, s.opt.drain_s);
            ++s.n.unfinished;
        } else if (s.prefix < s.done_count) {
            uint64_t missing = 0;
            for (uint64_t q = s.prefix; q < s.done_count; ++q) {
                if (s.delivered_ring[q % W] != q + 1) ++missing;
            }
            fprintf(stderr, "tm_soak %d: LOST: %" PRIu64 " of the partner's %" PRIu64 " messages never "
                            "arrived (first %" PRIu64 ")\n", s.opt.slot, missing, s.done_count, s.prefix);
            s.n.lost += missing;
        }
    }
}

/* Receives cancelled, decoys cancelled, endpoints destroyed. */
void teardown(Soak &s) {
    cancel_rx(s);
    for (RecvCtx &r : s.decoys) {
        if ((r.soak != nullptr) && !r.cancelled) {
            r.forced = r.cancelled = true;
            uct_iface_tag_recv_cancel(s.iface, &r.ctx, 1);
        }
    }
    for (int i = 0; (i < 1000) && !s.fetches.empty(); ++i) {
        progress(s);
        run_fetches(s);
    }
    for (TxSlot &t : s.txs) {
        if (t.busy && (t.rndv != nullptr)) {
            uct_ep_tag_rndv_cancel(t.rndv_ep, t.rndv);
            t.busy = false;
        }
    }
    for (int i = 0; (i < 100000) && !tx_idle(s); ++i) progress(s);
    if (s.ep != nullptr) drop_ep(s);
    for (uct_ep_h ep : s.retired) uct_ep_destroy(ep);
    s.retired.clear();
    progress(s);
    if (s.tx_buf.memh != UCT_MEM_HANDLE_NULL) uct_md_mem_dereg(s.md, s.tx_buf.memh);
    if (s.rx_buf.memh != UCT_MEM_HANDLE_NULL) uct_md_mem_dereg(s.md, s.rx_buf.memh);
}

/* Files opened since the iface was up (fds_init) and still open with every
 * endpoint destroyed, reported: what the connections of all sessions left
 * behind. The partner's current incarnation may legitimately hold one (its
 * attachment as a sender to our FIFO): more is growth with the sessions;
 * returns how many more. */
long held_fds(const Soak &s, const std::vector<std::string> &fds_init) {
    std::vector<std::string> fds_new;
    for (const std::string &f : open_fds()) {
        if (!std::binary_search(fds_init.begin(), fds_init.end(), f)) {
            fds_new.push_back(f);
        }
    }
    const long fds_extra = static_cast<long>(fds_new.size());
    if (fds_extra > 1) {
        /* All of them, the one allowed included: which is the extra is not known. */
        for (const std::string &f : fds_new) {
            fprintf(stderr, "tm_soak %d: FD HELD: %s%s\n", s.opt.slot, f.c_str(),
                    fd_owner(atoi(f.c_str())).c_str());
        }
    }
    return std::max(0L, fds_extra - 1);
}

}  // namespace

int main(int argc, char **argv) {
    Soak s;
    s.opt   = parse(argc, argv);
    s.mypid = static_cast<uint64_t>(getpid());
    s.rng   = mix(s.mypid ^ static_cast<uint64_t>(now_s() * 1e9));
    if (const char *inj = getenv("TM_SOAK_INJECT")) {
        g_inject = !strcmp(inj, "lose")        ? Inject::Lose
                   : !strcmp(inj, "duplicate") ? Inject::Duplicate
                   : !strcmp(inj, "corrupt")   ? Inject::Corrupt
                                               : Inject::None;
    }
    signal(SIGTERM, on_term);
    signal(SIGINT, on_term);
    const std::vector<std::string> fds_start = open_fds();
    open_iface(s);
    const unsigned W = s.opt.window;
    alloc(s, s.tx_buf, W * s.opt.max_size);
    alloc(s, s.rx_buf, W * s.opt.max_size);
    s.txs.resize(W);
    s.rxs.resize(W);
    s.delivered_ring.assign(W, 0);
    s.decoys.resize(s.opt.decoys);
    s.decoy_buf.resize(s.opt.decoys * 64 + 64);
    const std::vector<std::string> fds_init = open_fds();
    publish_address(s);

    double last_prog = 0;
    while (!g_finish) {
        step(s, true);
        const double t = now_s();
        if (t - last_prog > 0.5) {
            write_progress(s);
            last_prog = t;
        }
    }

    drain(s);
    /* A little more progress so the partner's drain completes too. */
    const double linger = now_s() + 0.5;
    while (now_s() < linger) step(s, false);

    teardown(s);
    long fd_leak = held_fds(s, fds_init);
    write_progress(s);
    uct_tm::close_transport_iface(&s);
    /* and everything the MD and iface opened is closed with them */
    for (const std::string &f : open_fds()) {
        if (!std::binary_search(fds_start.begin(), fds_start.end(), f)) {
            fprintf(stderr, "tm_soak %d: FD LEAK after close: %s\n", s.opt.slot, f.c_str());
            ++fd_leak;
        }
    }
    printf("tm_soak slot=%d pid=%" PRIu64 " delivered=%" PRIu64 " bytes=%" PRIu64 " sent=%" PRIu64
           " errors_reported=%" PRIu64 " corrupt=%" PRIu64 " duplicates=%" PRIu64 " lost=%" PRIu64
           " decoy_bad=%" PRIu64 " unfinished=%" PRIu64 " stale=%" PRIu64 " sessions=%" PRIu64
           " fd_leak=%ld expected=%" PRIu64 " unexp_eager=%" PRIu64 " unexp_rndv=%" PRIu64
           " cancelled=%" PRIu64 " cancel_late=%" PRIu64 " decoy_cancel=%" PRIu64
           " decoy_force=%" PRIu64 " attacked_recvs=%" PRIu64 " attacked_sends=%" PRIu64 "\n",
           s.opt.slot, s.mypid, s.n.delivered, s.n.bytes, s.n.sent, s.n.errors, s.n.corrupt,
           s.n.duplicates, s.n.lost, s.n.decoy_bad, s.n.unfinished, s.n.stale, s.n.sessions,
           fd_leak, s.n.expected, s.n.unexp_eager, s.n.unexp_rndv, s.n.cancelled, s.n.cancel_late,
           s.n.decoy_cancel, s.n.decoy_force, s.n.attacked_recvs, s.n.attacked_sends);
    fflush(stdout);
    uct_tm::close_transport_worker(&s);
    free(s.tx_buf.ptr);
    free(s.rx_buf.ptr);
    return 0;
}
