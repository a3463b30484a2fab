#include "shm_segment.h"

#include "range.h"
#include "topology.h"

#include <ucs/debug/log_def.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <climits>
#include <cstdio>
#include <cstring>
#include <ctime>
#include <dirent.h>
#include <fcntl.h>
#include <sys/file.h>
#include <sys/mman.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <unistd.h>

namespace uct_tm {
namespace {

constexpr const char *kMemfdPrefix = "uct_tm.";
constexpr int         kSizeSeals   = F_SEAL_SHRINK | F_SEAL_GROW;
/* Names drawn before giving up: each collides only with an existing name. */
constexpr int kNamedAttempts = 32;
/* A named segment of size 0 whose lock is free may be one being created (its
 * owner locks it right after creating it); after this long it is not. */
constexpr time_t kCreatingSeconds = 10;

size_t page_size() { return static_cast<size_t>(sysconf(_SC_PAGESIZE)); }

size_t page_align(size_t size) {
    const size_t page = page_size();
    return (size + page - 1) & ~(page - 1);
}

std::atomic<uint32_t> memfd_serial{0};

uint32_t next_memfd_serial() {
    uint32_t serial;
    do {
        serial = (memfd_serial.fetch_add(1) + 1) & ~kShmNamedBit;
    } while (serial == 0);
    return serial;
}

/* 63 random bits into a named id; false if the kernel gave none. */
bool draw_name(ShmId *id) {
    uint32_t bits[2];
    if (getrandom(bits, sizeof(bits), 0) != static_cast<ssize_t>(sizeof(bits))) {
        ucs_error("tm shm: getrandom failed: %m");
        return false;
    }
    id->serial = bits[0] | kShmNamedBit;
    id->fd     = static_cast<int32_t>(bits[1]);
    return true;
}

ucs_status_t map_fd(int fd, size_t size, uint64_t offset, void **address) {
    void *p = mmap(nullptr, size, PROT_READ | PROT_WRITE, MAP_SHARED, fd,
                   static_cast<off_t>(offset));
    if (p == MAP_FAILED) {
        ucs_error("tm shm: mmap(%zu at %llu) failed: %m", size,
                  static_cast<unsigned long long>(offset));
        return UCS_ERR_NO_MEMORY;
    }
    *address = p;
    return UCS_OK;
}

/* Creates and locks a named segment under a fresh random name. */
ucs_status_t create_named(ShmId *id, int *fd_out) {
    for (int attempt = 0; attempt < kNamedAttempts; ++attempt) {
        char path[NAME_MAX];
        if (!draw_name(id)) {
            return UCS_ERR_IO_ERROR;
        }
        shm_named_path(*id, path, sizeof(path));
        const int fd = shm_open(path, O_CREAT | O_EXCL | O_RDWR | O_CLOEXEC, S_IRUSR | S_IWUSR);
        if (fd < 0) {
            if (errno == EEXIST) {
                ucs_debug("tm shm: %s exists, drawing another name", path);
                continue;
            }
            ucs_error("tm shm: shm_open(%s) failed: %m", path);
            return UCS_ERR_IO_ERROR;
        }
        /* The lock says "alive" for as long as this open file exists. A
         * reaper looking at the new file this very moment holds it briefly:
         * then start over with another name. */
        if (flock(fd, LOCK_EX | LOCK_NB) != 0) {
            ucs_debug("tm shm: %s is being looked at, drawing another name", path);
            shm_unlink(path);
            close(fd);
            continue;
        }
        *fd_out = fd;
        return UCS_OK;
    }
    ucs_error("tm shm: no free name for a named segment after %d attempts", kNamedAttempts);
    return UCS_ERR_IO_ERROR;
}

/* True if the memfd open as `fd` is the one whose name carries `serial`. */
bool memfd_has_serial(int fd, uint32_t serial) {
    char link[64], target[PATH_MAX];
    snprintf(link, sizeof(link), "/proc/self/fd/%d", fd);
    const ssize_t n = readlink(link, target, sizeof(target) - 1);
    if (n < 0) {
        return false;
    }
    target[n] = '\0';
    return shm_memfd_link_is(target, serial);
}

}  // namespace

ShmSegment &ShmSegment::operator=(ShmSegment &&other) noexcept {
    if (this != &other) {
        reset();
        address_       = other.address_;
        size_          = other.size_;
        fd_            = other.fd_;
        owner_         = other.owner_;
        map_offset_    = other.map_offset_;
        id_            = other.id_;
        guard_            = other.guard_;
        other.guard_      = -1;
        other.address_ = nullptr;
        other.fd_      = -1;
        other.owner_   = false;
        other.size_    = 0;
        other.map_offset_ = 0;
    }
    return *this;
}

void ShmSegment::reset() {
    TruncationGuard::unwatch(guard_);
    guard_ = -1;
    if (address_ != nullptr) {
        munmap(address_, size_);
        address_ = nullptr;
    }
    /* Unlink while the lock is still held: a reaper never sees our name free. */
    if (owner_ && shm_is_named(id_)) {
        char path[NAME_MAX];
        shm_named_path(id_, path, sizeof(path));
        shm_unlink(path);
    }
    if (fd_ >= 0) {
        close(fd_);
        fd_ = -1;
    }
    owner_      = false;
    size_       = 0;
    map_offset_ = 0;
}

/* A named segment takes no seals: any process of this user can truncate
 * it, which would SIGBUS us on the next access. */
void ShmSegment::guard_unsealed() {
    if (shm_is_named(id_)) {
        guard_ = TruncationGuard::watch(address_, size_);
    }
}

ucs_status_t ShmSegment::create(size_t size, ShmBacking backing, bool numa_bind, ShmSegment *out) {
    if ((out == nullptr) || (size == 0) || (size > (1ull << 40))) {
        return UCS_ERR_INVALID_PARAM;
    }
    ShmSegment seg;
    seg.size_    = page_align(size);
    seg.id_.pid  = getpid();
    seg.id_.uid  = getuid();
    seg.id_.size = seg.size_;
    if (backing == ShmBacking::kMemfd) {
        char name[32];
        seg.id_.serial = next_memfd_serial();
        snprintf(name, sizeof(name), "%s%u", kMemfdPrefix, seg.id_.serial);
        seg.fd_ = memfd_create(name, MFD_CLOEXEC | MFD_ALLOW_SEALING);
        if (seg.fd_ < 0) {
            ucs_error("tm shm: memfd_create failed: %m");
            return UCS_ERR_IO_ERROR;
        }
        seg.id_.fd = seg.fd_;
    } else {
        ucs_status_t status = create_named(&seg.id_, &seg.fd_);
        if (status != UCS_OK) {
            return status;
        }
    }
    seg.owner_ = true;
    /* memfd starts 0777 & ~umask in some kernels: make it private either way. */
    if ((fchmod(seg.fd_, S_IRUSR | S_IWUSR) != 0) ||
        (ftruncate(seg.fd_, static_cast<off_t>(seg.size_)) != 0)) {
        ucs_error("tm shm: sizing segment to %zu bytes failed: %m", seg.size_);
        return UCS_ERR_NO_MEMORY;
    }
    /* Its size is fixed for good: a process that opens it through /proc
     * cannot truncate it under our mappings (nor under a peer's). */
    if ((backing == ShmBacking::kMemfd) &&
        (fcntl(seg.fd_, F_ADD_SEALS, kSizeSeals | F_SEAL_SEAL) != 0)) {
        ucs_error("tm shm: sealing the segment's size failed: %m");
        return UCS_ERR_IO_ERROR;
    }
    ucs_status_t status = map_fd(seg.fd_, seg.size_, 0, &seg.address_);
    if (status != UCS_OK) {
        return status;
    }
    if (numa_bind) {
        bind_to_local_numa(seg.address_, seg.size_);
    }
    seg.guard_unsealed();
    *out = static_cast<ShmSegment &&>(seg);
    return UCS_OK;
}

void ShmSegment::prefault(size_t length) const {
    length = page_align(std::min(length, size_));
    /* MADV_POPULATE_WRITE fails with EFAULT where a page is gone (a named
     * segment cut short) instead of raising SIGBUS. */
    if ((address_ != nullptr) && (length > 0) &&
        (madvise(address_, length, MADV_POPULATE_WRITE) != 0)) {
        ucs_debug("tm shm: prefaulting %zu bytes at %p: %m", length, address_);
    }
}

void ShmSegment::touch(size_t length) const {
    const auto  *bytes = static_cast<const volatile char *>(address_);
    const size_t page  = page_size();
    length             = std::min(length, size_);
    for (size_t offset = 0; (bytes != nullptr) && (offset < length); offset += page) {
        (void)bytes[offset];
    }
}

ucs_status_t ShmSegment::attach(const ShmId &id, size_t min_size, ShmSegment *out) {
    if (id.size < min_size) {
        return UCS_ERR_INVALID_PARAM;
    }
    return attach_range(id, 0, id.size, out);
}

ucs_status_t ShmSegment::attach_range(const ShmId &id, uint64_t offset, uint64_t length,
                                      ShmSegment *out) {
    if ((out == nullptr) || (id.pid <= 0) || (id.size == 0) || (id.size > (1ull << 40)) ||
        !range_within(offset, length, id.size) || (offset == id.size)) {
        return UCS_ERR_INVALID_PARAM;
    }
    if (id.uid != getuid()) {
        return UCS_ERR_UNREACHABLE;
    }
    char path[PATH_MAX];
    int  fd;
    if (!shm_is_named(id)) {
        if ((id.fd < 0) || (id.serial == 0)) {
            return UCS_ERR_INVALID_PARAM;
        }
        snprintf(path, sizeof(path), "/proc/%d/fd/%d", id.pid, id.fd);
        fd = open(path, O_RDWR | O_CLOEXEC);
    } else {
        shm_named_path(id, path, sizeof(path));
        fd = shm_open(path, O_RDWR | O_CLOEXEC, 0);
    }
    if (fd < 0) {
        const int err = errno;
        if ((err == EACCES) || (err == EPERM)) {
            ucs_error("tm shm: no access to peer segment %s (%s): the kernel forbids opening "
                      "another process's descriptors here; set UCX_TM_SM_NAMED_SEGMENTS=y in "
                      "every process", path, strerror(err));
        } else {
            ucs_debug("tm shm: cannot open peer segment %s: %s", path, strerror(err));
        }
        return (err == ENOENT || err == ESRCH) ? UCS_ERR_UNREACHABLE
             : (err == EACCES || err == EPERM) ? UCS_ERR_UNREACHABLE
                                               : UCS_ERR_IO_ERROR;
    }
    ShmSegment seg;
    seg.fd_ = fd;
    if (!shm_is_named(id) && !memfd_has_serial(fd, id.serial)) {
        /* The descriptor number was reused: not the segment the id names. */
        ucs_debug("tm shm: %s is not segment %u of process %d", path, id.serial, id.pid);
        return UCS_ERR_UNREACHABLE;
    }
    const int seals = shm_is_named(id) ? 0 : fcntl(fd, F_GET_SEALS);
    if (!shm_is_named(id) && ((seals < 0) || ((seals & kSizeSeals) != kSizeSeals))) {
        /* Its owner could truncate it under our mapping: a SIGBUS in ours. */
        ucs_error("tm shm: %s is not sealed against resizing: refused", path);
        return UCS_ERR_UNREACHABLE;
    }
    struct stat st;
    if (fstat(fd, &st) != 0) {
        return UCS_ERR_IO_ERROR;
    }
    if ((st.st_uid != getuid()) || ((st.st_mode & (S_IRWXG | S_IRWXO)) != 0)) {
        ucs_error("tm shm: %s is not a private segment of this user (uid %u mode %o)", path,
                  st.st_uid, st.st_mode & 0777);
        return UCS_ERR_UNREACHABLE;
    }
    if (static_cast<uint64_t>(st.st_size) < id.size) {
        ucs_error("tm shm: %s holds %lld bytes, expected %llu", path,
                  static_cast<long long>(st.st_size), static_cast<unsigned long long>(id.size));
        return UCS_ERR_INVALID_PARAM;
    }
    /* The pages holding the range, and no more. */
    const uint64_t first = offset & ~static_cast<uint64_t>(page_size() - 1);
    const uint64_t end   = offset + (length ? length : 1);
    seg.size_       = page_align(end - first);
    seg.map_offset_ = first;
    seg.id_         = id;
    ucs_status_t status = map_fd(fd, seg.size_, first, &seg.address_);
    if (status != UCS_OK) {
        return status;
    }
    seg.guard_unsealed();
    /* The mapping keeps the memory alive; the descriptor is not needed. */
    close(seg.fd_);
    seg.fd_ = -1;
    *out    = static_cast<ShmSegment &&>(seg);
    return UCS_OK;
}

void ShmSegment::reap_stale_named() {
    DIR *dir = opendir("/dev/shm");
    if (dir == nullptr) {
        return;
    }
    const int   dfd = dirfd(dir);
    const uid_t uid = getuid();
    while (struct dirent *entry = readdir(dir)) {
        /* Only names of our own form: uct_tm.<our uid>.<16 hex digits>. */
        const char *name = entry->d_name;
        uint32_t    owner;
        if (!shm_named_file(name, &owner) || (owner != uid)) {
            continue;
        }
        const int fd = openat(dfd, name, O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC);
        if (fd < 0) {
            continue;
        }
        struct stat st, now;
        /* Ours, and no process holds it: then it can never be held again
         * (only its creator locks it, once, before sizing it). */
        if ((fstat(fd, &st) == 0) && S_ISREG(st.st_mode) && (st.st_uid == uid) &&
            (flock(fd, LOCK_EX | LOCK_NB) == 0) && (fstat(fd, &st) == 0) &&
            ((st.st_size > 0) || (time(nullptr) - st.st_ctime > kCreatingSeconds)) &&
            (fstatat(dfd, name, &now, AT_SYMLINK_NOFOLLOW) == 0) &&
            (now.st_dev == st.st_dev) && (now.st_ino == st.st_ino) &&
            (unlinkat(dfd, name, 0) == 0)) {
            ucs_debug("tm shm: removed stale segment /dev/shm/%s", name);
        }
        close(fd);
    }
    closedir(dir);
}

}  // namespace uct_tm
