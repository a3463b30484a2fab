/*
 * libFuzzer target: the tm_sm receiver reading FIFO elements whose contents
 * are fuzzer bytes.
 *
 * Per input: a receiver iface (small geometry) and a sender iface connected
 * to it are opened in this process through UCX's API; the input chooses some
 * posted receives, whether the sender first sends real traffic (a rendezvous,
 * a multi-fragment eager message) and whether CMA is used, then a sequence of
 * FIFO elements: header fields and payload bytes, written into the
 * receiver's segment the way any peer process can (tests/uct/sm_raw.h) and
 * published. The receiver progresses. ASan catches memory errors; the
 * accounting of the tag API is checked and traps when broken:
 *  - each posted receive sees "", "consumed", "consumed,completed" or
 *    "consumed,rndv" — consumed first, at most one completion — and nothing
 *    after a forced cancel;
 *  - nothing is written outside the posted buffers (guard regions);
 *  - the sender's rendezvous completion is called at most once.
 */
#include "sm_raw.h"
#include "tag_harness.h"
#include "uct_env.h"

#include <ucs/config/global_opts.h>

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <deque>
#include <memory>

using namespace uct_tm_test;
using namespace uct_tm::sm;

namespace {

/* Reads the input front to back; zeros once exhausted. */
class Input {
  public:
    Input(const uint8_t *data, size_t size) : data_(data), size_(size) {}
    bool     empty() const { return pos_ >= size_; }
    uint8_t  u8() { return (pos_ < size_) ? data_[pos_++] : 0; }
    template <typename T> T get() {
        T value{};
        const size_t n = std::min(sizeof(T), size_ - std::min(pos_, size_));
        memcpy(&value, data_ + pos_, n);
        pos_ += n;
        return value;
    }
    size_t bytes(void *dst, size_t n) {
        n = std::min(n, size_ - std::min(pos_, size_));
        memcpy(dst, data_ + pos_, n);
        pos_ += n;
        return n;
    }

  private:
    const uint8_t *data_;
    size_t         size_;
    size_t         pos_ = 0;
};

[[noreturn]] void fail(const char *what) {
    fprintf(stderr, "fuzz_sm_fifo: %s\n", what);
    fflush(stderr);
    __builtin_trap();
}

UctEnv *env() {
    static UctEnv *e = new UctEnv(); /* lives for the whole run */
    return e;
}

/* A tm_sm iface with its recorders (tests/uct/tag_harness.h). */
struct Iface : Node {
    explicit Iface(const Settings &settings) : Node(*env(), "tm_sm", settings, 16) {
        if (status != UCS_OK) {
            fail("cannot open a tm_sm iface");
        }
    }
    uct_ep_h connect_to(const Iface &to) const {
        uct_ep_h ep;
        if (connect(to.address(), &ep) != UCS_OK) {
            fail("cannot connect");
        }
        return ep;
    }
    std::string iface_address() const { return address().substr(attr.device_addr_len); }
};

void progress(int times) {
    for (int i = 0; i < times; ++i) {
        uct_worker_progress(env()->worker());
    }
}

void check_accounting(const RecvCtx &r, size_t events_at_cancel, bool cancelled) {
    const std::string seq = r.sequence();
    if (!(seq.empty() || (seq == "consumed") || (seq == "consumed,completed") ||
          (seq == "consumed,rndv"))) {
        fprintf(stderr, "fuzz_sm_fifo: receive callbacks [%s]\n", seq.c_str());
        fail("tag context accounting broken");
    }
    if (cancelled && (r.events.size() != events_at_cancel)) {
        fail("callback after a forced cancel");
    }
}

}  // namespace

extern "C" int LLVMFuzzerInitialize(int *, char ***) {
    /* Every drop is logged: keep the output readable (unless asked for). */
    if (getenv("UCX_LOG_LEVEL") == nullptr) {
        ucs_global_opts_set_value("LOG_LEVEL", "fatal");
    }
    env();
    return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    Input          in(data, size);
    const uint8_t  mode   = in.u8();
    const Settings common = {{"FIFO_SIZE", "16"},       {"SPARE_DESCS", "4"},
                             {"SEG_SIZE", "1k"},        {"EAGER_MAX", "4k"},
                             {"MAX_PEERS", "4"},        {"RNDV_SLOTS", "4"},
                             {"STAGING_CHUNKS", "2"},   {"STAGING_CHUNK_SIZE", "4k"},
                             {"NUMA_BIND", "n"},        {"CMA", (mode & 0x80) ? "n" : "y"},
                             {"RECV_MAX_IOV", "3"}};
    Iface          rx(common), tx(common);
    uct_ep_h       ep = tx.connect_to(rx);
    RawSegment     raw;
    if (!raw.attach(rx.iface_address().data())) {
        fail(raw.error().c_str());
    }

    /* Posted receives: tags 0..7, exact or masked, various capacities. */
    std::deque<RecvCtx>     ctxs;
    std::deque<RecvBuffers> bufs;
    const int               nposts = (mode >> 2) & 7;
    for (int i = 0; i < nposts; ++i) {
        const uint8_t   b    = in.u8();
        const uct_tag_t tag  = b & 7;
        const uct_tag_t mask = (b & 8) ? ~uct_tag_t{0} : 0x6;
        ctxs.emplace_back();
        bufs.emplace_back((size_t{in.u8()} << ((b >> 4) & 7)), 1 + ((b >> 7) & 1) * 2);
        uct_iface_tag_recv_zcopy(rx.iface, tag, mask, bufs.back().iov.data(), bufs.back().iov.size(),
                                 &ctxs.back().ctx);
    }

    /* Real traffic first, so that fuzzed elements meet real state. */
    std::vector<char> payload(6000, 'r');
    Completion        rndv_comp;
    void             *rndv_op = nullptr;
    if (mode & 1) {
        uct_iov_t        iov = {payload.data(), 5000, nullptr, 0, 1};
        ucs_status_ptr_t op  = uct_ep_tag_rndv_zcopy(ep, in.u8() & 7, "hdr", 3, &iov, 1, 0,
                                                     &rndv_comp.comp);
        if (!UCS_PTR_IS_ERR(op)) {
            rndv_op = op;
        }
    }
    if (mode & 2) {
        uct_iov_t iov = {payload.data(), 3000, nullptr, 0, 1};
        uct_ep_tag_eager_zcopy(ep, in.u8() & 7, 1, &iov, 1, 0, nullptr);
    }

    /* Fuzzed elements. */
    const uint32_t cap = raw.inline_capacity();
    while (!in.empty()) {
        const uint8_t  kind    = in.u8();
        const uint8_t  flags   = in.u8();
        const uint8_t  sel     = in.u8();
        uint16_t       peer    = (sel & 1) ? in.get<uint16_t>() : static_cast<uint16_t>(sel >> 1 & 3);
        uint32_t       length  = (sel & 8) ? in.get<uint32_t>() : in.u8();
        const uint32_t aux     = (sel & 16) ? in.get<uint32_t>() : in.u8();
        const uint64_t tag     = (sel & 32) ? in.get<uint64_t>() : (in.u8() & 7);
        const uint64_t imm     = (sel & 64) ? in.get<uint64_t>() : 0;
        char           bytes[4096];
        const size_t   nbytes = in.bytes(bytes, std::min<size_t>(in.u8() * 2u, sizeof(bytes)));
        const RawSegment::Fill fill = [&](ElemHeader *e, char *inline_area, char *desc) {
            e->kind   = static_cast<Kind>(kind % (static_cast<unsigned>(Kind::kLast) + 2));
            e->flags  = flags;
            e->peer   = peer;
            e->length = length;
            e->aux    = aux;
            e->tag    = tag;
            e->imm    = imm;
            memcpy(inline_area, bytes, std::min<size_t>(nbytes, cap));
            if (desc != nullptr) {
                memcpy(desc, bytes, std::min<size_t>(nbytes, raw.geometry().seg_size));
            }
        };
        for (int tries = 0; !raw.write(fill); ++tries) {
            if (tries == 1000) {
                fail("the receiver stopped consuming its FIFO");
            }
            progress(1);
        }
        if (mode & 0x40) {
            progress(1);
        }
    }
    progress(64);

    /* Accounting, then cancel what is left and make sure it stays quiet. */
    std::vector<size_t> at_cancel;
    for (RecvCtx &r : ctxs) {
        check_accounting(r, 0, false);
        at_cancel.push_back(r.events.size());
        if (!r.done()) {
            uct_iface_tag_recv_cancel(rx.iface, &r.ctx, 1);
        }
    }
    progress(64);
    for (size_t i = 0; i < ctxs.size(); ++i) {
        check_accounting(ctxs[i], at_cancel[i], true);
    }
    for (const RecvBuffers &b : bufs) {
        for (const GuardedBuffer &p : b.pieces) {
            if (!p.guards_intact()) {
                fail("written beyond a posted buffer");
            }
        }
    }
    if (rndv_comp.calls > 1) {
        fail("rendezvous completion called more than once");
    }
    if ((rndv_op != nullptr) && (rndv_comp.calls == 0)) {
        uct_ep_tag_rndv_cancel(ep, rndv_op);
    }
    rx.unexp.release_held();
    uct_ep_destroy(ep);
    return 0;
}
