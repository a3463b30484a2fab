/*
 * Multi-process conformance, for every tag-capable transport of uct-tm:
 * fork()ed processes exchange iface addresses over socketpairs, then
 * talk through the transport only.
 *  - several senders, random tags, sizes and paths (all eager flavours,
 *    rendezvous expected and unexpected with get_zcopy) to one receiver that
 *    pre-posts exact and masked receives: every payload checked, every
 *    message delivered exactly once, in each sender's order;
 *  - a full FIFO: UCS_ERR_NO_RESOURCE, pending_add, delivery in order;
 *  - a peer killed mid-transfer (sender, then receiver): the survivor gets
 *    UCS_ERR_CONNECTION_RESET through the iface error handler and on later
 *    sends, outstanding rendezvous sends complete with an error, nothing
 *    hangs (every wait is bounded), and nothing is left in /dev/shm.
 * Children report failures through their exit status; every wait on them
 * is bounded and they are SIGKILLed if a test fails early.
 */
#include "tag_fixture.h"

#include "sm/sm_rkey.h"

#include <gtest/gtest.h>

#include <poll.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdarg>
#include <cstring>
#include <deque>
#include <map>
#include <set>
#include <tuple>

namespace uct_tm_test {
namespace {

constexpr uct_tag_t kFullMask  = ~uct_tag_t{0};
constexpr uct_tag_t kClassMask = 0xff00000000000000ull;
constexpr uint8_t   kAtsId     = 7; /* receiver -> sender: "I fetched rndv message i" */
constexpr unsigned  kChildAlarm = 90;

/* ---- processes and the side channel ------------------------------------------------- */

bool write_msg(int fd, const std::string &msg) {
    const uint32_t len = static_cast<uint32_t>(msg.size());
    std::string    buf(reinterpret_cast<const char *>(&len), sizeof(len));
    buf += msg;
    size_t off = 0;
    while (off < buf.size()) {
        const ssize_t n = ::write(fd, buf.data() + off, buf.size() - off);
        if (n <= 0) {
            return false;
        }
        off += static_cast<size_t>(n);
    }
    return true;
}

bool read_exact(int fd, char *p, size_t len) {
    while (len > 0) {
        const ssize_t n = ::read(fd, p, len);
        if (n <= 0) {
            return false;
        }
        p += n;
        len -= static_cast<size_t>(n);
    }
    return true;
}

/* A message if one is readable now (without blocking). */
bool poll_msg(int fd, std::string *msg) {
    struct pollfd pfd = {fd, POLLIN, 0};
    if ((poll(&pfd, 1, 0) <= 0) || !(pfd.revents & (POLLIN | POLLHUP))) {
        return false;
    }
    uint32_t len;
    if (!read_exact(fd, reinterpret_cast<char *>(&len), sizeof(len))) {
        return false;
    }
    msg->resize(len);
    return read_exact(fd, &(*msg)[0], len);
}

/* Waits for a message, calling `progress` meanwhile. */
bool read_msg(int fd, std::string *msg, const std::function<void()> &progress,
              double seconds = kWaitSeconds) {
    return wait_for([&] { return poll_msg(fd, msg); }, progress, seconds);
}

void idle() { sched_yield(); }

struct Child {
    pid_t pid  = -1;
    int   sock = -1;
};

/* Runs `body(sock)` in a child process; its return value is the exit status. */
Child spawn(const std::function<int(int)> &body) {
    int sv[2];
    if (socketpair(AF_UNIX, SOCK_STREAM, 0, sv) != 0) {
        return Child{};
    }
    fflush(stdout);
    fflush(stderr);
    const pid_t pid = fork();
    if (pid == 0) {
        close(sv[0]);
        alarm(kChildAlarm); /* never outlive a hung parent */
        int rc = 99;
        try {
            rc = body(sv[1]);
        } catch (const std::exception &e) {
            fprintf(stderr, "child %d: exception: %s\n", getpid(), e.what());
        }
        fflush(stderr);
        _exit(rc);
    }
    close(sv[1]);
    if (pid < 0) {
        close(sv[0]);
        return Child{};
    }
    return Child{pid, sv[0]};
}

/* Failures inside a child: printed, counted into the exit status. */
struct ChildCheck {
    int  failures = 0;
    void fail(const char *fmt, ...) __attribute__((format(printf, 2, 3))) {
        va_list ap;
        va_start(ap, fmt);
        fprintf(stderr, "child %d: ", getpid());
        vfprintf(stderr, fmt, ap);
        fprintf(stderr, "\n");
        va_end(ap);
        ++failures;
    }
    int status() const { return std::min(failures, 50); }
};

/* A child's iface: its address goes to the parent, the parent's comes back
 * and gets an endpoint. */
struct ChildNode {
    UctEnv   env;
    Node     node;
    uct_ep_h ep = nullptr;

    explicit ChildNode(const std::string &tl, const Settings &settings = {})
        : node(env, tl, settings) {}
    void progress() {
        if (uct_worker_progress(env.worker()) == 0) {
            idle();
        }
    }
    std::function<void()> progress_fn() {
        return [this] { progress(); };
    }
    bool connect(int sock) {
        if (node.status != UCS_OK) {
            return false;
        }
        write_msg(sock, node.address());
        std::string addr;
        return read_msg(sock, &addr, progress_fn()) && (node.connect(addr, &ep) == UCS_OK);
    }
};

/* ---- what senders send -------------------------------------------------------------------- */

uint64_t mix(uint64_t a, uint64_t b) {
    Rng r(a * 0x9e3779b97f4a7c15ull ^ b);
    return r.next();
}

/* Message `index` of sender `sender`: both sides derive it from the seed. */
struct Plan {
    Path      path;
    size_t    length;
    uct_tag_t tag;
    uint64_t  imm;
    uint64_t  seed;
    size_t    iovcnt;
    int       post; /* 0: unexpected, 1: exact receive, 2: masked (sender class) receive */

    static Plan of(uint64_t seed, int sender, int index, const Caps &caps) {
        Rng               rng(mix(seed, (uint64_t(sender) << 32) | unsigned(index)));
        std::vector<Path> paths;
        for (Path p : {Path::kShort, Path::kBcopy, Path::kZcopy, Path::kZcopyMulti, Path::kRndv}) {
            if (caps.has(p)) {
                paths.push_back(p);
            }
        }
        Plan p;
        p.path = paths[rng.range(0, paths.size() - 1)];
        switch (p.path) {
        case Path::kShort: p.length = rng.range(0, caps.max_short); break;
        case Path::kBcopy: p.length = rng.range(0, caps.max_bcopy); break;
        case Path::kZcopy: p.length = rng.range(1, caps.zcopy_single); break;
        case Path::kZcopyMulti: p.length = rng.range(caps.zcopy_single + 1, caps.max_zcopy); break;
        case Path::kRndv: p.length = rng.range(1, 256 << 10); break;
        }
        /* class byte = sender + 1; the rest random but unique per message */
        p.tag    = (uint64_t(sender + 1) << 56) | ((rng.next() & 0xffffffffffull) << 16) |
                   static_cast<uint64_t>(index);
        p.imm    = rng.next() | 1;
        p.seed   = rng.next();
        p.iovcnt = rng.range(1, std::max<size_t>(1, std::min<size_t>(caps.eager_max_iov, 4)));
        const size_t r = rng.range(0, 99);
        p.post   = (r < 45) ? 1 : (r < 60) ? 2 : 0;
        return p;
    }
};

/* Sends one message, using pending_add when the receiver's FIFO is full. */
struct Sender {
    uct_ep_h        ep;
    std::function<void()> progress;
    size_t          no_resource = 0;
    size_t          pending_ran = 0;

    struct Req {
        uct_pending_req_t req;
        Sender           *self;
        Send             *send;
        bool              done = false;
        ucs_status_t      status = UCS_OK;
    };
    static ucs_status_t run(uct_pending_req_t *r) {
        Req *req = reinterpret_cast<Req *>(r);
        ++req->self->pending_ran;
        const ucs_status_t status = req->send->post(req->self->ep);
        if (status != UCS_ERR_NO_RESOURCE) {
            req->done   = true;
            req->status = status;
        }
        return status == UCS_ERR_NO_RESOURCE ? UCS_ERR_NO_RESOURCE : UCS_OK;
    }

    /* UCS_OK, or the error of the send. */
    ucs_status_t send(Send &s, double seconds = kWaitSeconds) {
        for (bool counted = false;; counted = true) {
            ucs_status_t status = s.post(ep);
            if (status != UCS_ERR_NO_RESOURCE) {
                return status;
            }
            no_resource += !counted;
            Req req{};
            req.req.func = run;
            req.self     = this;
            req.send     = &s;
            status       = uct_ep_pending_add(ep, &req.req, 0);
            if (status == UCS_ERR_BUSY) {
                continue; /* room appeared: send again */
            }
            if (status != UCS_OK) {
                return status;
            }
            if (!wait_for([&] { return req.done; }, progress, seconds)) {
                uct_ep_pending_purge(ep, nullptr, nullptr);
                return UCS_ERR_TIMED_OUT;
            }
            return req.status;
        }
    }
};

std::string stats_msg(size_t a, size_t b) { return std::to_string(a) + " " + std::to_string(b); }

/* ---- sender process ------------------------------------------------------------------------ */

struct SenderConfig {
    std::string tl;
    int         index;
    int         count;
    uint64_t    seed;
    Settings    settings;
};

ucs_status_t count_ats(void *arg, void *data, size_t length, unsigned) {
    auto *ats = static_cast<std::set<uint32_t> *>(arg);
    if (length == sizeof(uint32_t)) {
        uint32_t i;
        memcpy(&i, data, sizeof(i));
        ats->insert(i);
    }
    return UCS_OK;
}

int sender_main(int sock, const SenderConfig &cfg) {
    ChildCheck check;
    ChildNode  child(cfg.tl, cfg.settings);
    if (!child.connect(sock)) {
        check.fail("iface open or connect failed: %s", ucs_status_string(child.node.status));
        return check.status();
    }
    Node    &node     = child.node;
    uct_ep_h ep       = child.ep;
    auto     progress = child.progress_fn();
    std::set<uint32_t> ats;
    uct_iface_set_am_handler(node.iface, kAtsId, count_ats, &ats, 0 /* synchronous */);
    std::string go;
    write_msg(sock, "connected");
    if (!read_msg(sock, &go, progress) || (go != "go")) {
        check.fail("no go");
        return check.status();
    }
    Sender sender{ep, progress};
    std::vector<std::unique_ptr<Send>> sends;
    for (int i = 0; i < cfg.count; ++i) {
        const Plan p = Plan::of(cfg.seed, cfg.index, i, node.caps);
        sends.emplace_back(new Send(p.path, p.tag, p.imm, p.seed, p.length, p.iovcnt));
        const ucs_status_t status = sender.send(*sends.back());
        if (status != UCS_OK) {
            check.fail("message %d (%s, %zu B) not sent: %s", i, path_name(p.path), p.length,
                       ucs_status_string(status));
            break;
        }
    }
    /* Every zero-copy send completes: FIN (expected rndv) or, for an
     * unexpected one, the receiver's ATS after its get_zcopy. */
    auto all_done = [&] {
        for (size_t i = 0; i < sends.size(); ++i) {
            Send &s = *sends[i];
            if (s.path == Path::kRndv && s.comp->calls == 0 && ats.count(static_cast<uint32_t>(i))) {
                if (uct_ep_tag_rndv_cancel(ep, s.rndv_op) != UCS_OK) {
                    return false;
                }
                s.comp_pending = false;
                ats.erase(static_cast<uint32_t>(i));
            }
            if (s.comp_pending && s.comp->calls == 0) {
                return false;
            }
        }
        return true;
    };
    if (!wait_for(all_done, progress, 20)) {
        std::string missing;
        for (size_t i = 0; i < sends.size(); ++i) {
            if (sends[i]->comp_pending && (sends[i]->comp->calls == 0)) {
                missing += " #" + std::to_string(i) + "(" + path_name(sends[i]->path) +
                           (ats.count(static_cast<uint32_t>(i)) ? ", ATS" : "") + ")";
            }
        }
        check.fail("sender completions missing:%s", missing.c_str());
    }
    for (const auto &s : sends) {
        if (s->comp && s->comp->calls > 1) {
            check.fail("completion called %d times", s->comp->calls);
        }
        if (s->comp && s->comp->calls == 1 && s->comp->status != UCS_OK) {
            check.fail("completion status %s", ucs_status_string(s->comp->status));
        }
    }
    if (!node.errors.entries.empty()) {
        check.fail("error handler called %zu times", node.errors.entries.size());
    }
    write_msg(sock, stats_msg(sender.no_resource, sender.pending_ran));
    std::string bye;
    if (!read_msg(sock, &bye, progress, 60)) {
        check.fail("no bye");
    }
    uct_ep_destroy(ep);
    return check.status();
}

/* ---- fixture -------------------------------------------------------------------------------- */

class TagMultiProc : public ::testing::TestWithParam<std::string> {
  protected:
    void SetUp() override {
        test_seed();
        shm_before_ = shm_leftovers();
        if (!connects_to_iface(GetParam())) {
            GTEST_SKIP() << GetParam() << " connects endpoint to endpoint; these tests exchange "
                                          "iface addresses";
        }
    }

    void TearDown() override {
        for (Child &c : children_) {
            if (c.pid > 0) {
                kill(c.pid, SIGKILL);
                waitpid(c.pid, nullptr, 0);
            }
            if (c.sock >= 0) {
                close(c.sock);
            }
        }
        children_.clear();
        env_.reset();
        for (const std::string &name : shm_leaked_since(shm_before_)) {
            ADD_FAILURE() << "left in /dev/shm: " << name;
        }
    }

    Child &add_child(const std::function<int(int)> &body) {
        children_.push_back(spawn(body));
        EXPECT_GT(children_.back().pid, 0) << "fork failed";
        return children_.back();
    }

    void progress() {
        if (uct_worker_progress(env_->worker()) == 0) {
            idle();
        }
    }
    bool wait(const std::function<bool()> &done, double seconds = kWaitSeconds) {
        return wait_for(done, [this] { progress(); }, seconds);
    }

    /* Waits for the child to exit (progressing meanwhile); its exit status,
     * or -1 if it had to be killed. */
    int reap(Child &c, double seconds = 30) {
        int  status = 0;
        bool exited = wait_for([&] { return waitpid(c.pid, &status, WNOHANG) == c.pid; },
                               [this] {
                                   if (env_) {
                                       progress();
                                   } else {
                                       idle();
                                   }
                               },
                               seconds);
        if (!exited) {
            kill(c.pid, SIGKILL);
            waitpid(c.pid, &status, 0);
            c.pid = -1;
            return -1;
        }
        c.pid = -1;
        return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
    }

    /* Issues a get_zcopy of `dest` from `address`, again while it finds no
     * resources; its status in *status. */
    void issue_get(uct_ep_h ep, GuardedBuffer &dest, uint64_t address, uct_rkey_t rkey,
                   Completion *done, ucs_status_t *status) {
        uct_iov_t iov = {dest.data(), dest.size(), nullptr, 0, 1};
        ASSERT_TRUE(wait([&] {
            *status = uct_ep_get_zcopy(ep, &iov, 1, address, rkey, &done->comp);
            return *status != UCS_ERR_NO_RESOURCE;
        }));
    }

    /* A get_zcopy of `length` bytes at `address`, whole and with the owner's pattern. */
    void get_whole(uct_ep_h ep, uint64_t address, uct_rkey_t rkey, size_t length, uint64_t seed) {
        GuardedBuffer dest(length);
        Completion    done;
        ucs_status_t  status = UCS_ERR_NO_RESOURCE;
        ASSERT_NO_FATAL_FAILURE(issue_get(ep, dest, address, rkey, &done, &status));
        ASSERT_TRUE((status == UCS_OK) || (status == UCS_INPROGRESS)) << ucs_status_string(status);
        if (status == UCS_INPROGRESS) {
            ASSERT_TRUE(wait([&] { return done.calls == 1; }, 30));
            EXPECT_EQ(done.status, UCS_OK) << ucs_status_string(done.status);
        }
        EXPECT_EQ(pattern_mismatch(dest.data(), length, seed), SIZE_MAX);
        EXPECT_TRUE(dest.guards_intact());
    }

    /* The key split_get_owner_main sends, unpacked. */
    void read_owner_key(Child &c, uct_tm::sm::PackedRkey *key, uct_rkey_bundle_t *rkey) {
        std::string packed;
        ASSERT_TRUE(read_msg(c.sock, &packed, idle));
        ASSERT_EQ(packed.size(), sizeof(uct_tm::sm::PackedRkey));
        memcpy(key, packed.data(), sizeof(*key));
        ASSERT_EQ(uct_rkey_unpack(env_->component(), packed.data(), rkey), UCS_OK);
    }

    /* Opens this process's iface (`node`, tm_sm with `sm_settings`), reads
     * the child's address (into `peer_address` if given) and connects to it
     * (`ep`); sends our address back if `reply`. */
    void open_connected(Child &c, std::unique_ptr<Node> *node, uct_ep_h *ep, bool reply,
                        Settings sm_settings = {}, std::string *peer_address = nullptr) {
        const std::string tl = GetParam();
        env_.reset(new UctEnv());
        sm_settings.push_back({"PEER_CHECK_INTERVAL", "10ms"});
        node->reset(new Node(*env_, tl, tl == "tm_sm" ? sm_settings : Settings{}));
        ASSERT_EQ((*node)->status, UCS_OK);
        std::string addr;
        ASSERT_TRUE(read_msg(c.sock, &addr, idle));
        ASSERT_EQ((*node)->connect(addr, ep), UCS_OK);
        if (peer_address != nullptr) {
            *peer_address = addr;
        }
        if (reply) {
            ASSERT_TRUE(write_msg(c.sock, (*node)->address()));
        }
    }

    /* Several sender processes, random traffic, one receiver (here). */
    void several_senders(const Settings &rx_settings, const Settings &tx_settings, uint64_t seed);

    void kill_child(Child &c) {
        kill(c.pid, SIGKILL);
        waitpid(c.pid, nullptr, 0);
        c.pid = -1;
    }

    std::unique_ptr<UctEnv>  env_;
    std::vector<Child>       children_;
    std::vector<std::string> shm_before_;
};

/* ---- several senders, one receiver ------------------------------------------------------------ */

/* A small FIFO, so that senders find it full; the senders' alike, as tm_sm
 * asks (their eager limit follows from it, and both sides plan by it). */
TEST_P(TagMultiProc, SeveralSendersRandomTrafficExactlyOnce) {
    several_senders({{"FIFO_SIZE", "32"}}, {{"FIFO_SIZE", "32"}}, test_seed() ^ 0x100);
}

/* The same with cross-memory attach off: rendezvous data and get_zcopy go
 * through the owner's pipelined copy into staging chunks. */
TEST_P(TagMultiProc, SeveralSendersPipelinedWithoutCma) {
    if (GetParam() != "tm_sm") {
        GTEST_SKIP() << "tm_sm setting";
    }
    several_senders({{"FIFO_SIZE", "32"}, {"CMA", "n"}}, {{"FIFO_SIZE", "32"}, {"CMA", "n"}},
                    test_seed() ^ 0x101);
}

void TagMultiProc::several_senders(const Settings &rx_settings, const Settings &tx_settings,
                                   uint64_t seed) {
    const int kSenders  = 3;
    const int kMessages = 250;
    std::vector<SenderConfig> cfgs;
    for (int i = 0; i < kSenders; ++i) {
        cfgs.push_back(SenderConfig{GetParam(), i, kMessages, seed,
                                    GetParam() == "tm_sm" ? tx_settings : Settings{}});
        const SenderConfig cfg = cfgs.back();
        add_child([cfg](int sock) { return sender_main(sock, cfg); });
    }
    env_.reset(new UctEnv());
    /* The settings are tm_sm's; other transports run with their defaults. */
    Node rx(*env_, GetParam(), GetParam() == "tm_sm" ? rx_settings : Settings{});
    ASSERT_EQ(rx.status, UCS_OK);
    const Caps caps = rx.caps;

    /* Addresses, then an endpoint back to each sender (ATS, get_zcopy). */
    std::vector<uct_ep_h> back(kSenders, nullptr);
    for (int i = 0; i < kSenders; ++i) {
        std::string addr;
        ASSERT_TRUE(read_msg(children_[i].sock, &addr, idle)) << "sender " << i;
        ASSERT_EQ(rx.connect(addr, &back[i]), UCS_OK);
        ASSERT_TRUE(write_msg(children_[i].sock, rx.address()));
    }

    /* What will arrive, and where. Exact receives first, then masked ones
     * (one per sender class): a message takes its exact receive if it has
     * one, else the earliest unused masked receive of its class. */
    struct Expect {
        Plan   plan;
        int    sender, index;
        bool   seen = false;
    };
    std::map<uct_tag_t, Expect>          by_tag;
    std::vector<std::unique_ptr<RecvCtx>>     ctxs;
    std::vector<std::unique_ptr<RecvBuffers>> bufs;
    std::vector<int>                          masked_count(kSenders, 0);
    /* (order of matching, sender, index): a rendezvous may complete after
     * later messages, but it is matched (consumed) in its sender's order. */
    std::vector<std::tuple<uint64_t, int, int>> arrivals;
    uint64_t                                    order    = 0;
    size_t                                      ctx_rndv = 0, exact = 0;
    auto record_tag = [&](uct_tag_t tag, uint64_t seq) {
        auto it = by_tag.find(tag);
        if (it == by_tag.end()) {
            ADD_FAILURE() << "unknown tag 0x" << std::hex << tag;
            return static_cast<Expect *>(nullptr);
        }
        if (it->second.seen) {
            ADD_FAILURE() << "message delivered twice: sender " << it->second.sender << " #"
                          << it->second.index;
        }
        it->second.seen = true;
        arrivals.emplace_back(seq, it->second.sender, it->second.index);
        return &it->second;
    };
    std::vector<RecvBuffers *> ctx_buf;
    for (int s = 0; s < kSenders; ++s) {
        for (int i = 0; i < kMessages; ++i) {
            const Plan p = Plan::of(seed, s, i, caps);
            by_tag.emplace(p.tag, Expect{p, s, i});
            if (p.post == 1) {
                ctxs.emplace_back(new RecvCtx);
                bufs.emplace_back(new RecvBuffers(p.length + (p.seed % 100),
                                                  1 + p.seed % caps.recv_max_iov));
                ASSERT_EQ(uct_iface_tag_recv_zcopy(rx.iface, p.tag, kFullMask,
                                                   bufs.back()->iov.data(), bufs.back()->iov.size(),
                                                   &ctxs.back()->ctx),
                          UCS_OK);
                ++exact;
                ctx_rndv += (p.path == Path::kRndv);
            } else if (p.post == 2) {
                ++masked_count[s];
            }
        }
    }
    for (int s = 0; s < kSenders; ++s) {
        for (int k = 0; k < masked_count[s]; ++k) {
            ctxs.emplace_back(new RecvCtx);
            bufs.emplace_back(new RecvBuffers(256 << 10));
            ASSERT_EQ(uct_iface_tag_recv_zcopy(rx.iface, uct_tag_t(s + 1) << 56, kClassMask,
                                               bufs.back()->iov.data(), 1, &ctxs.back()->ctx),
                      UCS_OK);
        }
    }
    for (size_t k = 0; k < ctxs.size(); ++k) {
        RecvBuffers *b = bufs[k].get();
        auto matched   = std::make_shared<uint64_t>(0);
        ctxs[k]->on_consumed = [&, matched](RecvCtx &) { *matched = order++; };
        ctxs[k]->on_done = [&, b, matched](RecvCtx &r) {
            Expect *e = record_tag(r.stag, *matched);
            if (e == nullptr) {
                return;
            }
            EXPECT_EQ(r.sequence(), "consumed,completed");
            EXPECT_EQ(r.length, e->plan.length);
            EXPECT_EQ(r.imm, (e->plan.path == Path::kShort || e->plan.path == Path::kRndv)
                                 ? 0 : e->plan.imm);
            const ucs_status_t want = (e->plan.length > b->capacity()) ? UCS_ERR_MESSAGE_TRUNCATED
                                                                       : UCS_OK;
            EXPECT_EQ(r.status, want) << path_name(e->plan.path);
            EXPECT_EQ(b->check(e->plan.seed, e->plan.length), "")
                << "sender " << e->sender << " #" << e->index << " " << path_name(e->plan.path);
        };
    }
    size_t unexpected_rndv = 0;
    rx.unexp.on_message = [&](size_t i) {
        const Unexpected::Message &m = rx.unexp.messages[i];
        Expect                    *e = record_tag(m.tag, order++);
        if (e == nullptr) {
            return;
        }
        EXPECT_EQ(m.data.size(), e->plan.length);
        EXPECT_EQ(pattern_mismatch(m.data.data(), m.data.size(), e->plan.seed), SIZE_MAX)
            << "unexpected sender " << e->sender << " #" << e->index;
        rx.unexp.messages[i].data.clear();
    };
    /* Unexpected rendezvous: arrived now (ordering), fetched with get_zcopy
     * out of the callback, then the sender is told. */
    std::vector<std::pair<size_t, Expect *>> rndv_todo;
    rx.unexp.on_rndv = [&](size_t i) {
        Expect *e = record_tag(rx.unexp.rndvs[i].tag, order++);
        if (e != nullptr) {
            rndv_todo.emplace_back(i, e);
        }
    };
    auto serve_rndv = [&] {
        std::vector<std::pair<size_t, Expect *>> todo;
        todo.swap(rndv_todo);
        for (const auto &t : todo) {
            const Unexpected::Rndv u = rx.unexp.rndvs[t.first];
            Expect                *e = t.second;
            ++unexpected_rndv;
            EXPECT_EQ(u.length, e->plan.length);
            uct_rkey_bundle_t rkey;
            ASSERT_EQ(uct_rkey_unpack(env_->component(), u.rkey.data(), &rkey), UCS_OK);
            GuardedBuffer local(u.length);
            uct_iov_t     iov = {local.data(), u.length, nullptr, 0, 1};
            Completion    c;
            ucs_status_t  status =
                uct_ep_get_zcopy(back[e->sender], &iov, 1, u.remote_addr, rkey.rkey, &c.comp);
            if (status == UCS_INPROGRESS) {
                ASSERT_TRUE(wait([&] { return c.calls == 1; }));
                status = c.status;
            }
            EXPECT_EQ(status, UCS_OK);
            EXPECT_EQ(pattern_mismatch(local.data(), u.length, e->plan.seed), SIZE_MAX)
                << "get_zcopy of sender " << e->sender << " #" << e->index;
            EXPECT_TRUE(local.guards_intact());
            uct_rkey_release(env_->component(), &rkey);
            /* ATS: the sender may withdraw its rendezvous now. */
            uint32_t index = static_cast<uint32_t>(e->index);
            ssize_t  sent  = UCS_ERR_NO_RESOURCE;
            ASSERT_TRUE(wait([&] {
                sent = uct_ep_am_bcopy(back[e->sender], kAtsId,
                                       [](void *dest, void *arg) -> size_t {
                                           memcpy(dest, arg, sizeof(uint32_t));
                                           return sizeof(uint32_t);
                                       },
                                       &index, 0);
                return sent != UCS_ERR_NO_RESOURCE;
            }));
            EXPECT_EQ(sent, static_cast<ssize_t>(sizeof(uint32_t)));
        }
    };

    for (int i = 0; i < kSenders; ++i) {
        std::string connected;
        ASSERT_TRUE(read_msg(children_[i].sock, &connected, [this] { progress(); }));
    }
    for (int i = 0; i < kSenders; ++i) {
        ASSERT_TRUE(write_msg(children_[i].sock, "go"));
    }
    const size_t total = size_t(kSenders) * kMessages;
    ASSERT_TRUE(wait([&] {
        serve_rndv();
        return (arrivals.size() == total) && rndv_todo.empty();
    }, 90)) << arrivals.size() << " of " << total << " messages arrived";

    /* Each sender's messages arrived in its order. */
    std::sort(arrivals.begin(), arrivals.end());
    std::vector<int> last(kSenders, -1);
    for (const auto &a : arrivals) {
        const int sender = std::get<1>(a), index = std::get<2>(a);
        EXPECT_GT(index, last[sender]) << "sender " << sender << " matched out of order";
        last[sender] = index;
    }
    size_t no_resource = 0, pending_ran = 0;
    for (int i = 0; i < kSenders; ++i) {
        std::string stats;
        ASSERT_TRUE(read_msg(children_[i].sock, &stats, [this] { progress(); }, 60));
        size_t a = 0, b = 0;
        sscanf(stats.c_str(), "%zu %zu", &a, &b);
        no_resource += a;
        pending_ran += b;
    }
    for (int i = 0; i < kSenders; ++i) {
        ASSERT_TRUE(write_msg(children_[i].sock, "bye"));
    }
    for (int i = 0; i < kSenders; ++i) {
        EXPECT_EQ(reap(children_[i]), 0) << "sender " << i << " reported failures";
    }
    for (const auto &c : ctxs) {
        EXPECT_LE(c->count(RecvCtx::kCompleted), 1);
    }
    EXPECT_EQ(rx.unexp.violations, std::vector<std::string>{});
    /* The run exercised what it is meant to. */
    EXPECT_GT(exact, 0u);
    EXPECT_GT(ctx_rndv, 0u) << "no expected rendezvous";
    EXPECT_GT(unexpected_rndv, 0u) << "no unexpected rendezvous";
    printf("[          ] %zu messages, %zu unexpected rndv fetched, senders hit a full FIFO %zu "
           "times, %zu pending callbacks\n", total, unexpected_rndv, no_resource, pending_ran);
    for (uct_ep_h ep : back) {
        uct_ep_destroy(ep);
    }
    /* The senders are gone: what remains posted is cancelled without callbacks. */
    for (const auto &c : ctxs) {
        if (!c->done()) {
            EXPECT_EQ(uct_iface_tag_recv_cancel(rx.iface, &c->ctx, 1), UCS_OK);
        }
    }
}

/* ---- a full FIFO ------------------------------------------------------------------------------- */

TEST_P(TagMultiProc, FullFifoPendingAddInOrder) {
    const std::string tl    = GetParam();
    constexpr int     count = 200;
    Child &c = add_child([tl](int sock) {
        ChildCheck check;
        ChildNode  child(tl);
        if (!child.connect(sock)) {
            check.fail("connect");
            return check.status();
        }
        uct_ep_h ep       = child.ep;
        auto     progress = child.progress_fn();
        Sender   sender{ep, progress};
        bool   told = false;
        for (int i = 0; i < count; ++i) {
            Send s(Path::kBcopy, 5000 + i, i, 7000 + i, 64 + i);
            ucs_status_t status = s.post(ep);
            if (status == UCS_ERR_NO_RESOURCE) {
                ++sender.no_resource;
                Sender::Req req{};
                req.req.func = Sender::run;
                req.self     = &sender;
                req.send     = &s;
                status       = uct_ep_pending_add(ep, &req.req, 0);
                if (status == UCS_OK) {
                    if (!told) {
                        write_msg(sock, "full"); /* the receiver starts reading now */
                        told = true;
                    }
                    if (!wait_for([&] { return req.done; }, progress)) {
                        check.fail("pending request %d never ran", i);
                        break;
                    }
                    status = req.status;
                } else if (status == UCS_ERR_BUSY) {
                    --i; /* room appeared: send it again */
                    continue;
                }
            }
            if (status != UCS_OK) {
                check.fail("message %d: %s", i, ucs_status_string(status));
                break;
            }
        }
        if (!told) {
            check.fail("the FIFO never filled");
            write_msg(sock, "full");
        }
        write_msg(sock, stats_msg(sender.no_resource, sender.pending_ran));
        std::string bye;
        read_msg(sock, &bye, progress);
        uct_ep_destroy(ep);
        return check.status();
    });
    env_.reset(new UctEnv());
    Node rx(*env_, tl, tl == "tm_sm" ? Settings{{"FIFO_SIZE", "16"}} : Settings{});
    ASSERT_EQ(rx.status, UCS_OK);
    std::string addr;
    ASSERT_TRUE(read_msg(c.sock, &addr, idle));
    ASSERT_TRUE(write_msg(c.sock, rx.address()));
    /* Do not receive until the sender is stuck on a full FIFO. */
    std::string full;
    ASSERT_TRUE(read_msg(c.sock, &full, idle)) << "the sender never reported a full FIFO";
    ASSERT_TRUE(wait([&] { return rx.unexp.complete_messages() == size_t(count); }))
        << rx.unexp.complete_messages() << " of " << count;
    for (int i = 0; i < count; ++i) {
        const auto &m = rx.unexp.messages[i];
        EXPECT_EQ(m.tag, uct_tag_t(5000 + i));
        EXPECT_EQ(m.imm, uint64_t(i));
        ASSERT_EQ(m.data.size(), size_t(64 + i));
        EXPECT_EQ(pattern_mismatch(m.data.data(), m.data.size(), 7000 + i), SIZE_MAX);
    }
    std::string stats;
    ASSERT_TRUE(read_msg(c.sock, &stats, [this] { progress(); }));
    size_t no_resource = 0, pending_ran = 0;
    sscanf(stats.c_str(), "%zu %zu", &no_resource, &pending_ran);
    EXPECT_GT(no_resource, 0u);
    EXPECT_GT(pending_ran, 0u);
    ASSERT_TRUE(write_msg(c.sock, "bye"));
    EXPECT_EQ(reap(c), 0);
}

/* ---- closing with completions owed ------------------------------------------------------------ */

/* A receiver takes more rendezvous sends than its sender's FIFO (4) holds
 * FINs for while the sender is not progressing, and closes its iface at
 * once: the FINs waiting in its outbox go out before the iface does
 * (CLOSE_TIMEOUT), and every send whose data it took completes UCS_OK. */
TEST_P(TagMultiProc, CloseSendsTheCompletionsStillWaiting) {
    if (GetParam() != "tm_sm") {
        GTEST_SKIP() << "tm_sm's outbox of rendezvous completions";
    }
    constexpr int    kSends  = 16;
    constexpr size_t kLength = 32768; /* one CMA read by the receiver: no sender help */
    Child &c = add_child([](int sock) {
        ChildCheck check;
        ChildNode  child("tm_sm", {{"FIFO_SIZE", "4"}});
        if (!child.connect(sock)) {
            check.fail("iface open or connect failed");
            return check.status();
        }
        std::string go;
        read_msg(sock, &go, child.progress_fn());
        std::vector<std::unique_ptr<Send>> sends;
        for (int i = 0; i < kSends; ++i) {
            sends.emplace_back(new Send(Path::kRndv, 0x600 + i, 0, 0x900 + i, kLength));
            if (sends.back()->post(child.ep) != UCS_OK) {
                check.fail("rendezvous send %d refused", i);
            }
        }
        write_msg(sock, "sent");
        usleep(300000); /* not progressing: the receiver's FINs find this FIFO full */
        int done = 0, ok = 0;
        wait_for([&] {
            done = ok = 0;
            for (const auto &s : sends) {
                done += (s->comp->calls > 0);
                ok += (s->comp->calls == 1) && (s->comp->status == UCS_OK);
            }
            return done == kSends;
        }, child.progress_fn(), 20);
        write_msg(sock, std::to_string(ok) + " " + std::to_string(done));
        std::string bye;
        read_msg(sock, &bye, child.progress_fn());
        uct_ep_destroy(child.ep);
        return check.status();
    });
    env_.reset(new UctEnv());
    std::unique_ptr<Node> rx(new Node(*env_, "tm_sm"));
    ASSERT_EQ(rx->status, UCS_OK);
    std::string addr;
    ASSERT_TRUE(read_msg(c.sock, &addr, idle));
    ASSERT_TRUE(write_msg(c.sock, rx->address()));
    std::vector<std::unique_ptr<RecvCtx>>     ctxs;
    std::vector<std::unique_ptr<RecvBuffers>> bufs;
    for (int i = 0; i < kSends; ++i) {
        ctxs.emplace_back(new RecvCtx());
        bufs.emplace_back(new RecvBuffers(kLength));
        ASSERT_EQ(uct_iface_tag_recv_zcopy(rx->iface, 0x600 + i, ~uct_tag_t{0},
                                           bufs.back()->iov.data(), 1, &ctxs.back()->ctx),
                  UCS_OK);
    }
    ASSERT_TRUE(write_msg(c.sock, "go"));
    std::string sent;
    ASSERT_TRUE(read_msg(c.sock, &sent, [this] { progress(); }));
    ASSERT_TRUE(wait([&] {
        return std::all_of(ctxs.begin(), ctxs.end(), [](const auto &r) { return r->done(); });
    }, 5)) << "the receives did not complete";
    for (int i = 0; i < kSends; ++i) {
        EXPECT_EQ(ctxs[i]->status, UCS_OK) << i;
        EXPECT_EQ(bufs[i]->check(0x900 + i, kLength), "") << i;
    }
    rx.reset(); /* while the sender sleeps: most FINs wait in the outbox */
    std::string report;
    ASSERT_TRUE(read_msg(c.sock, &report, idle, 30));
    EXPECT_EQ(report, std::to_string(kSends) + " " + std::to_string(kSends))
        << "sends completed UCS_OK, sends completed";
    ASSERT_TRUE(write_msg(c.sock, "bye"));
    EXPECT_EQ(reap(c), 0);
}

/* ---- peers killed mid-transfer -------------------------------------------------------------------- */

/* A sender streams (eager of every size, rendezvous) and is SIGKILLed in the
 * middle. The receiver: error handler for its endpoint to the sender,
 * UCS_ERR_CONNECTION_RESET on later sends, its own rendezvous sends to the
 * dead process complete with an error, a half-received message fails its
 * receive, and everything else keeps working. */
TEST_P(TagMultiProc, SenderKilledMidStream) {
    const std::string tl   = GetParam();
    const uint64_t    seed = test_seed() ^ 0x200;
    Child &c = add_child([tl, seed](int sock) {
        ChildNode child(tl);
        if (!child.connect(sock)) {
            return 1;
        }
        Node    &node     = child.node;
        uct_ep_h ep       = child.ep;
        auto     progress = child.progress_fn();
        write_msg(sock, "streaming");
        Sender                             sender{ep, progress};
        std::deque<std::unique_ptr<Send>>  window;
        for (int i = 0;; ++i) {
            const Plan p = Plan::of(seed, 0, i, node.caps);
            window.emplace_back(new Send(p.path, p.tag, p.imm, p.seed, p.length, p.iovcnt));
            if (sender.send(*window.back(), 60) != UCS_OK) {
                pause();
            }
            /* Keep a bounded window of rendezvous buffers alive. */
            while (window.size() > 16) {
                Send &old = *window.front();
                if (old.comp_pending && old.comp->calls == 0) {
                    if (old.path == Path::kRndv) {
                        uct_ep_tag_rndv_cancel(ep, old.rndv_op);
                    } else {
                        progress();
                        continue;
                    }
                }
                window.pop_front();
            }
        }
    });
    std::unique_ptr<Node> rx_node;
    uct_ep_h              back;
    open_connected(c, &rx_node, &back, true);
    if (HasFatalFailure()) {
        return;
    }
    Node &rx = *rx_node;
    std::string streaming;
    ASSERT_TRUE(read_msg(c.sock, &streaming, [this] { progress(); }));

    /* Masked receives for everything the sender sends, re-posted as they complete.
     * A post may be refused (UCS_ERR_NO_RESOURCE) while an unexpected message of
     * the class is held until whole: it is tried again after progress. */
    std::deque<RecvCtx>     ctxs;
    std::deque<RecvBuffers> bufs;
    size_t                  received = 0, failed = 0;
    auto post_one = [&] {
        ctxs.emplace_back();
        bufs.emplace_back(256 << 10);
        ctxs.back().on_done = [&](RecvCtx &r) {
            ++received;
            failed += (r.status != UCS_OK && r.status != UCS_ERR_MESSAGE_TRUNCATED);
        };
        const ucs_status_t status = uct_iface_tag_recv_zcopy(
                rx.iface, uct_tag_t(1) << 56, kClassMask, bufs.back().iov.data(), 1, &ctxs.back().ctx);
        if (status != UCS_OK) {
            ctxs.pop_back(); /* never posted */
            bufs.pop_back();
        }
        return status;
    };
    for (int i = 0; i < 8; ++i) {
        ASSERT_TRUE(wait([&] { return post_one() != UCS_ERR_NO_RESOURCE; }));
        ASSERT_EQ(ctxs.size(), size_t(i + 1)) << "a receive refused with another error";
    }
    /* Rendezvous sends of ours to the sender, which never fetches them. */
    std::vector<std::unique_ptr<Send>> ours;
    if (rx.caps.has(Path::kRndv)) {
        for (int i = 0; i < 3; ++i) {
            ours.emplace_back(new Send(Path::kRndv, 0x42 + i, 0, i, 100000));
            ucs_status_t status;
            ASSERT_TRUE(wait([&] { return (status = ours.back()->post(back)) != UCS_ERR_NO_RESOURCE; }));
            ASSERT_EQ(status, UCS_OK);
        }
    }
    size_t unexpected_before = 0;
    ASSERT_TRUE(wait([&] {
        while (received > ctxs.size() - 8) {
            const ucs_status_t status = post_one();
            if (status == UCS_ERR_NO_RESOURCE) {
                break; /* a held message: again after progress */
            }
            EXPECT_EQ(status, UCS_OK);
            if (status != UCS_OK) {
                break;
            }
        }
        return received + rx.unexp.complete_messages() + rx.unexp.rndvs.size() >= 150;
    }, 60)) << "the sender did not stream";
    /* Kill it in the middle of the stream. */
    kill_child(c);
    unexpected_before = rx.unexp.complete_messages();
    ASSERT_TRUE(wait([&] { return rx.errors.count(back) > 0; }, 10))
        << "no error handler call within 10 s of the peer's death";
    for (int i = 0; i < 1000; ++i) {
        progress();
    }
    EXPECT_EQ(rx.errors.count(back), 1) << "error handler called more than once";
    EXPECT_EQ(rx.errors.entries[0].status, UCS_ERR_CONNECTION_RESET);
    for (auto &s : ours) {
        EXPECT_EQ(s->comp->calls, 1) << "rendezvous send to the dead peer never completed";
        EXPECT_NE(s->comp->status, UCS_OK);
    }
    /* Every later send fails with UCS_ERR_CONNECTION_RESET. */
    Send later_short(Path::kShort, 1, 0, 1, 8), later_bcopy(Path::kBcopy, 1, 0, 1, 100),
        later_zcopy(Path::kZcopy, 1, 0, 1, 100), later_rndv(Path::kRndv, 1, 0, 1, 100);
    for (Send *s : {&later_short, &later_bcopy, &later_zcopy, &later_rndv}) {
        if (rx.caps.has(s->path)) {
            EXPECT_EQ(s->post(back), UCS_ERR_CONNECTION_RESET) << path_name(s->path);
        }
    }
    EXPECT_EQ(uct_ep_am_short(back, 1, 0, nullptr, 0), UCS_ERR_CONNECTION_RESET);
    /* No receive is left half done: each is complete or still posted. */
    for (RecvCtx &r : ctxs) {
        const std::string seq = r.sequence();
        EXPECT_TRUE(seq.empty() || seq == "consumed,completed") << seq;
        if (!r.done()) {
            EXPECT_EQ(uct_iface_tag_recv_cancel(rx.iface, &r.ctx, 1), UCS_OK);
        }
    }
    printf("[          ] %zu received, %zu failed, %zu unexpected before the kill\n", received,
           failed, unexpected_before);
    uct_ep_destroy(back);
}

/* The receiver is SIGKILLed while this process streams to it. */
TEST_P(TagMultiProc, ReceiverKilledWhileSending) {
    const std::string tl = GetParam();
    Child &c = add_child([tl](int sock) {
        UctEnv env;
        Node   node(env, tl);
        write_msg(sock, node.address());
        for (;;) {
            if (uct_worker_progress(env.worker()) == 0) {
                idle();
            }
        }
        return 0;
    });
    std::unique_ptr<Node> tx_node;
    uct_ep_h              ep;
    open_connected(c, &tx_node, &ep, false);
    if (HasFatalFailure()) {
        return;
    }
    Node &tx = *tx_node;

    std::vector<std::unique_ptr<Send>> rndvs;
    Rng                                rng(test_seed() ^ 0x300);
    int                                sent = 0;
    auto stream_one = [&](int i) {
        const Path paths[] = {Path::kShort, Path::kBcopy, Path::kZcopy, Path::kZcopyMulti, Path::kRndv};
        const Path path    = paths[i % 5];
        if (!tx.caps.has(path)) {
            return UCS_OK;
        }
        const auto sizes = tx.caps.sizes(path);
        std::unique_ptr<Send> s(new Send(path, 0x900 + i, i, i, sizes[rng.range(0, sizes.size() - 1)]));
        const ucs_status_t status = s->post(ep);
        if ((status == UCS_OK) && (path == Path::kRndv)) {
            rndvs.push_back(std::move(s));
        } else if (status == UCS_OK && s->comp_pending) {
            rndvs.push_back(std::move(s)); /* keep its buffer until it completes */
        }
        return status;
    };
    ASSERT_TRUE(wait([&] {
        const ucs_status_t status = stream_one(sent);
        EXPECT_TRUE(status == UCS_OK || status == UCS_ERR_NO_RESOURCE) << ucs_status_string(status);
        sent += (status == UCS_OK);
        return sent >= 300;
    }, 30));
    kill_child(c);

    /* Go on sending: successes (into the dead FIFO) or no resources, until
     * the death is noticed; then the error handler, exactly once. */
    struct Pending {
        uct_pending_req_t req;
        int               purged = 0;
    } pending{};
    pending.req.func = [](uct_pending_req_t *) -> ucs_status_t { return UCS_ERR_NO_RESOURCE; };
    bool pending_added = false;
    ucs_status_t last  = UCS_OK;
    ASSERT_TRUE(wait([&] {
        last = stream_one(sent++);
        if ((last == UCS_ERR_NO_RESOURCE) && !pending_added &&
            (uct_ep_pending_add(ep, &pending.req, 0) == UCS_OK)) {
            pending_added = true;
        }
        return (last != UCS_OK && last != UCS_ERR_NO_RESOURCE) || (tx.errors.count(ep) > 0);
    }, 10)) << "sends to a dead receiver never failed";
    ASSERT_TRUE(wait([&] { return tx.errors.count(ep) > 0; }, 10)) << "no error handler call";
    for (int i = 0; i < 1000; ++i) {
        progress();
    }
    EXPECT_EQ(tx.errors.count(ep), 1);
    EXPECT_EQ(tx.errors.entries[0].status, UCS_ERR_CONNECTION_RESET);
    for (int i = 0; i < 10; ++i) {
        EXPECT_EQ(stream_one(i), UCS_ERR_CONNECTION_RESET) << path_name(Path(i % 5));
    }
    /* Outstanding rendezvous sends completed with an error. */
    for (const auto &s : rndvs) {
        if (s->path == Path::kRndv) {
            EXPECT_EQ(s->comp->calls, 1);
            EXPECT_NE(s->comp->status, UCS_OK);
        }
    }
    /* The pending request is handed back by purge, once. */
    uct_ep_pending_purge(ep, [](uct_pending_req_t *r, void *) {
        ++reinterpret_cast<Pending *>(r)->purged;
    }, nullptr);
    EXPECT_EQ(pending.purged, pending_added ? 1 : 0);
    EXPECT_NE(uct_ep_flush(ep, 0, nullptr), UCS_ERR_NO_RESOURCE);
    uct_ep_destroy(ep);
}

/* Named segments (the /proc-less fallback) of a killed process are reaped
 * by the next iface that opens. */
TEST_P(TagMultiProc, NamedSegmentOfKilledProcessIsReaped) {
    if (GetParam() != "tm_sm") {
        GTEST_SKIP() << "tm_sm setting";
    }
    const std::string tl = GetParam();
    Child &c = add_child([tl](int sock) {
        UctEnv env;
        Node   node(env, tl, {{"NAMED_SEGMENTS", "y"}});
        write_msg(sock, node.status == UCS_OK ? node.address() : std::string("fail"));
        pause();
        return 0;
    });
    std::string addr;
    ASSERT_TRUE(read_msg(c.sock, &addr, idle));
    ASSERT_NE(addr, "fail");
    /* By name, not by count: other test programs' segments come and go meanwhile. */
    const auto now = shm_leftovers();
    EXPECT_TRUE(std::any_of(now.begin(), now.end(), [&](const std::string &name) {
        return std::find(shm_before_.begin(), shm_before_.end(), name) == shm_before_.end();
    })) << "no named segment was created";
    kill_child(c);
    env_.reset(new UctEnv());
    {
        Node again(*env_, tl, {{"NAMED_SEGMENTS", "y"}});
        ASSERT_EQ(again.status, UCS_OK);
    }
    /* TearDown checks /dev/shm. */
}

/* A key travels through the peer it belongs to: over an endpoint to process
 * Q, tm_sm's get_zcopy / put_zcopy take keys of Q's memory only. A forged key
 * naming a third process R, or this process itself, is refused: R's memory
 * is neither read nor written, ours neither. */
TEST_P(TagMultiProc, ForgedRkeysNamingOtherProcesses) {
    if (GetParam() != "tm_sm") {
        GTEST_SKIP() << "CMA keys are tm_sm's";
    }
    constexpr size_t kLength = 4096;
    const std::string tl = GetParam();
    children_.reserve(2); /* the references below outlive the second add_child */
    /* Q: the peer the endpoint reaches; it idles until told to go. */
    Child &peer = add_child([tl](int sock) {
        ChildNode q(tl);
        if (q.node.status != UCS_OK) {
            return 2;
        }
        write_msg(sock, q.node.address());
        std::string bye;
        return read_msg(sock, &bye, q.progress_fn(), 60) ? 0 : 3;
    });
    /* R: a bystander with a buffer the forged key names; it checks the buffer
     * when told to. */
    Child &victim = add_child([](int sock) {
        std::vector<char> buffer(kLength, 'v');
        const uint64_t    where[2] = {static_cast<uint64_t>(getpid()),
                                      reinterpret_cast<uintptr_t>(buffer.data())};
        write_msg(sock, std::string(reinterpret_cast<const char *>(where), sizeof(where)));
        std::string check;
        if (!read_msg(sock, &check, idle, 60)) {
            return 3;
        }
        return std::all_of(buffer.begin(), buffer.end(), [](char c) { return c == 'v'; }) ? 0 : 1;
    });
    std::unique_ptr<Node> node;
    uct_ep_h              ep = nullptr;
    open_connected(peer, &node, &ep, false);
    std::string where_msg;
    ASSERT_TRUE(read_msg(victim.sock, &where_msg, idle));
    ASSERT_EQ(where_msg.size(), 2 * sizeof(uint64_t));
    uint64_t where[2];
    memcpy(where, where_msg.data(), sizeof(where));

    uct_md_attr_t md_attr;
    ASSERT_EQ(uct_md_query(env_->md(), &md_attr), UCS_OK);
    std::vector<char> own(kLength, 'o');
    uct_mem_h         memh;
    ASSERT_EQ(uct_md_mem_reg(env_->md(), own.data(), own.size(), UCT_MD_MEM_ACCESS_ALL, &memh),
              UCS_OK);
    std::string packed(md_attr.rkey_packed_size, '\0');
    ASSERT_EQ(uct_md_mkey_pack(env_->md(), memh, &packed[0]), UCS_OK);
    ASSERT_EQ(packed.size(), sizeof(uct_tm::sm::PackedRkey));
    uct_tm::sm::PackedRkey ours;
    memcpy(&ours, packed.data(), sizeof(ours));
    uct_tm::sm::PackedRkey theirs = ours; /* as a forger would write it */
    theirs.pid     = static_cast<int32_t>(where[0]);
    theirs.address = where[1];

    std::vector<char> local(kLength, 'x');
    uct_iov_t         iov = {local.data(), kLength, nullptr, 0, 1};
    for (const uct_tm::sm::PackedRkey *forged : {&theirs, &ours}) {
        const char *whose = (forged == &ours) ? "this process" : "a third process";
        uct_rkey_bundle_t rkey;
        ASSERT_EQ(uct_rkey_unpack(env_->component(), forged, &rkey), UCS_OK);
        EXPECT_EQ(uct_ep_get_zcopy(ep, &iov, 1, forged->address, rkey.rkey, nullptr),
                  UCS_ERR_INVALID_PARAM) << "get_zcopy of " << whose << "'s memory";
        EXPECT_EQ(uct_ep_put_zcopy(ep, &iov, 1, forged->address, rkey.rkey, nullptr),
                  UCS_ERR_INVALID_PARAM) << "put_zcopy into " << whose << "'s memory";
        uct_rkey_release(env_->component(), &rkey);
    }
    EXPECT_TRUE(std::all_of(local.begin(), local.end(), [](char c) { return c == 'x'; }))
        << "a refused get_zcopy wrote into the local buffer";
    EXPECT_TRUE(std::all_of(own.begin(), own.end(), [](char c) { return c == 'o'; }))
        << "a put_zcopy over the endpoint to the peer wrote into this process";
    write_msg(victim.sock, "check");
    EXPECT_EQ(reap(victim), 0) << "the third process's buffer was written";
    write_msg(peer.sock, "bye");
    EXPECT_EQ(reap(peer), 0);
    EXPECT_EQ(uct_md_mem_dereg(env_->md(), memh), UCS_OK);
    uct_ep_destroy(ep);
}

/* ---- split get_zcopy of registered memory ---------------------------------------------------- */

/* What closing a PRINT_STATS iface (`close`) printed on stderr. */
std::string printed_stats(const std::function<void()> &close) {
    char      stats[] = "/tmp/uct-tm-stats-XXXXXX";
    const int fd      = mkstemp(stats);
    if (fd < 0) {
        return "";
    }
    unlink(stats);
    fflush(stderr);
    const int saved = dup(STDERR_FILENO);
    dup2(fd, STDERR_FILENO);
    close();
    fflush(stderr);
    dup2(saved, STDERR_FILENO);
    ::close(saved);
    std::string   text(4096, '\0');
    const ssize_t n = pread(fd, &text[0], text.size(), 0);
    ::close(fd);
    text.resize((n > 0) ? size_t(n) : 0);
    return text;
}

/* The owner of a registered buffer, in a child: sends {address, length,
 * packed rkey}, serves (progresses, or not: `progress`, until "serve"
 * turns it on) until "bye", then
 * closes its iface with PRINT_STATS and sends how many get invitations it
 * wrote pieces of. With `claimed` > length it packs a key claiming more
 * than it registered (the rest is its memory too, never registered). */
int split_get_owner_main(int sock, const std::string &tl, size_t length, size_t claimed,
                         uint64_t seed, bool progress) {
    std::vector<char> buffer(claimed);
    fill_pattern(buffer.data(), claimed, seed);
    auto          q = std::make_unique<ChildNode>(tl, Settings{{"PRINT_STATS", "y"}});
    uct_md_attr_t md_attr;
    uct_mem_h     memh;
    if ((q->node.status != UCS_OK) || (uct_md_query(q->env.md(), &md_attr) != UCS_OK) ||
        (uct_md_mem_reg(q->env.md(), buffer.data(), length, UCT_MD_MEM_ACCESS_ALL, &memh) !=
         UCS_OK)) {
        return 2;
    }
    std::string packed(md_attr.rkey_packed_size, '\0');
    if ((uct_md_mkey_pack(q->env.md(), memh, &packed[0]) != UCS_OK) ||
        (packed.size() != sizeof(uct_tm::sm::PackedRkey))) {
        return 2;
    }
    uct_tm::sm::PackedRkey key;
    memcpy(&key, packed.data(), sizeof(key));
    key.length = claimed; /* as a forger would widen it */
    packed.assign(reinterpret_cast<const char *>(&key), sizeof(key));
    write_msg(sock, q->node.address());
    write_msg(sock, packed);
    /* Progress without yielding: a getter reads the whole buffer in well
     * under a millisecond. */
    const std::function<void()> serve = [&q] {
        for (int i = 0; i < 10000; ++i) {
            uct_worker_progress(q->env.worker());
        }
    };
    std::string command;
    do {
        if (!read_msg(sock, &command, progress ? serve : std::function<void()>(idle), 60)) {
            return 3;
        }
        progress = progress || (command == "serve");
    } while (command != "bye");
    uct_md_mem_dereg(q->env.md(), memh);
    const std::string text   = printed_stats([&q] { q.reset(); });
    unsigned long served = 0;
    const size_t  at     = text.find(" gets of ours split with their reader");
    if (at != std::string::npos) {
        const size_t from = text.rfind("; ", at);
        served            = strtoul(text.c_str() + from + 2, nullptr, 10);
    }
    write_msg(sock, std::to_string(served) + " (" + text + ")");
    return 0;
}

/* A get_zcopy of memory the owner registered (UCP's own rendezvous reads
 * the sender's buffer so): the data arrives whole, whether the owner writes
 * its pieces (it progresses: it served the invitation), does not progress
 * (the getter reads every piece itself, without waiting), or is asked for
 * more than it registered (it refuses to write any). */
/* A get_zcopy of memory the owner registered (UCP's own rendezvous reads
 * the sender's buffer so): the data arrives whole, whether the owner writes
 * its pieces (it progresses: it served the invitation), does not progress
 * (the getter reads every piece itself, without waiting), or is asked for
 * more than it registered (it refuses to write any). */
TEST_P(TagMultiProc, SplitGetOfRegisteredMemory) {
    if (GetParam() != "tm_sm") {
        GTEST_SKIP() << "tm_sm's split copy";
    }
    struct Case {
        const char *name;
        size_t      length, claimed;
        bool        progress;
        bool        served;
    };
    /* One owner, gets of its memory for a second (at least four: the first
     * invitation also has the owner map our segment, which may take longer
     * than our whole copy), then its count of invitations served. */
    const auto gets_of_one_owner = [this](const Case &k, unsigned long *served) {
        const std::string tl   = GetParam();
        const uint64_t    seed = test_seed() ^ k.claimed ^ k.progress;
        children_.clear();
        Child                &c = add_child([=](int sock) {
            return split_get_owner_main(sock, tl, k.length, k.claimed, seed, k.progress);
        });
        std::unique_ptr<Node> node;
        uct_ep_h              ep = nullptr;
        /* Split copies: CMA (RNDV_COPY=auto may pipeline them instead). */
        open_connected(c, &node, &ep, false, Settings{{"RNDV_COPY", "cma"}});
        uct_tm::sm::PackedRkey key;
        uct_rkey_bundle_t      rkey;
        ASSERT_NO_FATAL_FAILURE(read_owner_key(c, &key, &rkey));
        const auto start = std::chrono::steady_clock::now();
        for (int get = 0;
             (get < 4) ||
             (k.served && (std::chrono::steady_clock::now() - start < std::chrono::seconds(1)));
             ++get) {
            SCOPED_TRACE("get " + std::to_string(get));
            ASSERT_NO_FATAL_FAILURE(get_whole(ep, key.address, rkey.rkey, k.claimed, seed));
        }
        uct_rkey_release(env_->component(), &rkey);
        ASSERT_TRUE(write_msg(c.sock, "bye"));
        std::string text;
        ASSERT_TRUE(read_msg(c.sock, &text, idle, 60));
        *served = std::stoul(text);
        EXPECT_EQ(reap(c), 0) << text;
        uct_ep_destroy(ep);
    };
    constexpr size_t kLength = (3u << 20) + 4567; /* from RNDV_SPLIT_MIN, pieces and a tail */
    for (const Case &k :
         {Case{"owner progresses", kLength, kLength, true, true},
          Case{"owner does not progress", kLength, kLength, false, false},
          Case{"key wider than the registration", kLength, 2 * kLength, true, false}}) {
        SCOPED_TRACE(k.name);
        /* A progressing owner answers only if it runs while we still copy,
         * which a loaded host may not let it do within a second: up to three
         * owners, one must serve. Owners that must not serve get one try. */
        unsigned long served = 0;
        for (int attempt = 0; (attempt < (k.served ? 3 : 1)) && (served == 0); ++attempt) {
            ASSERT_NO_FATAL_FAILURE(gets_of_one_owner(k, &served));
        }
        EXPECT_EQ(served > 0, k.served) << served << " invitations served";
    }
}

/* A pipelined get_zcopy of registered memory whose owner does not progress
 * (an RMA target, a sender computing): the getter revokes the piece it
 * waits for and reads the rest by CMA. The owner, progressing later, finds
 * the stale request's chunks revoked or reused by newer gets and writes
 * none of them; while it progresses it fills the gets' chunks itself. Gets
 * cancelled while it writes leave their chunks to later gets only once it
 * is through with them (its late "ready" would otherwise overwrite the
 * next get's hand-over word, and that get wait forever). */
TEST_P(TagMultiProc, PipelinedGetTakenOverFromIdleOwner) {
    if (GetParam() != "tm_sm") {
        GTEST_SKIP() << "tm_sm's pipelined copy";
    }
    constexpr size_t      kLength = (3u << 20) + 4567; /* 49 staging chunks and a tail */
    const uint64_t        seed    = test_seed();
    Child                &c       = add_child([=](int sock) {
        return split_get_owner_main(sock, GetParam(), kLength, kLength, seed, false);
    });
    std::unique_ptr<Node> node;
    uct_ep_h              ep = nullptr;
    std::string           owner;
    open_connected(c, &node, &ep, false, Settings{{"RNDV_COPY", "pipelined"}, {"PRINT_STATS", "y"}},
                   &owner);
    uct_tm::sm::PackedRkey key;
    uct_rkey_bundle_t      rkey;
    ASSERT_NO_FATAL_FAILURE(read_owner_key(c, &key, &rkey));
    {
        SCOPED_TRACE("owner idle");
        ASSERT_NO_FATAL_FAILURE(get_whole(ep, key.address, rkey.rkey, kLength, seed));
    }
    ASSERT_TRUE(write_msg(c.sock, "serve"));
    /* For a second: a loaded host may keep the owner away for a while. */
    const auto start = std::chrono::steady_clock::now();
    for (int get = 0; std::chrono::steady_clock::now() - start < std::chrono::seconds(1); ++get) {
        SCOPED_TRACE("owner serving, get " + std::to_string(get));
        ASSERT_NO_FATAL_FAILURE(get_whole(ep, key.address, rkey.rkey, kLength, seed));
    }
    for (int cancel = 0; cancel < 32; ++cancel) {
        SCOPED_TRACE("cancelled get " + std::to_string(cancel));
        uct_ep_h doomed = nullptr;
        ASSERT_EQ(node->connect(owner, &doomed), UCS_OK);
        GuardedBuffer dest(kLength);
        Completion    done;
        ucs_status_t  status = UCS_ERR_NO_RESOURCE;
        ASSERT_NO_FATAL_FAILURE(issue_get(doomed, dest, key.address, rkey.rkey, &done, &status));
        ASSERT_EQ(status, UCS_INPROGRESS);
        for (int i = 0; i < cancel * 4; ++i) { /* cancelled at some piece */
            progress();
        }
        EXPECT_EQ(uct_ep_flush(doomed, UCT_FLUSH_FLAG_CANCEL, nullptr), UCS_OK);
        ASSERT_TRUE(wait([&] { return done.calls == 1; }, 30));
        EXPECT_TRUE((done.status == UCS_ERR_CANCELED) || (done.status == UCS_OK))
            << ucs_status_string(done.status);
        uct_ep_destroy(doomed);
        ASSERT_NO_FATAL_FAILURE(get_whole(ep, key.address, rkey.rkey, kLength, seed));
    }
    uct_rkey_release(env_->component(), &rkey);
    uct_ep_destroy(ep);
    const std::string text      = printed_stats([&node] { node.reset(); });
    unsigned long     pipelined = 0, taken_over = 0;
    const size_t      at = text.find(" gets split with their sender, ");
    ASSERT_NE(at, std::string::npos) << text;
    ASSERT_EQ(sscanf(text.c_str() + at,
                     " gets split with their sender, %lu pipelined (%lu finished", &pipelined,
                     &taken_over),
              2)
        << text;
    EXPECT_GE(taken_over, 1u) << "the get from the idle owner";
    EXPECT_GT(pipelined, taken_over) << "no get filled by the serving owner";
    ASSERT_TRUE(write_msg(c.sock, "bye"));
    std::string served;
    ASSERT_TRUE(read_msg(c.sock, &served, idle, 60));
    EXPECT_EQ(reap(c), 0);
}

/* ---- mismatched geometries ------------------------------------------------------------------ */

/* What one process tells another of its receive geometry. */
struct RxGeometry {
    size_t inline_cap; /* tag_eager_short / am_short: one FIFO element */
    size_t seg;        /* one descriptor */
    size_t frags;      /* fragments of one message its FIFO takes (half of it) */
};

/* One message of the mismatch test, as the sender sent it. */
struct Sent {
    int          kind; /* 0..2 tag short/bcopy/zcopy(3 iov), 3..5 AM short/bcopy/zcopy */
    uint32_t     length;
    uint64_t     seed;
    uct_tag_t    tag;
    ucs_status_t status;
};
constexpr uint8_t kGeomAmId = 9;

/* Sizes at every edge of both geometries, within what the sender advertises. */
std::vector<size_t> edge_sizes(const RxGeometry &rx, const uct_iface_attr_t &tx) {
    std::set<size_t> s = {0, 1, 8, 9};
    for (size_t base : {rx.inline_cap, rx.seg, rx.seg * rx.frags, size_t{tx.cap.am.max_short},
                        size_t{tx.cap.tag.eager.max_bcopy}, size_t{tx.cap.tag.eager.max_zcopy}}) {
        for (size_t d : {size_t{0}, size_t{1}}) {
            s.insert(base - d);
            s.insert(base + d);
        }
    }
    return std::vector<size_t>(s.begin(), s.end());
}

/* Calls `send` until it says something else than UCS_ERR_NO_RESOURCE. */
ucs_status_t wait_for_status(const std::function<ucs_status_t()> &send,
                             const std::function<void()> &progress) {
    ucs_status_t status = UCS_ERR_NO_RESOURCE;
    if (!wait_for([&] { return (status = send()) != UCS_ERR_NO_RESOURCE; }, progress)) {
        return UCS_ERR_TIMED_OUT;
    }
    return status;
}

int geometry_sender_main(int sock, const Settings &settings) {
    ChildCheck check;
    ChildNode  child("tm_sm", settings);
    if (!child.connect(sock)) {
        check.fail("iface open or connect failed: %s", ucs_status_string(child.node.status));
        return check.status();
    }
    std::string msg;
    RxGeometry  rx;
    if (!read_msg(sock, &msg, child.progress_fn()) || (msg.size() != sizeof(rx))) {
        check.fail("no receiver geometry");
        return check.status();
    }
    memcpy(&rx, msg.data(), sizeof(rx));
    const uct_iface_attr_t &attr = child.node.attr;
    Sender                  sender{child.ep, child.progress_fn()};
    std::vector<Sent>       sent;
    uint64_t                n = 0;
    for (size_t length : edge_sizes(rx, attr)) {
        for (int kind = 0; kind < 6; ++kind) {
            const size_t cap[6] = {attr.cap.tag.eager.max_short, attr.cap.tag.eager.max_bcopy,
                                   attr.cap.tag.eager.max_zcopy,  attr.cap.am.max_short,
                                   attr.cap.am.max_bcopy,         attr.cap.am.max_zcopy};
            if ((length > cap[kind]) || ((kind == 3) && (length < 8))) {
                continue;
            }
            Sent s{kind, static_cast<uint32_t>(length), mix(0x6e0, ++n), 0x5e00000000ull | n,
                   UCS_OK};
            std::vector<char> data(length);
            fill_pattern(data.data(), length, s.seed);
            if (kind < 3) {
                const Path path[3] = {Path::kShort, Path::kBcopy, Path::kZcopy};
                Send       t(path[kind], s.tag, 0, s.seed, length, (length >= 3) ? 3 : 1);
                s.status = sender.send(t);
            } else {
                s.status = wait_for_status([&]() -> ucs_status_t {
                    if (kind == 3) {
                        uint64_t header;
                        memcpy(&header, data.data(), 8);
                        return uct_ep_am_short(child.ep, kGeomAmId, header, data.data() + 8,
                                               static_cast<unsigned>(length - 8));
                    }
                    if (kind == 4) {
                        std::pair<const char *, size_t> arg{data.data(), length};
                        const ssize_t r = uct_ep_am_bcopy(
                            child.ep, kGeomAmId,
                            [](void *dest, void *a) -> size_t {
                                auto *p = static_cast<std::pair<const char *, size_t> *>(a);
                                std::copy(p->first, p->first + p->second, static_cast<char *>(dest));
                                return p->second;
                            },
                            &arg, 0);
                        return (r < 0) ? static_cast<ucs_status_t>(r) : UCS_OK;
                    }
                    const size_t h   = std::min<size_t>(length, 8);
                    uct_iov_t    iov = {data.data() + h, length - h, nullptr, 0, 1};
                    return uct_ep_am_zcopy(child.ep, kGeomAmId, data.data(),
                                           static_cast<unsigned>(h), &iov, 1, 0, nullptr);
                }, child.progress_fn());
            }
            sent.push_back(s);
        }
    }
    write_msg(sock, std::string(reinterpret_cast<const char *>(sent.data()),
                                sent.size() * sizeof(Sent)));
    if (!read_msg(sock, &msg, child.progress_fn(), 60)) {
        check.fail("no bye");
    }
    uct_ep_destroy(child.ep);
    return check.status();
}

TEST_P(TagMultiProc, MismatchedGeometriesCarryEveryMessageOrRefuseIt) {
    if (GetParam() != "tm_sm") {
        GTEST_SKIP() << "tm_sm's FIFO geometry";
    }
    const Settings base = {{"FIFO_ELEM_SIZE", "256"}, {"SEG_SIZE", "2k"}, {"FIFO_SIZE", "16"}};
    auto with = [&](const char *name, const char *value) {
        Settings s = base;
        for (auto &kv : s) {
            if (kv.first == name) {
                kv.second = value;
            }
        }
        return s;
    };
    const Settings small_all = {{"FIFO_ELEM_SIZE", "128"}, {"SEG_SIZE", "512"}, {"FIFO_SIZE", "4"}};
    const Settings big_all   = {{"FIFO_ELEM_SIZE", "1024"}, {"SEG_SIZE", "8k"}, {"FIFO_SIZE", "64"}};
    std::vector<std::pair<Settings, Settings>> pairs; /* (sender, receiver) */
    for (const auto &p : {std::make_pair("FIFO_ELEM_SIZE", std::make_pair("128", "1024")),
                          std::make_pair("SEG_SIZE", std::make_pair("512", "8k")),
                          std::make_pair("FIFO_SIZE", std::make_pair("4", "64"))}) {
        pairs.emplace_back(with(p.first, p.second.first), with(p.first, p.second.second));
        pairs.emplace_back(with(p.first, p.second.second), with(p.first, p.second.first));
    }
    pairs.emplace_back(big_all, small_all);
    pairs.emplace_back(small_all, big_all);

    for (const auto &pair : pairs) {
        std::string label;
        for (const auto &kv : pair.first) {
            label += kv.first + "=" + kv.second + " ";
        }
        label += "-> ";
        for (const auto &kv : pair.second) {
            label += kv.first + "=" + kv.second + " ";
        }
        SCOPED_TRACE(label);
        const Settings tx_settings = pair.first;
        Child &c = add_child([tx_settings](int sock) { return geometry_sender_main(sock, tx_settings); });
        env_.reset(new UctEnv());
        Node rx(*env_, "tm_sm", pair.second);
        ASSERT_EQ(rx.status, UCS_OK);
        std::vector<std::string> ams;
        ASSERT_EQ(rx.set_am_log(kGeomAmId, &ams), UCS_OK);
        std::string addr;
        uct_ep_h    back = nullptr;
        ASSERT_TRUE(read_msg(c.sock, &addr, idle));
        ASSERT_EQ(rx.connect(addr, &back), UCS_OK);
        ASSERT_TRUE(write_msg(c.sock, rx.address()));
        /* one descriptor: am.max_zcopy (a bcopy may go beyond it, BCOPY_MAX) */
        const RxGeometry geom{rx.attr.cap.tag.eager.max_short, rx.attr.cap.am.max_zcopy,
                              rx.attr.cap.tag.eager.max_zcopy / rx.attr.cap.am.max_zcopy};
        ASSERT_TRUE(write_msg(c.sock, std::string(reinterpret_cast<const char *>(&geom),
                                                  sizeof(geom))));
        std::string report;
        ASSERT_TRUE(read_msg(c.sock, &report, [this] { progress(); }, 60));
        ASSERT_EQ(report.size() % sizeof(Sent), 0u);
        std::vector<Sent> sent(report.size() / sizeof(Sent));
        memcpy(static_cast<void *>(sent.data()), report.data(), report.size());
        size_t tags_ok = 0, ams_ok = 0, refused = 0;
        for (const Sent &s : sent) {
            /* an active message in one element or descriptor: short and zcopy */
            const bool single   = (s.kind == 3) || (s.kind == 5);
            const bool fits     = (s.length <= geom.inline_cap) ||
                                  (single ? (s.length <= geom.seg)
                                          : ((s.length + geom.seg - 1) / geom.seg <= geom.frags));
            if (s.status == UCS_OK) {
                (s.kind >= 3 ? ams_ok : tags_ok) += 1;
            } else {
                ++refused;
                EXPECT_FALSE(fits) << "kind " << s.kind << ", " << s.length
                                   << " B fits the receiver but was not sent: "
                                   << ucs_status_string(s.status);
                EXPECT_EQ(s.status, UCS_ERR_EXCEEDS_LIMIT) << "kind " << s.kind << ", " << s.length << " B";
            }
        }
        EXPECT_GT(tags_ok + ams_ok, 0u);
        ASSERT_TRUE(wait([&] {
            return (rx.unexp.complete_messages() >= tags_ok) && (ams.size() >= ams_ok);
        })) << rx.unexp.complete_messages() << " of " << tags_ok << " tagged and " << ams.size()
            << " of " << ams_ok << " active messages arrived";
        for (int i = 0; i < 1000; ++i) {
            progress();
        }
        EXPECT_EQ(rx.unexp.complete_messages(), tags_ok) << "extra tagged messages";
        EXPECT_EQ(ams.size(), ams_ok) << "extra active messages";
        std::map<uct_tag_t, const Unexpected::Message *> by_tag;
        for (const auto &m : rx.unexp.messages) {
            EXPECT_TRUE(by_tag.emplace(m.tag, &m).second) << "tag delivered twice";
        }
        size_t am_index = 0;
        for (const Sent &s : sent) {
            if (s.status != UCS_OK) {
                continue;
            }
            if (s.kind >= 3) {
                if (am_index < ams.size()) {
                    const std::string &d = ams[am_index++];
                    EXPECT_EQ(d.size(), s.length) << "AM kind " << s.kind;
                    EXPECT_EQ(pattern_mismatch(d.data(), std::min<size_t>(d.size(), s.length), s.seed),
                              SIZE_MAX) << "AM kind " << s.kind << ", " << s.length << " B";
                }
                continue;
            }
            auto it = by_tag.find(s.tag);
            if (it == by_tag.end()) {
                ADD_FAILURE() << "tagged kind " << s.kind << ", " << s.length << " B lost";
                continue;
            }
            EXPECT_EQ(it->second->data.size(), s.length);
            EXPECT_EQ(pattern_mismatch(it->second->data.data(),
                                       std::min<size_t>(it->second->data.size(), s.length), s.seed),
                      SIZE_MAX) << "tagged kind " << s.kind << ", " << s.length << " B";
        }
        EXPECT_EQ(rx.unexp.violations, std::vector<std::string>{});
        rx.release_held_descs();
        printf("[          ] %s: %zu tagged, %zu AM delivered, %zu refused\n", label.c_str(),
               tags_ok, ams_ok, refused);
        write_msg(c.sock, "bye");
        EXPECT_EQ(reap(c), 0);
        uct_ep_destroy(back);
        close(c.sock);
        children_.clear();
        if (HasFailure()) {
            break;
        }
    }
}

}  // namespace

INSTANTIATE_TEST_SUITE_P(tm, TagMultiProc, ::testing::ValuesIn(tag_transports()),
                         transport_param_name);
GTEST_ALLOW_UNINSTANTIATED_PARAMETERIZED_TEST(TagMultiProc);

}  // namespace uct_tm_test
