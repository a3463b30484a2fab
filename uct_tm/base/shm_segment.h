/*
 * ShmSegment: a shared-memory mapping owned by one process and attachable by
 * others of the same user.
 *
 * The default backing is an anonymous memfd (mode 0600): peers open it through
 * /proc/<pid>/fd/<fd>, which the kernel allows exactly when it would allow
 * ptrace/CMA between the two, and nothing is ever left in /dev/shm — the
 * memory goes away with the last mapping, even if every process is killed.
 * Where /proc links are not usable, named POSIX segments
 * (/dev/shm/uct_tm.<uid>.<pid>.<serial>, 0600) are the fallback: unlinked when
 * the owner closes it, and reaped by the next process of the same user that
 * finds the owner dead.
 */
#ifndef UCT_TM_BASE_SHM_SEGMENT_H_
#define UCT_TM_BASE_SHM_SEGMENT_H_

#include <ucs/type/status.h>

#include <cstddef>
#include <cstdint>
#include <sys/types.h>

namespace uct_tm {

/* How a peer finds a segment; fits in addresses and rkeys. */
struct ShmId {
    int32_t  pid;
    int32_t  fd;     /* memfd: the owner's descriptor number */
    uint32_t serial; /* named segment: /uct_tm.<uid>.<pid>.<serial>; 0 for memfd */
    uint32_t uid;
    uint64_t size;
};
static_assert(sizeof(ShmId) == 24, "ShmId is part of wire formats");

enum class ShmBacking : uint8_t { kMemfd, kNamed };

class ShmSegment {
  public:
    ShmSegment() = default;
    ~ShmSegment() { reset(); }
    ShmSegment(ShmSegment &&other) noexcept { *this = static_cast<ShmSegment &&>(other); }
    ShmSegment &operator=(ShmSegment &&other) noexcept;
    ShmSegment(const ShmSegment &)            = delete;
    ShmSegment &operator=(const ShmSegment &) = delete;

    /* Creates a zeroed segment of `size` bytes (rounded up to pages), bound to
     * the calling thread's NUMA node when `numa_bind`. */
    static ucs_status_t create(size_t size, ShmBacking backing, bool numa_bind, ShmSegment *out);

    /* Maps a peer's segment after checking it belongs to this user, is not
     * accessible to others and is at least `min_size` bytes. */
    static ucs_status_t attach(const ShmId &id, size_t min_size, ShmSegment *out);

    /* Unlinks named segments of this user whose owner process is gone. */
    static void reap_stale_named();

    void       *address() const { return address_; }
    size_t      size() const { return size_; }
    const ShmId &id() const { return id_; }
    bool        valid() const { return address_ != nullptr; }
    bool        owner() const { return owner_; }
    void        reset();

  private:
    void  *address_ = nullptr;
    size_t size_    = 0;
    int    fd_      = -1;
    bool   owner_   = false;
    ShmId  id_     = {0, -1, 0, 0, 0};
};

}  // namespace uct_tm

#endif
