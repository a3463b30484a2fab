#include "sm_layout.h"

#include <cstdio>
#include <cstring>

namespace uct_tm {
namespace sm {

bool make_geometry(uint32_t fifo_elems, uint32_t elem_size, uint32_t spare_descs, uint32_t seg_size,
                   size_t rx_headroom, uint32_t max_peers, uint32_t rndv_slots,
                   uint32_t staging_chunks, uint32_t staging_chunk_size, bool page_end_payloads,
                   Geometry *out) {
    if ((fifo_elems < 2) || (fifo_elems > (1u << 20)) || (fifo_elems & (fifo_elems - 1)) ||
        (elem_size < 2 * kCacheLine) || (elem_size > 4096) || (elem_size % kCacheLine) ||
        (seg_size < kCacheLine) || (seg_size > (64u << 20)) || (rx_headroom > 4096) ||
        (max_peers == 0) || (max_peers > UINT16_MAX) || (rndv_slots == 0) ||
        (rndv_slots > (1u << 20)) || (spare_descs > (1u << 20)) || (staging_chunks > 4096) ||
        (staging_chunk_size < 4096) || (staging_chunk_size > (16u << 20)) ||
        (staging_chunk_size % 4096)) {
        return false;
    }
    Geometry g{};
    g.fifo_elems   = fifo_elems;
    g.elem_size    = elem_size;
    g.fifo_offset  = align_up(sizeof(SegmentHeader), 4096);
    g.num_descs    = fifo_elems + spare_descs;
    /* Room for the uct_recv_desc_t pointer and the user's headroom in front
     * of the payload, as uct_iface_release_desc() expects. */
    g.desc_payload = static_cast<uint32_t>(align_up(rx_headroom + sizeof(void *), kCacheLine));
    g.seg_size     = static_cast<uint32_t>(align_up(seg_size, kCacheLine));
    g.desc_stride  = g.desc_payload + g.seg_size;
    if (page_end_payloads) { /* each payload ends a page (sm_pack_windows.h) */
        g.desc_stride  = static_cast<uint32_t>(align_up(g.desc_stride, 4096));
        g.desc_payload = g.desc_stride - g.seg_size;
    }
    g.descs_offset = align_up(g.fifo_offset + uint64_t{fifo_elems} * elem_size, 4096);
    g.max_peers    = max_peers;
    g.peers_offset = align_up(g.descs_offset + uint64_t{g.num_descs} * g.desc_stride, kCacheLine);
    g.rndv_slots   = rndv_slots;
    g.rndv_offset  = align_up(g.peers_offset + uint64_t{max_peers} * sizeof(PeerSlot), kCacheLine);
    g.staging_chunks        = staging_chunks;
    g.staging_chunk_size    = staging_chunk_size;
    g.staging_states_offset = align_up(g.rndv_offset + uint64_t{rndv_slots} * sizeof(RndvSlot), kCacheLine);
    g.staging_offset        = align_up(g.staging_states_offset + uint64_t{staging_chunks} * sizeof(StagingState), 4096);
    g.total_size = align_up(g.staging_offset + uint64_t{staging_chunks} * staging_chunk_size, 4096);
    *out           = g;
    return true;
}

bool valid_geometry(const Geometry &g, uint64_t segment_size) {
    auto within = [segment_size](uint64_t offset, uint64_t count, uint64_t size) {
        return (offset <= segment_size) && (count <= (segment_size - offset) / size);
    };
    return (g.fifo_elems >= 2) && ((g.fifo_elems & (g.fifo_elems - 1)) == 0) &&
           (g.elem_size >= 2 * kCacheLine) && (g.elem_size <= 4096) &&
           (g.elem_size % kCacheLine == 0) && (g.fifo_offset % kCacheLine == 0) &&
           (g.fifo_offset >= sizeof(SegmentHeader)) &&
           within(g.fifo_offset, g.fifo_elems, g.elem_size) && (g.num_descs >= g.fifo_elems) &&
           (g.desc_stride % kCacheLine == 0) && (g.desc_payload >= sizeof(void *)) &&
           (g.seg_size > 0) && (uint64_t{g.desc_payload} + g.seg_size <= g.desc_stride) &&
           (g.descs_offset % kCacheLine == 0) &&
           within(g.descs_offset, g.num_descs, g.desc_stride) && (g.max_peers > 0) &&
           (g.max_peers <= UINT16_MAX) && (g.peers_offset % alignof(PeerSlot) == 0) &&
           within(g.peers_offset, g.max_peers, sizeof(PeerSlot)) && (g.rndv_slots > 0) &&
           (g.rndv_offset % alignof(RndvSlot) == 0) &&
           within(g.rndv_offset, g.rndv_slots, sizeof(RndvSlot)) &&
           (g.staging_chunks <= 4096) && (g.staging_chunk_size >= 4096) &&
           (g.staging_chunk_size % 4096 == 0) && (g.staging_states_offset % alignof(StagingState) == 0) &&
           within(g.staging_states_offset, g.staging_chunks, sizeof(StagingState)) &&
           within(g.staging_offset, g.staging_chunks, g.staging_chunk_size) &&
           (g.total_size <= segment_size);
}

uint64_t boot_id() {
    static const uint64_t id = [] {
        char  buf[64] = {};
        FILE *f       = fopen("/proc/sys/kernel/random/boot_id", "r");
        if (f != nullptr) {
            if (fgets(buf, sizeof(buf), f) == nullptr) {
                buf[0] = '\0';
            }
            fclose(f);
        }
        uint64_t h = 1469598103934665603ull; /* FNV-1a */
        for (const char *p = buf; *p != '\0' && *p != '\n'; ++p) {
            h = (h ^ static_cast<unsigned char>(*p)) * 1099511628211ull;
        }
        return h;
    }();
    return id;
}

}  // namespace sm
}  // namespace uct_tm
