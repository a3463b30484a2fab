#include "sm_raw.h"

#include <cerrno>
#include <fcntl.h>
#include <sys/mman.h>
#include <unistd.h>

#include <cstdio>
#include <cstring>

namespace uct_tm_test {

using namespace uct_tm::sm;

RawSegment::~RawSegment() {
    if (base_ != nullptr) {
        munmap(base_, size_);
    }
}

bool RawSegment::attach(const void *iface_addr) {
    IfaceAddress addr;
    memcpy(&addr, iface_addr, sizeof(addr));
    char path[64];
    if (!uct_tm::shm_is_named(addr.segment)) {
        snprintf(path, sizeof(path), "/proc/%d/fd/%d", addr.segment.pid, addr.segment.fd);
    } else {
        snprintf(path, sizeof(path), "/dev/shm");
        uct_tm::shm_named_path(addr.segment, path + 8, sizeof(path) - 8);
    }
    const int fd = open(path, O_RDWR | O_CLOEXEC);
    if (fd < 0) {
        error_ = std::string("open ") + path + ": " + strerror(errno);
        return false;
    }
    size_ = addr.segment.size;
    base_ = mmap(nullptr, size_, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    close(fd);
    if (base_ == MAP_FAILED) {
        base_  = nullptr;
        error_ = std::string("mmap: ") + strerror(errno);
        return false;
    }
    header_   = static_cast<SegmentHeader *>(base_);
    geometry_ = header_->geometry;
    if ((header_->magic != kSegmentMagic) || (geometry_.total_size > size_)) {
        error_ = "not a tm_sm segment";
        return false;
    }
    fifo_.init(header_, geometry_);
    return true;
}

bool RawSegment::write(const Fill &fill) {
    uint64_t seq;
    if (!fifo_.claim(1, &seq)) {
        return false;
    }
    ElemHeader *e = fifo_.elem(seq);
    fill(e, static_cast<char *>(inline_payload(e)), fifo_.desc_payload(e));
    fifo_.publish(e, seq);
    return true;
}

bool RawSegment::claim_only(uint32_t count) {
    uint64_t seq;
    return fifo_.claim(count, &seq);
}

PeerSlot *RawSegment::peer_slots() const {
    return reinterpret_cast<PeerSlot *>(static_cast<char *>(base_) + geometry_.peers_offset);
}

RndvSlot *RawSegment::rndv_slots() const {
    return reinterpret_cast<RndvSlot *>(static_cast<char *>(base_) + geometry_.rndv_offset);
}

int RawSegment::used_peer_slot() const {
    for (uint32_t i = 0; i < geometry_.max_peers; ++i) {
        if ((peer_slots()[i].state.load() & 3) == kPeerUsed) {
            return static_cast<int>(i);
        }
    }
    return -1;
}

}  // namespace uct_tm_test
