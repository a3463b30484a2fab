/*
 * Delivering an eager message into a posted receive, written once for every
 * engine and transport: match (the engine runs tag_consumed_cb), then write
 * only while the receive is still wanted (that callback, or any callback
 * between fragments, may have cancelled it with force: its buffer is the
 * user's again), then complete with the message's full length (the engine
 * reports truncation and stays silent for a receive cancelled with force).
 *
 * An Engine offers: Recv; Recv *match(uct_tag_t); bool wanted(const Recv *);
 * size_t scatter(Recv *, size_t offset, const void *, size_t);
 * void complete(Recv *, uct_tag_t stag, uint64_t imm, size_t length, ucs_status_t,
 *               bool known_wanted).
 */
#ifndef UCT_TM_TAG_EAGER_DELIVERY_H_
#define UCT_TM_TAG_EAGER_DELIVERY_H_

#include <uct/api/uct.h>
#include <ucs/sys/compiler_def.h>

#include <cstddef>
#include <cstdint>

namespace uct_tm {

struct EagerDelivery {
    /* Bytes [offset, offset + length) of an eager message tagged `tag`. The
     * first piece (`first`) matches: *recv is then the receive that took the
     * message, or null if none did (the message is unexpected; nothing else
     * happened). Later pieces go to *recv. The last piece (`last`) completes
     * it with `imm` and offset + length bytes. */
    template <typename Engine>
    [[gnu::always_inline]] static void piece(Engine &engine, typename Engine::Recv **recv,
                                             uct_tag_t tag, uint64_t imm, size_t offset,
                                             const void *data, size_t length, bool first,
                                             bool last) {
        if (first) {
            *recv = engine.match(tag);
            if (*recv == nullptr) {
                return;
            }
        }
        if (ucs_likely(engine.wanted(*recv))) {
            engine.scatter(*recv, offset, data, length);
            if (last) { /* still wanted: writing runs no callback */
                engine.complete(*recv, tag, imm, offset + length, UCS_OK, true);
            }
        } else if (last) {
            engine.complete(*recv, tag, imm, offset + length, UCS_OK, false);
        }
    }

    /* A whole message; false if no posted receive took it (unexpected). */
    template <typename Engine>
    [[gnu::always_inline]] static bool whole(Engine &engine, uct_tag_t tag, uint64_t imm,
                                             const void *data, size_t length) {
        typename Engine::Recv *recv;
        piece(engine, &recv, tag, imm, 0, data, length, true, true);
        return recv != nullptr;
    }
};

}  // namespace uct_tm

#endif
