/*
 * A raw view of a tm_sm iface's shared segment, as any process of the same
 * user can get it: map the segment named by the iface address and write FIFO
 * elements (or the peer table, or rendezvous slots) directly, bypassing the
 * transport. Used to play a peer that writes garbage.
 *
 * This knows tm_sm's layout (uct_tm/sm/sm_layout.h) and nothing else of its
 * implementation.
 */
#ifndef UCT_TM_TESTS_UCT_SM_RAW_H_
#define UCT_TM_TESTS_UCT_SM_RAW_H_

#include "sm/sm_fifo.h"
#include "sm/sm_layout.h"
#include "sm/sm_peer.h"

#include <cstddef>
#include <cstdint>
#include <functional>
#include <string>

namespace uct_tm_test {

class RawSegment {
  public:
    RawSegment() = default;
    ~RawSegment();
    RawSegment(const RawSegment &)            = delete;
    RawSegment &operator=(const RawSegment &) = delete;

    /* Maps the segment of the tm_sm iface whose iface address is
     * `iface_addr` (uct_iface_get_address). False with a message in error(). */
    bool attach(const void *iface_addr);

    using Fill = std::function<void(uct_tm::sm::ElemHeader *e, char *inline_payload,
                                    char *desc_payload)>;
    /* Claims one element, lets `fill` write it (header fields and payload
     * areas: the inline one and the attached descriptor's), publishes it.
     * False if the FIFO is full. */
    bool write(const Fill &fill);
    /* Claims `count` consecutive elements and never publishes them (a sender
     * that died). */
    bool claim_only(uint32_t count = 1);

    uct_tm::sm::SegmentHeader      *header() const { return header_; }
    const uct_tm::sm::Geometry     &geometry() const { return geometry_; }
    uct_tm::sm::PeerSlot           *peer_slots() const;
    uct_tm::sm::RndvSlot           *rndv_slots() const;
    uint32_t                        inline_capacity() const { return fifo_.inline_capacity(); }
    /* Index of a peer-table slot in use, or -1. */
    int                             used_peer_slot() const;
    const std::string              &error() const { return error_; }

  private:
    void                      *base_   = nullptr;
    size_t                     size_   = 0;
    uct_tm::sm::SegmentHeader *header_ = nullptr;
    uct_tm::sm::Geometry       geometry_{};
    uct_tm::sm::FifoWriter     fifo_;
    std::string                error_;
};

}  // namespace uct_tm_test

#endif
