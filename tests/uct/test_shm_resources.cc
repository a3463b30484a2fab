/*
 * Hostile neighbours and exhausted resources around tm_sm's shared memory:
 *  - named segments (UCX_TM_SM_NAMED_SEGMENTS=y): names squatted by another
 *    user or left by a killed process that had our pid do not stop an iface
 *    from opening, and a process in another PID namespace sharing /dev/shm
 *    does not reap the live segments of ours.
 * Children report through their exit status (gtest assertions in a child
 * would be lost); every wait on them is bounded.
 */
#include "tag_fixture.h"

#include "base/packed_rkey.h"

#include <gtest/gtest.h>

#include <dirent.h>
#include <fcntl.h>
#include <poll.h>
#include <sched.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <functional>
#include <string>
#include <vector>

namespace uct_tm_test {
namespace {

constexpr int kSkip = 77; /* a child could not set up what the test needs */

/* Runs `body` in a child process; its return value is the exit status. */
pid_t spawn(const std::function<int()> &body) {
    fflush(nullptr);
    const pid_t pid = fork();
    if (pid == 0) {
        alarm(300);
        _exit(body());
    }
    return pid;
}

/* The child's exit status, or -1 (killed, or still running after `seconds`:
 * then it is killed). */
int wait_child(pid_t pid, double seconds = 300) {
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::duration<double>(seconds);
    int        status;
    for (;;) {
        const pid_t r = waitpid(pid, &status, WNOHANG);
        if (r == pid) {
            return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
        }
        if ((r < 0) || (std::chrono::steady_clock::now() > deadline)) {
            kill(pid, SIGKILL);
            waitpid(pid, &status, 0);
            return -1;
        }
        usleep(1000);
    }
}

bool send_all(int fd, const void *data, size_t length) {
    const char *p = static_cast<const char *>(data);
    while (length > 0) {
        const ssize_t n = ::write(fd, p, length);
        if (n <= 0) {
            return false;
        }
        p += n;
        length -= static_cast<size_t>(n);
    }
    return true;
}

/* Reads exactly `length` bytes, waiting at most `seconds` for each piece. */
bool recv_all(int fd, void *data, size_t length, int seconds = 120) {
    char *p = static_cast<char *>(data);
    while (length > 0) {
        struct pollfd pfd = {fd, POLLIN, 0};
        if (poll(&pfd, 1, seconds * 1000) <= 0) {
            return false;
        }
        const ssize_t n = ::read(fd, p, length);
        if (n <= 0) {
            return false;
        }
        p += n;
        length -= static_cast<size_t>(n);
    }
    return true;
}

bool exists_in_dev_shm(const std::string &name) {
    struct stat st;
    return stat(("/dev/shm/" + name).c_str(), &st) == 0;
}

std::vector<std::string> new_entries(const std::vector<std::string> &before) {
    std::vector<std::string> added;
    for (const std::string &name : shm_leftovers()) {
        if (std::find(before.begin(), before.end(), name) == before.end()) {
            added.push_back(name);
        }
    }
    return added;
}

/* Opens a tm_sm iface with named segments in this (child) process: 0 if it opened. */
int open_named_iface() {
    UctEnv env;
    Node   node(env, "tm_sm", {{"NAMED_SEGMENTS", "y"}});
    if (node.status != UCS_OK) {
        fprintf(stderr, "child %d: tm_sm iface with named segments: %s\n", getpid(),
                ucs_status_string(node.status));
        return 1;
    }
    return 0;
}

/* /dev/shm files in the old predictable form uct_tm.<uid>.<pid>.<serial>, for
 * the next serials of process `pid`, owned by `owner`; their names. */
std::vector<std::string> squat(pid_t pid, uid_t owner, off_t size) {
    std::vector<std::string> names;
    for (unsigned serial = 1; serial <= 64; ++serial) {
        const std::string name = "uct_tm." + std::to_string(getuid()) + "." +
                                 std::to_string(pid) + "." + std::to_string(serial);
        const int fd = open(("/dev/shm/" + name).c_str(), O_CREAT | O_EXCL | O_RDWR, 0600);
        if (fd < 0) {
            continue;
        }
        if (((owner != getuid()) && (fchown(fd, owner, owner) != 0)) ||
            (ftruncate(fd, size) != 0)) {
            fprintf(stderr, "squat %s: %s\n", name.c_str(), strerror(errno));
        }
        close(fd);
        names.push_back(name);
    }
    return names;
}

class NamedSegments : public ::testing::Test {
  protected:
    void SetUp() override { before_ = shm_leftovers(); }
    void TearDown() override {
        for (const std::string &name : new_entries(before_)) {
            ADD_FAILURE() << "left in /dev/shm: " << name;
            unlink(("/dev/shm/" + name).c_str());
        }
    }
    std::vector<std::string> before_;
};

/* Another user pre-creates the names a process would use: the iface opens
 * anyway, and the squatter's files are not ours to remove. */
TEST_F(NamedSegments, SquattedNamesDoNotBlockOpen) {
    const uid_t other = (getuid() == 0) ? 65534 : getuid(); /* as root: nobody's files */
    const int   rc    = wait_child(spawn([other] {
        const std::vector<std::string> squatted = squat(getpid(), other, 0);
        int result = open_named_iface();
        for (const std::string &name : squatted) {
            if (!exists_in_dev_shm(name)) {
                fprintf(stderr, "another user's file %s was removed\n", name.c_str());
                result = 2;
            }
            unlink(("/dev/shm/" + name).c_str());
        }
        return result;
    }));
    EXPECT_EQ(rc, 0) << "1: the iface did not open; 2: the squatter's files were removed";
}

/* A process killed without closing its iface left files; the next process
 * that gets its pid opens named segments all the same. */
TEST_F(NamedSegments, StaleFilesOfAPreviousOwnerOfOurPidDoNotBlockOpen) {
    const int rc = wait_child(spawn([] {
        const std::vector<std::string> stale = squat(getpid(), getuid(), 1 << 20);
        const int result = open_named_iface();
        for (const std::string &name : stale) {
            unlink(("/dev/shm/" + name).c_str());
        }
        return result;
    }));
    EXPECT_EQ(rc, 0) << "the iface did not open";
}

/* In a new PID namespace (the child of unshare(CLONE_NEWPID)) with a second
 * process: `body` runs as that namespace's pid 2 (pid 1 waits for it). */
int in_new_pid_namespace(bool second_process, const std::function<int()> &body) {
    if (unshare(CLONE_NEWPID) != 0) {
        fprintf(stderr, "unshare(CLONE_NEWPID): %s\n", strerror(errno));
        return kSkip;
    }
    const pid_t init = fork();
    if (init != 0) {
        int status;
        return ((init > 0) && (waitpid(init, &status, 0) == init) && WIFEXITED(status))
                   ? WEXITSTATUS(status) : 3;
    }
    if (!second_process) {
        _exit(body()); /* pid 1 */
    }
    const pid_t worker = fork();
    if (worker == 0) {
        _exit(body()); /* pid 2 */
    }
    int status;
    _exit(((worker > 0) && (waitpid(worker, &status, 0) == worker) && WIFEXITED(status))
              ? WEXITSTATUS(status) : 3);
}

/* Two containers sharing /dev/shm, each with its own PID namespace: the pid
 * in a name (2 here) means nothing in the other, which used to take the live
 * segment of the first for a dead process's and unlink it. */
TEST_F(NamedSegments, TwoPidNamespacesSharingDevShm) {
    int sv[2];
    ASSERT_EQ(socketpair(AF_UNIX, SOCK_STREAM, 0, sv), 0);
    const pid_t first = spawn([&] {
        close(sv[0]);
        return in_new_pid_namespace(true, [&] {
            UctEnv env;
            Node   node(env, "tm_sm", {{"NAMED_SEGMENTS", "y"}});
            const int32_t report[2] = {node.status, getpid()};
            char          go;
            return (send_all(sv[1], report, sizeof(report)) && recv_all(sv[1], &go, 1)) ? 0 : 4;
        });
    });
    close(sv[1]);
    int32_t report[2];
    const bool reported = recv_all(sv[0], report, sizeof(report), 60);
    if (!reported) {
        close(sv[0]);
        const int rc = wait_child(first, 30);
        if (rc == kSkip) {
            GTEST_SKIP() << "no PID namespaces here";
        }
        FAIL() << "the process in the first namespace did not report (exit " << rc << ")";
    }
    ASSERT_EQ(report[0], UCS_OK) << "iface in the first namespace";
    EXPECT_EQ(report[1], 2) << "pid in the first namespace";
    const std::vector<std::string> first_files = new_entries(before_);
    ASSERT_FALSE(first_files.empty()) << "no named segment was created";

    /* The second namespace's pid 1 opens named segments (and reaps). */
    const int second = wait_child(spawn([] { return in_new_pid_namespace(false, open_named_iface); }));
    EXPECT_EQ(second, 0) << "iface in the second namespace";
    for (const std::string &name : first_files) {
        EXPECT_TRUE(exists_in_dev_shm(name)) << "the live segment " << name
                                             << " of the first namespace was removed";
    }
    ASSERT_TRUE(send_all(sv[0], "g", 1));
    EXPECT_EQ(wait_child(first, 60), 0);
    close(sv[0]);
}

}  // namespace

}  // namespace uct_tm_test
