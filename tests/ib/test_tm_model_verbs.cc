/*
 * The verbs tag list's detection path: what a transport sees on a machine
 * without tag matching (no RDMA device, rxe, a provider without TM SRQs).
 * It decides between the hardware list and the software fallback, so it must
 * answer with a status, never crash. With a TM-capable device present the
 * last test creates the TM SRQ (never exercised here: no such device).
 */
#include "tag/hw_tag_engine.h"
#include "ib/tm_verbs_list.h"

#include <gtest/gtest.h>

#include <cerrno>
#include <cstdio>

namespace uct_tm {
namespace ib {
namespace {

TEST(TmVerbsList, ErrnoOfAProviderWithoutTagMatchingMeansUnsupported) {
    EXPECT_EQ(UCS_ERR_UNSUPPORTED, tm_verbs_status(EOPNOTSUPP));
    EXPECT_EQ(UCS_ERR_UNSUPPORTED, tm_verbs_status(ENOSYS));
    EXPECT_EQ(UCS_ERR_UNSUPPORTED, tm_verbs_status(EPROTONOSUPPORT));
    EXPECT_EQ(UCS_ERR_NO_MEMORY, tm_verbs_status(ENOMEM));
    EXPECT_EQ(UCS_ERR_INVALID_PARAM, tm_verbs_status(EINVAL));
    EXPECT_EQ(UCS_ERR_IO_ERROR, tm_verbs_status(EIO));
    EXPECT_EQ(UCS_OK, tm_verbs_status(0));
}

TEST(TmVerbsList, NullArgumentsAreRefused) {
    TmCaps caps;
    EXPECT_EQ(UCS_ERR_INVALID_PARAM, TmVerbsList::query(nullptr, &caps));
    std::unique_ptr<TmVerbsList> list;
    EXPECT_EQ(UCS_ERR_INVALID_PARAM, TmVerbsList::create(nullptr, nullptr, {}, &list));
    EXPECT_FALSE(list);
}

TEST(TmVerbsList, EveryDeviceEitherHasTagMatchingOrSaysUnsupported) {
    int           num  = 0;
    ibv_device  **devs = ibv_get_device_list(&num);
    if ((devs == nullptr) || (num == 0)) {
        if (devs != nullptr) {
            ibv_free_device_list(devs);
        }
        GTEST_SKIP() << "no RDMA device here (errno " << errno << "): only the detection of its absence runs";
    }
    int checked = 0;
    for (int i = 0; i < num; ++i) {
        SCOPED_TRACE(ibv_get_device_name(devs[i]));
        ibv_context *ctx = ibv_open_device(devs[i]);
        if (ctx == nullptr) {
            continue;
        }
        ++checked;
        ibv_pd                      *pd = ibv_alloc_pd(ctx);
        TmCaps                       caps;
        const ucs_status_t           q  = TmVerbsList::query(ctx, &caps);
        std::unique_ptr<TmVerbsList> list;
        const ucs_status_t           c  = (pd != nullptr) ? TmVerbsList::create(ctx, pd, {}, &list)
                                                          : UCS_ERR_NO_RESOURCE;
        printf("%s: tag matching %s (query: %s, TM SRQ: %s)\n", ibv_get_device_name(devs[i]),
               (q == UCS_OK) ? "present" : "absent", ucs_status_string(q), ucs_status_string(c));
        if (q == UCS_OK) {
            EXPECT_GT(caps.max_num_tags, 0u);
            if (c == UCS_OK) { /* a real TM SRQ: the engine drives it */
                HwTagEngine<TmVerbsList> engine(*list, {}, {});
                EXPECT_GT(engine.list_size(), 0u);
                EXPECT_EQ(0u, engine.progress());
            }
        } else {
            EXPECT_EQ(UCS_ERR_UNSUPPORTED, q); /* e.g. rxe: max_num_tags == 0 */
            EXPECT_EQ(UCS_ERR_UNSUPPORTED, c);
            EXPECT_FALSE(list);
        }
        list.reset();
        if (pd != nullptr) {
            ibv_dealloc_pd(pd);
        }
        ibv_close_device(ctx);
    }
    ibv_free_device_list(devs);
    EXPECT_GT(checked, 0) << "no RDMA device could be opened";
}

}  // namespace
}  // namespace ib
}  // namespace uct_tm
