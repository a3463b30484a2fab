/*
 * Registered memory (uct_tm_proto_mem_map, UCT_TM_PROTO_OP_MEMH) over each
 * transport: rendezvous sends and split-rendezvous receives inside mapped
 * regions (byte-checked, at offsets), registrations counted (a mapped region
 * is registered once, not per operation), argument and handle checks, and the
 * unmap rules (BUSY while a rendezvous uses the region's registration), and
 * the registration cache for buffers without a region (UCX_TM_PROTO_RCACHE).
 */
#include "proto_fixture.h"

#include <sys/mman.h>

#include <cstdint>
#include <cstdlib>
#include <vector>

namespace uct_tm_test {
namespace {

constexpr uint64_t kAll   = ~uint64_t{0};
constexpr size_t   kRndv  = 300000; /* rendezvous, split (>= 64 KiB) where the transport reads */
constexpr size_t   kSpace = 1 << 20;

ucs_status_t map(uct_tm_proto_worker_h w, void *address, size_t length, uct_tm_proto_mem_h *h) {
    uct_tm_proto_mem_map_params_t p = {};
    p.field_mask = UCT_TM_PROTO_MEM_MAP_FIELD_ADDRESS | UCT_TM_PROTO_MEM_MAP_FIELD_LENGTH;
    p.address    = address;
    p.length     = length;
    return uct_tm_proto_mem_map(w, &p, h);
}

class MemMapTest : public ProtoTest {
  protected:
    /* Sends kRndv bytes from sbuf (in region sh of a, 0: no handle) into
     * rbuf (region rh of b) and checks them and the guard byte after. */
    void transfer_mapped(char *sbuf, uct_tm_proto_mem_h sh, char *rbuf, uct_tm_proto_mem_h rh,
                         uint32_t seed) {
        const auto data = pattern(kRndv, seed);
        memcpy(sbuf, data.data(), kRndv);
        rbuf[kRndv] = 'g';
        uct_tm_proto_op_params_t rp = {};
        rp.flags = rh ? UCT_TM_PROTO_OP_MEMH : 0;
        rp.memh  = rh;
        uct_tm_proto_request_t rreq;
        ASSERT_EQ(UCS_INPROGRESS,
                  uct_tm_proto_recv(p_.b, rbuf, kRndv, 5, kAll, nullptr, &rp, &rreq));
        uct_tm_proto_op_params_t sp = {};
        sp.flags = sh ? UCT_TM_PROTO_OP_MEMH : 0;
        sp.memh  = sh;
        uct_tm_proto_request_t sreq = 0;
        const ucs_status_t     st   = uct_tm_proto_send(p_.ab, sbuf, kRndv, 5, &sp, &sreq);
        ASSERT_TRUE((st == UCS_OK) || (st == UCS_INPROGRESS)) << ucs_status_string(st);
        if (st == UCS_INPROGRESS) {
            ASSERT_EQ(UCS_OK, wait_request(p_, p_.a, sreq));
            uct_tm_proto_request_release(p_.a, sreq);
        }
        uct_tm_proto_info_t info;
        ASSERT_EQ(UCS_OK, wait_request(p_, p_.b, rreq, &info));
        uct_tm_proto_request_release(p_.b, rreq);
        EXPECT_EQ(info.length, kRndv);
        EXPECT_TRUE(same_bytes(rbuf, data.data(), kRndv));
        EXPECT_EQ(rbuf[kRndv], 'g');
    }
};

/* A mapped region is registered once (at map); rendezvous sends and receives
 * at offsets inside it register nothing more, while the same transfers
 * without handles register per operation where the transport reads. */
TEST_P(MemMapTest, RendezvousInMappedRegions) {
    std::vector<char> sspace(kSpace), rspace(kSpace);
    uct_tm_proto_mem_h sh = 0, rh = 0;
    ASSERT_EQ(UCS_OK, map(p_.a, sspace.data(), kSpace, &sh));
    ASSERT_EQ(UCS_OK, map(p_.b, rspace.data(), kSpace, &rh));
    ASSERT_NE(sh, 0u);
    const uint64_t a0 = stats_of(p_.a).registrations, b0 = stats_of(p_.b).registrations;
    for (uint32_t i = 0; i < 5; ++i) {
        const size_t off = 4096 * i + 8 * i; /* unaligned offsets too */
        ASSERT_NO_FATAL_FAILURE(
                transfer_mapped(&sspace[off], sh, &rspace[kSpace - kRndv - 1 - off], rh, i));
    }
    EXPECT_EQ(stats_of(p_.a).registrations, a0);
    EXPECT_EQ(stats_of(p_.b).registrations, b0);
    if (GetParam() == "tm_sm") {
        EXPECT_NE(a0, 0u) << "tm_sm reads by CMA: its MD registers";
    }
    EXPECT_EQ(UCS_OK, uct_tm_proto_mem_unmap(p_.a, sh));
    EXPECT_EQ(UCS_OK, uct_tm_proto_mem_unmap(p_.b, rh));
}

TEST_P(MemMapTest, Validation) {
    std::vector<char>  space(kSpace);
    uct_tm_proto_mem_h h  = 0;
    uct_tm_proto_mem_map_params_t p = {};
    p.field_mask = UCT_TM_PROTO_MEM_MAP_FIELD_ADDRESS | UCT_TM_PROTO_MEM_MAP_FIELD_LENGTH;
    p.address    = space.data();
    p.length     = kSpace;
    EXPECT_EQ(UCS_ERR_INVALID_PARAM, uct_tm_proto_mem_map(nullptr, &p, &h));
    EXPECT_EQ(UCS_ERR_INVALID_PARAM, uct_tm_proto_mem_map(p_.a, nullptr, &h));
    EXPECT_EQ(UCS_ERR_INVALID_PARAM, uct_tm_proto_mem_map(p_.a, &p, nullptr));
    p.field_mask = UCT_TM_PROTO_MEM_MAP_FIELD_ADDRESS; /* no length */
    EXPECT_EQ(UCS_ERR_INVALID_PARAM, uct_tm_proto_mem_map(p_.a, &p, &h));
    EXPECT_EQ(UCS_ERR_INVALID_PARAM, map(p_.a, nullptr, kSpace, &h));
    EXPECT_EQ(UCS_ERR_INVALID_PARAM, map(p_.a, space.data(), 0, &h));
    EXPECT_EQ(UCS_ERR_INVALID_PARAM,
              map(p_.a, reinterpret_cast<void *>(UINTPTR_MAX - 100), 4096, &h)); /* wraps */
    EXPECT_EQ(h, 0u);

    ASSERT_EQ(UCS_OK, map(p_.a, space.data(), kSpace, &h));
    EXPECT_EQ(UCS_ERR_INVALID_PARAM, uct_tm_proto_mem_unmap(p_.a, 0));
    EXPECT_EQ(UCS_ERR_INVALID_PARAM, uct_tm_proto_mem_unmap(p_.a, h ^ (uint64_t{1} << 40)));
    EXPECT_EQ(UCS_ERR_INVALID_PARAM, uct_tm_proto_mem_unmap(p_.a, h + 1));
    EXPECT_EQ(UCS_ERR_INVALID_PARAM, uct_tm_proto_mem_unmap(p_.b, h)); /* another worker's */
    EXPECT_EQ(UCS_ERR_INVALID_PARAM, uct_tm_proto_mem_unmap(nullptr, h));

    /* operations: the buffer must lie inside the named region */
    uct_tm_proto_op_params_t op = {};
    op.flags = UCT_TM_PROTO_OP_MEMH;
    op.memh  = h;
    uct_tm_proto_request_t req;
    std::vector<char>      outside(kRndv);
    EXPECT_EQ(UCS_ERR_INVALID_PARAM, uct_tm_proto_send(p_.ab, outside.data(), kRndv, 1, &op, &req));
    EXPECT_EQ(UCS_ERR_INVALID_PARAM, /* runs past the end */
              uct_tm_proto_send(p_.ab, &space[kSpace - 10], 11, 1, &op, &req));
    EXPECT_EQ(UCS_ERR_INVALID_PARAM, /* starts before */
              uct_tm_proto_send(p_.ab, space.data() - 1, 8, 1, &op, &req));
    EXPECT_EQ(UCS_ERR_INVALID_PARAM, /* b holds no such region */
              uct_tm_proto_recv(p_.b, space.data(), 8, 1, kAll, nullptr, &op, &req));
    op.memh = h ^ (uint64_t{1} << 40); /* forged */
    EXPECT_EQ(UCS_ERR_INVALID_PARAM, uct_tm_proto_send(p_.ab, space.data(), 8, 1, &op, &req));
    op.memh = h;
    /* up to the region's last byte: accepted (eager: no registration used) */
    for (int i = 0; i < 2; ++i) {
        uct_tm_proto_request_t r8 = 0;
        const ucs_status_t st = uct_tm_proto_send(p_.ab, &space[kSpace - 8], 8, 1, &op, &r8);
        ASSERT_TRUE((st == UCS_OK) || (st == UCS_INPROGRESS)) << ucs_status_string(st);
        if (st == UCS_INPROGRESS) {
            ASSERT_EQ(UCS_OK, wait_request(p_, p_.a, r8));
            uct_tm_proto_request_release(p_.a, r8);
        }
    }

    EXPECT_EQ(UCS_OK, uct_tm_proto_mem_unmap(p_.a, h));
    EXPECT_EQ(UCS_ERR_INVALID_PARAM, uct_tm_proto_mem_unmap(p_.a, h)); /* stale */
    EXPECT_EQ(UCS_ERR_INVALID_PARAM, uct_tm_proto_send(p_.ab, space.data(), 8, 1, &op, &req));
    /* drain the two eager messages */
    for (int i = 0; i < 2; ++i) {
        uint64_t x;
        ASSERT_EQ(UCS_OK, wait_request(p_, p_.b, post(&x, sizeof(x), 1, kAll)));
    }
}

/* Unmap is refused (BUSY, nothing done) while a rendezvous holds the
 * region's registration, and succeeds once it completed. A receive posted
 * with a handle that is unmapped before its message arrives registers on its
 * own and still gets the data. */
TEST_P(MemMapTest, UnmapRules) {
    std::vector<char>  sspace(kSpace), rspace(kSpace);
    uct_tm_proto_mem_h sh = 0, rh = 0;
    ASSERT_EQ(UCS_OK, map(p_.a, sspace.data(), kSpace, &sh));
    ASSERT_EQ(UCS_OK, map(p_.b, rspace.data(), kSpace, &rh));
    const bool registers = stats_of(p_.a).registrations != 0;

    const auto data = pattern(kRndv, 3);
    memcpy(sspace.data(), data.data(), kRndv);
    uct_tm_proto_op_params_t sp = {};
    sp.flags = UCT_TM_PROTO_OP_MEMH;
    sp.memh  = sh;
    uct_tm_proto_request_t sreq = 0;
    ASSERT_EQ(UCS_INPROGRESS, uct_tm_proto_send(p_.ab, sspace.data(), kRndv, 9, &sp, &sreq));
    /* the RTS is out with the region's rkey: the receiver may read any time */
    EXPECT_EQ(registers ? UCS_ERR_BUSY : UCS_OK, uct_tm_proto_mem_unmap(p_.a, sh));

    /* the receive's region goes away before the message is matched */
    uct_tm_proto_op_params_t rp = {};
    rp.flags = UCT_TM_PROTO_OP_MEMH;
    rp.memh  = rh;
    ASSERT_EQ(UCS_OK, uct_tm_proto_mem_unmap(p_.b, rh));
    EXPECT_EQ(UCS_ERR_INVALID_PARAM, /* stale handle at post */
              uct_tm_proto_recv(p_.b, rspace.data(), kRndv, 9, kAll, nullptr, &rp, nullptr));
    ASSERT_EQ(UCS_OK, map(p_.b, rspace.data(), kSpace, &rh));
    rp.memh = rh;
    uct_tm_proto_request_t rreq;
    ASSERT_EQ(UCS_INPROGRESS,
              uct_tm_proto_recv(p_.b, rspace.data(), kRndv, 9, kAll, nullptr, &rp, &rreq));
    ASSERT_EQ(UCS_OK, uct_tm_proto_mem_unmap(p_.b, rh)); /* posted, not matched: not in use */
    ASSERT_EQ(UCS_OK, wait_request(p_, p_.a, sreq));
    uct_tm_proto_request_release(p_.a, sreq);
    ASSERT_EQ(UCS_OK, wait_request(p_, p_.b, rreq));
    uct_tm_proto_request_release(p_.b, rreq);
    EXPECT_TRUE(same_bytes(rspace.data(), data.data(), kRndv));
    if (registers) {
        EXPECT_EQ(UCS_OK, uct_tm_proto_mem_unmap(p_.a, sh)); /* done: no longer in use */
    }
    EXPECT_EQ(UCS_ERR_INVALID_PARAM, uct_tm_proto_mem_unmap(p_.a, sh));
    /* a region left mapped is unmapped by the worker's destruction (TearDown) */
    ASSERT_EQ(UCS_OK, map(p_.a, sspace.data(), kSpace, &sh));
}

/* Without handles the registration cache registers a buffer once: five
 * rendezvous from (and into) the same buffers make one registration on each
 * side where the MD registers (tm_sm), the rest are cache hits. */
TEST_P(MemMapTest, CacheRegistersOnce) {
    std::vector<char> sbuf(kRndv + 1), rbuf(kRndv + 1);
    for (uint32_t i = 0; i < 5; ++i) {
        ASSERT_NO_FATAL_FAILURE(transfer_mapped(sbuf.data(), 0, rbuf.data(), 0, 20 + i));
    }
    if (stats_of(p_.a).registrations == 0) {
        EXPECT_EQ(stats_of(p_.a).rcache_hits, 0u) << "nothing to register, nothing cached";
        return;
    }
    EXPECT_EQ(stats_of(p_.a).registrations, 1u);
    EXPECT_EQ(stats_of(p_.a).rcache_hits, 4u);
    if (GetParam() == "tm_sm") { /* split: the receiver registers its front */
        EXPECT_EQ(stats_of(p_.b).registrations, 1u);
        EXPECT_EQ(stats_of(p_.b).rcache_hits, 4u);
    }
}

/* UCX_TM_PROTO_RCACHE=n: a registration per rendezvous, no hits. */
TEST_P(MemMapTest, CacheOffRegistersPerOperation) {
    setenv("UCX_TM_PROTO_RCACHE", "n", 1);
    uct_tm_proto_worker_params_t none = {};
    reopen(none);
    unsetenv("UCX_TM_PROTO_RCACHE");
    std::vector<char> sbuf(kRndv + 1), rbuf(kRndv + 1);
    for (uint32_t i = 0; i < 5; ++i) {
        ASSERT_NO_FATAL_FAILURE(transfer_mapped(sbuf.data(), 0, rbuf.data(), 0, 30 + i));
    }
    EXPECT_EQ(stats_of(p_.a).rcache_hits, 0u);
    EXPECT_EQ(stats_of(p_.b).rcache_hits, 0u);
    if (GetParam() == "tm_sm") {
        EXPECT_EQ(stats_of(p_.a).registrations, 5u);
        EXPECT_EQ(stats_of(p_.b).registrations, 5u);
    }
}

/* Memory unmapped and mapped again at the same address is registered anew
 * (the cache drops it on UCX's unmap event), and its new bytes arrive. */
TEST_P(MemMapTest, CacheForgetsUnmappedMemory) {
    const size_t len  = (kRndv + 1 + 4095) & ~size_t{4095};
    void        *mem  = mmap(nullptr, len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS,
                             -1, 0);
    ASSERT_NE(mem, MAP_FAILED);
    std::vector<char> rbuf(kRndv + 1);
    ASSERT_NO_FATAL_FAILURE(transfer_mapped(static_cast<char *>(mem), 0, rbuf.data(), 0, 40));
    const uint64_t r1 = stats_of(p_.a).registrations;
    ASSERT_EQ(0, munmap(mem, len));
    void *again = mmap(mem, len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED,
                       -1, 0);
    ASSERT_EQ(again, mem);
    ASSERT_NO_FATAL_FAILURE(transfer_mapped(static_cast<char *>(mem), 0, rbuf.data(), 0, 41));
    if (r1 != 0) {
        EXPECT_EQ(stats_of(p_.a).registrations, r1 + 1) << "the new mapping registered, not a stale hit";
    }
    munmap(mem, len);
}

/* A worker destroyed while a rendezvous send holds a cached registration
 * lets go of it first (the cache is destroyed with nothing in use). */
TEST_P(MemMapTest, DestroyWhileCachedRegistrationHeld) {
    std::vector<char>      sbuf(kRndv);
    uct_tm_proto_request_t sreq = 0;
    ASSERT_EQ(UCS_INPROGRESS, uct_tm_proto_send(p_.ab, sbuf.data(), kRndv, 3, nullptr, &sreq));
    destroy_pair(&p_); /* TearDown's destroy_pair then finds nothing */
}

INSTANTIATE_TEST_SUITE_P(transports, MemMapTest, ::testing::ValuesIn(proto_transports()),
                         transport_name);

}  // namespace
}  // namespace uct_tm_test
