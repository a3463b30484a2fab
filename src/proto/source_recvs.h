/*
 * SourceRecvs: one source's directed receives (tier 2 of docs/proto.md
 * "Ordering"), in posting order. The first few sit in a short ring that
 * an arrival scans (MPI keeps one or two receives per rank: no hashing on
 * that path); beyond it they go to a tag matcher, made on first need, so a
 * deep queue from one rank still matches in O(1). The ring takes receives
 * only while the matcher holds none, so each of its receives is older than
 * all of the matcher's: its first match is the earliest.
 */
#ifndef UCT_TM_PROTO_SOURCE_RECVS_H_
#define UCT_TM_PROTO_SOURCE_RECVS_H_

#include "request.h"

#include "match/tag_matcher.h"

#include <cstdint>
#include <memory>

namespace uct_tm {
namespace proto {

class SourceRecvs {
  public:
    size_t size() const { return n_ + spilled(); }

    /* Holds receive `r` (its tag, mask and seq set), last. An error (the
     * matcher's) holds nothing; throws std::bad_alloc. */
    [[gnu::always_inline]] ucs_status_t hold(Request &r) {
        if ((n_ < kShort) && (spilled() == 0)) {
            short_[(head_ + n_++) % kShort] = Entry{r.tag, r.mask, &r};
            r.mh                            = match::RecvHandle();
            return UCS_OK;
        }
        return hold_spilled(r);
    }

    /* The earliest receive a message tagged `tag` matches, taken out; or
     * null. Inline when it is the oldest (MPI's usual case). */
    [[gnu::always_inline]] Request *take(uint64_t tag) {
        if ((n_ != 0) && matches(tag, 0)) {
            Request *r = short_[head_].r;
            head_      = (head_ + 1) % kShort;
            --n_;
            return r;
        }
        return take_rest(tag);
    }

    /* The earliest receive a message tagged `tag` matches, left held; or null. */
    const Request *peek(uint64_t tag) {
        const unsigned i = first_match(tag);
        if (i < n_) {
            return at(i).r;
        }
        return (spilled() != 0) ? static_cast<const Request *>(spill_->peek_posted(tag)) : nullptr;
    }

    /* Takes held receive `r` out; false if it is not held here. */
    bool withdraw(Request &r) {
        if (!r.mh.is_null()) {
            return (spill_ != nullptr) && (spill_->cancel(r.mh) == UCS_OK);
        }
        for (unsigned i = 0; i < n_; ++i) {
            if (at(i).r == &r) {
                erase(i);
                return true;
            }
        }
        return false;
    }

  private:
    static constexpr unsigned kShort = 8;
    static_assert((kShort & (kShort - 1)) == 0, "the ring's index wraps by masking");

    struct Entry {
        uint64_t tag;
        uint64_t mask;
        Request *r;
    };

    size_t spilled() const { return (spill_ != nullptr) ? spill_->posted_count() : 0; }
    Entry &at(unsigned i) { return short_[(head_ + i) % kShort]; }
    bool   matches(uint64_t tag, unsigned i) {
          const Entry &e = at(i);
          return match::tag_matches(tag, e.tag, e.mask);
    }

    unsigned first_match(uint64_t tag) {
        unsigned i = 0;
        while ((i < n_) && !matches(tag, i)) {
            ++i;
        }
        return i;
    }

    void erase(unsigned i) {
        for (--n_; i < n_; ++i) {
            at(i) = at(i + 1);
        }
    }

    ucs_status_t hold_spilled(Request &r) {
        if (spill_ == nullptr) {
            spill_ = std::make_unique<match::TagMatcher>();
        }
        const match::PostResult pr = spill_->post_expected_only(r.tag, r.mask, &r);
        r.mh                       = pr.handle;
        return pr.status;
    }

    Request *take_rest(uint64_t tag) {
        const unsigned i = first_match(tag);
        if (i < n_) {
            Request *r = at(i).r;
            erase(i);
            return r;
        }
        if (spilled() == 0) {
            return nullptr;
        }
        const match::ArriveResult ar = spill_->match_posted(tag);
        return ar.matched ? static_cast<Request *>(ar.recv.ctx) : nullptr;
    }

    Entry                              short_[kShort];
    unsigned                           head_ = 0; /* the oldest's place in short_ */
    unsigned                           n_    = 0;
    std::unique_ptr<match::TagMatcher> spill_; /* the rest, all newer than short_'s */
};

}  // namespace proto
}  // namespace uct_tm

#endif
