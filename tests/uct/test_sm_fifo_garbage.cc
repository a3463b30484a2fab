/*
 * tm_sm: a peer that writes garbage into our receive FIFO (and into the rest
 * of our segment: the peer table, our rendezvous slots) must make the
 * receiver log and drop, or fail the affected receive with an error — never
 * crash, hang, or read out of bounds — and the iface must keep working.
 *
 * The peer is played with RawSegment (sm_raw.h): the segment is mapped from
 * the iface address exactly as any process of the same user can.
 */
#include "open_fds.h"
#include "sm/sm_rkey.h"
#include "sm/sm_split_claim.h"
#include "sm_raw.h"
#include "tag_fixture.h"

#include <gtest/gtest.h>

#include <dirent.h>
#include <poll.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstring>
#include <deque>

namespace uct_tm_test {
namespace {

using namespace uct_tm::sm;

constexpr uct_tag_t kFullMask = ~uct_tag_t{0};
constexpr uct_tag_t kGarbage  = uct_tag_t{1} << 40;

/* A rendezvous descriptor (what a sender puts in front of the RTS header). */
RndvInfo rts(uint64_t token, uint64_t address, uint64_t length, uint32_t header_length) {
    RndvInfo info{};
    info.op_token      = token;
    info.address       = address;
    info.length        = length;
    info.header_length = header_length;
    return info;
}

/* The state letter of process `pid` in /proc (R, S, T, Z, ...), or 0. */
char process_state(pid_t pid) {
    char  path[64];
    char  buf[512];
    snprintf(path, sizeof(path), "/proc/%d/stat", static_cast<int>(pid));
    FILE *f = fopen(path, "r");
    if (f == nullptr) {
        return 0;
    }
    const size_t n = fread(buf, 1, sizeof(buf) - 1, f);
    fclose(f);
    buf[n]            = '\0';
    const char *paren = strrchr(buf, ')');
    return ((paren != nullptr) && (paren[1] == ' ')) ? paren[2] : 0;
}

class SmFifoGarbage : public ::testing::Test {
  protected:
    void SetUp() override {
        const auto tls = tag_transports();
        if (std::find(tls.begin(), tls.end(), "tm_sm") == tls.end()) {
            GTEST_SKIP() << "tm_sm not available";
        }
        test_seed();
        env_.reset(new UctEnv());
        rx_.reset(new Node(*env_, "tm_sm",
                           {{"PEER_CHECK_INTERVAL", "10ms"},
                            {"STALL_TIMEOUT", "50ms"},
                            {"STOPPED_TIMEOUT", "300ms"},
                            {"SPLIT_TIMEOUT", "300ms"},
                            /* the CMA and split copies these cases attack
                             * (pipelined ones: the CMA=n cases) */
                            {"RNDV_COPY", "cma"}}));
        ASSERT_EQ(rx_->status, UCS_OK);
        tx_.reset(new Node(*env_, "tm_sm"));
        ASSERT_EQ(tx_->status, UCS_OK);
        ASSERT_EQ(tx_->connect(rx_->address(), &ep_), UCS_OK);
        rx_addr_.resize(rx_->attr.iface_addr_len);
        ASSERT_EQ(uct_iface_get_address(rx_->iface, reinterpret_cast<uct_iface_addr_t *>(&rx_addr_[0])),
                  UCS_OK);
        ASSERT_TRUE(raw_.attach(rx_addr_.data())) << raw_.error();
        tx_slot_ = raw_.used_peer_slot();
        ASSERT_GE(tx_slot_, 0) << "the sender did not announce itself in the peer table";
        hole_ = static_cast<char *>(mmap(nullptr, kHole, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS,
                                         -1, 0));
        ASSERT_NE(hole_, MAP_FAILED);
    }

    void TearDown() override {
        if (ep_ != nullptr) {
            uct_ep_destroy(ep_);
        }
        tx_.reset();
        rx_.reset();
        env_.reset();
        if ((hole_ != nullptr) && (hole_ != MAP_FAILED)) {
            munmap(hole_, kHole);
        }
    }

    unsigned progress() { return uct_worker_progress(env_->worker()); }
    bool     wait(const std::function<bool()> &done, double seconds = kWaitSeconds) {
        return wait_for(done, [this] { progress(); }, seconds);
    }
    void drain() {
        for (int i = 0; i < 300; ++i) {
            progress();
        }
    }

    /* Writes one element, waiting for room. */
    void write(const RawSegment::Fill &fill) {
        ASSERT_TRUE(wait([&] { return raw_.write(fill); })) << "FIFO stayed full";
    }

    /* An eager fragment in a descriptor: `length` bytes of pattern `seed`
     * at message offset `offset`. */
    void write_fragment(uint8_t flags, int peer, uct_tag_t tag, uint32_t length, uint64_t seed,
                        size_t offset = 0) {
        write([&](ElemHeader *e, char *, char *desc) {
            e->kind   = Kind::kTagEager;
            e->flags  = flags | kFlagDesc;
            e->peer   = static_cast<uint16_t>(peer);
            e->length = length;
            e->tag    = tag;
            e->imm    = 0;
            fill_pattern(desc, length, seed, offset);
        });
    }

    /* A forged rendezvous RTS from peer slot `peer`, inline. */
    void write_rts(uint16_t peer, uct_tag_t tag, const RndvInfo &info, size_t extra_length = 0) {
        write([&](ElemHeader *e, char *payload, char *) {
            e->kind   = Kind::kTagRndv;
            e->flags  = kFlagFirst;
            e->peer   = peer;
            e->length = static_cast<uint32_t>(sizeof(info) + extra_length);
            e->aux    = 0;
            e->tag    = tag;
            e->imm    = 0;
            memcpy(payload, &info, sizeof(info));
        });
    }

    /* Sends `s` from the valid endpoint into `r` (posted, over `b`): the
     * receive completes once, whole. */
    void expect_delivered(Send &s, RecvCtx &r, const RecvBuffers &b, uint64_t seed, size_t length) {
        ucs_status_t status = UCS_ERR_NO_RESOURCE;
        ASSERT_TRUE(wait([&] { return (status = s.post(ep_)) != UCS_ERR_NO_RESOURCE; }));
        ASSERT_EQ(status, UCS_OK);
        if (!wait([&] { return r.done(); })) {
            /* r and b go out of scope: take them back first. */
            uct_iface_tag_recv_cancel(rx_->iface, &r.ctx, 1);
            FAIL() << "the iface stopped delivering";
        }
        EXPECT_EQ(r.sequence(), "consumed,completed");
        EXPECT_EQ(r.status, UCS_OK);
        EXPECT_EQ(b.check(seed, length), "");
    }

    /* The iface still delivers a valid message correctly. */
    void expect_alive(uint64_t seed) {
        RecvCtx     r;
        RecvBuffers b(3000);
        ASSERT_EQ(uct_iface_tag_recv_zcopy(rx_->iface, 0xa11fe + seed, kFullMask, b.iov.data(), 1,
                                           &r.ctx),
                  UCS_OK);
        Send s(Path::kBcopy, 0xa11fe + seed, 9, seed, 3000);
        expect_delivered(s, r, b, seed, 3000);
    }

    static constexpr size_t kHole = 1 << 16;

    std::unique_ptr<UctEnv> env_;
    std::unique_ptr<Node>   rx_, tx_;
    uct_ep_h                ep_ = nullptr;
    std::string             rx_addr_;
    RawSegment              raw_;
    int                     tx_slot_ = -1;
    char                   *hole_    = nullptr; /* PROT_NONE: any read of it faults */
};

TEST_F(SmFifoGarbage, MalformedHeadersAreDropped) {
    const uint16_t peer = static_cast<uint16_t>(tx_slot_);
    const uint32_t cap  = raw_.inline_capacity();
    const uint32_t seg  = raw_.geometry().seg_size;
    struct Case {
        const char *what;
        Kind        kind;
        uint8_t     flags;
        uint32_t    length, aux;
    };
    const Case cases[] = {
        {"unknown kind", static_cast<Kind>(200), kFlagFirst, 8, 0},
        {"kind kLast", Kind::kLast, kFlagFirst, 8, 0},
        {"am id 64", Kind::kAm, kFlagFirst, 8, 64},
        {"am id ~0", Kind::kAm, kFlagFirst, 8, ~0u},
        {"inline length above the element", Kind::kAm, kFlagFirst, cap + 1, 1},
        {"inline length ~0", Kind::kTagEager, kFlagFirst, ~0u, 0},
        {"tagged inline length above the element", Kind::kTagEager, kFlagFirst, cap + 1, 0},
        {"descriptor length above seg_size", Kind::kTagEager, kFlagFirst | kFlagDesc, seg + 1, 0},
        {"descriptor length ~0", Kind::kAm, kFlagFirst | kFlagDesc, ~0u, 1},
        {"fragment outside a message", Kind::kTagEager, 0, 8, 0},
        {"last fragment outside a message", Kind::kTagEager, kFlagDesc, 100, 0},
        {"rndv without its descriptor", Kind::kTagRndv, kFlagFirst, 8, 0},
        {"rndv request too long", Kind::kTagRndvReq, kFlagFirst | kFlagDesc, seg + 64, 0},
        {"fin with a junk token", Kind::kRndvFin, kFlagFirst, 0, 0},
        {"dropped element", Kind::kDropped, 0xff, ~0u, ~0u},
        {"rtr with a junk token", Kind::kRndvRtr, kFlagFirst, 0, 0},
        {"pull request too short", Kind::kPullReq, kFlagFirst, 8, 0},
        {"pull request with junk", Kind::kPullReq, kFlagFirst, 48, 0},
        {"pull nack with a junk token", Kind::kPullNack, kFlagFirst, 0, 5},
        {"get invitation with a junk token", Kind::kGetRtr, kFlagFirst, 0, 0},
    };
    std::vector<std::string> am_log;
    ASSERT_EQ(rx_->set_am_log(1, &am_log), UCS_OK);
    uint64_t seed = 1;
    for (const Case &c : cases) {
        SCOPED_TRACE(c.what);
        write([&](ElemHeader *e, char *payload, char *) {
            e->kind   = c.kind;
            e->flags  = c.flags;
            e->peer   = peer;
            e->length = c.length;
            e->aux    = c.aux;
            e->tag    = 0x5555;
            e->imm    = 0xdeadbeefcafeull;
            memset(payload, 0xee, cap);
        });
        drain();
        EXPECT_TRUE(rx_->unexp.messages.empty());
        EXPECT_TRUE(rx_->unexp.rndvs.empty());
        EXPECT_TRUE(am_log.empty());
        expect_alive(++seed);
    }
}

/* A get invitation (kGetRtr) names a slot of the inviter's segment, which
 * describes the inviter's buffers, and a source in ours: we write pieces
 * only from ranges we registered, only into the inviter's own process. */
TEST_F(SmFifoGarbage, GetInvitationWritesOnlyRegisteredMemory) {
    std::string tx_addr(tx_->attr.iface_addr_len, '\0');
    ASSERT_EQ(uct_iface_get_address(tx_->iface, reinterpret_cast<uct_iface_addr_t *>(&tx_addr[0])),
              UCS_OK);
    RawSegment tx_view; /* the inviter's segment, as it writes it */
    ASSERT_TRUE(tx_view.attach(tx_addr.data())) << tx_view.error();
    const uint32_t    index   = tx_view.geometry().rndv_slots - 1; /* no send of tx_ uses it */
    RndvSlot         &slot    = tx_view.rndv_slots()[index];
    const uint32_t    gen     = slot.word.load() >> 4;
    constexpr size_t  kLength = 64 << 10, kPiece = 16 << 10;
    std::vector<char> source(kLength);
    fill_pattern(source.data(), kLength, 7);
    auto invite = [&](std::vector<char> &dest, pid_t reader) {
        const uint16_t epoch = SplitClaim::unpack(slot.claim.load()).epoch + 1;
        slot.piece_size      = kPiece;
        slot.receiver_pid    = reader;
        slot.iovcnt          = 1;
        slot.length          = kLength;
        slot.iov[0]          = RemoteIov{reinterpret_cast<uintptr_t>(dest.data()), kLength};
        slot.sender_done.store(SplitDone{0, epoch, UCS_OK}.pack());
        slot.claim.store(SplitClaim{0, kLength / kPiece, epoch}.pack());
        slot.word.store(rndv_word(gen, kRndvReading));
        write([&](ElemHeader *e, char *, char *) {
            e->kind   = Kind::kGetRtr;
            e->flags  = kFlagFirst;
            e->peer   = static_cast<uint16_t>(tx_slot_);
            e->length = 0;
            e->aux    = 0;
            e->tag    = reinterpret_cast<uintptr_t>(source.data());
            e->imm    = (uint64_t{gen} << 32) | index;
        });
        drain();
        return SplitDone::unpack(slot.sender_done.load()).pieces;
    };
    auto untouched = [](const std::vector<char> &v) {
        return std::all_of(v.begin(), v.end(), [](char c) { return c == 'x'; });
    };
    std::vector<char> dest(kLength, 'x');
    EXPECT_EQ(invite(dest, getpid()), 0u) << "wrote memory it never registered";
    EXPECT_TRUE(untouched(dest));

    uct_mem_h memh;
    ASSERT_EQ(uct_md_mem_reg(env_->md(), source.data(), kLength, UCT_MD_MEM_ACCESS_ALL, &memh),
              UCS_OK);
    const pid_t gone = fork(); /* a process that is not the inviter (and no longer runs) */
    if (gone == 0) {
        _exit(0);
    }
    ASSERT_GT(gone, 0);
    waitpid(gone, nullptr, 0);
    EXPECT_EQ(invite(dest, gone), 0u) << "took pieces for a process that is not the inviter";
    EXPECT_TRUE(untouched(dest));
    EXPECT_EQ(invite(dest, getpid()), kLength / kPiece); /* the control: registered, it writes */
    EXPECT_EQ(pattern_mismatch(dest.data(), kLength, 7), SIZE_MAX);
    EXPECT_EQ(uct_md_mem_dereg(env_->md(), memh), UCS_OK);
    slot.word.store(rndv_word(gen, kRndvFree));
    expect_alive(41);
}

/* An inline tagged message claiming more bytes than its element holds, for
 * a tag with a receive posted: dropped before matching, so the receive is
 * neither consumed nor written, and a valid message for it still lands. */
TEST_F(SmFifoGarbage, OversizedInlineTaggedMessageTakesNoPostedReceive) {
    const uint32_t cap = raw_.inline_capacity();
    for (const uint32_t length : {cap + 1, ~0u}) {
        SCOPED_TRACE(length);
        RecvCtx     r;
        RecvBuffers b(cap + 64);
        ASSERT_EQ(uct_iface_tag_recv_zcopy(rx_->iface, 0x5a5a, kFullMask, b.iov.data(), 1, &r.ctx),
                  UCS_OK);
        write([&](ElemHeader *e, char *payload, char *) {
            e->kind   = Kind::kTagEager;
            e->flags  = kFlagFirst;
            e->peer   = static_cast<uint16_t>(tx_slot_);
            e->length = length;
            e->aux    = 0;
            e->tag    = 0x5a5a;
            e->imm    = 0;
            memset(payload, 0xee, cap);
        });
        drain();
        EXPECT_EQ(r.sequence(), "");
        EXPECT_TRUE(b.pieces[0].untouched(0, cap + 64));
        EXPECT_TRUE(rx_->unexp.messages.empty());
        Send s(Path::kShort, 0x5a5a, 0, 7, 8);
        expect_delivered(s, r, b, 7, 8);
    }
}

/* A message whose first fragment says more follow, and they never come:
 * the receive it matched fails with an error (once), the next message is
 * delivered normally. */
TEST_F(SmFifoGarbage, TruncatedFragmentChain) {
    RecvCtx     r;
    RecvBuffers b(100000);
    ASSERT_EQ(uct_iface_tag_recv_zcopy(rx_->iface, 0x77, kFullMask, b.iov.data(), 1, &r.ctx), UCS_OK);
    write_fragment(kFlagFirst | kFlagMore, tx_slot_, 0x77, 1000, 5);
    drain();
    EXPECT_EQ(r.sequence(), "consumed");
    expect_alive(2);
    EXPECT_EQ(r.sequence(), "consumed,completed");
    EXPECT_NE(r.status, UCS_OK);
    /* Unexpected flavour: no receive posted. */
    write_fragment(kFlagFirst | kFlagMore, tx_slot_, 0x78, 1000, 5);
    drain();
    expect_alive(3);
    /* A fragment from another peer slot does not continue someone else's message. */
    RecvCtx     r2;
    RecvBuffers b2(5000);
    ASSERT_EQ(uct_iface_tag_recv_zcopy(rx_->iface, 0x79, kFullMask, b2.iov.data(), 1, &r2.ctx),
              UCS_OK);
    write_fragment(kFlagFirst | kFlagMore, tx_slot_, 0x79, 1000, 6);
    write_fragment(0, tx_slot_ + 1, 0x79, 1000, 6, 1000);
    drain();
    EXPECT_EQ(r2.sequence(), "consumed");
    expect_alive(4);
    EXPECT_EQ(r2.sequence(), "consumed,completed");
    EXPECT_NE(r2.status, UCS_OK);
    EXPECT_TRUE(b2.pieces[0].untouched(1000, 5000));
}

/* An unexpected message whose sender is still writing it is held until
 * whole, then handed to eager_cb. A receive that could match it, posted in
 * between, is refused (UCS_ERR_NO_RESOURCE): in the tag list it would take
 * the next message of the tag while the layer above still has the held one
 * to match -- the two would be matched out of order. Receives of other tags
 * are taken; the tag's are again once the message went up. */
TEST_F(SmFifoGarbage, ReceivesForAHeldUnexpectedMessageWaitUntilItIsWhole) {
    rx_->unexp.hold_descs(2);
    write_fragment(kFlagFirst | kFlagMore, tx_slot_, 0x77, 1000, 7);
    drain(); /* held: the next fragment is not published */
    EXPECT_EQ(rx_->unexp.complete_messages(), 0u);
    RecvCtx     exact, masked, other;
    RecvBuffers b1(4000), b2(4000), b3(4000);
    EXPECT_EQ(uct_iface_tag_recv_zcopy(rx_->iface, 0x77, kFullMask, b1.iov.data(), 1, &exact.ctx),
              UCS_ERR_NO_RESOURCE);
    EXPECT_EQ(uct_iface_tag_recv_zcopy(rx_->iface, 0x7f, 0xf0, b2.iov.data(), 1, &masked.ctx),
              UCS_ERR_NO_RESOURCE) << "a masked receive that matches the held tag";
    ASSERT_EQ(uct_iface_tag_recv_zcopy(rx_->iface, 0x88, kFullMask, b3.iov.data(), 1, &other.ctx),
              UCS_OK);
    write_fragment(0, tx_slot_, 0x77, 1000, 7, 1000);
    drain();
    ASSERT_EQ(rx_->unexp.complete_messages(), 1u);
    EXPECT_EQ(rx_->unexp.messages[0].data.size(), 2000u);
    EXPECT_EQ(pattern_mismatch(rx_->unexp.messages[0].data.data(), 2000, 7), SIZE_MAX);
    /* Whole, as a descriptor with the headroom in front, which the layer
     * above may keep (UCP copies anything else onto its stack or into
     * buffers of its active-message size). */
    ASSERT_EQ(rx_->unexp.messages[0].flags.size(), 1u);
    EXPECT_NE(rx_->unexp.messages[0].flags[0] & UCT_CB_PARAM_FLAG_DESC, 0u);
    EXPECT_EQ(rx_->unexp.held.size(), 1u) << "the held message was not kept";
    /* held message number `n` (tag and seed 0x76 + n) in two fragments */
    auto held_message = [&](size_t n) {
        write_fragment(kFlagFirst | kFlagMore, tx_slot_, 0x76 + n, 1000, 6 + n);
        drain();
        write_fragment(0, tx_slot_, 0x76 + n, 1000, 6 + n, 1000);
        drain();
        ASSERT_EQ(rx_->unexp.complete_messages(), n);
        EXPECT_EQ(pattern_mismatch(rx_->unexp.messages[n - 1].data.data(), 2000, 6 + n), SIZE_MAX);
    };
    held_message(2); /* while the first is kept: its own buffer */
    ASSERT_EQ(rx_->unexp.held.size(), 2u);
    EXPECT_NE(rx_->unexp.held[0].data, rx_->unexp.held[1].data);
    for (const auto &h : rx_->unexp.held) {
        EXPECT_EQ(std::string(h.data, h.content.size()), h.content) << "a kept buffer changed";
    }
    rx_->release_held_descs();
    held_message(3); /* released buffers serve the next held message */
    rx_->release_held_descs();
    EXPECT_EQ(rx_->unexp.violations, std::vector<std::string>{});
    EXPECT_EQ(uct_iface_tag_recv_zcopy(rx_->iface, 0x77, kFullMask, b1.iov.data(), 1, &exact.ctx),
              UCS_OK);
    EXPECT_EQ(uct_iface_tag_recv_cancel(rx_->iface, &exact.ctx, 1), UCS_OK);
    EXPECT_EQ(uct_iface_tag_recv_cancel(rx_->iface, &other.ctx, 1), UCS_OK);
    expect_alive(8);
}

/* Rendezvous descriptors that lie: wrong header length, address overflow,
 * unknown peer, slot out of range, and — the dangerous one — a real pending
 * rendezvous slot paired with an address that is not mapped. */
TEST_F(SmFifoGarbage, LyingRendezvousDescriptors) {
    const uint16_t peer = static_cast<uint16_t>(tx_slot_);
    struct Case {
        const char *what;
        uint16_t    peer;
        RndvInfo    info;
        size_t      extra;
        bool        posted;
    };
    const uint64_t hole = reinterpret_cast<uintptr_t>(hole_);
    const Case cases[] = {
        {"header length mismatch", peer, rts(1ull << 32, hole, 100, 40), 0, true},
        {"address overflow", peer, rts(1ull << 32, ~0ull - 10, 100, 0), 0, true},
        {"unknown peer slot", 65535, rts(1ull << 32, hole, 100, 0), 0, true},
        {"unknown peer slot, unexpected", 65535, rts(1ull << 32, hole, 100, 0), 0, false},
        {"slot index out of range", peer, rts((1ull << 32) | 0xfffffff, hole, 100, 0), 0, true},
        {"slot not posted", peer, rts((7ull << 32) | 3, hole, 100, 0), 0, true},
    };
    for (const Case &c : cases) {
        SCOPED_TRACE(c.what);
        RecvCtx     r;
        RecvBuffers b(4096);
        if (c.posted) {
            ASSERT_EQ(uct_iface_tag_recv_zcopy(rx_->iface, 0x99, kFullMask, b.iov.data(), 1, &r.ctx),
                      UCS_OK);
        }
        write_rts(c.peer, 0x99, c.info, c.extra);
        drain();
        if (c.posted) {
            if (r.done()) {
                EXPECT_EQ(r.sequence(), "consumed,completed");
                EXPECT_NE(r.status, UCS_OK);
            } else {
                EXPECT_TRUE(r.events.empty());
                EXPECT_EQ(uct_iface_tag_recv_cancel(rx_->iface, &r.ctx, 1), UCS_OK);
            }
        }
        EXPECT_TRUE(b.untouched());
        rx_->unexp.rndvs.clear();
        expect_alive(10);
    }

    /* The sender has a real rendezvous pending (its RTS goes unexpected);
     * a forged RTS names the same slot but an unmapped address. */
    std::vector<char> payload(4096, 'p');
    uct_iov_t         iov = {payload.data(), payload.size(), nullptr, 0, 1};
    Completion        comp;
    ucs_status_ptr_t  op = uct_ep_tag_rndv_zcopy(ep_, 0x1111, "h", 1, &iov, 1, 0, &comp.comp);
    ASSERT_FALSE(UCS_PTR_IS_ERR(op));
    RecvCtx     r;
    RecvBuffers b(4096);
    ASSERT_EQ(uct_iface_tag_recv_zcopy(rx_->iface, 0x2222, kFullMask, b.iov.data(), 1, &r.ctx),
              UCS_OK);
    const RndvInfo forged = rts(reinterpret_cast<uintptr_t>(op), hole, 4096, 0);
    write_rts(peer, 0x2222, forged);
    ASSERT_TRUE(wait([&] { return r.done(); }));
    EXPECT_EQ(r.sequence(), "consumed,completed");
    EXPECT_NE(r.status, UCS_OK) << "data read from an unmapped address";
    EXPECT_TRUE(b.untouched());
    ASSERT_TRUE(wait([&] { return rx_->unexp.rndvs.size() == 1; }));
    drain();
    if (comp.calls == 0) {
        uct_ep_tag_rndv_cancel(ep_, op);
    }
    expect_alive(11);
}

/* A peer asks us to copy our memory into its staging chunks: only a
 * rendezvous send of ours or memory registered with our MD is handed out;
 * everything else is refused and nothing is copied. */
TEST_F(SmFifoGarbage, ForgedPullRequestsAreRefused) {
    std::string tx_addr(tx_->attr.iface_addr_len, '\0');
    ASSERT_EQ(uct_iface_get_address(tx_->iface, reinterpret_cast<uct_iface_addr_t *>(&tx_addr[0])),
              UCS_OK);
    RawSegment tx_raw;
    ASSERT_TRUE(tx_raw.attach(tx_addr.data())) << tx_raw.error();
    const Geometry &tg = tx_raw.geometry();
    if (tg.staging_chunks == 0) {
        GTEST_SKIP() << "no staging chunks";
    }
    char *chunk0 = reinterpret_cast<char *>(tx_raw.header()) + tg.staging_offset;
    auto  pull   = [&](uint64_t address, uint64_t length, uint64_t rndv_token, uint32_t piece,
                    uint16_t nchunks, uint16_t chunk) {
        PullRequest req{};
        req.pull_token = 0; /* generation 0: the chunk's initial state accepts it */
        req.address    = address;
        req.length     = length;
        req.rndv_token = rndv_token;
        req.piece_size = piece;
        req.nchunks    = nchunks;
        req.chunk[0]   = chunk;
        write([&](ElemHeader *e, char *payload, char *) {
            e->kind   = Kind::kPullReq;
            e->flags  = kFlagFirst;
            e->peer   = static_cast<uint16_t>(tx_slot_);
            e->length = sizeof(req);
            e->aux    = 0;
            e->tag    = 0;
            e->imm    = 0;
            memcpy(payload, &req, sizeof(req));
        });
        drain();
    };
    std::vector<char> secret(4096);
    fill_pattern(secret.data(), secret.size(), 0x5ec);
    const uint64_t addr  = reinterpret_cast<uintptr_t>(secret.data());
    const uint32_t piece = tg.staging_chunk_size;
    memset(chunk0, 0, 4096);
    pull(addr, 4096, 0, piece, 1, 0);                      /* not registered */
    pull(addr, 4096, 1ull << 32, piece, 1, 0);             /* no such rendezvous */
    pull(addr, 4096, 0, piece + 4096, 1, 0);               /* wrong piece size */
    pull(addr, 4096, 0, piece, 0, 0);                      /* no chunks */
    pull(addr, 4096, 0, piece, 5, 0);                      /* too many chunks */
    pull(addr, 4096, 0, piece, 1, 0xffff);                 /* chunk out of range */
    pull(~0ull - 100, 4096, 0, piece, 1, 0);               /* wraps around */
    pull(reinterpret_cast<uintptr_t>(hole_), 4096, 0, piece, 1, 0);
    EXPECT_EQ(std::count(chunk0, chunk0 + 4096, 0), 4096) << "unregistered memory was handed out";
    /* Control: the same request for registered memory is served. */
    uct_mem_h memh;
    ASSERT_EQ(uct_md_mem_reg(env_->md(), secret.data(), secret.size(), UCT_MD_MEM_ACCESS_ALL, &memh),
              UCS_OK);
    pull(addr, 4096, 0, piece, 1, 0);
    EXPECT_EQ(pattern_mismatch(chunk0, 4096, 0x5ec), SIZE_MAX) << "the control pull was not served";
    ASSERT_EQ(uct_md_mem_dereg(env_->md(), memh), UCS_OK);
    expect_alive(20);
}

/* A peer forges an entry of our peer table naming our own segment (so the
 * "sender" is this very process) and one of our own rendezvous slots marked
 * posted, then sends an RTS with an unmapped address. */
TEST_F(SmFifoGarbage, ForgedPeerTableEntryNamingOurselves) {
    IfaceAddress self;
    memcpy(&self, rx_addr_.data(), sizeof(self));
    PeerSlot *slots = raw_.peer_slots();
    uint32_t  k     = 0;
    while ((k < raw_.geometry().max_peers) && ((slots[k].state.load() & 3) != kPeerFree)) {
        ++k;
    }
    ASSERT_LT(k, raw_.geometry().max_peers);
    slots[k].iface_serial = self.iface_serial;
    slots[k].segment      = self.segment;
    slots[k].state.store((slots[k].state.load() & ~3u) + 4 + kPeerUsed);
    raw_.rndv_slots()[0].word.store(rndv_word(1, kRndvPosted));

    /* An RTS from slot k for an unmapped address fails its receive. */
    auto forged_rts_fails = [&](uct_tag_t tag) {
        RecvCtx     r;
        RecvBuffers b(4096);
        ASSERT_EQ(uct_iface_tag_recv_zcopy(rx_->iface, tag, kFullMask, b.iov.data(), 1, &r.ctx),
                  UCS_OK);
        write_rts(static_cast<uint16_t>(k), tag,
                  rts(1ull << 32, reinterpret_cast<uintptr_t>(hole_), 4096, 0));
        ASSERT_TRUE(wait([&] { return r.done(); }));
        EXPECT_NE(r.status, UCS_OK);
        EXPECT_TRUE(b.untouched());
    };
    forged_rts_fails(0x3333);

    /* And an entry naming a segment that does not exist. */
    IfaceAddress junk = self;
    junk.segment.fd   = 1 << 20;
    slots[k].segment  = junk.segment;
    slots[k].state.store((slots[k].state.load() & ~3u) + 4 + kPeerUsed);
    forged_rts_fails(0x4444);
    slots[k].state.store(slots[k].state.load() & ~3u);
    expect_alive(12);
}

/* Random elements mixed with real traffic and posted receives: every posted
 * receive sees consumed first and at most one completion; real messages that
 * were not disturbed arrive intact; the iface survives. */
void scribble(RawSegment &raw, Rng &rng, uint16_t good_peer, const char *hole, int count,
              const std::function<void()> &on_full) {
    const uint32_t cap = raw.inline_capacity();
    const uint32_t seg = raw.geometry().seg_size;
    for (int i = 0; i < count; ++i) {
        const RawSegment::Fill fill = [&](ElemHeader *e, char *payload, char *desc) {
            e->kind  = static_cast<Kind>(rng.range(0, static_cast<size_t>(Kind::kLast) + 1));
            e->flags = static_cast<uint8_t>(rng.next());
            e->peer  = (rng.next() & 3) ? good_peer : static_cast<uint16_t>(rng.next());
            switch (rng.range(0, 3)) {
            case 0: e->length = static_cast<uint32_t>(rng.range(0, cap)); break;
            case 1: e->length = static_cast<uint32_t>(rng.range(0, seg)); break;
            case 2: e->length = static_cast<uint32_t>(rng.range(0, 64)); break;
            default: e->length = static_cast<uint32_t>(rng.next()); break;
            }
            e->aux = (rng.next() & 1) ? static_cast<uint32_t>(rng.range(0, 70))
                                      : static_cast<uint32_t>(rng.next());
            e->tag = kGarbage | rng.range(0, 15);
            e->imm = rng.next();
            for (uint32_t j = 0; j < cap; ++j) {
                payload[j] = static_cast<char>(rng.next());
            }
            if ((desc != nullptr) && (rng.next() & 1)) {
                for (uint32_t j = 0; j < 256; ++j) {
                    desc[j] = static_cast<char>(rng.next());
                }
            }
            if (e->kind == Kind::kTagRndv) {
                RndvInfo info      = rts((uint64_t{rng.range(0, 3)} << 32) | rng.range(0, 4),
                                         (rng.next() & 1) ? reinterpret_cast<uintptr_t>(hole) : rng.next(),
                                         rng.range(0, 1 << 16), static_cast<uint32_t>(rng.range(0, 16)));
                if (rng.next() & 1) {
                    info.flags = static_cast<uint32_t>(rng.next());
                    for (size_t k = 0; k < sizeof(info.shm); ++k) {
                        reinterpret_cast<char *>(&info.shm)[k] = static_cast<char>(rng.next());
                    }
                    info.shm_offset = rng.next() >> rng.range(0, 63);
                }
                e->length          = static_cast<uint32_t>(sizeof(info) + info.header_length);
                memcpy((e->flags & kFlagDesc) && desc ? desc : payload, &info, sizeof(info));
            }
            if ((e->kind == Kind::kTagEager) && (rng.next() & 1)) {
                e->flags &= kFlagDesc | kFlagFirst | kFlagMore;
            }
        };
        while (!raw.write(fill)) {
            on_full();
        }
    }
}

TEST_F(SmFifoGarbage, RandomGarbageWithTraffic) {
    Rng rng(test_seed() ^ 30);
    std::deque<RecvCtx>     ctxs;
    std::deque<RecvBuffers> bufs;
    std::vector<std::string> am_log;
    ASSERT_EQ(rx_->set_am_log(1, &am_log), UCS_OK);
    for (int round = 0; round < 40; ++round) {
        for (int i = 0; i < 8; ++i) {
            ctxs.emplace_back();
            bufs.emplace_back(rng.range(0, 20000), rng.range(1, 3));
            /* Tags of class kGarbage only: expect_alive() uses others. */
            const uct_tag_t tag  = kGarbage | rng.range(0, 15);
            const uct_tag_t mask = (rng.next() & 1) ? kFullMask : (kGarbage | 0xc);
            ASSERT_EQ(uct_iface_tag_recv_zcopy(rx_->iface, tag, mask, bufs.back().iov.data(),
                                               bufs.back().iov.size(), &ctxs.back().ctx),
                      UCS_OK);
        }
        scribble(raw_, rng, static_cast<uint16_t>(tx_slot_), hole_, 60, [this] { progress(); });
        drain();
        expect_alive(1000 + round);
    }
    drain();
    for (RecvCtx &r : ctxs) {
        const std::string seq = r.sequence();
        EXPECT_TRUE(seq.empty() || seq == "consumed" || seq == "consumed,completed" ||
                    seq == "consumed,rndv")
            << seq;
        if (!r.done()) {
            uct_iface_tag_recv_cancel(rx_->iface, &r.ctx, 1);
        }
    }
    for (RecvBuffers &b : bufs) {
        for (const GuardedBuffer &p : b.pieces) {
            EXPECT_TRUE(p.guards_intact()) << "written beyond a posted buffer";
        }
    }
}

/* The same from another process, while this one keeps receiving. */
TEST_F(SmFifoGarbage, GarbageFromAnotherProcess) {
    const uint64_t seed = test_seed() ^ 31;
    const pid_t    child = fork();
    ASSERT_GE(child, 0);
    if (child == 0) {
        alarm(60);
        RawSegment raw;
        if (!raw.attach(rx_addr_.data())) {
            fprintf(stderr, "child: %s\n", raw.error().c_str());
            _exit(2);
        }
        Rng rng(seed);
        scribble(raw, rng, static_cast<uint16_t>(tx_slot_), hole_, 3000, [] { sched_yield(); });
        _exit(0);
    }
    int  status = 0;
    bool exited = wait([&] {
        if (waitpid(child, &status, WNOHANG) == child) {
            return true;
        }
        if (progress() == 0) {
            sched_yield();
        }
        return false;
    }, 60);
    if (!exited) {
        kill(child, SIGKILL);
        waitpid(child, &status, 0);
    }
    ASSERT_TRUE(exited) << "the scribbling process hung";
    EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << "status " << status;
    drain();
    expect_alive(2000);
}

/* A sender claims an element and dies before publishing it: after
 * STALL_TIMEOUT the receiver skips it and traffic from others goes on. */
/* A child process connects to the receiver, runs `before` on the raw
 * segment (with its own peer-table slot), claims one more FIFO element and
 * is SIGKILLed holding it, as a sender crashing in the middle of a send. */
/* With `zombie`, the dead child is not waited for: it stays a zombie, whose
 * pid still answers kill(pid, 0), until the returned pid is reaped. */
pid_t die_holding_a_claim(const std::string &rx_address, size_t dev_len,
                          const std::function<void(RawSegment &, uint16_t)> &before,
                          bool zombie = false) {
    int fds[2];
    if (pipe(fds) != 0) {
        ADD_FAILURE() << "pipe";
        return -1;
    }
    const pid_t child = fork();
    if (child < 0) {
        ADD_FAILURE() << "fork";
        return -1;
    }
    if (child == 0) {
        alarm(60);
        close(fds[0]);
        char result = 'x';
        try {
            /* Never destroyed: the process dies holding its peer-table
             * entry and the claimed element. */
            auto    *env  = new UctEnv();
            auto    *node = new Node(*env, "tm_sm");
            auto    *raw  = new RawSegment();
            uct_ep_h ep;
            if ((node->status == UCS_OK) && (node->connect(rx_address, &ep) == UCS_OK) &&
                raw->attach(rx_address.data() + dev_len)) {
                int mine = -1;
                for (uint32_t k = 0; k < raw->geometry().max_peers; ++k) {
                    if (((raw->peer_slots()[k].state.load() & 3) == kPeerUsed) &&
                        (raw->peer_slots()[k].segment.pid == getpid())) {
                        mine = static_cast<int>(k);
                    }
                }
                if (mine >= 0) {
                    before(*raw, static_cast<uint16_t>(mine));
                    result = raw->claim_only() ? 'k' : 'f';
                }
            }
        } catch (...) {
        }
        (void)!::write(fds[1], &result, 1);
        pause(); /* killed here */
        _exit(0);
    }
    close(fds[1]);
    char result = 0;
    EXPECT_EQ(read(fds[0], &result, 1), 1);
    close(fds[0]);
    kill(child, SIGKILL);
    if (zombie) {
        /* Dead once /proc says so; its parent (us) has not waited for it. */
        EXPECT_TRUE(wait_for([&] { return process_state(child) == 'Z'; }, [] { sched_yield(); }, 5));
    } else {
        waitpid(child, nullptr, 0);
    }
    EXPECT_EQ(result, 'k') << "the child could not claim an element";
    return child;
}

/* A dead sender whose parent has not reaped it yet (a zombie) is dead all
 * the same: its claimed element is skipped after STALL_TIMEOUT. */
TEST_F(SmFifoGarbage, StalledElementOfZombieSenderIsSkipped) {
    const pid_t zombie =
        die_holding_a_claim(rx_->address(), rx_->attr.device_addr_len, [](RawSegment &, uint16_t) {},
                            true);
    ASSERT_GT(zombie, 0);
    ASSERT_EQ(kill(zombie, 0), 0) << "not a zombie: kill(pid, 0) fails";
    expect_alive(3004);
    waitpid(zombie, nullptr, 0);
}

/* A sender stopped (SIGSTOP, a debugger) while holding a claimed element:
 * after STOPPED_TIMEOUT the receiver drops it from its peers, skips the
 * element and delivers the others' messages again. Resumed, the stopped
 * sender learns it was dropped: its endpoint fails, it does not hang. */
TEST_F(SmFifoGarbage, StoppedSenderHoldingAClaimIsDroppedAfterTimeout) {
    int fds[2];
    ASSERT_EQ(pipe(fds), 0);
    const std::string rx_address = rx_->address();
    const size_t      dev_len    = rx_->attr.device_addr_len;
    const pid_t       child      = fork();
    ASSERT_GE(child, 0);
    if (child == 0) {
        alarm(60);
        close(fds[0]);
        char result = 'x';
        {
            UctEnv     env;
            Node       node(env, "tm_sm", {{"PEER_CHECK_INTERVAL", "10ms"}});
            RawSegment raw;
            uct_ep_h   ep = nullptr;
            if ((node.status == UCS_OK) && (node.connect(rx_address, &ep) == UCS_OK) &&
                raw.attach(rx_address.data() + dev_len) && raw.claim_only()) {
                (void)!::write(fds[1], "c", 1);
                raise(SIGSTOP); /* held here until the parent sends SIGCONT */
                /* Resumed: our sends must fail, through the error handler. */
                result     = 'h';
                char data[8] = {};
                wait_for([&] {
                    const ucs_status_t status = uct_ep_tag_eager_short(ep, 1, data, sizeof(data));
                    if (!node.errors.entries.empty() && (status != UCS_OK) &&
                        (status != UCS_ERR_NO_RESOURCE)) {
                        result = 'e';
                    }
                    return result == 'e';
                }, [&] { uct_worker_progress(env.worker()); }, 10);
                uct_ep_destroy(ep);
            }
        }
        (void)!::write(fds[1], &result, 1);
        _exit(0);
    }
    close(fds[1]);
    char claimed = 0;
    ASSERT_EQ(read(fds[0], &claimed, 1), 1);
    ASSERT_EQ(claimed, 'c');
    ASSERT_TRUE(wait_for([&] { return process_state(child) == 'T'; }, [] { sched_yield(); }, 5));
    expect_alive(3005);
    kill(child, SIGCONT);
    char result = 0;
    EXPECT_EQ(read(fds[0], &result, 1), 1);
    close(fds[0]);
    EXPECT_EQ(result, 'e') << "the resumed sender did not learn it was dropped";
    int status = 0;
    waitpid(child, &status, 0);
    EXPECT_TRUE(WIFEXITED(status) && (WEXITSTATUS(status) == 0));
    expect_alive(3006);
}

/* After STALL_TIMEOUT the receiver skips the element and traffic from
 * others goes on. */
TEST_F(SmFifoGarbage, StalledElementOfDeadSenderIsSkipped) {
    die_holding_a_claim(rx_->address(), rx_->attr.device_addr_len, [](RawSegment &, uint16_t) {});
    const auto start = std::chrono::steady_clock::now();
    expect_alive(3000);
    const double secs =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    EXPECT_LT(secs, 5.0) << "the stalled element took long to skip";
}

/* The first 1000-byte fragment (pattern `tag`) of a message tagged `tag`
 * that has more: what a dying sender leaves. */
void write_first_of_two(RawSegment &raw, uint16_t mine, uct_tag_t tag) {
    raw.write([&](ElemHeader *e, char *, char *desc) {
        e->kind   = Kind::kTagEager;
        e->flags  = kFlagFirst | kFlagMore | kFlagDesc;
        e->peer   = mine;
        e->length = 1000;
        e->tag    = tag;
        e->imm    = 0;
        fill_pattern(desc, 1000, tag);
    });
}

/* The sender dies between the fragments of a message a posted receive is
 * taking: the receive completes with UCS_ERR_CONNECTION_RESET (once), with
 * only the delivered fragment written, and the iface goes on. */
TEST_F(SmFifoGarbage, SenderDiesMidMessage) {
    RecvCtx     r;
    RecvBuffers b(8000);
    ASSERT_EQ(uct_iface_tag_recv_zcopy(rx_->iface, 0x5a, kFullMask, b.iov.data(), 1, &r.ctx),
              UCS_OK);
    die_holding_a_claim(rx_->address(), rx_->attr.device_addr_len,
                        [](RawSegment &raw, uint16_t mine) { write_first_of_two(raw, mine, 0x5a); });
    ASSERT_TRUE(wait([&] { return r.done(); }, 10)) << "callbacks [" << r.sequence() << "]";
    drain();
    EXPECT_EQ(r.sequence(), "consumed,completed");
    EXPECT_EQ(r.status, UCS_ERR_CONNECTION_RESET);
    EXPECT_EQ(b.check(0x5a, 1000), "");
    expect_alive(3001);
}

/* Fragments are published as they are written (a receiver copies one out
 * while its sender copies the next in). An unexpected message whose later
 * fragments are not there yet is held and goes up whole, once: one eager_cb
 * call, FIRST without MORE, as a descriptor, every byte; a posted receive takes the fragments
 * as they come. */
TEST_F(SmFifoGarbage, MessageStillBeingWrittenUnexpectedGoesUpWhole) {
    constexpr uint32_t kFrag = 1000;
    write_fragment(kFlagFirst | kFlagMore, tx_slot_, 0x3a, kFrag, 9);
    drain();
    EXPECT_EQ(rx_->unexp.fragments, 0u) << "a part of the message went up";
    write_fragment(kFlagMore, tx_slot_, 0x3a, kFrag, 9, kFrag);
    drain();
    EXPECT_EQ(rx_->unexp.fragments, 0u) << "a part of the message went up";
    write_fragment(0, tx_slot_, 0x3a, kFrag, 9, 2 * kFrag);
    ASSERT_TRUE(wait([&] { return rx_->unexp.complete_messages() == 1; }));
    drain();
    ASSERT_EQ(rx_->unexp.messages.size(), 1u);
    const auto &m = rx_->unexp.messages[0];
    EXPECT_EQ(m.tag, 0x3au);
    EXPECT_EQ(m.flags, std::vector<unsigned>{UCT_CB_PARAM_FLAG_FIRST | UCT_CB_PARAM_FLAG_DESC})
            << "not one piece";
    ASSERT_EQ(m.data.size(), 3 * kFrag);
    std::string want(3 * kFrag, 0);
    fill_pattern(&want[0], want.size(), 9);
    EXPECT_TRUE(m.data == want) << "the bytes differ";
    EXPECT_TRUE(rx_->unexp.violations.empty()) << rx_->unexp.violations[0];
    /* expected: the posted receive takes the first fragment at once */
    RecvCtx     r;
    RecvBuffers b(3 * kFrag);
    ASSERT_EQ(uct_iface_tag_recv_zcopy(rx_->iface, 0x3b, kFullMask, b.iov.data(), 1, &r.ctx),
              UCS_OK);
    write_fragment(kFlagFirst | kFlagMore, tx_slot_, 0x3b, kFrag, 10);
    drain();
    EXPECT_EQ(r.sequence(), "consumed");
    EXPECT_EQ(b.check(10, kFrag), "") << "the first fragment is not in place yet";
    write_fragment(0, tx_slot_, 0x3b, 2 * kFrag, 10, kFrag);
    ASSERT_TRUE(wait([&] { return r.done(); }));
    EXPECT_EQ(r.sequence(), "consumed,completed");
    EXPECT_EQ(r.status, UCS_OK);
    EXPECT_EQ(b.check(10, 3 * kFrag), "");
    expect_alive(11);
}

/* The sender of an unexpected message dies after its first fragments:
 * nothing of it goes up (no half message for the layer above to match),
 * the rest is skipped, and the iface goes on. */
TEST_F(SmFifoGarbage, SenderDiesMidUnexpectedMessageNothingGoesUp) {
    die_holding_a_claim(rx_->address(), rx_->attr.device_addr_len,
                        [](RawSegment &raw, uint16_t mine) { write_first_of_two(raw, mine, 0x5b); });
    expect_alive(3002); /* waits past the skip of the dead sender's claim */
    drain();
    EXPECT_EQ(rx_->unexp.fragments, 0u) << "a part of the dead sender's message went up";
    EXPECT_EQ(rx_->unexp.messages.size(), 0u);
}

/* A sender dies holding several claimed elements that are not adjacent:
 * one, then - after a live sender's message - three in one claim (as a
 * multi-fragment eager claims). Every one of them is skipped, every live
 * message arrives intact, the receiver's endpoint to the dead process
 * reports UCS_ERR_CONNECTION_RESET, and nothing hangs (bounded waits). */
TEST_F(SmFifoGarbage, DeadSenderHoldingSeveralClaimsIsSkippedWhole) {
    constexpr int      kLive    = 8;
    constexpr uint32_t kLater   = 3; /* claimed in one go after the live message */
    constexpr uint64_t kDeadOwn = 1 + kLater;
    int up[2], down[2];
    ASSERT_EQ(pipe(up), 0);
    ASSERT_EQ(pipe(down), 0);
    const pid_t child = fork();
    ASSERT_GE(child, 0);
    if (child == 0) {
        alarm(60);
        close(up[0]);
        close(down[1]);
        /* Never destroyed: the process dies holding its claims. */
        auto       *env  = new UctEnv();
        auto       *node = new Node(*env, "tm_sm");
        auto       *raw  = new RawSegment();
        uct_ep_h    ep;
        const bool  ok   = (node->status == UCS_OK) &&
                         (node->connect(rx_->address(), &ep) == UCS_OK) &&
                         raw->attach(rx_->address().data() + rx_->attr.device_addr_len);
        const std::string mine = ok ? node->address() : std::string();
        const uint32_t    len  = static_cast<uint32_t>(mine.size());
        char              step = 0;
        if ((::write(up[1], &len, sizeof(len)) != sizeof(len)) ||
            (::write(up[1], mine.data(), len) != static_cast<ssize_t>(len)) || !ok) {
            _exit(1);
        }
        step = raw->claim_only(1) ? 'a' : 'f';
        if ((::write(up[1], &step, 1) != 1) || (step != 'a') || (::read(down[0], &step, 1) != 1)) {
            _exit(1);
        }
        step = raw->claim_only(kLater) ? 'k' : 'f';
        (void)!::write(up[1], &step, 1);
        pause(); /* killed here */
        _exit(0);
    }
    close(up[1]);
    close(down[0]);
    auto reap = [&] {
        kill(child, SIGKILL);
        waitpid(child, nullptr, 0);
        close(up[0]);
        close(down[1]);
    };
    uint32_t    len = 0;
    std::string child_address;
    if (read(up[0], &len, sizeof(len)) == sizeof(len)) {
        child_address.resize(len);
        if (read(up[0], &child_address[0], len) != static_cast<ssize_t>(len)) {
            child_address.clear();
        }
    }
    uct_ep_h back = nullptr;
    if (child_address.empty() || (rx_->connect(child_address, &back) != UCS_OK)) {
        reap();
        FAIL() << "the child did not connect";
    }

    std::deque<RecvCtx>     ctxs(kLive);
    std::deque<RecvBuffers> bufs;
    for (int i = 0; i < kLive; ++i) {
        bufs.emplace_back(3000);
        ASSERT_EQ(uct_iface_tag_recv_zcopy(rx_->iface, 0xb000 + i, kFullMask,
                                           bufs.back().iov.data(), 1, &ctxs[i].ctx),
                  UCS_OK);
    }
    auto send_live = [&](int i) {
        Send         s(Path::kBcopy, 0xb000 + i, 7, 500 + i, 3000);
        ucs_status_t status = UCS_ERR_NO_RESOURCE;
        EXPECT_TRUE(wait([&] { return (status = s.post(ep_)) != UCS_ERR_NO_RESOURCE; }))
            << "live message " << i << " found no room";
        EXPECT_EQ(status, UCS_OK) << "live message " << i;
    };
    char step = 0;
    if ((read(up[0], &step, 1) != 1) || (step != 'a')) {
        reap();
        FAIL() << "the child could not claim its first element";
    }
    send_live(0); /* between the dead process's claims */
    step = 'g';
    if ((::write(down[1], &step, 1) != 1) || (read(up[0], &step, 1) != 1) || (step != 'k')) {
        reap();
        FAIL() << "the child could not claim its later elements";
    }
    reap();
    for (int i = 1; i < kLive; ++i) {
        send_live(i);
    }

    const bool all = wait([&] {
        return std::all_of(ctxs.begin(), ctxs.end(), [](const RecvCtx &r) { return r.done(); });
    }, 10);
    for (int i = 0; i < kLive; ++i) {
        if (!ctxs[i].done()) {
            uct_iface_tag_recv_cancel(rx_->iface, &ctxs[i].ctx, 1);
        }
    }
    if (!all) {
        uct_ep_destroy(back);
    }
    ASSERT_TRUE(all) << "live messages stopped behind the dead process's claims";
    for (int i = 0; i < kLive; ++i) {
        SCOPED_TRACE(i);
        EXPECT_EQ(ctxs[i].sequence(), "consumed,completed");
        EXPECT_EQ(ctxs[i].status, UCS_OK);
        EXPECT_EQ(bufs[i].check(500 + i, 3000), "");
    }
    EXPECT_EQ(raw_.header()->skips.load(), kDeadOwn) << "skips of the dead process's elements";

    EXPECT_TRUE(wait([&] { return rx_->errors.count(back) > 0; }, 10))
        << "no error for the endpoint to the dead process";
    drain();
    EXPECT_EQ(rx_->errors.count(back), 1);
    Send later(Path::kBcopy, 1, 0, 1, 100);
    EXPECT_EQ(later.post(back), UCS_ERR_CONNECTION_RESET);
    uct_ep_destroy(back);
    expect_alive(3002);
}

/* A rendezvous FIN (and RTR) is taken only from the process the send went
 * to: another peer of the sender that guesses the operation's token
 * completes nothing, and the real receiver's FIN still completes it once. */
TEST_F(SmFifoGarbage, FinFromAnotherPeerCompletesNothing) {
    UctEnv   venv; /* the victim sender, on a worker of its own */
    Node     v(venv, "tm_sm");
    ASSERT_EQ(v.status, UCS_OK);
    uct_ep_h v_ep = nullptr, f_ep = nullptr;
    ASSERT_EQ(v.connect(rx_->address(), &v_ep), UCS_OK);
    RecvCtx     r;
    RecvBuffers b(4096);
    ASSERT_EQ(uct_iface_tag_recv_zcopy(rx_->iface, 0x99, kFullMask, b.iov.data(), 1, &r.ctx),
              UCS_OK);
    Send s(Path::kRndv, 0x99, 0, 3, 4096);
    ASSERT_EQ(s.post(v_ep), UCS_OK);
    /* The forger: another peer of the sender (tx_), writing into its FIFO. */
    ASSERT_EQ(tx_->connect(v.address(), &f_ep), UCS_OK);
    std::string v_addr(v.attr.iface_addr_len, '\0');
    ASSERT_EQ(uct_iface_get_address(v.iface, reinterpret_cast<uct_iface_addr_t *>(&v_addr[0])),
              UCS_OK);
    RawSegment raw_v;
    ASSERT_TRUE(raw_v.attach(v_addr.data())) << raw_v.error();
    const int forger = raw_v.used_peer_slot();
    ASSERT_GE(forger, 0);
    const uint64_t token = reinterpret_cast<uintptr_t>(s.rndv_op);
    for (Kind kind : {Kind::kRndvRtr, Kind::kRndvFin}) {
        ASSERT_TRUE(raw_v.write([&](ElemHeader *e, char *, char *) {
            e->kind   = kind;
            e->flags  = kFlagFirst;
            e->peer   = static_cast<uint16_t>(forger);
            e->length = 0;
            e->aux    = static_cast<uint32_t>(UCS_OK);
            e->tag    = 0;
            e->imm    = token;
        }));
    }
    for (int i = 0; i < 300; ++i) {
        uct_worker_progress(venv.worker());
    }
    EXPECT_EQ(s.comp->calls, 0) << "another process's FIN completed the rendezvous send";
    /* The receiver reads it and sends the real FIN. */
    EXPECT_TRUE(wait_for([&] { return r.done() && (s.comp->calls > 0); }, [&] {
        progress();
        uct_worker_progress(venv.worker());
    }));
    EXPECT_EQ(r.status, UCS_OK);
    EXPECT_EQ(b.check(3, 4096), "");
    for (int i = 0; i < 300; ++i) {
        uct_worker_progress(venv.worker());
    }
    EXPECT_EQ(s.comp->calls, 1);
    EXPECT_EQ(s.comp->status, UCS_OK);
    uct_ep_destroy(f_ep);
    uct_ep_destroy(v_ep);
}

/* A FIN (or RTR) that names the receiver's own slot in the sender's peer
 * table, written by another process: the element's peer field is whatever
 * its writer puts there, so only the token's proof (which came with the RTS
 * and no other process has) lets an answer through. */
TEST_F(SmFifoGarbage, FinNamingTheReceiversSlotCompletesNothing) {
    UctEnv venv; /* the victim sender, on a worker of its own */
    Node   v(venv, "tm_sm");
    ASSERT_EQ(v.status, UCS_OK);
    uct_ep_h v_ep = nullptr, r_ep = nullptr, f_ep = nullptr;
    ASSERT_EQ(v.connect(rx_->address(), &v_ep), UCS_OK);
    ASSERT_EQ(rx_->connect(v.address(), &r_ep), UCS_OK); /* the slot the real FIN uses */
    ASSERT_EQ(tx_->connect(v.address(), &f_ep), UCS_OK); /* the forger's own slot */
    RecvCtx     r;
    RecvBuffers b(4096);
    ASSERT_EQ(uct_iface_tag_recv_zcopy(rx_->iface, 0x98, kFullMask, b.iov.data(), 1, &r.ctx),
              UCS_OK);
    Send s(Path::kRndv, 0x98, 0, 5, 4096);
    ASSERT_EQ(s.post(v_ep), UCS_OK);
    const uint64_t token = reinterpret_cast<uintptr_t>(s.rndv_op);
    std::string    v_addr(v.attr.iface_addr_len, '\0');
    ASSERT_EQ(uct_iface_get_address(v.iface, reinterpret_cast<uct_iface_addr_t *>(&v_addr[0])),
              UCS_OK);

    const pid_t child = fork();
    ASSERT_GE(child, 0);
    if (child == 0) {
        /* The third process: every used slot, every answer kind, proofs it can think of. */
        RawSegment raw_v;
        int        written = 0;
        if (raw_v.attach(v_addr.data())) {
            for (uint32_t slot = 0; slot < raw_v.geometry().max_peers; ++slot) {
                if ((raw_v.peer_slots()[slot].state.load() & 3) != kPeerUsed) {
                    continue;
                }
                for (Kind kind : {Kind::kRndvRtr, Kind::kRndvFin}) {
                    for (uint64_t proof : {uint64_t{0}, token, ~token}) {
                        written += raw_v.write([&](ElemHeader *e, char *, char *) {
                            e->kind   = kind;
                            e->flags  = kFlagFirst;
                            e->peer   = static_cast<uint16_t>(slot);
                            e->length = 0;
                            e->aux    = static_cast<uint32_t>(UCS_OK);
                            e->tag    = proof;
                            e->imm    = token;
                        });
                    }
                }
            }
        }
        _exit((written == 12) ? 0 : 1); /* two used slots x 2 kinds x 3 proofs */
    }
    int wstatus = 0;
    ASSERT_EQ(waitpid(child, &wstatus, 0), child);
    ASSERT_TRUE(WIFEXITED(wstatus) && (WEXITSTATUS(wstatus) == 0))
        << "the forger did not write its 12 answers";
    for (int i = 0; i < 300; ++i) {
        uct_worker_progress(venv.worker());
    }
    EXPECT_EQ(s.comp->calls, 0) << "a FIN naming the receiver's slot completed the send";
    EXPECT_TRUE(wait_for([&] { return r.done() && (s.comp->calls > 0); },
                         [&] {
                             progress();
                             uct_worker_progress(venv.worker());
                         }));
    EXPECT_EQ(r.status, UCS_OK);
    EXPECT_EQ(b.check(5, 4096), "");
    for (int i = 0; i < 300; ++i) {
        uct_worker_progress(venv.worker());
    }
    EXPECT_EQ(s.comp->calls, 1);
    EXPECT_EQ(s.comp->status, UCS_OK);
    uct_ep_destroy(f_ep);
    uct_ep_destroy(r_ep);
    uct_ep_destroy(v_ep);
}

/* A receiver that cannot attach back to a rendezvous sender (the sender's
 * peer table is full, so no FIN can reach it) rejects the send: the
 * sender's completion reports the error instead of waiting forever. */
TEST_F(SmFifoGarbage, RendezvousTheReceiverCannotAnswerFailsAtTheSender) {
    Node sender(*env_, "tm_sm", {{"MAX_PEERS", "1"}, {"PEER_CHECK_INTERVAL", "10ms"}});
    ASSERT_EQ(sender.status, UCS_OK);
    Node third(*env_, "tm_sm");
    ASSERT_EQ(third.status, UCS_OK);
    uct_ep_h to_rx = nullptr, occupy = nullptr;
    ASSERT_EQ(third.connect(sender.address(), &occupy), UCS_OK); /* the sender's only slot */
    ASSERT_EQ(sender.connect(rx_->address(), &to_rx), UCS_OK);
    for (bool expected : {true, false}) {
        SCOPED_TRACE(expected ? "expected" : "unexpected");
        RecvCtx     r;
        RecvBuffers b(8192);
        const uct_tag_t tag = expected ? 0x42 : 0x43;
        if (expected) {
            ASSERT_EQ(uct_iface_tag_recv_zcopy(rx_->iface, tag, kFullMask, b.iov.data(), 1, &r.ctx),
                      UCS_OK);
        }
        Send s(Path::kRndv, tag, 0, 4, 8192);
        ASSERT_EQ(s.post(to_rx), UCS_OK);
        EXPECT_TRUE(wait([&] { return s.comp->calls > 0; }, 5))
            << "the sender still waits for an answer that cannot come";
        EXPECT_EQ(s.comp->calls, 1);
        EXPECT_EQ(s.comp->status, UCS_ERR_UNREACHABLE);
        if (expected) {
            EXPECT_TRUE(r.done());
            EXPECT_EQ(r.status, UCS_ERR_UNREACHABLE);
            EXPECT_TRUE(b.untouched());
        }
        drain();
        EXPECT_EQ(s.comp->calls, 1);
    }
    uct_ep_destroy(to_rx);
    uct_ep_destroy(occupy);
}

/* tag_rndv_cancel while the receiver holds the send (READING) and does not
 * finish — it is stopped mid-copy, as this test plays it by taking the slot
 * itself: the cancel returns within a bounded time, and the receiver, when
 * it would finish, finds the send withdrawn. Run in a child process so a
 * cancel that never returns fails the test instead of hanging it. */
TEST_F(SmFifoGarbage, RndvCancelReturnsWhileTheReceiverIsStuckReading) {
    int fds[2];
    ASSERT_EQ(pipe(fds), 0);
    const pid_t child = fork();
    ASSERT_GE(child, 0);
    if (child == 0) {
        close(fds[0]);
        char result = 'x';
        {
            UctEnv   env;
            Node     sender(env, "tm_sm");
            Node     receiver(env, "tm_sm");
            uct_ep_h ep = nullptr;
            std::string addr(sender.attr.iface_addr_len, '\0');
            RawSegment  raw;
            if ((sender.status == UCS_OK) && (receiver.status == UCS_OK) &&
                (sender.connect(receiver.address(), &ep) == UCS_OK) &&
                (uct_iface_get_address(sender.iface,
                                       reinterpret_cast<uct_iface_addr_t *>(&addr[0])) == UCS_OK) &&
                raw.attach(addr.data())) {
                Send s(Path::kRndv, 0x77, 0, 7, 1 << 20);
                if (s.post(ep) == UCS_OK) {
                    const uint64_t token  = reinterpret_cast<uintptr_t>(s.rndv_op);
                    const uint32_t index  = static_cast<uint32_t>(token);
                    const uint32_t gen    = static_cast<uint32_t>(token >> 32) & 0x0fffffff;
                    uint32_t       posted = rndv_word(gen, kRndvPosted);
                    RndvSlot      &slot   = raw.rndv_slots()[index];
                    result = 'p';
                    if (slot.word.compare_exchange_strong(posted, rndv_word(gen, kRndvReading))) {
                        const auto start = std::chrono::steady_clock::now();
                        result = (uct_ep_tag_rndv_cancel(ep, s.rndv_op) == UCS_OK) ? 'o' : 'f';
                        const double secs = std::chrono::duration<double>(
                                                std::chrono::steady_clock::now() - start).count();
                        /* The stuck receiver's finish (READING -> DONE) must now fail. */
                        uint32_t reading = rndv_word(gen, kRndvReading);
                        if ((result == 'o') && (secs < 1.0) &&
                            !slot.word.compare_exchange_strong(reading, rndv_word(gen, kRndvDone))) {
                            result = 'k';
                        }
                    }
                }
                uct_ep_destroy(ep);
            }
        }
        (void)!::write(fds[1], &result, 1);
        _exit(0);
    }
    close(fds[1]);
    struct pollfd pfd = {fds[0], POLLIN, 0};
    char          result = 0;
    if ((poll(&pfd, 1, 10000) == 1) && (read(fds[0], &result, 1) == 1)) {
        EXPECT_EQ(result, 'k') << "o: cancel took a second or more or left the slot to the "
                                  "receiver; f: cancel failed; p/x: setup";
        waitpid(child, nullptr, 0);
    } else {
        kill(child, SIGKILL);
        waitpid(child, nullptr, 0);
        ADD_FAILURE() << "tag_rndv_cancel did not return in 10 s while the receiver was stuck";
    }
    close(fds[0]);
}


/* The sender's rendezvous slot of a posted send, seen through a raw view of
 * the sender's segment and locked READING as a receiver locks it; rtr()
 * invites the sender to write its pieces (with the proof from the packed
 * rkey the receiver was given), release() hands the slot back. */
struct RawRendezvous {
    RawSegment raw;
    int        rx_slot = -1;
    uint64_t   token   = 0;
    uint64_t   proof   = 0;
    uint32_t   gen     = 0;
    RndvSlot  *slot    = nullptr;

    bool lock(const Node &tx, const Send &s, const std::string &packed_rkey) {
        uct_tm::sm::PackedRkey key;
        if (packed_rkey.size() != sizeof(key)) {
            return false;
        }
        memcpy(&key, packed_rkey.data(), sizeof(key));
        proof = key.rndv_proof;
        std::string addr(tx.attr.iface_addr_len, '\0');
        if ((uct_iface_get_address(tx.iface, reinterpret_cast<uct_iface_addr_t *>(&addr[0])) !=
             UCS_OK) || !raw.attach(addr.data()) || ((rx_slot = raw.used_peer_slot()) < 0)) {
            return false;
        }
        token           = reinterpret_cast<uintptr_t>(s.rndv_op);
        gen             = static_cast<uint32_t>(token >> 32) & 0x0fffffff;
        slot            = &raw.rndv_slots()[static_cast<uint32_t>(token)];
        uint32_t posted = rndv_word(gen, kRndvPosted);
        return slot->word.compare_exchange_strong(posted, rndv_word(gen, kRndvReading));
    }
    bool rtr() {
        return raw.write([&](ElemHeader *e, char *, char *) {
            e->kind   = Kind::kRndvRtr;
            e->flags  = kFlagFirst;
            e->peer   = static_cast<uint16_t>(rx_slot);
            e->length = 0;
            e->aux    = 0;
            e->tag    = proof;
            e->imm    = token;
        });
    }
    void release() {
        uint32_t reading = rndv_word(gen, kRndvReading);
        slot->word.compare_exchange_strong(reading, rndv_word(gen, kRndvPosted));
    }
};
/* An RTR whose receiver buffers wrap the address space (lengths summing
 * past 2^64 to look large enough) is dropped: the sender claims and writes
 * no piece. */
TEST_F(SmFifoGarbage, RtrWithWrappingBuffersIsDropped) {
    Send s(Path::kRndv, 0x31, 0, 31, 4096);
    ASSERT_EQ(s.post(ep_), UCS_OK);
    ASSERT_TRUE(wait([&] { return !rx_->unexp.rndvs.empty(); })); /* rx attached back to tx */
    RawRendezvous r;
    ASSERT_TRUE(r.lock(*tx_, s, rx_->unexp.rndvs.back().rkey)) << r.raw.error();
    RndvSlot &slot = *r.slot;
    slot.piece_size   = 4096;
    slot.receiver_pid = getpid();
    slot.iovcnt       = 2;
    slot.length       = 4096;
    slot.iov[0]       = RemoteIov{reinterpret_cast<uintptr_t>(hole_), ~uint64_t{0}};
    slot.iov[1]       = RemoteIov{reinterpret_cast<uintptr_t>(hole_), 8192};
    const uint64_t claim = SplitClaim{0, 1, 1}.pack();
    slot.sender_done.store(SplitDone{0, 1, UCS_OK}.pack());
    slot.claim.store(claim);
    ASSERT_TRUE(r.rtr());
    drain();
    EXPECT_EQ(SplitDone::unpack(slot.sender_done.load()).pieces, 0u)
        << "the sender copied pieces into wrapping buffers";
    EXPECT_EQ(slot.claim.load(), claim) << "the sender claimed a piece";
    r.release(); /* as the receiver would; then withdraw the send */
    EXPECT_EQ(uct_ep_tag_rndv_cancel(ep_, s.rndv_op), UCS_OK);
}

/* A receiver that writes a huge claim counter (hi = 2^24 - 1) into the
 * sender's slot before its RTR: the sender copies the message's pieces and
 * stops there; it used to claim four billion empty pieces inside one
 * progress call. */
TEST_F(SmFifoGarbage, RtrWithAHugeClaimCounterStopsAtTheMessage) {
    constexpr size_t kLength = 65536, kPiece = 4096;
    Send s(Path::kRndv, 0x32, 0, 32, kLength);
    ASSERT_EQ(s.post(ep_), UCS_OK);
    ASSERT_TRUE(wait([&] { return !rx_->unexp.rndvs.empty(); })); /* rx attached back to tx */
    RawRendezvous r;
    ASSERT_TRUE(r.lock(*tx_, s, rx_->unexp.rndvs.back().rkey)) << r.raw.error();
    RndvSlot &slot = *r.slot;
    std::vector<char> into(kLength, 0);
    slot.piece_size   = kPiece;
    slot.receiver_pid = getpid();
    slot.iovcnt       = 1;
    slot.length       = kLength;
    slot.iov[0]       = RemoteIov{reinterpret_cast<uintptr_t>(into.data()), kLength};
    slot.sender_done.store(SplitDone{0, 1, UCS_OK}.pack());
    slot.claim.store(SplitClaim{0, kMaxSplitPieces, 1}.pack());
    ASSERT_TRUE(r.rtr());
    drain();
    const SplitDone done = SplitDone::unpack(slot.sender_done.load());
    EXPECT_EQ(done.pieces, kLength / kPiece) << "pieces the sender claimed";
    EXPECT_EQ(pattern_mismatch(into.data(), kLength, 32), SIZE_MAX) << "the pieces it wrote";
    EXPECT_NE(done.status, UCS_OK) << "a counter no receiver writes";
    r.release();
    EXPECT_EQ(uct_ep_tag_rndv_cancel(ep_, s.rndv_op), UCS_OK);
    expect_alive(33);
}

/* A receiver whose peer table the test reads through the raw segment. */
struct WatchedReceiver {
    Node       node;
    RawSegment raw;
    bool       attached = false;

    WatchedReceiver(UctEnv &env, const Settings &settings) : node(env, "tm_sm", settings) {
        if (node.status != UCS_OK) {
            return;
        }
        std::string iface(node.attr.iface_addr_len, '\0');
        attached = (uct_iface_get_address(node.iface,
                                          reinterpret_cast<uct_iface_addr_t *>(&iface[0])) ==
                    UCS_OK) &&
                   raw.attach(iface.data());
    }
    int used_slots() {
        int n = 0;
        for (uint32_t k = 0; k < raw.geometry().max_peers; ++k) {
            n += (raw.peer_slots()[k].state.load() & 3) == kPeerUsed;
        }
        return n;
    }
};

/* A sender in a child process that posts one rendezvous send of `length`
 * bytes to `address`, never progresses, and when the receiver invites it to
 * share the copy claims every piece left and writes none: the receiver's
 * split copy waits for pieces that never come. The child reports the number
 * of pieces it withheld (one byte, at most 255) and then waits to be killed. */
class WithholdingSender {
  public:
    WithholdingSender(const std::string &address, uct_tag_t tag, size_t length) {
        fflush(nullptr);
        if ((pipe(pipe_) != 0) || ((pid_ = fork()) < 0)) {
            return;
        }
        if (pid_ != 0) {
            close(pipe_[1]);
            return;
        }
        close(pipe_[0]);
        alarm(60);
        _exit(run(address, tag, length));
    }
    ~WithholdingSender() {
        if (pid_ > 0) {
            kill(pid_, SIGKILL);
            waitpid(pid_, nullptr, 0);
        }
        close(pipe_[0]);
    }
    WithholdingSender(const WithholdingSender &)            = delete;
    WithholdingSender &operator=(const WithholdingSender &) = delete;

    /* Pieces withheld, or -1 if the child could not set up. */
    int withheld() {
        unsigned char n = 0;
        return (pid_ > 0) && (::read(pipe_[0], &n, 1) == 1) ? ((n == 0xff) ? -1 : n) : -1;
    }

  private:
    int run(const std::string &address, uct_tag_t tag, size_t length) {
        UctEnv        env;
        Node          node(env, "tm_sm");
        uct_ep_h      ep = nullptr;
        Send          send(Path::kRndv, tag, 0, tag, length);
        RawSegment    own;
        std::string   own_addr(node.attr.iface_addr_len, '\0');
        unsigned char n = 0xff;
        if ((node.status != UCS_OK) || (node.connect(address, &ep) != UCS_OK) ||
            (send.post(ep) != UCS_OK) ||
            (uct_iface_get_address(node.iface,
                                   reinterpret_cast<uct_iface_addr_t *>(&own_addr[0])) != UCS_OK) ||
            !own.attach(own_addr.data())) {
            (void)!::write(pipe_[1], &n, 1);
            pause();
        }
        RndvSlot &slot =
            own.rndv_slots()[static_cast<uint32_t>(reinterpret_cast<uintptr_t>(send.rndv_op))];
        for (;;) { /* the receiver's invitation resets the counter to [0, pieces) */
            uint64_t         claim = slot.claim.load();
            const SplitClaim c     = SplitClaim::unpack(claim);
            if ((c.lo < c.hi) &&
                slot.claim.compare_exchange_strong(claim, SplitClaim{c.hi, c.hi, c.epoch}.pack())) {
                n = static_cast<unsigned char>(std::min<uint32_t>(c.hi - c.lo, 254));
                break;
            }
        }
        (void)!::write(pipe_[1], &n, 1);
        pause();
        return 0;
    }

    int   pipe_[2] = {-1, -1};
    pid_t pid_     = -1;
};

/* A sender that claims pieces of a split copy and never writes them holds
 * the receive no longer than SPLIT_TIMEOUT: it fails UCS_ERR_TIMED_OUT, and
 * a force-cancel meanwhile returns within that bound too. */
TEST_F(SmFifoGarbage, WithheldSplitPiecesFailTheReceiveInTime) {
    constexpr size_t kLength = 32 << 20; /* 128 pieces of 256 KiB */
    for (bool cancel : {false, true}) {
        SCOPED_TRACE(cancel ? "force-cancelled" : "progressed");
        const uct_tag_t tag = cancel ? 0x52 : 0x51;
        RecvCtx         r;
        RecvBuffers     b(kLength);
        ASSERT_EQ(uct_iface_tag_recv_zcopy(rx_->iface, tag, kFullMask, b.iov.data(), 1, &r.ctx),
                  UCS_OK);
        WithholdingSender sender(rx_->address(), tag, kLength);
        /* The receiver matches the RTS and splits the copy; the child claims
         * what it can while the receiver copies its pieces from the back. */
        ASSERT_TRUE(wait([&] { return r.consumed(); })) << "the rendezvous did not arrive";
        const int withheld = sender.withheld();
        ASSERT_GE(withheld, 0) << "the withholding sender could not set up";
        if (withheld == 0) {
            printf("the receiver took every piece before the child ran\n");
            continue;
        }
        const auto start = std::chrono::steady_clock::now();
        if (cancel) {
            EXPECT_EQ(uct_iface_tag_recv_cancel(rx_->iface, &r.ctx, 1), UCS_OK);
        } else {
            EXPECT_TRUE(wait([&] { return r.done(); })) << "the receive never finished";
            EXPECT_EQ(r.status, UCS_ERR_TIMED_OUT);
        }
        const double seconds =
            std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
        /* SPLIT_TIMEOUT is 300 ms here; the default (1 s) would not pass. */
        EXPECT_LT(seconds, 0.95) << withheld << " withheld pieces held the receiver";
        printf("%d pieces withheld: %s after %.2f s\n", withheld,
               cancel ? "cancel returned" : "the receive failed", seconds);
        if (cancel) {
            /* The forced cancel took the context back: nothing completes it later. */
            const auto until = std::chrono::steady_clock::now() + std::chrono::milliseconds(500);
            while (std::chrono::steady_clock::now() < until) {
                progress();
            }
            EXPECT_FALSE(r.done()) << "a force-cancelled receive completed";
        }
    }
}

/* A sender in a child process: connects to `address`, posts a rendezvous
 * send of tag `tag` (the RTS makes the receiver attach back to it) and, with
 * `eager`, an eager one after it, and writes one byte to the parent: 'k',
 * or 'c' (could not connect), 's' (could not send). Then, with `leave`, it
 * waits for a byte from the parent, destroys its endpoint (leaving the
 * receiver's peer table while it lives) and writes again; either way it ends
 * waiting to be killed. */
class ChildSender {
  public:
    ChildSender(const std::string &address, uct_tag_t tag, bool eager, bool leave) {
        fflush(nullptr);
        if ((pipe(to_parent_) != 0) || (pipe(to_child_) != 0) || ((pid_ = fork()) < 0)) {
            close_all(); /* no child: result() and leave() report nothing, block on nothing */
            return;
        }
        if (pid_ != 0) {
            close_fd(&to_parent_[1]);
            close_fd(&to_child_[0]);
            return;
        }
        /* The parent's ends closed: a parent that dies ends the wait for its byte. */
        close_fd(&to_parent_[0]);
        close_fd(&to_child_[1]);
        alarm(60);
        char result = 'x';
        {
            UctEnv   env;
            Node     node(env, "tm_sm");
            uct_ep_h ep = nullptr;
            Send     rndv(Path::kRndv, tag, 0, tag, 4096);
            Send     bcopy(Path::kBcopy, tag + 1, 1, tag, 100);
            if ((node.status != UCS_OK) || (node.connect(address, &ep) != UCS_OK)) {
                result = 'c';
            } else {
                result = ((rndv.post(ep) == UCS_OK) && (!eager || (bcopy.post(ep) == UCS_OK)))
                             ? 'k' : 's';
            }
            (void)!::write(to_parent_[1], &result, 1);
            if (leave && (::read(to_child_[0], &result, 1) == 1)) {
                if (ep != nullptr) {
                    uct_ep_destroy(ep);
                }
                (void)!::write(to_parent_[1], &result, 1);
            }
            pause();
        }
        _exit(0);
    }
    ~ChildSender() {
        kill_now();
        close_all();
    }
    ChildSender(const ChildSender &)            = delete;
    ChildSender &operator=(const ChildSender &) = delete;

    /* The child's first report ('k' when all went well), 0 if none came. */
    char result() {
        char c = 0;
        return (::read(to_parent_[0], &c, 1) == 1) ? c : 0;
    }
    /* A `leave` sender destroys its endpoint; true once it says so. */
    bool leave() {
        char c = 'l';
        return (pid_ > 0) && (::write(to_child_[1], &c, 1) == 1) &&
               (::read(to_parent_[0], &c, 1) == 1);
    }
    void kill_now() {
        if (pid_ > 0) {
            kill(pid_, SIGKILL);
            waitpid(pid_, nullptr, 0);
            pid_ = -1;
        }
    }

  private:
    static void close_fd(int *fd) {
        if (*fd >= 0) {
            close(*fd);
            *fd = -1;
        }
    }
    void close_all() {
        for (int *fd : {&to_parent_[0], &to_parent_[1], &to_child_[0], &to_child_[1]}) {
            close_fd(fd);
        }
    }

    pid_t pid_          = -1;
    int   to_parent_[2] = {-1, -1};
    int   to_child_[2]  = {-1, -1};
};

/* Senders that die give back what the receiver holds for them: their entry
 * in its peer table (else MAX_PEERS deaths later no sender can connect) and
 * its attachment to them (a pidfd and a mapping each), without any stall. */
TEST_F(SmFifoGarbage, DeadSendersGiveBackTheirPeerTableEntries) {
    WatchedReceiver rx(*env_, {{"MAX_PEERS", "4"}, {"PEER_CHECK_INTERVAL", "10ms"}});
    ASSERT_EQ(rx.node.status, UCS_OK);
    ASSERT_TRUE(rx.attached) << rx.raw.error();
    const std::string address         = rx.node.address();
    size_t            fds_after_first = 0;
    for (int round = 0; round < 12; ++round) {
        SCOPED_TRACE("sender " + std::to_string(round));
        ChildSender  child(address, 0x4400 + 2 * round, true, false);
        const char   result = child.result();
        const size_t rndvs  = rx.node.unexp.rndvs.size();
        EXPECT_EQ(result, 'k') << "c: could not connect (peer table full?); s: could not send";
        if (result == 'k') {
            EXPECT_TRUE(wait([&] { return rx.node.unexp.rndvs.size() > rndvs; }));
        }
        child.kill_now(); /* endpoint and send outstanding */
        EXPECT_TRUE(wait([&] { return rx.used_slots() == 0; }, 5))
            << "the dead sender's peer-table entry is still in use";
        if (round == 0) {
            fds_after_first = open_fds();
        }
        if (HasFailure()) {
            break;
        }
    }
    EXPECT_LE(open_fds(), fds_after_first + 1) << "descriptors kept for dead senders";
}

/* A dead sender the receiver attached back to is given back at the peer check
 * that finds it dead -- its entry, the pidfd and the mapping -- not when the
 * sweep of a large peer table comes by (4096 entries at 16 a check: 25 s). */
TEST_F(SmFifoGarbage, DeadSenderWeAttachedToIsGivenBackAtOnce) {
    WatchedReceiver rx(*env_, {{"MAX_PEERS", "4096"}, {"PEER_CHECK_INTERVAL", "100ms"}});
    ASSERT_EQ(rx.node.status, UCS_OK);
    ASSERT_TRUE(rx.attached) << rx.raw.error();
    /* The first checks sweep the start of the table before the sender comes. */
    const auto settle = std::chrono::steady_clock::now() + std::chrono::milliseconds(300);
    wait([&] { return std::chrono::steady_clock::now() > settle; }, 1);
    const size_t pidfds = open_fds(kPidfdLink);
    ChildSender  child(rx.node.address(), 0x4800, false, false);
    const char   result = child.result();
    const size_t rndvs  = rx.node.unexp.rndvs.size();
    EXPECT_EQ(result, 'k') << "c: could not connect; s: could not send";
    if (result == 'k') {
        EXPECT_TRUE(wait([&] { return rx.node.unexp.rndvs.size() > rndvs; }));
        EXPECT_EQ(open_fds(kPidfdLink), pidfds + 1) << "the RTS makes the receiver attach back";
    }
    EXPECT_EQ(rx.used_slots(), 1);
    child.kill_now();
    EXPECT_TRUE(wait([&] { return (rx.used_slots() == 0) && (open_fds(kPidfdLink) == pidfds); }, 3))
        << rx.used_slots() << " entries in use, " << open_fds(kPidfdLink) - pidfds
        << " pidfds kept for the dead sender";
}

/* A sender that gives up its endpoint while it lives frees its peer-table
 * entry itself. The receiver attached back to it (for the RTS's answer) and
 * has no endpoint of its own to it: that attachment, a pidfd and a mapping
 * of the sender's segment, goes too, without waiting for another sender
 * to reuse the entry or for the process to exit. */
TEST_F(SmFifoGarbage, SendersThatLeaveTheirPeerTableEntryGiveBackTheAttachment) {
    Node rx(*env_, "tm_sm", {{"MAX_PEERS", "4"}, {"PEER_CHECK_INTERVAL", "10ms"}});
    ASSERT_EQ(rx.status, UCS_OK);
    const std::string address = rx.address();
    const size_t      pidfds  = open_fds(kPidfdLink);
    for (int round = 0; round < 3; ++round) {
        SCOPED_TRACE("sender " + std::to_string(round));
        ChildSender  child(address, 0x4600 + 2 * round, false, true);
        const char   result = child.result();
        const size_t rndvs  = rx.unexp.rndvs.size();
        EXPECT_EQ(result, 'k') << "c: could not connect; s: could not send";
        if (result == 'k') {
            EXPECT_TRUE(wait([&] { return rx.unexp.rndvs.size() > rndvs; }));
            EXPECT_EQ(open_fds(kPidfdLink), pidfds + 1) << "the receiver watches the sender once";
        }
        EXPECT_TRUE(child.leave()) << "the sender did not destroy its endpoint";
        EXPECT_TRUE(wait([&] { return open_fds(kPidfdLink) == pidfds; }, 5))
            << "the receiver still watches a sender that left its peer table";
        if (HasFailure()) {
            break;
        }
    }
}

/* A sender dies after its RTS reached our FIFO and before we read it: the
 * posted receive it matches completes once with UCS_ERR_CONNECTION_RESET, as
 * every receive a dead sender was to fill -- not UCS_ERR_UNREACHABLE, which
 * says a live sender cannot be answered -- and the iface goes on. */
TEST_F(SmFifoGarbage, RendezvousOfASenderThatDiedFailsItsReceiveWithReset) {
    constexpr uct_tag_t kTag = 0x4a00;
    RecvCtx             r;
    RecvBuffers         b(4096);
    ASSERT_EQ(uct_iface_tag_recv_zcopy(rx_->iface, kTag, kFullMask, b.iov.data(), 1, &r.ctx),
              UCS_OK);
    {
        ChildSender child(rx_->address(), kTag, false, false);
        const char  result = child.result();
        if (result != 'k') {
            uct_iface_tag_recv_cancel(rx_->iface, &r.ctx, 1);
            FAIL() << "the sender could not " << ((result == 'c') ? "connect" : "send");
        }
        child.kill_now(); /* before this process reads the RTS */
    }
    ASSERT_TRUE(wait([&] { return r.done(); }, 5)) << "callbacks [" << r.sequence() << "]";
    drain();
    EXPECT_EQ(r.sequence(), "consumed,completed");
    EXPECT_EQ(r.status, UCS_ERR_CONNECTION_RESET) << ucs_status_string(r.status);
    EXPECT_TRUE(b.untouched());
    expect_alive(3003);
}

}  // namespace
}  // namespace uct_tm_test
