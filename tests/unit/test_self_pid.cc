#include "base/self_pid.h"

#include <gtest/gtest.h>

#include <sys/wait.h>
#include <unistd.h>

namespace {

TEST(SelfPid, IsThisProcess) {
    EXPECT_EQ(uct_tm::self_pid(), getpid());
    EXPECT_EQ(uct_tm::self_pid(), getpid()); /* the cached answer */
}

/* A child forked after the pid was cached answers with its own: an rkey
 * packed there must not name the parent. */
TEST(SelfPid, ForkedChildAsksAgain) {
    ASSERT_EQ(uct_tm::self_pid(), getpid());
    const pid_t child = fork();
    ASSERT_GE(child, 0);
    if (child == 0) {
        _exit((uct_tm::self_pid() == getpid()) ? 0 : 1);
    }
    int status = 0;
    ASSERT_EQ(waitpid(child, &status, 0), child);
    ASSERT_TRUE(WIFEXITED(status));
    EXPECT_EQ(WEXITSTATUS(status), 0);
    EXPECT_EQ(uct_tm::self_pid(), getpid());
}

}  // namespace
