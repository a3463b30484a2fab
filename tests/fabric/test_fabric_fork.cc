/* Two processes (fork) over each domain: names exchanged over a socketpair,
 * then tagged and untagged ping-pongs of every size class, both ways, with
 * remote data and the source address checked on every message. Each send
 * follows a pause longer than the layer keeps polling a quiet second
 * transport on every call: the tcp side of "tm_sm,tcp" is found idle. */
#include "fabric_fixture.h"

#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
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
    Fabric f;
    Ep     e;
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

/* The domains of the two sides. */
struct DomainPair {
    const char *first;
    const char *second;
};

class FabricFork : public ::testing::TestWithParam<DomainPair> {};

}  // namespace

TEST_P(FabricFork, PingPongEverySizeBothKinds) {
    for (const char *domain : {GetParam().first, GetParam().second}) {
        fi_info *info = tm_info(domain);
        if (info == nullptr) {
            GTEST_SKIP() << domain << " is not offered on this host";
        }
        fi_freeinfo(info);
    }
    int sv[2];
    ASSERT_EQ(0, socketpair(AF_UNIX, SOCK_STREAM, 0, sv));
    const pid_t pid = fork();
    ASSERT_GE(pid, 0);
    if (pid == 0) {
        close(sv[0]);
        alarm(60);
        exit_child(run_side(GetParam().second, sv[1], false));
    }
    close(sv[1]);
    EXPECT_EQ(0, run_side(GetParam().first, sv[0], true));
    close(sv[0]);
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
