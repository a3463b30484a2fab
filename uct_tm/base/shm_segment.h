/*
 * ShmSegment: a shared-memory mapping owned by one process and attachable by
 * others of the same user.
 *
 * The default backing is an anonymous memfd (mode 0600): peers open it through
 * /proc/<pid>/fd/<fd>, which the kernel allows exactly when it would allow
 * ptrace/CMA between the two, and nothing is ever left in /dev/shm — the
 * memory goes away with the last mapping, even if every process is killed.
 * Descriptor numbers are reused, so each memfd also carries a serial in its
 * name ("uct_tm.<serial>") that attach checks: an id of a closed segment
 * never maps the one that took its number.
 *
 * Where /proc links are not usable, named POSIX segments are the fallback:
 * /dev/shm/uct_tm.<uid>.<16 hex digits>, 0600, the digits random (getrandom),
 * so nobody can take a name before its owner; a name that exists is simply
 * drawn again. The owner holds an flock on the segment for as long as it
 * exists and unlinks it before letting go; a segment whose lock can be taken
 * has no owner any more, in whatever PID namespace it lived, and the next
 * process of the same user that finds it reaps it.
 */
#ifndef UCT_TM_BASE_SHM_SEGMENT_H_
#define UCT_TM_BASE_SHM_SEGMENT_H_

#include "truncation_guard.h"

#include <ucs/type/status.h>

#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <sys/types.h>

namespace uct_tm {

/* How a peer finds a segment; fits in addresses and rkeys.
 *  - memfd: `fd` is the owner's descriptor number, `serial` (1 .. 2^31 - 1)
 *    is in the memfd's name;
 *  - named: `serial` has kShmNamedBit set; it and `fd` are the 63 random bits
 *    of the name (see shm_named_path). */
struct ShmId {
    int32_t  pid;
    int32_t  fd;
    uint32_t serial;
    uint32_t uid;
    uint64_t size;
};
static_assert(sizeof(ShmId) == 24, "ShmId is part of wire formats");

inline constexpr uint32_t kShmNamedBit = 1u << 31;

inline bool shm_is_named(const ShmId &id) { return (id.serial & kShmNamedBit) != 0; }

/* "/uct_tm.<uid>.<16 hex digits>", the shm_open name of a named segment
 * (under /dev/shm); snprintf's result. */
inline int shm_named_path(const ShmId &id, char *buf, size_t len) {
    return snprintf(buf, len, "/uct_tm.%u.%08x%08x", id.uid, id.serial,
                    static_cast<uint32_t>(id.fd));
}

/* True if `name` (an entry of /dev/shm) has the form shm_named_path gives,
 * uct_tm.<uid>.<16 hex digits> with the uid as %u prints it; its uid then. */
inline bool shm_named_file(const char *name, uint32_t *uid) {
    static constexpr char kPrefix[] = "uct_tm.";
    if (strncmp(name, kPrefix, sizeof(kPrefix) - 1) != 0) {
        return false;
    }
    const char  *digits = name + sizeof(kPrefix) - 1;
    const size_t n      = strspn(digits, "0123456789");
    if ((n == 0) || (n > 10) || ((n > 1) && (digits[0] == '0')) || (digits[n] != '.')) {
        return false;
    }
    uint64_t value = 0;
    for (size_t i = 0; i < n; ++i) {
        value = value * 10 + static_cast<uint64_t>(digits[i] - '0');
    }
    const char *hex = digits + n + 1;
    if ((value > UINT32_MAX) || (strlen(hex) != 16) || (strspn(hex, "0123456789abcdef") != 16)) {
        return false;
    }
    *uid = static_cast<uint32_t>(value);
    return true;
}

/* True if `target`, what a /proc/PID/fd link reads, is the memfd of ours
 * whose name carries `serial`: "/memfd:uct_tm.<serial>", then the end or
 * " (deleted)". A descriptor number reused for anything else fails it. */
inline bool shm_memfd_link_is(const char *target, uint32_t serial) {
    char      expected[32];
    const int len = snprintf(expected, sizeof(expected), "/memfd:uct_tm.%u", serial);
    return (strncmp(target, expected, static_cast<size_t>(len)) == 0) &&
           ((target[len] == '\0') || (target[len] == ' '));
}

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

    /* Maps only the pages of segment `id` that hold [offset, offset + length)
     * (length 0: one byte), with the same checks; map_offset() then tells
     * where in the segment address() lies. */
    static ucs_status_t attach_range(const ShmId &id, uint64_t offset, uint64_t length,
                                     ShmSegment *out);

    /* Unlinks named segments of this user that no process holds any more
     * (their owner's lock is free), and nothing else. */
    static void reap_stale_named();

    void       *address() const { return address_; }
    size_t      size() const { return size_; }
    /* Offset in the segment of address(): 0 unless mapped by attach_range. */
    uint64_t    map_offset() const { return map_offset_; }
    const ShmId &id() const { return id_; }
    bool        valid() const { return address_ != nullptr; }
    bool        owner() const { return owner_; }
    /* A named segment cut short under this mapping (TruncationGuard): the
     * mapping now holds zero pages of our own, nothing shared. */
    bool        truncated() const { return TruncationGuard::truncated(guard_); }
    void        reset();

    /* Fills the page tables of this mapping's first `length` bytes now (a
     * hint: failures are ignored), so the first message through each page
     * does not take a page fault. */
    void prefault(size_t length) const;
    /* Reads one byte of each page of the first `length` bytes. A hypervisor
     * that maps a guest's pages into a process on first access (shadow
     * paging) traps there even after prefault(): 6-7 us a page on host E of
     * docs/perf.md. Reading takes the traps at once (the entries it maps are
     * writable); on other hosts it reads pages already mapped. */
    void touch(size_t length) const;

  private:
    void guard_unsealed();

    void  *address_ = nullptr;
    size_t size_    = 0;
    int    fd_      = -1;
    bool   owner_   = false;
    uint64_t map_offset_ = 0;
    ShmId  id_     = {0, -1, 0, 0, 0};
    int      guard_      = -1; /* TruncationGuard handle of a named segment's mapping */
};

}  // namespace uct_tm

#endif
