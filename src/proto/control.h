/*
 * ControlChannel: the control messages between workers and the eager
 * credit they return. Outgoing: CTS, ACK, CANCEL_ACK, CREDIT and the
 * parts' other replies, over our endpoint to the peer; one refused with
 * NO_RESOURCE waits in the endpoint's control queue for progress. Incoming:
 * handle() hands each to the part it concerns. Credit is returned in
 * batches: a kCredit goes only once a quarter of the window is owed.
 */
#ifndef UCT_TM_PROTO_CONTROL_H_
#define UCT_TM_PROTO_CONTROL_H_

#include "endpoint.h"
#include "wire.h"

#include <cstddef>
#include <cstdint>
#include <vector>

namespace uct_tm {
namespace proto {

class Owner;

class ControlChannel {
  public:
    ControlChannel(Owner &owner, uint64_t window) : w_(owner), flush_mark_(window / 4) {}
    ControlChannel(const ControlChannel &)            = delete;
    ControlChannel &operator=(const ControlChannel &) = delete;

    void send(Endpoint *ep, const CtrlHeader &hdr);
    /* To the worker `source`; parked while we hold no endpoint to it yet
     * (up to kParkedMax, beyond: dropped, counted). */
    void send_to(uint32_t source, const CtrlHeader &hdr);
    /* Sends the replies parked for `ep`'s peer (ep_create, ep_connect). */
    void unpark(Endpoint *ep);
    /* A sync sender learns its message matched or was discarded. */
    void send_ack(uint32_t source, uint64_t sreq);
    /* A control message arrived. */
    void handle(const CtrlHeader &hdr);

    /* Inline (every eager arrival): counts the bytes `ep` (our endpoint to
     * the sender, or null: then they wait for one) gets back; sends them
     * once past the flush mark. */
    void return_credit(uint32_t source, Endpoint *ep, uint64_t bytes) {
        if (ep == nullptr) {
            park_credit(source, bytes);
            return;
        }
        ep->owed += bytes;
        if (!stays_owed(ep, 0)) {
            flush_credit(ep);
        }
    }
    /* Whether returning `bytes` more to `ep` stays below the flush mark
     * (the common arrival's test: then nothing is sent). */
    bool stays_owed(const Endpoint *ep, uint64_t bytes) const {
        return ep->owed + bytes < flush_mark_;
    }
    /* Inline (owner.h): an eager message was consumed; return_credit() and,
     * for a sync send, send_ack(). */
    void message_consumed(uint32_t source, uint64_t length, bool sync, uint64_t sreq);

  private:
    void flush_credit(Endpoint *ep);
    /* Credit for a worker we hold no endpoint to: added to the credit
     * parked for it (kept, not lost: the sender's window would shrink). */
    [[gnu::noinline]] void park_credit(uint32_t source, uint64_t bytes);
    /* Parks `h` for worker `source`; false when kParkedMax are parked. */
    bool park(uint32_t source, const CtrlHeader &h);
    /* The sender withdraws its rendezvous request `sreq`. */
    void withdraw_rts(uint32_t source, uint64_t sreq);
    /* A reply about one of our send requests (CTS, ACK, CANCEL_ACK). */
    void handle_reply(const CtrlHeader &hdr);

    /* Replies to workers we have no endpoint to yet: their message came
     * before our ep_create (the application exchanges names out of band and
     * may progress before it creates ours). Sent once it exists; beyond
     * kParkedMax (a bound against forged sources) dropped. */
    struct Parked {
        uint32_t   peer;
        CtrlHeader hdr;
    };
    static constexpr size_t kParkedMax = 256;

    Owner              &w_; /* the owner */
    const uint64_t      flush_mark_;
    std::vector<Parked> parked_;
};

}  // namespace proto
}  // namespace uct_tm

#endif
