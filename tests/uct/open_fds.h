/*
 * Test helper: how many file descriptors this process holds -- what a
 * transport must give back (mappings' fds, pidfds of the peers it watches).
 */
#ifndef UCT_TM_TESTS_UCT_OPEN_FDS_H_
#define UCT_TM_TESTS_UCT_OPEN_FDS_H_

#include <dirent.h>
#include <unistd.h>

#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <string>

namespace uct_tm_test {

/* What a pidfd's /proc/self/fd link reads. */
inline constexpr const char *kPidfdLink = "anon_inode:[pidfd]";

/* Descriptors open in this process; with `link`, only those whose
 * /proc/self/fd entry reads `link`. SIZE_MAX if none is left to count them. */
inline size_t open_fds(const char *link = nullptr) {
    DIR *dir = opendir("/proc/self/fd");
    if (dir == nullptr) {
        return SIZE_MAX;
    }
    const int own = dirfd(dir);
    size_t    n   = 0;
    char      target[64];
    while (const struct dirent *entry = readdir(dir)) {
        if ((entry->d_name[0] == '.') || (atoi(entry->d_name) == own)) {
            continue;
        }
        if (link == nullptr) {
            ++n;
            continue;
        }
        const std::string path = std::string("/proc/self/fd/") + entry->d_name;
        const ssize_t     len  = readlink(path.c_str(), target, sizeof(target) - 1);
        if (len > 0) {
            target[len] = '\0';
            n += (strcmp(target, link) == 0);
        }
    }
    closedir(dir);
    return n;
}

}  // namespace uct_tm_test

#endif
