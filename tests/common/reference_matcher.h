/*
 * Reference model of uct_tm::match::TagMatcher for differential testing.
 *
 * Deliberately naive: two plain vectors (posted receives in posting order,
 * unexpected messages in arrival order) and linear scans for everything. It
 * follows the contract in src/match/tag_matcher.h:
 *
 *  - a message tagged t matches a receive (r, m) iff (t & m) == (r & m);
 *  - arrive() takes the earliest-posted matching receive, post() / peek() /
 *    claim() take the earliest-arrived matching unexpected message;
 *  - max_posted / max_unexpected bound the queue depths (UCS_ERR_EXCEEDS_LIMIT,
 *    nothing changes on error);
 *  - cancel()/take() by entry id: UCS_ERR_INVALID_PARAM for the null id or an
 *    id never issued, UCS_ERR_NO_ELEM for an entry that already left.
 *
 * Entries are identified by ids (never reused, 0 = null); the op-stream
 * interpreter maps real TagMatcher handles to these ids.
 *
 * Two corners are selectable (Semantics); the defaults are what the header
 * specifies and what the op-stream interpreter enforces:
 *  - post() at max_posted when an unexpected message matches: the match wins
 *    (a receive that takes a message is never refused); same for arrive() at
 *    max_unexpected;
 *  - cancel_matching() compares a receive's tag as posted (bits outside the
 *    receive's own mask included), not masked by the receive's mask.
 *
 * `faults` injects known bugs; used only to prove the differential checker is
 * able to notice a wrong answer.
 */
#ifndef UCT_TM_TESTS_COMMON_REFERENCE_MATCHER_H_
#define UCT_TM_TESTS_COMMON_REFERENCE_MATCHER_H_

#include <match/tag_matcher.h>

#include <ucs/type/status.h>

#include <cstddef>
#include <cstdint>
#include <vector>

namespace uct_tm {
namespace match_test {

using match::Tag;

/* Deliberate model bugs (bit flags), for checker self-tests only. */
enum ModelFault : unsigned {
    kFaultNone                    = 0,
    kFaultPostTakesLatest         = 1u << 0, /* post()/peek()/claim(): latest-arrived match */
    kFaultArriveTakesLatest       = 1u << 1, /* arrive(): latest-posted match */
    kFaultIgnoreMask              = 1u << 2, /* match = full tag equality */
    kFaultRecvTagUnmasked         = 1u << 3, /* (t & m) == r: receive bits outside m not ignored */
    kFaultCancelMatchingReversed  = 1u << 4, /* cancel_matching() reports in reverse order */
    kFaultPostedLimitOffByOne     = 1u << 5, /* allows max_posted + 1 */
    kFaultUnexpectedLimitOffByOne = 1u << 6, /* allows max_unexpected + 1 */
    kFaultDrainDropsLastMsg       = 1u << 7, /* drain() forgets to report the last message */
    kFaultStaleIsInvalid          = 1u << 8, /* stale id -> INVALID_PARAM instead of NO_ELEM */
    kFaultPeekRemoves             = 1u << 9, /* peek() behaves like claim() */
    kFaultMatchPostedQueues       = 1u << 10, /* match_posted() queues like arrive() */
};

class ReferenceMatcher {
  public:
    static constexpr uint64_t kNullId        = 0;
    static constexpr uint64_t kNeverIssuedId = UINT64_MAX;

    struct Recv {
        uint64_t id   = 0;
        Tag      tag  = 0; /* as posted (bits outside mask kept) */
        Tag      mask = 0;
        void    *ctx  = nullptr;
    };

    struct Msg {
        uint64_t id     = 0;
        Tag      tag    = 0;
        uint64_t cookie = 0;
    };

    struct PostOutcome {
        ucs_status_t status  = UCS_OK;
        bool         matched = false;
        uint64_t     recv_id = 0; /* queued receive (when !matched) */
        Msg          msg;         /* consumed message (when matched) */
    };

    struct ArriveOutcome {
        ucs_status_t status  = UCS_OK;
        bool         matched = false;
        Recv         recv;       /* matched receive (when matched) */
        uint64_t     msg_id = 0; /* queued message (when !matched and queued) */
    };

    enum class LimitOrder { kMatchFirst, kLimitFirst };
    enum class CancelTagView { kRaw, kMasked };

    struct Semantics {
        LimitOrder    post_limit   = LimitOrder::kMatchFirst;
        LimitOrder    arrive_limit = LimitOrder::kMatchFirst;
        CancelTagView cancel_view  = CancelTagView::kRaw;
    };

    explicit ReferenceMatcher(size_t max_posted = SIZE_MAX, size_t max_unexpected = SIZE_MAX,
                              unsigned faults = kFaultNone)
        : max_posted_(max_posted), max_unexpected_(max_unexpected), faults_(faults) {}

    Semantics       &semantics() { return sem_; }
    const Semantics &semantics() const { return sem_; }

    bool matches(Tag msg_tag, Tag recv_tag, Tag mask) const {
        if (faults_ & kFaultIgnoreMask) {
            return msg_tag == recv_tag;
        }
        if (faults_ & kFaultRecvTagUnmasked) {
            return (msg_tag & mask) == recv_tag;
        }
        return (msg_tag & mask) == (recv_tag & mask);
    }

    bool posted_full() const { return posted_.size() >= limit(max_posted_, kFaultPostedLimitOffByOne); }
    bool unexpected_full() const {
        return unexpected_.size() >= limit(max_unexpected_, kFaultUnexpectedLimitOffByOne);
    }

    /* Dry-run helpers (no state change). */
    bool has_unexpected_match(Tag tag, Tag mask) const { return find_unexpected(tag, mask) >= 0; }
    bool has_posted_match(Tag msg_tag) const { return find_posted(msg_tag) >= 0; }

    bool cancel_matches(const Recv &r, Tag tag, Tag mask, CancelTagView view) const {
        Tag rt = (view == CancelTagView::kRaw) ? r.tag : (r.tag & r.mask);
        return (rt & mask) == (tag & mask);
    }

    std::vector<uint64_t> matching_posted_ids(Tag tag, Tag mask, CancelTagView view) const {
        std::vector<uint64_t> ids;
        for (const Recv &r : posted_) {
            if (cancel_matches(r, tag, mask, view)) {
                ids.push_back(r.id);
            }
        }
        return ids;
    }

    PostOutcome post(Tag tag, Tag mask, void *ctx) {
        PostOutcome out;
        long        i    = find_unexpected(tag, mask);
        bool        full = posted_full();
        if (full && (i < 0 || sem_.post_limit == LimitOrder::kLimitFirst)) {
            out.status = UCS_ERR_EXCEEDS_LIMIT;
            return out;
        }
        if (i >= 0) {
            out.matched = true;
            out.msg     = unexpected_[i];
            unexpected_.erase(unexpected_.begin() + i);
            return out;
        }
        out.recv_id = queue_recv(tag, mask, ctx);
        return out;
    }

    PostOutcome post_expected_only(Tag tag, Tag mask, void *ctx) {
        PostOutcome out;
        if (posted_full()) {
            out.status = UCS_ERR_EXCEEDS_LIMIT;
            return out;
        }
        out.recv_id = queue_recv(tag, mask, ctx);
        return out;
    }

    ArriveOutcome arrive(Tag tag, uint64_t cookie) {
        ArriveOutcome out;
        long          i    = find_posted(tag);
        bool          full = unexpected_full();
        if (full && (i < 0 || sem_.arrive_limit == LimitOrder::kLimitFirst)) {
            out.status = UCS_ERR_EXCEEDS_LIMIT;
            return out;
        }
        if (i >= 0) {
            out.matched = true;
            out.recv    = posted_[i];
            posted_.erase(posted_.begin() + i);
            return out;
        }
        Msg m;
        m.id     = ++last_id_;
        m.tag    = tag;
        m.cookie = cookie;
        unexpected_.push_back(m);
        out.msg_id = m.id;
        return out;
    }

    ArriveOutcome match_posted(Tag tag) {
        if (faults_ & kFaultMatchPostedQueues) {
            return arrive(tag, 0);
        }
        ArriveOutcome out;
        long          i = find_posted(tag);
        if (i >= 0) {
            out.matched = true;
            out.recv    = posted_[i];
            posted_.erase(posted_.begin() + i);
        }
        return out;
    }

    ucs_status_t cancel(uint64_t id, void **ctx) {
        ucs_status_t st = check_id(id);
        if (st != UCS_OK) {
            return st;
        }
        for (size_t i = 0; i < posted_.size(); ++i) {
            if (posted_[i].id == id) {
                if (ctx != nullptr) {
                    *ctx = posted_[i].ctx;
                }
                posted_.erase(posted_.begin() + i);
                return UCS_OK;
            }
        }
        return stale_status();
    }

    ucs_status_t peek(Tag tag, Tag mask, Msg *msg) const {
        if (msg == nullptr) {
            return UCS_ERR_INVALID_PARAM;
        }
        long i = find_unexpected(tag, mask);
        if (i < 0) {
            return UCS_ERR_NO_ELEM;
        }
        *msg = unexpected_[i];
        return UCS_OK;
    }

    /* Non-const peek so that kFaultPeekRemoves can act. */
    ucs_status_t peek(Tag tag, Tag mask, Msg *msg) {
        if (faults_ & kFaultPeekRemoves) {
            return claim(tag, mask, msg);
        }
        return static_cast<const ReferenceMatcher *>(this)->peek(tag, mask, msg);
    }

    ucs_status_t claim(Tag tag, Tag mask, Msg *msg) {
        if (msg == nullptr) {
            return UCS_ERR_INVALID_PARAM;
        }
        long i = find_unexpected(tag, mask);
        if (i < 0) {
            return UCS_ERR_NO_ELEM;
        }
        *msg = unexpected_[i];
        unexpected_.erase(unexpected_.begin() + i);
        return UCS_OK;
    }

    ucs_status_t take(uint64_t id, Msg *msg) {
        ucs_status_t st = check_id(id);
        if (st != UCS_OK) {
            return st;
        }
        for (size_t i = 0; i < unexpected_.size(); ++i) {
            if (unexpected_[i].id == id) {
                if (msg != nullptr) {
                    *msg = unexpected_[i];
                }
                unexpected_.erase(unexpected_.begin() + i);
                return UCS_OK;
            }
        }
        return stale_status();
    }

    /* Removes and returns, in posting order, the receives cancel_matching() cancels. */
    std::vector<Recv> cancel_matching(Tag tag, Tag mask) {
        std::vector<Recv> out, keep;
        for (const Recv &r : posted_) {
            (cancel_matches(r, tag, mask, sem_.cancel_view) ? out : keep).push_back(r);
        }
        posted_.swap(keep);
        if (faults_ & kFaultCancelMatchingReversed) {
            std::vector<Recv> rev(out.rbegin(), out.rend());
            out.swap(rev);
        }
        return out;
    }

    void drain(std::vector<Recv> *recvs, std::vector<Msg> *msgs) {
        recvs->clear();
        msgs->clear();
        recvs->swap(posted_);
        msgs->swap(unexpected_);
        if ((faults_ & kFaultDrainDropsLastMsg) && !msgs->empty()) {
            msgs->pop_back();
        }
    }

    size_t posted_count() const { return posted_.size(); }
    size_t unexpected_count() const { return unexpected_.size(); }

    const std::vector<Recv> &posted() const { return posted_; }
    const std::vector<Msg>  &unexpected() const { return unexpected_; }

    bool is_posted(uint64_t id) const {
        for (const Recv &r : posted_) {
            if (r.id == id) {
                return true;
            }
        }
        return false;
    }

    bool is_unexpected(uint64_t id) const {
        for (const Msg &m : unexpected_) {
            if (m.id == id) {
                return true;
            }
        }
        return false;
    }

  private:
    size_t limit(size_t max, unsigned fault) const {
        return ((faults_ & fault) && max != SIZE_MAX) ? max + 1 : max;
    }

    ucs_status_t check_id(uint64_t id) const {
        if (id == kNullId || id == kNeverIssuedId || id > last_id_) {
            return UCS_ERR_INVALID_PARAM;
        }
        return UCS_OK;
    }

    ucs_status_t stale_status() const {
        return (faults_ & kFaultStaleIsInvalid) ? UCS_ERR_INVALID_PARAM : UCS_ERR_NO_ELEM;
    }

    uint64_t queue_recv(Tag tag, Tag mask, void *ctx) {
        Recv r;
        r.id   = ++last_id_;
        r.tag  = tag;
        r.mask = mask;
        r.ctx  = ctx;
        posted_.push_back(r);
        return r.id;
    }

    /* Index of the earliest-arrived message matching (tag, mask), or -1. */
    long find_unexpected(Tag tag, Tag mask) const {
        long n = static_cast<long>(unexpected_.size());
        if (faults_ & kFaultPostTakesLatest) {
            for (long i = n - 1; i >= 0; --i) {
                if (matches(unexpected_[i].tag, tag, mask)) {
                    return i;
                }
            }
            return -1;
        }
        for (long i = 0; i < n; ++i) {
            if (matches(unexpected_[i].tag, tag, mask)) {
                return i;
            }
        }
        return -1;
    }

    /* Index of the earliest-posted receive matched by a message tagged msg_tag, or -1. */
    long find_posted(Tag msg_tag) const {
        long n = static_cast<long>(posted_.size());
        if (faults_ & kFaultArriveTakesLatest) {
            for (long i = n - 1; i >= 0; --i) {
                if (matches(msg_tag, posted_[i].tag, posted_[i].mask)) {
                    return i;
                }
            }
            return -1;
        }
        for (long i = 0; i < n; ++i) {
            if (matches(msg_tag, posted_[i].tag, posted_[i].mask)) {
                return i;
            }
        }
        return -1;
    }

    size_t            max_posted_;
    size_t            max_unexpected_;
    unsigned          faults_;
    Semantics         sem_;
    uint64_t          last_id_ = 0;
    std::vector<Recv> posted_;     /* posting order */
    std::vector<Msg>  unexpected_; /* arrival order */
};

}  // namespace match_test
}  // namespace uct_tm

#endif
