/*
 * TruncationGuard: survives a shared-memory file cut short under a mapping.
 *
 * Named POSIX segments (tmpfs files) take no seals: any process of the same
 * user can ftruncate one, and the next access to a page past the new end
 * raises SIGBUS in every process that maps it. For the ranges it watches, the
 * guard's SIGBUS handler puts private zero pages where the mapping was and
 * marks the range truncated; the access then goes on, reading zeros, and the
 * mapping's owner learns of it from truncated() on its next check and fails
 * what used the range. A SIGBUS anywhere else goes to the handler that was
 * installed before ours (or kills the process as it would have). The handler
 * is installed by the first watch(): only processes that map named segments
 * have it.
 */
#ifndef UCT_TM_BASE_TRUNCATION_GUARD_H_
#define UCT_TM_BASE_TRUNCATION_GUARD_H_

#include <cstddef>

namespace uct_tm {

class TruncationGuard {
  public:
    /* Ranges watched at once; a mapping past them goes unwatched. */
    static constexpr int kRanges = 4096;

    /* Starts watching [address, address + length); the range's handle, or -1
     * when every handle is taken or the handler could not be installed. */
    static int watch(void *address, size_t length);
    /* Stops watching; before the range is unmapped. */
    static void unwatch(int handle);
    /* Whether a SIGBUS hit the range since watch(). */
    static bool truncated(int handle);
};

}  // namespace uct_tm

#endif
