#include "process_watch.h"

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <poll.h>
#include <signal.h>
#include <sys/syscall.h>
#include <unistd.h>
#include <utility>

namespace uct_tm {
namespace {

int open_pidfd(pid_t pid) {
#ifdef SYS_pidfd_open
    return static_cast<int>(syscall(SYS_pidfd_open, pid, 0));
#else
    (void)pid;
    errno = ENOSYS;
    return -1;
#endif
}

/* A pidfd becomes readable when its process exits, zombie or not. */
bool pidfd_exited(int pidfd) {
    struct pollfd pfd = {pidfd, POLLIN, 0};
    return poll(&pfd, 1, 0) > 0;
}

/* The state letter of /proc/<pid>/stat (R, S, D, T, t, Z, X ...); 0 if the
 * process has no entry. The command name may hold any byte: the state
 * follows the last ')'. */
char proc_state(pid_t pid) {
    char path[64];
    snprintf(path, sizeof(path), "/proc/%d/stat", static_cast<int>(pid));
    FILE *f = fopen(path, "re");
    if (f == nullptr) {
        return 0;
    }
    char         buf[512];
    const size_t n = fread(buf, 1, sizeof(buf) - 1, f);
    fclose(f);
    buf[n]            = '\0';
    const char *paren = strrchr(buf, ')');
    return ((paren != nullptr) && (paren[1] == ' ')) ? paren[2] : '?';
}

}  // namespace

bool process_exited(pid_t pid) {
    if (pid <= 0) {
        return true;
    }
    const int fd = open_pidfd(pid);
    if (fd >= 0) {
        const bool exited = pidfd_exited(fd);
        close(fd);
        return exited;
    }
    if (errno == ESRCH) {
        return true;
    }
    /* No pidfds here: the kernel's process table. */
    const char state = proc_state(pid);
    return (state == 0) || (state == 'Z') || (state == 'X');
}

bool process_stopped(pid_t pid) {
    const char state = proc_state(pid);
    return (state == 'T') || (state == 't');
}

ProcessWatch::ProcessWatch(pid_t pid) : pid_(pid), pidfd_(open_pidfd(pid)) {}

ProcessWatch::~ProcessWatch() { reset(); }

ProcessWatch::ProcessWatch(ProcessWatch &&other) noexcept
    : pid_(std::exchange(other.pid_, -1)), pidfd_(std::exchange(other.pidfd_, -1)) {}

ProcessWatch &ProcessWatch::operator=(ProcessWatch &&other) noexcept {
    if (this != &other) {
        reset();
        pid_   = std::exchange(other.pid_, -1);
        pidfd_ = std::exchange(other.pidfd_, -1);
    }
    return *this;
}

void ProcessWatch::reset() {
    if (pidfd_ >= 0) {
        close(pidfd_);
    }
    pidfd_ = -1;
}

bool ProcessWatch::exited() const {
    return (pidfd_ >= 0) ? pidfd_exited(pidfd_) : process_exited(pid_);
}

}  // namespace uct_tm
