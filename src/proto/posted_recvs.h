/*
 * PostedRecvs: the receives software holds, tiers 1 to 3 of docs/proto.md
 * "Ordering". Tier 1 is the tag matcher for receives from any source;
 * tier 2 holds directed receives by source (SourceRecvs). An arrival from
 * source s takes the earlier, by posting sequence, of tier 1's match and
 * s's. Tier 0, the transport's tag list, is TagList's. Tier 3 holds the
 * untagged receives (fi_msg), in posting order: untagged messages match
 * nothing else.
 */
#ifndef UCT_TM_PROTO_POSTED_RECVS_H_
#define UCT_TM_PROTO_POSTED_RECVS_H_

#include "request.h"
#include "source_recvs.h"

#include "match/tag_matcher.h"

#include <ucs/sys/compiler_def.h>

#include <cstdint>
#include <deque>
#include <memory>
#include <unordered_map>

namespace uct_tm {
namespace proto {

class PostedRecvs {
  public:
    PostedRecvs(match::TagMatcher &matcher, RequestPool &reqs) : matcher_(matcher), reqs_(reqs) {}

    /* No tier holds a tagged receive: a new one may go to the tag list. */
    bool empty() const { return (matcher_.posted_count() == 0) && (directed_live_ == 0); }
    bool directed_empty() const { return directed_live_ == 0; }

    /* The next posting sequence number (receives of every tier). */
    uint64_t next_seq() { return next_seq_++; }

    /* Holds receive `r` (its seq set): with its source's receives if it
     * filters on the source, else in tier 1. An error (the matcher's) holds
     * nothing; throws std::bad_alloc. Inline: the receive post of a worker
     * without tag list. */
    [[gnu::always_inline]] ucs_status_t hold(Request &r) {
        if (r.has_source) {
            const ucs_status_t status = recvs_of(r.src_filter).hold(r);
            r.tier                    = 2;
            directed_live_ += (status == UCS_OK);
            return status;
        }
        const match::PostResult pr = matcher_.post_expected_only(r.tag, r.mask, &r);
        r.mh                       = pr.handle;
        r.tier                     = 1;
        return pr.status;
    }

    /* The earliest held receive a message (tag, source) matches, taken out
     * of its tier; or null. Inline: every software arrival asks. */
    [[gnu::always_inline]] Request *match(uint64_t tag, uint32_t source) {
        SourceRecvs *d = (directed_live_ != 0) ? held_from(source) : nullptr;
        if (d == nullptr) {
            return (matcher_.posted_count() != 0) ? take_from(matcher_, tag) : nullptr;
        }
        if (matcher_.posted_count() == 0) {
            return take_directed(*d, tag);
        }
        return match_both(*d, tag);
    }

    /* Holds untagged receive `r` last in tier 3; throws std::bad_alloc. */
    void hold_untagged(Request &r) {
        untagged_.push_back(r.self);
        r.tier = 3;
    }

    /* The earliest untagged receive a message from `source` matches: taken
     * out of tier 3, unless it is a multi-receive (which leaves through
     * withdraw() once full); or null. */
    Request *match_untagged(uint32_t source) {
        for (auto it = untagged_.begin(); it != untagged_.end(); ++it) {
            Request *r = reqs_.lookup(*it);
            if ((r == nullptr) || r->done || (r->rstate != RecvState::kPosted)) {
                continue; /* not reached: tier 3 drops its receives as they leave */
            }
            if (!r->has_source || (r->src_filter == source)) {
                if (!r->multi) {
                    take(untagged_, it);
                }
                return r;
            }
        }
        return nullptr;
    }

    /* Takes receive `r` (held, not matched) out of its tier; false if the
     * matcher no longer has it. */
    bool withdraw(Request &r) {
        if (r.tier == 1) {
            return matcher_.cancel(r.mh) == UCS_OK;
        }
        if (r.tier == 3) {
            for (auto it = untagged_.begin(); it != untagged_.end(); ++it) {
                if (*it == r.self) {
                    untagged_.erase(it);
                    return true;
                }
            }
            return false;
        }
        SourceRecvs *d = held_from(r.src_filter);
        if ((d == nullptr) || !d->withdraw(r)) {
            return false;
        }
        --directed_live_;
        return true;
    }

  private:
    /* Mostly the first entry: pop_front costs a few instructions where the
     * general deque::erase costs a hundred. */
    static void take(std::deque<uint64_t> &q, std::deque<uint64_t>::iterator it) {
        if (it == q.begin()) {
            q.pop_front();
        } else {
            q.erase(it);
        }
    }

    static Request *take_from(match::TagMatcher &m, uint64_t tag) {
        const match::ArriveResult ar = m.match_posted(tag);
        return ar.matched ? static_cast<Request *>(ar.recv.ctx) : nullptr;
    }

    Request *take_directed(SourceRecvs &d, uint64_t tag) {
        Request *r = d.take(tag);
        directed_live_ -= (r != nullptr);
        return r;
    }

    /* Receives in tier 1 and from the source: the earlier match. */
    Request *match_both(SourceRecvs &d, uint64_t tag) {
        const auto    *any = static_cast<const Request *>(matcher_.peek_posted(tag));
        const Request *src = d.peek(tag);
        if ((src != nullptr) && ((any == nullptr) || (src->seq < any->seq))) {
            return take_directed(d, tag);
        }
        return (any != nullptr) ? take_from(matcher_, tag) : nullptr;
    }

    /* `source`'s receives if it has any, else null. Mostly the source
     * asked last: one compare. */
    SourceRecvs *held_from(uint32_t source) {
        SourceRecvs *d = (source == last_source_) ? last_recvs_ : find_source(source);
        return ((d != nullptr) && (d->size() != 0)) ? d : nullptr;
    }

    SourceRecvs *find_source(uint32_t source) {
        const auto it = by_source_.find(source);
        if (it == by_source_.end()) {
            return nullptr;
        }
        last_source_ = source;
        last_recvs_  = it->second.get();
        return last_recvs_;
    }

    /* `source`'s receives, made at its first directed receive; throws
     * std::bad_alloc. Kept once made: a peer's receives come and go. */
    SourceRecvs &recvs_of(uint32_t source) {
        if (SourceRecvs *d = (source == last_source_) ? last_recvs_ : find_source(source)) {
            return *d;
        }
        auto         d = std::make_unique<SourceRecvs>();
        SourceRecvs &q = *d;
        by_source_.emplace(source, std::move(d));
        last_source_ = source;
        last_recvs_  = &q;
        return q;
    }

    match::TagMatcher   &matcher_;
    RequestPool         &reqs_;
    std::deque<uint64_t> untagged_; /* tier 3: handles in posting order */
    /* tier 2: the directed receives of each source that had one */
    std::unordered_map<uint32_t, std::unique_ptr<SourceRecvs>> by_source_;
    uint32_t                                                   last_source_   = UINT32_MAX;
    SourceRecvs                                               *last_recvs_    = nullptr;
    size_t                                                     directed_live_ = 0;
    uint64_t             next_seq_   = 0;
};

}  // namespace proto
}  // namespace uct_tm

#endif
