/*
 * PostedRecvs: the receives software holds, tiers 1 and 2 of docs/proto.md
 * "Ordering". Tier 1 is the tag matcher (O(1) exact, per-mask indexes);
 * tier 2 is a posting-ordered list for source-filtered receives (the
 * matcher has no source) and every receive posted after one, so that tier
 * 1 only ever holds receives older than all of tier 2. Tier 0, the
 * transport's tag list, is TagList's. Tier 3 holds the untagged receives
 * (fi_msg), in posting order: untagged messages match nothing else.
 */
#ifndef UCT_TM_PROTO_POSTED_RECVS_H_
#define UCT_TM_PROTO_POSTED_RECVS_H_

#include "request.h"

#include "match/tag_matcher.h"

#include <ucs/sys/compiler_def.h>

#include <cstdint>
#include <deque>

namespace uct_tm {
namespace proto {

class PostedRecvs {
  public:
    PostedRecvs(match::TagMatcher &matcher, RequestPool &reqs) : matcher_(matcher), reqs_(reqs) {}

    /* Neither tier holds a receive: a new one may go to the tag list. */
    bool empty() const { return (matcher_.posted_count() == 0) && tier2_empty(); }
    bool tier2_empty() const { return tier2_live_ == 0; }

    /* The next posting sequence number (receives of every tier). */
    uint64_t next_seq() { return next_seq_++; }

    /* Holds receive `r`: in tier 2 if it filters on its source or tier 2
     * is in use, else in tier 1. An error (the matcher's) holds nothing.
     * Inline: the receive post of a worker without tag list. */
    [[gnu::always_inline]] ucs_status_t hold(Request &r) {
        if (r.has_source || (tier2_live_ != 0)) {
            tier2_.push_back(r.self);
            ++tier2_live_;
            r.tier = 2;
            return UCS_OK;
        }
        const match::PostResult pr = matcher_.post_expected_only(r.tag, r.mask, &r);
        if (pr.status != UCS_OK) {
            return pr.status;
        }
        r.mh   = pr.handle;
        r.tier = 1;
        return UCS_OK;
    }

    /* The earliest held receive a message (tag, source) matches, taken out
     * of its tier; or null. Inline: every software arrival asks. */
    [[gnu::always_inline]] Request *match(uint64_t tag, uint32_t source) {
        if (matcher_.posted_count() != 0) {
            const match::ArriveResult ar = matcher_.match_posted(tag);
            if (ar.matched) {
                return static_cast<Request *>(ar.recv.ctx);
            }
        }
        return (tier2_live_ != 0) ? match_tier2(tag, source) : nullptr;
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
        forget_tier2(); /* its entry is skipped from now on (the request is done) */
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

    /* The earliest tier-2 receive that matches, taken out; or null. */
    Request *match_tier2(uint64_t tag, uint32_t source) {
        for (auto it = tier2_.begin(); it != tier2_.end(); ++it) {
            Request *r = reqs_.lookup(*it);
            if ((r == nullptr) || r->done || (r->rstate != RecvState::kPosted)) {
                continue;
            }
            if (match::tag_matches(tag, r->tag, r->mask) &&
                (!r->has_source || (r->src_filter == source))) {
                take(tier2_, it);
                forget_tier2();
                return r;
            }
        }
        return nullptr;
    }

    void forget_tier2() {
        --tier2_live_;
        if (tier2_live_ == 0) {
            tier2_.clear();
        }
    }

    match::TagMatcher   &matcher_;
    RequestPool         &reqs_;
    std::deque<uint64_t> tier2_; /* handles in posting order; done ones skipped */
    std::deque<uint64_t> untagged_; /* tier 3: handles in posting order */
    size_t               tier2_live_ = 0;
    uint64_t             next_seq_   = 0;
};

}  // namespace proto
}  // namespace uct_tm

#endif
