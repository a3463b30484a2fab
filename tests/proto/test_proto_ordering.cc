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
 * receives, so they interleave with the tag list's). And with a third of
 * the receives and messages untagged (fi_msg): the model's untagged receives
 * take untagged messages only, whatever their tags, in the same one list;
 * every fourth untagged receive is a multi-receive buffer, which the model
 * gives message after message until less than the largest is left, checked
 * by the messages' places in the buffer. And that mix with buffered
 * receives (FI_BUFFERED_RECV): a message no posted receive takes is
 * reported to the application in arrival order (never to a later receive),
 * which takes each with recv_claimed.
 */
#include "proto_fixture.h"

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <random>

namespace uct_tm_test {
namespace {

struct ModelRecv {
    uint64_t tag, mask;
    int      got = -1; /* message index */
    bool     untagged = false;
    bool     multi    = false; /* a multi-receive: */
    bool     open     = true;   /* still takes messages */
    size_t   used     = 0;      /* bytes its messages took */
    std::vector<int> gots;      /* the messages it took, in order */
};

/* What a multi-receive's callback reported: its messages, then its release. */
struct MultiEvents {
    std::vector<uct_tm_proto_info_t> msgs;
    int                              finals = 0;
    uct_tm_proto_info_t              final_info = {};
    static void cb(void *arg, uct_tm_proto_request_t, const uct_tm_proto_info_t *info) {
        auto *e = static_cast<MultiEvents *>(arg);
        if (info->flags & UCT_TM_PROTO_INFO_MULTI_RECV) {
            ++e->finals;
            e->final_info = *info;
        } else {
            e->msgs.push_back(*info);
        }
    }
};

/* A receive by handle or in the caller's memory. */
struct Recv {
    struct Memory {
        alignas(UCT_TM_PROTO_REQUEST_ALIGN) unsigned char bytes[UCT_TM_PROTO_REQUEST_SIZE];
    };
    uct_tm_proto_request_t  handle = 0;
    std::unique_ptr<Memory> user;
    bool                    pending = false;
    std::unique_ptr<MultiEvents> multi; /* set: a multi-receive */
};

class ProtoOrdering : public ProtoTest {
  protected:
    /* Every tag list held to 3 entries: tm_sm's, tm_rc's software one and
     * the tag-matching device model's (UCX_TM_RC_TM_MODEL=y). */
    static constexpr const char *kListSizes[] = {"UCX_TM_SM_TAG_LIST_SIZE",
                                                 "UCX_TM_RC_TAG_LIST_SIZE",
                                                 "UCX_TM_RC_TM_MODEL_TAGS"};
    static constexpr unsigned    kListSize    = 3;
    static constexpr size_t      kBig         = 200000; /* above the 128k rendezvous threshold */
    /* a multi-receive's buffer, released with less than kBig left: after
     * five small messages or one big one */
    static constexpr size_t      kMultiLen    = kBig + 64;
    void SetUp() override { with_env([this] { ProtoTest::SetUp(); }); }
    /* Runs fn with every tag list held to 3 entries and min_multi_recv kBig. */
    template <typename Fn> static void with_env(Fn &&fn) {
        for (const char *v : kListSizes) {
            setenv(v, "3", 1);
        }
        setenv("UCX_TM_PROTO_MIN_MULTI_RECV", "200000", 1); /* kBig: no message is cut */
        fn();
        for (const char *v : kListSizes) {
            unsetenv(v);
        }
        unsetenv("UCX_TM_PROTO_MIN_MULTI_RECV");
    }
    /* b hands unmatched messages to the application (held_). */
    void reopen_buffered() {
        uct_tm_proto_worker_params_t extra = {};
        extra.field_mask                   = UCT_TM_PROTO_WORKER_FIELD_BUFFERED;
        extra.buffered_cb = [](void *arg, uint64_t msg, const uct_tm_proto_info_t *info,
                               const void *, size_t) {
            static_cast<ProtoOrdering *>(arg)->held_.push_back({msg, *info});
        };
        extra.buffered_arg = this;
        with_env([&] { reopen(extra); });
    }
    std::vector<std::pair<uint64_t, uct_tm_proto_info_t>> held_; /* reported, not taken */
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

    /* An untagged receive: one buffer (by handle or in caller memory), or a multi-receive. */
    Recv post_untagged(void *buf, size_t len, uct_tm_proto_ep_h source, bool user, bool multi) {
        Recv                     r;
        uct_tm_proto_op_params_t params = {};
        params.flags                    = UCT_TM_PROTO_OP_UNTAGGED;
        r.pending                       = true;
        if (multi) {
            r.multi       = std::make_unique<MultiEvents>();
            params.flags |= UCT_TM_PROTO_RECV_MULTI;
            params.cb     = MultiEvents::cb;
            params.arg    = r.multi.get();
        } else if (user) {
            r.user          = std::make_unique<Recv::Memory>();
            params.flags   |= UCT_TM_PROTO_OP_USER_REQUEST;
            params.request  = r.user->bytes;
        }
        EXPECT_EQ(UCS_INPROGRESS, uct_tm_proto_recv(p_.b, buf, len, 0, 0, source, &params,
                                                    r.user ? nullptr : &r.handle));
        return r;
    }

    void random_mix(bool caller_memory, bool vectors = false, bool untagged = false,
                    bool buffered = false);
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

TEST_P(ProtoOrdering, RandomMixWithUntaggedAndMultiReceivesMatchesTheModel) {
    random_mix(true, false, true);
}

TEST_P(ProtoOrdering, RandomMixWithBufferedReceivesMatchesTheModel) {
    reopen_buffered();
    random_mix(true, false, true, true);
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

void ProtoOrdering::random_mix(bool caller_memory, bool vectors, bool untagged, bool buffered) {
    std::mt19937_64                     rng(12345);
    std::vector<ModelRecv>              model;
    std::vector<int>                    unexpected; /* message indexes, arrival order */
    std::vector<uint64_t>               msg_tags;
    std::vector<size_t>                 msg_lens;
    std::vector<bool>                   msg_untagged;
    size_t                              taken_buffered = 0; /* buffered: reported and taken */
    /* whether receive m takes message idx now, and its taking it */
    auto takes = [&](const ModelRecv &m, int idx) {
        return (m.untagged == msg_untagged[idx]) &&
               (m.untagged || (((msg_tags[idx] ^ m.tag) & m.mask) == 0)) &&
               (m.multi ? m.open : (m.got < 0));
    };
    auto take = [&](ModelRecv &m, int idx) {
        if (!m.multi) {
            m.got = idx;
            return;
        }
        m.gots.push_back(idx);
        m.used += msg_lens[idx];
        m.open = (kMultiLen - m.used >= kBig);
    };
    /* A multi-receive reported the messages the model gave it, each at its
     * place in the buffer (in the model's order), and once the model closed
     * it, its release. */
    auto check_multi = [&](const ModelRecv &m, Recv &r, const std::vector<char> &buf) {
        if (!r.pending) {
            return;
        }
        ASSERT_TRUE(wait_for(p_, [&] {
            return (r.multi->msgs.size() >= m.gots.size()) && (m.open || (r.multi->finals != 0));
        }));
        ASSERT_EQ(r.multi->msgs.size(), m.gots.size()) << "a message the model gives elsewhere";
        std::vector<uct_tm_proto_info_t> placed = r.multi->msgs;
        std::stable_sort(placed.begin(), placed.end(),
                         [](const uct_tm_proto_info_t &a, const uct_tm_proto_info_t &b) {
                             return static_cast<const char *>(a.buffer) <
                                    static_cast<const char *>(b.buffer);
                         });
        size_t offset = 0;
        for (size_t i = 0; i < placed.size(); ++i) {
            const int j = m.gots[i];
            EXPECT_EQ(placed[i].status, UCS_OK);
            EXPECT_EQ(placed[i].data, static_cast<uint32_t>(j)) << "place " << i;
            EXPECT_EQ(placed[i].tag, 0u);
            ASSERT_EQ(placed[i].length, msg_lens[j]);
            EXPECT_EQ(static_cast<const char *>(placed[i].buffer), buf.data() + offset) << "packed";
            EXPECT_TRUE(same_bytes(static_cast<const char *>(placed[i].buffer),
                                   pattern(msg_lens[j], j).data(), msg_lens[j]));
            offset += msg_lens[j];
        }
        if (!m.open) {
            EXPECT_EQ(1, r.multi->finals);
            EXPECT_EQ(UCS_OK, r.multi->final_info.status);
            EXPECT_EQ(m.used, r.multi->final_info.length);
            EXPECT_EQ(UCS_OK, wait_recv(r)); /* complete, and released */
        }
    };
    std::vector<Recv>                   rreqs;
    std::vector<std::vector<char>>      bufs;
    std::vector<uct_tm_proto_request_t> sreqs;
    std::vector<std::vector<char>>      in_use; /* vectored sends' data, read in place */
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
            if (untagged) { /* drawn only here: the other mixes keep their sequence */
                m.untagged = (rng() % 3) == 0;
                m.multi    = m.untagged && ((rng() % 4) == 0);
            }
            /* buffered: what arrived unmatched is the application's */
            for (size_t u = 0;
                 !buffered && (u < unexpected.size()) && (m.multi ? m.open : (m.got < 0));) {
                if (takes(m, unexpected[u])) {
                    take(m, unexpected[u]);
                    unexpected.erase(unexpected.begin() + u);
                } else {
                    ++u;
                }
            }
            model.push_back(m);
            bufs.emplace_back(m.multi ? kMultiLen : kBig, 0);
            const bool user = caller_memory && ((rng() % 2) == 0);
            if (m.untagged) {
                rreqs.push_back(post_untagged(bufs.back().data(), bufs.back().size(),
                                              directed ? p_.ba : nullptr, user, m.multi));
                continue;
            }
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
            const bool     unt = untagged && ((rng() % 3) == 0);
            msg_tags.push_back(tag);
            msg_lens.push_back(len);
            msg_untagged.push_back(unt);
            bool matched = false;
            for (auto &m : model) {
                if (takes(m, idx)) {
                    take(m, idx);
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
                /* every other one read in place (kept until the end), the rest staged */
                const bool inject               = (idx % 2) == 0;
                params.flags                    = inject ? UCT_TM_PROTO_SEND_INJECT : 0;
                params.flags                   |= UCT_TM_PROTO_SEND_REMOTE_DATA;
                params.data                     = idx;
                s  = 0;
                st = uct_tm_proto_sendv(p_.ab, iov.data(), iov.size(), tag, &params, &s);
                if (!inject) {
                    in_use.push_back(std::move(data)); /* a moved vector keeps its bytes */
                }
            } else {
                st = send(data.data(), len, tag,
                          UCT_TM_PROTO_SEND_INJECT | (unt ? unsigned{UCT_TM_PROTO_OP_UNTAGGED} : 0u),
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
        if (buffered) {
            /* the round's unmatched messages, reported in arrival order, taken */
            ASSERT_TRUE(wait_for(p_, [&] { return held_.size() >= unexpected.size(); }))
                    << "round " << round;
            ASSERT_EQ(held_.size(), unexpected.size()) << "round " << round;
            for (size_t u = 0; u < unexpected.size(); ++u) {
                const int j = unexpected[u];
                EXPECT_EQ(held_[u].second.data, static_cast<uint32_t>(j)) << "round " << round;
                EXPECT_EQ(held_[u].second.tag, msg_untagged[j] ? 0 : msg_tags[j]);
                EXPECT_EQ((held_[u].second.flags & UCT_TM_PROTO_INFO_UNTAGGED) != 0,
                          bool(msg_untagged[j]));
                std::vector<char>      buf(kBig);
                uct_tm_proto_request_t r = 0;
                ASSERT_EQ(UCS_INPROGRESS, uct_tm_proto_recv_claimed(p_.b, held_[u].first,
                                                                    buf.data(), buf.size(),
                                                                    nullptr, &r));
                uct_tm_proto_info_t info;
                ASSERT_EQ(UCS_OK, wait_request(p_, p_.b, r, &info));
                ASSERT_EQ(info.length, msg_lens[j]);
                EXPECT_TRUE(same_bytes(buf.data(), pattern(msg_lens[j], j).data(), msg_lens[j]));
            }
            taken_buffered += held_.size();
            held_.clear();
            unexpected.clear();
        }
        for (size_t k = 0; k < model.size(); ++k) {
            if (model[k].multi) {
                check_multi(model[k], rreqs[k], bufs[k]);
                continue;
            }
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
            EXPECT_EQ(info.tag, msg_untagged[j] ? 0 : msg_tags[j]);
            ASSERT_EQ(info.length, msg_lens[j]);
            EXPECT_TRUE(same_bytes(bufs[k].data(), pattern(msg_lens[j], j).data(), msg_lens[j]));
        }
        for (size_t k = 0; k < model.size(); ++k) {
            if (!model[k].multi && (model[k].got < 0) && rreqs[k].pending) {
                EXPECT_EQ(UCS_INPROGRESS, test_recv(rreqs[k]))
                        << "receive " << k << " took a message the model gives nobody";
            }
        }
    }
    if (buffered) {
        EXPECT_GT(taken_buffered, 10u) << "few messages arrived unmatched";
    }
    if (untagged) { /* the mix exercised what it is for */
        size_t closed = 0, multi_msgs = 0, untagged_msgs = 0;
        for (const auto &m : model) {
            closed += (m.multi && !m.open) ? 1 : 0;
            multi_msgs += m.gots.size();
            untagged_msgs += (m.untagged && !m.multi && (m.got >= 0)) ? 1 : 0;
        }
        EXPECT_GT(closed, 0u) << "no multi-receive filled up";
        EXPECT_GT(multi_msgs, 10u);
        EXPECT_GT(untagged_msgs, 10u);
    }
    uct_tm_proto_stats_t st;
    uct_tm_proto_worker_stats(p_.b, &st);
    if (offloads()) {
        EXPECT_GT(st.offloaded_recvs, 0u); /* the tag list was used ... */
        EXPECT_GT(st.software_recvs, 0u);  /* ... and was full or bypassed at times */
    }
    /* leftovers: pending receives cancel (an open multi-receive reports its
     * release, CANCELED), unexpected messages are discarded -- untagged ones,
     * which probes do not see, are taken by untagged receives, in order */
    for (size_t k = 0; k < model.size(); ++k) {
        if (rreqs[k].multi && rreqs[k].pending) {
            ASSERT_EQ(UCS_OK, cancel_recv(rreqs[k]));
            ASSERT_TRUE(wait_for(p_, [&] { return rreqs[k].multi->finals != 0; }));
            EXPECT_EQ(UCS_ERR_CANCELED, rreqs[k].multi->final_info.status);
            EXPECT_EQ(UCS_ERR_CANCELED, wait_recv(rreqs[k]));
            EXPECT_EQ(1, rreqs[k].multi->finals);
        } else if (rreqs[k].pending) {
            ASSERT_EQ(UCS_OK, cancel_recv(rreqs[k]));
            EXPECT_EQ(UCS_ERR_CANCELED, wait_recv(rreqs[k]));
        }
    }
    uct_tm_proto_info_t info;
    size_t              untagged_left = 0;
    for (int idx : unexpected) {
        if (!msg_untagged[idx]) {
            continue;
        }
        std::vector<char> buf(kBig);
        Recv r = post_untagged(buf.data(), buf.size(), nullptr, false, false);
        ASSERT_EQ(UCS_OK, wait_recv(r, &info)) << "unexpected untagged message " << idx;
        EXPECT_EQ(info.data, static_cast<uint32_t>(idx));
        ++untagged_left;
    }
    size_t              discarded = 0;
    while (uct_tm_proto_probe(p_.b, 0, 0, nullptr,
                              UCT_TM_PROTO_PROBE_PEEK | UCT_TM_PROTO_PROBE_DISCARD, &info,
                              nullptr) == UCS_OK) {
        ++discarded;
    }
    EXPECT_EQ(discarded + untagged_left, unexpected.size());
    for (auto s : sreqs) {
        EXPECT_EQ(UCS_OK, wait_request(p_, p_.a, s));
    }
}

INSTANTIATE_TEST_SUITE_P(transports, ProtoOrdering, ::testing::ValuesIn(proto_transports()),
                         transport_name);

}  // namespace
}  // namespace uct_tm_test
