/*
 * libFuzzer target: rkey buffers of MD "tm" as a peer may send them.
 *
 * Per input: a packed key, either the fuzzer's bytes as they are or the
 * genuine key of a shared-memory segment this process allocated through the
 * MD with the fuzzer's bytes XORed over it (so that mutations start from a
 * key that maps). uct_rkey_unpack must refuse it or produce a key whose
 * ranges hold: its address range does not wrap, its segment range lies inside
 * the segment it names. rkey_ptr is then asked for addresses the input
 * chooses; whatever it returns for an address inside the key's range must be
 * readable at both ends of the range (ASan and the kernel catch the rest),
 * and it must refuse addresses outside the range.
 */
#include "uct_env.h"

#include "base/range.h"
#include "sm/sm_rkey.h"

#include <ucs/config/global_opts.h>

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>

using namespace uct_tm_test;

namespace {

[[noreturn]] void fail(const char *what) {
    fprintf(stderr, "fuzz_rkey: %s\n", what);
    abort();
}

struct Env {
    UctEnv                 uct;
    uct_allocated_memory_t mem = {};
    uct_tm::sm::PackedRkey genuine{};

    Env() {
        const uct_alloc_method_t method = UCT_ALLOC_METHOD_MD;
        uct_md_h                 mds[]  = {uct.md()};
        uct_mem_alloc_params_t   params = {};
        params.field_mask = UCT_MEM_ALLOC_PARAM_FIELD_MDS | UCT_MEM_ALLOC_PARAM_FIELD_MEM_TYPE;
        params.mds.mds    = mds;
        params.mds.count  = 1;
        params.mem_type   = UCS_MEMORY_TYPE_HOST;
        if ((uct_mem_alloc(16384, &method, 1, &params, &mem) != UCS_OK) ||
            (uct_md_mkey_pack(uct.md(), mem.memh, &genuine) != UCS_OK)) {
            fail("cannot allocate and pack a genuine segment key");
        }
        memset(mem.address, 0x5a, mem.length);
    }
};

Env &env() {
    static Env *e = new Env; /* lives as long as the process */
    return *e;
}

}  // namespace

extern "C" int LLVMFuzzerInitialize(int *, char ***) {
    if (getenv("UCX_LOG_LEVEL") == nullptr) {
        ucs_global_opts_set_value("LOG_LEVEL", "fatal"); /* every refusal is logged */
    }
    env();
    return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    if (size < 1) {
        return 0;
    }
    const bool             mutate = data[0] & 1;
    uct_tm::sm::PackedRkey packed{};
    if (mutate) {
        packed = env().genuine;
    }
    auto *bytes = reinterpret_cast<uint8_t *>(&packed);
    for (size_t i = 0; (i < sizeof(packed)) && (1 + i < size); ++i) {
        bytes[i] ^= data[1 + i];
    }
    uct_rkey_bundle_t bundle;
    if (uct_rkey_unpack(env().uct.component(), &packed, &bundle) != UCS_OK) {
        return 0;
    }
    const uct_tm::sm::RemoteKey *key = uct_tm::sm::remote_key(bundle.rkey);
    if (!uct_tm::range_within(key->address, key->length, UINT64_MAX)) {
        fail("unpacked a key whose range wraps the address space");
    }
    if (key->has_shm && !uct_tm::range_within(key->shm_offset, key->length, key->shm.size)) {
        fail("unpacked a key whose range lies outside its segment");
    }
    /* Addresses to ask rkey_ptr for: the range's ends and one the input picks. */
    uint64_t pick = 0;
    const size_t tail = 1 + sizeof(packed);
    if (size > tail) {
        memcpy(&pick, data + tail, std::min(sizeof(pick), size - tail));
    }
    const uint64_t asks[] = {key->address, key->address + key->length - 1, key->address + pick};
    for (uint64_t raddr : asks) {
        void        *local  = nullptr;
        const bool   inside = (key->length > 0) && uct_tm::range_inside(raddr, 1, key->address, key->length);
        const ucs_status_t status = uct_rkey_ptr(env().uct.component(), &bundle, raddr, &local);
        if (status != UCS_OK) {
            continue;
        }
        if (!inside) {
            fail("rkey_ptr answered an address outside the key's range");
        }
        /* The mapping must hold the key's whole range around this address. */
        const volatile uint8_t *p     = static_cast<uint8_t *>(local);
        const uint64_t          below = raddr - key->address;
        const uint64_t          above = key->address + key->length - 1 - raddr;
        (void)p[0];
        (void)*(p - below);
        (void)*(p + above);
    }
    uct_rkey_release(env().uct.component(), &bundle);
    return 0;
}
