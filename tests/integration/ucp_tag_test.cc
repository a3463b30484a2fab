/*
 * ucp_tag_test: UCP's tag API between two processes over whatever UCX_TLS selects (the
 * driver runs it with tm_sm), asserting payloads, statuses, sender tags and lengths.
 *
 * Cases: activation by an unexpected message, exact / masked / wildcard receives of eager
 * and rendezvous sizes, expected and unexpected, synchronous sends, ucp_tag_probe_nb with
 * and without remove (+ ucp_tag_msg_recv_nbx), cancel of a posted receive, truncation
 * (eager and rendezvous, posted and unexpected) with a guard area behind every receive
 * buffer, and every receive completing exactly once.
 *
 * The parent forks the receiver (its stderr captured) and the sender. With
 * UCX_TM_SM_PRINT_STATS=y (set here) tm_sm prints its counters when the receiver's iface
 * closes; the parent parses that line and asserts that receives were posted into tm_sm's
 * tag list, matched there and cancelled there (UCP offload active). --no-offload-check
 * skips that (for transports other than tm_sm).
 *
 * Exit: 0 pass, 1 failure (each failure printed), 77 when no UCP transport connects.
 */
#include <ucp/api/ucp.h>

#include <poll.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <type_traits>
#include <vector>

namespace {

constexpr uint64_t kSenderMask = 0xffff000000000000ull; /* top 16 bits name the sender */
constexpr uint64_t kSenderId   = 0x0001000000000000ull;
constexpr size_t   kGuard      = 64;                    /* bytes checked behind each buffer */
constexpr uint8_t  kGuardByte  = 0xe7;
constexpr auto     kTimeout    = std::chrono::seconds(30);

int failures = 0;

void expect(bool ok, const std::string &what) {
    if (!ok) {
        ++failures;
        fprintf(stdout, "FAIL: %s\n", what.c_str());
        fflush(stdout);
    }
}

uint8_t pattern(unsigned seed, size_t offset) {
    return static_cast<uint8_t>(seed * 131u + offset * 7u + (offset >> 9));
}

/* How a case is driven; both processes walk the same table in the same order. */
enum class Kind {
    Expected,     /* receiver posts, then the sender sends */
    Unexpected,   /* the sender sends, then the receiver receives */
    SyncExpected, /* as Expected, with ucp_tag_send_sync_nbx */
    ProbeKeep,    /* unexpected; probe without remove, then ucp_tag_recv_nbx */
    ProbeRemove,  /* unexpected; probe with remove, then ucp_tag_msg_recv_nbx */
    Cancel,       /* receiver posts and cancels; nothing is sent */
};

struct Case {
    const char *name;
    Kind        kind;
    size_t      send_len;
    size_t      recv_len;
    uint64_t    tag;      /* the sent tag (kSenderId is or-ed in) */
    uint64_t    recv_tag; /* the receive's tag and mask */
    uint64_t    mask;
    ucs_status_t expect_status;
    bool        posted;   /* expected to be posted into the transport's tag list */
};

constexpr uint64_t kFull = ~0ull;

/* Receives of at least UCX_TM_THRESH (1024) bytes with a specific sender are posted once
 * offload is active, which the first case does (an unexpected message). It is at least
 * UCX_TM_THRESH long so that UCP also learns which iface this sender uses: with several
 * ifaces (UCX_TLS=tm_sm,self) UCP posts only for senders seen through such a message. */
const std::vector<Case> &cases() {
    static const std::vector<Case> table = {
        {"activate: unexpected 4 KiB", Kind::Unexpected, 4096, 4096, 1, 1, kFull, UCS_OK, false},
        {"exact eager 2 KiB", Kind::Expected, 2048, 2048, 2, 2, kFull, UCS_OK, true},
        {"exact eager 16 KiB", Kind::Expected, 16384, 16384, 3, 3, kFull, UCS_OK, true},
        {"exact rndv 256 KiB", Kind::Expected, 256 << 10, 256 << 10, 4, 4, kFull, UCS_OK, true},
        {"exact rndv 1 MiB", Kind::Expected, 1 << 20, 1 << 20, 5, 5, kFull, UCS_OK, true},
        {"exact rndv 1 MiB into 2 MiB", Kind::Expected, 1 << 20, 2 << 20, 6, 6, kFull, UCS_OK,
         true},
        {"masked eager 4 KiB", Kind::Expected, 4096, 4096, 0x7a5, 0x700, ~0xffull, UCS_OK, true},
        {"masked rndv 512 KiB", Kind::Expected, 512 << 10, 512 << 10, 0x8c3, 0x800, ~0xffull,
         UCS_OK, true},
        {"wildcard tag eager 8 KiB", Kind::Expected, 8192, 8192, 0x91, 0, kSenderMask, UCS_OK,
         true},
        {"wildcard any eager 4 KiB", Kind::Expected, 4096, 4096, 0xa1, 0, 0, UCS_OK, false},
        {"wildcard any rndv 1 MiB", Kind::Expected, 1 << 20, 1 << 20, 0xa2, 0, 0, UCS_OK, false},
        {"sync eager 4 KiB", Kind::SyncExpected, 4096, 4096, 0xb1, 0xb1, kFull, UCS_OK, true},
        {"sync eager 64 B", Kind::SyncExpected, 64, 64, 0xb2, 0xb2, kFull, UCS_OK, false},
        {"unexpected eager 32 KiB", Kind::Unexpected, 32768, 32768, 0xc1, 0xc1, kFull, UCS_OK,
         false},
        {"unexpected rndv 1 MiB", Kind::Unexpected, 1 << 20, 1 << 20, 0xc2, 0xc2, kFull, UCS_OK,
         false},
        {"probe keep eager 2 KiB", Kind::ProbeKeep, 2048, 2048, 0xd1, 0xd1, kFull, UCS_OK, false},
        {"probe remove eager 4 KiB", Kind::ProbeRemove, 4096, 4096, 0xd2, 0xd2, kFull, UCS_OK,
         false},
        {"probe remove rndv 1 MiB", Kind::ProbeRemove, 1 << 20, 1 << 20, 0xd3, 0xd3, kFull,
         UCS_OK, false},
        {"cancel posted 4 KiB", Kind::Cancel, 0, 4096, 0, 0xe1, kFull, UCS_ERR_CANCELED, true},
        {"cancel posted 1 MiB", Kind::Cancel, 0, 1 << 20, 0, 0xe2, kFull, UCS_ERR_CANCELED, true},
        {"truncated posted eager 4 KiB into 2 KiB", Kind::Expected, 4096, 2048, 0xf1, 0xf1,
         kFull, UCS_ERR_MESSAGE_TRUNCATED, true},
        {"truncated posted rndv 1 MiB into 64 KiB", Kind::Expected, 1 << 20, 64 << 10, 0xf2,
         0xf2, kFull, UCS_ERR_MESSAGE_TRUNCATED, true},
        {"truncated unexpected eager 4 KiB into 2 KiB", Kind::Unexpected, 4096, 2048, 0xf3,
         0xf3, kFull, UCS_ERR_MESSAGE_TRUNCATED, false},
        {"truncated unexpected rndv 1 MiB into 64 KiB", Kind::Unexpected, 1 << 20, 64 << 10,
         0xf4, 0xf4, kFull, UCS_ERR_MESSAGE_TRUNCATED, false},
        {"exact eager 2 KiB after truncation", Kind::Expected, 2048, 2048, 0xf5, 0xf5, kFull,
         UCS_OK, true},
    };
    return table;
}

/* ---- one UCP endpoint process --------------------------------------------------- */

class Peer {
public:
    explicit Peer(int fd) : fd_(fd) {}
    ~Peer() {
        if (worker_ != nullptr) {
            ucp_worker_destroy(worker_);
        }
        if (context_ != nullptr) {
            ucp_cleanup(context_);
        }
    }
    Peer(const Peer &) = delete;
    Peer &operator=(const Peer &) = delete;

    bool open() {
        ucp_params_t params{};
        params.field_mask      = UCP_PARAM_FIELD_FEATURES | UCP_PARAM_FIELD_TAG_SENDER_MASK;
        params.features        = UCP_FEATURE_TAG;
        params.tag_sender_mask = kSenderMask;
        if (ucp_init(&params, nullptr, &context_) != UCS_OK) {
            return false;
        }
        ucp_worker_params_t wparams{};
        wparams.field_mask  = UCP_WORKER_PARAM_FIELD_THREAD_MODE;
        wparams.thread_mode = UCS_THREAD_MODE_SINGLE;
        return ucp_worker_create(context_, &wparams, &worker_) == UCS_OK;
    }

    /* Exchanges worker addresses over the socket and connects to the other process. */
    bool connect() {
        ucp_address_t *address = nullptr;
        size_t         length  = 0;
        if (ucp_worker_get_address(worker_, &address, &length) != UCS_OK) {
            return false;
        }
        uint64_t len64 = length;
        bool     sent  = write_all(&len64, sizeof(len64)) && write_all(address, length);
        ucp_worker_release_address(worker_, address);
        uint64_t peer_len = 0;
        if (!sent || !read_all(&peer_len, sizeof(peer_len)) || peer_len > (1u << 20)) {
            return false;
        }
        std::vector<char> peer(peer_len);
        if (!read_all(peer.data(), peer_len)) {
            return false;
        }
        ucp_ep_params_t eparams{};
        eparams.field_mask = UCP_EP_PARAM_FIELD_REMOTE_ADDRESS;
        eparams.address    = reinterpret_cast<const ucp_address_t *>(peer.data());
        return ucp_ep_create(worker_, &eparams, &ep_) == UCS_OK;
    }

    void close_ep() {
        ucp_request_param_t param{};
        param.op_attr_mask = UCP_OP_ATTR_FIELD_FLAGS;
        param.flags        = 0; /* flush */
        void *req          = ucp_ep_close_nbx(ep_, &param);
        wait(req);
    }

    /* Progresses the worker until a signal byte arrives from the other process. */
    bool wait_signal(uint8_t expected) {
        const auto deadline = std::chrono::steady_clock::now() + kTimeout;
        for (;;) {
            ucp_worker_progress(worker_);
            pollfd pfd{fd_, POLLIN, 0};
            if (poll(&pfd, 1, 0) == 1) {
                uint8_t got = 0;
                return read_all(&got, 1) && got == expected;
            }
            if (std::chrono::steady_clock::now() > deadline) {
                return false;
            }
        }
    }
    bool signal(uint8_t value) { return write_all(&value, 1); }

    /* Progresses until the request completes; returns its status (UCS_ERR_TIMED_OUT if not). */
    ucs_status_t wait(void *req) {
        if (req == nullptr) {
            return UCS_OK;
        }
        if (UCS_PTR_IS_ERR(req)) {
            return UCS_PTR_STATUS(req);
        }
        const auto   deadline = std::chrono::steady_clock::now() + kTimeout;
        ucs_status_t status;
        while ((status = ucp_request_check_status(req)) == UCS_INPROGRESS) {
            ucp_worker_progress(worker_);
            if (std::chrono::steady_clock::now() > deadline) {
                return UCS_ERR_TIMED_OUT;
            }
        }
        ucp_request_free(req);
        return status;
    }

    void progress_for(std::chrono::milliseconds time) {
        const auto until = std::chrono::steady_clock::now() + time;
        while (std::chrono::steady_clock::now() < until) {
            ucp_worker_progress(worker_);
        }
    }

    ucp_worker_h worker() const { return worker_; }
    ucp_ep_h     ep() const { return ep_; }

private:
    bool write_all(const void *data, size_t length) {
        return whole(data, length, [this](const void *p, size_t n) { return ::write(fd_, p, n); });
    }
    bool read_all(void *data, size_t length) {
        return whole(data, length, [this](void *p, size_t n) { return ::read(fd_, p, n); });
    }
    /* Repeats a read or write until all of the buffer went through (or it failed). */
    template <typename Byte, typename Io> static bool whole(Byte *data, size_t length, Io io) {
        auto *p = static_cast<std::conditional_t<std::is_const_v<Byte>, const char, char> *>(data);
        while (length > 0) {
            ssize_t n = io(p, length);
            if (n <= 0) {
                return false;
            }
            p += n;
            length -= static_cast<size_t>(n);
        }
        return true;
    }

    int             fd_;
    ucp_context_h   context_ = nullptr;
    ucp_worker_h    worker_  = nullptr;
    ucp_ep_h        ep_      = nullptr;
};

/* ---- receiver ---------------------------------------------------------------------- */

struct RecvResult {
    int                 completions = 0;
    ucs_status_t        status      = UCS_INPROGRESS;
    ucp_tag_recv_info_t info{};
};

void on_recv(void *, ucs_status_t status, const ucp_tag_recv_info_t *info, void *user_data) {
    auto *result = static_cast<RecvResult *>(user_data);
    ++result->completions;
    result->status = status;
    result->info   = *info;
}

ucp_request_param_t recv_param(RecvResult *result) {
    ucp_request_param_t param{};
    /* NO_IMM_CMPL: a receive that matches an unexpected message at once still reports
     * through the callback, so every receive is checked the same way. */
    param.op_attr_mask = UCP_OP_ATTR_FIELD_CALLBACK | UCP_OP_ATTR_FIELD_USER_DATA |
                         UCP_OP_ATTR_FIELD_DATATYPE | UCP_OP_ATTR_FLAG_NO_IMM_CMPL;
    param.cb.recv   = on_recv;
    param.user_data = result;
    param.datatype  = ucp_dt_make_contig(1);
    return param;
}

void check_received(const Case &c, unsigned seed, const std::vector<uint8_t> &buffer,
                    const RecvResult &result, ucs_status_t waited) {
    const std::string name = c.name;
    expect(waited != UCS_ERR_TIMED_OUT, name + ": receive completed");
    expect(result.completions == 1,
           name + ": completed exactly once (" + std::to_string(result.completions) + ")");
    expect(result.status == c.expect_status,
           name + ": status " + ucs_status_string(result.status) + ", expected " +
                   ucs_status_string(c.expect_status));
    const uint64_t sent_tag = c.tag | kSenderId;
    if (c.expect_status != UCS_ERR_CANCELED) {
        expect(result.info.sender_tag == sent_tag, name + ": sender tag");
    }
    if (c.expect_status == UCS_OK) {
        expect(result.info.length == c.send_len,
               name + ": length " + std::to_string(result.info.length));
        size_t bad = c.send_len;
        for (size_t i = 0; i < c.send_len; ++i) {
            if (buffer[i] != pattern(seed, i)) {
                bad = i;
                break;
            }
        }
        expect(bad == c.send_len, name + ": payload differs at byte " + std::to_string(bad));
    }
    bool guard_ok = true;
    for (size_t i = c.recv_len; i < c.recv_len + kGuard; ++i) {
        guard_ok = guard_ok && buffer[i] == kGuardByte;
    }
    expect(guard_ok, name + ": nothing written past the receive buffer");
}

ucp_tag_message_h probe(Peer &peer, const Case &c, int remove, ucp_tag_recv_info_t *info) {
    const auto deadline = std::chrono::steady_clock::now() + kTimeout;
    for (;;) {
        ucp_tag_message_h msg =
                ucp_tag_probe_nb(peer.worker(), c.recv_tag | kSenderId, c.mask, remove, info);
        if (msg != nullptr || std::chrono::steady_clock::now() > deadline) {
            return msg;
        }
        ucp_worker_progress(peer.worker());
    }
}

void receive_case(Peer &peer, const Case &c, unsigned seed) {
    std::vector<uint8_t> buffer(c.recv_len + kGuard, kGuardByte);
    RecvResult           result;
    ucp_request_param_t  param    = recv_param(&result);
    const uint64_t       recv_tag = c.mask == 0 ? 0 : (c.recv_tag | kSenderId);
    const std::string    name     = c.name;
    void                *req      = nullptr;

    switch (c.kind) {
    case Kind::Expected:
    case Kind::SyncExpected:
        req = ucp_tag_recv_nbx(peer.worker(), buffer.data(), c.recv_len, recv_tag, c.mask,
                               &param);
        expect(peer.signal(static_cast<uint8_t>(seed)), name + ": signal");
        break;
    case Kind::Unexpected:
        expect(peer.wait_signal(static_cast<uint8_t>(seed)), name + ": sender signal");
        peer.progress_for(std::chrono::milliseconds(2)); /* let it land unexpected */
        req = ucp_tag_recv_nbx(peer.worker(), buffer.data(), c.recv_len, recv_tag, c.mask,
                               &param);
        break;
    case Kind::ProbeKeep:
    case Kind::ProbeRemove: {
        expect(peer.wait_signal(static_cast<uint8_t>(seed)), name + ": sender signal");
        const int           remove = c.kind == Kind::ProbeRemove;
        ucp_tag_recv_info_t info{};
        ucp_tag_message_h   msg = probe(peer, c, remove, &info);
        expect(msg != nullptr, name + ": probe found the message");
        if (msg == nullptr) {
            return;
        }
        expect(info.sender_tag == (c.tag | kSenderId), name + ": probe sender tag");
        expect(info.length == c.send_len,
               name + ": probe length " + std::to_string(info.length));
        if (remove) {
            ucp_tag_recv_info_t again{};
            expect(ucp_tag_probe_nb(peer.worker(), recv_tag, c.mask, 0, &again) == nullptr,
                   name + ": a removed message is not probed again");
            req = ucp_tag_msg_recv_nbx(peer.worker(), buffer.data(), c.recv_len, msg, &param);
        } else {
            req = ucp_tag_recv_nbx(peer.worker(), buffer.data(), c.recv_len, recv_tag, c.mask,
                                   &param);
        }
        break;
    }
    case Kind::Cancel:
        req = ucp_tag_recv_nbx(peer.worker(), buffer.data(), c.recv_len, recv_tag, c.mask,
                               &param);
        peer.progress_for(std::chrono::milliseconds(1));
        expect(result.completions == 0, name + ": not completed before the cancel");
        ucp_request_cancel(peer.worker(), req);
        expect(peer.signal(static_cast<uint8_t>(seed)), name + ": signal");
        break;
    }
    ucs_status_t waited = peer.wait(req);
    peer.progress_for(std::chrono::milliseconds(1)); /* a second completion would show now */
    check_received(c, seed, buffer, result, waited);
}

/* ---- sender ------------------------------------------------------------------------- */

void send_case(Peer &peer, const Case &c, unsigned seed) {
    const std::string name = c.name;
    if (c.kind == Kind::Cancel) {
        expect(peer.wait_signal(static_cast<uint8_t>(seed)), name + ": receiver signal");
        return;
    }
    std::vector<uint8_t> data(c.send_len);
    for (size_t i = 0; i < c.send_len; ++i) {
        data[i] = pattern(seed, i);
    }
    const bool receiver_first = c.kind == Kind::Expected || c.kind == Kind::SyncExpected;
    if (receiver_first) {
        expect(peer.wait_signal(static_cast<uint8_t>(seed)), name + ": receiver signal");
    }
    ucp_request_param_t param{};
    param.op_attr_mask = UCP_OP_ATTR_FIELD_DATATYPE;
    param.datatype     = ucp_dt_make_contig(1);
    void *req = c.kind == Kind::SyncExpected
                        ? ucp_tag_send_sync_nbx(peer.ep(), data.data(), c.send_len,
                                                c.tag | kSenderId, &param)
                        : ucp_tag_send_nbx(peer.ep(), data.data(), c.send_len,
                                           c.tag | kSenderId, &param);
    if (!receiver_first) {
        expect(peer.signal(static_cast<uint8_t>(seed)), name + ": signal");
    }
    ucs_status_t status = peer.wait(req);
    expect(status == UCS_OK, name + ": send status " + ucs_status_string(status));
}

enum Role { kReceiver, kSender };

int run_peer(Role role, int fd) {
    Peer peer(fd);
    if (!peer.open() || !peer.connect()) {
        fprintf(stdout, "SKIP: UCP could not connect the two processes (UCX_TLS=%s)\n",
                getenv("UCX_TLS") ? getenv("UCX_TLS") : "");
        return 77;
    }
    unsigned seed = 1;
    for (const Case &c : cases()) {
        if (role == kReceiver) {
            receive_case(peer, c, seed);
        } else {
            send_case(peer, c, seed);
        }
        ++seed;
    }
    /* Done: each side closes its endpoint while the other still progresses. */
    if (role == kSender) {
        peer.close_ep();
        expect(peer.signal(0xff), "sender closed");
        expect(peer.wait_signal(0xfe), "receiver closed");
    } else {
        expect(peer.wait_signal(0xff), "sender closed");
        peer.close_ep();
        expect(peer.signal(0xfe), "receiver closed");
    }
    return failures == 0 ? 0 : 1;
}

/* ---- parent: runs both, checks tm_sm's counters ------------------------------------ */

struct TagListCounters {
    bool          found = false;
    unsigned long posted = 0, matched = 0, cancelled = 0;
};

TagListCounters parse_counters(const std::string &text, pid_t pid) {
    TagListCounters counters;
    const std::string key = "(pid " + std::to_string(pid) + "):";
    size_t            at  = text.find(key);
    if (at == std::string::npos) {
        return counters;
    }
    at = text.find("tag list:", at);
    if (at != std::string::npos &&
        sscanf(text.c_str() + at, "tag list: %lu posted, %lu matched, %lu cancelled",
               &counters.posted, &counters.matched, &counters.cancelled) == 3) {
        counters.found = true;
    }
    return counters;
}

int exit_code(int wstatus) { return WIFEXITED(wstatus) ? WEXITSTATUS(wstatus) : 128; }

}  // namespace

int main(int argc, char **argv) {
    bool offload_check = !(argc > 1 && strcmp(argv[1], "--no-offload-check") == 0);
    setenv("UCX_TM_SM_PRINT_STATS", "y", 1);
    setvbuf(stdout, nullptr, _IONBF, 0);

    int sv[2], errpipe[2];
    if (socketpair(AF_UNIX, SOCK_STREAM, 0, sv) != 0 || pipe(errpipe) != 0) {
        perror("socketpair/pipe");
        return 1;
    }
    pid_t receiver = fork();
    if (receiver == 0) {
        close(sv[1]);
        close(errpipe[0]);
        dup2(errpipe[1], STDERR_FILENO);
        _exit(run_peer(kReceiver, sv[0]));
    }
    close(errpipe[1]);
    pid_t sender = fork();
    if (sender == 0) {
        close(sv[0]);
        close(errpipe[0]);
        _exit(run_peer(kSender, sv[1]));
    }
    close(sv[0]);
    close(sv[1]);

    std::string receiver_err;
    char        chunk[4096];
    ssize_t     n;
    while ((n = read(errpipe[0], chunk, sizeof(chunk))) > 0) {
        receiver_err.append(chunk, static_cast<size_t>(n));
    }
    close(errpipe[0]);
    fputs(receiver_err.c_str(), stderr);

    int rstatus = 0, sstatus = 0;
    waitpid(receiver, &rstatus, 0);
    waitpid(sender, &sstatus, 0);
    const int rc = exit_code(rstatus), sc = exit_code(sstatus);
    if (rc == 77 || sc == 77) {
        return 77;
    }
    expect(rc == 0, "receiver exit code " + std::to_string(rc));
    expect(sc == 0, "sender exit code " + std::to_string(sc));

    if (offload_check) {
        unsigned long want_posted = 0;
        for (const Case &c : cases()) {
            want_posted += c.posted ? 1 : 0;
        }
        TagListCounters t = parse_counters(receiver_err, receiver);
        expect(t.found, "tm_sm printed the receiver's counters (is tm_sm in UCX_TLS?)");
        printf("receiver tm_sm tag list: %lu posted, %lu matched, %lu cancelled "
               "(cases that post: %lu)\n",
               t.posted, t.matched, t.cancelled, want_posted);
        expect(t.posted >= want_posted, "receives posted into tm_sm's tag list");
        expect(t.matched + t.cancelled == t.posted,
               "every posted receive matched or cancelled in tm_sm");
        expect(t.cancelled >= 2, "cancels reached tm_sm");
    }
    printf("%s: %zu cases, %d failures\n", failures == 0 ? "PASS" : "FAIL", cases().size(),
           failures);
    return failures == 0 ? 0 : 1;
}
