/*
 * UdChannel: datagrams between ifaces on one verbs port, over an unreliable
 * datagram (UD) queue pair -- what tm_dc's on-demand provider sends its
 * connection requests and replies over before any RC queue pair exists.
 * Small messages only (kMaxDatagram); delivery is not guaranteed, so the
 * protocol over it repeats what was not answered. Address handles are kept
 * per destination port address (a handful of peers at a time in practice).
 */
#ifndef UCT_TM_IB_UD_CHANNEL_H_
#define UCT_TM_IB_UD_CHANNEL_H_

#include "rc_wire.h"

#include <infiniband/verbs.h>
#include <ucs/type/status.h>

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <vector>

namespace uct_tm {
namespace ib {

/* The address-handle attributes of a peer's port, seen from local port
 * `port` (GID index `gid_index` on RoCE): UD datagrams and DC sends alike. */
inline struct ibv_ah_attr peer_ah_attr(const DeviceAddress &to, uint8_t port, int gid_index) {
    struct ibv_ah_attr attr = {};
    attr.port_num = port;
    attr.dlid     = to.lid;
    if (to.roce) {
        attr.is_global      = 1;
        memcpy(attr.grh.dgid.raw, to.gid, sizeof(to.gid));
        attr.grh.sgid_index = static_cast<uint8_t>(gid_index);
        attr.grh.hop_limit  = 64;
    }
    return attr;
}

class UdChannel {
  public:
    static constexpr size_t   kMaxDatagram = 128;
    static constexpr uint32_t kQkey        = 0x1ee7d0c5; /* both ends use it */

    UdChannel() = default;
    ~UdChannel();
    UdChannel(const UdChannel &)            = delete;
    UdChannel &operator=(const UdChannel &) = delete;

    /* Opens the QP on `port` of `pd`'s device (GID index `gid_index` on RoCE). */
    ucs_status_t open(struct ibv_pd *pd, uint8_t port, int gid_index, unsigned depth);
    uint32_t     qp_num() const { return qp_->qp_num; }

    /* Sends `len` bytes to UD QP `qpn` at the port `to` names. NO_RESOURCE:
     * every send slot is in flight (poll first). */
    ucs_status_t send(const DeviceAddress &to, uint32_t qpn, const void *msg, size_t len);

    /* Calls fn(data, length) for each datagram that arrived (data valid
     * during the call) and reaps send completions; the number handled. */
    template <typename Fn> unsigned poll(Fn &&fn) {
        struct ibv_wc wcs[16];
        const int     n = ibv_poll_cq(cq_, 16, wcs);
        for (int i = 0; i < n; ++i) {
            if (wcs[i].opcode & IBV_WC_RECV) {
                if ((wcs[i].status == IBV_WC_SUCCESS) && (wcs[i].byte_len >= kGrh)) {
                    fn(rx_slot(wcs[i].wr_id) + kGrh, wcs[i].byte_len - kGrh);
                }
                post_recv(static_cast<uint32_t>(wcs[i].wr_id));
            } else {
                free_tx_.push_back(static_cast<uint32_t>(wcs[i].wr_id));
            }
        }
        return (n > 0) ? static_cast<unsigned>(n) : 0;
    }

  private:
    static constexpr size_t kGrh  = 40; /* a UD receive starts with the GRH's room */
    static constexpr size_t kSlot = kGrh + kMaxDatagram;

    struct Ah {
        DeviceAddress  to;
        struct ibv_ah *ah;
    };
    struct ibv_ah *ah_for(const DeviceAddress &to);
    char *rx_slot(uint64_t i) const { return bufs_ + i * kSlot; }
    char *tx_slot(uint32_t i) const { return bufs_ + (depth_ + i) * kSlot; }
    void  post_recv(uint32_t i);

    struct ibv_pd *pd_    = nullptr;
    struct ibv_cq *cq_    = nullptr;
    struct ibv_qp *qp_    = nullptr;
    struct ibv_mr *mr_    = nullptr;
    char          *bufs_  = nullptr; /* depth_ receive slots, then depth_ send slots */
    unsigned       depth_ = 0;
    uint8_t        port_  = 1;
    int            gid_index_ = 0;
    std::vector<uint32_t> free_tx_;
    std::vector<Ah>       ahs_;
};

}  // namespace ib
}  // namespace uct_tm

#endif
