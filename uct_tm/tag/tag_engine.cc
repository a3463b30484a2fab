#include "tag_engine.h"

#include "common/alloc_status.h"

#include <ucs/debug/log_def.h>

#include <algorithm>
#include <cstring>
#include <new>

namespace uct_tm {

namespace {

match::MatcherOptions matcher_options() {
    match::MatcherOptions options;
    options.max_unexpected = 0; /* UCT never queues unexpected messages here */
    return options;
}

}  // namespace

TagEngine::TagEngine(const TagEngineLimits &limits) : limits_(limits), matcher_(matcher_options()) {
    limits_.max_iov = std::min(std::max<size_t>(limits_.max_iov, 1), kMaxRecvIov);
}

TagEngine::~TagEngine() {
    /* Receives still posted at close are dropped without callbacks, as UCX
     * transports do when the iface is destroyed. */
    if (posted_ + in_flight_ > 0) {
        ucs_debug("tm: closing tag list with %zu posted and %zu in-flight receives", posted_,
                  in_flight_);
    }
}

ucs_status_t TagEngine::post_general(uct_tag_t tag, uct_tag_t mask, const uct_iov_t *iov, size_t iovcnt,
                             uct_tag_context_t *ctx) {
    if (ctx == nullptr) {
        return UCS_ERR_INVALID_PARAM;
    }
    size_t             capacity;
    const ucs_status_t status =
        check_iov(iov, iovcnt, IovLimits{limits_.max_iov, SIZE_MAX}, &capacity);
    if (status != UCS_OK) {
        return status;
    }
    if (posted_ >= limits_.list_size) {
        ++counters_.refused;
        return UCS_ERR_EXCEEDS_LIMIT;
    }
    return admit(tag, mask, ctx, [&](Recv &recv) {
        recv.capacity = capacity;
        recv.iovcnt   = static_cast<uint32_t>(iovcnt);
        for (size_t i = 0; i < iovcnt; ++i) {
            recv.iov[i].iov_base = iov[i].buffer;
            recv.iov[i].iov_len  = iov[i].length;
        }
    });
}

ucs_status_t TagEngine::enqueue_in_matcher(Recv *recv, uct_tag_t tag, uct_tag_t mask) {
    if ((exact_posted_ > 0) && (mask != ~uct_tag_t{0})) {
        const ucs_status_t status = spill_exact();
        if (status != UCS_OK) {
            return status;
        }
    }
    const match::PostResult result = matcher_.post_expected_only(tag, mask, recv);
    if (result.status != UCS_OK) {
        return result.status;
    }
    recv->exact  = false;
    recv->handle = result.handle;
    return UCS_OK;
}

ucs_status_t TagEngine::spill_exact() {
    /* Each tag's queue goes in oldest first. The order across tags does not
     * matter: an exact receive only competes with receives of its own tag
     * and with masked ones, and every masked receive is posted after this. */
    std::vector<Recv *> order;
    if (alloc_status([&] { order.reserve(exact_posted_); }) != UCS_OK) {
        return UCS_ERR_NO_MEMORY;
    }
    exact_.for_each([&](const ExactQueues::Queue &q) {
        for (Recv *recv = q.head; recv != nullptr; recv = recv->next) {
            order.push_back(recv);
        }
    });
    for (size_t i = 0; i < order.size(); ++i) {
        const match::PostResult result = matcher_.post_expected_only(order[i]->tag, ~uct_tag_t{0},
                                                                     order[i]);
        if (result.status != UCS_OK) {
            /* Undo: the receives stay where they were, in exact_. */
            while (i-- > 0) {
                matcher_.cancel(order[i]->handle);
            }
            return result.status;
        }
        order[i]->handle = result.handle;
    }
    for (Recv *recv : order) {
        recv->exact = false;
    }
    exact_.clear();
    exact_posted_ = 0;
    return UCS_OK;
}

ucs_status_t TagEngine::cancel(uct_tag_context_t *ctx, int force) {
    Recv *recv = lookup(ctx);
    if (recv == nullptr) {
        return UCS_ERR_NO_ELEM;
    }
    switch (recv->state) {
    case kPosted:
        if (recv->exact) {
            unlink_exact(exact_.find(recv->tag), recv);
        } else {
            matcher_.cancel(recv->handle);
        }
        --posted_;
        ++counters_.cancels;
        if (force) {
            release(recv);
            return UCS_OK;
        }
        if (alloc_status([&] { cancelled_.push_back(Pending{recv, recv->gen}); }) != UCS_OK) {
            /* Cannot defer: report now rather than lose the completion. */
            uct_tag_context_t *c        = recv->ctx;
            const uct_tag_t    tag      = recv->tag;
            const size_t       capacity = recv->capacity;
            release(recv);
            c->completed_cb(c, tag, 0, capacity, nullptr, UCS_ERR_CANCELED);
            return UCS_OK;
        }
        recv->state = kCancelled;
        return UCS_OK;
    case kMatched:
        if (force) {
            /* The transport finishes the transfer but must not touch the
             * buffers or the context again: both are the user's now. */
            if (orphan_hook_ != nullptr) {
                orphan_hook_(orphan_hook_arg_, recv);
            }
            recv->state = kOrphaned;
            recv->ctx   = nullptr;
        }
        return UCS_OK; /* not forced: completes normally */
    case kCancelled:
        if (force) {
            release(recv); /* its pending entry is skipped by the generation check */
        }
        return UCS_OK;
    default:
        return UCS_ERR_NO_ELEM;
    }
}

size_t TagEngine::scatter_iov(Recv *recv, size_t offset, const void *data, size_t length) const {
    const char *src     = static_cast<const char *>(data);
    size_t      written = 0;
    size_t      base    = 0;
    for (uint32_t i = 0; (i < recv->iovcnt) && (written < length); ++i) {
        const size_t len = recv->iov[i].iov_len;
        if (offset + written < base + len) {
            const size_t at = offset + written - base;
            const size_t n  = std::min(len - at, length - written);
            memcpy(static_cast<char *>(recv->iov[i].iov_base) + at, src + written, n);
            written += n;
        }
        base += len;
    }
    return written;
}

size_t TagEngine::iovecs(const Recv *recv, size_t length, struct iovec *out) const {
    size_t n = 0;
    for (uint32_t i = 0; (i < recv->iovcnt) && (length > 0); ++i) {
        if (recv->iov[i].iov_len == 0) {
            continue;
        }
        out[n].iov_base = recv->iov[i].iov_base;
        out[n].iov_len  = std::min(recv->iov[i].iov_len, length);
        length -= out[n].iov_len;
        ++n;
    }
    return n;
}

void TagEngine::complete_rndv(Recv *recv, uct_tag_t stag, const void *header,
                              unsigned header_length) {
    ucs_assertv((recv->state == kMatched) || (recv->state == kOrphaned),
                "completed a receive in state %d", recv->state);
    uct_tag_context_t *ctx    = recv->ctx;
    const bool         notify = (recv->state == kMatched);
    release_in_flight(recv);
    if (notify) {
        ++rndv_callbacks_;
        ctx->rndv_cb(ctx, stag, header, header_length, UCS_OK, UCT_TAG_RECV_CB_INLINE_DATA);
        --rndv_callbacks_;
    }
}

unsigned TagEngine::deliver_cancelled() {
    delivering_.swap(cancelled_);
    unsigned count = 0;
    for (size_t i = 0; i < delivering_.size(); ++i) {
        Recv *recv = delivering_[i].recv;
        if ((recv->gen != delivering_[i].gen) || (recv->state != kCancelled)) {
            continue; /* force-cancelled meanwhile */
        }
        /* The posted tag and buffer length, as UCX's tag-offload transports
         * report a cancelled receive. */
        uct_tag_context_t *ctx      = recv->ctx;
        const uct_tag_t    tag      = recv->tag;
        const size_t       capacity = recv->capacity;
        release(recv);
        ctx->completed_cb(ctx, tag, 0, capacity, nullptr, UCS_ERR_CANCELED);
        ++count;
    }
    delivering_.clear();
    return count;
}

}  // namespace uct_tm
