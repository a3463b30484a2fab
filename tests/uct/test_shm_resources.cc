/*
 * Hostile neighbours and exhausted resources around tm_sm's shared memory:
 *  - named segments (UCX_TM_SM_NAMED_SEGMENTS=y): names squatted by another
 *    user or left by a killed process that had our pid do not stop an iface
 *    from opening, and a process in another PID namespace sharing /dev/shm
 *    does not reap the live segments of ours;
 *  - allocation through MD "tm": 100,000 small buffers alive at once cost a
 *    few descriptors, not one each; a peer reaches every one of them through
 *    its rkey and only its own bytes; freed space is reused, empty arenas go
 *    away; rendezvous from MD-allocated blocks deliver the right bytes, also
 *    after the memory behind a block was replaced.
 * Children report through their exit status (gtest assertions in a child
 * would be lost); every wait on them is bounded.
 */
#include "open_fds.h"
#include "tag_fixture.h"

#include "sm/sm_peer.h"
#include "sm/sm_rkey.h"

#include <gtest/gtest.h>

#include <dirent.h>
#include <fcntl.h>
#include <poll.h>
#include <sched.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/uio.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cerrno>
#include <climits>
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
        for (const std::string &name : shm_leaked_since(before_)) {
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

/* Truncates, as another process of this user could, the named segment of the
 * iface at `address` (Node::address() of a node of `env`'s). */
int truncate_named_segment(const Node &node, const std::string &address) {
    uct_tm::sm::IfaceAddress ia;
    if (address.size() < node.attr.device_addr_len + sizeof(ia)) {
        return -1;
    }
    memcpy(&ia, address.data() + node.attr.device_addr_len, sizeof(ia));
    char path[NAME_MAX];
    uct_tm::shm_named_path(ia.segment, path, sizeof(path));
    const int fd = shm_open(path, O_RDWR, 0);
    if (fd < 0) {
        fprintf(stderr, "shm_open %s: %s\n", path, strerror(errno));
        return -1;
    }
    const int rc = ftruncate(fd, 0);
    close(fd);
    return rc;
}

/* Each of two named-segment ifaces sends the other an eager message; then
 * another process truncates the receiver's segment and the sender writes
 * into it. 0 when both endpoints fail with CONNECTION_RESET, the failed one
 * refuses further sends and the ifaces close; see
 * TruncatedSegmentFailsEndpointsWithoutACrash. */
int send_into_a_truncated_segment() {
    UctEnv         env;
    const Settings named = {{"NAMED_SEGMENTS", "y"}, {"PEER_CHECK_INTERVAL", "10ms"}};
    Node           rx(env, "tm_sm", named), tx(env, "tm_sm", named);
    uct_ep_h       to_rx = nullptr, to_tx = nullptr;
    if ((rx.status != UCS_OK) || (tx.status != UCS_OK) ||
        (tx.connect(rx.address(), &to_rx) != UCS_OK) ||
        (rx.connect(tx.address(), &to_tx) != UCS_OK)) {
        return 1;
    }
    const uint64_t payload        = 0x5eed;
    auto           progress_until = [&](const std::function<bool()> &done) {
        return wait_for(
                      done, [&] { uct_worker_progress(env.worker()); }, 10);
    };
    if ((uct_ep_tag_eager_short(to_rx, 1, &payload, sizeof(payload)) != UCS_OK) ||
        (uct_ep_tag_eager_short(to_tx, 2, &payload, sizeof(payload)) != UCS_OK) ||
        !progress_until([&] {
            return (rx.unexp.complete_messages() == 1) && (tx.unexp.complete_messages() == 1);
        })) {
        return 1;
    }
    /* Another process of this user cuts it short. */
    if (wait_child(spawn([&] { return truncate_named_segment(rx, rx.address()) == 0 ? 0 : 1; }),
                   60) != 0) {
        return 1;
    }
    /* Into rx's FIFO: the first access past the cut. */
    (void)uct_ep_tag_eager_short(to_rx, 3, &payload, sizeof(payload));
    const bool failed = progress_until(
        [&] { return (tx.errors.count(to_rx) > 0) && (rx.errors.count(to_tx) > 0); });
    int result = 0;
    if (tx.errors.count(to_rx) != 1) {
        result = 2;
    } else if (!failed || (rx.errors.count(to_tx) != 1)) {
        result = 3;
    } else if ((tx.errors.entries[0].status != UCS_ERR_CONNECTION_RESET) ||
               (rx.errors.entries[0].status != UCS_ERR_CONNECTION_RESET)) {
        result = 4;
    } else if (uct_ep_tag_eager_short(to_rx, 4, &payload, sizeof(payload)) == UCS_OK) {
        result = 5;
    }
    uct_ep_destroy(to_rx);
    uct_ep_destroy(to_tx);
    return result;
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

/* Named segments take no seals: another process of this user can truncate
 * an iface's segment under every mapping of it, and the next access raises
 * SIGBUS. Nobody dies of it: the sender's endpoint and the truncated iface's
 * own endpoint fail (CONNECTION_RESET) within a peer check, and both ifaces
 * close with no file left in /dev/shm. Without the guard the sender's write
 * kills the child (wait_child: -1). */
TEST_F(NamedSegments, TruncatedSegmentFailsEndpointsWithoutACrash) {
    const int rc = wait_child(spawn(send_into_a_truncated_segment), 120);
    EXPECT_EQ(rc, 0) << "-1: killed (SIGBUS) or hung; 1: setup; 2: the sender's endpoint did "
                        "not fail once; 3: the truncated iface's endpoint did not fail once; "
                        "4: not CONNECTION_RESET; 5: a send after the failure was taken";
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

/* ---- allocation through MD "tm" ---------------------------------------------------------- */

constexpr uint64_t kPeerSeed = 0x5eed0000;

/* The reader: unpacks each key, checks the owner's bytes through rkey_ptr
 * and that nothing outside the key's range is handed out, then writes its
 * own pattern. 0 if all held. */
int read_and_write_through_rkeys(int sock) {
    uint64_t count;
    if (!recv_all(sock, &count, sizeof(count))) {
        return 10;
    }
    std::vector<uct_tm::sm::PackedRkey> keys(count);
    if (!recv_all(sock, keys.data(), count * sizeof(uct_tm::sm::PackedRkey))) {
        return 11;
    }
    UctEnv env;
    for (uint64_t i = 0; i < count; ++i) {
        const uct_tm::sm::PackedRkey &k = keys[i];
        uct_rkey_bundle_t             b;
        if (uct_rkey_unpack(env.component(), &k, &b) != UCS_OK) {
            fprintf(stderr, "key %lu: unpack failed\n", static_cast<unsigned long>(i));
            return 12;
        }
        void *p = nullptr, *outside = nullptr;
        int   rc = 0;
        if (uct_rkey_ptr(env.component(), &b, k.address, &p) != UCS_OK) {
            fprintf(stderr, "key %lu: rkey_ptr failed\n", static_cast<unsigned long>(i));
            rc = 13;
        } else if (pattern_mismatch(p, k.length, i) != SIZE_MAX) {
            fprintf(stderr, "key %lu: byte %zu differs\n", static_cast<unsigned long>(i),
                    pattern_mismatch(p, k.length, i));
            rc = 14;
        } else if ((uct_rkey_ptr(env.component(), &b, k.address + k.length, &outside) == UCS_OK) ||
                   (uct_rkey_ptr(env.component(), &b, k.address - 1, &outside) == UCS_OK)) {
            fprintf(stderr, "key %lu: rkey_ptr reached a neighbour\n", static_cast<unsigned long>(i));
            rc = 15;
        } else {
            fill_pattern(p, k.length, kPeerSeed + i);
        }
        uct_rkey_release(env.component(), &b);
        if (rc != 0) {
            return rc;
        }
    }
    const char done = 'd';
    return send_all(sock, &done, 1) ? 0 : 16;
}

/* 100,000 small buffers through the MD, alive at once: a few descriptors,
 * every one reachable by a peer through its key, all gone after the frees. */
TEST(MdAlloc, HundredThousandSmallAllocations) {
    constexpr size_t kCount = 100000;
    int              sv[2];
    ASSERT_EQ(socketpair(AF_UNIX, SOCK_STREAM, 0, sv), 0);
    const pid_t reader = spawn([&] {
        close(sv[0]);
        return read_and_write_through_rkeys(sv[1]);
    });
    close(sv[1]);
    const auto shm_before = shm_leftovers();
    {
        UctEnv       env;
        const size_t fds_start = open_fds();
        std::vector<uct_allocated_memory_t> mems;
        mems.reserve(kCount);
        std::vector<uct_tm::sm::PackedRkey> keys(kCount);
        for (size_t i = 0; i < kCount; ++i) {
            const size_t length = size_t{64} << (i % 7); /* 64 B .. 4 KiB */
            ucs_status_t status;
            mems.push_back(md_alloc(env.md(), length, &status));
            if (status != UCS_OK) {
                mems.pop_back();
                ADD_FAILURE() << "allocation " << i << " of " << length << " bytes: "
                              << ucs_status_string(status) << " (" << open_fds() - fds_start
                              << " descriptors opened so far)";
                break;
            }
            ASSERT_GE(mems.back().length, length);
            fill_pattern(mems.back().address, mems.back().length, i);
            ASSERT_EQ(uct_md_mkey_pack(env.md(), mems.back().memh, &keys[i]), UCS_OK);
            ASSERT_TRUE(keys[i].flags & uct_tm::sm::kRkeyHasShm);
        }
        const size_t opened = open_fds() - fds_start;
        EXPECT_LT(opened, 1000u) << "descriptors opened for " << mems.size() << " allocations";
        printf("%zu allocations of 64 B .. 4 KiB hold %zu descriptors\n", mems.size(), opened);
        if (mems.size() == kCount) {
            const uint64_t count = kCount;
            ASSERT_TRUE(send_all(sv[0], &count, sizeof(count)));
            ASSERT_TRUE(send_all(sv[0], keys.data(), keys.size() * sizeof(keys[0])));
            char done = 0;
            EXPECT_TRUE(recv_all(sv[0], &done, 1)) << "the reader did not finish";
            EXPECT_EQ(wait_child(reader), 0) << "the reader found a wrong byte (its stderr says)";
            size_t wrong = 0;
            for (size_t i = 0; i < kCount; ++i) {
                wrong += pattern_mismatch(mems[i].address, mems[i].length, kPeerSeed + i) != SIZE_MAX;
            }
            EXPECT_EQ(wrong, 0u) << "buffers without the reader's bytes";
        }
        shm_note_held();
        for (uct_allocated_memory_t &mem : mems) {
            ASSERT_EQ(uct_mem_free(&mem), UCS_OK);
        }
        EXPECT_EQ(open_fds(), fds_start) << "descriptors left after freeing everything";
    }
    close(sv[0]);
    wait_child(reader, 10);
    EXPECT_EQ(shm_leaked_by_this_process(shm_before), std::vector<std::string>{});
}

/* Freed blocks are allocated again; descriptors do not grow with churn. */
TEST(MdAlloc, FreedSpaceIsReused) {
    UctEnv                              env;
    const size_t                        fds_start = open_fds();
    std::vector<uct_allocated_memory_t> mems(4000);
    ucs_status_t                        status;
    for (size_t i = 0; i < mems.size(); ++i) {
        mems[i] = md_alloc(env.md(), 64 + (i % 61) * 32, &status);
        ASSERT_EQ(status, UCS_OK) << i;
    }
    const size_t fds_peak = open_fds();
    for (int round = 0; round < 5; ++round) {
        for (size_t i = round & 1; i < mems.size(); i += 2) {
            ASSERT_EQ(uct_mem_free(&mems[i]), UCS_OK);
        }
        for (size_t i = round & 1; i < mems.size(); i += 2) {
            mems[i] = md_alloc(env.md(), 64 + (i % 61) * 32, &status);
            ASSERT_EQ(status, UCS_OK) << i;
            memset(mems[i].address, 0x33, mems[i].length);
        }
        EXPECT_LE(open_fds(), fds_peak) << "round " << round;
    }
    for (uct_allocated_memory_t &mem : mems) {
        ASSERT_EQ(uct_mem_free(&mem), UCS_OK);
    }
    EXPECT_EQ(open_fds(), fds_start);
}

/* tm_sm over MD-allocated blocks: one-sided copies and rendezvous. */
class MdAllocTag : public TagTest {
  protected:
    uct_allocated_memory_t alloc(size_t length) {
        ucs_status_t status;
        uct_allocated_memory_t mem = md_alloc(env_->md(), length, &status);
        EXPECT_EQ(status, UCS_OK);
        return mem;
    }

    /* Whether an rkey naming the first 4096 bytes of segment `id` (at a made-up
     * address) gives a local pointer. */
    bool rkey_maps(const uct_tm::ShmId &id) {
        uct_tm::sm::PackedRkey packed{};
        packed.magic      = uct_tm::sm::kRkeyMagic;
        packed.flags      = uct_tm::sm::kRkeyHasShm;
        packed.address    = 0x10000000;
        packed.length     = 4096;
        packed.pid        = getpid();
        packed.shm        = id;
        packed.shm_offset = 0;
        uct_rkey_bundle_t rkey;
        if (uct_rkey_unpack(env_->component(), &packed, &rkey) != UCS_OK) {
            ADD_FAILURE() << "uct_rkey_unpack";
            return false;
        }
        void      *p      = nullptr;
        const bool mapped = uct_rkey_ptr(env_->component(), &rkey, packed.address, &p) == UCS_OK;
        uct_rkey_release(env_->component(), &rkey);
        return mapped;
    }

    /* Sends `length` bytes of `mem` by rendezvous to a posted receive; the
     * receiver's description of anything wrong, empty if delivered right. */
    std::string rndv(const uct_allocated_memory_t &mem, size_t length, uint64_t seed) {
        RecvCtx     r;
        RecvBuffers b(length);
        const uct_tag_t tag = 0x700 + seed;
        if (post(r, tag, ~uct_tag_t{0}, b) != UCS_OK) {
            return "post failed";
        }
        Completion      comp;
        const uct_iov_t iov = {mem.address, length, mem.memh, 0, 1};
        void *op = uct_ep_tag_rndv_zcopy(ep_, tag, "h", 1, &iov, 1, 0, &comp.comp);
        if (UCS_PTR_IS_ERR(op)) {
            return std::string("rndv_zcopy: ") + ucs_status_string(UCS_PTR_STATUS(op));
        }
        if (!wait([&] { return r.done() && (comp.calls == 1); })) {
            return "not delivered";
        }
        if (r.status != UCS_OK) {
            return std::string("receive: ") + ucs_status_string(r.status);
        }
        return b.check(seed, length);
    }
};

/* A key of a block gives the block, not its neighbours in the same arena. */
TEST_P(MdAllocTag, RkeyOfABlockReachesOnlyTheBlock) {
    uct_allocated_memory_t mem[3] = {alloc(256), alloc(256), alloc(256)};
    for (auto &m : mem) {
        memset(m.address, 'n', m.length);
    }
    uct_tm::sm::PackedRkey packed;
    ASSERT_EQ(uct_md_mkey_pack(env_->md(), mem[1].memh, &packed), UCS_OK);
    uct_rkey_bundle_t rkey;
    ASSERT_EQ(uct_rkey_unpack(env_->component(), &packed, &rkey), UCS_OK);
    const uint64_t base = reinterpret_cast<uintptr_t>(mem[1].address);
    EXPECT_EQ(packed.length, mem[1].length);

    std::vector<char> data(mem[1].length, 'w');
    uct_iov_t         iov = {data.data(), data.size(), nullptr, 0, 1};
    EXPECT_EQ(uct_ep_put_zcopy(ep_, &iov, 1, base, rkey.rkey, nullptr), UCS_OK);
    iov.length = 1;
    EXPECT_NE(uct_ep_put_zcopy(ep_, &iov, 1, base + mem[1].length, rkey.rkey, nullptr), UCS_OK);
    EXPECT_NE(uct_ep_put_zcopy(ep_, &iov, 1, base - 1, rkey.rkey, nullptr), UCS_OK);
    EXPECT_NE(uct_ep_get_zcopy(ep_, &iov, 1, base + mem[1].length, rkey.rkey, nullptr), UCS_OK);
    void *p;
    EXPECT_NE(uct_rkey_ptr(env_->component(), &rkey, base + mem[1].length, &p), UCS_OK);
    EXPECT_NE(uct_rkey_ptr(env_->component(), &rkey, base - 1, &p), UCS_OK);
    ASSERT_EQ(uct_rkey_ptr(env_->component(), &rkey, base + 7, &p), UCS_OK);
    EXPECT_EQ(*static_cast<char *>(p), 'w');
    uct_rkey_release(env_->component(), &rkey);

    EXPECT_EQ(std::string(static_cast<char *>(mem[1].address), mem[1].length),
              std::string(mem[1].length, 'w'));
    EXPECT_EQ(std::string(static_cast<char *>(mem[0].address), mem[0].length),
              std::string(mem[0].length, 'n'));
    EXPECT_EQ(std::string(static_cast<char *>(mem[2].address), mem[2].length),
              std::string(mem[2].length, 'n'));
    for (auto &m : mem) {
        EXPECT_EQ(uct_mem_free(&m), UCS_OK);
    }
}

/* Rendezvous from small MD-allocated buffers: the receiver maps the block
 * where it lies in its segment. */
TEST_P(MdAllocTag, RndvFromSmallBlocks) {
    std::vector<uct_allocated_memory_t> mems;
    for (uint64_t i = 0; i < 16; ++i) {
        mems.push_back(alloc(2000));
        fill_pattern(mems.back().address, 2000, i);
    }
    for (uint64_t i = 0; i < mems.size(); ++i) {
        EXPECT_EQ(rndv(mems[i], 2000, i), "") << "block " << i;
    }
    for (auto &m : mems) {
        EXPECT_EQ(uct_mem_free(&m), UCS_OK);
    }
}

/* The receiver keeps the sender's segments mapped between rendezvous; memory
 * freed and allocated again (likely the same descriptor number and size)
 * must not be read through the old mapping. */
TEST_P(MdAllocTag, RndvAfterTheMemoryWasReplaced) {
    for (size_t length : {size_t{3000}, size_t{8192}, size_t{1} << 20}) {
        uct_allocated_memory_t mem = alloc(length);
        fill_pattern(mem.address, length, 1);
        EXPECT_EQ(rndv(mem, length, 1), "") << length;
        EXPECT_EQ(uct_mem_free(&mem), UCS_OK);
        mem = alloc(length);
        fill_pattern(mem.address, length, 2);
        EXPECT_EQ(rndv(mem, length, 2), "") << length << " bytes, after the memory was replaced";
        EXPECT_EQ(uct_mem_free(&mem), UCS_OK);
    }
}

/* What another process of the user gets when it opens a descriptor of ours
 * through /proc and tries to truncate it: 0 refused (EPERM: sealed), 1 it
 * truncated, 2 it could not open it. */
int truncate_from_another_process(pid_t owner, int fd) {
    const pid_t child = spawn([&] {
        char path[64];
        snprintf(path, sizeof(path), "/proc/%d/fd/%d", owner, fd);
        const int opened = open(path, O_RDWR | O_CLOEXEC);
        if (opened < 0) {
            return 2;
        }
        return ((ftruncate(opened, 0) != 0) && (errno == EPERM)) ? 0 : 1;
    });
    return wait_child(child, 30);
}

/* The memfd behind MD-allocated memory is sealed against resizing: neither
 * its owner nor another process can cut it under the receiver's mapping (a
 * SIGBUS in the receiver's direct copy), and rendezvous from it still
 * deliver afterwards. */
TEST_P(MdAllocTag, AllocatedMemoryCannotBeTruncated) {
    constexpr size_t       kLength = 64 << 10;
    uct_allocated_memory_t mem     = alloc(kLength);
    fill_pattern(mem.address, kLength, 3);
    EXPECT_EQ(rndv(mem, kLength, 3), ""); /* the receiver maps the block */
    uct_tm::sm::PackedRkey packed;
    ASSERT_EQ(uct_md_mkey_pack(env_->md(), mem.memh, &packed), UCS_OK);
    ASSERT_TRUE(packed.flags & uct_tm::sm::kRkeyHasShm);
    EXPECT_NE(ftruncate(packed.shm.fd, 0), 0) << "the owner truncated its own block";
    EXPECT_EQ(errno, EPERM);
    EXPECT_EQ(truncate_from_another_process(getpid(), packed.shm.fd), 0)
        << "another process truncated the block's memfd";
    fill_pattern(mem.address, kLength, 4);
    EXPECT_EQ(rndv(mem, kLength, 4), "") << "after the truncation attempts";
    EXPECT_EQ(uct_mem_free(&mem), UCS_OK);
}

/* An iface's own segment likewise: a process that opens it through /proc
 * cannot truncate it under the iface polling its FIFO. */
TEST_P(MdAllocTag, IfaceSegmentCannotBeTruncated) {
    std::string addr(rx_->attr.iface_addr_len, '\0');
    ASSERT_EQ(uct_iface_get_address(rx_->iface, reinterpret_cast<uct_iface_addr_t *>(&addr[0])),
              UCS_OK);
    uct_tm::sm::IfaceAddress ia;
    ASSERT_GE(addr.size(), sizeof(ia));
    memcpy(&ia, addr.data(), sizeof(ia));
    if (uct_tm::shm_is_named(ia.segment)) {
        GTEST_SKIP() << "named segment (tmpfs files take no seals)";
    }
    EXPECT_EQ(truncate_from_another_process(ia.segment.pid, ia.segment.fd), 0)
        << "another process truncated the iface's segment";
    uct_allocated_memory_t mem = alloc(4096);
    fill_pattern(mem.address, 4096, 5);
    EXPECT_EQ(rndv(mem, 4096, 5), "") << "the iface after the attempt";
    EXPECT_EQ(uct_mem_free(&mem), UCS_OK);
}

/* An rkey naming a memfd that is not sealed (a hostile peer's own) is not
 * mapped: its owner could truncate it under the mapping. */
TEST_P(MdAllocTag, RkeyOfAnUnsealedSegmentIsNotMapped) {
    char name[32];
    snprintf(name, sizeof(name), "uct_tm.%u", 0x7ffffff0u);
    const int fd = memfd_create(name, MFD_CLOEXEC | MFD_ALLOW_SEALING);
    ASSERT_GE(fd, 0);
    ASSERT_EQ(ftruncate(fd, 4096), 0);
    ASSERT_EQ(fchmod(fd, S_IRUSR | S_IWUSR), 0);
    const uct_tm::ShmId id = {getpid(), fd, 0x7ffffff0u, static_cast<uint32_t>(getuid()), 4096};
    EXPECT_FALSE(rkey_maps(id)) << "an unsealed segment was mapped";
    /* The same memfd sealed: the seals are what decides. */
    ASSERT_EQ(fcntl(fd, F_ADD_SEALS, F_SEAL_SHRINK | F_SEAL_GROW), 0);
    EXPECT_TRUE(rkey_maps(id)) << "the sealed segment was not mapped";
    ::close(fd);
}

/* Nor one naming a named segment (tmpfs files take no seals; memory the MD
 * allocates is always a sealed memfd). */
TEST_P(MdAllocTag, RkeyOfANamedSegmentIsNotMapped) {
    const uct_tm::ShmId id = {getpid(), 0x5eed, uct_tm::kShmNamedBit | 0x5eed,
                              static_cast<uint32_t>(getuid()), 4096};
    char                path[NAME_MAX];
    uct_tm::shm_named_path(id, path, sizeof(path));
    const int fd = shm_open(path, O_CREAT | O_EXCL | O_RDWR, S_IRUSR | S_IWUSR);
    ASSERT_GE(fd, 0) << path;
    ASSERT_EQ(ftruncate(fd, 4096), 0);
    EXPECT_FALSE(rkey_maps(id)) << "a named segment was mapped through an rkey";
    ::close(fd);
    shm_unlink(path);
}

/* A process of another user reaches nothing of ours: not the iface's
 * segment, not an allocated block's memfd (both through /proc), not our
 * memory by CMA. Run as root, the child becomes nobody. */
TEST_P(MdAllocTag, AnotherUserReachesNothing) {
    if (getuid() != 0) {
        GTEST_SKIP() << "needs root to become another user";
    }
    std::string addr(rx_->attr.iface_addr_len, '\0');
    ASSERT_EQ(uct_iface_get_address(rx_->iface, reinterpret_cast<uct_iface_addr_t *>(&addr[0])),
              UCS_OK);
    uct_tm::sm::IfaceAddress ia;
    memcpy(&ia, addr.data(), sizeof(ia));
    uct_allocated_memory_t mem = alloc(4096);
    uct_tm::sm::PackedRkey packed;
    ASSERT_EQ(uct_md_mkey_pack(env_->md(), mem.memh, &packed), UCS_OK);
    const pid_t owner  = getpid();
    const pid_t child  = spawn([&] {
        if ((setgid(65534) != 0) || (setuid(65534) != 0)) {
            return kSkip;
        }
        int reached = 0;
        for (int fd : {ia.segment.fd, packed.shm.fd}) {
            char path[64];
            snprintf(path, sizeof(path), "/proc/%d/fd/%d", owner, fd);
            const int opened = open(path, O_RDONLY | O_CLOEXEC);
            reached += (opened >= 0);
        }
        char         byte;
        struct iovec local = {&byte, 1}, remote = {mem.address, 1};
        reached += (process_vm_readv(owner, &local, 1, &remote, 1, 0) == 1);
        return reached;
    });
    const int   status = wait_child(child, 30);
    if (status == kSkip) {
        GTEST_SKIP() << "could not become nobody";
    }
    EXPECT_EQ(status, 0) << "another user opened a segment or read our memory";
    EXPECT_EQ(uct_mem_free(&mem), UCS_OK);
}

std::vector<std::string> sm_only() {
    std::vector<std::string> tls = tag_transports();
    tls.erase(std::remove_if(tls.begin(), tls.end(), [](const std::string &t) { return t != "tm_sm"; }),
              tls.end());
    return tls;
}

}  // namespace

INSTANTIATE_TEST_SUITE_P(tm, MdAllocTag, ::testing::ValuesIn(sm_only()), transport_param_name);

}  // namespace uct_tm_test
