/*
 * Peers: a worker's endpoints, found by the peer worker's id. Every arrival
 * looks its sender up, so the last one found is cached (one sender at a time
 * is the common case); the rest goes to a hash map.
 */
#ifndef UCT_TM_PROTO_PEERS_H_
#define UCT_TM_PROTO_PEERS_H_

#include "endpoint.h"

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <unordered_map>
#include <vector>

namespace uct_tm {
namespace proto {

class Peers {
  public:
    /* Our endpoint to worker `source`, or null. Inline: every arrival. */
    Endpoint *of(uint32_t source) const {
        if ((source == last_) && (last_ep_ != nullptr)) {
            return last_ep_;
        }
        return find(source);
    }

    /* The cached endpoint if it is `source`'s, else null (the common
     * arrival's test, without the map). */
    Endpoint *cached(uint32_t source) const { return (source == last_) ? last_ep_ : nullptr; }

    /* Endpoints, connected or not (each counts against MAX_PEERS). */
    size_t size() const { return all_.size(); }
    /* Whether an endpoint, connected or not, goes to worker `id` (a walk:
     * endpoint creation only). */
    bool   has(uint32_t id) const {
        for (const auto &e : all_) {
            if (e->peer_id == id) {
                return true;
            }
        }
        return false;
    }

    /* Takes endpoint `ep` (its peer_id set); arrivals find it once it is
     * connected (now, or at listen()). */
    Endpoint *add(std::unique_ptr<Endpoint> ep) {
        Endpoint *e = ep.get();
        if (all_.size() == all_.capacity()) {
            all_.reserve(std::max<size_t>(8, 2 * all_.size())); /* may throw: nothing done yet */
        }
        if (e->connected) {
            listen(e); /* may throw: nothing done yet */
        }
        all_.push_back(std::move(ep)); /* room reserved: cannot throw */
        return e;
    }

    /* Lets arrivals from `ep`'s peer find it (its connection is complete). */
    void listen(Endpoint *ep) { by_id_.emplace(ep->peer_id, ep); }
    /* Undoes listen(). */
    void unlisten(Endpoint *ep) {
        if (last_ep_ == ep) {
            last_ep_ = nullptr;
        }
        auto range = by_id_.equal_range(ep->peer_id);
        for (auto it = range.first; it != range.second; ++it) {
            if (it->second == ep) {
                by_id_.erase(it);
                break;
            }
        }
    }

    /* Calls f(Endpoint *) for each endpoint (keepalive, failures: not per message). */
    template <typename F> void for_each(F &&f) const {
        for (const auto &e : all_) {
            f(e.get());
        }
    }

    /* Whether `ep` is one of ours (a walk: endpoint destruction only). */
    bool owns(const Endpoint *ep) const {
        for (const auto &e : all_) {
            if (e.get() == ep) {
                return true;
            }
        }
        return false;
    }

    /* Forgets `ep` and destroys it (its UCT endpoint included). */
    void remove(Endpoint *ep) {
        unlisten(ep);
        for (auto it = all_.begin(); it != all_.end(); ++it) {
            if (it->get() == ep) {
                uct_ep_destroy(ep->uct_ep);
                all_.erase(it);
                break;
            }
        }
    }

    /* Destroys every UCT endpoint (the worker's destruction). */
    void clear() {
        for (auto &ep : all_) {
            if (ep->uct_ep != nullptr) {
                uct_ep_destroy(ep->uct_ep);
            }
        }
        all_.clear();
        by_id_.clear();
        last_ep_ = nullptr;
    }

  private:
    /* Out of line: the cache hit is what of() inlines. */
    [[gnu::noinline]] Endpoint *find(uint32_t source) const {
        auto it = by_id_.find(source);
        if (it == by_id_.end()) {
            return nullptr;
        }
        last_    = source;
        last_ep_ = it->second;
        return it->second;
    }

    std::vector<std::unique_ptr<Endpoint>>    all_;
    std::unordered_map<uint32_t, Endpoint *>  by_id_;
    mutable uint32_t                          last_    = 0; /* of()'s cache */
    mutable Endpoint                         *last_ep_ = nullptr;
};

}  // namespace proto
}  // namespace uct_tm

#endif
