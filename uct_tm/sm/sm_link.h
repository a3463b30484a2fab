/*
 * SmIfaceLink: what the parts of a tm_sm iface (SmRendezvous,
 * SmStagingCopies) use of the iface that owns them, and nothing more:
 * control messages, the peer table, the tag engine, the geometry and the
 * RTS send. Plain forwarding calls, defined inline at the end of
 * sm_iface.h: no virtual call and no cost over calling the iface directly.
 */
#ifndef UCT_TM_SM_SM_LINK_H_
#define UCT_TM_SM_SM_LINK_H_

#include <uct/api/uct.h>

#include <cstddef>
#include <cstdint>

namespace uct_tm {

class TagEngine;

namespace sm {

class SmIface;
class RemotePeer;
struct ControlMsg;
struct Geometry;
struct IfaceAddress;
struct Message;
struct PackedRkey;
struct SmEp;

class SmIfaceLink {
  public:
    explicit SmIfaceLink(SmIface &iface) : iface_(&iface) {}

    /* Sends now, or queues for progress when the peer's FIFO is full. */
    inline void        send_control(RemotePeer *peer, const ControlMsg &msg);
    /* The peer in slot `slot` of our peer table (attached on first use), or null. */
    inline RemotePeer *peer_of(uint16_t slot);
    /* Why peer_of(slot) found nobody: UCS_ERR_CONNECTION_RESET if the sender
     * left, else UCS_ERR_UNREACHABLE. */
    inline ucs_status_t unattached_peer_status(uint16_t slot) const;
    inline bool        peer_address(uint16_t slot, IfaceAddress *out) const;
    inline void        put_peer(RemotePeer *peer);
    /* The next progress call runs the iface's slow part (rare work that
     * must not cost the polling loop a check). */
    inline void        slow_progress_next();
    /* Inside this iface's progress (its callbacks included), not a call the
     * user made from outside it. */
    inline bool        in_progress() const;
    /* Counts and logs a message dropped as malformed. */
    inline void        drop(const Message &m, const char *why);
    inline TagEngine  &tags();
    inline bool        tag_enabled() const;
    inline const Geometry &geometry() const;
    /* The layer above's rndv_cb for a rendezvous no receive matched;
     * false if it has none. */
    inline bool        unexpected_rndv(uct_tag_t tag, const void *header, unsigned header_length,
                                       uint64_t address, size_t length, const PackedRkey *rkey);
    /* Whether `ep` may send now (sm_send.cc). */
    inline ucs_status_t tx_ready(SmEp *ep) const;
    /* An RTS: `info` then the layer above's header, in one element or
     * descriptor of the receiver. */
    inline ucs_status_t send_rts(SmEp *ep, uct_tag_t tag, const void *info, size_t info_length,
                                 const void *header, unsigned header_length);

  private:
    SmIface *iface_;
};

}  // namespace sm
}  // namespace uct_tm

#endif
