/*
 * Rendezvous: a worker's rendezvous transfers by reading and writing the
 * peer's memory (get_zcopy / put_zcopy where the iface can and its MD
 * registers memory), split so that both processes copy at once, with the
 * push protocol (CTS / DATA) where they cannot. Its own object: the
 * receive side starts one when a receive matched a rendezvous request
 * (start_rndv_recv), the send side packs the read offer of an RTS
 * (pack_rts), and the arrival paths hand it the replies (a put request, a
 * transfer's end). It reaches the requests, registrations, control
 * messages and completion through its owner (Owner, owner.h: a concrete
 * type, no virtual call).
 * Its logic, and the protocol's description, are in rndv_get.cc.
 */
#ifndef UCT_TM_PROTO_RENDEZVOUS_H_
#define UCT_TM_PROTO_RENDEZVOUS_H_

#include "endpoint.h"
#include "request.h"
#include "wire.h"

#include <uct/api/uct.h>

#include <cstddef>
#include <cstdint>

namespace uct_tm {
namespace proto {

class Owner;
struct Iface;

class Rendezvous {
  public:
    explicit Rendezvous(Owner &owner) : w_(owner) {}
    Rendezvous(const Rendezvous &)            = delete;
    Rendezvous &operator=(const Rendezvous &) = delete;

    /* A receive matched a rendezvous request: read it, have it written, or
     * ask for it to be pushed (CTS). */
    void start_rndv_recv(Request &r, uint32_t source, uint64_t sreq, const char *get,
                         size_t get_len, bool put_offer);
    /* Registers a send's buffer and writes the RTS's read offer; 0: none. */
    size_t pack_rts(Request &r, char *out);
    /* Sender: the receiver asks us to write the front of a message. */
    void handle_put_request(const PutHeader &h, const char *rkey, size_t rkey_len);
    /* A transfer of ours ended (its UCT completion). */
    void transfer_done(GetContext *g, ucs_status_t status);
    /* One rendezvous transfer into receive `r` ended. */
    void part_done(Request &r, ucs_status_t status);

  private:
    bool start_get(Request &r, uint32_t source, uint64_t sreq, const char *get, size_t get_len);
    bool start_put(Request &r, uint32_t source, uint64_t sreq);
    ucs_status_t transfer(Request &r, GetContext &c, Endpoint *ep, bool put, size_t offset,
                          size_t length, uint64_t address, uct_mem_h memh);
    bool         ask_put(Request &r, Endpoint *ep, size_t front);
    /* The registration of r's mapped region on `iface` (taken: use()d),
     * or null: no region, unmapped since, or none there. */
    uct_mem_h mapped_memh(const Request &r, const Iface *iface);
    /* Lets go of a receive's rmemh: the region's, the cache's, or deregistered */
    void drop_rmemh(Request &r, const Iface *iface);
    void put_done(Request &r, ucs_status_t status);

    Owner &w_; /* the owner */
};

}  // namespace proto
}  // namespace uct_tm

#endif
