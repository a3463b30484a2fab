/*
 * How both tag engines find a posted receive from its uct_tag_context_t:
 * the engine writes {itself, entry index, entry generation} into the
 * context's priv area when it posts, and a cancel reads it back. A context
 * the engine never posted, posted on another iface, or already finished
 * (generation moved on, entry reused for another context) finds nothing.
 */
#ifndef UCT_TM_TAG_CONTEXT_HANDLE_H_
#define UCT_TM_TAG_CONTEXT_HANDLE_H_

#include <uct/api/uct.h>

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <type_traits>

namespace uct_tm {

struct ContextHandle {
    const void *owner;
    uint32_t    index;
    uint32_t    gen;

    /* Binds `ctx` to entry `index` (generation `gen`) of engine `owner`. */
    static void bind(uct_tag_context_t *ctx, const void *owner, uint32_t index, uint32_t gen) {
        static_assert(sizeof(ContextHandle) <= UCT_TAG_PRIV_LEN, "tag context private area");
        const ContextHandle handle{owner, index, gen};
        memcpy(ctx->priv, &handle, sizeof(handle));
    }

    /* The entry `ctx` is bound to among `count` entries of engine `owner`
     * (at(i) gives entry i, which has `ctx` and `gen` members), if it is
     * still bound to `ctx`; else null. */
    template <typename At>
    static auto *find(const uct_tag_context_t *ctx, const void *owner, size_t count, const At &at) {
        using Entry = std::remove_reference_t<decltype(at(0u))>;
        if (ctx == nullptr) {
            return static_cast<Entry *>(nullptr);
        }
        ContextHandle handle;
        memcpy(&handle, ctx->priv, sizeof(handle));
        if ((handle.owner != owner) || (handle.index >= count)) {
            return static_cast<Entry *>(nullptr);
        }
        Entry &entry = at(handle.index);
        if ((entry.gen != handle.gen) || (entry.ctx != ctx)) {
            return static_cast<Entry *>(nullptr);
        }
        return &entry;
    }
};

}  // namespace uct_tm

#endif
