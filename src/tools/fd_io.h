/* Whole-buffer reads and writes on a socket or pipe (address exchange between
 * forked processes in the benchmarks and the multi-process tests). */
#ifndef UCT_TM_TOOLS_FD_IO_H_
#define UCT_TM_TOOLS_FD_IO_H_

#include <cstddef>
#include <unistd.h>

namespace uct_tm {

/* Writes (out) or reads n bytes at p; false on error or end of file. */
inline bool fd_transfer(int fd, void *p, size_t n, bool out) {
    char *c = static_cast<char *>(p);
    while (n > 0) {
        const ssize_t r = out ? write(fd, c, n) : read(fd, c, n);
        if (r <= 0) {
            return false;
        }
        c += r;
        n -= static_cast<size_t>(r);
    }
    return true;
}

}  // namespace uct_tm

#endif
