#include "shm_segment.h"

#include "topology.h"

#include <ucs/debug/log_def.h>

#include <atomic>
#include <cerrno>
#include <climits>
#include <cstdio>
#include <cstring>
#include <dirent.h>
#include <fcntl.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

namespace uct_tm {
namespace {

constexpr const char *kNamedPrefix = "uct_tm.";

size_t page_align(size_t size) {
    const size_t page = static_cast<size_t>(sysconf(_SC_PAGESIZE));
    return (size + page - 1) & ~(page - 1);
}

void named_path(const ShmId &id, char *buf, size_t len) {
    snprintf(buf, len, "/%s%u.%d.%u", kNamedPrefix, id.uid, id.pid, id.serial);
}

std::atomic<uint32_t> named_serial{0};

/* Mapping and ownership checks shared by create and attach. */
ucs_status_t map_fd(int fd, size_t size, void **address) {
    void *p = mmap(nullptr, size, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    if (p == MAP_FAILED) {
        ucs_error("tm shm: mmap(%zu) failed: %m", size);
        return UCS_ERR_NO_MEMORY;
    }
    *address = p;
    return UCS_OK;
}

}  // namespace

ShmSegment &ShmSegment::operator=(ShmSegment &&other) noexcept {
    if (this != &other) {
        reset();
        address_       = other.address_;
        size_          = other.size_;
        fd_            = other.fd_;
        owner_         = other.owner_;
        id_            = other.id_;
        other.address_ = nullptr;
        other.fd_      = -1;
        other.owner_   = false;
        other.size_    = 0;
    }
    return *this;
}

void ShmSegment::reset() {
    if (address_ != nullptr) {
        munmap(address_, size_);
        address_ = nullptr;
    }
    if (fd_ >= 0) {
        close(fd_);
        fd_ = -1;
    }
    if (owner_ && (id_.serial != 0)) {
        char path[NAME_MAX];
        named_path(id_, path, sizeof(path));
        shm_unlink(path);
    }
    owner_ = false;
    size_  = 0;
}

ucs_status_t ShmSegment::create(size_t size, ShmBacking backing, bool numa_bind, ShmSegment *out) {
    if ((out == nullptr) || (size == 0)) {
        return UCS_ERR_INVALID_PARAM;
    }
    ShmSegment seg;
    seg.size_    = page_align(size);
    seg.owner_   = true;
    seg.id_.pid  = getpid();
    seg.id_.uid  = getuid();
    seg.id_.size = seg.size_;
    if (backing == ShmBacking::kMemfd) {
        seg.fd_ = memfd_create("uct_tm", MFD_CLOEXEC);
        if (seg.fd_ < 0) {
            ucs_error("tm shm: memfd_create failed: %m");
            return UCS_ERR_IO_ERROR;
        }
        seg.id_.fd = seg.fd_;
    } else {
        seg.id_.serial = named_serial.fetch_add(1) + 1;
        char path[NAME_MAX];
        named_path(seg.id_, path, sizeof(path));
        seg.fd_ = shm_open(path, O_CREAT | O_EXCL | O_RDWR | O_CLOEXEC, S_IRUSR | S_IWUSR);
        if (seg.fd_ < 0) {
            ucs_error("tm shm: shm_open(%s) failed: %m", path);
            seg.owner_ = false;
            return UCS_ERR_IO_ERROR;
        }
    }
    /* memfd starts 0777 & ~umask in some kernels: make it private either way. */
    if ((fchmod(seg.fd_, S_IRUSR | S_IWUSR) != 0) ||
        (ftruncate(seg.fd_, static_cast<off_t>(seg.size_)) != 0)) {
        ucs_error("tm shm: sizing segment to %zu bytes failed: %m", seg.size_);
        return UCS_ERR_NO_MEMORY;
    }
    ucs_status_t status = map_fd(seg.fd_, seg.size_, &seg.address_);
    if (status != UCS_OK) {
        return status;
    }
    if (numa_bind) {
        bind_to_local_numa(seg.address_, seg.size_);
    }
    *out = static_cast<ShmSegment &&>(seg);
    return UCS_OK;
}

ucs_status_t ShmSegment::attach(const ShmId &id, size_t min_size, ShmSegment *out) {
    if ((out == nullptr) || (id.pid <= 0) || (id.size < min_size) || (id.size > (1ull << 40))) {
        return UCS_ERR_INVALID_PARAM;
    }
    if (id.uid != getuid()) {
        return UCS_ERR_UNREACHABLE;
    }
    char path[PATH_MAX];
    int  fd;
    if (id.serial == 0) {
        if (id.fd < 0) {
            return UCS_ERR_INVALID_PARAM;
        }
        snprintf(path, sizeof(path), "/proc/%d/fd/%d", id.pid, id.fd);
        fd = open(path, O_RDWR | O_CLOEXEC);
    } else {
        named_path(id, path, sizeof(path));
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
    seg.size_ = id.size;
    seg.id_   = id;
    ucs_status_t status = map_fd(fd, seg.size_, &seg.address_);
    if (status != UCS_OK) {
        return status;
    }
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
    const unsigned uid    = getuid();
    const size_t   prefix = strlen(kNamedPrefix);
    while (struct dirent *entry = readdir(dir)) {
        unsigned file_uid, serial;
        int      pid;
        if ((strncmp(entry->d_name, kNamedPrefix, prefix) != 0) ||
            (sscanf(entry->d_name + prefix, "%u.%d.%u", &file_uid, &pid, &serial) != 3) ||
            (file_uid != uid) || (pid <= 0)) {
            continue;
        }
        if ((kill(pid, 0) != 0) && (errno == ESRCH)) {
            char path[NAME_MAX + 2];
            snprintf(path, sizeof(path), "/%s", entry->d_name);
            if (shm_unlink(path) == 0) {
                ucs_debug("tm shm: removed stale segment %s of dead process %d", path, pid);
            }
        }
    }
    closedir(dir);
}

}  // namespace uct_tm
