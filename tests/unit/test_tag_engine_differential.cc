/*
 * TagEngine (UCT tag list over the software matcher) against the linear
 * reference model: seeded random posts (mostly exact tags, sometimes masked,
 * so receives move between the engine's exact-tag queues and the matcher),
 * arrivals, forced and deferred cancels and a small list limit. Every arrival
 * must take the same receive as the model (earliest posted among the
 * matching ones), every post and cancel must return the model's status, and
 * every receive must complete exactly once.
 */
#include "tag/tag_engine.h"
#include "reference_matcher.h"

#include <gtest/gtest.h>

#include <cstdint>
#include <random>
#include <unordered_map>
#include <vector>

namespace {

using uct_tm::TagEngine;
using uct_tm::match_test::ReferenceMatcher;

struct Slot {
    uct_tag_context_t ctx;  /* first: callbacks find the Slot from it */
    uint64_t          model_id    = 0; /* 0: not posted */
    unsigned          consumed    = 0;
    unsigned          completions = 0;
    ucs_status_t      last_status = UCS_OK;
};

void on_consumed(uct_tag_context_t *ctx) { ++reinterpret_cast<Slot *>(ctx)->consumed; }
void on_completed(uct_tag_context_t *ctx, uct_tag_t, uint64_t, size_t, void *, ucs_status_t status) {
    Slot *s        = reinterpret_cast<Slot *>(ctx);
    s->last_status = status;
    ++s->completions;
}
void on_rndv(uct_tag_context_t *, uct_tag_t, const void *, unsigned, ucs_status_t, unsigned) {}

class Differential {
  public:
    Differential(uint64_t seed, size_t list_size)
        : rng_(seed), engine_(limits(list_size)), model_(list_size), slots_(kSlots),
          buffers_(kSlots * 8) {
        for (Slot &s : slots_) {
            s.ctx.tag_consumed_cb = on_consumed;
            s.ctx.completed_cb    = on_completed;
            s.ctx.rndv_cb         = on_rndv;
        }
    }

    /* Runs `ops` random operations; returns the first divergence or "". */
    std::string run(size_t ops) {
        for (op_ = 0; op_ < ops; ++op_) {
            /* Phases of 1000 operations: exact receives only (the engine's
             * exact-tag queues), then mixed with masked ones (which move
             * everything into the matcher until the list drains). */
            masked_phase_       = (op_ / 1000) % 2;
            const unsigned kind = rng_() % 100;
            std::string    err  = (kind < 45) ? post() : (kind < 88) ? arrive() : cancel();
            if (!err.empty()) {
                return err;
            }
            if (rng_() % 16 == 0) {
                engine_.progress(); /* deferred cancels */
            }
        }
        engine_.progress();
        for (const Slot &s : slots_) {
            if (s.consumed > s.completions) {
                return "a consumed receive never completed";
            }
        }
        return "";
    }

    size_t exact_posts = 0, masked_posts = 0, matches = 0;

  private:
    static constexpr size_t kSlots = 256;

    static uct_tm::TagEngineLimits limits(size_t list_size) {
        uct_tm::TagEngineLimits l;
        l.list_size = list_size;
        return l;
    }

    uct_tag_t random_tag() { return (uint64_t{rng_() % 3} << 40) | (rng_() % 4); }

    std::string fail(const char *what) { return std::string(what) + " at op " + std::to_string(op_); }

    std::string post() {
        const size_t i = rng_() % kSlots;
        Slot        &s = slots_[i];
        if (s.model_id != 0) {
            return ""; /* still posted: its buffer would be refused, tested elsewhere */
        }
        const bool      exact = !masked_phase_ || ((rng_() % 8) != 0);
        const uct_tag_t tag   = random_tag();
        const uct_tag_t mask  = exact ? ~uct_tag_t{0} : ((rng_() % 2) ? ~uct_tag_t{3} : (uint64_t{3} << 40));
        uct_iov_t       iov{&buffers_[i * 8], 8, nullptr, 0, 1};
        const ucs_status_t st = engine_.post(tag, mask, &iov, 1, &s.ctx);
        const ReferenceMatcher::PostOutcome m = model_.post_expected_only(tag, mask, &s.ctx);
        if (st != m.status) {
            return fail("post status differs");
        }
        if (st == UCS_OK) {
            s.model_id = m.recv_id;
            exact ? ++exact_posts : ++masked_posts;
        }
        return "";
    }

    std::string arrive() {
        const uct_tag_t                         tag  = random_tag();
        TagEngine::Recv                        *recv = engine_.match(tag);
        const ReferenceMatcher::ArriveOutcome m    = model_.match_posted(tag);
        if ((recv != nullptr) != m.matched) {
            return fail("matched differs");
        }
        if (recv == nullptr) {
            return "";
        }
        if (recv->ctx != m.recv.ctx) {
            return fail("a different receive matched");
        }
        Slot *s     = reinterpret_cast<Slot *>(recv->ctx);
        s->model_id = 0;
        const unsigned before = s->completions;
        engine_.scatter(recv, 0, "12345678", 8);
        engine_.complete(recv, tag, 0, 8, UCS_OK);
        if ((s->completions != before + 1) || (s->last_status != UCS_OK)) {
            return fail("match did not complete once");
        }
        ++matches;
        return "";
    }

    std::string cancel() {
        const size_t i = rng_() % kSlots;
        Slot        &s = slots_[i];
        const bool   force = rng_() % 2;
        const ucs_status_t st = engine_.cancel(&s.ctx, force);
        if (s.model_id == 0) {
            /* Not posted (or already cancelled without force). */
            return ((st == UCS_ERR_NO_ELEM) || (st == UCS_OK)) ? "" : fail("cancel of idle ctx");
        }
        if (st != UCS_OK) {
            return fail("cancel of a posted receive failed");
        }
        if (model_.cancel(s.model_id, nullptr) != UCS_OK) {
            return fail("model cancel failed");
        }
        s.model_id = 0;
        if (!force) {
            /* Completes from the next progress, with UCS_ERR_CANCELED. */
            const unsigned before = s.completions;
            engine_.progress();
            if ((s.completions != before + 1) || (s.last_status != UCS_ERR_CANCELED)) {
                return fail("deferred cancel did not complete once with UCS_ERR_CANCELED");
            }
        }
        return "";
    }

    std::mt19937_64    rng_;
    TagEngine          engine_;
    ReferenceMatcher   model_;
    std::vector<Slot>  slots_;
    std::vector<char>  buffers_;
    size_t             op_ = 0;
    bool               masked_phase_ = false;
};

TEST(TagEngineDifferential, MatchesTheModel) {
    for (uint64_t seed = 1; seed <= 20; ++seed) {
        Differential d(seed, 1u << 20);
        const std::string err = d.run(20000);
        ASSERT_EQ(err, "") << "seed " << seed;
        /* The stream must exercise both places a receive can live. */
        EXPECT_GT(d.exact_posts, 1000u);
        EXPECT_GT(d.masked_posts, 100u);
        EXPECT_GT(d.matches, 1000u);
    }
}

TEST(TagEngineDifferential, ListLimitMatchesTheModel) {
    for (uint64_t seed = 100; seed <= 110; ++seed) {
        Differential d(seed, 7);
        const std::string err = d.run(20000);
        ASSERT_EQ(err, "") << "seed " << seed;
    }
}

}  // namespace
