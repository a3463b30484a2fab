/*
 * Posting order against a reference model, adversarially: random exact,
 * masked, wildcard and source-filtered receives over a small tag space,
 * posted in rounds between random eager and rendezvous messages, with the
 * transport's tag list (tm_sm) held to 3 entries so that it fills in the
 * middle of every round and empties again between rounds. Every message must
 * land in the receive the model (one list, earliest posted match; earliest
 * arrived unexpected message for a new receive) gives it, with its payload.
 */
#include "proto_fixture.h"

#include <cstdlib>
#include <cstring>
#include <random>

namespace uct_tm_test {
namespace {

struct ModelRecv {
    uint64_t tag, mask;
    int      got = -1; /* message index */
};

class ProtoOrdering : public ProtoTest {
  protected:
    void SetUp() override {
        setenv("UCX_TM_SM_TAG_LIST_SIZE", "3", 1);
        ProtoTest::SetUp();
        unsetenv("UCX_TM_SM_TAG_LIST_SIZE");
    }
};

TEST_P(ProtoOrdering, RandomMixMatchesTheModel) {
    std::mt19937_64                     rng(12345);
    constexpr size_t                    kBig = 200000; /* above the 128k rendezvous threshold */
    std::vector<ModelRecv>              model;
    std::vector<int>                    unexpected; /* message indexes, arrival order */
    std::vector<uint64_t>               msg_tags;
    std::vector<size_t>                 msg_lens;
    std::vector<uct_tm_proto_request_t> rreqs;
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
            rreqs.push_back(post(bufs.back().data(), kBig, m.tag, m.mask, directed ? p_.ba : nullptr));
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
            const auto             data = pattern(len, idx);
            uct_tm_proto_request_t s;
            const ucs_status_t     st = send(data.data(), len, tag, UCT_TM_PROTO_SEND_INJECT,
                                             static_cast<uint32_t>(idx), &s);
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
            if (rreqs[k] == 0) {
                continue; /* checked in an earlier round */
            }
            uct_tm_proto_info_t info;
            ASSERT_EQ(UCS_OK, wait_request(p_, p_.b, rreqs[k], &info)) << "receive " << k;
            rreqs[k] = 0;
            const int j = model[k].got;
            EXPECT_EQ(info.imm, static_cast<uint32_t>(j)) << "receive " << k << " round " << round;
            EXPECT_EQ(info.tag, msg_tags[j]);
            ASSERT_EQ(info.length, msg_lens[j]);
            EXPECT_EQ(0, memcmp(bufs[k].data(), pattern(msg_lens[j], j).data(), msg_lens[j]));
        }
        for (size_t k = 0; k < model.size(); ++k) {
            if ((model[k].got < 0) && (rreqs[k] != 0)) {
                EXPECT_EQ(UCS_INPROGRESS, uct_tm_proto_request_test(p_.b, rreqs[k], nullptr))
                        << "receive " << k << " took a message the model gives nobody";
            }
        }
    }
    uct_tm_proto_stats_t st;
    uct_tm_proto_worker_stats(p_.b, &st);
    if (GetParam() == "tm_sm") {
        EXPECT_GT(st.offloaded_recvs, 0u); /* the tag list was used ... */
        EXPECT_GT(st.software_recvs, 0u);  /* ... and was full or bypassed at times */
    }
    /* leftovers: pending receives cancel, unexpected messages are discarded */
    for (size_t k = 0; k < model.size(); ++k) {
        if (rreqs[k] != 0) {
            ASSERT_EQ(UCS_OK, uct_tm_proto_request_cancel(p_.b, rreqs[k]));
            EXPECT_EQ(UCS_ERR_CANCELED, wait_request(p_, p_.b, rreqs[k]));
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
