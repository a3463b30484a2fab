#include "sm_peer.h"

#include "common/alloc_status.h"

#include <ucs/debug/log_def.h>

#include <cstring>
#include <new>
#include <utility>

namespace uct_tm {
namespace sm {
namespace {

/* Maps the segment of iface `remote` and checks its header; the geometry
 * is copied out first so the owner cannot change what was validated. */
ucs_status_t map_iface(const IfaceAddress &remote, ShmSegment *segment, Geometry *geometry) {
    ucs_status_t status = ShmSegment::attach(remote.segment, sizeof(SegmentHeader), segment);
    if (status != UCS_OK) {
        return status;
    }
    const auto   *header = static_cast<const SegmentHeader *>(segment->address());
    SegmentHeader snapshot;
    memcpy(static_cast<void *>(&snapshot), header, offsetof(SegmentHeader, tail));
    if ((snapshot.magic != kSegmentMagic) || (snapshot.version != kLayoutVersion) ||
        (snapshot.pid != remote.segment.pid) || (snapshot.uid != remote.segment.uid) ||
        (snapshot.iface_serial != remote.iface_serial) || (snapshot.boot_id != boot_id()) ||
        !valid_geometry(snapshot.geometry, segment->size())) {
        ucs_error("tm_sm: segment of process %d is not a compatible tm_sm iface (magic 0x%lx "
                  "version %u)", remote.segment.pid, static_cast<unsigned long>(snapshot.magic),
                  snapshot.version);
        return UCS_ERR_UNREACHABLE;
    }
    *geometry = snapshot.geometry;
    segment->prefault(prefault_length(*geometry));
    return UCS_OK;
}

}  // namespace

ucs_status_t RemotePeer::attach(const IfaceAddress &remote, const IfaceAddress &self,
                                RemotePeer **out) {
    RemotePeer *peer = new (std::nothrow) RemotePeer;
    if (peer == nullptr) {
        return UCS_ERR_NO_MEMORY;
    }
    ucs_status_t status = map_iface(remote, &peer->segment_, &peer->geometry_);
    if (status != UCS_OK) {
        delete peer;
        return status;
    }
    peer->address_ = remote;
    auto *header   = static_cast<SegmentHeader *>(peer->segment_.address());
    peer->header_   = header;
    peer->fifo_.init(header, peer->geometry_);
    char *base        = static_cast<char *>(peer->segment_.address());
    peer->rndv_slots_ = reinterpret_cast<RndvSlot *>(base + peer->geometry_.rndv_offset);

    /* Claim a slot in its peer table: FREE -> CLAIMED, fill, -> USED. */
    auto    *slots = reinterpret_cast<PeerSlot *>(base + peer->geometry_.peers_offset);
    uint32_t i     = 0;
    for (; i < peer->geometry_.max_peers; ++i) {
        uint32_t word = slots[i].state.load(std::memory_order_relaxed);
        if (((word & 3) == kPeerFree) &&
            slots[i].state.compare_exchange_strong(word, (word & ~3u) | kPeerClaimed,
                                                   std::memory_order_acquire)) {
            slots[i].iface_serial = self.iface_serial;
            slots[i].segment      = self.segment;
            peer->slot_word_      = ((word & ~3u) + 4) | kPeerUsed;
            slots[i].state.store(peer->slot_word_, std::memory_order_release);
            break;
        }
    }
    if (i == peer->geometry_.max_peers) {
        ucs_error("tm_sm: peer table of process %d is full (%u entries): raise "
                  "UCX_TM_SM_MAX_PEERS there", remote.segment.pid, peer->geometry_.max_peers);
        delete peer;
        return UCS_ERR_EXCEEDS_LIMIT;
    }
    peer->slot_  = static_cast<uint16_t>(i);
    peer->process_ = ProcessWatch(remote.segment.pid);
    *out         = peer;
    return UCS_OK;
}

RemotePeer::~RemotePeer() {
    if (header_ != nullptr && slot_word_ != 0) {
        auto *slots = reinterpret_cast<PeerSlot *>(static_cast<char *>(segment_.address()) +
                                                   geometry_.peers_offset);
        /* Free our slot unless the owner already recycled it. */
        uint32_t expected = slot_word_;
        slots[slot_].state.compare_exchange_strong(expected, slot_word_ & ~3u,
                                                   std::memory_order_release);
    }
}

void *RemotePeer::map_shm(const ShmId &id, uint64_t offset, uint64_t length) {
    /* MD-allocated memory is a sealed memfd, never a named segment. */
    if ((id.pid != pid()) || shm_is_named(id) || (offset > id.size) ||
        (length > id.size - offset)) {
        return nullptr;
    }
    for (size_t i = shm_maps_.size(); i-- > 0;) {
        const ShmId &m = shm_maps_[i].id();
        if ((m.fd == id.fd) && (m.serial == id.serial) && (m.size == id.size)) {
            return static_cast<char *>(shm_maps_[i].address()) + offset;
        }
    }
    /* Few buffers are live at once; keep the newest mappings. */
    constexpr size_t kMaxMaps = 16;
    ShmSegment       seg;
    if (ShmSegment::attach(id, id.size, &seg) != UCS_OK) {
        return nullptr;
    }
    if (alloc_status([&] {
            if (shm_maps_.size() == kMaxMaps) {
                shm_maps_.erase(shm_maps_.begin());
            }
            shm_maps_.push_back(std::move(seg));
        }) != UCS_OK) {
        return nullptr;
    }
    return static_cast<char *>(shm_maps_.back().address()) + offset;
}

bool RemotePeer::reject_rendezvous(const IfaceAddress &sender, uint32_t index, uint32_t gen) {
    ShmSegment segment;
    Geometry   geometry;
    if ((map_iface(sender, &segment, &geometry) != UCS_OK) || (index >= geometry.rndv_slots)) {
        return false;
    }
    auto    *slot     = reinterpret_cast<RndvSlot *>(static_cast<char *>(segment.address()) +
                                                    geometry.rndv_offset) + index;
    uint32_t expected = rndv_word(gen, kRndvPosted);
    return slot->word.compare_exchange_strong(expected, rndv_word(gen, kRndvRejected),
                                              std::memory_order_acq_rel);
}

bool RemotePeer::check_alive() {
    if (dead_) {
        return false;
    }
    if (segment_.truncated()) {
        /* Whatever it and we wrote there is gone, in both processes. */
        ucs_error("tm_sm: the segment of process %d was truncated by another process", pid());
        dead_ = true;
        return false;
    }
    dead_ = header_->closed.load(std::memory_order_acquire) || process_.exited();
    if (!dead_ && (slot_word_ != 0)) {
        /* It recycled our peer-table entry: it dropped us (we were stopped
         * for longer than its STOPPED_TIMEOUT, or it took us for dead). */
        const auto *slots = reinterpret_cast<const PeerSlot *>(
            static_cast<const char *>(segment_.address()) + geometry_.peers_offset);
        if (slots[slot_].state.load(std::memory_order_acquire) != slot_word_) {
            ucs_warn("tm_sm: process %d dropped this process from its peers", pid());
            dead_ = true;
        }
    }
    if (dead_) {
        ucs_debug("tm_sm: peer process %d is gone", pid());
    }
    return !dead_;
}

}  // namespace sm
}  // namespace uct_tm
