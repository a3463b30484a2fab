/*
 * UCT tag API conformance, run for every tag-capable transport of uct-tm
 * (see tag_transports()): the scenarios of UCX's own test_tag
 * (test/gtest/uct/ib/test_tag.cc in UCX's sources) plus truncation on every path,
 * cancellation races, descriptor holding with rx_headroom and matching order
 * against a model. Each test checks every callback (count, order, status,
 * tag, imm, length) and every byte delivered, and that nothing beyond the
 * posted buffers was written.
 */
#include "sm/sm_desc_ring.h"
#include "tag_fixture.h"

#include <gtest/gtest.h>

#include <sys/mman.h>

#include <algorithm>
#include <cstring>
#include <deque>
#include <memory>
#include <set>

namespace uct_tm_test {
namespace {

const Path kEagerPaths[] = {Path::kShort, Path::kBcopy, Path::kZcopy, Path::kZcopyMulti};
const Path kAllPaths[]   = {Path::kShort, Path::kBcopy, Path::kZcopy, Path::kZcopyMulti,
                            Path::kRndv};

constexpr uct_tag_t kFullMask = ~uct_tag_t{0};

TEST(TagTransports, TmSmIsTagCapable) {
    const auto names = tag_transports();
    EXPECT_NE(std::find(names.begin(), names.end(), "tm_sm"), names.end())
        << "tm_sm does not report UCT_IFACE_FLAG_TAG_* with tag offload requested";
}

TEST_P(TagTest, CapsAreConsistent) {
    const Caps &c = rx_->caps;
    EXPECT_TRUE(c.flags & (UCT_IFACE_FLAG_TAG_EAGER_SHORT | UCT_IFACE_FLAG_TAG_EAGER_BCOPY |
                           UCT_IFACE_FLAG_TAG_EAGER_ZCOPY | UCT_IFACE_FLAG_TAG_RNDV_ZCOPY));
    EXPECT_GE(c.recv_max_iov, 1u);
    EXPECT_GE(c.recv_max_outstanding, 1u);
    if (c.flags & UCT_IFACE_FLAG_TAG_EAGER_ZCOPY) {
        EXPECT_GE(c.eager_max_iov, 1u);
        EXPECT_GE(c.max_zcopy, c.max_short);
    }
    if (c.flags & UCT_IFACE_FLAG_TAG_RNDV_ZCOPY) {
        /* UCP asserts max_hdr >= 17 (its {ep_id, req_id, md_index} header). */
        EXPECT_GE(c.rndv_max_hdr, 17u);
        EXPECT_GE(c.rndv_max_iov, 1u);
        EXPECT_GT(c.rndv_max_zcopy, 0u);
        /* Finite and registrable: UCX's own test_tag allocates and registers
         * rndv.max_zcopy bytes. */
        EXPECT_LT(c.rndv_max_zcopy, SIZE_MAX / 2);
        uct_md_attr_t md_attr{};
        ASSERT_EQ(uct_md_query(env_->md(), &md_attr), UCS_OK);
        EXPECT_GE(md_attr.cap.max_reg, c.rndv_max_zcopy);
    }
}

/* ---- expected eager and rendezvous --------------------------------------------------- */

/* Every path, every interesting size, several send and receive iov counts:
 * consumed then completed, with the sender's tag, imm, length and bytes. */
TEST_P(TagTest, ExpectedEveryPath) {
    Rng rng(test_seed() ^ 1);
    for (Path path : kAllPaths) {
        if (lacks(path)) {
            continue;
        }
        const size_t send_iovs[] = {1, 3, tx_->caps.eager_max_iov};
        const size_t recv_iovs[] = {1, 3, rx_->caps.recv_max_iov};
        for (size_t length : tx_->caps.sizes(path)) {
            for (size_t si : send_iovs) {
                if ((path == Path::kShort || path == Path::kBcopy || path == Path::kRndv) && si > 1) {
                    continue;
                }
                for (size_t ri : recv_iovs) {
                    if (ri > rx_->caps.recv_max_iov) {
                        continue;
                    }
                    SCOPED_TRACE(std::string(path_name(path)) + " length " + std::to_string(length) +
                                 " send iov " + std::to_string(si) + " recv iov " +
                                 std::to_string(ri));
                    const uct_tag_t tag = rng.next();
                    Send            s(path, tag, rng.next() | 1, rng.next(), length, si);
                    RecvCtx         r;
                    RecvBuffers     b(length, ri);
                    ASSERT_EQ(post(r, tag, kFullMask, b), UCS_OK);
                    ASSERT_EQ(send(s), UCS_OK);
                    ASSERT_TRUE(wait([&] {
                        return r.done() && (!s.comp_pending || (s.comp->calls > 0));
                    })) << "no completion; callbacks [" << r.sequence() << "]";
                    EXPECT_EQ(check_delivery(r, b, s, UCS_OK), "");
                    if (s.comp) {
                        /* zcopy: called once if the send returned INPROGRESS, else never. */
                        EXPECT_EQ(s.comp->calls, s.comp_pending ? 1 : 0);
                        EXPECT_EQ(s.comp->status, UCS_OK);
                    }
                    EXPECT_TRUE(rx_->unexp.messages.empty());
                    EXPECT_TRUE(rx_->unexp.rndvs.empty());
                }
            }
        }
    }
}

/* A receive larger than the message: only the message's bytes are written. */
TEST_P(TagTest, ExpectedIntoLargerBuffer) {
    Rng rng(test_seed() ^ 2);
    for (Path path : kAllPaths) {
        if (lacks(path)) {
            continue;
        }
        const size_t length = tx_->caps.sizes(path)[1];
        SCOPED_TRACE(path_name(path));
        Send        s(path, rng.next(), 7, rng.next(), length);
        RecvCtx     r;
        RecvBuffers b(length + 1000, std::min<size_t>(2, rx_->caps.recv_max_iov));
        ASSERT_EQ(post(r, s.tag, kFullMask, b), UCS_OK);
        ASSERT_EQ(send(s), UCS_OK);
        ASSERT_TRUE(wait([&] { return r.done(); }));
        ASSERT_TRUE(finish(s));
        EXPECT_EQ(check_delivery(r, b, s, UCS_OK), "");
    }
}

/* ---- unexpected eager ------------------------------------------------------------------ */

TEST_P(TagTest, UnexpectedEagerEveryPath) {
    Rng rng(test_seed() ^ 3);
    for (Path path : kEagerPaths) {
        if (lacks(path)) {
            continue;
        }
        for (size_t length : tx_->caps.sizes(path)) {
            SCOPED_TRACE(std::string(path_name(path)) + " length " + std::to_string(length));
            const size_t before = rx_->unexp.messages.size();
            Send s(path, rng.next(), rng.next() | 1, rng.next(), length,
                   std::min<size_t>(3, tx_->caps.eager_max_iov));
            ASSERT_EQ(send(s), UCS_OK);
            ASSERT_TRUE(wait([&] { return rx_->unexp.complete_messages() == before + 1; }));
            ASSERT_EQ(rx_->unexp.messages.size(), before + 1);
            const Unexpected::Message &m = rx_->unexp.messages.back();
            EXPECT_EQ(m.tag, s.tag);
            EXPECT_EQ(m.imm, s.imm);
            ASSERT_EQ(m.data.size(), length);
            EXPECT_EQ(pattern_mismatch(m.data.data(), length, s.seed), SIZE_MAX);
            /* FIRST[|MORE], then MORE..., the last without MORE. */
            ASSERT_FALSE(m.flags.empty());
            for (size_t i = 0; i < m.flags.size(); ++i) {
                const bool first = (m.flags[i] & UCT_CB_PARAM_FLAG_FIRST) != 0;
                const bool more  = (m.flags[i] & UCT_CB_PARAM_FLAG_MORE) != 0;
                EXPECT_EQ(first, i == 0) << "fragment " << i;
                EXPECT_EQ(more, i + 1 < m.flags.size()) << "fragment " << i;
            }
            if (GetParam() == "tm_sm") {
                /* held until whole and handed up in one call, with imm, whatever its
                 * fragments (UCX's own test_tag reads imm from the first call) */
                EXPECT_EQ(m.flags.size(), 1u) << "an unexpected message in several calls";
            }
            if (s.comp_pending) {
                EXPECT_TRUE(wait([&] { return s.comp->calls == 1; }));
            }
        }
    }
    EXPECT_EQ(rx_->unexp.violations, std::vector<std::string>{});
}

/* A receive posted after a message arrived does not match it (UCT: the
 * message went to the unexpected callback). */
TEST_P(TagTest, PostedAfterArrivalDoesNotMatch) {
    Send s(Path::kBcopy, 0x77, 0, 9, 64);
    if (lacks(s.path)) {
        GTEST_SKIP();
    }
    ASSERT_EQ(send(s), UCS_OK);
    ASSERT_TRUE(wait([&] { return rx_->unexp.complete_messages() == 1; }));
    RecvCtx     r;
    RecvBuffers b(64);
    ASSERT_EQ(post(r, 0x77, kFullMask, b), UCS_OK);
    drain();
    EXPECT_TRUE(r.events.empty());
    EXPECT_TRUE(b.untouched());
    EXPECT_EQ(uct_iface_tag_recv_cancel(rx_->iface, &r.ctx, 1), UCS_OK);
}

/* DESC: the callback keeps the descriptor (UCS_INPROGRESS), writes into the
 * rx_headroom in front of the data, and the data stays intact while more
 * traffic flows, until uct_iface_release_desc(). */
void hold_desc_scenario(TagTest *t, Node &rx, const std::function<ucs_status_t(Send &)> &send,
                        const std::function<bool(const std::function<bool()> &)> &wait,
                        const Caps &caps) {
    Rng rng(test_seed() ^ 4);
    rx.unexp.hold_descs(1);
    Send first(Path::kBcopy, rng.next(), 3, rng.next(), caps.max_bcopy);
    ASSERT_EQ(send(first), UCS_OK);
    ASSERT_TRUE(wait([&] { return rx.unexp.complete_messages() == 1; }));
    ASSERT_EQ(rx.unexp.held.size(), 1u) << "a bcopy message was not delivered with DESC";
    /* Enough traffic to wrap the FIFO several times. */
    for (int i = 0; i < 600; ++i) {
        Send more(Path::kBcopy, rng.next(), 0, rng.next(), 1 + (i % 500));
        ASSERT_EQ(send(more), UCS_OK);
    }
    ASSERT_TRUE(wait([&] { return rx.unexp.complete_messages() == 601; }));
    EXPECT_EQ(rx.unexp.check_held(), "");
    for (size_t i = 1; i < rx.unexp.messages.size(); ++i) {
        ASSERT_EQ(rx.unexp.messages[i].data.size(), 1 + ((i - 1) % 500));
    }
    rx.unexp.release_held();
    EXPECT_EQ(rx.unexp.violations, std::vector<std::string>{});
    (void)t;
}

TEST_P(TagTest, UnexpectedDescHeldWithHeadroom) {
    if (lacks(Path::kBcopy)) {
        GTEST_SKIP();
    }
    hold_desc_scenario(
        this, *rx_, [this](Send &s) { return send(s); },
        [this](const std::function<bool()> &p) { return wait(p); }, tx_->caps);
}

/* UCX's tag_hold_uct_desc runs with rx_headroom 0. */
TEST_P(TagTest, UnexpectedDescHeldWithoutHeadroom) {
    reopen({}, {}, 0);
    if (lacks(Path::kBcopy)) {
        GTEST_SKIP();
    }
    hold_desc_scenario(
        this, *rx_, [this](Send &s) { return send(s); },
        [this](const std::function<bool()> &p) { return wait(p); }, tx_->caps);
}

/* Holding more descriptors than the transport has spare: the rest arrive
 * without DESC (to be copied); after release, DESC comes back. Every held
 * descriptor keeps its bytes and its headroom. */
TEST_P(TagTest, UnexpectedDescHoldMany) {
    if (lacks(Path::kBcopy)) {
        GTEST_SKIP();
    }
    Rng rng(test_seed() ^ 5);
    rx_->unexp.hold_descs(SIZE_MAX);
    std::vector<uint64_t> seeds;
    for (int round = 0; round < 2; ++round) {
        const size_t base = rx_->unexp.messages.size();
        for (int i = 0; i < 400; ++i) {
            seeds.push_back(rng.next());
            Send s(Path::kBcopy, i, 0, seeds.back(), 200 + i);
            ASSERT_EQ(send(s), UCS_OK);
        }
        ASSERT_TRUE(wait([&] { return rx_->unexp.complete_messages() == base + 400; }));
        EXPECT_GT(rx_->unexp.held.size(), 0u) << "round " << round;
        EXPECT_EQ(rx_->unexp.check_held(), "") << "round " << round;
        for (size_t i = base; i < base + 400; ++i) {
            const auto &m = rx_->unexp.messages[i];
            ASSERT_EQ(m.data.size(), 200 + (i - base));
            EXPECT_EQ(pattern_mismatch(m.data.data(), m.data.size(), seeds[i]), SIZE_MAX);
        }
        rx_->unexp.release_held();
    }
    EXPECT_EQ(rx_->unexp.violations, std::vector<std::string>{});
}

/* tm_sm keeps an element's descriptor while messages come one at a time (a
 * sender waiting for each answer: the descriptor just read is the one in
 * both caches), and gives an element read with others queued behind it the
 * least recently used spare one (sm_desc_ring.h), so a streaming sender
 * writes descriptors that rested. FIFO of 4, 12 spare descriptors. */
TEST_P(TagTest, SmDescriptorsRotateOnlyUnderABacklog) {
    if (GetParam() != "tm_sm") {
        GTEST_SKIP() << "tm_sm's receive descriptors";
    }
    reopen({{"FIFO_SIZE", "4"}, {"SPARE_DESCS", "12"}});
    if (lacks(Path::kBcopy)) {
        GTEST_SKIP();
    }
    constexpr size_t kElems = 4, kDescs = 16, kOneByOne = 12, kBatches = 8, kBatch = 3;
    const auto      &seen = rx_->unexp.desc_data;
    uint64_t         seed = 0;
    for (size_t i = 0; i < kOneByOne; ++i) {
        Send s(Path::kBcopy, 0x5eed, 0, seed++, 1000); /* beyond the inline payload */
        ASSERT_EQ(send(s), UCS_OK);
        ASSERT_TRUE(wait([&] { return rx_->unexp.complete_messages() == i + 1; }));
    }
    ASSERT_EQ(seen.size(), kOneByOne) << "each message in a descriptor, with DESC";
    for (size_t i = 0; i + kElems < kOneByOne; ++i) {
        EXPECT_EQ(seen[i], seen[i + kElems]) << "message " << i << ": one at a time, kept";
    }
    EXPECT_EQ(std::set<const void *>(seen.begin(), seen.end()).size(), kElems);
    /* Batches of 3 posted before the receiver progresses: the first two of
     * each are read with another queued, so 2 rotations per batch draw all
     * 12 spares within 6 batches -- of messages of kRotateMinBytes; smaller
     * ones keep their descriptors queued or not. */
    auto batches = [&](size_t length) {
        for (size_t b = 0; b < kBatches; ++b) {
            std::vector<std::unique_ptr<Send>> batch;
            const size_t                       before = rx_->unexp.complete_messages();
            for (size_t k = 0; k < kBatch; ++k) {
                batch.push_back(std::make_unique<Send>(Path::kBcopy, 0x5eed, 0, seed++, length));
                ASSERT_EQ(batch.back()->post(ep_), UCS_OK) << "room for " << kBatch << " of 4";
            }
            ASSERT_TRUE(wait([&] { return rx_->unexp.complete_messages() == before + kBatch; }));
        }
    };
    batches(1000);
    const std::set<const void *> small(seen.begin() + kOneByOne, seen.end());
    EXPECT_EQ(small, std::set<const void *>(seen.begin(), seen.begin() + kOneByOne))
        << "messages below kRotateMinBytes keep their descriptors";
    const size_t big_from = seen.size();
    batches(uct_tm::sm::kRotateMinBytes);
    const std::set<const void *> batched(seen.begin() + big_from, seen.end());
    EXPECT_EQ(batched.size(), kDescs) << "every descriptor used once messages queue";
    EXPECT_EQ(rx_->unexp.violations, std::vector<std::string>{});
}

size_t pack_string(void *dest, void *arg) {
    const auto *data = static_cast<const std::string *>(arg);
    memcpy(dest, data->data(), data->size());
    return data->size();
}

/* BCOPY_MAX above SEG_SIZE (the default before UCX 1.16): a bcopy of any
 * size up to it arrives whole and byte for byte -- an active message in one
 * am_cb call, a tagged one into a posted receive or to eager_cb. */
TEST_P(TagTest, SmBcopyAboveOneDescriptorArrivesWhole) {
    if (GetParam() != "tm_sm") {
        GTEST_SKIP() << "tm_sm's BCOPY_MAX";
    }
    reopen({{"BCOPY_MAX", "64k"}}, {{"BCOPY_MAX", "64k"}});
    ASSERT_EQ(tx_->attr.cap.am.max_bcopy, 65536u);
    ASSERT_EQ(tx_->attr.cap.tag.eager.max_bcopy, 65536u);
    std::vector<std::string> ams;
    ASSERT_EQ(rx_->set_am_log(5, &ams), UCS_OK);
    const size_t seg = tx_->attr.cap.am.max_zcopy; /* one descriptor */
    const std::vector<size_t> sizes = {seg, seg + 1, 3 * seg + 5, 65536};
    for (size_t length : sizes) {
        SCOPED_TRACE(std::to_string(length) + " B");
        std::string data(length, '\0');
        fill_pattern(&data[0], length, length);
        ssize_t sent;
        ASSERT_TRUE(wait([&] {
            sent = uct_ep_am_bcopy(ep_, 5, pack_string, &data, 0);
            return sent != UCS_ERR_NO_RESOURCE;
        }));
        ASSERT_EQ(sent, static_cast<ssize_t>(length));
        ASSERT_TRUE(wait([&] { return !ams.empty(); }));
        drain();
        ASSERT_EQ(ams.size(), 1u) << "one am_cb call per message";
        EXPECT_EQ(ams[0], data);
        ams.clear();

        RecvCtx     r;
        RecvBuffers b(length);
        ASSERT_EQ(post(r, 0x600d + length, kFullMask, b), UCS_OK);
        Send expected(Path::kBcopy, 0x600d + length, 9, length, length);
        ASSERT_EQ(send(expected), UCS_OK);
        ASSERT_TRUE(wait([&] { return r.done(); }));
        EXPECT_EQ(check_delivery(r, b, expected, UCS_OK), "");

        const size_t before = rx_->unexp.complete_messages();
        Send unexpected(Path::kBcopy, 0xbad0 + length, 3, length + 1, length);
        ASSERT_EQ(send(unexpected), UCS_OK);
        ASSERT_TRUE(wait([&] { return rx_->unexp.complete_messages() > before; }));
        const Unexpected::Message &m = rx_->unexp.messages.back();
        EXPECT_EQ(m.tag, unexpected.tag);
        ASSERT_EQ(m.data.size(), length);
        EXPECT_EQ(pattern_mismatch(m.data.data(), length, length + 1), SIZE_MAX);
    }
    EXPECT_EQ(rx_->unexp.violations, std::vector<std::string>{});
}

/* A bcopy's pack callback and where it packed. */
struct RecordedPack {
    std::string data;
    const char *dest = nullptr;
};

size_t pack_recorded(void *dest, void *arg) {
    auto *p = static_cast<RecordedPack *>(arg);
    p->dest = static_cast<const char *>(dest);
    memcpy(dest, p->data.data(), p->data.size());
    return p->data.size();
}

/* With BCOPY_MAX above SEG_SIZE (UCX before 1.16) a bcopy is packed through
 * a window at the receiver's descriptor when the last one fitted a
 * descriptor: one that fits is where the receiver finds it (the pack target
 * and the delivered data are the same memory), a longer one arrives whole.
 * After a longer one, and with BCOPY_IN_PLACE=n, each is packed into one
 * buffer of the sender's and copied in. */
TEST_P(TagTest, SmBcopyPacksInPlaceThroughWindows) {
    if (GetParam() != "tm_sm") {
        GTEST_SKIP() << "tm_sm's bcopy windows";
    }
    for (const bool in_place : {true, false}) {
        SCOPED_TRACE(std::string("BCOPY_IN_PLACE=") + (in_place ? "y" : "n"));
        /* COPY=cached: streamed copies are packed aside (the stream tier's) */
        const Settings s = {{"BCOPY_MAX", "64k"},
                            {"BCOPY_IN_PLACE", in_place ? "y" : "n"},
                            {"COPY", "cached"}};
        reopen(s, s);
        rx_->unexp.hold_descs(1);
        const size_t seg = tx_->attr.cap.am.max_zcopy; /* one descriptor */
        struct Case {
            size_t length;
            bool   windowed; /* with BCOPY_IN_PLACE=y */
        };
        std::set<const char *> aside;
        for (const Case &k : {Case{1000, true}, Case{seg, true}, Case{seg + 1, true},
                              Case{3 * seg + 5, false}, Case{1000, false}, Case{1000, true}}) {
            SCOPED_TRACE(std::to_string(k.length) + " B");
            const bool   windowed = in_place && k.windowed;
            RecordedPack pack;
            pack.data.resize(k.length);
            fill_pattern(&pack.data[0], k.length, k.length);
            const size_t before = rx_->unexp.complete_messages();
            ssize_t      sent;
            ASSERT_TRUE(wait([&] {
                sent = uct_ep_tag_eager_bcopy(ep_, 0x7a9 + k.length, 0, pack_recorded, &pack, 0);
                return sent != UCS_ERR_NO_RESOURCE;
            }));
            ASSERT_EQ(sent, static_cast<ssize_t>(k.length));
            ASSERT_TRUE(wait([&] { return rx_->unexp.complete_messages() > before; }));
            EXPECT_EQ(rx_->unexp.messages.back().data, pack.data);
            if (windowed) {
                EXPECT_EQ(reinterpret_cast<uintptr_t>(pack.dest + seg) % 4096, 0u)
                    << "a window's payload ends on a page";
            } else {
                aside.insert(pack.dest);
            }
            if (k.length <= seg) {
                /* Held by the receiver: is the memory it got the one packed into? */
                ASSERT_EQ(rx_->unexp.held.size(), 1u);
                const char *got = rx_->unexp.held[0].data;
                const_cast<volatile char *>(pack.dest)[0] ^= 0x5a;
                const bool aliased = (got[0] == (pack.data[0] ^ 0x5a));
                const_cast<volatile char *>(pack.dest)[0] ^= 0x5a;
                EXPECT_EQ(aliased, windowed) << "one copy only through a window";
                EXPECT_EQ(rx_->unexp.check_held(), "");
            }
            rx_->unexp.release_held();
        }
        EXPECT_EQ(aside.size(), 1u) << "one buffer of the sender's for those packed aside";
        EXPECT_EQ(rx_->unexp.violations, std::vector<std::string>{});
    }
}

/* A large bcopy that finds room for its first fragment only is accepted and
 * kept by the endpoint: later sends wait behind it (NO_RESOURCE, flush not
 * done) until the receiver makes room, and everything arrives in order. */
TEST_P(TagTest, SmBcopyWithoutRoomWaitsInOrder) {
    if (GetParam() != "tm_sm") {
        GTEST_SKIP() << "tm_sm's endpoint backlog";
    }
    const Settings small = {{"FIFO_SIZE", "8"}, {"SEG_SIZE", "1k"}, {"EAGER_MAX", "4k"},
                            {"BCOPY_MAX", "4k"}};
    reopen(small, small);
    drain();
    std::vector<std::unique_ptr<Send>> shorts;
    for (int i = 0; i < 7; ++i) { /* one of the 8 elements left */
        shorts.emplace_back(new Send(Path::kShort, 0x100 + i, 0, i, 8));
        ASSERT_EQ(shorts.back()->post(ep_), UCS_OK) << i;
    }
    Send big(Path::kBcopy, 0x200, 7, 0x77, 4096);
    ASSERT_EQ(big.post(ep_), UCS_OK) << "accepted without room for its fragments";
    Send after(Path::kShort, 0x300, 0, 0x33, 8);
    EXPECT_EQ(after.post(ep_), UCS_ERR_NO_RESOURCE) << "a later send went ahead of it";
    Completion flushed;
    ASSERT_EQ(uct_ep_flush(ep_, 0, &flushed.comp), UCS_INPROGRESS);
    ASSERT_TRUE(wait([&] { return rx_->unexp.complete_messages() == 8; }));
    ASSERT_TRUE(wait([&] { return flushed.calls == 1; })) << "flush never completed";
    EXPECT_EQ(flushed.status, UCS_OK);
    ASSERT_EQ(send(after), UCS_OK);
    ASSERT_TRUE(wait([&] { return rx_->unexp.complete_messages() == 9; }));
    const auto &got = rx_->unexp.messages;
    for (int i = 0; i < 7; ++i) {
        EXPECT_EQ(got[i].tag, shorts[i]->tag) << i;
    }
    EXPECT_EQ(got[7].tag, big.tag);
    ASSERT_EQ(got[7].data.size(), 4096u);
    EXPECT_EQ(pattern_mismatch(got[7].data.data(), 4096, 0x77), SIZE_MAX);
    EXPECT_EQ(got[8].tag, after.tag);
    EXPECT_EQ(rx_->unexp.violations, std::vector<std::string>{});
}

/* BCOPY_MAX runs from SEG_SIZE to EAGER_MAX: outside, the iface does not open. */
TEST_P(TagTest, SmBcopyMaxOutOfRangeIsRefused) {
    if (GetParam() != "tm_sm") {
        GTEST_SKIP() << "tm_sm's BCOPY_MAX";
    }
    for (const char *value : {"4k", "65537", "1m"}) {
        Node n(*env_, "tm_sm", {{"SEG_SIZE", "8k"}, {"EAGER_MAX", "64k"}, {"BCOPY_MAX", value}});
        EXPECT_EQ(n.status, UCS_ERR_INVALID_PARAM) << "BCOPY_MAX=" << value;
    }
    Node ok(*env_, "tm_sm", {{"SEG_SIZE", "8k"}, {"EAGER_MAX", "64k"}, {"BCOPY_MAX", "8k"}});
    ASSERT_EQ(ok.status, UCS_OK);
    EXPECT_EQ(ok.attr.cap.am.max_bcopy, 8192u);
    EXPECT_EQ(ok.attr.cap.tag.eager.max_bcopy, 8192u);
}

/* ---- rendezvous ------------------------------------------------------------------------- */

TEST_P(TagTest, RndvUnexpectedGetZcopy) {
    if (lacks(Path::kRndv) || !(rx_->caps.flags & UCT_IFACE_FLAG_GET_ZCOPY)) {
        GTEST_SKIP();
    }
    uct_ep_h back = reverse_ep();
    ASSERT_NE(back, nullptr);
    Rng rng(test_seed() ^ 6);
    for (size_t length : tx_->caps.sizes(Path::kRndv)) {
        SCOPED_TRACE("length " + std::to_string(length));
        Send s(Path::kRndv, rng.next(), 0, rng.next(), length);
        ASSERT_EQ(send(s), UCS_OK);
        ASSERT_TRUE(wait([&] { return !rx_->unexp.rndvs.empty(); }));
        ASSERT_EQ(rx_->unexp.rndvs.size(), 1u);
        const Unexpected::Rndv u = rx_->unexp.rndvs.back();
        rx_->unexp.rndvs.clear();
        EXPECT_EQ(u.tag, s.tag);
        EXPECT_EQ(u.header, s.header);
        EXPECT_EQ(u.remote_addr, reinterpret_cast<uintptr_t>(s.payload.data()));
        EXPECT_EQ(u.length, length);
        ASSERT_FALSE(u.rkey.empty()) << "no rkey buffer";

        uct_rkey_bundle_t rkey;
        ASSERT_EQ(uct_rkey_unpack(env_->component(), u.rkey.data(), &rkey), UCS_OK);
        /* All of it, then a piece in the middle. */
        const size_t offsets[][2] = {{0, length}, {length / 3, length / 2}};
        for (const auto &o : offsets) {
            GuardedBuffer   local(o[1]);
            uct_iov_t       iov = {local.data(), o[1], nullptr, 0, 1};
            Completion      c;
            ucs_status_t status = uct_ep_get_zcopy(back, &iov, 1, u.remote_addr + o[0],
                                                   rkey.rkey, &c.comp);
            ASSERT_TRUE((status == UCS_OK) || (status == UCS_INPROGRESS))
                << ucs_status_string(status);
            if (status == UCS_INPROGRESS) {
                ASSERT_TRUE(wait([&] { return c.calls == 1; }));
                EXPECT_EQ(c.status, UCS_OK);
            }
            EXPECT_EQ(pattern_mismatch(local.data(), o[1], s.seed, o[0]), SIZE_MAX);
            EXPECT_TRUE(local.guards_intact());
        }
        uct_rkey_release(env_->component(), &rkey);
        /* The protocol above finished it: the sender withdraws the send and
         * its completion is never called. */
        EXPECT_EQ(uct_ep_tag_rndv_cancel(ep_, s.rndv_op), UCS_OK);
        drain();
        EXPECT_EQ(s.comp->calls, 0);
    }
}

/* Rendezvous sends still outstanding when their endpoint is destroyed are
 * withdrawn with it: their slots come back (2,000 of them, more than an
 * iface has), the iface flushes, their completions are never called, and
 * the receiver can no longer read the buffers. */
TEST_P(TagTest, DestroyedEndpointsReleaseTheirRendezvousSends) {
    if (lacks(Path::kRndv)) {
        GTEST_SKIP();
    }
    const int         rounds = (GetParam() == "tm_sm") ? 2000 : 200;
    std::vector<char> payload(4096, 'r');
    uct_iov_t         iov = {payload.data(), payload.size(), nullptr, 0, 1};
    Completion        orphaned;
    for (int i = 0; i < rounds; ++i) {
        uct_ep_h ep = nullptr, peer_ep = nullptr;
        ASSERT_EQ(tx_->connect_pair(*rx_, &ep, &peer_ep), UCS_OK);
        ucs_status_ptr_t op = nullptr;
        ASSERT_TRUE(wait([&] {
            op = uct_ep_tag_rndv_zcopy(ep, 0x7700 + i, nullptr, 0, &iov, 1, 0, &orphaned.comp);
            return UCS_PTR_STATUS(op) != UCS_ERR_NO_RESOURCE;
        }, 5)) << "round " << i << ": no rendezvous slot left";
        ASSERT_FALSE(UCS_PTR_IS_ERR(op)) << "round " << i << ": "
                                         << ucs_status_string(UCS_PTR_STATUS(op));
        const size_t arrived = rx_->unexp.rndvs.size();
        ASSERT_TRUE(wait([&] { return rx_->unexp.rndvs.size() > arrived; })) << "round " << i;
        uct_ep_destroy(ep);
        if (peer_ep != nullptr) {
            uct_ep_destroy(peer_ep);
        }
    }
    drain();
    EXPECT_EQ(orphaned.calls, 0) << "completion of a send whose endpoint was destroyed";
    Completion flushed;
    ucs_status_t status = uct_iface_flush(tx_->iface, 0, &flushed.comp);
    if (status == UCS_INPROGRESS) {
        EXPECT_TRUE(wait([&] { return flushed.calls == 1; })) << "iface flush never completed";
    } else {
        EXPECT_EQ(status, UCS_OK);
    }
    /* The receiver's late read of one of them: refused, nothing copied. */
    if ((GetParam() == "tm_sm") && !rx_->unexp.rndvs.empty()) {
        const Unexpected::Rndv u = rx_->unexp.rndvs.back();
        uct_rkey_bundle_t      rkey;
        ASSERT_EQ(uct_rkey_unpack(env_->component(), u.rkey.data(), &rkey), UCS_OK);
        GuardedBuffer local(u.length);
        uct_iov_t     liov = {local.data(), u.length, nullptr, 0, 1};
        EXPECT_EQ(uct_ep_get_zcopy(reverse_ep(), &liov, 1, u.remote_addr, rkey.rkey, nullptr),
                  UCS_ERR_CANCELED);
        EXPECT_TRUE(local.untouched(0, u.length));
        uct_rkey_release(env_->component(), &rkey);
    }
    /* And the iface still sends rendezvous. */
    RecvCtx     r;
    RecvBuffers b(8192);
    ASSERT_EQ(post(r, 0x55, kFullMask, b), UCS_OK);
    Send s(Path::kRndv, 0x55, 0, 5, 8192);
    ASSERT_EQ(send(s), UCS_OK);
    ASSERT_TRUE(wait([&] { return r.done(); }));
    EXPECT_EQ(check_delivery(r, b, s, UCS_OK), "");
    EXPECT_TRUE(finish(s));
}

/* A receiver with smaller receive buffers (SEG_SIZE) than its sender: every
 * eager message the sender's caps allow is either delivered intact or
 * refused with UCS_ERR_EXCEEDS_LIMIT, and the connection keeps working (no
 * error, a later message arrives). */
TEST_P(TagTest, SmallerReceiverSegmentsRefuseOrDeliverAndKeepTheConnection) {
    reopen({{"SEG_SIZE", "1k"}}, {{"SEG_SIZE", "8k"}});
    if (HasFatalFailure() || IsSkipped()) {
        return;
    }
    Rng    rng(test_seed() ^ 0x5e6);
    size_t delivered = 0, refused = 0;
    for (Path path : {Path::kShort, Path::kBcopy, Path::kZcopy}) {
        if (lacks(path)) {
            continue;
        }
        for (size_t length : tx_->caps.sizes(path)) {
            SCOPED_TRACE(std::string(path_name(path)) + " " + std::to_string(length) + " B");
            Send               s(path, rng.next(), 7, rng.next(), length);
            const ucs_status_t status = send(s);
            if (status == UCS_ERR_EXCEEDS_LIMIT) {
                ++refused;
                continue;
            }
            ASSERT_EQ(status, UCS_OK);
            ASSERT_TRUE(finish(s));
            ASSERT_TRUE(wait([&] { return rx_->unexp.complete_messages() > delivered; }))
                << "accepted but never delivered";
            ++delivered;
            const Unexpected::Message &m = rx_->unexp.messages.back();
            EXPECT_EQ(m.tag, s.tag);
            EXPECT_EQ(m.data.size(), length);
            EXPECT_EQ(pattern_mismatch(m.data.data(), std::min(m.data.size(), length), s.seed),
                      SIZE_MAX);
        }
    }
    EXPECT_GT(delivered, 0u);
    EXPECT_EQ(rx_->errors.entries.size(), 0u) << "the receiver saw its connection fail";
    EXPECT_EQ(tx_->errors.entries.size(), 0u) << "the sender saw its connection fail";
    Send later(Path::kBcopy, 0x1a7e, 1, 3, 100);
    ASSERT_EQ(send(later), UCS_OK);
    EXPECT_TRUE(wait([&] { return rx_->unexp.complete_messages() > delivered; }))
        << "nothing arrives after the mismatch";
    printf("[          ] %zu delivered, %zu refused\n", delivered, refused);
}

/* tag_rndv_cancel before the receiver matched: the sender's completion is
 * never called, a receive that matches afterwards completes with
 * UCS_ERR_CANCELED without reading the (now released) memory. */
TEST_P(TagTest, RndvCancelBeforeExpectedMatch) {
    if (lacks(Path::kRndv)) {
        GTEST_SKIP();
    }
    expect_rndv_cancel_before_match(0x1234, 100000);
}

/* tm_sm revokes the sender's memory at once. Over RDMA (tm_rc) the buffer
 * stays readable until the receiver acknowledges the cancel, so that a READ
 * in flight never breaks the connection (docs/tm_rc.md): there the test
 * checks that a cancelled send stays silent and the connection keeps working. */
TEST_P(TagTest, RndvCancelAfterUnexpectedArrival) {
    if (lacks(Path::kRndv) || !(rx_->caps.flags & UCT_IFACE_FLAG_GET_ZCOPY)) {
        GTEST_SKIP();
    }
    if (GetParam() != "tm_sm") {
        Send s(Path::kRndv, 0x4321, 0, 12, 5000);
        ASSERT_EQ(send(s), UCS_OK);
        ASSERT_TRUE(wait([&] { return rx_->unexp.rndvs.size() == 1; }));
        ASSERT_EQ(uct_ep_tag_rndv_cancel(ep_, s.rndv_op), UCS_OK);
        EXPECT_NE(uct_ep_tag_rndv_cancel(ep_, s.rndv_op), UCS_OK);
        drain();
        EXPECT_EQ(s.comp->calls, 0);
        /* Both directions still carry messages. */
        RecvCtx     r;
        RecvBuffers b(100);
        ASSERT_EQ(post(r, 0x77, ~uct_tag_t{0}, b), UCS_OK);
        Send e(Path::kBcopy, 0x77, 5, 13, 100);
        ASSERT_EQ(send(e), UCS_OK);
        ASSERT_TRUE(wait([&] { return r.done(); }));
        EXPECT_EQ(check_delivery(r, b, e, UCS_OK), "");
        EXPECT_EQ(tx_->errors.entries.size() + rx_->errors.entries.size(), 0u);
        return;
    }
    uct_ep_h back = reverse_ep();
    ASSERT_NE(back, nullptr);
    Send s(Path::kRndv, 0x4321, 0, 12, 5000);
    ASSERT_EQ(send(s), UCS_OK);
    ASSERT_TRUE(wait([&] { return rx_->unexp.rndvs.size() == 1; }));
    ASSERT_EQ(uct_ep_tag_rndv_cancel(ep_, s.rndv_op), UCS_OK);
    uct_rkey_bundle_t rkey;
    ASSERT_EQ(uct_rkey_unpack(env_->component(), rx_->unexp.rndvs[0].rkey.data(), &rkey), UCS_OK);
    GuardedBuffer local(5000);
    uct_iov_t     iov = {local.data(), 5000, nullptr, 0, 1};
    Completion    c;
    ucs_status_t  status =
        uct_ep_get_zcopy(back, &iov, 1, rx_->unexp.rndvs[0].remote_addr, rkey.rkey, &c.comp);
    if (status == UCS_INPROGRESS) {
        ASSERT_TRUE(wait([&] { return c.calls == 1; }));
        status = c.status;
    }
    EXPECT_NE(status, UCS_OK) << "get_zcopy read a cancelled rendezvous buffer";
    EXPECT_TRUE(local.untouched(0, 5000));
    uct_rkey_release(env_->component(), &rkey);
    drain();
    EXPECT_EQ(s.comp->calls, 0);
}

/* Rendezvous through the pipelined copy (the sender copies into the
 * receiver's staging chunks) instead of CMA: expected, truncated, cancelled. */
TEST_P(TagTest, RndvPipelinedWithoutCma) {
    reopen({{"CMA", "n"}}, {{"CMA", "n"}});
    if (::testing::Test::IsSkipped() || lacks(Path::kRndv)) {
        GTEST_SKIP();
    }
    Rng rng(test_seed() ^ 13);
    for (size_t length : tx_->caps.sizes(Path::kRndv)) {
        for (size_t capacity : {length, length / 2, length + 100}) {
            SCOPED_TRACE("length " + std::to_string(length) + " capacity " +
                         std::to_string(capacity));
            Send        s(Path::kRndv, rng.next(), 0, rng.next(), length);
            RecvCtx     r;
            RecvBuffers b(capacity, std::min<size_t>(2, rx_->caps.recv_max_iov));
            ASSERT_EQ(post(r, s.tag, kFullMask, b), UCS_OK);
            ASSERT_EQ(send(s), UCS_OK);
            ASSERT_TRUE(wait([&] { return r.done() && s.comp->calls > 0; }));
            EXPECT_EQ(check_delivery(r, b, s,
                                     capacity < length ? UCS_ERR_MESSAGE_TRUNCATED : UCS_OK), "");
            EXPECT_EQ(s.comp->calls, 1);
            EXPECT_EQ(s.comp->status, UCS_OK);
        }
    }
    /* Cancelled by the sender before the receiver got to it. */
    expect_rndv_cancel_before_match(0x5678, 200000);
}

/* A SPLIT_TIMEOUT of 0 could never wait for a sender: refused. Timeouts of
 * "inf" are taken, and a rendezvous of split size (1 MiB, from RNDV_SPLIT_MIN
 * up) delivers under them (Clock.DeadlineAfterSaturates: they never expire). */
TEST_P(TagTest, SmTimeoutSettings) {
    if (GetParam() != "tm_sm") {
        GTEST_SKIP() << "tm_sm's timeouts";
    }
    Node zero(*env_, "tm_sm", {{"SPLIT_TIMEOUT", "0"}});
    EXPECT_EQ(zero.status, UCS_ERR_INVALID_PARAM) << "SPLIT_TIMEOUT=0";
    const Settings inf = {{"SPLIT_TIMEOUT", "inf"},
                          {"PEER_CHECK_INTERVAL", "inf"},
                          {"CLOSE_TIMEOUT", "inf"},
                          {"RNDV_SPLIT_MIN", "64k"}};
    reopen(inf, inf);
    if (::testing::Test::IsSkipped() || lacks(Path::kRndv)) {
        GTEST_SKIP();
    }
    Send        s(Path::kRndv, 0x1f, 0, 0x2f, 1 << 20);
    RecvCtx     r;
    RecvBuffers b(1 << 20);
    ASSERT_EQ(post(r, s.tag, kFullMask, b), UCS_OK);
    ASSERT_EQ(send(s), UCS_OK);
    ASSERT_TRUE(wait([&] { return r.done() && s.comp->calls > 0; }));
    EXPECT_EQ(check_delivery(r, b, s, UCS_OK), "");
    EXPECT_EQ(s.comp->status, UCS_OK);
}

TEST_P(TagTest, RndvRequestExpected) {
    if (lacks(Path::kRndv)) {
        GTEST_SKIP();
    }
    const size_t hdr_sizes[] = {0, 17, 1000, tx_->caps.rndv_max_hdr};
    Rng          rng(test_seed() ^ 7);
    for (size_t hdr_len : hdr_sizes) {
        SCOPED_TRACE("header " + std::to_string(hdr_len));
        std::string header(hdr_len, '\0');
        fill_pattern(&header[0], hdr_len, hdr_len);
        const uct_tag_t tag = rng.next();
        RecvCtx         r;
        RecvBuffers     b(4096);
        ASSERT_EQ(post(r, tag, kFullMask, b), UCS_OK);
        ucs_status_t status;
        ASSERT_TRUE(wait([&] {
            status = uct_ep_tag_rndv_request(ep_, tag, header.data(),
                                             static_cast<unsigned>(hdr_len), 0);
            return status != UCS_ERR_NO_RESOURCE;
        }));
        ASSERT_EQ(status, UCS_OK);
        ASSERT_TRUE(wait([&] { return r.done(); }));
        EXPECT_EQ(r.sequence(), "consumed,rndv");
        EXPECT_EQ(r.status, UCS_OK);
        EXPECT_EQ(r.stag, tag);
        EXPECT_EQ(r.header, header);
        if (r.rndv_flags & UCT_TAG_RECV_CB_INLINE_DATA) {
            EXPECT_TRUE(b.untouched());
        } else {
            /* Without INLINE_DATA the header is in the posted buffer: where
             * a NIC's tag matcher places a matched request. */
            EXPECT_EQ(std::string(b.pieces[0].data(), hdr_len), header);
            EXPECT_TRUE(b.pieces[0].untouched(hdr_len, b.pieces[0].size()));
            EXPECT_TRUE(b.pieces[0].guards_intact());
        }
    }
}

/* UCP posts a large receive with its buffer registered, answers a software
 * rendezvous request matching it with a GET issued from rndv_cb, and
 * deregisters the buffer only when rndv_cb returns; the GET's completion
 * checks that the registration is gone (UCP 1.13 asserts, rndv.c). An RDMA
 * READ never completes inside the callback, and neither may a copy: it
 * reports from a later progress, its data already in place. */
/* `length` bytes of pattern `seed`, registered with the env's MD, and the
 * remote key a peer would unpack for them; released on destruction. */
class RemoteSource {
  public:
    RemoteSource(const UctEnv &env, size_t length, uint64_t seed) : env_(env), bytes_(length) {
        fill_pattern(bytes_.data(), length, seed);
        uct_md_attr_t md_attr;
        if ((uct_md_query(env_.md(), &md_attr) != UCS_OK) ||
            (uct_md_mem_reg(env_.md(), bytes_.data(), length, UCT_MD_MEM_ACCESS_ALL, &memh_) !=
             UCS_OK)) {
            return;
        }
        std::string packed(md_attr.rkey_packed_size, '\0');
        unpacked_ = (uct_md_mkey_pack(env_.md(), memh_, &packed[0]) == UCS_OK) &&
                    (uct_rkey_unpack(env_.component(), packed.data(), &rkey_) == UCS_OK);
    }
    ~RemoteSource() {
        if (unpacked_) {
            uct_rkey_release(env_.component(), &rkey_);
        }
        if (memh_ != nullptr) {
            EXPECT_EQ(uct_md_mem_dereg(env_.md(), memh_), UCS_OK);
        }
    }
    RemoteSource(const RemoteSource &)            = delete;
    RemoteSource &operator=(const RemoteSource &) = delete;

    bool               ready() const { return unpacked_; }
    uct_rkey_t         rkey() const { return rkey_.rkey; }
    std::vector<char> &bytes() { return bytes_; }

  private:
    const UctEnv     &env_;
    std::vector<char> bytes_;
    uct_mem_h         memh_ = nullptr;
    uct_rkey_bundle_t rkey_{};
    bool              unpacked_ = false;
};

TEST_P(TagTest, GetFromRndvCallbackCompletesAfterItReturns) {
    if (lacks(Path::kRndv) || !(rx_->caps.flags & UCT_IFACE_FLAG_GET_ZCOPY)) {
        GTEST_SKIP();
    }
    uct_ep_h back = reverse_ep();
    ASSERT_NE(back, nullptr);
    Rng rng(test_seed() ^ 23);
    for (size_t length : {size_t{8}, size_t{4096}, size_t{1} << 20}) {
        SCOPED_TRACE("length " + std::to_string(length));
        const uint64_t     seed = rng.next();
        RemoteSource       src(*env_, length, seed);
        ASSERT_TRUE(src.ready());
        const uct_rkey_t   rkey   = src.rkey();
        std::vector<char> &source = src.bytes();

        GuardedBuffer dest(length);
        Completion    c;
        ucs_status_t  get_status      = UCS_ERR_LAST;
        int           calls_in_the_cb = -1;
        ucs_status_t  iface_flush     = UCS_ERR_LAST;
        RecvCtx       r;
        r.on_done = [&](RecvCtx &) {
            uct_iov_t iov   = {dest.data(), length, nullptr, 0, 1};
            get_status      = uct_ep_get_zcopy(back, &iov, 1, reinterpret_cast<uintptr_t>(
                                                                  source.data()),
                                               rkey, &c.comp);
            calls_in_the_cb = c.calls;
            iface_flush     = uct_iface_flush(rx_->iface, 0, nullptr);
        };
        RecvBuffers     b(4096);
        const uct_tag_t tag = rng.next();
        ASSERT_EQ(post(r, tag, kFullMask, b), UCS_OK);
        const char   header[] = "software rendezvous request";
        ucs_status_t status;
        ASSERT_TRUE(wait([&] {
            status = uct_ep_tag_rndv_request(ep_, tag, header, sizeof(header), 0);
            return status != UCS_ERR_NO_RESOURCE;
        }));
        ASSERT_EQ(status, UCS_OK);
        ASSERT_TRUE(wait([&] { return r.done(); }));
        EXPECT_EQ(r.sequence(), "consumed,rndv");
        EXPECT_EQ(get_status, UCS_INPROGRESS) << ucs_status_string(get_status);
        EXPECT_EQ(calls_in_the_cb, 0) << "the get completed inside rndv_cb";
        EXPECT_EQ(iface_flush, UCS_INPROGRESS) << "the iface flushed with a get not reported";
        if (get_status == UCS_INPROGRESS) {
            ASSERT_TRUE(wait([&] { return c.calls == 1; }));
        }
        EXPECT_EQ(c.calls, 1);
        EXPECT_EQ(c.status, UCS_OK);
        EXPECT_EQ(pattern_mismatch(dest.data(), length, seed), SIZE_MAX);
        EXPECT_TRUE(dest.guards_intact());
        ASSERT_TRUE(wait([&] {
            return uct_ep_flush(back, 0, nullptr) == UCS_OK;
        })) << "the endpoint does not flush after the get completed";
    }
}

/* UCP 1.22 completes a receive matched in ucp_tag_msg_recv_nbx at once, when
 * its rendezvous get completes inside the call, through a path that hands the
 * callback the param's user_data unchecked: a get issued from outside
 * progress reports from progress, once, as an RDMA READ does. */
TEST_P(TagTest, GetFromOutsideProgressCompletesFromProgress) {
    if (!(rx_->caps.flags & UCT_IFACE_FLAG_GET_ZCOPY)) {
        GTEST_SKIP();
    }
    uct_ep_h back = reverse_ep();
    ASSERT_NE(back, nullptr);
    Rng rng(test_seed() ^ 29);
    for (size_t length : {size_t{8}, size_t{65536}, size_t{1148576}}) {
        SCOPED_TRACE("length " + std::to_string(length));
        const uint64_t seed = rng.next();
        RemoteSource   src(*env_, length, seed);
        ASSERT_TRUE(src.ready());

        GuardedBuffer dest(length);
        Completion    c;
        uct_iov_t     iov    = {dest.data(), length, nullptr, 0, 1};
        ucs_status_t  status = UCS_ERR_NO_RESOURCE;
        ASSERT_TRUE(wait([&] {
            status = uct_ep_get_zcopy(back, &iov, 1,
                                      reinterpret_cast<uintptr_t>(src.bytes().data()), src.rkey(),
                                      &c.comp);
            return status != UCS_ERR_NO_RESOURCE;
        }));
        EXPECT_EQ(status, UCS_INPROGRESS) << ucs_status_string(status);
        EXPECT_EQ(c.calls, 0) << "the completion ran inside uct_ep_get_zcopy";
        if (status == UCS_INPROGRESS) {
            ASSERT_TRUE(wait([&] { return c.calls >= 1; }));
        }
        drain(100);
        EXPECT_EQ(c.calls, 1);
        EXPECT_EQ(c.status, UCS_OK);
        EXPECT_EQ(pattern_mismatch(dest.data(), length, seed), SIZE_MAX);
        EXPECT_TRUE(dest.guards_intact());
    }
}

TEST_P(TagTest, RndvRequestUnexpected) {
    if (lacks(Path::kRndv)) {
        GTEST_SKIP();
    }
    const size_t hdr_sizes[] = {0, 17, 1000, tx_->caps.rndv_max_hdr};
    for (size_t hdr_len : hdr_sizes) {
        SCOPED_TRACE("header " + std::to_string(hdr_len));
        std::string header(hdr_len, '\0');
        fill_pattern(&header[0], hdr_len, hdr_len + 1);
        rx_->unexp.rndvs.clear();
        ucs_status_t status;
        ASSERT_TRUE(wait([&] {
            status = uct_ep_tag_rndv_request(ep_, 0xabc + hdr_len, header.data(),
                                             static_cast<unsigned>(hdr_len), 0);
            return status != UCS_ERR_NO_RESOURCE;
        }));
        ASSERT_EQ(status, UCS_OK);
        ASSERT_TRUE(wait([&] { return rx_->unexp.rndvs.size() == 1; }));
        const auto &u = rx_->unexp.rndvs[0];
        EXPECT_EQ(u.tag, 0xabc + hdr_len);
        EXPECT_EQ(u.header, header);
        EXPECT_EQ(u.remote_addr, 0u) << "a software rendezvous request has no remote address";
        EXPECT_EQ(u.length, 0u);
        EXPECT_TRUE(u.rkey.empty()) << "a software rendezvous request has no rkey";
    }
}

/* ---- matching ------------------------------------------------------------------------------ */

TEST_P(TagTest, WrongTagGoesUnexpected) {
    Rng rng(test_seed() ^ 8);
    for (Path path : kAllPaths) {
        if (lacks(path)) {
            continue;
        }
        SCOPED_TRACE(path_name(path));
        rx_->unexp.messages.clear();
        rx_->unexp.rndvs.clear();
        const uct_tag_t tag = rng.next();
        RecvCtx         r;
        RecvBuffers     b(256);
        ASSERT_EQ(post(r, tag, kFullMask, b), UCS_OK);
        const size_t length = std::min<size_t>(64, tx_->caps.sizes(path).back());
        Send         wrong(path, tag ^ 1, 0, 1, length);
        ASSERT_EQ(send(wrong), UCS_OK);
        ASSERT_TRUE(wait([&] {
            return (rx_->unexp.complete_messages() + rx_->unexp.rndvs.size()) == 1;
        }));
        EXPECT_TRUE(r.events.empty());
        EXPECT_TRUE(b.untouched());
        Send right(path, tag, 0, 2, length);
        ASSERT_EQ(send(right), UCS_OK);
        ASSERT_TRUE(wait([&] { return r.done(); }));
        ASSERT_TRUE(finish(right));
        EXPECT_EQ(check_delivery(r, b, right, UCS_OK), "");
        if (path == Path::kRndv) {
            /* The unexpected one is still outstanding on the sender. */
            EXPECT_EQ(uct_ep_tag_rndv_cancel(ep_, wrong.rndv_op), UCS_OK);
        }
    }
}

TEST_P(TagTest, MaskPatterns) {
    if (lacks(Path::kBcopy)) {
        GTEST_SKIP();
    }
    struct Case {
        uct_tag_t recv_tag, mask, msg_tag;
        bool      match;
    };
    const Case cases[] = {
        {0x1111, 0, 0xdeadbeefcafef00dull, true},                       /* wildcard */
        {0x1111, kFullMask, 0x1111, true},                               /* exact */
        {0x1111, kFullMask, 0x1110, false},
        {0xaaaa0000ffff0000ull, 0xffffffff00000000ull, 0xaaab00001234abcdull, false},
        {0xaaaa0000ffff0000ull, 0xffffffff00000000ull, 0xaaaa0000000000ffull, true},
        {0x12345678ull, 0x00000000ffffffffull, 0xffffffff12345678ull, true}, /* low half */
        {0x12345678ull, 0x00000000ffffffffull, 0x12345679ull, false},
        {0xf0f0f0f0f0f0f0f0ull, 0xf0f0f0f0f0f0f0f0ull, 0xfafbfcfdfefff0f1ull, true},
        {0xf0f0f0f0f0f0f0f0ull, 0xf0f0f0f0f0f0f0f0ull, 0xe0f0f0f0f0f0f0f0ull, false},
        /* bits of the posted tag outside the mask do not matter */
        {0xdeadbeefull, 0xffff0000ull, 0xdead0000ull, true},
        {0x8000000000000000ull, 0x8000000000000000ull, 0x8000000000000001ull, true},
        {0x8000000000000000ull, 0x8000000000000000ull, 0x7fffffffffffffffull, false},
    };
    uint64_t seed = 100;
    for (const Case &c : cases) {
        SCOPED_TRACE(::testing::Message() << std::hex << "recv 0x" << c.recv_tag << " mask 0x"
                                          << c.mask << " msg 0x" << c.msg_tag);
        rx_->unexp.messages.clear();
        RecvCtx     r;
        RecvBuffers b(64);
        ASSERT_EQ(post(r, c.recv_tag, c.mask, b), UCS_OK);
        Send s(Path::kBcopy, c.msg_tag, 5, ++seed, 64);
        ASSERT_EQ(send(s), UCS_OK);
        ASSERT_TRUE(wait([&] { return r.done() || (rx_->unexp.complete_messages() == 1); }));
        if (c.match) {
            EXPECT_EQ(check_delivery(r, b, s, UCS_OK), "");
        } else {
            EXPECT_TRUE(r.events.empty());
            EXPECT_EQ(rx_->unexp.messages.at(0).tag, c.msg_tag);
            /* Gone before the next case's message: a NIC's list removes it
             * when its DEL executes, which a forced cancel does not wait for. */
            EXPECT_EQ(uct_iface_tag_recv_cancel(rx_->iface, &r.ctx, 0), UCS_OK);
            ASSERT_TRUE(wait([&] { return r.done(); }));
            EXPECT_EQ(r.status, UCS_ERR_CANCELED);
        }
    }
}

/* The earliest posted matching receive wins, exact and masked interleaved. */
TEST_P(TagTest, EarliestPostedMatchingReceiveWins) {
    if (lacks(Path::kShort)) {
        GTEST_SKIP();
    }
    const uct_tag_t A = 0x0100000000000001ull, A2 = 0x0100000000000002ull;
    const uct_tag_t B = 0x0200000000000001ull, hi = 0xff00000000000000ull;
    struct Post {
        uct_tag_t tag, mask;
    };
    const Post posts[] = {
        {A, kFullMask},  /* 0 */
        {A, hi},         /* 1: class of A */
        {A, kFullMask},  /* 2 */
        {0, 0},          /* 3: wildcard */
        {B, kFullMask},  /* 4 */
        {A2, kFullMask}, /* 5 */
    };
    /* message tag -> receive it must land in (-1: unexpected) */
    const std::pair<uct_tag_t, int> msgs[] = {
        {A, 0}, {A, 1}, {B, 3}, {A, 2}, {A2, 5}, {B, 4}, {A, -1}, {B, -1},
    };
    std::vector<std::unique_ptr<RecvCtx>>     ctxs;
    std::vector<std::unique_ptr<RecvBuffers>> bufs;
    for (const Post &p : posts) {
        ctxs.emplace_back(new RecvCtx);
        bufs.emplace_back(new RecvBuffers(8));
        ASSERT_EQ(post(*ctxs.back(), p.tag, p.mask, *bufs.back()), UCS_OK);
    }
    std::vector<std::unique_ptr<Send>> sends;
    for (size_t i = 0; i < sizeof(msgs) / sizeof(msgs[0]); ++i) {
        sends.emplace_back(new Send(Path::kShort, msgs[i].first, 0, 1000 + i, 8));
        ASSERT_EQ(send(*sends.back()), UCS_OK);
    }
    ASSERT_TRUE(wait([&] {
        return std::all_of(ctxs.begin(), ctxs.end(), [](const auto &c) { return c->done(); }) &&
               rx_->unexp.complete_messages() == 2;
    }));
    for (size_t i = 0; i < sizeof(msgs) / sizeof(msgs[0]); ++i) {
        if (msgs[i].second < 0) {
            continue;
        }
        SCOPED_TRACE("message " + std::to_string(i));
        const size_t k = static_cast<size_t>(msgs[i].second);
        EXPECT_EQ(check_delivery(*ctxs[k], *bufs[k], *sends[i], UCS_OK), "");
    }
    ASSERT_EQ(rx_->unexp.messages.size(), 2u);
    EXPECT_EQ(rx_->unexp.messages[0].data, std::string(sends[6]->payload.begin(), sends[6]->payload.end()));
    EXPECT_EQ(rx_->unexp.messages[1].data, std::string(sends[7]->payload.begin(), sends[7]->payload.end()));
}

/* Random exact / masked / wildcard receives against a linear model of UCT's
 * rule: each arrival takes the earliest posted receive it matches. */
TEST_P(TagTest, MatchingAgreesWithModel) {
    if (lacks(Path::kShort)) {
        GTEST_SKIP();
    }
    Rng             rng(test_seed() ^ 9);
    const uct_tag_t masks[] = {kFullMask, kFullMask, 0xff00ull, 0xf0f0ull, 0x0fffull, 0};
    struct Posted {
        uct_tag_t                    tag, mask;
        std::unique_ptr<RecvCtx>     ctx;
        std::unique_ptr<RecvBuffers> buf;
        long                         expect = -1; /* message index */
    };
    std::deque<Posted> posted;
    std::vector<long>  unexpected_model;
    long               sent = 0;
    for (int round = 0; round < 12; ++round) {
        const size_t nposts = rng.range(0, 25);
        for (size_t i = 0; i < nposts; ++i) {
            Posted p;
            p.tag  = rng.range(0, 0xffff);
            p.mask = masks[rng.range(0, 5)];
            p.ctx.reset(new RecvCtx);
            p.buf.reset(new RecvBuffers(8));
            ASSERT_EQ(post(*p.ctx, p.tag, p.mask, *p.buf), UCS_OK);
            posted.push_back(std::move(p));
        }
        const size_t nmsgs = rng.range(1, 30);
        for (size_t i = 0; i < nmsgs; ++i, ++sent) {
            const uct_tag_t tag = rng.range(0, 0xffff);
            Send            s(Path::kShort, tag, 0, static_cast<uint64_t>(sent), 8);
            ASSERT_EQ(send(s), UCS_OK);
            auto it = std::find_if(posted.begin(), posted.end(), [&](const Posted &p) {
                return (p.expect < 0) && ((tag & p.mask) == (p.tag & p.mask));
            });
            if (it != posted.end()) {
                it->expect = sent;
            } else {
                unexpected_model.push_back(sent);
            }
        }
        ASSERT_TRUE(wait([&] {
            size_t done = 0;
            for (const Posted &p : posted) {
                done += p.ctx->done();
            }
            return done + rx_->unexp.complete_messages() == static_cast<size_t>(sent);
        }));
    }
    for (Posted &p : posted) {
        if (p.expect < 0) {
            EXPECT_TRUE(p.ctx->events.empty());
            EXPECT_EQ(uct_iface_tag_recv_cancel(rx_->iface, &p.ctx->ctx, 1), UCS_OK);
            continue;
        }
        EXPECT_EQ(p.ctx->sequence(), "consumed,completed");
        EXPECT_EQ(p.buf->check(static_cast<uint64_t>(p.expect), 8), "")
            << "receive (0x" << std::hex << p.tag << ", 0x" << p.mask << ") got the wrong message";
    }
    ASSERT_EQ(rx_->unexp.messages.size(), unexpected_model.size());
    for (size_t i = 0; i < unexpected_model.size(); ++i) {
        EXPECT_EQ(pattern_mismatch(rx_->unexp.messages[i].data.data(), 8,
                                   static_cast<uint64_t>(unexpected_model[i])),
                  SIZE_MAX)
            << "unexpected message " << i;
    }
}

/* Active messages and tagged messages on the same endpoint, interleaved. */
TEST_P(TagTest, AmInterleavedWithTags) {
    if (lacks(Path::kBcopy) || !(rx_->caps.flags & UCT_IFACE_FLAG_AM_SHORT)) {
        GTEST_SKIP();
    }
    std::vector<std::string> am_log;
    const uint8_t            id = 13;
    ASSERT_EQ(rx_->set_am_log(id, &am_log), UCS_OK);
    RecvCtx     r1, r2;
    RecvBuffers b1(100), b2(3000);
    ASSERT_EQ(post(r1, 1, kFullMask, b1), UCS_OK);
    ASSERT_EQ(post(r2, 2, kFullMask, b2), UCS_OK);
    const uint64_t am_header = 0x0102030405060708ull;
    const char     am_payload[] = "payload";
    std::string    zhdr(16, 'h');
    std::string    zdata(1000, 'z');
    Send           t1(Path::kBcopy, 1, 11, 21, 100);
    Send           t3(Path::kShort, 3, 0, 23, 20);
    Send           t2(Path::kBcopy, 2, 12, 22, 3000);
    auto am_short = [&] { return uct_ep_am_short(ep_, id, am_header, am_payload, sizeof(am_payload)); };
    auto am_zcopy = [&] {
        uct_iov_t iov = {&zdata[0], zdata.size(), nullptr, 0, 1};
        return uct_ep_am_zcopy(ep_, id, zhdr.data(), static_cast<unsigned>(zhdr.size()), &iov, 1,
                               0, nullptr);
    };
    auto retry = [&](const std::function<ucs_status_t()> &op) {
        ucs_status_t status;
        wait([&] {
            status = op();
            return status != UCS_ERR_NO_RESOURCE;
        });
        return status;
    };
    ASSERT_EQ(retry(am_short), UCS_OK);
    ASSERT_EQ(send(t1), UCS_OK);
    ASSERT_EQ(send(t3), UCS_OK);
    const ucs_status_t zs = retry(am_zcopy);
    ASSERT_TRUE(zs == UCS_OK || zs == UCS_INPROGRESS) << ucs_status_string(zs);
    ASSERT_EQ(send(t2), UCS_OK);
    ASSERT_EQ(retry(am_short), UCS_OK);
    ASSERT_TRUE(wait([&] {
        return r1.done() && r2.done() && am_log.size() == 3 && rx_->unexp.complete_messages() == 1;
    }));
    EXPECT_EQ(check_delivery(r1, b1, t1, UCS_OK), "");
    EXPECT_EQ(check_delivery(r2, b2, t2, UCS_OK), "");
    std::string short_msg(reinterpret_cast<const char *>(&am_header), sizeof(am_header));
    short_msg.append(am_payload, sizeof(am_payload));
    EXPECT_EQ(am_log[0], short_msg);
    EXPECT_EQ(am_log[1], zhdr + zdata);
    EXPECT_EQ(am_log[2], short_msg);
    EXPECT_EQ(rx_->unexp.messages[0].tag, 3u);
}

/* ---- cancellation ---------------------------------------------------------------------------- */

TEST_P(TagTest, CancelForceHasNoCallbackAndCtxIsReusable) {
    if (lacks(Path::kBcopy)) {
        GTEST_SKIP();
    }
    RecvCtx     r;
    RecvBuffers b(128);
    ASSERT_EQ(post(r, 42, kFullMask, b), UCS_OK);
    ASSERT_EQ(uct_iface_tag_recv_cancel(rx_->iface, &r.ctx, 1), UCS_OK);
    drain();
    EXPECT_TRUE(r.events.empty());
    /* The tag no longer matches it. */
    Send s1(Path::kBcopy, 42, 1, 31, 128);
    ASSERT_EQ(send(s1), UCS_OK);
    ASSERT_TRUE(wait([&] { return rx_->unexp.complete_messages() == 1; }));
    EXPECT_TRUE(r.events.empty());
    EXPECT_TRUE(b.untouched());
    /* Same ctx, same buffer, posted again: works normally. */
    r.reset();
    ASSERT_EQ(post(r, 42, kFullMask, b), UCS_OK);
    Send s2(Path::kBcopy, 42, 2, 32, 128);
    ASSERT_EQ(send(s2), UCS_OK);
    ASSERT_TRUE(wait([&] { return r.done(); }));
    EXPECT_EQ(check_delivery(r, b, s2, UCS_OK), "");
}

TEST_P(TagTest, CancelNoForceCompletesCanceledFromProgress) {
    RecvCtx     r;
    RecvBuffers b(128);
    ASSERT_EQ(post(r, 43, kFullMask, b), UCS_OK);
    ASSERT_EQ(uct_iface_tag_recv_cancel(rx_->iface, &r.ctx, 0), UCS_OK);
    EXPECT_TRUE(r.events.empty()) << "completed_cb called from inside tag_recv_cancel";
    ASSERT_TRUE(wait([&] { return r.done(); }));
    drain();
    EXPECT_EQ(r.sequence(), "completed");
    EXPECT_EQ(r.status, UCS_ERR_CANCELED);
    /* As UCX's own tag-offload transports report it (rc_mlx5): the posted
     * tag and the buffer's length; callers check both. */
    EXPECT_EQ(r.stag, 43u);
    EXPECT_EQ(r.length, 128u);
    EXPECT_TRUE(b.untouched());
    /* Done: the ctx is unknown again. */
    EXPECT_NE(uct_iface_tag_recv_cancel(rx_->iface, &r.ctx, 0), UCS_OK);
    EXPECT_NE(uct_iface_tag_recv_cancel(rx_->iface, &r.ctx, 1), UCS_OK);
}

/* A forced cancel means that nothing writes into the receive's buffer once it
 * returns (the caller may free it). tm_sm's pipeline through staging chunks
 * (no CMA) copies a rendezvous message over many progress calls; the buffer
 * gets a canary right after the cancel and the transfer then runs out. (A
 * direct CMA read is done within the call that matches; a split copy's
 * cancel waits out the sender's write in flight.) */
TEST_P(TagTest, ForceCancelMidRendezvousWritesNothingAfter) {
    if (GetParam() != "tm_sm") {
        GTEST_SKIP() << "tm_sm's piecewise rendezvous copies";
    }
    const std::vector<std::pair<const char *, Settings>> modes = {
        {"pipelined through staging chunks",
         {{"CMA", "n"}, {"STAGING_CHUNKS", "2"}, {"STAGING_CHUNK_SIZE", "4k"}}},
    };
    constexpr size_t kLength = 4 << 20;
    for (const auto &mode : modes) {
        SCOPED_TRACE(mode.first);
        reopen(mode.second, mode.second);
        /* Its own mapping: made inaccessible right after the cancel, so any
         * later write into it faults (as it would into memory the user freed). */
        void *mem = mmap(nullptr, kLength, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
        ASSERT_NE(mem, MAP_FAILED);
        char     *buffer = static_cast<char *>(mem);
        RecvCtx   r;
        uct_iov_t iov = {buffer, kLength, nullptr, 0, 1};
        ASSERT_EQ(uct_iface_tag_recv_zcopy(rx_->iface, 0x55, ~uct_tag_t{0}, &iov, 1, &r.ctx),
                  UCS_OK);
        Send s(Path::kRndv, 0x55, 0, 21, kLength);
        ASSERT_EQ(send(s), UCS_OK);
        /* Mid-transfer: the first bytes arrived, the receive is not done. */
        ASSERT_TRUE(wait([&] { return r.done() || (buffer[0] != 0) || (buffer[kLength - 1] != 0); }));
        if (r.done()) {
            ADD_FAILURE() << "the whole message arrived in one progress call: nothing to test";
            munmap(mem, kLength);
            continue;
        }
        ASSERT_EQ(uct_iface_tag_recv_cancel(rx_->iface, &r.ctx, 1), UCS_OK);
        ASSERT_EQ(mmap(mem, kLength, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED, -1, 0), mem);
        ASSERT_TRUE(finish(s)) << "the sender's rendezvous never completed";
        drain(); /* a write into the buffer now would kill the test with SIGSEGV */
        munmap(mem, kLength);
        EXPECT_EQ(r.count(RecvCtx::kCompleted) + r.count(RecvCtx::kRndv), 0)
            << "a callback after the forced cancel";
    }
}

/* A receive force-cancelled from inside its own tag_consumed_cb is the
 * user's again when the cancel returns, as any forced cancel: the callback
 * fills it with a canary, and no path of any transport writes into it (or
 * calls it back) afterwards, whatever the message size and fragments.
 * Over a NIC's tag list (tm_rc's device model) the NIC may still place a
 * message it matched until its DEL executes, as with UCX's rc_mlx5
 * (docs/tm_hw_list.md): there only the silence is checked here, and the
 * receives software claims are checked by TmRaces in tests/ib. */
TEST_P(TagTest, ForceCancelInConsumedCallbackWritesNothingAfter) {
    constexpr char kCanary = 0x3c;
    Rng rng(test_seed() ^ 27);
    for (Path path : kAllPaths) {
        if (lacks(path)) {
            continue;
        }
        for (size_t length : tx_->caps.sizes(path)) {
            for (size_t ri : {size_t{1}, std::min<size_t>(3, rx_->caps.recv_max_iov)}) {
                SCOPED_TRACE(std::string(path_name(path)) + " length " + std::to_string(length) +
                             " recv iov " + std::to_string(ri));
                Send        s(path, rng.next(), rng.next() | 1, rng.next(), length);
                RecvCtx     r;
                RecvBuffers b(length, ri);
                ucs_status_t cancel_status = UCS_INPROGRESS;
                r.on_consumed = [&](RecvCtx &self) {
                    cancel_status = uct_iface_tag_recv_cancel(rx_->iface, &self.ctx, 1);
                    for (GuardedBuffer &piece : b.pieces) {
                        memset(piece.data(), kCanary, piece.size());
                    }
                };
                ASSERT_EQ(post(r, s.tag, kFullMask, b), UCS_OK);
                ASSERT_EQ(send(s), UCS_OK);
                ASSERT_TRUE(wait([&] { return r.consumed(); })) << "never matched";
                ASSERT_TRUE(finish(s)) << "the sender never completed";
                drain();
                EXPECT_EQ(cancel_status, UCS_OK);
                EXPECT_EQ(r.sequence(), "consumed") << "a callback after the forced cancel";
                for (const GuardedBuffer &piece : b.pieces) {
                    const char *p = piece.data();
                    if (!hw_tag_list()) {
                        EXPECT_EQ(std::count(p, p + piece.size(), kCanary),
                                  static_cast<std::ptrdiff_t>(piece.size()))
                            << "written into a receive after it was cancelled with force";
                    }
                    EXPECT_TRUE(piece.guards_intact());
                }
                EXPECT_TRUE(rx_->unexp.messages.empty());
            }
        }
    }
}

TEST_P(TagTest, CancelUnknownCtxIsAnError) {
    RecvCtx never;
    EXPECT_NE(uct_iface_tag_recv_cancel(rx_->iface, &never.ctx, 0), UCS_OK);
    EXPECT_NE(uct_iface_tag_recv_cancel(rx_->iface, &never.ctx, 1), UCS_OK);
    /* Garbage in the private area. */
    Rng rng(test_seed() ^ 10);
    for (int i = 0; i < 64; ++i) {
        RecvCtx junk;
        for (char &c : junk.ctx.priv) {
            c = static_cast<char>(rng.next());
        }
        EXPECT_NE(uct_iface_tag_recv_cancel(rx_->iface, &junk.ctx, i & 1), UCS_OK);
    }
    /* Posted on another iface. */
    RecvCtx     other;
    RecvBuffers b(16);
    ASSERT_EQ(uct_iface_tag_recv_zcopy(tx_->iface, 5, kFullMask, b.iov.data(), 1, &other.ctx),
              UCS_OK);
    EXPECT_NE(uct_iface_tag_recv_cancel(rx_->iface, &other.ctx, 1), UCS_OK);
    EXPECT_EQ(uct_iface_tag_recv_cancel(tx_->iface, &other.ctx, 1), UCS_OK);
    /* Already completed. */
    RecvCtx     done;
    RecvBuffers db(16);
    ASSERT_EQ(post(done, 6, kFullMask, db), UCS_OK);
    Send s(Path::kBcopy, 6, 0, 1, 16);
    if (!lacks(s.path)) {
        ASSERT_EQ(send(s), UCS_OK);
        ASSERT_TRUE(wait([&] { return done.done(); }));
        EXPECT_NE(uct_iface_tag_recv_cancel(rx_->iface, &done.ctx, 0), UCS_OK);
        EXPECT_NE(uct_iface_tag_recv_cancel(rx_->iface, &done.ctx, 1), UCS_OK);
        EXPECT_EQ(done.sequence(), "consumed,completed");
    }
}

/* The message is in flight (sent, not yet progressed) when the receive is
 * cancelled: cancel wins, the message goes to the unexpected callback, and
 * the receive sees exactly one completion (UCS_ERR_CANCELED) or, forced,
 * none at all. On a NIC's tag list the engine may match the message before
 * it executes the removal (tm_rc's model with a random schedule): then the
 * receive completes normally, or, forced, silently took the message. */
TEST_P(TagTest, CancelRacingArrivalBeforeProgress) {
    const bool hw = hw_tag_list();
    for (Path path : kAllPaths) {
        if (lacks(path)) {
            continue;
        }
        for (int force = 0; force < 2; ++force) {
            SCOPED_TRACE(std::string(path_name(path)) + (force ? " force" : " no force"));
            rx_->unexp.messages.clear();
            rx_->unexp.rndvs.clear();
            RecvCtx     r;
            RecvBuffers b(tx_->caps.sizes(path)[1]);
            ASSERT_EQ(post(r, 77, kFullMask, b), UCS_OK);
            Send s(path, 77, 0, 41, b.capacity());
            ASSERT_EQ(s.post(ep_), UCS_OK);
            ASSERT_EQ(uct_iface_tag_recv_cancel(rx_->iface, &r.ctx, force), UCS_OK);
            const auto unexpected = [&] {
                return rx_->unexp.complete_messages() + rx_->unexp.rndvs.size();
            };
            if (hw) {
                drain(2000);
                if ((unexpected() == 0) && (force || r.status == UCS_OK)) {
                    SCOPED_TRACE("the engine matched before it removed the receive");
                    EXPECT_EQ(r.sequence(), force ? "" : "consumed,completed");
                    if ((path == Path::kRndv) && !force) {
                        EXPECT_TRUE(finish(s));
                    }
                    continue;
                }
            }
            ASSERT_TRUE(wait([&] { return (force || r.done()) && (unexpected() == 1); }));
            drain();
            EXPECT_EQ(r.sequence(), force ? "" : "completed");
            if (!force) {
                EXPECT_EQ(r.status, UCS_ERR_CANCELED);
            }
            EXPECT_TRUE(b.untouched());
            if (path == Path::kRndv) {
                EXPECT_EQ(uct_ep_tag_rndv_cancel(ep_, s.rndv_op), UCS_OK);
            }
        }
    }
}

/* The message already completed the receive: cancel is an error and adds
 * no callback. */
TEST_P(TagTest, CancelAfterCompletionIsAnError) {
    for (Path path : kAllPaths) {
        if (lacks(path)) {
            continue;
        }
        SCOPED_TRACE(path_name(path));
        RecvCtx     r;
        RecvBuffers b(tx_->caps.sizes(path)[1]);
        ASSERT_EQ(post(r, 78, kFullMask, b), UCS_OK);
        Send s(path, 78, 0, 42, b.capacity());
        ASSERT_EQ(send(s), UCS_OK);
        ASSERT_TRUE(wait([&] { return r.done(); }));
        ASSERT_TRUE(finish(s));
        EXPECT_NE(uct_iface_tag_recv_cancel(rx_->iface, &r.ctx, 0), UCS_OK);
        EXPECT_NE(uct_iface_tag_recv_cancel(rx_->iface, &r.ctx, 1), UCS_OK);
        drain();
        EXPECT_EQ(check_delivery(r, b, s, UCS_OK), "");
    }
}

/* Cancel while a multi-fragment message is half placed into the receive
 * (consumed, not completed): without force it completes normally; with
 * force there is no callback and nothing more is written into the buffer. */
TEST_P(TagTest, CancelMidMessage) {
    reopen({{"PROGRESS_BUDGET", "1"}});
    if (::testing::Test::IsSkipped() || lacks(Path::kZcopyMulti)) {
        GTEST_SKIP();
    }
    const size_t length = tx_->caps.max_zcopy;
    for (int force = 0; force < 2; ++force) {
        SCOPED_TRACE(force ? "force" : "no force");
        RecvCtx     r;
        RecvBuffers b(length);
        ASSERT_EQ(post(r, 79, kFullMask, b), UCS_OK);
        Send s(Path::kZcopyMulti, 79, 5, 43 + force, length, 2);
        ASSERT_EQ(send(s), UCS_OK);
        ASSERT_TRUE(wait([&] { return r.consumed(); }));
        ASSERT_FALSE(r.done()) << "PROGRESS_BUDGET=1 did not split the message";
        /* What was written so far: up to the last byte that changed (a
         * written byte may happen to equal the fill value). */
        size_t written = length;
        while ((written > 0) && b.pieces[0].untouched(written - 1, written)) {
            --written;
        }
        ASSERT_LT(written, length);
        ASSERT_EQ(uct_iface_tag_recv_cancel(rx_->iface, &r.ctx, force), UCS_OK);
        if (!force) {
            ASSERT_TRUE(wait([&] { return r.done(); }));
            EXPECT_EQ(check_delivery(r, b, s, UCS_OK), "");
        } else {
            drain(2000);
            EXPECT_EQ(r.sequence(), "consumed");
            EXPECT_TRUE(b.pieces[0].untouched(written, length))
                << "written into a receive after it was cancelled with force";
            EXPECT_TRUE(b.pieces[0].guards_intact());
        }
        /* The iface goes on normally. */
        RecvCtx     r2;
        RecvBuffers b2(100);
        ASSERT_EQ(post(r2, 80, kFullMask, b2), UCS_OK);
        Send s2(Path::kBcopy, 80, 1, 50, 100);
        ASSERT_EQ(send(s2), UCS_OK);
        ASSERT_TRUE(wait([&] { return r2.done(); }));
        EXPECT_EQ(check_delivery(r2, b2, s2, UCS_OK), "");
        EXPECT_TRUE(rx_->unexp.messages.empty());
    }
}

/* ---- limits ---------------------------------------------------------------------------------- */

TEST_P(TagTest, ListLimitExceeded) {
    reopen({{"TAG_LIST_SIZE", "4"}});
    if (::testing::Test::IsSkipped()) {
        return;
    }
    ASSERT_EQ(rx_->caps.recv_max_outstanding, 4u);
    std::deque<RecvCtx>     ctxs(6);
    std::deque<RecvBuffers> bufs;
    for (int i = 0; i < 6; ++i) {
        bufs.emplace_back(32);
    }
    for (int i = 0; i < 4; ++i) {
        ASSERT_EQ(post(ctxs[i], 100 + i, kFullMask, bufs[i]), UCS_OK) << i;
    }
    EXPECT_EQ(post(ctxs[4], 104, kFullMask, bufs[4]), UCS_ERR_EXCEEDS_LIMIT);
    EXPECT_EQ(post(ctxs[4], 104, kFullMask, bufs[4]), UCS_ERR_EXCEEDS_LIMIT);
    EXPECT_TRUE(ctxs[4].events.empty());
    /* A completed receive frees its place. */
    if (!lacks(Path::kBcopy)) {
        Send s(Path::kBcopy, 100, 0, 1, 32);
        ASSERT_EQ(send(s), UCS_OK);
        ASSERT_TRUE(wait([&] { return ctxs[0].done(); }));
        ASSERT_EQ(post_when_room(ctxs[4], 104, bufs[4]), UCS_OK);
        EXPECT_EQ(post(ctxs[5], 105, kFullMask, bufs[5]), UCS_ERR_EXCEEDS_LIMIT);
    }
    /* So does a cancelled one: at once in software, once the list has
     * executed the removal on a NIC's tag list (a progress call). */
    ASSERT_EQ(uct_iface_tag_recv_cancel(rx_->iface, &ctxs[1].ctx, 1), UCS_OK);
    EXPECT_EQ(post_when_room(ctxs[5], 105, bufs[5]), UCS_OK);
}

/* A context already posted is refused, whatever its buffer, until it
 * completed or was cancelled. */
TEST_P(TagTest, SameContextPostedTwiceIsRefused) {
    RecvCtx     a;
    RecvBuffers buf(64), other(64);
    ASSERT_EQ(post(a, 200, kFullMask, buf), UCS_OK);
    EXPECT_EQ(post(a, 200, kFullMask, buf), UCS_ERR_ALREADY_EXISTS);
    EXPECT_EQ(post(a, 201, kFullMask, other), UCS_ERR_ALREADY_EXISTS);
    /* Cancelled without force: still refused until its completion ran. */
    ASSERT_EQ(uct_iface_tag_recv_cancel(rx_->iface, &a.ctx, 0), UCS_OK);
    EXPECT_EQ(post(a, 200, kFullMask, buf), UCS_ERR_ALREADY_EXISTS);
    ASSERT_TRUE(wait([&] { return a.done(); }));
    EXPECT_EQ(a.status, UCS_ERR_CANCELED);
    RecvCtx b;
    ASSERT_EQ(post(b, 202, kFullMask, buf), UCS_OK);
    EXPECT_EQ(uct_iface_tag_recv_cancel(rx_->iface, &b.ctx, 1), UCS_OK);
    /* The context is free at once; a NIC's list takes the buffer again
     * once it executed the removal (a progress call). */
    EXPECT_EQ(post_when_room(b, 202, buf), UCS_OK) << "free after a forced cancel";
    EXPECT_EQ(uct_iface_tag_recv_cancel(rx_->iface, &b.ctx, 1), UCS_OK);
}

/* One buffer in two receives: software matching takes both, each receive
 * gets its own message in turn (MPI benchmarks post every receive of a
 * window into one buffer); a NIC's tag list refuses the second as rc_mlx5
 * does, and takes the buffer again once the first completed. */
TEST_P(TagTest, SameBufferPostedTwice) {
    RecvCtx     a, b;
    RecvBuffers buf(64);
    ASSERT_EQ(post(a, 200, kFullMask, buf), UCS_OK);
    const ucs_status_t second = post(b, 201, kFullMask, buf);
    if (hw_tag_list()) {
        EXPECT_EQ(second, UCS_ERR_ALREADY_EXISTS);
    } else {
        EXPECT_EQ(second, UCS_OK);
    }
    if (!lacks(Path::kBcopy)) {
        Send s(Path::kBcopy, 200, 0, 3, 64);
        ASSERT_EQ(send(s), UCS_OK);
        ASSERT_TRUE(wait([&] { return a.done(); }));
        EXPECT_EQ(check_delivery(a, buf, s, UCS_OK), "");
        EXPECT_TRUE(b.events.empty());
        if (second != UCS_OK) { /* free again once the first receive completed */
            ASSERT_EQ(post(b, 201, kFullMask, buf), UCS_OK);
        }
        Send t(Path::kBcopy, 201, 0, 4, 64);
        ASSERT_EQ(send(t), UCS_OK);
        ASSERT_TRUE(wait([&] { return b.done(); }));
        EXPECT_EQ(check_delivery(b, buf, t, UCS_OK), "");
        EXPECT_EQ(a.events.size(), 2u) << "consumed, completed: nothing more";
    } else {
        EXPECT_EQ(uct_iface_tag_recv_cancel(rx_->iface, &a.ctx, 1), UCS_OK);
        if (second == UCS_OK) {
            EXPECT_EQ(uct_iface_tag_recv_cancel(rx_->iface, &b.ctx, 1), UCS_OK);
        }
    }
}

/* ---- truncation ------------------------------------------------------------------------------- */

/* A message longer than the posted buffers fills them and completes with
 * UCS_ERR_MESSAGE_TRUNCATED and the sender's full length; nothing is written
 * past the buffers. Every path, single and multi-entry receive iovs. */
TEST_P(TagTest, TruncationEveryPath) {
    if (GetParam() == "tm_sm") {
        reopen({{"RECV_MIN", "0"}}); /* every capacity: tm_sm takes them all (below) */
    }
    Rng rng(test_seed() ^ 11);
    for (Path path : kAllPaths) {
        if (lacks(path)) {
            continue;
        }
        for (size_t length : tx_->caps.sizes(path)) {
            if (length == 0) {
                continue;
            }
            const size_t capacities[] = {0, 1, length / 2, length - 1};
            const size_t recv_iovs[]  = {1, std::min<size_t>(3, rx_->caps.recv_max_iov)};
            for (size_t capacity : capacities) {
                /* Below min_recv a NIC's list cannot finish a rendezvous (it
                 * puts TMH and RVH into the buffer): the layer above does not
                 * offload such receives. */
                if ((capacity >= length) || (capacity < rx_->attr.cap.tag.recv.min_recv)) {
                    continue;
                }
                for (size_t ri : recv_iovs) {
                    SCOPED_TRACE(std::string(path_name(path)) + " length " +
                                 std::to_string(length) + " capacity " + std::to_string(capacity) +
                                 " recv iov " + std::to_string(ri));
                    Send        s(path, rng.next(), rng.next() | 1, rng.next(), length, 2);
                    RecvCtx     r;
                    RecvBuffers b(capacity, ri);
                    ASSERT_EQ(post(r, s.tag, kFullMask, b), UCS_OK);
                    ASSERT_EQ(send(s), UCS_OK);
                    ASSERT_TRUE(wait([&] {
                        return r.done() && (!s.comp_pending || s.comp->calls > 0);
                    }));
                    EXPECT_EQ(check_delivery(r, b, s, UCS_ERR_MESSAGE_TRUNCATED), "");
                    if (path == Path::kRndv) {
                        /* The sender's operation is over either way. */
                        EXPECT_EQ(s.comp->calls, 1);
                    }
                }
            }
        }
    }
}

/* tm_sm's min_recv is UCP's offload threshold (RECV_MIN, auto: SEG_SIZE + 1:
 * a message that fits one descriptor is copied once either way), not a
 * limit: a smaller receive posted all the same is matched and filled. */
TEST_P(TagTest, SmRecvMinIsAThresholdNotALimit) {
    if (GetParam() != "tm_sm") {
        GTEST_SKIP() << "tm_sm's RECV_MIN";
    }
    reopen({{"SEG_SIZE", "4k"}});
    EXPECT_EQ(rx_->attr.cap.tag.recv.min_recv, 4097u);
    reopen({{"RECV_MIN", "64k"}});
    EXPECT_EQ(rx_->attr.cap.tag.recv.min_recv, 65536u);
    if (lacks(Path::kBcopy)) {
        GTEST_SKIP();
    }
    Send        s(Path::kBcopy, 0x51, 0x52, 0x53, 100, 1);
    RecvCtx     r;
    RecvBuffers b(100, 1);
    ASSERT_EQ(post(r, s.tag, kFullMask, b), UCS_OK);
    ASSERT_EQ(send(s), UCS_OK);
    ASSERT_TRUE(wait([&] { return r.done(); }));
    EXPECT_EQ(r.sequence(), "consumed,completed");
    EXPECT_EQ(check_delivery(r, b, s, UCS_OK), "");
    reopen({{"RECV_MIN", "0"}});
    EXPECT_EQ(rx_->attr.cap.tag.recv.min_recv, 0u);
}

/* ---- ordering of callbacks under a mixed load ------------------------------------------------- */

/* Random paths, posted and unposted, SW rendezvous requests included: every
 * receive sees consumed then exactly one of completed/rndv, every message is
 * delivered exactly once (to a receive or to the unexpected callbacks). */
TEST_P(TagTest, MixedLoadCallbackOrdering) {
    Rng rng(test_seed() ^ 12);
    std::vector<Path> paths;
    for (Path p : kAllPaths) {
        if (!lacks(p)) {
            paths.push_back(p);
        }
    }
    struct Item {
        std::unique_ptr<Send>        send;
        std::unique_ptr<RecvCtx>     ctx;
        std::unique_ptr<RecvBuffers> buf;
        bool                         request = false; /* tag_rndv_request */
        std::string                  header;
    };
    std::vector<Item> items;
    const int         n = 300;
    for (int i = 0; i < n; ++i) {
        Item      it;
        const Path path = paths[rng.range(0, paths.size() - 1)];
        const auto sizes = tx_->caps.sizes(path);
        const size_t len = sizes[rng.range(0, sizes.size() - 1)];
        it.send.reset(new Send(path, (uint64_t{1} << 40) | static_cast<uint64_t>(i), rng.next(),
                               rng.next(), len, rng.range(1, std::max<size_t>(1, tx_->caps.eager_max_iov))));
        it.request = (path == Path::kRndv) && (rng.next() & 1);
        if (rng.next() % 3 != 0) {
            it.ctx.reset(new RecvCtx);
            it.buf.reset(new RecvBuffers(len, rng.range(1, rx_->caps.recv_max_iov)));
            ASSERT_EQ(post(*it.ctx, it.send->tag, kFullMask, *it.buf), UCS_OK);
        }
        items.push_back(std::move(it));
    }
    size_t expect_unexpected = 0, expect_rndv_unexp = 0;
    for (Item &it : items) {
        if (it.request) {
            it.header = "req" + std::to_string(it.send->seed);
            ucs_status_t status;
            ASSERT_TRUE(wait([&] {
                status = uct_ep_tag_rndv_request(ep_, it.send->tag, it.header.data(),
                                                 static_cast<unsigned>(it.header.size()), 0);
                return status != UCS_ERR_NO_RESOURCE;
            }));
            ASSERT_EQ(status, UCS_OK);
        } else {
            ASSERT_EQ(send(*it.send), UCS_OK);
        }
        if (!it.ctx) {
            (it.send->path == Path::kRndv ? expect_rndv_unexp : expect_unexpected)++;
        }
    }
    ASSERT_TRUE(wait([&] {
        return std::all_of(items.begin(), items.end(),
                           [](const Item &it) { return !it.ctx || it.ctx->done(); }) &&
               rx_->unexp.complete_messages() == expect_unexpected &&
               rx_->unexp.rndvs.size() == expect_rndv_unexp;
    })) << rx_->unexp.complete_messages() << "/" << expect_unexpected << " unexpected eager, "
        << rx_->unexp.rndvs.size() << "/" << expect_rndv_unexp << " unexpected rndv";
    drain();
    for (Item &it : items) {
        SCOPED_TRACE(std::string(path_name(it.send->path)) + (it.request ? " request" : "") +
                     " length " + std::to_string(it.send->payload.size()));
        if (!it.ctx) {
            if (it.send->path == Path::kRndv && !it.request) {
                EXPECT_EQ(uct_ep_tag_rndv_cancel(ep_, it.send->rndv_op), UCS_OK);
            }
            continue;
        }
        if (it.request) {
            EXPECT_EQ(it.ctx->sequence(), "consumed,rndv");
            EXPECT_EQ(it.ctx->header, it.header);
        } else {
            EXPECT_EQ(check_delivery(*it.ctx, *it.buf, *it.send, UCS_OK), "");
        }
    }
    /* Unexpected arrivals in send order, each once. */
    size_t k = 0;
    for (const Item &it : items) {
        if (!it.ctx && it.send->path != Path::kRndv) {
            ASSERT_LT(k, rx_->unexp.messages.size());
            EXPECT_EQ(rx_->unexp.messages[k].tag, it.send->tag);
            EXPECT_EQ(rx_->unexp.messages[k].data,
                      std::string(it.send->payload.begin(), it.send->payload.end()));
            ++k;
        }
    }
    EXPECT_EQ(rx_->unexp.violations, std::vector<std::string>{});
}

/* ---- back-pressure ---------------------------------------------------------------------------- */

struct PendingSend {
    uct_pending_req_t req; /* must stay first */
    uct_ep_h          ep;
    Send             *send;
    int               calls  = 0;
    bool              purged = false;
    static ucs_status_t run(uct_pending_req_t *self) {
        auto *p = reinterpret_cast<PendingSend *>(self);
        ++p->calls;
        return p->send->post(p->ep);
    }
    static void purge(uct_pending_req_t *self, void *) {
        reinterpret_cast<PendingSend *>(self)->purged = true;
    }
};

/* Short sends into a receiver that does not progress until its FIFO refuses
 * one: *sends gets those that went; the refused one is returned (null if the
 * FIFO never filled). */
std::unique_ptr<Send> fill_fifo(uct_ep_h ep, std::vector<std::unique_ptr<Send>> *sends) {
    for (int i = 0; i < 100000; ++i) {
        std::unique_ptr<Send> s(new Send(Path::kShort, 1000 + i, 0, 1000 + i, 8));
        if (s->post(ep) == UCS_ERR_NO_RESOURCE) {
            return s;
        }
        sends->push_back(std::move(s));
    }
    return nullptr;
}

TEST_P(TagTest, FifoFullPendingAdd) {
    if (lacks(Path::kShort) || !(tx_->caps.flags & UCT_IFACE_FLAG_PENDING)) {
        GTEST_SKIP();
    }
    /* With room, pending_add refuses (UCS_ERR_BUSY): retry the send. */
    Send        probe(Path::kShort, 1, 0, 1, 8);
    PendingSend p{};
    p.req.func = PendingSend::run;
    p.ep       = ep_;
    p.send     = &probe;
    EXPECT_EQ(uct_ep_pending_add(ep_, &p.req, 0), UCS_ERR_BUSY);

    std::vector<std::unique_ptr<Send>> sends;
    std::unique_ptr<Send>              last = fill_fifo(ep_, &sends);
    ASSERT_NE(last, nullptr) << "the FIFO never filled";
    ASSERT_EQ(uct_ep_pending_add(ep_, &p.req, 0), UCS_OK);
    p.send = last.get();
    /* A second one, purged before it runs. */
    Send        extra(Path::kShort, 99, 0, 99, 8);
    PendingSend q{};
    q.req.func = PendingSend::run;
    q.ep       = ep_;
    q.send     = &extra;
    ASSERT_EQ(uct_ep_pending_add(ep_, &q.req, 0), UCS_OK);
    /* While requests are pending, new sends wait behind them. */
    Send overtaker(Path::kShort, 98, 0, 98, 8);
    EXPECT_EQ(overtaker.post(ep_), UCS_ERR_NO_RESOURCE);
    /* Purge hands back both; p goes in again, q is dropped. */
    uct_ep_pending_purge(ep_, PendingSend::purge, nullptr);
    EXPECT_TRUE(p.purged);
    EXPECT_TRUE(q.purged);
    ASSERT_EQ(uct_ep_pending_add(ep_, &p.req, 0), UCS_OK);
    ASSERT_TRUE(wait([&] { return rx_->unexp.complete_messages() == sends.size() + 1; }));
    EXPECT_EQ(p.calls, 1);
    EXPECT_EQ(q.calls, 0);
    /* In send order, the pending one last. */
    for (size_t i = 0; i < sends.size(); ++i) {
        ASSERT_EQ(rx_->unexp.messages[i].tag, sends[i]->tag) << i;
    }
    EXPECT_EQ(rx_->unexp.messages.back().tag, last->tag);
}

/* A flush that waits in the pending queue (UCP's rendezvous put with
 * RNDV_PUT_FORCE_FLUSH) is dispatched with later requests queued behind it:
 * it must go, not refuse for them and stay in front of them forever. */
struct PendingFlush {
    uct_pending_req_t req; /* must stay first */
    uct_ep_h          ep;
    Completion        comp;
    ucs_status_t      status = UCS_ERR_LAST;
    int               calls  = 0;
    static ucs_status_t run(uct_pending_req_t *self) {
        auto *f = reinterpret_cast<PendingFlush *>(self);
        ++f->calls;
        f->status = uct_ep_flush(f->ep, 0, &f->comp.comp);
        return (f->status == UCS_ERR_NO_RESOURCE) ? UCS_ERR_NO_RESOURCE : UCS_OK;
    }
};

TEST_P(TagTest, FlushFromPendingGoesAheadOfLaterRequests) {
    if (lacks(Path::kShort) || !(tx_->caps.flags & UCT_IFACE_FLAG_PENDING)) {
        GTEST_SKIP();
    }
    std::vector<std::unique_ptr<Send>> sends;
    std::unique_ptr<Send>              refused = fill_fifo(ep_, &sends);
    ASSERT_NE(refused, nullptr) << "the FIFO never filled";
    PendingSend first{};
    first.req.func = PendingSend::run;
    first.ep       = ep_;
    first.send     = refused.get();
    PendingFlush flush;
    flush.req      = uct_pending_req_t{};
    flush.req.func = PendingFlush::run;
    flush.ep       = ep_;
    Send        after(Path::kShort, 97, 0, 97, 8);
    PendingSend behind{};
    behind.req.func = PendingSend::run;
    behind.ep       = ep_;
    behind.send     = &after;
    ASSERT_EQ(uct_ep_pending_add(ep_, &first.req, 0), UCS_OK);
    ASSERT_EQ(uct_ep_pending_add(ep_, &flush.req, 0), UCS_OK);
    ASSERT_EQ(uct_ep_pending_add(ep_, &behind.req, 0), UCS_OK);
    ASSERT_TRUE(wait([&] { return rx_->unexp.complete_messages() == sends.size() + 2; }))
            << "flush dispatched " << flush.calls << " times, last "
            << ucs_status_string(flush.status);
    EXPECT_EQ(flush.calls, 1);
    EXPECT_TRUE((flush.status == UCS_OK) || (flush.status == UCS_INPROGRESS))
            << ucs_status_string(flush.status);
    if (flush.status == UCS_INPROGRESS) {
        ASSERT_TRUE(wait([&] { return flush.comp.calls == 1; }));
    }
    EXPECT_EQ(behind.calls, 1);
    EXPECT_EQ(rx_->unexp.messages.back().tag, after.tag);
}

}  // namespace

INSTANTIATE_TEST_SUITE_P(tm, TagTest, ::testing::ValuesIn(tag_transports()),
                         transport_param_name);
GTEST_ALLOW_UNINSTANTIATED_PARAMETERIZED_TEST(TagTest);

}  // namespace uct_tm_test
