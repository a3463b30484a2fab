/*
 * Endpoint: this worker's connection to one peer worker over one iface, with
 * the sends waiting for transport resources (in posting order: messages to a
 * peer never overtake each other) and the control replies waiting likewise.
 */
#ifndef UCT_TM_PROTO_ENDPOINT_H_
#define UCT_TM_PROTO_ENDPOINT_H_

#include "wire.h"

#include <uct/api/uct.h>

#include <cstdint>
#include <deque>
#include <vector>

namespace uct_tm {
namespace proto {

class Worker;
struct Iface;

/* What one sender holds in a receiver's memory: eager bytes buffered as
 * unexpected messages (at most the credit the receiver granted it, its
 * window) and fragmented messages begun and not finished. Charged when
 * they arrive, released when a receive or a discard takes them. */
struct Account {
    uint64_t bytes      = 0;
    uint32_t fragmented = 0;
};

/* A conforming sender finishes one fragmented message before it begins the
 * next (fragments leave and arrive in order); a few more allow for leftovers
 * of a sender's endpoint destroyed mid-message. */
inline constexpr uint32_t kMaxOpenFragmented = 4;

class Endpoint {
  public:
    static constexpr uint32_t kMagic = 0x7470e9e1;
    uint32_t magic       = kMagic; /* cleared on destroy: catches some stale handles */
    /* false until uct_tm_proto_ep_connect() over a transport that connects
     * endpoint to endpoint: no send, and not among the worker's peers (no
     * arrival finds it, no reply goes over it) */
    bool     connected   = true;
    /* set when the transport reported the peer failed (its error handler):
     * sends on the endpoint fail with it from then on */
    ucs_status_t failure = UCS_OK;
    Worker  *worker      = nullptr;
    Iface   *iface       = nullptr;
    uct_ep_h uct_ep      = nullptr;
    uint32_t peer_id     = 0;
    uint64_t credits     = 0; /* eager bytes the peer still buffers for us */
    uint64_t peer_window = 0; /* its share of its unexpected cap */
    uint64_t owed        = 0; /* eager bytes of the peer's we consumed and not yet returned */
    Account  held;                /* what the peer holds here (messages claiming its id) */
    uint32_t next_msg_id = 1;
    /* data messages use the transport's tag API (the peer offloads receives);
     * otherwise AM, where nothing can overtake the peer's tag list */
    bool     tag_path    = false;
    size_t   short_max   = 0; /* payload bytes that go as one am_short */
    /* messages shorter than this are eager and go in one transport call
     * (Sender::send's test); the rest through send_general() */
    size_t   eager_now_limit = 0;
    /* MORE sends not yet sent (BatchHeader + entries); while it holds any,
     * eager_now_limit is 0 so that no send overtakes them, and
     * eager_now_saved keeps the limit */
    std::vector<char> batch;
    size_t   eager_now_saved = 0;
    bool     busy        = false; /* in the worker's list of endpoints with queued work */
    /* our HelloHeader was refused with NO_RESOURCE: progress sends it first */
    bool hello_due = false;
    /* the worker created it to reply to a peer that sent first (its
     * kHello); the application holds no handle to it until its own
     * ep_create() to that peer adopts it */
    bool implicit = false;
    /* send requests that left `sends` (some completed since: pruned when a
     * FENCE send looks, which starts when none is left live) */
    std::deque<uint64_t>   started;
    std::deque<uint64_t>   sends; /* send requests not fully handed to the transport */
    std::deque<CtrlHeader> ctrl;  /* control messages refused with NO_RESOURCE */
    /* Endpoint-to-endpoint transports: the peer's device address (from its
     * worker address) and the endpoint address it was connected to. */
    std::vector<char>      peer_dev;
    std::vector<char>      peer_ep;
};

/* Eager credit taken from an endpoint for one message: it goes back when
 * the send ends without the message leaving, unless commit()ted. */
class CreditHold {
  public:
    CreditHold(Endpoint *ep, uint64_t bytes) : ep_(ep), bytes_(bytes) { ep_->credits -= bytes_; }
    ~CreditHold() {
        if (ep_ != nullptr) {
            ep_->credits += bytes_;
        }
    }
    CreditHold(const CreditHold &)            = delete;
    CreditHold &operator=(const CreditHold &) = delete;

    /* The message, or part of it, left: the peer holds the credit now. */
    void commit() { ep_ = nullptr; }

  private:
    Endpoint *ep_;
    uint64_t  bytes_;
};

}  // namespace proto
}  // namespace uct_tm

struct uct_tm_proto_ep : uct_tm::proto::Endpoint {};

namespace uct_tm {
namespace proto {

/* The handle the application knows endpoint `ep` (or null) by: none for
 * an implicit one (info.ep NULL, as for a sender we hold no endpoint to). */
inline uct_tm_proto_ep *user_handle(Endpoint *ep) {
    return ((ep != nullptr) && !ep->implicit) ? static_cast<uct_tm_proto_ep *>(ep) : nullptr;
}

}  // namespace proto
}  // namespace uct_tm

#endif
