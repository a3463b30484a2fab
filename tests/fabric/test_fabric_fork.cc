/* Two processes (fork) over each domain: names exchanged over a socketpair,
 * then tagged and untagged ping-pongs of every size class, both ways, with
 * remote data and the source address checked on every message. Each send
 * follows a pause longer than the layer keeps polling a quiet second
 * transport on every call: the tcp side of "tm_sm,tcp" is found idle. */
#include "fabric_fixture.h"

#include <signal.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstring>
#include <string>

using namespace fabric_test;

namespace {

const size_t kSizes[] = {0, 1, 100, 4096, 65536, 200000, 1 << 21};

bool exchange(int sock, const std::vector<char> &mine, std::vector<char> *theirs) {
    theirs->resize(mine.size());
    return (write(sock, mine.data(), mine.size()) == static_cast<ssize_t>(mine.size())) &&
           (read(sock, theirs->data(), theirs->size()) == static_cast<ssize_t>(theirs->size()));
}

/* One side; the number of failed checks (0: all good). */
int run_side(const char *domain, int sock, bool first) {
    constexpr useconds_t kPauseUs = 2000; /* the layer's kSecondaryLinger is 1 ms */
    Fabric               f;
    Ep                   e;
    if ((f.open(domain) != 0) || (e.open(f, FI_CQ_FORMAT_TAGGED, FI_AV_TABLE) != 0)) {
        return 100;
    }
    std::vector<char> peer_name;
    if (!exchange(sock, e.name(), &peer_name)) {
        return 101;
    }
    const fi_addr_t peer     = e.insert(peer_name);
    int             failures = (peer == FI_ADDR_NOTAVAIL) ? 1 : 0;
    for (size_t size : kSizes) {
        for (bool tagged : {true, false}) {
            const std::vector<char> msg = pattern(size, static_cast<unsigned>(size) + first);
            std::vector<char>       buf(size);
            for (int turn = 0; turn < 2; ++turn) {
                const bool sending = (turn == 0) == first;
                ssize_t    ret     = 0;
                if (sending) {
                    usleep(kPauseUs);
                    ret = tagged
                              ? fi_tsenddata(e.ep, msg.data(), size, nullptr, size, peer, 9,
                                             nullptr)
                              : fi_senddata(e.ep, msg.data(), size, nullptr, size, peer, nullptr);
                } else {
                    ret = tagged ? fi_trecv(e.ep, buf.data(), size, nullptr, peer, 9, 0, nullptr)
                                 : fi_recv(e.ep, buf.data(), size, nullptr, peer, nullptr);
                }
                fi_cq_tagged_entry c{};
                fi_addr_t          src = FI_ADDR_NOTAVAIL;
                failures += (ret != 0) || (wait_cq(e.cq, &c, &src) != 1);
                if (!sending) {
                    const std::vector<char> want = pattern(size,
                                                           static_cast<unsigned>(size) + !first);
                    failures += (buf != want) || (src != peer) || (c.len != size) ||
                                (c.data != size) || ((c.flags & FI_REMOTE_CQ_DATA) == 0) ||
                                (tagged && (c.tag != 9));
                }
            }
        }
    }
    char done = 0; /* neither side leaves before the other is done */
    failures += !((write(sock, &done, 1) == 1) && (read(sock, &done, 1) == 1));
    e.close();
    f.close();
    return failures;
}

/* Ends a forked child: its own count of failed checks plus one if a gtest
 * check failed in it (the child's gtest result is lost with the child). */
[[noreturn]] void exit_child(int failures) {
    _exit(std::min(failures + (::testing::Test::HasFailure() ? 1 : 0), 125));
}

/* The status of a forked child that ran `side` (-1: fork or wait failed). */
template <typename F> int child_status(F &&side) {
    const pid_t pid = fork();
    if (pid == 0) {
        alarm(60);
        exit_child(side());
    }
    int status = 0;
    if ((pid < 0) || (waitpid(pid, &status, 0) != pid) || !WIFEXITED(status)) {
        return -1;
    }
    return WEXITSTATUS(status);
}

/* Whether the provider offers `domain` on this host. */
bool offered(const char *domain) {
    fi_info *info = tm_info(domain);
    fi_freeinfo(info);
    return info != nullptr;
}

/* Forks a child that runs side(its socket) and exits with exit_child(); the
 * parent's end of the socket pair goes to *sock. -1 if either call failed. */
template <typename F> pid_t fork_peer(int *sock, F &&side) {
    int sv[2];
    if (socketpair(AF_UNIX, SOCK_STREAM, 0, sv) != 0) {
        return -1;
    }
    const pid_t pid = fork();
    if (pid == 0) {
        close(sv[0]);
        alarm(120);
        exit_child(side(sv[1]));
    }
    close(sv[1]);
    *sock = sv[0];
    return pid;
}

/* The domains of the two sides. */
struct DomainPair {
    const char *first;
    const char *second;
};

class FabricFork : public ::testing::TestWithParam<DomainPair> {};

}  // namespace

TEST_P(FabricFork, PingPongEverySizeBothKinds) {
    for (const char *domain : {GetParam().first, GetParam().second}) {
        if (!offered(domain)) {
            GTEST_SKIP() << domain << " is not offered on this host";
        }
    }
    int         sock = -1;
    const pid_t pid = fork_peer(&sock, [](int s) { return run_side(GetParam().second, s, false); });
    ASSERT_GE(pid, 0);
    EXPECT_EQ(0, run_side(GetParam().first, sock, true));
    close(sock);
    int status = 0;
    ASSERT_EQ(pid, waitpid(pid, &status, 0));
    ASSERT_TRUE(WIFEXITED(status)) << "child status " << status;
    EXPECT_EQ(0, WEXITSTATUS(status));
}

/* A gtest check failing in a child fails the parent's test: the failure
 * message the child prints below is expected. */
TEST(FabricForkChild, GtestFailureReachesParent) {
    EXPECT_EQ(0, child_status([] { return 0; }));
    EXPECT_EQ(1, child_status([] {
                  ADD_FAILURE() << "expected: a child's failure, the parent checks it is seen";
                  return 0;
              }));
}

/* The peer of FabricPeerDeath: an endpoint that hands over its name, says
 * it is ready and then neither receives nor progresses until it is killed. */
int run_silent_peer(const char *domain, int sock) {
    Fabric            f;
    Ep                e;
    std::vector<char> theirs;
    char              ready = 1;
    if ((f.open(domain) != 0) || (e.open(f, FI_CQ_FORMAT_TAGGED, FI_AV_TABLE) != 0) ||
        !exchange(sock, e.name(), &theirs) || (write(sock, &ready, 1) != 1)) {
        return 1;
    }
    pause();
    return 0;
}

/* An endpoint over the domain GetParam() with a silent peer in a forked
 * process at `peer`, for the test to kill. */
class FabricPeerDeath : public ::testing::TestWithParam<const char *> {
  protected:
    void SetUp() override {
        if (!offered(GetParam())) {
            GTEST_SKIP() << GetParam() << " is not offered on this host";
        }
        pid_ = fork_peer(&sock_, [](int s) { return run_silent_peer(GetParam(), s); });
        ASSERT_GE(pid_, 0);
        ASSERT_EQ(0, f.open(GetParam()));
        ASSERT_EQ(0, e.open(f, FI_CQ_FORMAT_TAGGED, FI_AV_TABLE));
        std::vector<char> theirs;
        char              ready = 0;
        ASSERT_TRUE(exchange(sock_, e.name(), &theirs));
        ASSERT_EQ(1, read(sock_, &ready, 1));
        peer = e.insert(theirs);
        ASSERT_NE(FI_ADDR_NOTAVAIL, peer);
    }

    void TearDown() override {
        kill_peer();
        e.close();
        f.close();
    }

    /* SIGKILL to the peer and its exit collected; false if that failed. */
    bool kill_peer() {
        if (pid_ <= 0) {
            return pid_ == 0;
        }
        int        status = 0;
        const bool killed = (kill(pid_, SIGKILL) == 0) && (waitpid(pid_, &status, 0) == pid_);
        close(sock_);
        pid_ = 0;
        return killed;
    }

    /* Reads the CQ until done() or 60 s, each error entry to on_error();
     * returns how many successes it read. */
    template <typename Done, typename OnError> size_t read_until(Done &&done, OnError &&on_error) {
        size_t     successes = 0;
        const auto deadline  = std::chrono::steady_clock::now() + std::chrono::seconds(60);
        while (!done() && (std::chrono::steady_clock::now() < deadline)) {
            fi_cq_tagged_entry c{};
            const ssize_t      ret = fi_cq_read(e.cq, &c, 1);
            successes += (ret == 1);
            if (ret == -FI_EAVAIL) {
                on_error(read_err(e.cq));
            }
        }
        return successes;
    }

    Fabric    f;
    Ep        e;
    fi_addr_t peer = FI_ADDR_NOTAVAIL;

  private:
    pid_t pid_  = 0;
    int   sock_ = -1;
};

/* A peer killed while sends wait on it: a rendezvous send (its receiver
 * never took the data) and fi_tinject's queued behind the credits it never
 * returned end as error completions -- the send's with its context, the
 * injects' without (they had none) -- within the keepalive's time, never a
 * hang; nothing completes as a success. */
TEST_P(FabricPeerDeath, SendsWaitingOnItEndInErrors) {
    constexpr size_t kInjects = 512; /* 2 MiB of 4 KiB injects: past any credit window */

    const std::vector<char> big = pattern(1 << 20, 1), small = pattern(4096, 2);
    int                     ctx = 0;
    ASSERT_EQ(0, fi_tsend(e.ep, big.data(), big.size(), nullptr, peer, 1, &ctx));
    for (size_t i = 0; i < kInjects; ++i) {
        ASSERT_EQ(0, fi_tinject(e.ep, small.data(), small.size(), peer, 2)) << i;
    }
    ASSERT_TRUE(kill_peer());

    size_t       send_errors = 0, inject_errors = 0;
    const size_t successes = read_until([&] { return (send_errors != 0) && (inject_errors != 0); },
                                        [&](const fi_cq_err_entry &err) {
                                            EXPECT_NE(0, err.err);
                                            EXPECT_EQ(uint64_t{FI_SEND | FI_TAGGED},
                                                      err.flags & (FI_SEND | FI_TAGGED));
                                            send_errors += (err.op_context == &ctx);
                                            inject_errors += (err.op_context == nullptr);
                                        });
    EXPECT_EQ(1u, send_errors) << "the rendezvous send still waits on the dead peer";
    EXPECT_LT(0u, inject_errors) << "no queued inject reported its failure";
    EXPECT_EQ(0u, successes);
}

/* Receives directed at a peer that dies wait for messages that cannot come
 * (Open MPI's mtl ofi posts every MPI_Recv with a source this way): the
 * tagged and the untagged one end as error completions with their context
 * and kind, a later one is refused at once, and a receive from any source
 * stays posted (fi_cancel still finds it). */
TEST_P(FabricPeerDeath, ReceivesDirectedAtItEndInErrors) {
    std::vector<char> buf(64);
    int               tagged = 0, untagged = 0, any = 0;
    ASSERT_EQ(0, fi_trecv(e.ep, buf.data(), buf.size(), nullptr, peer, 5, 0, &tagged));
    ASSERT_EQ(0, fi_recv(e.ep, buf.data(), buf.size(), nullptr, peer, &untagged));
    ASSERT_EQ(0, fi_trecv(e.ep, buf.data(), buf.size(), nullptr, FI_ADDR_UNSPEC, 5, 0, &any));
    ASSERT_TRUE(kill_peer());

    fi_cq_err_entry tagged_err{}, untagged_err{};
    size_t          others = 0; /* entries neither directed receive's, or one twice */
    const auto      take   = [&](const fi_cq_err_entry &err) {
        fi_cq_err_entry *into = (err.op_context == &tagged)     ? &tagged_err
                                       : (err.op_context == &untagged) ? &untagged_err
                                                                       : nullptr;
        others += (into == nullptr) || (into->err != 0);
        if (into != nullptr) {
            *into = err;
        }
    };
    const size_t successes =
        read_until([&] { return (tagged_err.err != 0) && (untagged_err.err != 0); }, take);
    ASSERT_NE(0, tagged_err.err) << "the directed tagged receive still waits on the dead peer";
    ASSERT_NE(0, untagged_err.err) << "the directed untagged receive still waits";
    EXPECT_EQ(uint64_t{FI_RECV | FI_TAGGED}, tagged_err.flags & (FI_RECV | FI_TAGGED | FI_MSG));
    EXPECT_EQ(uint64_t{FI_RECV | FI_MSG}, untagged_err.flags & (FI_RECV | FI_TAGGED | FI_MSG));
    EXPECT_TRUE((tagged_err.err == FI_ECONNRESET) || (tagged_err.err == FI_ETIMEDOUT))
        << fi_strerror(tagged_err.err);
    EXPECT_EQ(tagged_err.err, untagged_err.err);
    EXPECT_EQ(0u, successes + others) << "another completion, or one twice";

    int           later = 0;
    const ssize_t ret   = fi_trecv(e.ep, buf.data(), buf.size(), nullptr, peer, 5, 0, &later);
    EXPECT_EQ(-tagged_err.err, ret) << "a receive directed at the dead peer was posted";

    ASSERT_EQ(0, fi_cancel(&e.ep->fid, &any)) << "the receive from any source did not stay";
    fi_cq_tagged_entry c{};
    EXPECT_EQ(-FI_EAVAIL, wait_cq(e.cq, &c, nullptr));
    const fi_cq_err_entry canceled = read_err(e.cq);
    EXPECT_EQ(&any, canceled.op_context);
    EXPECT_EQ(FI_ECANCELED, canceled.err);
}

std::string domain_name(const ::testing::TestParamInfo<const char *> &p) {
    std::string name = p.param;
    std::replace(name.begin(), name.end(), ',', '_');
    return name;
}

INSTANTIATE_TEST_SUITE_P(domains, FabricPeerDeath, ::testing::Values("tm_sm", "tm_sm,tcp"),
                         domain_name);

/* And over TEST_FABRIC_DOMAIN if it names another (tm_dc in the Soft-RoCE
 * guest: tests/ib/test_rxe_proto.sh). */
std::vector<const char *> other_test_domain() {
    const std::string d = test_domain();
    return ((d == "tm_sm") || (d == "tm_sm,tcp")) ? std::vector<const char *>{}
                                                  : std::vector<const char *>{test_domain()};
}
INSTANTIATE_TEST_SUITE_P(env, FabricPeerDeath, ::testing::ValuesIn(other_test_domain()),
                         domain_name);

/* "tm_sm,tcp" to "tcp": the combined domain reaches a tcp-only peer over its second transport. */
INSTANTIATE_TEST_SUITE_P(domains, FabricFork,
                         ::testing::Values(DomainPair{"tm_sm", "tm_sm"},
                                           DomainPair{"posix", "posix"}, DomainPair{"tcp", "tcp"},
                                           DomainPair{"tm_sm,tcp", "tm_sm,tcp"},
                                           DomainPair{"tm_sm,tcp", "tcp"}),
                         [](const ::testing::TestParamInfo<DomainPair> &p) {
                             std::string name = std::string(p.param.first) + "_to_" +
                                                p.param.second;
                             std::replace(name.begin(), name.end(), ',', '_');
                             return name;
                         });
