/*
 * Vectored sends and receives (uct_tm_proto_sendv / _recvv /
 * _recv_claimedv, docs/proto.md "Vectors") over each transport: every size
 * class (empty, eager, fragmented eager, rendezvous) expected and unexpected,
 * in vector shapes of one element, many small ones, uneven ones and ones
 * with empty elements, every element its own allocation with guard bytes
 * after it; truncation across element boundaries; posting order between
 * contiguous and vectored messages of one sender; requests in the caller's
 * memory; offload within the tag receive's max_iov; cancel; the argument
 * checks.
 */
#include "proto_fixture.h"

#include <algorithm>
#include <memory>

namespace uct_tm_test {
namespace {

constexpr uint64_t kAll   = ~uint64_t{0};
constexpr size_t   kGuard = 8;
/* 0: empty, 8: one eager message, 1000 and 20000: eager (20000 fragmented
 * over AM), 300000: rendezvous */
const size_t kSizes[] = {0, 8, 1000, 20000, 300000};

enum Shape { kOne, kManySmall, kUneven, kWithEmpty, kShapes };

/* Element lengths of shape `s` adding up to `total`. */
std::vector<size_t> split(size_t total, Shape s) {
    std::vector<size_t> out;
    switch (s) {
    case kOne:
        out = {total};
        break;
    case kManySmall: /* 40 elements (above tm_sm's 16 for a send, 8 for a receive), the
                      * last one takes the remainder */
        for (int i = 0; i < 39; ++i) {
            out.push_back(total / 40);
        }
        out.push_back(total - 39 * (total / 40));
        break;
    case kUneven: {
        size_t left = total;
        for (size_t want : {size_t{1}, size_t{7}, size_t{4093}, size_t{3}}) {
            const size_t n = std::min(want, left);
            out.push_back(n);
            left -= n;
        }
        out.push_back(left);
        break;
    }
    default: /* kWithEmpty */
        out = {0, total / 3, 0, 0, total - total / 3, 0};
        break;
    }
    return out;
}

/* A vector's elements, each its own allocation followed by kGuard 'g' bytes. */
struct Elements {
    std::vector<std::unique_ptr<char[]>> mem;
    std::vector<size_t>                  lens;
    std::vector<uct_tm_proto_iov_t>      iov;

    explicit Elements(const std::vector<size_t> &l) : lens(l) {
        for (size_t len : lens) {
            mem.emplace_back(new char[len + kGuard]);
            std::fill(mem.back().get(), mem.back().get() + len + kGuard, 'g');
            iov.push_back({(len != 0) ? mem.back().get() : nullptr, len});
        }
    }
    /* The elements filled with `data` in order (the sender's side). */
    Elements(const std::vector<size_t> &l, const std::vector<char> &data) : Elements(l) {
        size_t off = 0;
        for (size_t i = 0; i < lens.size(); ++i) {
            std::copy(data.begin() + off, data.begin() + off + lens[i], mem[i].get());
            off += lens[i];
        }
    }
    /* The first `n` bytes of `data` are in the elements, the rest of every
     * element untouched ('g') and no guard written. */
    void expect_holds(const std::vector<char> &data, size_t n) const {
        size_t off = 0;
        for (size_t i = 0; i < lens.size(); ++i) {
            const size_t got = (off < n) ? std::min(lens[i], n - off) : 0;
            EXPECT_TRUE(same_bytes(mem[i].get(), data.data() + off, got)) << "element " << i;
            for (size_t j = got; j < lens[i] + kGuard; ++j) {
                ASSERT_EQ('g', mem[i][j]) << "element " << i << " byte " << j << " of "
                                          << lens[i] << " written";
            }
            off += lens[i];
        }
    }
};

class ProtoIov : public ProtoTest {
  protected:
    /* Memory for a request in the caller's memory, and params using it. */
    struct alignas(UCT_TM_PROTO_REQUEST_ALIGN) CallerMemory {
        unsigned char bytes[UCT_TM_PROTO_REQUEST_SIZE];

        uct_tm_proto_op_params_t params() {
            uct_tm_proto_op_params_t p = {};
            p.flags                    = UCT_TM_PROTO_OP_USER_REQUEST;
            p.request                  = bytes;
            return p;
        }
    };
    /* Its final status (and info), or UCS_ERR_TIMED_OUT. */
    ucs_status_t wait_user(const CallerMemory &mem, uct_tm_proto_info_t *info = nullptr) {
        if (!wait_for(p_, [&] {
                return uct_tm_proto_request_user_test(mem.bytes, nullptr) != UCS_INPROGRESS;
            })) {
            return UCS_ERR_TIMED_OUT;
        }
        return uct_tm_proto_request_user_test(mem.bytes, info);
    }

    ucs_status_t sendv(const Elements &e, uint64_t tag, uint64_t data, uct_tm_proto_request_t *req,
                       unsigned flags = 0) {
        uct_tm_proto_op_params_t params = {};
        params.flags                    = flags | UCT_TM_PROTO_SEND_REMOTE_DATA;
        params.data                     = data;
        *req                            = 0;
        const ucs_status_t st = uct_tm_proto_sendv(p_.ab, e.iov.data(), e.iov.size(), tag,
                                                   &params, req);
        if (st != UCS_INPROGRESS) {
            *req = 0;
        }
        return st;
    }
    uct_tm_proto_request_t recvv(Elements &e, uint64_t tag, uint64_t mask = kAll) {
        uct_tm_proto_request_t req = 0;
        EXPECT_EQ(UCS_INPROGRESS, uct_tm_proto_recvv(p_.b, e.iov.data(), e.iov.size(), tag, mask,
                                                     nullptr, nullptr, &req));
        return req;
    }
    void wait_send(uct_tm_proto_request_t s) {
        if (s != 0) {
            EXPECT_EQ(UCS_OK, wait_request(p_, p_.a, s));
        }
    }
    /* Message `len` bytes sent in shape `ss`, received in shape `rs` of
     * capacity `cap`, the receive posted first or after the message arrived. */
    void transfer(size_t len, Shape ss, Shape rs, size_t cap, bool unexpected, uint64_t tag) {
        const auto data = pattern(len, static_cast<uint32_t>(tag));
        Elements   out(split(len, ss), data);
        Elements   in(split(cap, rs));
        uct_tm_proto_request_t rreq = 0, sreq = 0;
        if (!unexpected) {
            rreq = recvv(in, tag);
        }
        const ucs_status_t st = sendv(out, tag, 55, &sreq);
        ASSERT_TRUE((st == UCS_OK) || (st == UCS_INPROGRESS)) << ucs_status_string(st);
        if (unexpected) {
            ASSERT_TRUE(wait_unexpected(tag));
            rreq = recvv(in, tag);
        }
        uct_tm_proto_info_t info;
        const ucs_status_t  expect = (len > cap) ? UCS_ERR_MESSAGE_TRUNCATED : UCS_OK;
        ASSERT_EQ(expect, wait_request(p_, p_.b, rreq, &info));
        wait_send(sreq);
        EXPECT_EQ(len, info.length);
        EXPECT_EQ(tag, info.tag);
        EXPECT_EQ(55u, info.data);
        EXPECT_EQ(p_.ba, info.ep);
        in.expect_holds(data, std::min(len, cap));
    }
};

TEST_P(ProtoIov, ExpectedEverySizeEveryShape) {
    uint64_t tag = 1;
    for (size_t len : kSizes) {
        for (int s = 0; s < kShapes; ++s) {
            const Shape rs = static_cast<Shape>((s + 1) % kShapes); /* another shape */
            ASSERT_NO_FATAL_FAILURE(transfer(len, static_cast<Shape>(s), rs, len, false, tag++))
                    << len << " shape " << s;
        }
    }
}

TEST_P(ProtoIov, UnexpectedEverySizeEveryShape) {
    uint64_t tag = 100;
    for (size_t len : kSizes) {
        for (int s = 0; s < kShapes; ++s) {
            const Shape rs = static_cast<Shape>((s + 2) % kShapes);
            ASSERT_NO_FATAL_FAILURE(transfer(len, static_cast<Shape>(s), rs, len, true, tag++))
                    << len << " shape " << s;
        }
    }
}

/* A longer message fills the elements, the cut inside an element. */
TEST_P(ProtoIov, TruncatedAcrossElements) {
    uint64_t tag = 200;
    for (size_t len : {size_t{1000}, size_t{20000}, size_t{300000}}) {
        for (bool unexpected : {false, true}) {
            for (Shape rs : {kManySmall, kUneven, kWithEmpty}) {
                ASSERT_NO_FATAL_FAILURE(transfer(len, kUneven, rs, len / 2 + 5, unexpected, tag++))
                        << len << " unexpected " << unexpected << " shape " << rs;
            }
        }
    }
}

/* A vector's elements may be reused when the call returns; with more than
 * one nonempty element the data are copied too (INJECT, none, or SYNC:
 * staged, the staging buffer taken over by the request): the elements are
 * overwritten, then freed, right after the call. */
TEST_P(ProtoIov, InjectVectorReusableAfterReturn) {
    for (size_t len : kSizes) {
        const auto             data = pattern(len, 9);
        std::vector<char>      buf(len + kGuard, 'g');
        uct_tm_proto_request_t sreq = 0;
        {
            Elements           out(split(len, kUneven), data);
            const ucs_status_t st = sendv(out, 300 + len, 1, &sreq, UCT_TM_PROTO_SEND_INJECT);
            ASSERT_TRUE((st == UCS_OK) || (st == UCS_INPROGRESS));
            for (size_t i = 0; i < out.lens.size(); ++i) {
                std::fill(out.mem[i].get(), out.mem[i].get() + out.lens[i], 'z');
            }
        } /* elements freed */
        auto rreq = post(buf.data(), len, 300 + len, kAll);
        ASSERT_EQ(UCS_OK, wait_request(p_, p_.b, rreq)) << len;
        wait_send(sreq);
        EXPECT_TRUE(same_bytes(buf.data(), data.data(), len)) << len;
        EXPECT_EQ('g', buf[len]);
    }
}

/* Without INJECT no copy is made (docs/proto.md "Vectors"): a rendezvous
 * reads the elements when its data leave, so bytes written into them after
 * the call, before the receiver matched, are the ones that arrive. Also
 * sync and in the caller's memory. */
TEST_P(ProtoIov, RendezvousVectorReadInPlaceNotStaged) {
    for (const unsigned flags : {0u, unsigned(UCT_TM_PROTO_SEND_SYNC)}) {
        for (Shape shape : {kManySmall, kUneven, kWithEmpty}) {
            constexpr size_t       kLen = 300000;
            const auto             before = pattern(kLen, 11), after = pattern(kLen, 12);
            Elements               out(split(kLen, shape), before);
            uct_tm_proto_request_t sreq = 0;
            ASSERT_EQ(UCS_INPROGRESS, sendv(out, 0x310, 1, &sreq, flags)) << shape;
            size_t off = 0;
            for (size_t i = 0; i < out.lens.size(); ++i) {
                std::copy(after.begin() + off, after.begin() + off + out.lens[i],
                          out.mem[i].get());
                off += out.lens[i];
            }
            std::vector<char> buf(kLen + kGuard, 'g');
            auto              rreq = post(buf.data(), kLen, 0x310, kAll);
            ASSERT_EQ(UCS_OK, wait_request(p_, p_.b, rreq)) << shape;
            wait_send(sreq);
            EXPECT_TRUE(same_bytes(buf.data(), after.data(), kLen)) << "shape " << shape
                                                                    << " flags " << flags;
            EXPECT_EQ('g', buf[kLen]);
        }
    }
}

/* A vector sent into one buffer is written piece by piece by the sender
 * (kFlagPut, then put), without an intermediate copy, where the transport
 * writes remote memory (tm_sm: CMA; tm_rc, tm_dc). A buffer sent into a
 * vector, vector to vector, and any transport without writes: pushed.
 * Expected and unexpected, and truncated into a shorter buffer or vector. */
TEST_P(ProtoIov, RendezvousFromVectorsWrittenWhereTheTransportWrites) {
    /* tm_sm (CMA) and tm_rc write at once; so does tm_dc, but its
     * connections are made on demand, and a write the transport refuses for
     * now (not connected yet) is pushed instead: bytes only there */
    const bool counted = GetParam().rfind("tm_dc", 0) != 0;
    const bool rma     = GetParam().rfind("tm_", 0) == 0;
    struct Case {
        Shape  send, recv;
        size_t cap;
        bool   put;
    } const cases[] = {
            {kOne, kManySmall, 300000, false}, {kOne, kWithEmpty, 200000, false},
            {kUneven, kOne, 300000, true},     {kManySmall, kOne, 250000, true},
            {kUneven, kWithEmpty, 300000, false},
    };
    uint64_t tag = 0x3100;
    for (const Case &c : cases) {
        for (bool unexpected : {false, true}) {
            uct_tm_proto_stats_t before, after;
            uct_tm_proto_worker_stats(p_.b, &before);
            ASSERT_NO_FATAL_FAILURE(transfer(300000, c.send, c.recv, c.cap, unexpected, ++tag));
            uct_tm_proto_worker_stats(p_.b, &after);
            if (!counted) {
                continue; /* the bytes were checked */
            }
            EXPECT_EQ(0u, after.rndv_gets - before.rndv_gets) /* nothing here offers a read */
                    << "case " << (&c - cases) << " unexpected " << unexpected;
            EXPECT_EQ((rma && c.put) ? 1u : 0u, after.rndv_puts - before.rndv_puts)
                    << "case " << (&c - cases) << " unexpected " << unexpected;
        }
    }
}

/* Messages of one sender match in sending order whichever call sent them
 * or posted their receive. */
TEST_P(ProtoIov, OrderWithContiguousMessages) {
    constexpr uint64_t kTag = 0x77;
    const size_t lens[] = {8, 300000, 1000, 20000, 8, 300000, 0, 1000};
    constexpr size_t kN = sizeof(lens) / sizeof(lens[0]);
    std::vector<std::unique_ptr<Elements>> in;
    std::vector<uct_tm_proto_request_t>    rreqs, sreqs;
    std::vector<std::unique_ptr<Elements>> out; /* in use until the sends complete */
    for (size_t k = 0; k < kN; ++k) {
        in.push_back(std::make_unique<Elements>(split(300000, (k % 2) ? kUneven : kOne)));
        rreqs.push_back(recvv(*in.back(), kTag, (k % 3 == 0) ? 0 : kAll));
    }
    std::vector<std::vector<char>> data;
    for (size_t k = 0; k < kN; ++k) {
        data.push_back(pattern(lens[k], static_cast<uint32_t>(k)));
        uct_tm_proto_request_t s = 0;
        ucs_status_t           st;
        if (k % 2) {
            out.push_back(std::make_unique<Elements>(split(lens[k], kManySmall), data[k]));
            st = sendv(*out.back(), kTag, static_cast<uint32_t>(k), &s);
        } else {
            st = send(data[k].data(), lens[k], kTag, 0, static_cast<uint32_t>(k), &s);
        }
        ASSERT_TRUE((st == UCS_OK) || (st == UCS_INPROGRESS)) << k;
        sreqs.push_back(s);
    }
    for (size_t k = 0; k < kN; ++k) {
        uct_tm_proto_info_t info;
        ASSERT_EQ(UCS_OK, wait_request(p_, p_.b, rreqs[k], &info)) << k;
        EXPECT_EQ(k, info.data) << "receive " << k << " took message " << info.data;
        in[k]->expect_holds(data[k], lens[k]);
    }
    for (auto s : sreqs) {
        wait_send(s);
    }
}

/* Over a tag list (tm_sm: tag receive max_iov 8) a vector of up to max_iov
 * nonempty elements is offloaded, a longer one held in software; both get
 * their bytes, and posting order holds across the two (the software one was
 * posted first: the offloadable one after it must wait in software too). */
TEST_P(ProtoIov, VectorReceiveOffloadedWithinMaxIov) {
    const bool offload = (GetParam() == "tm_sm");
    for (bool software_first : {false, true}) {
        uct_tm_proto_stats_t before, after;
        uct_tm_proto_worker_stats(p_.b, &before);
        const auto data = pattern(20000, 8);
        Elements   many(split(20000, kManySmall)); /* 40 elements */
        Elements   few(split(20000, kUneven));     /* 5, one of them empty: 4 */
        uct_tm_proto_request_t r1 = 0, r2 = 0;
        if (software_first) {
            r1 = recvv(many, 0x700);
            r2 = recvv(few, 0x700);
        } else {
            r2 = recvv(few, 0x700);
            r1 = recvv(many, 0x700);
        }
        uct_tm_proto_worker_stats(p_.b, &after);
        if (offload) {
            EXPECT_EQ(software_first ? 0u : 1u, after.offloaded_recvs - before.offloaded_recvs);
            EXPECT_EQ(software_first ? 2u : 1u, after.software_recvs - before.software_recvs);
        }
        ASSERT_EQ(UCS_OK, send(data.data(), data.size(), 0x700, 0, 1));
        ASSERT_EQ(UCS_OK, send(data.data(), data.size(), 0x700, 0, 2));
        uct_tm_proto_info_t i1, i2;
        ASSERT_EQ(UCS_OK, wait_request(p_, p_.b, r1, &i1));
        ASSERT_EQ(UCS_OK, wait_request(p_, p_.b, r2, &i2));
        EXPECT_EQ(software_first ? 1u : 2u, i1.data); /* the earlier posted takes message 1 */
        EXPECT_EQ(software_first ? 2u : 1u, i2.data);
        many.expect_holds(data, data.size());
        few.expect_holds(data, data.size());
    }
}

TEST_P(ProtoIov, CancelVectorReceive) {
    Elements in(split(20000, kUneven));
    auto     rreq = recvv(in, 0x999);
    ASSERT_EQ(UCS_OK, uct_tm_proto_request_cancel(p_.b, rreq));
    uct_tm_proto_info_t info;
    ASSERT_EQ(UCS_ERR_CANCELED, wait_request(p_, p_.b, rreq, &info));
    EXPECT_EQ(0u, info.length);
    /* nothing matched it afterwards: the message waits as unexpected */
    const auto data = pattern(1000, 1);
    ASSERT_EQ(UCS_OK, send(data.data(), data.size(), 0x999));
    ASSERT_TRUE(wait_unexpected(0x999));
    in.expect_holds(data, 0);
    Elements in2(split(1000, kManySmall));
    auto     r2 = recvv(in2, 0x999);
    ASSERT_EQ(UCS_OK, wait_request(p_, p_.b, r2));
    in2.expect_holds(data, 1000);
}

TEST_P(ProtoIov, ClaimedIntoVector) {
    for (size_t len : kSizes) {
        const auto data = pattern(len, 4);
        uct_tm_proto_request_t sreq = 0; /* a rendezvous completes once received */
        const ucs_status_t     st   = send(data.data(), len, 0x400 + len, 0, 0, &sreq);
        ASSERT_TRUE((st == UCS_OK) || (st == UCS_INPROGRESS));
        ASSERT_TRUE(wait_unexpected(0x400 + len));
        uct_tm_proto_info_t info;
        uct_tm_proto_msg_t  msg = 0;
        ASSERT_EQ(UCS_OK, uct_tm_proto_probe(p_.b, 0x400 + len, kAll, nullptr,
                                             UCT_TM_PROTO_PROBE_PEEK | UCT_TM_PROTO_PROBE_CLAIM,
                                             &info, &msg));
        const size_t cap = (len > 8) ? len - 3 : len; /* truncated from 1000 bytes on */
        Elements     in(split(cap, kWithEmpty));
        uct_tm_proto_request_t rreq = 0;
        ASSERT_EQ(UCS_INPROGRESS, uct_tm_proto_recv_claimedv(p_.b, msg, in.iov.data(),
                                                             in.iov.size(), nullptr, &rreq));
        ASSERT_EQ((cap < len) ? UCS_ERR_MESSAGE_TRUNCATED : UCS_OK,
                  wait_request(p_, p_.b, rreq, &info))
                << len;
        EXPECT_EQ(len, info.length);
        in.expect_holds(data, cap);
        wait_send(sreq);
    }
}

/* A vectored receive in the caller's memory, without callback. */
TEST_P(ProtoIov, VectorReceiveInCallerMemory) {
    CallerMemory mem;
    for (size_t len : kSizes) {
        const auto               data = pattern(len, 6);
        Elements                 in(split(len, kUneven));
        uct_tm_proto_op_params_t params = mem.params();
        ASSERT_EQ(UCS_INPROGRESS, uct_tm_proto_recvv(p_.b, in.iov.data(), in.iov.size(), 0x500,
                                                     kAll, p_.ba, &params, nullptr));
        ASSERT_EQ(UCS_OK, send(data.data(), len, 0x500));
        uct_tm_proto_info_t info;
        ASSERT_EQ(UCS_OK, wait_user(mem, &info)) << len;
        EXPECT_EQ(len, info.length);
        in.expect_holds(data, len);
    }
}

/* A vectored send in the caller's memory: a staged one (fragments,
 * rendezvous) hands its staging buffer to the request found through that
 * memory. */
TEST_P(ProtoIov, VectorSendInCallerMemory) {
    CallerMemory mem;
    for (size_t len : kSizes) {
        const auto               data = pattern(len, 10);
        std::vector<char>        buf(len + kGuard, 'g');
        auto                     rreq = post(buf.data(), len, 0x800, kAll);
        uct_tm_proto_op_params_t params = mem.params();
        Elements                 out(split(len, kManySmall), data); /* in use until completion */
        const ucs_status_t       st = uct_tm_proto_sendv(p_.ab, out.iov.data(), out.iov.size(),
                                                         0x800, &params, nullptr);
        ASSERT_TRUE((st == UCS_OK) || (st == UCS_INPROGRESS)) << ucs_status_string(st);
        ASSERT_EQ(UCS_OK, wait_request(p_, p_.b, rreq)) << len;
        if (st == UCS_INPROGRESS) {
            EXPECT_EQ(UCS_OK, wait_user(mem)) << len;
        }
        EXPECT_TRUE(same_bytes(buf.data(), data.data(), len)) << len;
        EXPECT_EQ('g', buf[len]);
    }
}

TEST_P(ProtoIov, InvalidVectors) {
    char                   b[8] = {};
    uct_tm_proto_request_t req  = 0;
    const uct_tm_proto_iov_t null_buffer[] = {{b, 8}, {nullptr, 4}};
    const uct_tm_proto_iov_t overflow[]    = {{b, SIZE_MAX / 2 + 1}, {b, SIZE_MAX / 2 + 1}};
    std::vector<uct_tm_proto_iov_t> too_many(UCT_TM_PROTO_IOV_MAX + 1, {b, 0});
    struct Case {
        const uct_tm_proto_iov_t *iov;
        size_t                    cnt;
    } const bad[] = {{nullptr, 1}, {null_buffer, 2}, {overflow, 2},
                     {too_many.data(), too_many.size()}};
    uct_tm_proto_info_t info;
    uct_tm_proto_msg_t  msg = 0;
    ASSERT_EQ(UCS_OK, send(b, 8, 0x600));
    ASSERT_TRUE(wait_unexpected(0x600));
    ASSERT_EQ(UCS_OK, uct_tm_proto_probe(p_.b, 0x600, kAll, nullptr,
                                         UCT_TM_PROTO_PROBE_PEEK | UCT_TM_PROTO_PROBE_CLAIM,
                                         &info, &msg));
    for (const Case &c : bad) {
        EXPECT_EQ(UCS_ERR_INVALID_PARAM,
                  uct_tm_proto_sendv(p_.ab, c.iov, c.cnt, 0x600, nullptr, &req)) << c.cnt;
        EXPECT_EQ(UCS_ERR_INVALID_PARAM,
                  uct_tm_proto_recvv(p_.b, c.iov, c.cnt, 0x600, kAll, nullptr, nullptr, &req))
                << c.cnt;
        EXPECT_EQ(UCS_ERR_INVALID_PARAM,
                  uct_tm_proto_recv_claimedv(p_.b, msg, c.iov, c.cnt, nullptr, &req)) << c.cnt;
    }
    /* the other arguments are checked as for the contiguous calls */
    const uct_tm_proto_iov_t two[] = {{b, 4}, {b + 4, 4}};
    EXPECT_EQ(UCS_ERR_INVALID_PARAM, uct_tm_proto_sendv(nullptr, two, 2, 1, nullptr, &req));
    EXPECT_EQ(UCS_ERR_INVALID_PARAM, uct_tm_proto_sendv(p_.ab, two, 2, 1, nullptr, nullptr));
    EXPECT_EQ(UCS_ERR_INVALID_PARAM,
              uct_tm_proto_recvv(nullptr, two, 2, 1, kAll, nullptr, nullptr, &req));
    EXPECT_EQ(UCS_ERR_INVALID_PARAM,
              uct_tm_proto_recvv(p_.b, two, 2, 1, kAll, nullptr, nullptr, nullptr));
    EXPECT_EQ(UCS_ERR_INVALID_PARAM, uct_tm_proto_recv_claimedv(p_.b, 0, two, 2, nullptr, &req));
    /* nothing was posted or sent: the claimed message is still there */
    Elements in(split(8, kUneven));
    ASSERT_EQ(UCS_INPROGRESS,
              uct_tm_proto_recv_claimedv(p_.b, msg, in.iov.data(), in.iov.size(), nullptr, &req));
    ASSERT_EQ(UCS_OK, wait_request(p_, p_.b, req));
    uct_tm_proto_stats_t st;
    uct_tm_proto_worker_stats(p_.a, &st);
    EXPECT_EQ(1u, st.eager_sends + st.rndv_sends);

    /* allowed: no elements (an empty message), the maximum count, empty
     * elements with any buffer */
    std::vector<uct_tm_proto_iov_t> most(UCT_TM_PROTO_IOV_MAX, {nullptr, 0});
    most[3] = {b, 2};
    most[UCT_TM_PROTO_IOV_MAX - 1] = {b + 2, 6};
    uct_tm_proto_request_t r0 = 0, r1 = 0, s = 0;
    ASSERT_EQ(UCS_INPROGRESS, uct_tm_proto_recvv(p_.b, nullptr, 0, 0x601, kAll, nullptr, nullptr,
                                                 &r0));
    ASSERT_EQ(UCS_INPROGRESS, uct_tm_proto_recvv(p_.b, most.data(), most.size(), 0x602, kAll,
                                                 nullptr, nullptr, &r1));
    const ucs_status_t st0 = uct_tm_proto_sendv(p_.ab, nullptr, 0, 0x601, nullptr, &s);
    ASSERT_TRUE((st0 == UCS_OK) || (st0 == UCS_INPROGRESS));
    wait_send((st0 == UCS_INPROGRESS) ? s : 0);
    char src[8] = {1, 2, 3, 4, 5, 6, 7, 8};
    const uct_tm_proto_iov_t out[] = {{nullptr, 0}, {src, 3}, {src + 3, 0}, {src + 3, 5}};
    const ucs_status_t st1 = uct_tm_proto_sendv(p_.ab, out, 4, 0x602, nullptr, &s);
    ASSERT_TRUE((st1 == UCS_OK) || (st1 == UCS_INPROGRESS));
    wait_send((st1 == UCS_INPROGRESS) ? s : 0);
    ASSERT_EQ(UCS_OK, wait_request(p_, p_.b, r0, &info));
    EXPECT_EQ(0u, info.length);
    ASSERT_EQ(UCS_OK, wait_request(p_, p_.b, r1, &info));
    EXPECT_EQ(8u, info.length);
    EXPECT_EQ(0, memcmp(b, src, 8));
}

INSTANTIATE_TEST_SUITE_P(transports, ProtoIov, ::testing::ValuesIn(proto_transports()),
                         transport_name);

}  // namespace
}  // namespace uct_tm_test
