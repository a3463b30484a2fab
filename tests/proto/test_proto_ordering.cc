/*
 * Posting order against a reference model, adversarially: random exact,
 * masked, wildcard and source-filtered receives over a small tag space,
 * posted in rounds between random eager and rendezvous messages, with the
 * transport's tag list (tm_sm) held to 3 entries so that it fills in the
 * middle of every round and empties again between rounds. Every message must
 * land in the receive the model (one list, earliest posted match; earliest
 * arrived unexpected message for a new receive) gives it, with its payload.
 * Run with handle receives, and with half of the receives in the caller's
 * memory without callback (over tm_sm those the tag list takes are
 * DirectRecvs; the full list refuses some of them), and with a random half of
 * the receives and of the sends vectored (uct_tm_proto_recvv / _sendv: the
 * buffer cut into uneven elements, some empty; software holds those
 * receives, so they interleave with the tag list's).
 */
#include "proto_fixture.h"

#include <cstdlib>
#include <cstring>
#include <memory>
#include <random>

namespace uct_tm_test {
namespace {

struct ModelRecv {
    uint64_t tag, mask;
    int      got = -1; /* message index */
};

/* A receive by handle or in the caller's memory. */
struct Recv {
    struct Memory {
        alignas(UCT_TM_PROTO_REQUEST_ALIGN) unsigned char bytes[UCT_TM_PROTO_REQUEST_SIZE];
    };
    uct_tm_proto_request_t  handle = 0;
    std::unique_ptr<Memory> user;
    bool                    pending = false;
};

class ProtoOrdering : public ProtoTest {
  protected:
    /* Every tag list held to 3 entries: tm_sm's, tm_rc's software one and
     * the tag-matching device model's (UCX_TM_RC_TM_MODEL=y). */
    static constexpr const char *kListSizes[] = {"UCX_TM_SM_TAG_LIST_SIZE",
                                                 "UCX_TM_RC_TAG_LIST_SIZE",
                                                 "UCX_TM_RC_TM_MODEL_TAGS"};
    static constexpr unsigned    kListSize    = 3;
    void SetUp() override {
        for (const char *v : kListSizes) {
            setenv(v, "3", 1);
        }
        ProtoTest::SetUp();
        for (const char *v : kListSizes) {
            unsetenv(v);
        }
    }
    /* Whether the pair's receives go to a transport's tag list. */
    bool offloads() const { return (GetParam() == "tm_sm") || (GetParam() == "tm_rc"); }

    /* `len` bytes at `buf` as elements cut at random points, empty ones among them. */
    static std::vector<uct_tm_proto_iov_t> cut(void *buf, size_t len, std::mt19937_64 &rng) {
        std::vector<uct_tm_proto_iov_t> iov;
        char                           *p    = static_cast<char *>(buf);
        size_t                          left = len;
        const int                       n    = 2 + static_cast<int>(rng() % 5);
        for (int i = 0; i + 1 < n; ++i) {
            const size_t take = (left == 0) ? 0 : rng() % (left + 1);
            iov.push_back({p, take});
            p += take;
            left -= take;
        }
        iov.push_back({p, left});
        return iov;
    }

    Recv post_recv(void *buf, size_t len, uint64_t tag, uint64_t mask, uct_tm_proto_ep_h source,
                   bool user, const std::vector<uct_tm_proto_iov_t> *iov = nullptr) {
        Recv r;
        r.pending = true;
        if (iov != nullptr) {
            uct_tm_proto_op_params_t params = {};
            if (user) {
                r.user         = std::make_unique<Recv::Memory>();
                params.flags   = UCT_TM_PROTO_OP_USER_REQUEST;
                params.request = r.user->bytes;
            }
            EXPECT_EQ(UCS_INPROGRESS,
                      uct_tm_proto_recvv(p_.b, iov->data(), iov->size(), tag, mask, source,
                                         &params, user ? nullptr : &r.handle));
            return r;
        }
        if (!user) {
            r.handle = post(buf, len, tag, mask, source);
            return r;
        }
        r.user                          = std::make_unique<Recv::Memory>();
        uct_tm_proto_op_params_t params = {};
        params.flags                    = UCT_TM_PROTO_OP_USER_REQUEST;
        params.request                  = r.user->bytes;
        EXPECT_EQ(UCS_INPROGRESS,
                  uct_tm_proto_recv(p_.b, buf, len, tag, mask, source, &params, nullptr));
        return r;
    }
    ucs_status_t wait_recv(Recv &r, uct_tm_proto_info_t *info = nullptr) {
        r.pending = false;
        if (!r.user) {
            return wait_request(p_, p_.b, r.handle, info);
        }
        if (!wait_for(p_, [&] {
                return uct_tm_proto_request_user_test(r.user->bytes, nullptr) != UCS_INPROGRESS;
            })) {
            return UCS_ERR_TIMED_OUT;
        }
        return uct_tm_proto_request_user_test(r.user->bytes, info);
    }
    ucs_status_t test_recv(const Recv &r) {
        return r.user ? uct_tm_proto_request_user_test(r.user->bytes, nullptr)
                      : uct_tm_proto_request_test(p_.b, r.handle, nullptr);
    }
    ucs_status_t cancel_recv(const Recv &r) {
        return r.user ? uct_tm_proto_request_cancel_user(p_.b, r.user->bytes)
                      : uct_tm_proto_request_cancel(p_.b, r.handle);
    }

    void random_mix(bool caller_memory, bool vectors = false);
};

TEST_P(ProtoOrdering, RandomMixMatchesTheModel) {
    random_mix(false);
}

TEST_P(ProtoOrdering, RandomMixInCallerMemoryMatchesTheModel) {
    random_mix(true);
}

TEST_P(ProtoOrdering, RandomMixWithVectorsMatchesTheModel) {
    random_mix(true, true);
}

/* The tag list (3 entries) fills mid-stream: a receive it refuses is held in
 * software, and a later one must wait there behind it even once the list
 * has room again, or a message would take the later receive first. Each
 * message k must land in receive k (same tag; eager, rendezvous, and one
 * unexpected). */
TEST_P(ProtoOrdering, TagListFullMidStreamKeepsPostingOrder) {
    constexpr uint64_t  kTag     = 0x5150;
    /* the first four fit the NIC model's minimum receive (our rendezvous
     * request): smaller ones never go to its list */
    const size_t        lens[]   = {1000, 1000, 300000, 1000, 8, 20000, 8};
    constexpr size_t    kMsgs    = sizeof(lens) / sizeof(lens[0]);
    std::vector<std::vector<char>> bufs, data;
    for (size_t k = 0; k < kMsgs; ++k) {
        bufs.emplace_back(lens[k] + 16, 'g');
        data.push_back(pattern(lens[k], static_cast<uint32_t>(k + 1)));
    }
    std::vector<Recv> r(kMsgs);
    auto post_k = [&](size_t k, uint64_t mask, bool user) {
        r[k] = post_recv(bufs[k].data(), lens[k], kTag, mask, nullptr, user);
    };
    std::vector<uct_tm_proto_request_t> sreqs;
    auto send_k = [&](size_t k) {
        uct_tm_proto_request_t sreq = 0;
        const ucs_status_t st = send(data[k].data(), lens[k], kTag, 0, static_cast<uint32_t>(k), &sreq);
        ASSERT_TRUE((st == UCS_OK) || (st == UCS_INPROGRESS)) << k << ": " << ucs_status_string(st);
        if (sreq != 0) {
            sreqs.push_back(sreq);
        }
    };
    uct_tm_proto_stats_t before;
    uct_tm_proto_worker_stats(p_.b, &before);
    /* the list's 3 entries, then one it refuses (software holds it) */
    for (size_t k = 0; k < kListSize + 1; ++k) {
        post_k(k, ~uint64_t{0}, (k % 2) == 1);
    }
    /* two arrivals free two entries of the list */
    ASSERT_NO_FATAL_FAILURE(send_k(0));
    ASSERT_NO_FATAL_FAILURE(send_k(1));
    uct_tm_proto_info_t info;
    ASSERT_EQ(UCS_OK, wait_recv(r[0], &info));
    EXPECT_EQ(0u, info.data);
    ASSERT_EQ(UCS_OK, wait_recv(r[1], &info));
    EXPECT_EQ(1u, info.data);
    /* the list has room, but software holds an older receive: these wait there */
    post_k(4, 0, false);                 /* wildcard */
    post_k(5, ~uint64_t{0} << 4, true);  /* masked */
    for (size_t k = 2; k < kMsgs; ++k) { /* the last one arrives unexpected */
        ASSERT_NO_FATAL_FAILURE(send_k(k));
    }
    ASSERT_TRUE(wait_unexpected(kTag)) << "message 6 did not arrive";
    post_k(6, ~uint64_t{0}, false); /* takes the unexpected message */
    for (size_t k = 2; k < kMsgs; ++k) {
        ASSERT_EQ(UCS_OK, wait_recv(r[k], &info)) << "receive " << k;
        EXPECT_EQ(k, info.data) << "receive " << k << " took message " << info.data;
        EXPECT_EQ(lens[k], info.length) << k;
    }
    for (size_t k = 0; k < kMsgs; ++k) {
        EXPECT_TRUE(same_bytes(bufs[k].data(), data[k].data(), lens[k])) << "receive " << k;
        EXPECT_EQ('g', bufs[k][lens[k]]) << "receive " << k;
    }
    for (auto s : sreqs) {
        EXPECT_EQ(UCS_OK, wait_request(p_, p_.a, s));
    }
    uct_tm_proto_stats_t after;
    uct_tm_proto_worker_stats(p_.b, &after);
    if (offloads()) {
        EXPECT_GE(after.offloaded_recvs - before.offloaded_recvs, kListSize);
        /* the refused one and the two behind it */
        EXPECT_GE(after.software_recvs - before.software_recvs, 3u);
    }
}

void ProtoOrdering::random_mix(bool caller_memory, bool vectors) {
    std::mt19937_64                     rng(12345);
    constexpr size_t                    kBig = 200000; /* above the 128k rendezvous threshold */
    std::vector<ModelRecv>              model;
    std::vector<int>                    unexpected; /* message indexes, arrival order */
    std::vector<uint64_t>               msg_tags;
    std::vector<size_t>                 msg_lens;
    std::vector<Recv>                   rreqs;
    std::vector<std::vector<char>>      bufs;
    std::vector<uct_tm_proto_request_t> sreqs;
    uint64_t                            arrivals = 0;
    const uint64_t masks[] = {~uint64_t{0}, ~uint64_t{0}, 0x6, 0x4, 0};

    for (int round = 0; round < 40; ++round) {
        /* post */
        const int nrecv = 2 + static_cast<int>(rng() % 6);
        for (int i = 0; i < nrecv; ++i) {
            ModelRecv m;
            m.tag  = rng() % 8;
            m.mask = masks[rng() % 5];
            const bool directed = (rng() % 5) == 0;
            for (size_t u = 0; u < unexpected.size(); ++u) {
                if (((msg_tags[unexpected[u]] ^ m.tag) & m.mask) == 0) {
                    m.got = unexpected[u];
                    unexpected.erase(unexpected.begin() + u);
                    break;
                }
            }
            model.push_back(m);
            bufs.emplace_back(kBig, 0);
            const bool user = caller_memory && ((rng() % 2) == 0);
            /* the same draws as without vectors when they are off */
            if (vectors && ((rng() % 2) == 0)) {
                const auto iov = cut(bufs.back().data(), kBig, rng);
                rreqs.push_back(post_recv(bufs.back().data(), kBig, m.tag, m.mask,
                                          directed ? p_.ba : nullptr, user, &iov));
            } else {
                rreqs.push_back(post_recv(bufs.back().data(), kBig, m.tag, m.mask,
                                          directed ? p_.ba : nullptr, user));
            }
        }
        /* send */
        const int nmsg = 1 + static_cast<int>(rng() % 6);
        for (int j = 0; j < nmsg; ++j) {
            const int      idx = static_cast<int>(msg_tags.size());
            const uint64_t tag = rng() % 8;
            const size_t   len = (rng() % 4 == 0) ? kBig : 16;
            msg_tags.push_back(tag);
            msg_lens.push_back(len);
            bool matched = false;
            for (auto &m : model) {
                if ((m.got < 0) && (((tag ^ m.tag) & m.mask) == 0)) {
                    m.got   = idx;
                    matched = true;
                    break;
                }
            }
            if (!matched) {
                unexpected.push_back(idx);
            }
            auto                   data = pattern(len, idx);
            uct_tm_proto_request_t s;
            ucs_status_t           st;
            if (vectors && ((rng() % 2) == 0)) {
                const auto               iov    = cut(data.data(), len, rng);
                uct_tm_proto_op_params_t params = {};
                params.flags                    = UCT_TM_PROTO_SEND_INJECT;
                params.flags                   |= UCT_TM_PROTO_SEND_REMOTE_DATA;
                params.data                     = idx;
                s  = 0;
                st = uct_tm_proto_sendv(p_.ab, iov.data(), iov.size(), tag, &params, &s);
            } else {
                st = send(data.data(), len, tag, UCT_TM_PROTO_SEND_INJECT,
                          static_cast<uint32_t>(idx), &s);
            }
            ASSERT_TRUE((st == UCS_OK) || (st == UCS_INPROGRESS));
            if (s != 0) {
                sreqs.push_back(s);
            }
        }
        arrivals += nmsg;
        /* every message of the round has arrived (matched or queued) */
        ASSERT_TRUE(wait_for(p_, [&] {
            uct_tm_proto_stats_t st;
            uct_tm_proto_worker_stats(p_.b, &st);
            return st.expected + st.unexpected >= arrivals;
        })) << "round " << round;
        for (size_t k = 0; k < model.size(); ++k) {
            if (model[k].got < 0) {
                continue;
            }
            if (!rreqs[k].pending) {
                continue; /* checked in an earlier round */
            }
            uct_tm_proto_info_t info;
            ASSERT_EQ(UCS_OK, wait_recv(rreqs[k], &info)) << "receive " << k;
            const int j = model[k].got;
            EXPECT_EQ(info.data, static_cast<uint32_t>(j)) << "receive " << k << " round " << round;
            EXPECT_EQ(info.tag, msg_tags[j]);
            ASSERT_EQ(info.length, msg_lens[j]);
            EXPECT_TRUE(same_bytes(bufs[k].data(), pattern(msg_lens[j], j).data(), msg_lens[j]));
        }
        for (size_t k = 0; k < model.size(); ++k) {
            if ((model[k].got < 0) && rreqs[k].pending) {
                EXPECT_EQ(UCS_INPROGRESS, test_recv(rreqs[k]))
                        << "receive " << k << " took a message the model gives nobody";
            }
        }
    }
    uct_tm_proto_stats_t st;
    uct_tm_proto_worker_stats(p_.b, &st);
    if (offloads()) {
        EXPECT_GT(st.offloaded_recvs, 0u); /* the tag list was used ... */
        EXPECT_GT(st.software_recvs, 0u);  /* ... and was full or bypassed at times */
    }
    /* leftovers: pending receives cancel, unexpected messages are discarded */
    for (size_t k = 0; k < model.size(); ++k) {
        if (rreqs[k].pending) {
            ASSERT_EQ(UCS_OK, cancel_recv(rreqs[k]));
            EXPECT_EQ(UCS_ERR_CANCELED, wait_recv(rreqs[k]));
        }
    }
    uct_tm_proto_info_t info;
    size_t              discarded = 0;
    while (uct_tm_proto_probe(p_.b, 0, 0, nullptr,
                              UCT_TM_PROTO_PROBE_PEEK | UCT_TM_PROTO_PROBE_DISCARD, &info,
                              nullptr) == UCS_OK) {
        ++discarded;
    }
    EXPECT_EQ(discarded, unexpected.size());
    for (auto s : sreqs) {
        EXPECT_EQ(UCS_OK, wait_request(p_, p_.a, s));
    }
}

INSTANTIATE_TEST_SUITE_P(transports, ProtoOrdering, ::testing::ValuesIn(proto_transports()),
                         transport_name);

}  // namespace
}  // namespace uct_tm_test
