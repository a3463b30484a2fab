/*
 * Transports whose endpoints share a bounded pool of initiator queue pairs
 * (tm_dc's QpPool of RC queue pairs, QP_POOL_SIZE): a sender with many
 * more endpoints than the pool sends to several receiver ifaces, in an
 * order that makes every send need a connection another endpoint holds,
 * while earlier messages -- rendezvous ones waiting for their receiver
 * included -- are still in flight. Every message must arrive exactly once,
 * in the receive posted for it, with its bytes; no endpoint may fail; and
 * the sender's counters must show that connections were in fact closed for
 * others (evictions) and the pool never held more queue pairs than its size.
 *
 * DeadInitiatorTest: the target's end of a connection whose initiator died
 * (a forked process that exits without a word) goes within seconds --
 * the target probes its idle passive queue pairs every CONN_TIMEOUT --
 * while the end of a live initiator that went quiet stays usable.
 *
 * Skipped by transports without such a pool (no QP_POOL_SIZE setting).
 */
#include "tag_fixture.h"

#include <gtest/gtest.h>

#include <cctype>

#include <cstdio>
#include <fcntl.h>
#include <signal.h>
#include <sys/wait.h>
#include <chrono>
#include <memory>
#include <poll.h>
#include <regex>
#include <string>
#include <unistd.h>
#include <vector>

namespace uct_tm_test {
namespace {

constexpr unsigned kPoolSize      = 2;
constexpr size_t   kTargets       = 5;  /* receiver ifaces */
constexpr size_t   kEpsPerTarget  = 2;  /* two connections to each */
constexpr size_t   kRounds        = 12; /* every endpoint sends once per round */

/* The value of counter `name` in an iface's PRINT_STATS line, or -1. */
long stats_counter(const std::string &stats, const std::string &name) {
    std::smatch m;
    if (std::regex_search(stats, m, std::regex(name + " ([0-9]+)"))) {
        return std::stol(m[1]);
    }
    return -1;
}

class QpPoolTest : public TagTest {
  protected:
    void SetUp() override {
        TagTest::SetUp();
        if (IsSkipped() || HasFatalFailure()) {
            return;
        }
        const std::string pool = std::to_string(kPoolSize);
        /* skipped where there is no such setting; the receivers by the
         * setting's old name, an alias that must keep working */
        reopen({{"NUM_DCI", pool}}, {{"QP_POOL_SIZE", pool}, {"PRINT_STATS", "y"}});
        if (IsSkipped() || HasFatalFailure()) {
            return;
        }
        targets_.push_back(rx_.get());
        for (size_t i = 1; i < kTargets; ++i) {
            extra_.emplace_back(new Node(*env_, GetParam()));
            ASSERT_EQ(extra_.back()->status, UCS_OK) << "receiver iface " << i;
            targets_.push_back(extra_.back().get());
        }
        for (Node *target : targets_) {
            for (size_t k = 0; k < kEpsPerTarget; ++k) {
                uct_ep_h ep = nullptr;
                ASSERT_EQ(tx_->connect(target->address(), &ep), UCS_OK);
                eps_.push_back({ep, target});
            }
        }
    }

    void TearDown() override {
        for (const auto &e : eps_) {
            uct_ep_destroy(e.ep);
        }
        eps_.clear();
        extra_.clear();
        TagTest::TearDown();
    }

    struct Endpoint {
        uct_ep_h ep;
        Node    *target;
    };
    struct Message {
        std::unique_ptr<Send>        send;
        std::unique_ptr<RecvCtx>     recv;
        std::unique_ptr<RecvBuffers> buffers;
        Node                        *target = nullptr;
    };

    std::vector<std::unique_ptr<Node>> extra_;
    std::vector<Node *>                targets_;
    std::vector<Endpoint>              eps_;
};

TEST_P(QpPoolTest, EndpointsOutnumberingThePoolDeliverEveryMessageOnce) {
    std::vector<Path> paths;
    for (Path p : {Path::kShort, Path::kBcopy, Path::kZcopy, Path::kRndv}) {
        if (!lacks(p)) {
            paths.push_back(p);
        }
    }
    ASSERT_FALSE(paths.empty());
    Rng                  rng(test_seed() ^ 0xdc1);
    std::vector<Message> messages;
    messages.reserve(kRounds * eps_.size());
    for (size_t round = 0; round < kRounds; ++round) {
        /* each round in another order: the endpoint that sends next is
         * rarely one that holds a queue pair of the pool */
        std::vector<size_t> order(eps_.size());
        for (size_t i = 0; i < order.size(); ++i) {
            order[i] = i;
        }
        for (size_t i = order.size() - 1; i > 0; --i) {
            std::swap(order[i], order[rng.range(0, i)]);
        }
        for (size_t e : order) {
            const Path                 path  = paths[rng.range(0, paths.size() - 1)];
            const std::vector<size_t> &sizes = tx_->caps.sizes(path);
            const size_t               len   = sizes[rng.range(0, sizes.size() - 1)];
            const uct_tag_t            tag   = (uct_tag_t{e + 1} << 32) | (round + 1);
            Message                    m;
            m.target  = eps_[e].target;
            m.send.reset(new Send(path, tag, round, tag * 7 + 1, len));
            m.recv.reset(new RecvCtx);
            m.buffers.reset(new RecvBuffers(len));
            ucs_status_t status;
            /* a tag list has room once earlier receives completed */
            ASSERT_TRUE(wait([&] {
                status = uct_iface_tag_recv_zcopy(m.target->iface, tag, ~uct_tag_t{0},
                                                  m.buffers->iov.data(), m.buffers->iov.size(),
                                                  &m.recv->ctx);
                return status != UCS_ERR_EXCEEDS_LIMIT;
            })) << "no room for a receive";
            ASSERT_EQ(status, UCS_OK);
            ASSERT_TRUE(wait([&] {
                status = m.send->post(eps_[e].ep);
                return status != UCS_ERR_NO_RESOURCE;
            })) << "endpoint " << e << " never got a queue pair of the pool";
            ASSERT_TRUE((status == UCS_OK) || (status == UCS_INPROGRESS))
                    << "endpoint " << e << ", round " << round << ": " << ucs_status_string(status);
            messages.push_back(std::move(m));
        }
    }
    ASSERT_TRUE(wait([&] {
        for (const Message &m : messages) {
            if (!m.recv->done() || (m.send->comp_pending && (m.send->comp->calls == 0))) {
                return false;
            }
        }
        return true;
    }, 60)) << "messages still outstanding";
    drain();
    for (size_t i = 0; i < messages.size(); ++i) {
        const Message &m = messages[i];
        EXPECT_EQ(check_delivery(*m.recv, *m.buffers, *m.send, UCS_OK), "")
                << "message " << i << " (" << path_name(m.send->path) << ", "
                << m.send->payload.size() << " B, tag 0x" << std::hex << m.send->tag << ")";
        if (m.send->comp_pending) {
            EXPECT_EQ(m.send->comp->calls, 1) << "message " << i;
            EXPECT_EQ(m.send->comp->status, UCS_OK) << "message " << i;
        }
    }
    for (const Node *target : targets_) {
        EXPECT_EQ(target->unexp.complete_messages(), 0u) << "a message arrived twice";
        EXPECT_TRUE(target->unexp.rndvs.empty()) << "a rendezvous arrived twice";
    }
    EXPECT_TRUE(tx_->errors.entries.empty()) << "an endpoint failed";

    /* the sender's counters, printed when its iface closes */
    const long endpoints = static_cast<long>(eps_.size());
    for (const auto &e : eps_) {
        uct_ep_destroy(e.ep);
    }
    eps_.clear();
    uct_ep_destroy(ep_);
    ep_ = nullptr;
    const std::string stats = capture_stderr([&] { tx_.reset(); });
    const long evictions = stats_counter(stats, "evictions");
    const long max_qps   = stats_counter(stats, "max_qps");
    EXPECT_GT(evictions, 0) << stats;
    EXPECT_GE(max_qps, 1) << stats;
    EXPECT_LE(max_qps, static_cast<long>(kPoolSize)) << stats;
    /* each endpoint connected at least once; every connection but the ones
     * still held at the end (at most the pool) was evicted */
    const long connects = stats_counter(stats, "connects");
    EXPECT_GE(connects, endpoints) << stats;
    EXPECT_GE(connects - evictions, 1) << stats;
    EXPECT_LE(connects - evictions, static_cast<long>(kPoolSize)) << stats;
}

class DeadInitiatorTest : public ::testing::TestWithParam<std::string> {};

/* One-byte commands between the test and its forked initiator. */
bool put(int fd, char c) { return write(fd, &c, 1) == 1; }
bool get(int fd, char *c) { return read(fd, c, 1) == 1; }

/* The forked initiator: connects to the address on `in`, sends message 1,
 * then on 's' message 2 (and reports its completion), on 'd' exits at once:
 * no endpoint destroyed, no disconnect sent. */
[[noreturn]] void initiator(const std::string &tl, int in, int out) {
    alarm(60);
    UctEnv env(tl);
    Node   node(env, tl);
    uint32_t    len = 0;
    std::string addr;
    if ((node.status != UCS_OK) || (read(in, &len, sizeof(len)) != sizeof(len)) || (len > 4096)) {
        _exit(3);
    }
    addr.resize(len);
    if (read(in, &addr[0], len) != static_cast<ssize_t>(len)) {
        _exit(3);
    }
    uct_ep_h ep = nullptr;
    if (node.connect(addr, &ep) != UCS_OK) {
        _exit(4);
    }
    auto send = [&](uct_tag_t tag) {
        ucs_status_t st;
        const bool   sent = wait_for([&] { return (st = uct_ep_tag_eager_short(ep, tag, "ping", 4)) !=
                                                  UCS_ERR_NO_RESOURCE; },
                                     [&] { uct_worker_progress(env.worker()); });
        const bool flushed = sent && (st == UCS_OK) &&
                             wait_for([&] { return uct_ep_flush(ep, 0, nullptr) == UCS_OK; },
                                      [&] { uct_worker_progress(env.worker()); });
        return flushed;
    };
    if (!send(1)) {
        _exit(5);
    }
    put(out, '1');
    for (char c; get(in, &c);) {
        if (c == 's') {
            put(out, send(2) ? '2' : 'x');
        } else {
            _exit(0); /* 'd': dies with its queue pairs open */
        }
    }
    _exit(0);
}

TEST_P(DeadInitiatorTest, PassiveQueuePairsOfADeadInitiatorGo) {
    const std::string tl = GetParam();
    {
        UctEnv probe(tl);
        if (probe.iface_setting(tl, "QP_POOL_SIZE").empty()) {
            GTEST_SKIP() << tl << " has no pool of initiators";
        }
    }
    int to_child[2], to_parent[2];
    ASSERT_EQ(pipe(to_child), 0);
    ASSERT_EQ(pipe(to_parent), 0);
    const pid_t child = fork();
    ASSERT_GE(child, 0);
    if (child == 0) {
        close(to_child[1]);
        close(to_parent[0]);
        initiator(tl, to_child[0], to_parent[1]);
    }
    close(to_child[0]);
    close(to_parent[1]);
    struct Reaper {
        pid_t pid;
        ~Reaper() {
            if (pid > 0) {
                kill(pid, SIGKILL);
                waitpid(pid, nullptr, 0);
            }
        }
    } reaper{child};
    /* probed every 500 ms; a probe fails after 4 tries of about 17 ms */
    UctEnv env(tl);
    std::unique_ptr<Node> target(new Node(env, tl,
                                          {{"CONN_TIMEOUT", "500ms"}, {"TIMEOUT", "12"},
                                           {"RETRY_COUNT", "3"}, {"PRINT_STATS", "y"}}));
    ASSERT_EQ(target->status, UCS_OK);
    const std::string addr = target->address();
    const uint32_t    len  = static_cast<uint32_t>(addr.size());
    ASSERT_EQ(write(to_child[1], &len, sizeof(len)), static_cast<ssize_t>(sizeof(len)));
    ASSERT_EQ(write(to_child[1], addr.data(), len), static_cast<ssize_t>(len));
    auto progress = [&] { uct_worker_progress(env.worker()); };
    auto readable = [&] {
        struct pollfd pfd = {to_parent[0], POLLIN, 0};
        return poll(&pfd, 1, 0) > 0;
    };
    char c = 0;
    ASSERT_TRUE(wait_for(readable, progress, 30)) << "the initiator never sent";
    ASSERT_TRUE(get(to_parent[0], &c));
    ASSERT_EQ(c, '1') << "the initiator's first send failed";
    ASSERT_TRUE(wait_for([&] { return target->unexp.complete_messages() == 1; }, progress));

    /* a live initiator, quiet for several probe rounds: its connection stays */
    const auto quiet = std::chrono::steady_clock::now() + std::chrono::milliseconds(2500);
    wait_for([&] { return std::chrono::steady_clock::now() > quiet; }, progress, 10);
    ASSERT_TRUE(put(to_child[1], 's'));
    ASSERT_TRUE(wait_for(readable, progress, 30)) << "the initiator's second send never ended";
    ASSERT_TRUE(get(to_parent[0], &c));
    EXPECT_EQ(c, '2') << "the probes broke a live initiator's connection";
    ASSERT_TRUE(wait_for([&] { return target->unexp.complete_messages() == 2; }, progress));

    /* the initiator dies: its passive queue pair goes */
    ASSERT_TRUE(put(to_child[1], 'd'));
    int ws = 0;
    ASSERT_EQ(waitpid(child, &ws, 0), child);
    reaper.pid = 0;
    EXPECT_TRUE(WIFEXITED(ws) && (WEXITSTATUS(ws) == 0)) << "initiator status " << ws;
    const auto settle = std::chrono::steady_clock::now() + std::chrono::seconds(5);
    wait_for([&] { return std::chrono::steady_clock::now() > settle; }, progress, 10);
    const std::string stats = capture_stderr([&] { target.reset(); });
    EXPECT_EQ(stats_counter(stats, "accepts"), 1) << stats;
    EXPECT_EQ(stats_counter(stats, "passive_open"), 0) << stats;
    close(to_child[1]);
    close(to_parent[0]);
}

/* NUM_DCI is an alias of QP_POOL_SIZE: alone it sets the pool's size; with
 * both in the environment QP_POOL_SIZE wins (docs/tm_dc.md). */
TEST_P(DeadInitiatorTest, NumDciIsAnAliasOfQpPoolSize) {
    const std::string tl = GetParam();
    UctEnv            probe(tl);
    if (probe.iface_setting(tl, "QP_POOL_SIZE").empty()) {
        GTEST_SKIP() << tl << " has no pool of initiators";
    }
    std::string prefix = "UCX_";
    for (char c : tl) {
        prefix += static_cast<char>(toupper(static_cast<unsigned char>(c)));
    }
    const std::string alias = prefix + "_NUM_DCI", name = prefix + "_QP_POOL_SIZE";
    ASSERT_EQ(setenv(alias.c_str(), "3", 1), 0);
    EXPECT_EQ(probe.iface_setting(tl, "QP_POOL_SIZE"), "3") << alias << " alone";
    ASSERT_EQ(setenv(name.c_str(), "5", 1), 0);
    EXPECT_EQ(probe.iface_setting(tl, "QP_POOL_SIZE"), "5") << "both set";
    unsetenv(alias.c_str());
    unsetenv(name.c_str());
}

INSTANTIATE_TEST_SUITE_P(tm, DeadInitiatorTest, ::testing::ValuesIn(tag_transports()),
                         transport_param_name);
GTEST_ALLOW_UNINSTANTIATED_PARAMETERIZED_TEST(DeadInitiatorTest);

INSTANTIATE_TEST_SUITE_P(tm, QpPoolTest, ::testing::ValuesIn(tag_transports()),
                         transport_param_name);
GTEST_ALLOW_UNINSTANTIATED_PARAMETERIZED_TEST(QpPoolTest);

}  // namespace
}  // namespace uct_tm_test
