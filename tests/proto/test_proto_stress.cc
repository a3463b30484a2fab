/*
 * Randomized multi-process stress, bounded in count and time: kProcs forked
 * processes over one transport (tm_sm, posix) each send kMsgs messages of
 * random size (empty to rendezvous), tag class, sync or not, inject or not,
 * remote data absent, narrow or wide (the sequence number rides in the
 * tag's upper half, which receives do not match), MORE, a completion level
 * or FENCE on some, to random peers, while keeping a window of random receives posted: any
 * source and class, one class, or one source; by handle with a callback, or
 * in the process's memory without one (over tm_sm with offload, DirectRecvs
 * when the tag list takes them). Checks, in every process:
 * every payload byte and remote data; every message (sender, sequence) received exactly
 * once; messages of one sender and class matched in sending order (in the
 * receives' posting order); every request completes exactly once (leftover
 * receives: UCS_ERR_CANCELED); all sends complete with UCS_OK.
 * About a fifth of the messages are untagged (UCT_TM_PROTO_OP_UNTAGGED,
 * fi_msg), beside a window of three untagged receives (two from any source,
 * one from one; every fourth one from any source a multi-receive buffer,
 * FI_MULTI_RECV, released once less than the largest message is left): an
 * untagged message carries its identity in its remote data, is taken only
 * by an untagged receive, and those of one sender are matched in sending
 * order too (in a multi-receive, in the order of their places in its buffer).
 * Every third receive and send is vectored (uct_tm_proto_recvv / _sendv:
 * the buffer cut into even elements after an empty one; every ninth receive
 * into more elements than tm_sm's tag list takes, the others within it).
 * A child that hangs is killed by alarm(); the parent's waits are bounded.
 */
#include "fd_io.h"
#include "proto_fixture.h"

#include <poll.h>
#include <sys/socket.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdarg>
#include <cstring>
#include <map>
#include <memory>
#include <random>

namespace uct_tm_test {
namespace {

constexpr int      kProcs      = 3;
constexpr int      kMsgs       = 1500; /* sent by each process */
constexpr int      kWindow     = 12;   /* receives kept posted */
constexpr size_t   kUntaggedWindow = 3; /* untagged receives kept posted */
constexpr size_t   kMaxLen     = 170000;
constexpr size_t   kMultiLen   = 3 * kMaxLen; /* a multi-receive's buffer */
constexpr unsigned kChildAlarm = 480; /* above kRunCap: a child stuck outside the loop */
/* A hang is a stall: nothing received and no send completed for kStall. The
 * cap bounds a run that crawls (a debug build in an emulated guest shared
 * with another takes minutes). */
constexpr std::chrono::seconds kStall(60);
constexpr std::chrono::seconds kRunCap(420);
constexpr uint64_t kSeed       = 20261123;

struct Planned {
    int      dest;
    uint64_t tag; /* sequence << 32 | sender << 8 | class (receives match the class bits only);
                   * untagged: class 4, sent as its remote data */
    bool     untagged;
    size_t   len;
    bool     sync, inject;
    bool     has_data; /* remote data: narrow or wide (a rendezvous request over a tag list) */
    uint64_t data;
    unsigned extra;    /* MORE, DELIVERY_COMPLETE, TRANSMIT_COMPLETE, FENCE, or none */
};

/* Every process derives the same plan from the seed. */
std::vector<std::vector<Planned>> make_plan() {
    std::mt19937_64                   rng(kSeed);
    std::vector<std::vector<Planned>> plan(kProcs);
    for (int s = 0; s < kProcs; ++s) {
        for (int i = 0; i < kMsgs; ++i) {
            Planned p;
            p.dest = static_cast<int>(rng() % (kProcs - 1));
            p.dest += (p.dest >= s) ? 1 : 0;
            p.tag  = (uint64_t(i) << 32) | (uint64_t(s) << 8) | (rng() % 4);
            const unsigned kind = rng() % 10;
            p.len    = (kind < 6) ? rng() % 64 : (kind < 9) ? rng() % 70000 : 131072 + rng() % 30000;
            p.sync   = (rng() % 8) == 0;
            p.inject = (rng() % 2) == 0;
            const unsigned data = rng() % 3; /* none, narrow, wide */
            p.has_data = data != 0;
            p.data     = (data == 1) ? rng() & 0xffffffffu : (data == 2) ? rng() | (1ull << 63) : 0;
            const unsigned extra = rng() % 40;
            p.extra = (extra < 10)   ? unsigned{UCT_TM_PROTO_SEND_MORE}
                      : (extra < 14) ? unsigned{UCT_TM_PROTO_SEND_DELIVERY_COMPLETE}
                      : (extra < 18) ? unsigned{UCT_TM_PROTO_SEND_TRANSMIT_COMPLETE}
                      : (extra < 19) ? unsigned{UCT_TM_PROTO_SEND_FENCE}
                                     : 0u;
            p.untagged = (rng() % 5) == 0;
            if (p.untagged) {
                p.tag      = (uint64_t(i) << 32) | (uint64_t(s) << 8) | 4;
                p.has_data = true;
                p.data     = p.tag;
            }
            plan[s].push_back(p);
        }
    }
    return plan;
}

/* `len` bytes at `buf` as an empty element and `pieces` even ones. */
std::vector<uct_tm_proto_iov_t> cut(char *buf, size_t len, size_t pieces) {
    std::vector<uct_tm_proto_iov_t> iov = {{nullptr, 0}};
    for (size_t i = 0; i < pieces; ++i) {
        const size_t from = i * len / pieces, to = (i + 1) * len / pieces;
        iov.push_back({buf + from, to - from});
    }
    return iov;
}

bool xfer(int fd, void *p, size_t n, bool out) {
    return uct_tm::fd_transfer(fd, p, n, out);
}

/* A length-prefixed blob (an address) over the control socket. */
bool send_blob(int fd, std::vector<char> &blob) {
    uint64_t len = blob.size();
    return xfer(fd, &len, 8, true) && xfer(fd, blob.data(), blob.size(), true);
}

bool recv_blob(int fd, std::vector<char> *blob) {
    uint64_t len = 0;
    if (!xfer(fd, &len, 8, false) || (len > 65536)) {
        return false;
    }
    blob->resize(len);
    return xfer(fd, blob->data(), len, false);
}

bool readable(int fd) {
    struct pollfd pfd = {fd, POLLIN, 0};
    return (poll(&pfd, 1, 0) > 0) && (pfd.revents & (POLLIN | POLLHUP));
}

struct Failures {
    int  count = 0;
    void fail(const char *fmt, ...) __attribute__((format(printf, 2, 3))) {
        va_list ap;
        va_start(ap, fmt);
        fprintf(stderr, "stress rank %d: ", getpid());
        vfprintf(stderr, fmt, ap);
        fprintf(stderr, "\n");
        va_end(ap);
        ++count;
    }
};

struct Posted {
    struct Memory {
        alignas(UCT_TM_PROTO_REQUEST_ALIGN) unsigned char bytes[UCT_TM_PROTO_REQUEST_SIZE];
    };
    uct_tm_proto_request_t  req = 0;
    std::unique_ptr<Memory> user; /* set: a receive in this memory, no callback */
    bool                    live = false;
    bool                    claimed = false; /* buffered mode: took a reported message */
    bool                    untagged     = false; /* posted untagged (window of its own) */
    bool                    untagged_any = false; /* untagged, from any source */
    bool                    multi        = false; /* a multi-receive: */
    std::vector<uct_tm_proto_info_t> msgs;        /* its messages as reported */
    size_t                  checked      = 0;     /* of them, checked */
    std::vector<char>       buf;
    int                     completions = 0;
    uct_tm_proto_info_t     info        = {};

    /* A receive in memory counts as completed once when its status turns final. */
    bool completed() {
        if (user && (completions == 0) &&
            (uct_tm_proto_request_user_test(user->bytes, &info) != UCS_INPROGRESS)) {
            completions = 1;
        }
        return completions > 0;
    }
};

void count_completion(void *arg, uct_tm_proto_request_t, const uct_tm_proto_info_t *info) {
    auto *p = static_cast<Posted *>(arg);
    ++p->completions;
    p->info = *info;
}

/* A multi-receive: each message reported, then its release (completions). */
void count_multi(void *arg, uct_tm_proto_request_t, const uct_tm_proto_info_t *info) {
    auto *p = static_cast<Posted *>(arg);
    if (info->flags & UCT_TM_PROTO_INFO_MULTI_RECV) {
        ++p->completions;
        p->info = *info;
    } else {
        p->msgs.push_back(*info);
    }
}

/* What names a message: its tag, or an untagged message's remote data. */
uint64_t identity(const uct_tm_proto_info_t &info) {
    return (info.flags & UCT_TM_PROTO_INFO_UNTAGGED) ? info.data : info.tag;
}

/* Buffered receives: the messages reported, taken in the rank's loop. */
struct Reports {
    std::vector<std::pair<uint64_t, uct_tm_proto_info_t>> msgs;
};

/* One process: `fd` talks to the parent (addresses, then "done" barriers).
 * `buffered`: the worker hands unmatched messages to a callback
 * (UCT_TM_PROTO_WORKER_FIELD_BUFFERED), and the rank takes each with
 * recv_claimed beside its posted receives. */
int run_rank(int rank, int fd, const std::string &transports, bool buffered) {
    Failures                     f;
    const auto                   plan = make_plan();
    uct_tm_proto_worker_params_t wp   = {};
    wp.field_mask = UCT_TM_PROTO_WORKER_FIELD_ID | UCT_TM_PROTO_WORKER_FIELD_UNEXPECTED_CAP |
                    UCT_TM_PROTO_WORKER_FIELD_MAX_PEERS;
    std::string tls;
    apply_transport(transports, &wp, &tls);
    wp.id             = static_cast<uint32_t>(rank + 1);
    wp.unexpected_cap = 256 << 10; /* small: back-pressure happens */
    wp.max_peers      = kProcs;
    wp.field_mask    |= UCT_TM_PROTO_WORKER_FIELD_MIN_MULTI_RECV;
    wp.min_multi_recv = kMaxLen; /* a multi-receive never cuts a message */
    Reports reports;
    if (buffered) {
        wp.field_mask |= UCT_TM_PROTO_WORKER_FIELD_BUFFERED;
        wp.buffered_cb = [](void *arg, uint64_t msg, const uct_tm_proto_info_t *info,
                            const void *, size_t) {
            static_cast<Reports *>(arg)->msgs.emplace_back(msg, *info);
        };
        wp.buffered_arg = &reports;
    }
    std::map<std::pair<int, uint64_t>, int> last_reported; /* (sender, class) -> seq */
    uct_tm_proto_worker_h w;
    if (uct_tm_proto_worker_create(&wp, &w) != UCS_OK) {
        return 90;
    }
    size_t len = 0;
    uct_tm_proto_worker_address(w, nullptr, &len);
    std::vector<char> addr(len);
    if ((uct_tm_proto_worker_address(w, addr.data(), &len) != UCS_OK) || !send_blob(fd, addr)) {
        return 91;
    }
    std::vector<uct_tm_proto_ep_h> eps(kProcs, nullptr);
    std::vector<char>              peer;
    for (int r = 0; r < kProcs; ++r) {
        if (!recv_blob(fd, &peer)) {
            return 92;
        }
        if (r != rank) {
            const ucs_status_t st = uct_tm_proto_ep_create(w, peer.data(), peer.size(), &eps[r]);
            if ((st != UCS_OK) && (st != UCS_INPROGRESS)) {
                return 93;
            }
        }
    }
    /* endpoint addresses: ours to each peer (empty to ourselves) out, each
     * peer's to us back, through the parent; then connect (every transport:
     * over a connect-to-iface one it only checks the address) */
    for (int r = 0; r < kProcs; ++r) {
        std::vector<char> a = (r != rank) ? ep_address(eps[r]) : std::vector<char>();
        if (((r != rank) && a.empty()) || !send_blob(fd, a)) {
            return 95;
        }
    }
    for (int r = 0; r < kProcs; ++r) {
        if (!recv_blob(fd, &peer)) {
            return 96;
        }
        if ((r != rank) && (uct_tm_proto_ep_connect(eps[r], peer.data(), peer.size()) != UCS_OK)) {
            return 97;
        }
    }
    char b = 0;
    if (!xfer(fd, &b, 1, true) || !xfer(fd, &b, 1, false)) { /* all endpoints exist */
        return 94;
    }

    /* what this rank must receive: (sender, seq) -> planned message */
    std::map<std::pair<int, int>, const Planned *> expect;
    for (int s = 0; s < kProcs; ++s) {
        for (int i = 0; i < kMsgs; ++i) {
            if (plan[s][i].dest == rank) {
                expect[{s, i}] = &plan[s][i];
            }
        }
    }
    const size_t to_receive = expect.size();
    std::mt19937_64 rng(kSeed + rank + 1);

    std::vector<std::unique_ptr<Posted>> recvs;   /* posting order */
    size_t                               received = 0;
    std::map<std::pair<int, int>, int>   seen;
    std::vector<std::pair<std::unique_ptr<std::vector<char>>, uct_tm_proto_request_t>> sends;
    int                                  next = 0;
    size_t                               outstanding_recv = 0;
    size_t                               untagged_live    = 0; /* untagged receives posted */
    size_t                               untagged_any     = 0; /* of them, from any source */
    auto check_message = [&](const uct_tm_proto_info_t &info, const char *data) {
        if (info.status != UCS_OK) {
            f.fail("receive status %s", ucs_status_string(info.status));
            return;
        }
        const struct {
            const uct_tm_proto_info_t &info;
            const char                *data;
        } p = {info, data};
        const int s   = static_cast<int>(p.info.source) - 1;
        const int seq = static_cast<int>(identity(p.info) >> 32);
        auto      it  = expect.find({s, seq});
        if (it == expect.end()) {
            f.fail("unplanned message from %d seq %d", s, seq);
            return;
        }
        if (++seen[{s, seq}] != 1) {
            f.fail("message from %d seq %d received twice", s, seq);
        }
        const bool untagged = (p.info.flags & UCT_TM_PROTO_INFO_UNTAGGED) != 0;
        if ((p.info.length != it->second->len) || (untagged != it->second->untagged) ||
            (p.info.tag != (untagged ? 0 : it->second->tag))) {
            f.fail("message from %d seq %d: length %zu tag %llx", s, seq, p.info.length,
                   static_cast<unsigned long long>(p.info.tag));
            return;
        }
        if (((p.info.flags & UCT_TM_PROTO_INFO_REMOTE_DATA) != 0) != it->second->has_data ||
            (it->second->has_data && (p.info.data != it->second->data))) {
            f.fail("message from %d seq %d: remote data %s %llx, sent %s %llx", s, seq,
                   p.info.flags ? "present" : "absent",
                   static_cast<unsigned long long>(p.info.data),
                   it->second->has_data ? "present" : "absent",
                   static_cast<unsigned long long>(it->second->data));
        }
        if (!same_bytes(p.data, pattern(p.info.length, s * 100000 + seq).data(), p.info.length)) {
            f.fail("message from %d seq %d: payload differs", s, seq);
        }
        ++received;
    };
    auto check_recv = [&](Posted &p) {
        if (p.completions != 1) {
            f.fail("receive completed %d times", p.completions);
        }
        check_message(p.info, p.buf.data());
    };
    /* a multi-receive's messages as they are reported, each where it was placed */
    auto check_multi = [&](Posted &p) {
        for (; p.checked < p.msgs.size(); ++p.checked) {
            const uct_tm_proto_info_t &m = p.msgs[p.checked];
            const char *at = static_cast<const char *>(m.buffer);
            if ((at < p.buf.data()) || (at + m.length > p.buf.data() + p.buf.size())) {
                f.fail("a multi-receive reported a message outside its buffer");
                continue;
            }
            check_message(m, at);
        }
    };
    /* a window of filtered receives may match none of the messages still to
     * come: when none has completed for a while, extra any-source any-tag
     * receives (by the clock: a progress call may report events of no
     * receive's, such as the transport's keepalive probes) -- one, then twice
     * as many each 100 ms without a receipt (up to 16), so that a backlog of
     * unexpected messages drains in seconds, not at ten a second. The
     * stall detector catches a hang; a loaded two-CPU guest runs this in 8 to 90 s. */
    size_t     extra = 0;
    size_t     extra_step = 1;
    size_t     received_before = 0;
    auto       last_receipt    = std::chrono::steady_clock::now();
    const auto start     = last_receipt;
    auto       last_got  = start; /* a message received */
    auto       last_sent = start; /* a send completed */
    while ((received < to_receive) || (next < kMsgs) || !sends.empty()) {
        const auto t     = std::chrono::steady_clock::now();
        const auto quiet = t - std::max(last_got, last_sent);
        if ((quiet > kStall) || (t - start > kRunCap)) {
            f.fail("%s: received %zu of %zu, sent %d, %zu sends open",
                   (quiet > kStall) ? "stalled" : "too slow", received, to_receive, next,
                   sends.size());
            break;
        }
        uct_tm_proto_worker_progress(w);
        /* buffered: take what was reported (arrival order: per sender and
         * class, in sending order) */
        for (const auto &[msg, info] : reports.msgs) {
            const int  s   = static_cast<int>(info.source) - 1;
            const auto key = std::make_pair(s, identity(info) & 7);
            const int  seq = static_cast<int>(identity(info) >> 32);
            if ((last_reported.count(key) != 0) && (last_reported[key] >= seq)) {
                f.fail("from %d class %llu: seq %d reported after %d", s,
                       static_cast<unsigned long long>(key.second), seq, last_reported[key]);
            }
            last_reported[key] = seq;
            auto p = std::make_unique<Posted>();
            p->buf.resize(kMaxLen);
            uct_tm_proto_op_params_t op = {};
            op.cb  = count_completion;
            op.arg = p.get();
            const ucs_status_t st =
                    uct_tm_proto_recv_claimed(w, msg, p->buf.data(), kMaxLen, &op, &p->req);
            if (st != UCS_INPROGRESS) {
                f.fail("recv_claimed: %s", ucs_status_string(st));
                continue;
            }
            p->live    = true;
            p->claimed = true;
            recvs.push_back(std::move(p));
        }
        reports.msgs.clear();
        const auto now = std::chrono::steady_clock::now();
        if (received != received_before) {
            received_before = received;
            last_receipt    = now;
            last_got        = now;
            extra_step      = 1;
        } else if ((received < to_receive) && (now - last_receipt > std::chrono::milliseconds(100))) {
            extra += extra_step;
            extra_step   = std::min<size_t>(extra_step * 2, 16);
            last_receipt = now;
        }
        /* keep the window of receives posted */
        while (outstanding_recv < kWindow + extra) {
            auto p  = std::make_unique<Posted>();
            p->buf.resize(kMaxLen);
            uct_tm_proto_op_params_t op = {};
            if ((rng() % 2) == 0) {
                p->user    = std::make_unique<Posted::Memory>();
                op.flags   = UCT_TM_PROTO_OP_USER_REQUEST;
                op.request = p->user->bytes;
            } else {
                op.cb  = count_completion;
                op.arg = p.get();
            }
            const unsigned kind = (outstanding_recv >= kWindow) ? 0 : rng() % 4;
            const uint64_t tag  = rng() % 4;
            const int      src  = static_cast<int>(rng() % kProcs);
            uct_tm_proto_ep_h  source = ((kind == 2) && (src != rank)) ? eps[src] : nullptr;
            const uint64_t     mask   = (kind == 1) ? 0x3 : 0;
            uct_tm_proto_request_t *req = p->user ? nullptr : &p->req;
            ucs_status_t       st;
            if ((recvs.size() % 3) == 1) { /* not an rng draw: the sequence stays */
                const auto iov = cut(p->buf.data(), kMaxLen, ((recvs.size() % 9) == 1) ? 12 : 3);
                st = uct_tm_proto_recvv(w, iov.data(), iov.size(), tag, mask, source, &op, req);
            } else {
                st = uct_tm_proto_recv(w, p->buf.data(), kMaxLen, tag, mask, source, &op, req);
            }
            if (st != UCS_INPROGRESS) {
                f.fail("recv: %s", ucs_status_string(st));
                break;
            }
            p->live = true;
            recvs.push_back(std::move(p));
            ++outstanding_recv;
        }
        /* untagged receives, a window of their own (an untagged message
         * matches nothing else): two from any source, one from a random one */
        while (untagged_live < kUntaggedWindow) {
            auto p  = std::make_unique<Posted>();
            uct_tm_proto_op_params_t op = {};
            op.flags = UCT_TM_PROTO_OP_UNTAGGED;
            p->multi = (untagged_any < 2) && ((rng() % 4) == 0);
            p->buf.resize(p->multi ? kMultiLen : kMaxLen);
            if (p->multi) {
                op.flags |= UCT_TM_PROTO_RECV_MULTI;
                op.cb  = count_multi;
                op.arg = p.get();
            } else if ((rng() % 2) == 0) {
                p->user    = std::make_unique<Posted::Memory>();
                op.flags  |= UCT_TM_PROTO_OP_USER_REQUEST;
                op.request = p->user->bytes;
            } else {
                op.cb  = count_completion;
                op.arg = p.get();
            }
            const int         src    = static_cast<int>(rng() % kProcs);
            uct_tm_proto_ep_h source = ((untagged_any >= 2) && (src != rank)) ? eps[src] : nullptr;
            uct_tm_proto_request_t *req = p->user ? nullptr : &p->req;
            ucs_status_t st;
            if (!p->multi && ((recvs.size() % 3) == 1)) {
                const auto iov = cut(p->buf.data(), kMaxLen, 3);
                st = uct_tm_proto_recvv(w, iov.data(), iov.size(), 0, 0, source, &op, req);
            } else {
                st = uct_tm_proto_recv(w, p->buf.data(), p->buf.size(), 0, 0, source, &op, req);
            }
            if (st != UCS_INPROGRESS) {
                f.fail("untagged recv: %s", ucs_status_string(st));
                break;
            }
            p->live         = true;
            p->untagged     = true;
            p->untagged_any = source == nullptr;
            untagged_any   += p->untagged_any ? 1 : 0;
            ++untagged_live;
            recvs.push_back(std::move(p));
        }
        for (auto &p : recvs) {
            if (p->live && p->multi) {
                check_multi(*p);
                if (p->completions != 0) { /* released */
                    if ((p->completions != 1) || (p->info.status != UCS_OK) ||
                        !(p->info.flags & UCT_TM_PROTO_INFO_MULTI_RECV) ||
                        (p->buf.size() - p->info.length >= kMaxLen)) {
                        f.fail("multi-receive released %d times, %s, %zu bytes taken",
                               p->completions, ucs_status_string(p->info.status), p->info.length);
                    }
                    uct_tm_proto_request_release(w, p->req);
                    p->live = false;
                    --untagged_live;
                    --untagged_any;
                }
                continue;
            }
            if (p->live && p->completed()) {
                check_recv(*p);
                if (!p->user) {
                    uct_tm_proto_request_release(w, p->req);
                }
                p->live = false;
                if (p->untagged) {
                    --untagged_live;
                    untagged_any -= p->untagged_any ? 1 : 0;
                } else if (!p->claimed) {
                    --outstanding_recv;
                }
            }
        }
        /* send, a few at a time */
        if ((next < kMsgs) && (sends.size() < 8)) {
            const Planned &m    = plan[rank][next];
            auto           data = std::make_unique<std::vector<char>>(pattern(m.len, rank * 100000 + next));
            uct_tm_proto_op_params_t op = {};
            op.flags = (m.sync ? UCT_TM_PROTO_SEND_SYNC : 0) | (m.inject ? UCT_TM_PROTO_SEND_INJECT : 0) |
                       m.extra | (m.untagged ? UCT_TM_PROTO_OP_UNTAGGED : 0);
            if (m.has_data) {
                op.flags |= UCT_TM_PROTO_SEND_REMOTE_DATA;
                op.data   = m.data;
            }
            uct_tm_proto_request_t req;
            ucs_status_t st;
            if ((next % 3) == 1) {
                const auto iov = cut(data->data(), m.len, 3);
                st = uct_tm_proto_sendv(eps[m.dest], iov.data(), iov.size(), m.tag, &op, &req);
            } else {
                st = uct_tm_proto_send(eps[m.dest], data->data(), m.len, m.tag, &op, &req);
            }
            if (st == UCS_INPROGRESS) {
                if (m.inject) {
                    std::fill(data->begin(), data->end(), 0); /* the layer copied it */
                }
                sends.emplace_back(std::move(data), req);
            } else if (st != UCS_OK) {
                f.fail("send: %s", ucs_status_string(st));
            }
            ++next;
        }
        for (size_t i = 0; i < sends.size();) {
            const ucs_status_t st = uct_tm_proto_request_test(w, sends[i].second, nullptr);
            if (st == UCS_INPROGRESS) {
                ++i;
                continue;
            }
            if (st != UCS_OK) {
                f.fail("send completed with %s", ucs_status_string(st));
            }
            uct_tm_proto_request_release(w, sends[i].second);
            sends.erase(sends.begin() + i);
            last_sent = std::chrono::steady_clock::now();
        }
    }
    /* per sender and class, matched in sending order (receives in posting order) */
    std::map<std::pair<int, uint64_t>, int> last;
    auto matched = [&](const uct_tm_proto_info_t &info) {
        const int  s   = static_cast<int>(info.source) - 1;
        const auto key = std::make_pair(s, identity(info) & 7);
        const int  seq = static_cast<int>(identity(info) >> 32);
        if ((last.count(key) != 0) && (last[key] >= seq)) {
            f.fail("from %d class %llu: seq %d matched after %d", s,
                   static_cast<unsigned long long>(key.second), seq, last[key]);
        }
        last[key] = seq;
    };
    for (auto &p : recvs) {
        if (p->multi) {
            /* its messages in the order of their places; an empty message
             * shares its place with the next one, and came before it (in
             * the order reported: it is eager, reported when matched) */
            std::vector<uct_tm_proto_info_t> placed = p->msgs;
            std::stable_sort(placed.begin(), placed.end(),
                             [](const uct_tm_proto_info_t &a, const uct_tm_proto_info_t &b) {
                                 const char *pa = static_cast<const char *>(a.buffer);
                                 const char *pb = static_cast<const char *>(b.buffer);
                                 return (pa != pb) ? (pa < pb) : ((a.length == 0) && (b.length != 0));
                             });
            for (const auto &m : placed) {
                matched(m);
            }
            continue;
        }
        /* a taken message was delivered when reported (checked above) */
        if ((p->completions == 1) && (p->info.status == UCS_OK) && !p->claimed) {
            matched(p->info);
        }
    }
    /* everyone done: keep answering peers until the parent says all are */
    b = 0;
    xfer(fd, &b, 1, true);
    while (!readable(fd)) {
        uct_tm_proto_worker_progress(w);
    }
    xfer(fd, &b, 1, false);
    /* leftover receives: cancelled, exactly once. A multi-receive whose last
     * message was reported in the last progress call may be released already
     * (its completion is delivered by the next call): cancel finds it final,
     * and it completes as released, having taken no further message. */
    std::vector<bool> released_first(recvs.size(), false);
    for (size_t i = 0; i < recvs.size(); ++i) {
        Posted &p = *recvs[i];
        if (p.live) {
            const ucs_status_t st = p.user ? uct_tm_proto_request_cancel_user(w, p.user->bytes)
                                           : uct_tm_proto_request_cancel(w, p.req);
            released_first[i] = p.multi && (st == UCS_ERR_NO_ELEM);
            if ((st != UCS_OK) && !released_first[i]) {
                f.fail("cancel of a leftover receive failed: %s", ucs_status_string(st));
            }
        }
    }
    for (int i = 0; i < 1000; ++i) {
        uct_tm_proto_worker_progress(w);
    }
    for (size_t i = 0; i < recvs.size(); ++i) {
        auto &p = recvs[i];
        if (p->live && p->multi && (p->checked != p->msgs.size())) {
            f.fail("a multi-receive took %zu messages after the traffic ended",
                   p->msgs.size() - p->checked);
            check_multi(*p);
        }
        const ucs_status_t want = released_first[i] ? UCS_OK : UCS_ERR_CANCELED;
        if (p->live) {
            if (!p->completed() || (p->completions != 1) || (p->info.status != want)) {
                f.fail("leftover receive (%s%s%s%s): %d completions, %s, from %d id %llx "
                       "length %zu flags %x",
                       p->user ? "user memory" : "callback", p->claimed ? ", claimed" : "",
                       p->untagged ? ", untagged" : "", p->multi ? ", multi" : "",
                       p->completions, ucs_status_string(p->info.status),
                       static_cast<int>(p->info.source) - 1,
                       static_cast<unsigned long long>(identity(p->info)), p->info.length,
                       p->info.flags);
            }
            if (!p->user) {
                uct_tm_proto_request_release(w, p->req);
            }
        } else if (p->user && (uct_tm_proto_request_user_test(p->user->bytes, nullptr) !=
                               p->info.status)) {
            f.fail("a completed receive's status changed afterwards");
        }
    }
    if (received != to_receive) {
        f.fail("received %zu of %zu", received, to_receive);
    }
    uct_tm_proto_worker_destroy(w);
    return std::min(f.count, 50);
}

class ProtoStress : public ::testing::TestWithParam<std::string> {};

void run_stress(const std::string &transports, bool buffered) {
    std::vector<pid_t> pids;
    std::vector<int>   fds;
    for (int r = 0; r < kProcs; ++r) {
        int sv[2];
        ASSERT_EQ(0, socketpair(AF_UNIX, SOCK_STREAM, 0, sv));
        fflush(stdout);
        fflush(stderr);
        const pid_t pid = fork();
        ASSERT_GE(pid, 0);
        if (pid == 0) {
            close(sv[0]);
            alarm(kChildAlarm);
            _exit(run_rank(r, sv[1], transports, buffered));
        }
        close(sv[1]);
        pids.push_back(pid);
        fds.push_back(sv[0]);
    }
    /* gather and broadcast the addresses */
    std::vector<std::vector<char>> addrs(kProcs);
    bool                           ok = true;
    for (int r = 0; ok && (r < kProcs); ++r) {
        ok = recv_blob(fds[r], &addrs[r]);
    }
    for (int r = 0; ok && (r < kProcs); ++r) {
        for (int k = 0; ok && (k < kProcs); ++k) {
            ok = send_blob(fds[r], addrs[k]);
        }
    }
    /* endpoint addresses: rank r's to k, relayed to k */
    std::vector<std::vector<std::vector<char>>> ep_addrs(kProcs, std::vector<std::vector<char>>(kProcs));
    for (int r = 0; ok && (r < kProcs); ++r) {
        for (int k = 0; ok && (k < kProcs); ++k) {
            ok = recv_blob(fds[r], &ep_addrs[r][k]);
        }
    }
    for (int k = 0; ok && (k < kProcs); ++k) {
        for (int r = 0; ok && (r < kProcs); ++r) {
            ok = send_blob(fds[k], ep_addrs[r][k]);
        }
    }
    char b = 0;
    for (int pass = 0; pass < 2; ++pass) { /* endpoints connected; then traffic done */
        for (int r = 0; ok && (r < kProcs); ++r) {
            ok = xfer(fds[r], &b, 1, false);
        }
        for (int r = 0; ok && (r < kProcs); ++r) {
            ok = xfer(fds[r], &b, 1, true);
        }
    }
    EXPECT_TRUE(ok) << "a rank died before the end of the exchange";
    for (int r = 0; r < kProcs; ++r) {
        int status = 0;
        if (!ok) {
            kill(pids[r], SIGKILL);
        }
        waitpid(pids[r], &status, 0);
        close(fds[r]);
        EXPECT_TRUE(WIFEXITED(status) && (WEXITSTATUS(status) == 0))
                << "rank " << r << ": status " << status;
    }
}

TEST_P(ProtoStress, RandomTrafficEveryMessageOnce) { run_stress(GetParam(), false); }

/* The same traffic with buffered receives: unmatched messages reported and
 * taken with recv_claimed beside the posted window. */
TEST_P(ProtoStress, RandomTrafficBufferedEveryMessageOnce) { run_stress(GetParam(), true); }

INSTANTIATE_TEST_SUITE_P(transports, ProtoStress,
                         ::testing::ValuesIn(test_transports({"tm_sm", "tm_sm+sw", "posix"})),
                         transport_name);

}  // namespace
}  // namespace uct_tm_test
