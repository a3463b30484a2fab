/*
 * TagGathers: unexpected tagged messages arriving in several transport
 * fragments (eager_cb with UCT_CB_PARAM_FLAG_MORE), gathered until the last
 * one, which carries imm and so the source. The buffers are reused, and
 * bounded: one per sender (MAX_PEERS of them and one more for the sources
 * without endpoint), each at most a window, since no account can pay before
 * the source is known. A message beyond either bound is dropped whole.
 */
#ifndef UCT_TM_PROTO_TAG_GATHERS_H_
#define UCT_TM_PROTO_TAG_GATHERS_H_

#include <uct/api/uct.h>

#include <cstddef>
#include <cstdint>
#include <memory>
#include <vector>

namespace uct_tm {
namespace proto {

class TagGathers {
  public:
    enum class Step {
        kMore,      /* fragments still to come */
        kComplete,  /* the message is whole: data() / size() */
        kBeyondOpen, /* the last fragment of a message beyond the bound on open gathers */
        kTooLong,    /* the last fragment of a message above the window */
    };

    /* At most `max_open` gathers at once, each at most `window` bytes. */
    void limit(size_t max_open, uint64_t window) {
        max_open_ = max_open;
        window_   = window;
    }

    /* Gathers between their first and last fragment: the message is
     * unexpected already (the transport decided at its first fragment), so
     * no receive may go to the tag list, where a later message could take it. */
    bool open() const { return open_ != 0; }

    /* Adds one fragment of a message (UCT: in order; *context is ours for
     * the message, set at its first fragment). Throws std::bad_alloc. */
    Step add(const void *data, size_t length, unsigned flags, void **context) {
        Gather *g;
        if (flags & UCT_CB_PARAM_FLAG_FIRST) {
            if (free_.empty() && (all_.size() < max_open_)) {
                all_.push_back(std::make_unique<Gather>());
                free_.push_back(all_.back().get());
            }
            if (!free_.empty()) {
                g = free_.back();
                free_.pop_back();
                g->data.clear();
                g->dropped = false;
            } else {
                g          = &refused_;
                g->dropped = true;
            }
            *context = g;
            ++open_;
        } else {
            g = static_cast<Gather *>(*context);
        }
        /* an eager message never exceeds the credit we give a peer */
        if (!g->dropped && (g->data.size() + length <= window_)) {
            const char *p = static_cast<const char *>(data);
            g->data.insert(g->data.end(), p, p + length);
        } else {
            g->dropped = true;
        }
        if (flags & UCT_CB_PARAM_FLAG_MORE) {
            return Step::kMore;
        }
        *context = nullptr;
        --open_;
        if (g == &refused_) {
            return Step::kBeyondOpen;
        }
        free_.push_back(g); /* reused from the next first fragment on; its data stays valid until then */
        last_ = g;
        return g->dropped ? Step::kTooLong : Step::kComplete;
    }

    /* The message add() completed (valid until the next add()). */
    const char *data() const { return last_->data.data(); }
    size_t      size() const { return last_->data.size(); }

  private:
    struct Gather {
        std::vector<char> data;
        bool              dropped = false;
    };

    std::vector<std::unique_ptr<Gather>> all_;
    std::vector<Gather *>                free_;
    /* the context of a message beyond the bound on open gathers: dropped */
    Gather                               refused_;
    Gather                              *last_     = nullptr;
    uint32_t                             open_     = 0;
    size_t                               max_open_ = 0;
    uint64_t                             window_   = 0;
};

}  // namespace proto
}  // namespace uct_tm

#endif
